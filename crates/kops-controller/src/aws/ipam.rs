//! kops-controller's cloud IPAM (`enableCloudIPAM`, set by `update` for
//! IPv6-only clusters, as kops does): each instance gets an IPv6 prefix on
//! its network interface (the launch template's `Ipv6PrefixCount: 1`), and
//! that prefix becomes its node's pod range. A node without
//! `spec.podCIDRs` gets `podCIDR` and `podCIDRs` set to the one IPv6 prefix
//! of the one interface attached to its instance; a node that has them is
//! left alone. Until then the network plugin has no range for the node's
//! pods, so the controller looks often ([`crate::IPAM_INTERVAL`]). Only a node
//! bound to its instance ([`super::nodes`]) is given that instance's
//! prefix, and each node is handled on its own: one that fails is named
//! in a warning and tried again next pass.

use aws_sdk_ec2::types::{Filter, NetworkInterface};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::nodes::{instances, Binding};
use crate::node_labels::all_nodes;
use crate::verifier::NodePass;

/// Gives the cluster's nodes their pod ranges.
pub struct Ipam {
    pub nodes: Api<Node>,
    pub ec2: aws_sdk_ec2::Client,
    pub binding: Binding,
}

/// The pod range of `instance` from the network interfaces attached to it:
/// the IPv6 prefix of its one interface, which must have exactly one (as
/// kops requires); otherwise why not.
pub fn pod_cidr(instance: &str, interfaces: &[NetworkInterface]) -> Result<String, String> {
    let [interface] = interfaces else {
        return Err(format!(
            "instance {instance} has {} network interfaces, expected 1",
            interfaces.len()
        ));
    };
    match interface.ipv6_prefixes() {
        [one] => one.ipv6_prefix().map(str::to_string).ok_or_else(|| {
            format!(
                "interface {} of instance {instance} has an empty IPv6 prefix",
                interface.network_interface_id().unwrap_or("?")
            )
        }),
        prefixes => Err(format!(
            "interface {} of instance {instance} has {} IPv6 prefixes, expected 1",
            interface.network_interface_id().unwrap_or("?"),
            prefixes.len()
        )),
    }
}

impl Ipam {
    /// One pass over the nodes: the number given a pod range. A node whose
    /// instance cannot say is named in a warning and tried again next pass.
    pub async fn run_once(&self) -> Result<usize, String> {
        let nodes: Vec<Node> = all_nodes(&self.nodes)
            .await?
            .into_iter()
            .filter(|n| {
                n.spec
                    .as_ref()
                    .is_some_and(|s| s.pod_cidrs.as_ref().is_none_or(|c| c.is_empty()))
            })
            .collect();
        let ids = Binding::claimed_ids(&nodes);
        if ids.is_empty() {
            return Ok(0);
        }
        let instances = instances(&self.ec2, &ids).await?;
        let mut assigned = 0;
        for (name, _, instance) in self.binding.bind(&nodes, &instances) {
            let instance = instance.instance_id().unwrap_or_default();
            match self.assign(name, instance).await {
                Ok(true) => assigned += 1,
                Ok(false) => {}
                Err(reason) => tracing::warn!("node {name}: {reason}"),
            }
        }
        Ok(assigned)
    }

    /// Gives node `name` the prefix of `instance`: whether it was given.
    async fn assign(&self, name: &str, instance: &str) -> Result<bool, String> {
        let interfaces = self
            .ec2
            .describe_network_interfaces()
            .filters(
                Filter::builder()
                    .name("attachment.instance-id")
                    .values(instance)
                    .build(),
            )
            .into_paginator()
            .items()
            .send()
            .collect::<Result<Vec<_>, _>>()
            .await
            .map_err(|e| {
                format!(
                    "EC2 DescribeNetworkInterfaces {instance}: {}",
                    kops_bootstrap::text::error_chain(&e)
                )
            })?;
        let cidr = match pod_cidr(instance, &interfaces) {
            Ok(cidr) => cidr,
            Err(reason) => return Err(format!("no pod range: {reason}")),
        };
        self.nodes
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"podCIDR": cidr, "podCIDRs": [cidr]}})),
            )
            .await
            .map_err(|e| format!("cannot give it its pod range: {e}"))?;
        tracing::info!("node {name}: pod range {cidr} (instance {instance})");
        Ok(true)
    }
}

#[async_trait::async_trait]
impl NodePass for Ipam {
    async fn run_once(&self) -> Result<usize, String> {
        Ipam::run_once(self).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_ec2::types::Ipv6PrefixSpecification;

    fn interface(id: &str, prefixes: &[&str]) -> NetworkInterface {
        NetworkInterface::builder()
            .network_interface_id(id)
            .set_ipv6_prefixes(Some(
                prefixes
                    .iter()
                    .map(|p| Ipv6PrefixSpecification::builder().ipv6_prefix(*p).build())
                    .collect(),
            ))
            .build()
    }

    #[test]
    fn the_one_prefix_of_the_one_interface_is_the_pod_range() {
        assert_eq!(
            pod_cidr("i-1", &[interface("eni-1", &["2001:db8:0:1:a::/80"])]),
            Ok("2001:db8:0:1:a::/80".to_string())
        );
        assert_eq!(
            pod_cidr("i-1", &[interface("eni-1", &[])]),
            Err("interface eni-1 of instance i-1 has 0 IPv6 prefixes, expected 1".into())
        );
        assert_eq!(
            pod_cidr(
                "i-1",
                &[interface("eni-1", &["2001:db8::/80", "2001:db8:1::/80"])]
            ),
            Err("interface eni-1 of instance i-1 has 2 IPv6 prefixes, expected 1".into())
        );
        assert_eq!(
            pod_cidr(
                "i-1",
                &[
                    interface("eni-1", &["2001:db8::/80"]),
                    interface("eni-2", &[])
                ]
            ),
            Err("instance i-1 has 2 network interfaces, expected 1".into())
        );
        assert_eq!(
            pod_cidr("i-1", &[]),
            Err("instance i-1 has 0 network interfaces, expected 1".into())
        );
    }
}
