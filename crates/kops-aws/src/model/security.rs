//! Security groups and their rules, per role, as kops makes them:
//!
//! - `masters.<cluster>` and `nodes.<cluster>`: all egress (IPv4 and IPv6);
//!   masters reach masters and nodes on everything; nodes reach nodes on
//!   everything, and masters on UDP and on TCP *except etcd's ports* (client
//!   4001/4002 and peer 2380/2381, plus the leases and Cilium etcd ports when
//!   those clusters exist), which is why node-to-master TCP is split into
//!   ranges (`1-2379`, `2382-4000`, `4003-65535` by default).
//! - SSH from `spec.sshAccess` straight to masters and nodes, unless there
//!   is a bastion: then only the bastion reaches them, and only on port 22.
//! - HTTPS from `spec.kubernetesApiAccess` to the masters, or to the API load
//!   balancer's group (`api-elb.<cluster>`) when there is one, which then
//!   forwards to the masters.
//! - `bastion.<cluster>` and `bastion-elb.<cluster>` when there is a bastion
//!   instance group; `spec.nodePortAccess` opens the node-port range on nodes.
//!
//! Rule names are kops' (`from-<source>-<direction>-<protocol>-<from>to<to>-<destination>`
//! for most, fixed names like `https-elb-to-master` for the rest), so a
//! cluster kops made is recognised. Per group, a
//! [`SecurityGroupCleanup`] revokes permissions on kops' watched ports that
//! the spec no longer asks for (an `sshAccess` CIDR taken out), after the
//! wanted rules are in place. Every rule kops puts on its groups is built
//! here (kops' firewall, external-access, bastion and API load balancer
//! rules), so the cleanup knows them all; a rule added to these groups by
//! another builder must be added here instead.
//!
//! `securityGroupOverride` (on instance groups, and on the API load
//! balancer) names an existing group to use instead of kops' own: kops then
//! makes no group for it (the role's own group is still made when another
//! instance group of the role has no override), puts the same rules on it,
//! named after it (`<id>-ControlPlane`, `<id>-Node` in directional names;
//! `-<id>` appended to fixed names such as `https-elb-to-master-<id>`), and
//! never cleans it up or deletes it. The API load balancer's override keeps
//! the name `api-elb.<cluster>` in rule names.

use crate::tasks::security_group::SecurityGroup;
use crate::tasks::security_group_cleanup::SecurityGroupCleanup;
use crate::tasks::security_group_rule::{RuleTarget, SecurityGroupRule};
use crate::tasks::shared_security_group::SharedSecurityGroup;
use crate::tasks::vpc::Vpc;
use crate::AwsContext;
use kops_api::{Role, SubnetType};
use kops_engine::TaskGraph;

pub use kops_model::security::*;
use kops_model::{Model, ModelError};

/// Adds the security groups, their rules, and per group the revocation of
/// what kops no longer wants on its watched ports.
pub fn build(model: &Model<'_>, graph: &mut TaskGraph<AwsContext>) -> Result<(), ModelError> {
    let rules = rules(model)?;
    for group in groups(model) {
        let keep: Vec<SecurityGroupRule> = rules
            .iter()
            .filter(|r| r.group.key().name == group.name)
            .cloned()
            .collect();
        graph.ensure(SecurityGroupCleanup {
            name: group.name.clone(),
            group: SecurityGroup::id_ref(&group.name),
            ports: watched_ports(model, &group.name),
            keep: dedup(keep),
        })?;
        graph.ensure(group)?;
    }
    // Existing groups named by the spec get the cluster's rules but no
    // cleanup: what else is on them is their owner's.
    for group in shared_groups(model) {
        graph.ensure(group)?;
    }
    for rule in rules {
        // Two sources can ask for the same rule (a utility subnet's CIDR also
        // in sshAccess): equal tasks are one.
        graph.ensure(rule)?;
    }
    Ok(())
}

fn dedup(mut rules: Vec<SecurityGroupRule>) -> Vec<SecurityGroupRule> {
    let mut seen = std::collections::BTreeSet::new();
    rules.retain(|r| seen.insert(r.name.clone()));
    rules
}

/// The groups the cluster makes (those of roles, load balancers and
/// bastions that no `securityGroupOverride` replaces).
pub fn groups(model: &Model<'_>) -> Vec<SecurityGroup> {
    let group = |name: String, description: &str| SecurityGroup {
        tags: model.tags(&name, &[]),
        name,
        description: description.to_string(),
        vpc: Vpc::id_ref(model.name()),
    };
    let own = |role: Role| {
        role_groups(model, role)
            .into_iter()
            .any(|g| g.shared_id.is_none())
    };
    let mut out = Vec::new();
    if has_masters(model) && own(Role::ControlPlane) {
        out.push(group(
            group_name(model, Role::ControlPlane),
            "Security group for masters",
        ));
    }
    if own(Role::Node) {
        out.push(group(
            group_name(model, Role::Node),
            "Security group for nodes",
        ));
    }
    if model.has_role(Role::Bastion) {
        if own(Role::Bastion) {
            out.push(group(
                group_name(model, Role::Bastion),
                "Security group for bastion",
            ));
        }
        out.push(group(
            elb_group_name(model, "bastion"),
            "Security group for bastion ELB",
        ));
    }
    if uses_api_load_balancer(model) && api_elb_override(model).is_none() {
        out.push(group(
            elb_group_name(model, "api"),
            "Security group for api ELB",
        ));
    }
    out
}

