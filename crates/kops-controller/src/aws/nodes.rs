//! Which Kubernetes node is which instance, before the controller acts on
//! a node (role labels, an IPv6 pod range).
//!
//! A kubelet chooses its node's `spec.providerID` when it registers, so
//! the id alone proves nothing: a compromised worker could name a
//! control-plane instance and be given its role labels (and with them the
//! control-plane DaemonSets and their credentials), or another instance's
//! IPv6 prefix. The node's name is another matter: its kubelet can only
//! write the Node its certificate names, and kops-controller certified it
//! as exactly one instance ([`node_name`]; nodeup gives
//! kubelet the same name). So a node is bound to the instance in its
//! provider id only when that instance exists, is running, is tagged as
//! this cluster's, the node's name is the instance's (its id or its
//! private DNS name), and every IP address the node reports is one of the
//! instance's. Otherwise the node gets nothing, and one warning.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use aws_sdk_ec2::types::{Filter, Instance, InstanceStateName};
use k8s_openapi::api::core::v1::Node;

use kops_bootstrap::text::{error_chain, escape};

/// How nodes are bound to instances in one cluster.
#[derive(Clone)]
pub struct Binding {
    pub cluster: String,
    pub region: String,
    pub use_ip_based_node_names: bool,
    /// Nodes already warned about, with the provider id they claimed:
    /// each is named once, not on every pass.
    pub warned: Arc<Mutex<HashSet<(String, String)>>>,
}

/// The instance id in a node's provider id (`aws:///us-east-1a/i-0abc…`):
/// `i-` and 8 or 17 hex digits, as EC2 makes them.
pub fn instance_id(provider_id: &str) -> Option<&str> {
    let id = provider_id.strip_prefix("aws://")?.rsplit('/').next()?;
    let hex = id.strip_prefix("i-")?;
    let ok = matches!(hex.len(), 8 | 17) && hex.bytes().all(|b| b.is_ascii_hexdigit());
    ok.then_some(id)
}

/// The instances with these ids, by id; ids EC2 does not know (or that
/// are malformed) are simply absent: one bad provider id does not stop
/// the others being looked up.
pub async fn instances(
    ec2: &aws_sdk_ec2::Client,
    ids: &[String],
) -> Result<HashMap<String, Instance>, String> {
    let mut out = HashMap::new();
    for chunk in ids.chunks(200) {
        let mut pages = ec2
            .describe_instances()
            .filters(
                Filter::builder()
                    .name("instance-id")
                    .set_values(Some(chunk.to_vec()))
                    .build(),
            )
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| format!("EC2 DescribeInstances: {}", error_chain(&e)))?;
            for instance in page.reservations().iter().flat_map(|r| r.instances()) {
                if let Some(id) = instance.instance_id() {
                    out.insert(id.to_string(), instance.clone());
                }
            }
        }
    }
    Ok(out)
}

/// Every address of an instance, on any of its interfaces.
fn addresses(instance: &Instance) -> HashSet<String> {
    let mut out = HashSet::new();
    out.extend(instance.private_ip_address().map(str::to_string));
    out.extend(instance.public_ip_address().map(str::to_string));
    out.extend(instance.ipv6_address().map(str::to_string));
    for nic in instance.network_interfaces() {
        out.extend(nic.private_ip_address().map(str::to_string));
        for ip in nic.private_ip_addresses() {
            out.extend(ip.private_ip_address().map(str::to_string));
            out.extend(
                ip.association()
                    .and_then(|a| a.public_ip())
                    .map(str::to_string),
            );
        }
        for ip in nic.ipv6_addresses() {
            out.extend(ip.ipv6_address().map(str::to_string));
        }
        out.extend(
            nic.association()
                .and_then(|a| a.public_ip())
                .map(str::to_string),
        );
    }
    out
}

impl Binding {
    /// Why `node` (named `name`) is not the node of `instance` (the one
    /// its provider id names, `None` when EC2 does not know it).
    pub fn mismatch(&self, name: &str, node: &Node, instance: Option<&Instance>) -> Option<String> {
        let Some(instance) = instance else {
            return Some("its instance does not exist".into());
        };
        let id = instance.instance_id().unwrap_or_default();
        if !in_cluster(instance, &self.cluster) {
            return Some(format!(
                "instance {id} is not part of cluster {}",
                self.cluster
            ));
        }
        let state = instance.state().and_then(|s| s.name());
        if state != Some(&InstanceStateName::Running) {
            return Some(format!(
                "instance {id} is {}, not running",
                state.map_or("in no known state", |s| s.as_str())
            ));
        }
        let mut names = vec![
            id.to_string(),
            node_name(instance, &self.region, self.use_ip_based_node_names),
        ];
        names.extend(instance.private_dns_name().map(str::to_string));
        if let Some(ip) = instance.private_ip_address() {
            names.push(private_dns_name(ip, &self.region));
        }
        if !names.iter().any(|n| n == name) {
            return Some(format!("the node's name is not instance {id}'s"));
        }
        let own = addresses(instance);
        let foreign: Vec<&str> = node
            .status
            .as_ref()
            .and_then(|s| s.addresses.as_ref())
            .into_iter()
            .flatten()
            .filter(|a| a.type_ == "InternalIP" || a.type_ == "ExternalIP")
            .map(|a| a.address.as_str())
            .filter(|a| !own.contains(*a))
            .collect();
        if !foreign.is_empty() {
            return Some(format!(
                "it reports addresses instance {id} does not have ({})",
                escape(&foreign.join(", "))
            ));
        }
        None
    }

