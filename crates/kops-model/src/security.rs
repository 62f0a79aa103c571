//! The security model's ports, access lists and group names, which the
//! builders of each cloud (`kops_aws::model::security`,
//! `kops_gce::model::firewall`) share.

use kops_api::Role;

use crate::{Model, ModelError};

/// etcd's client and peer ports for the `main` and `events` clusters:
/// nodes must never reach them on a control-plane instance.
pub const ETCD_PORTS: [i32; 4] = [2380, 2381, 4001, 4002];
/// The leases etcd cluster's client and peer ports (when it exists).
pub const ETCD_LEASES_PORTS: [i32; 2] = [4004, 2383];
/// The Cilium etcd cluster's peer port (Cilium with `etcdManaged`).
pub const ETCD_CILIUM_PEER_PORT: i32 = 2382;
/// kops-controller, reached through the API load balancer when DNS is `None`.
pub const KOPS_CONTROLLER_PORT: i32 = 3988;
/// The Cilium etcd cluster's client port.
pub const ETCD_CILIUM_CLIENT_PORT: i32 = 4003;
/// The default `serviceNodePortRange`.
pub const DEFAULT_NODE_PORT_RANGE: (i32, i32) = (30000, 32767);

/// The ports on which kops revokes what it does not want (kops' "removal
/// rules"): SSH and HTTPS everywhere it serves them; on the control plane
/// also etcd, kops-controller, VXLAN, BGP, the secondary API port, ICMP and
/// anything without ports (all traffic, ICMPv6). `(-1, -1)` stands for a
/// permission without ports.
pub fn watched_ports(model: &Model<'_>, group: &str) -> Vec<(i32, i32)> {
    let one = |p: i32| (p, p);
    if group == group_name(model, Role::ControlPlane) {
        let mut ports = vec![
            one(22),
            one(443),
            one(2380),
            one(2381),
            one(KOPS_CONTROLLER_PORT),
            one(4001),
            one(4002),
            one(4789),
            one(179),
            one(8443),
            (3, 4),
            (-1, -1),
        ];
        if model
            .cluster
            .spec
            .etcd_clusters
            .iter()
            .flatten()
            .any(|c| c.name == "leases")
        {
            ports.extend(ETCD_LEASES_PORTS.map(one));
        }
        ports
    } else if group == group_name(model, Role::Bastion) {
        vec![one(22), (3, 4), (-1, -1)]
    } else if group == elb_group_name(model, "api") {
        let ssl = model
            .cluster
            .spec
            .api
            .as_ref()
            .and_then(|a| a.load_balancer.as_ref())
            .and_then(|l| l.ssl_certificate.as_deref())
            .is_some_and(|c| !c.is_empty());
        if ssl {
            vec![one(443), one(8443)]
        } else {
            vec![one(443)]
        }
    } else {
        // nodes, bastion-elb
        vec![one(22)]
    }
}

/// The name of the group of the instances of a role.
pub fn group_name(model: &Model<'_>, role: Role) -> String {
    match role {
        Role::ControlPlane | Role::ApiServer => model.scoped("masters"),
        Role::Node => model.scoped("nodes"),
        Role::Bastion => model.scoped("bastion"),
    }
}

/// The name of a load balancer's group: `api-elb.<cluster>`, `bastion-elb.<cluster>`.
pub fn elb_group_name(model: &Model<'_>, prefix: &str) -> String {
    model.scoped(&format!("{prefix}-elb"))
}

pub fn has_masters(model: &Model<'_>) -> bool {
    model.has_role(Role::ControlPlane) || model.has_role(Role::ApiServer)
}

/// Whether the API is behind a load balancer (`spec.api.loadBalancer`).
pub fn uses_api_load_balancer(model: &Model<'_>) -> bool {
    model
        .cluster
        .spec
        .api
        .as_ref()
        .is_some_and(|api| api.load_balancer.is_some())
}

pub fn cilium_etcd_managed(model: &Model<'_>) -> bool {
    model
        .cluster
        .spec
        .networking
        .as_ref()
        .and_then(|n| n.cilium.as_ref())
        .is_some_and(|c| c.etcd_managed == Some(true))
}

/// `spec.kubernetesApiAccess` (or `spec.api.access`).
pub fn api_access(model: &Model<'_>) -> Vec<String> {
    let spec = &model.cluster.spec;
    spec.kubernetes_api_access
        .clone()
        .or_else(|| spec.api.as_ref().and_then(|a| a.access.clone()))
        .unwrap_or_default()
}

pub fn ssh_access(model: &Model<'_>) -> Vec<String> {
    model.cluster.spec.ssh_access.clone().unwrap_or_default()
}