/// The existing groups the spec names instead (`securityGroupOverride` of
/// instance groups and of the API load balancer): used, never made.
pub fn shared_groups(model: &Model<'_>) -> Vec<SharedSecurityGroup> {
    let mut out = Vec::new();
    let roles: &[Role] = if has_masters(model) {
        &[Role::ControlPlane, Role::Node, Role::Bastion]
    } else {
        &[Role::Node, Role::Bastion]
    };
    for &role in roles {
        for g in role_groups(model, role) {
            if let Some(id) = g.shared_id {
                out.push(SharedSecurityGroup {
                    name: g.name,
                    id,
                    vpc: Vpc::id_ref(model.name()),
                    field: format!(
                        "spec.securityGroupOverride of the {} instance groups",
                        role_label(role)
                    ),
                });
            }
        }
    }
    if let (true, Some(id)) = (uses_api_load_balancer(model), api_elb_override(model)) {
        out.push(SharedSecurityGroup {
            name: elb_group_name(model, "api"),
            id,
            vpc: Vpc::id_ref(model.name()),
            field: "spec.api.loadBalancer.securityGroupOverride".into(),
        });
    }
    out
}

/// The other end of a rule, before it becomes a [`RuleTarget`].
#[derive(Debug, Clone)]
enum Peer {
    /// A CIDR or prefix list, as written in the spec.
    Access(String),
    /// A group of this cluster, by name.
    Group(String),
}

impl Peer {
    fn target(&self) -> RuleTarget {
        match self {
            Peer::Access(value) => RuleTarget::from_access(value),
            Peer::Group(name) => RuleTarget::Group(SecurityGroup::id_ref(name)),
        }
    }

    /// How kops names the peer in a rule name (a prefix list is named
    /// `0.0.0.0/0`, as kops does).
    fn label(&self) -> &str {
        match self {
            Peer::Access(value) if value.starts_with("pl-") => "0.0.0.0/0",
            Peer::Access(value) | Peer::Group(value) => value,
        }
    }

    fn is_ipv4(&self) -> bool {
        matches!(self.target(), RuleTarget::Cidr(_))
    }

    fn is_ipv6(&self) -> bool {
        matches!(self.target(), RuleTarget::Ipv6Cidr(_))
    }
}

/// One rule, before naming.
struct Rule<'a> {
    group: &'a str,
    egress: bool,
    protocol: Option<&'a str>,
    ports: Option<(i32, i32)>,
    peer: Peer,
}

struct Rules<'m, 'a> {
    model: &'m Model<'a>,
    out: Vec<SecurityGroupRule>,
    /// Groups named by an instance group's `securityGroupOverride`: not
    /// the cluster's, so their rules carry only their `Name` tag.
    untagged: std::collections::BTreeSet<String>,
}

impl Rules<'_, '_> {
    /// A rule named the way kops names most rules, tagged like its group
    /// with its own `Name`.
    fn directional(&mut self, rule: Rule<'_>) {
        let (src, dst) = if rule.egress {
            (rule.group, rule.peer.label())
        } else {
            (rule.peer.label(), rule.group)
        };
        let (from, to) = rule.ports.unwrap_or((0, 0));
        let name = format!(
            "from-{src}-{}-{}-{from}to{to}-{dst}",
            if rule.egress { "egress" } else { "ingress" },
            rule.protocol.unwrap_or("all"),
        );
        let tags = if self.untagged.contains(rule.group) {
            [(crate::context::TAG_NAME.to_string(), name.clone())].into()
        } else {
            self.model.tags(&name, &[])
        };
        self.push(name, rule, tags);
    }

    /// A rule with a fixed name and no tags (kops adds these without its
    /// naming helper).
    fn named(&mut self, name: String, rule: Rule<'_>) {
        self.push(name, rule, Default::default());
    }

    fn push(&mut self, name: String, rule: Rule<'_>, tags: crate::context::Tags) {
        self.out.push(SecurityGroupRule {
            name,
            group: SecurityGroup::id_ref(rule.group),
            egress: rule.egress,
            protocol: rule.protocol.map(str::to_string),
            from_port: rule.ports.map(|p| p.0),
            to_port: rule.ports.map(|p| p.1),
            target: rule.peer.target(),
            tags,
        });
    }

    /// All egress, IPv4 and IPv6.
    fn egress_everywhere(&mut self, group: &str) {
        for cidr in ["0.0.0.0/0", "::/0"] {
            self.directional(Rule {
                group,
                egress: true,
                protocol: None,
                ports: None,
                peer: Peer::Access(cidr.into()),
            });
        }
    }
}

fn tcp(group: &str, port: i32, peer: Peer) -> Rule<'_> {
    Rule {
        group,
        egress: false,
        protocol: Some("tcp"),
        ports: Some((port, port)),
        peer,
    }
}

