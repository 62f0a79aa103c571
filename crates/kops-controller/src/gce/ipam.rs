//! kops-controller's cloud IPAM on Google Cloud (`enableCloudIPAM`, which
//! `update` sets for IPv6-only clusters only, as kops does): each instance
//! of an IPv6 subnet gets an external IPv6 range on its network interface
//! (an `ipv6AccessConfigs` entry: `externalIpv6` and
//! `externalIpv6PrefixLength`), and that range becomes its node's pod
//! range. A node without `spec.podCIDRs` gets `podCIDR` and `podCIDRs` set
//! to the one external IPv6 range of its instance; a node that has them is
//! left alone. IP-alias (IPv4) clusters are not this controller's: kops
//! leaves their pod ranges to the cloud controller manager's node IPAM
//! (`CloudAllocator`, from the instances' alias IP ranges).
//!
//! Only a node bound to its instance ([`super::nodes`]) is given that
//! instance's range, and each node is handled on its own: one that fails
//! is named in a warning (once per reason) and tried again next pass.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::compute::Instance;
use super::nodes::GceBinding;
use crate::node_labels::all_nodes;
use crate::verifier::NodePass;
use kops_bootstrap::text::escape;

/// Gives a Google Cloud cluster's nodes their pod ranges.
pub struct GceIpam {
    pub nodes: Api<Node>,
    pub binding: GceBinding,
    /// (node, reason) pairs already warned about.
    pub warned: Arc<Mutex<HashSet<(String, String)>>>,
}

/// The pod range of `instance`: its one external IPv6 range (address and
/// prefix length) over all its interfaces, as kops requires exactly one;
/// otherwise why not.
pub fn pod_cidr(instance: &Instance) -> Result<String, String> {
    let ranges: Vec<String> = instance
        .network_interfaces
        .iter()
        .flat_map(|nic| &nic.ipv6_access_configs)
        .filter(|c| !c.external_ipv6.is_empty())
        .map(|c| format!("{}/{}", c.external_ipv6, c.external_ipv6_prefix_length))
        .collect();
    match ranges.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(format!(
            "instance {} has no external IPv6 range",
            instance.name
        )),
        many => Err(format!(
            "instance {} has {} external IPv6 ranges ({}), expected 1",
            instance.name,
            many.len(),
            escape(&many.join(", "))
        )),
    }
}

impl GceIpam {
    /// One pass over the nodes: the number given a pod range.
    pub async fn run_once(&self) -> Result<usize, String> {
        let nodes = all_nodes(&self.nodes).await?;
        let mut assigned = 0;
        for node in &nodes {
            let Some(spec) = node.spec.as_ref() else {
                continue;
            };
            if spec.pod_cidrs.as_ref().is_some_and(|c| !c.is_empty()) {
                continue;
            }
            let name = node.metadata.name.as_deref().unwrap_or_default();
            let Some(provider_id) = spec.provider_id.as_deref() else {
                continue;
            };
            if !provider_id.starts_with("gce://") {
                continue;
            }
            match self.assign(name, provider_id).await {
                Ok(()) => assigned += 1,
                Err(reason) => self.warn_once(name, &reason),
            }
        }
        Ok(assigned)
    }

    /// Gives node `name` the range of the instance its provider id names.
    async fn assign(&self, name: &str, provider_id: &str) -> Result<(), String> {
        let (_, instance) = self.binding.instance(name, provider_id).await?;
        let cidr = pod_cidr(&instance).map_err(|reason| format!("no pod range: {reason}"))?;
        self.nodes
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"podCIDR": cidr, "podCIDRs": [cidr]}})),
            )
            .await
            .map_err(|e| format!("cannot give it its pod range: {e}"))?;
        tracing::info!("node {name}: pod range {cidr} (instance {provider_id})");
        Ok(())
    }

    fn warn_once(&self, name: &str, reason: &str) {
        let mut warned = self.warned.lock().unwrap_or_else(|e| e.into_inner());
        if warned.insert((name.to_string(), reason.to_string())) {
            tracing::warn!("cloud IPAM: node {}: {reason}", escape(name));
        }
    }
}

#[async_trait::async_trait]
impl NodePass for GceIpam {
    async fn run_once(&self) -> Result<usize, String> {
        GceIpam::run_once(self).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instance(nics: serde_json::Value) -> Instance {
        serde_json::from_value(json!({"name": "nodes-x", "networkInterfaces": nics})).unwrap()
    }

    #[test]
    fn the_one_external_ipv6_range_is_the_pod_range() {
        let one = instance(json!([{"networkIP": "10.0.0.3", "ipv6AccessConfigs": [
            {"type": "DIRECT_IPV6", "externalIpv6": "2600:1900:4000:1::", "externalIpv6PrefixLength": 96}
        ]}]));
        assert_eq!(pod_cidr(&one), Ok("2600:1900:4000:1::/96".to_string()));
        let none = instance(json!([{"networkIP": "10.0.0.3"}]));
        assert_eq!(
            pod_cidr(&none),
            Err("instance nodes-x has no external IPv6 range".into())
        );
        let two = instance(json!([
            {"ipv6AccessConfigs": [{"externalIpv6": "2600::", "externalIpv6PrefixLength": 96}]},
            {"ipv6AccessConfigs": [{"externalIpv6": "2601::", "externalIpv6PrefixLength": 96}]}
        ]));
        assert_eq!(
            pod_cidr(&two),
            Err(
                "instance nodes-x has 2 external IPv6 ranges (2600::/96, 2601::/96), expected 1"
                    .into()
            )
        );
    }
}