    /// The nodes among `nodes` that are bound to their instances, each
    /// with its name and instance; the others are named in a warning,
    /// once. Nodes without an AWS provider id are not this controller's
    /// to look at and are skipped quietly.
    pub fn bind<'a>(
        &self,
        nodes: &'a [Node],
        instances: &'a HashMap<String, Instance>,
    ) -> Vec<(&'a str, &'a Node, &'a Instance)> {
        let mut out = Vec::new();
        for node in nodes {
            let Some(name) = node.metadata.name.as_deref() else {
                continue;
            };
            let Some(provider_id) = node.spec.as_ref().and_then(|s| s.provider_id.as_deref())
            else {
                continue;
            };
            let instance = instance_id(provider_id).and_then(|id| instances.get(id));
            let reason = if instance_id(provider_id).is_none() {
                if !provider_id.starts_with("aws://") {
                    continue;
                }
                Some("its provider id names no EC2 instance".to_string())
            } else {
                self.mismatch(name, node, instance)
            };
            match (reason, instance) {
                (None, Some(instance)) => out.push((name, node, instance)),
                (reason, _) => self.warn_once(
                    name,
                    provider_id,
                    reason.as_deref().unwrap_or("its instance does not exist"),
                ),
            }
        }
        out
    }

    /// The instance ids the nodes' provider ids name (well-formed ones).
    pub fn claimed_ids(nodes: &[Node]) -> Vec<String> {
        let mut ids: Vec<String> = nodes
            .iter()
            .filter_map(|n| n.spec.as_ref()?.provider_id.as_deref())
            .filter_map(instance_id)
            .map(str::to_string)
            .collect();
        ids.sort();
        ids.dedup();
        ids
    }

    fn warn_once(&self, name: &str, provider_id: &str, reason: &str) {
        let mut warned = self.warned.lock().unwrap_or_else(|e| e.into_inner());
        if warned.insert((name.to_string(), provider_id.to_string())) {
            tracing::warn!(
                "node {} claims provider id `{}` but {reason}: no labels, no pod range",
                escape(name),
                escape(provider_id)
            );
        }
    }
}

/// An instance's tag.
pub fn tag<'a>(instance: &'a aws_sdk_ec2::types::Instance, key: &str) -> Option<&'a str> {
    instance
        .tags()
        .iter()
        .find(|t| t.key() == Some(key))
        .and_then(|t| t.value())
}

/// Whether an instance is tagged as one of `cluster`'s (kops' two tags).
pub fn in_cluster(instance: &aws_sdk_ec2::types::Instance, cluster: &str) -> bool {
    let owned = format!("kubernetes.io/cluster/{cluster}");
    tag(instance, "KubernetesCluster") == Some(cluster)
        || tag(instance, &owned).is_some_and(|v| v == "owned" || v == "shared")
}

/// The node name the controller certifies an instance's kubelet as: its
/// instance id, or with IP-based names its private DNS name (nodeup gives
/// kubelet the same name, `--hostname-override`).
pub fn node_name(
    instance: &aws_sdk_ec2::types::Instance,
    region: &str,
    use_ip_based_node_names: bool,
) -> String {
    let id = instance.instance_id().unwrap_or_default().to_string();
    match instance.private_ip_address() {
        Some(ip) if use_ip_based_node_names => private_dns_name(ip, region),
        _ => id,
    }
}

/// Whether an instance is pending or running.
pub fn is_live(instance: &aws_sdk_ec2::types::Instance) -> bool {
    use aws_sdk_ec2::types::InstanceStateName;
    matches!(
        instance.state().and_then(|s| s.name()),
        Some(InstanceStateName::Running | InstanceStateName::Pending)
    )
}

/// EC2's private DNS name of an address (`ip-10-0-0-1.ec2.internal`).
pub fn private_dns_name(ip: &str, region: &str) -> String {
    let domain = if region == "us-east-1" {
        "ec2.internal".to_string()
    } else {
        format!("{region}.compute.internal")
    };
    format!("ip-{}.{domain}", ip.replace('.', "-"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_ids_name_instances() {
        assert_eq!(
            instance_id("aws:///us-east-1a/i-0123456789abcdef0"),
            Some("i-0123456789abcdef0")
        );
        assert_eq!(
            instance_id("aws:///us-east-1a/i-01234567"),
            Some("i-01234567")
        );
        assert_eq!(instance_id("aws:///us-east-1a/i-0abc"), None);
        assert_eq!(
            instance_id("aws:///us-east-1a/i-0123456789abcdef0,i-1"),
            None
        );
        assert_eq!(instance_id("gce://p/z/n"), None);
    }

    #[test]
    fn private_dns_names_follow_ec2() {
        assert_eq!(
            private_dns_name("10.0.0.1", "us-east-1"),
            "ip-10-0-0-1.ec2.internal"
        );
        assert_eq!(
            private_dns_name("10.0.0.1", "eu-west-1"),
            "ip-10-0-0-1.eu-west-1.compute.internal"
        );
    }
}