/// ICMP "destination unreachable" (type 3, code 4): path-MTU discovery.
fn icmp_pmtu(group: &str, peer: Peer) -> Rule<'_> {
    Rule {
        group,
        egress: false,
        protocol: Some("icmp"),
        ports: Some((3, 4)),
        peer,
    }
}

fn icmpv6_all(group: &str, peer: Peer) -> Rule<'_> {
    Rule {
        group,
        egress: false,
        protocol: Some("icmpv6"),
        ports: Some((-1, -1)),
        peer,
    }
}

/// Every rule the cluster needs.
pub fn rules(model: &Model<'_>) -> Result<Vec<SecurityGroupRule>, ModelError> {
    let masters = if has_masters(model) {
        role_groups(model, Role::ControlPlane)
    } else {
        Vec::new()
    };
    let nodes = role_groups(model, Role::Node);
    let bastions = role_groups(model, Role::Bastion);
    let mut rules = Rules {
        model,
        out: Vec::new(),
        untagged: masters
            .iter()
            .chain(&nodes)
            .chain(&bastions)
            .filter(|g| g.shared_id.is_some())
            .map(|g| g.name.clone())
            .collect(),
    };

    // Nodes: egress, and node to node.
    for src in &nodes {
        rules.egress_everywhere(&src.name);
        for dest in &nodes {
            rules.directional(Rule {
                group: &dest.name,
                egress: false,
                protocol: None,
                ports: None,
                peer: Peer::Group(src.name.clone()),
            });
        }
    }

    // Masters: egress, master to master, master to node.
    for src in &masters {
        rules.egress_everywhere(&src.name);
        for dest in masters.iter().chain(&nodes) {
            rules.directional(Rule {
                group: &dest.name,
                egress: false,
                protocol: None,
                ports: None,
                peer: Peer::Group(src.name.clone()),
            });
        }
    }

    // Node to master: UDP, TCP around etcd, IPIP for Calico/kube-router,
    // everything for the Amazon VPC CNI (pods on nodes reach pods on masters).
    let networking = model.cluster.spec.networking.as_ref();
    let ipip = networking.is_some_and(|n| n.calico.is_some() || n.kuberouter.is_some());
    let amazon_vpc = networking.is_some_and(|n| n.amazonvpc.is_some());
    for master in &masters {
        for node in &nodes {
            let from_node = Peer::Group(node.name.clone());
            rules.directional(Rule {
                group: &master.name,
                egress: false,
                protocol: Some("udp"),
                ports: Some((1, 65535)),
                peer: from_node.clone(),
            });
            for range in node_to_master_tcp_ranges(model) {
                rules.directional(Rule {
                    group: &master.name,
                    egress: false,
                    protocol: Some("tcp"),
                    ports: Some(range),
                    peer: from_node.clone(),
                });
            }
            if ipip {
                rules.directional(Rule {
                    group: &master.name,
                    egress: false,
                    protocol: Some("4"),
                    ports: None,
                    peer: from_node.clone(),
                });
            }
            if amazon_vpc {
                rules.directional(Rule {
                    group: &master.name,
                    egress: false,
                    protocol: None,
                    ports: None,
                    peer: from_node,
                });
            }
        }
    }

    // SSH from sshAccess, straight to the instances only without a bastion.
    if bastions.is_empty() {
        for cidr in ssh_access(model) {
            for group in masters.iter().chain(&nodes) {
                rules.directional(tcp(&group.name, 22, Peer::Access(cidr.clone())));
            }
        }
    }

    // Node ports from nodePortAccess.
    if !nodes.is_empty() {
        let range = node_port_range(model)?;
        for cidr in model.cluster.spec.node_port_access.iter().flatten() {
            for node in &nodes {
                for protocol in ["tcp", "udp"] {
                    rules.named(
                        format!(
                            "nodeport-{protocol}-external-to-node-{cidr}{}",
                            node.suffix()
                        ),
                        Rule {
                            group: &node.name,
                            egress: false,
                            protocol: Some(protocol),
                            ports: Some(range),
                            peer: Peer::Access(cidr.clone()),
                        },
                    );
                }
            }
        }
    }

    if uses_api_load_balancer(model) {
        api_load_balancer_rules(model, &mut rules, &masters, &nodes);
    } else {
        for cidr in api_access(model) {
            for master in &masters {
                rules.directional(tcp(&master.name, 443, Peer::Access(cidr.clone())));
            }
        }
    }

    if !bastions.is_empty() {
        bastion_rules(model, &mut rules, &bastions, &masters, &nodes);
    }

    Ok(rules.out)
}

