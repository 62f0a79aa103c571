//! `toolbox dump`: the cluster's cloud resources and instances, in the
//! shape kops prints on every cloud.

/// One entry of the dump's `resources`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpedResource {
    pub id: String,
    /// kops' type name (`instance`, `subnet`, `vpc`, `load-balancer`, ...).
    pub kind: &'static str,
    /// The reduced `raw` object, in order; values are strings.
    pub raw: Vec<(&'static str, String)>,
}

/// One running (or stopped) instance of the cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DumpedInstance {
    /// The instance id (kops' `name`).
    pub name: String,
    pub public_addresses: Vec<String>,
    /// Only when the instance has no public address (as kops).
    pub private_addresses: Vec<String>,
    pub roles: Vec<String>,
    pub ssh_user: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpedLoadBalancer {
    pub name: String,
    pub dns_name: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpedSubnet {
    pub id: String,
    pub zone: Option<String>,
}

/// The whole dump; instances sorted by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dump {
    pub resources: Vec<DumpedResource>,
    pub instances: Vec<DumpedInstance>,
    pub load_balancers: Vec<DumpedLoadBalancer>,
    pub subnets: Vec<DumpedSubnet>,
    pub vpc: Option<String>,
}
