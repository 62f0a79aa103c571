//! Firewall rules: between the cluster's roles, from outside (SSH, node
//! ports, the API), and Google's load-balancer health checks.

use kops_engine::TaskGraph;
use kops_model::ModelError;

use super::GceModel;
use crate::names;
use crate::tasks::{Family, FirewallRule, GceContext};

/// Where Google's load-balancer health checks come from.
pub const HEALTH_CHECK_RANGES: [&str; 4] = [
    "35.191.0.0/16",
    "130.211.0.0/22",
    "209.85.204.0/22",
    "209.85.152.0/22",
];

/// A rule before it gets its name and family.
pub struct Rule {
    pub allowed: Vec<String>,
    pub source_ranges: Vec<String>,
    pub source_tags: Vec<String>,
    pub target_tags: Vec<String>,
}

impl GceModel<'_> {
    fn rule(&self, name: &str, family: Family, rule: &Rule) -> FirewallRule {
        FirewallRule {
            name: names::suffixed(name, self.cluster_name()),
            network: self.network_key(),
            family,
            allowed: rule.allowed.clone(),
            source_ranges: rule.source_ranges.clone(),
            source_tags: rule.source_tags.clone(),
            target_tags: rule.target_tags.clone(),
            disabled: false,
        }
    }

    /// Adds one IPv4 rule as it is.
    pub fn add_rule(
        &self,
        graph: &mut TaskGraph<GceContext>,
        name: &str,
        rule: &Rule,
    ) -> Result<(), ModelError> {
        graph.add(self.rule(name, Family::Ipv4, rule))?;
        Ok(())
    }

    /// Adds a rule as kops does for ranges of both families: `<name>`
    /// with the IPv4 ranges and `<name>-ipv6` with the IPv6 ones (ICMP
    /// becoming ICMPv6); a twin without ranges is kept disabled.
    pub fn add_rule_pair(
        &self,
        graph: &mut TaskGraph<GceContext>,
        name: &str,
        rule: &Rule,
    ) -> Result<(), ModelError> {
        let (v6, v4): (Vec<String>, Vec<String>) = rule
            .source_ranges
            .iter()
            .cloned()
            .partition(|r| r.contains(':'));
        let mut ipv4 = self.rule(name, Family::Ipv4, rule);
        if ipv4.source_tags.is_empty() {
            ipv4.disabled = v4.is_empty();
            ipv4.source_ranges = if v4.is_empty() {
                vec!["0.0.0.0/0".into()]
            } else {
                v4
            };
        }
        graph.add(ipv4)?;
        let mut ipv6 = self.rule(&format!("{name}-ipv6"), Family::Ipv6, rule);
        if ipv6.source_tags.is_empty() {
            ipv6.disabled = v6.is_empty();
            ipv6.source_ranges = if v6.is_empty() {
                vec!["::/0".into()]
            } else {
                v6
            };
        }
        for allowed in &mut ipv6.allowed {
            if allowed == "icmp" {
                *allowed = "58".into();
            }
        }
        graph.add(ipv6)?;
        Ok(())
    }

    fn all_protocols(&self) -> Vec<String> {
        let mut all: Vec<String> = ["tcp", "udp", "icmp", "esp", "ah", "sctp"]
            .map(String::from)
            .to_vec();
        if self.uses_calico() {
            all.push("ipip".into());
        }
        all
    }
}

fn tcp(port: u16) -> String {
    format!("tcp:{port}")
}