fn api_load_balancer_rules(
    model: &Model<'_>,
    rules: &mut Rules<'_, '_>,
    masters: &[RoleGroup],
    nodes: &[RoleGroup],
) {
    let lb = elb_group_name(model, "api");
    let ssl = model
        .cluster
        .spec
        .api
        .as_ref()
        .and_then(|a| a.load_balancer.as_ref())
        .and_then(|l| l.ssl_certificate.as_deref())
        .is_some_and(|c| !c.is_empty());
    rules.egress_everywhere(&lb);
    for cidr in api_access(model) {
        let peer = Peer::Access(cidr.clone());
        rules.directional(tcp(&lb, 443, peer.clone()));
        if ssl {
            rules.directional(tcp(&lb, 8443, peer.clone()));
        }
        if !peer.is_ipv4() {
            rules.named(
                format!("icmpv6-pmtu-api-elb-{cidr}"),
                icmpv6_all(&lb, peer.clone()),
            );
        }
        if !peer.is_ipv6() {
            rules.named(format!("icmp-pmtu-api-elb-{cidr}"), icmp_pmtu(&lb, peer));
        }
    }
    let none_dns = model.uses_none_dns();
    if none_dns {
        for node in nodes {
            rules.named(
                format!("node{}-to-elb", node.suffix()),
                Rule {
                    group: &lb,
                    egress: false,
                    protocol: None,
                    ports: None,
                    peer: Peer::Group(node.name.clone()),
                },
            );
        }
    }
    let from_lb = Peer::Group(lb.clone());
    for master in masters {
        let (group, suffix) = (master.name.as_str(), master.suffix());
        if ssl {
            rules.named(
                format!("tcp-api-cp{suffix}"),
                tcp(group, 8443, from_lb.clone()),
            );
        }
        rules.named(
            format!("https-elb-to-master{suffix}"),
            tcp(group, 443, from_lb.clone()),
        );
        rules.named(
            format!("icmp-pmtu-elb-to-cp{suffix}"),
            icmp_pmtu(group, from_lb.clone()),
        );
        rules.named(
            format!("icmp-pmtu-cp{suffix}-to-elb"),
            icmp_pmtu(&lb, Peer::Group(group.to_string())),
        );
        if none_dns {
            rules.named(
                format!("kops-controller-elb-to-cp{suffix}"),
                tcp(group, KOPS_CONTROLLER_PORT, from_lb.clone()),
            );
            if cilium_etcd_managed(model) {
                rules.named(
                    format!("etcd-cilium-elb-to-cp{suffix}"),
                    tcp(group, ETCD_CILIUM_CLIENT_PORT, from_lb.clone()),
                );
            }
        }
    }
}

/// Whether the bastion's load balancer is internal
/// (`spec.topology.bastion.loadBalancer.type: Internal`; public by default).
fn bastion_load_balancer_internal(model: &Model<'_>) -> bool {
    model
        .cluster
        .spec
        .topology
        .as_ref()
        .and_then(|t| t.bastion.as_ref())
        .and_then(|b| b.extra.get("loadBalancer"))
        .and_then(|lb| lb.get("type"))
        .and_then(|t| t.as_str())
        == Some("Internal")
}