/// One security group of a role's instances: the cluster's own
/// (`masters.<cluster>`...), or an existing one an instance group names
/// with `securityGroupOverride`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleGroup {
    /// The task name, and how rule names call the group:
    /// `masters.<cluster>`, or `<id>-<Role>` (`sg-0123-ControlPlane`) for
    /// an override.
    pub name: String,
    /// The override's id; `None` for the cluster's own group.
    pub shared_id: Option<String>,
}

impl RoleGroup {
    /// What kops appends to its fixed rule names (`https-elb-to-master`)
    /// for this group: `-<id>` for an override, nothing for the cluster's.
    pub fn suffix(&self) -> String {
        self.shared_id
            .as_ref()
            .map(|id| format!("-{id}"))
            .unwrap_or_default()
    }
}

/// kops' name of a role in the names of override groups.
pub fn role_label(role: Role) -> &'static str {
    match role {
        Role::ControlPlane => "ControlPlane",
        Role::ApiServer => "APIServer",
        Role::Node => "Node",
        Role::Bastion => "Bastion",
    }
}

/// The groups of a role's instances, as kops lists them: each distinct
/// `securityGroupOverride` of the role's instance groups, then the
/// cluster's own group when some instance group of the role has no
/// override (API servers always use the control plane's own group).
pub fn role_groups(model: &Model<'_>, role: Role) -> Vec<RoleGroup> {
    let mut out: Vec<RoleGroup> = Vec::new();
    let mut uses_own = role == Role::ControlPlane && model.has_role(Role::ApiServer);
    for group in model.groups_with(role) {
        match group
            .spec
            .security_group_override
            .as_deref()
            .filter(|id| !id.is_empty())
        {
            Some(id) => {
                if !out.iter().any(|g| g.shared_id.as_deref() == Some(id)) {
                    out.push(RoleGroup {
                        name: format!("{id}-{}", role_label(role)),
                        shared_id: Some(id.to_string()),
                    });
                }
            }
            None => uses_own = true,
        }
    }
    if uses_own {
        out.push(RoleGroup {
            name: group_name(model, role),
            shared_id: None,
        });
    }
    out
}

/// The API load balancer's `securityGroupOverride`, when set.
pub fn api_elb_override(model: &Model<'_>) -> Option<String> {
    model
        .cluster
        .spec
        .api
        .as_ref()
        .and_then(|a| a.load_balancer.as_ref())
        .and_then(|lb| lb.security_group_override.clone())
        .filter(|id| !id.is_empty())
}

/// The TCP port ranges nodes may reach on control-plane instances: all of
/// 1-65535 minus etcd's ports.
pub fn node_to_master_tcp_ranges(model: &Model<'_>) -> Vec<(i32, i32)> {
    let mut blocked: Vec<i32> = ETCD_PORTS.to_vec();
    let has_leases = model
        .cluster
        .spec
        .etcd_clusters
        .iter()
        .flatten()
        .any(|c| c.name == "leases");
    if has_leases {
        blocked.extend(ETCD_LEASES_PORTS);
    }
    if cilium_etcd_managed(model) {
        blocked.push(ETCD_CILIUM_PEER_PORT);
    }
    blocked.sort_unstable();
    blocked.dedup();
    let mut ranges = Vec::new();
    let mut start = 1;
    for port in blocked {
        if port > start {
            ranges.push((start, port - 1));
        }
        start = port + 1;
    }
    if start <= 65535 {
        ranges.push((start, 65535));
    }
    ranges
}

/// `spec.kubeAPIServer.serviceNodePortRange` as (first, last).
pub fn node_port_range(model: &Model<'_>) -> Result<(i32, i32), ModelError> {
    let Some(range) = model
        .cluster
        .spec
        .kube_api_server
        .as_ref()
        .and_then(|k| k.service_node_port_range.as_deref())
    else {
        return Ok(DEFAULT_NODE_PORT_RANGE);
    };
    let parsed = range.split_once('-').and_then(|(a, b)| {
        let (a, b) = (a.trim().parse::<i32>().ok()?, b.trim().parse::<i32>().ok()?);
        (a <= b).then_some((a, b))
    });
    parsed.ok_or_else(|| ModelError::Spec {
        path: "spec.kubeAPIServer.serviceNodePortRange".into(),
        message: format!("`{range}` is not a port range"),
        hint: "write it as `FIRST-LAST`, e.g. `30000-32767`".into(),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    pub(crate) use crate::test_support::{load, model, PUBLIC};
    pub(crate) use kops_testkit::update_cluster_case as conformance_case;
}