/// The rules between roles (kops' firewall model).
pub fn build(gce: &GceModel<'_>, graph: &mut TaskGraph<GceContext>) -> Result<(), ModelError> {
    let all = gce.all_protocols();
    let node = vec![gce.tag("node")];
    let control_plane = gce.control_plane_tags();
    if gce.api_load_balancer_type().is_some() {
        gce.add_rule(
            graph,
            "lb-health-checks",
            &Rule {
                allowed: vec!["tcp".into()],
                source_ranges: HEALTH_CHECK_RANGES.map(String::from).to_vec(),
                source_tags: vec![],
                target_tags: gce.api_server_target_tags(),
            },
        )?;
    }
    let between = |source: &Vec<String>, target: &Vec<String>, allowed: Vec<String>| Rule {
        allowed,
        source_ranges: vec![],
        source_tags: source.clone(),
        target_tags: target.clone(),
    };
    gce.add_rule(graph, "node-to-node", &between(&node, &node, all.clone()))?;
    gce.add_rule(
        graph,
        "master-to-master",
        &between(&control_plane, &control_plane, all.clone()),
    )?;
    gce.add_rule(
        graph,
        "master-to-node",
        &between(&control_plane, &node, all.clone()),
    )?;
    // The API, kubelet, kops-controller, the controller manager's,
    // scheduler's and kube-proxy's metrics, etcd's metrics, node exporter.
    let mut to_master: Vec<String> = [443, 10250, 3988, 10257, 10259, 10249, 2382, 2384, 9100]
        .map(tcp)
        .to_vec();
    if gce.uses_calico() {
        to_master.push("ipip".into());
        to_master.push(tcp(179));
    }
    if gce.uses_cilium() {
        to_master.push("udp:8472".into());
        if gce.uses_cilium_etcd() {
            to_master.push(tcp(4003));
        }
    }
    gce.add_rule(
        graph,
        "node-to-master",
        &between(&node, &control_plane, to_master),
    )?;
    if (gce.uses_ip_alias() || gce.uses_gce_routes()) && !gce.model.ipv6_only() {
        let Some(pods) = gce.model.cluster.spec.pod_cidr.clone() else {
            return Err(GceModel::error(
                "spec.podCIDR",
                "is required with IP-alias or kubenet networking",
                "set spec.podCIDR (kops defaults it from nonMasqueradeCIDR)",
            ));
        };
        gce.add_rule_pair(
            graph,
            "pod-cidrs-to-node",
            &Rule {
                allowed: all,
                source_ranges: vec![pods],
                source_tags: vec![],
                target_tags: node,
            },
        )?;
    }
    Ok(())
}

/// Access from outside: SSH (directly or through bastions), node ports
/// and, without a load balancer, the API.
pub fn build_external_access(
    gce: &GceModel<'_>,
    graph: &mut TaskGraph<GceContext>,
) -> Result<(), ModelError> {
    let spec = &gce.model.cluster.spec;
    let ssh = spec.ssh_access.clone().unwrap_or_default();
    let node = vec![gce.tag("node")];
    let control_plane = gce.control_plane_tags();
    let from = |ranges: &[String], targets: &[String], allowed: &[String]| Rule {
        allowed: allowed.to_vec(),
        source_ranges: ranges.to_vec(),
        source_tags: vec![],
        target_tags: targets.to_vec(),
    };
    let ssh_port = [tcp(22)];
    if gce.model.has_role(kops_api::Role::Bastion) {
        let bastion = vec![gce.tag("bastion")];
        gce.add_rule_pair(
            graph,
            "ssh-external-to-bastion",
            &from(&ssh, &bastion, &ssh_port),
        )?;
        for (name, targets) in [
            ("bastion-to-master-ssh", &control_plane),
            ("bastion-to-node-ssh", &node),
        ] {
            gce.add_rule_pair(
                graph,
                name,
                &Rule {
                    allowed: ssh_port.to_vec(),
                    source_ranges: vec![],
                    source_tags: bastion.clone(),
                    target_tags: targets.clone(),
                },
            )?;
        }
    } else {
        gce.add_rule_pair(
            graph,
            "ssh-external-to-master",
            &from(&ssh, &control_plane, &ssh_port),
        )?;
        gce.add_rule_pair(graph, "ssh-external-to-node", &from(&ssh, &node, &ssh_port))?;
    }
    let (first, last) = kops_model::security::node_port_range(gce.model)?;
    let node_ports = [format!("tcp:{first}-{last}"), format!("udp:{first}-{last}")];
    let node_port_access = spec.node_port_access.clone().unwrap_or_default();
    gce.add_rule_pair(
        graph,
        "nodeport-external-to-node",
        &from(&node_port_access, &node, &node_ports),
    )?;
    if gce.api_load_balancer_type().is_none() {
        let access = kops_model::security::api_access(gce.model);
        gce.add_rule_pair(
            graph,
            "kubernetes-master-https",
            &from(&access, &control_plane, &[tcp(443)]),
        )?;
        add_pod_cidrs_to_api(gce, graph)?;
    }
    Ok(())
}

/// With IP aliases, pods reach the API by their own addresses.
pub fn add_pod_cidrs_to_api(
    gce: &GceModel<'_>,
    graph: &mut TaskGraph<GceContext>,
) -> Result<(), ModelError> {
    if !gce.uses_ip_alias() {
        return Ok(());
    }
    gce.add_rule(
        graph,
        "pod-cidrs-to-https-api",
        &Rule {
            allowed: vec![tcp(443)],
            source_ranges: gce.model.cluster.spec.pod_cidr.iter().cloned().collect(),
            source_tags: vec![],
            target_tags: gce.api_server_target_tags(),
        },
    )
}
