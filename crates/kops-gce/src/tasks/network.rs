//! Networking: the VPC network, its subnetworks, the NAT router and the
//! firewall rules.

use std::collections::BTreeMap;

use kops_engine::TaskKey;

/// A VPC network in custom mode (`auto_create_subnetworks = false`), or
/// an existing one (`spec.networkID`), used as it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Network {
    pub name: String,
    /// The project of a shared network given as `project/name`.
    pub project: Option<String>,
    pub shared: bool,
}

impl Network {
    pub const KIND: &'static str = "Network";

    pub fn key_of(name: &str) -> TaskKey {
        TaskKey::new(Self::KIND, name)
    }

    pub(crate) fn dependencies(&self) -> Vec<TaskKey> {
        Vec::new()
    }
}

/// A regional subnetwork, or an existing one (`subnets[].id`).
#[derive(Debug, Clone, PartialEq)]
pub struct Subnet {
    pub name: String,
    pub network: TaskKey,
    pub region: String,
    pub cidr: Option<String>,
    pub stack_type: String,
    /// `EXTERNAL` for a dual-stack subnetwork.
    pub ipv6_access_type: Option<String>,
    /// Secondary ranges for IP aliases, by range name.
    pub secondary_ranges: BTreeMap<String, String>,
    pub shared: bool,
}

impl Subnet {
    pub const KIND: &'static str = "Subnet";

    pub fn key_of(name: &str) -> TaskKey {
        TaskKey::new(Self::KIND, name)
    }

    pub(crate) fn dependencies(&self) -> Vec<TaskKey> {
        vec![self.network.clone()]
    }
}

/// A Cloud Router with its Cloud NAT, for private subnetworks' egress.
#[derive(Debug, Clone, PartialEq)]
pub struct Router {
    pub name: String,
    pub network: TaskKey,
    pub region: String,
    /// `AUTO_ONLY`.
    pub nat_ip_allocate_option: String,
    /// `LIST_OF_SUBNETWORKS`.
    pub source_subnetwork_ip_ranges_to_nat: String,
    pub subnetworks: Vec<TaskKey>,
}

impl Router {
    pub const KIND: &'static str = "Router";

    pub(crate) fn dependencies(&self) -> Vec<TaskKey> {
        let mut deps = vec![self.network.clone()];
        deps.extend(self.subnetworks.iter().cloned());
        deps
    }
}

/// Which addresses a firewall rule is about: kops makes an IPv6 twin of
/// each rule with source ranges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Ipv4,
    Ipv6,
}

/// A firewall rule: what may reach instances with the target tags.
#[derive(Debug, Clone, PartialEq)]
pub struct FirewallRule {
    pub name: String,
    pub network: TaskKey,
    pub family: Family,
    /// `tcp`, `tcp:443`, `udp:30000-32767`, `icmp`, `58` (ICMPv6).
    pub allowed: Vec<String>,
    pub source_ranges: Vec<String>,
    pub source_tags: Vec<String>,
    pub target_tags: Vec<String>,
    /// A rule without sources is kept, disabled, so it can be found.
    pub disabled: bool,
}

impl FirewallRule {
    pub const KIND: &'static str = "FirewallRule";

    pub(crate) fn dependencies(&self) -> Vec<TaskKey> {
        vec![self.network.clone()]
    }
}