fn bastion_rules(
    model: &Model<'_>,
    rules: &mut Rules<'_, '_>,
    bastions: &[RoleGroup],
    masters: &[RoleGroup],
    nodes: &[RoleGroup],
) {
    for bastion in bastions {
        rules.egress_everywhere(&bastion.name);
        // The bastion reaches the instances on SSH and nothing else.
        for group in masters.iter().chain(nodes) {
            rules.directional(tcp(&group.name, 22, Peer::Group(bastion.name.clone())));
        }
    }

    let lb = elb_group_name(model, "bastion");
    rules.egress_everywhere(&lb);

    // SSH reaches the bastion's load balancer from the subnets it lives in
    // (public and utility ones for a public load balancer, private and
    // dual-stack ones for an internal one) and from sshAccess.
    let internal = bastion_load_balancer_internal(model);
    let mut allowed: Vec<String> = model
        .cluster
        .spec
        .subnets
        .iter()
        .flatten()
        .filter(|s| match s.subnet_type() {
            Some(SubnetType::Public | SubnetType::Utility) => !internal,
            Some(SubnetType::Private | SubnetType::DualStack) => internal,
            None => false,
        })
        .filter_map(|s| s.cidr.clone())
        .collect();
    allowed.extend(ssh_access(model));
    for cidr in allowed {
        let peer = Peer::Access(cidr.clone());
        rules.directional(tcp(&lb, 22, peer.clone()));
        if !peer.is_ipv4() {
            rules.named(
                format!("icmpv6-pmtu-ssh-nlb-{cidr}"),
                icmpv6_all(&lb, peer.clone()),
            );
        }
        if !peer.is_ipv6() {
            rules.named(format!("icmp-pmtu-ssh-nlb-{cidr}"), icmp_pmtu(&lb, peer));
        }
    }

    for bastion in bastions {
        rules.directional(tcp(&bastion.name, 22, Peer::Group(lb.clone())));
        rules.directional(icmp_pmtu(&bastion.name, Peer::Group(lb.clone())));
        rules.directional(icmp_pmtu(&lb, Peer::Group(bastion.name.clone())));
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::BTreeSet;

    use super::*;

    pub(crate) use kops_model::test_support::{load, model, private_with_bastion, PUBLIC};
    pub(crate) use kops_testkit::update_cluster_case as conformance_case;

    fn rule<'r>(rules: &'r [SecurityGroupRule], name: &str) -> &'r SecurityGroupRule {
        rules
            .iter()
            .find(|r| r.name == name)
            .unwrap_or_else(|| panic!("no rule `{name}` in {:#?}", names(rules)))
    }

    fn names(rules: &[SecurityGroupRule]) -> BTreeSet<String> {
        rules.iter().map(|r| r.name.clone()).collect()
    }

    fn source_group(rule: &SecurityGroupRule) -> Option<&str> {
        match &rule.target {
            RuleTarget::Group(g) => Some(g.key().name.as_str()),
            _ => None,
        }
    }

    /// The rules that let `source`'s instances into `group`.
    fn from_group<'r>(
        rules: &'r [SecurityGroupRule],
        source: &str,
        group: &str,
    ) -> Vec<&'r SecurityGroupRule> {
        rules
            .iter()
            .filter(|r| !r.egress && r.group.key().name == group && source_group(r) == Some(source))
            .collect()
    }

    /// Whether a rule lets TCP `port` in.
    fn opens_tcp(rule: &SecurityGroupRule, port: i32) -> bool {
        match rule.protocol.as_deref() {
            None => true,
            Some("tcp") => {
                rule.from_port.unwrap_or(0) <= port && port <= rule.to_port.unwrap_or(65535)
            }
            _ => false,
        }
    }

    #[test]
    fn nodes_never_reach_etcd_on_the_control_plane() {
        for yaml in [PUBLIC.to_string(), private_with_bastion()] {
            let (cluster, groups) = load(&yaml);
            let m = model(&cluster, &groups);
            let rules = rules(&m).unwrap();
            let (masters, nodes) = (m.scoped("masters"), m.scoped("nodes"));
            let node_to_master = from_group(&rules, &nodes, &masters);
            assert_eq!(node_to_master.len(), 4, "udp + three tcp ranges");
            for port in ETCD_PORTS {
                assert!(
                    node_to_master.iter().all(|r| !opens_tcp(r, port)),
                    "port {port} open to nodes"
                );
            }
            // And every other TCP port is open to them.
            for port in [1, 22, 443, 2379, 2382, 3988, 4000, 4003, 10250, 65535] {
                assert!(
                    node_to_master.iter().any(|r| opens_tcp(r, port)),
                    "port {port}"
                );
            }
            let tcp: Vec<(i32, i32)> = node_to_master
                .iter()
                .filter(|r| r.protocol.as_deref() == Some("tcp"))
                .map(|r| (r.from_port.unwrap(), r.to_port.unwrap()))
                .collect();
            assert_eq!(tcp, [(1, 2379), (2382, 4000), (4003, 65535)]);
            let udp = rule(
                &rules,
                &format!("from-{nodes}-ingress-udp-1to65535-{masters}"),
            );
            assert_eq!(source_group(udp), Some(nodes.as_str()));
        }
    }

    #[test]
    fn leases_and_cilium_etcd_ports_are_closed_too() {
        let yaml = PUBLIC
            .replace("networking: {cilium: {}}", "networking: {cilium: {etcdManaged: true}}")
            .replace(
                "  - {name: events,",
                "  - {name: leases, etcdMembers: [{name: a, instanceGroup: control-plane}]}\n  - {name: events,",
            );
        let (cluster, groups) = load(&yaml);
        let m = model(&cluster, &groups);
        assert_eq!(
            node_to_master_tcp_ranges(&m),
            [(1, 2379), (2384, 4000), (4003, 4003), (4005, 65535)]
        );
    }

    #[test]
    fn public_cluster_opens_ssh_and_api_from_the_spec_cidrs_only() {
        let (cluster, groups) = load(PUBLIC);
        let m = model(&cluster, &groups);
        let rules = rules(&m).unwrap();
        let (masters, nodes) = (m.scoped("masters"), m.scoped("nodes"));
        let from_cidrs: BTreeSet<(String, Option<i32>, String)> = rules
            .iter()
            .filter(|r| !r.egress)
            .filter_map(|r| match &r.target {
                RuleTarget::Cidr(c) | RuleTarget::Ipv6Cidr(c) => {
                    Some((r.group.key().name.clone(), r.from_port, c.clone()))
                }
                _ => None,
            })
            .collect();
        let expected: BTreeSet<(String, Option<i32>, String)> = [
            (masters.clone(), Some(22), "198.51.100.7/32".to_string()),
            (masters.clone(), Some(22), "2001:db8::/64".to_string()),
            (nodes.clone(), Some(22), "198.51.100.7/32".to_string()),
            (nodes.clone(), Some(22), "2001:db8::/64".to_string()),
            (masters.clone(), Some(443), "203.0.113.0/24".to_string()),
        ]
        .into();
        assert_eq!(from_cidrs, expected);
        let ssh = rule(
            &rules,
            &format!("from-198.51.100.7/32-ingress-tcp-22to22-{masters}"),
        );
        assert_eq!((ssh.from_port, ssh.to_port), (Some(22), Some(22)));
        assert_eq!(ssh.tags.get("Name"), Some(&ssh.name));
        assert_eq!(
            ssh.tags.get("KubernetesCluster").map(String::as_str),
            Some("pub.example.com")
        );
        let egress: Vec<_> = rules.iter().filter(|r| r.egress).collect();
        assert_eq!(
            egress.len(),
            4,
            "IPv4 and IPv6 egress for masters and nodes"
        );
        assert!(egress.iter().all(|r| r.protocol.is_none()));
        let group_names: Vec<String> = super::groups(&m).into_iter().map(|g| g.name).collect();
        assert_eq!(group_names, [masters, nodes]);
    }

    #[test]
    fn with_a_bastion_only_the_bastion_reaches_instances_and_only_on_ssh() {
        let yaml = private_with_bastion();
        let (cluster, groups) = load(&yaml);
        let m = model(&cluster, &groups);
        let rules = rules(&m).unwrap();
        let (masters, nodes, bastion) =
            (m.scoped("masters"), m.scoped("nodes"), m.scoped("bastion"));
        let bastion_elb = m.scoped("bastion-elb");
        let api_elb = m.scoped("api-elb");
        for group in [&masters, &nodes] {
            let from_bastion = from_group(&rules, &bastion, group);
            assert_eq!(from_bastion.len(), 1);
            let r = from_bastion[0];
            assert_eq!(
                (r.protocol.as_deref(), r.from_port, r.to_port),
                (Some("tcp"), Some(22), Some(22))
            );
            // No CIDR reaches the instances directly.
            assert!(rules
                .iter()
                .filter(|r| !r.egress && &r.group.key().name == group)
                .all(|r| matches!(r.target, RuleTarget::Group(_))));
        }
        // SSH reaches the bastion's load balancer from the utility subnet and sshAccess.
        let ssh_to_lb: BTreeSet<String> = rules
            .iter()
            .filter(|r| r.group.key().name == bastion_elb && r.from_port == Some(22))
            .filter_map(|r| match &r.target {
                RuleTarget::Cidr(c) | RuleTarget::Ipv6Cidr(c) => Some(c.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(
            ssh_to_lb,
            ["172.20.4.0/22", "198.51.100.7/32", "2001:db8::/64"]
                .map(String::from)
                .into()
        );
        // The bastion itself is reached only from its load balancer.
        assert!(rules
            .iter()
            .filter(|r| !r.egress && r.group.key().name == bastion)
            .all(|r| source_group(r) == Some(bastion_elb.as_str())));
        // The API goes through its load balancer.
        let https = rule(&rules, "https-elb-to-master");
        assert_eq!(source_group(https), Some(api_elb.as_str()));
        rule(
            &rules,
            &format!("from-203.0.113.0/24-ingress-tcp-443to443-{api_elb}"),
        );
        rule(&rules, "icmpv6-pmtu-ssh-nlb-2001:db8::/64");
        rule(&rules, "icmp-pmtu-ssh-nlb-172.20.4.0/22");
        let group_names: BTreeSet<String> = super::groups(&m).into_iter().map(|g| g.name).collect();
        assert_eq!(
            group_names,
            [api_elb, bastion, bastion_elb, masters, nodes].into()
        );
    }

    /// PUBLIC with an API load balancer and overrides: the first control
    /// plane group and the nodes use existing groups, a second control-plane
    /// group keeps kops' own, the API load balancer uses `sg-elb`.
    fn with_overrides() -> String {
        PUBLIC
            .replace(
                "  networkCIDR:",
                "  api: {loadBalancer: {type: Public, class: Network, securityGroupOverride: sg-elb}}\n  networkCIDR:",
            )
            .replace(
                "spec: {role: Master, image: ami-12345678, machineType: t3.medium, subnets: [us-east-1a]}",
                "spec: {role: Master, image: ami-12345678, machineType: t3.medium, subnets: [us-east-1a], securityGroupOverride: sg-cp}",
            )
            .replace(
                "spec: {role: Node, image: ami-12345678, machineType: t3.medium, subnets: [us-east-1a]}",
                "spec: {role: Node, image: ami-12345678, machineType: t3.medium, subnets: [us-east-1a], securityGroupOverride: sg-nodes}",
            )
            + r#"---
apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata: {name: control-plane-b, labels: {kops.k8s.io/cluster: pub.example.com}}
spec: {role: Master, image: ami-12345678, machineType: t3.medium, subnets: [us-east-1a]}
---
apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata: {name: nodes-b, labels: {kops.k8s.io/cluster: pub.example.com}}
spec: {role: Node, image: ami-12345678, machineType: t3.medium, subnets: [us-east-1a], securityGroupOverride: sg-nodes}
"#
    }

    #[test]
    fn overrides_replace_kops_groups_and_name_the_rules() {
        let yaml = with_overrides();
        let (cluster, groups) = load(&yaml);
        let m = model(&cluster, &groups);
        let (masters, api_elb) = (m.scoped("masters"), m.scoped("api-elb"));

        // Only the control plane's own group is made: both node groups share
        // one override, the API load balancer has its own.
        let made: Vec<String> = super::groups(&m).into_iter().map(|g| g.name).collect();
        assert_eq!(made, std::slice::from_ref(&masters));
        let shared: Vec<(String, String)> = shared_groups(&m)
            .into_iter()
            .map(|g| (g.name, g.id))
            .collect();
        assert_eq!(
            shared,
            [
                ("sg-cp-ControlPlane".to_string(), "sg-cp".to_string()),
                ("sg-nodes-Node".to_string(), "sg-nodes".to_string()),
                (api_elb.clone(), "sg-elb".to_string()),
            ]
        );

        let rules = rules(&m).unwrap();
        for name in [
            "from-198.51.100.7/32-ingress-tcp-22to22-sg-cp-ControlPlane".to_string(),
            "from-198.51.100.7/32-ingress-tcp-22to22-sg-nodes-Node".to_string(),
            format!("from-198.51.100.7/32-ingress-tcp-22to22-{masters}"),
            "from-sg-nodes-Node-ingress-tcp-1to2379-sg-cp-ControlPlane".to_string(),
            format!("from-sg-nodes-Node-ingress-udp-1to65535-{masters}"),
            format!("from-{masters}-ingress-all-0to0-sg-cp-ControlPlane"),
            format!("from-sg-cp-ControlPlane-ingress-all-0to0-{masters}"),
            "from-sg-cp-ControlPlane-ingress-all-0to0-sg-nodes-Node".to_string(),
            "from-sg-nodes-Node-ingress-all-0to0-sg-nodes-Node".to_string(),
            "from-sg-nodes-Node-egress-all-0to0-0.0.0.0/0".to_string(),
            format!("from-{api_elb}-egress-all-0to0-0.0.0.0/0"),
            "https-elb-to-master".to_string(),
            "https-elb-to-master-sg-cp".to_string(),
            "icmp-pmtu-elb-to-cp-sg-cp".to_string(),
            "icmp-pmtu-cp-sg-cp-to-elb".to_string(),
            "icmp-pmtu-cp-to-elb".to_string(),
        ] {
            rule(&rules, &name);
        }
        // Nothing is made for the replaced groups.
        assert!(rules.iter().all(|r| !r.name.contains(&m.scoped("nodes"))));
        // Rules on an override carry only their name; the API load
        // balancer's keep kops' tags.
        let on_override = rule(&rules, "https-elb-to-master-sg-cp");
        assert_eq!(on_override.group.key().name, "sg-cp-ControlPlane");
        assert_eq!(source_group(on_override), Some(api_elb.as_str()));
        let ssh = rule(
            &rules,
            "from-198.51.100.7/32-ingress-tcp-22to22-sg-cp-ControlPlane",
        );
        assert_eq!(ssh.tags.keys().collect::<Vec<_>>(), ["Name"]);
        let elb = rule(&rules, &format!("from-{api_elb}-egress-all-0to0-0.0.0.0/0"));
        assert!(elb.tags.contains_key("KubernetesCluster"));

        // In the graph: the overrides are there (by the same key kind as
        // kops' groups), only kops' own group gets a cleanup.
        let mut graph = TaskGraph::new();
        build(&m, &mut graph).unwrap();
        for name in ["sg-cp-ControlPlane", "sg-nodes-Node", api_elb.as_str()] {
            let key = kops_engine::TaskKey::new(SecurityGroup::KIND, name);
            let task = graph.get(&key).unwrap_or_else(|| panic!("no {key}"));
            assert!(task
                .as_any()
                .downcast_ref::<SharedSecurityGroup>()
                .is_some());
            let cleanup = kops_engine::TaskKey::new(SecurityGroupCleanup::KIND, name);
            assert!(graph.get(&cleanup).is_none(), "{cleanup}");
        }
        let cleanup = kops_engine::TaskKey::new(SecurityGroupCleanup::KIND, masters);
        assert!(graph.get(&cleanup).is_some());
    }

    #[test]
    fn dns_none_opens_kops_controller_per_control_plane_group() {
        let yaml = with_overrides().replace(
            "networking: {cilium: {}}",
            "networking: {cilium: {etcdManaged: true}}\n  topology: {dns: {type: None}}",
        );
        let (cluster, groups) = load(&yaml);
        let m = model(&cluster, &groups);
        assert!(m.uses_none_dns());
        let rules = rules(&m).unwrap();
        for name in [
            "kops-controller-elb-to-cp",
            "kops-controller-elb-to-cp-sg-cp",
            "etcd-cilium-elb-to-cp",
            "etcd-cilium-elb-to-cp-sg-cp",
            "node-sg-nodes-to-elb",
        ] {
            rule(&rules, name);
        }
        let r = rule(&rules, "kops-controller-elb-to-cp-sg-cp");
        assert_eq!((r.from_port, r.to_port), (Some(3988), Some(3988)));
    }

    /// kops' Terraform resource name of a task name.
    fn terraform_name(name: &str) -> String {
        name.replace('.', "-").replace('/', "--").replace(':', "_")
    }

    fn terraform_resources(tf: &str, kind: &str) -> BTreeSet<String> {
        let prefix = format!("resource \"{kind}\" \"");
        tf.lines()
            .filter_map(|l| l.strip_prefix(&prefix))
            .filter_map(|rest| rest.split('"').next())
            .map(str::to_string)
            .collect()
    }

    /// Cases whose rules need what is not built yet.
    const UNSUPPORTED_CASES: &[&str] = &[];

    #[test]
    fn groups_and_rules_match_kops_golden_terraform_in_every_aws_case() {
        let Some(root) = conformance_case("") else {
            return;
        };
        let mut checked = Vec::new();
        for entry in std::fs::read_dir(root).unwrap() {
            let dir = entry.unwrap().path();
            let case = dir.file_name().unwrap().to_string_lossy().to_string();
            let (Ok(tf), Ok(yaml)) = (
                std::fs::read_to_string(dir.join("kubernetes.tf")),
                std::fs::read_to_string(dir.join("in-v1alpha2.yaml")),
            ) else {
                continue;
            };
            if !tf.contains("resource \"aws_security_group\"")
                || UNSUPPORTED_CASES.contains(&case.as_str())
            {
                continue;
            }
            let (cluster, groups) = load(&yaml);
            let m = model(&cluster, &groups);
            let ours: BTreeSet<String> = rules(&m)
                .unwrap()
                .iter()
                .map(|r| terraform_name(&r.name))
                .collect();
            assert_eq!(
                ours,
                terraform_resources(&tf, "aws_security_group_rule"),
                "rules of {case}"
            );
            let ours: BTreeSet<String> = super::groups(&m)
                .iter()
                .map(|g| terraform_name(&g.name))
                .collect();
            assert_eq!(
                ours,
                terraform_resources(&tf, "aws_security_group"),
                "groups of {case}"
            );
            checked.push(case);
        }
        for case in ["minimal-aws", "privatecilium", "complex", "existing_sg"] {
            assert!(checked.iter().any(|c| c == case), "{case} was not checked");
        }
        assert!(checked.len() >= 40, "only {} cases", checked.len());
    }

    #[test]
    fn groups_hang_off_the_network_builders_vpc() {
        for yaml in [PUBLIC.to_string(), private_with_bastion()] {
            let (cluster, groups) = load(&yaml);
            let m = model(&cluster, &groups);
            // `build` validates the graph: every group's VPC dependency is there.
            let graph = crate::model::build(&m).unwrap();
            let key = kops_engine::TaskKey::new(SecurityGroup::KIND, m.scoped("masters"));
            assert_eq!(
                graph.dependencies_of(&key),
                Some(&[kops_engine::TaskKey::new(Vpc::KIND, m.name())][..])
            );
        }
    }

    #[test]
    fn every_group_gets_a_cleanup_that_keeps_all_its_rules() {
        let yaml = private_with_bastion();
        let (cluster, groups) = load(&yaml);
        let m = model(&cluster, &groups);
        let mut graph = TaskGraph::new();
        build(&m, &mut graph).unwrap();
        let all_rules = rules(&m).unwrap();
        for group in super::groups(&m) {
            let key = kops_engine::TaskKey::new(SecurityGroupCleanup::KIND, group.name.clone());
            let task = graph.get(&key).unwrap_or_else(|| panic!("no {key}"));
            let cleanup = task
                .as_any()
                .downcast_ref::<SecurityGroupCleanup>()
                .unwrap();
            let kept: BTreeSet<&str> = cleanup.keep.iter().map(|r| r.name.as_str()).collect();
            let wanted: BTreeSet<&str> = all_rules
                .iter()
                .filter(|r| r.group.key().name == group.name)
                .map(|r| r.name.as_str())
                .collect();
            assert_eq!(kept, wanted, "{}", group.name);
            assert!(cleanup.ports.contains(&(22, 22)) || cleanup.ports.contains(&(443, 443)));
            // It runs after every rule of its group.
            let deps = graph.dependencies_of(&key).unwrap();
            for rule in &cleanup.keep {
                let rule_key =
                    kops_engine::TaskKey::new(SecurityGroupRule::KIND, rule.name.clone());
                assert!(deps.contains(&rule_key), "{key} before {rule_key}");
            }
        }
        let masters = watched_ports(&m, &m.scoped("masters"));
        for port in ETCD_PORTS {
            assert!(masters.contains(&(port, port)), "etcd port {port} watched");
        }
        assert_eq!(watched_ports(&m, &m.scoped("nodes")), [(22, 22)]);
    }

    #[test]
    fn node_port_range_comes_from_the_api_server_spec() {
        let yaml = PUBLIC.replace(
            "  networkCIDR:",
            "  nodePortAccess: [10.0.0.0/8]\n  kubeAPIServer: {serviceNodePortRange: 28000-32767}\n  networkCIDR:",
        );
        let (cluster, groups) = load(&yaml);
        let m = model(&cluster, &groups);
        let rules = rules(&m).unwrap();
        let tcp = rule(&rules, "nodeport-tcp-external-to-node-10.0.0.0/8");
        assert_eq!((tcp.from_port, tcp.to_port), (Some(28000), Some(32767)));
        assert!(tcp.tags.is_empty());
        rule(&rules, "nodeport-udp-external-to-node-10.0.0.0/8");

        let bad = PUBLIC.replace(
            "  networkCIDR:",
            "  nodePortAccess: [10.0.0.0/8]\n  kubeAPIServer: {serviceNodePortRange: lots}\n  networkCIDR:",
        );
        let (cluster, groups) = load(&bad);
        let err = super::rules(&model(&cluster, &groups))
            .unwrap_err()
            .to_string();
        assert!(err.contains("serviceNodePortRange"), "{err}");
    }
}
