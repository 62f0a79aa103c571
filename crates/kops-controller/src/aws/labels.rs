//! kops-controller's node labelling: a kubelet may not give itself role
//! labels (`node-role.kubernetes.io/*`; the NodeRestriction admission
//! plugin refuses them), so the controller sets them, as kops' does.
//!
//! For every node bound to its instance ([`super::nodes`]: the instance in
//! its `spec.providerID`, running, of this cluster, whose name and
//! addresses the node has), it finds the instance's group (its
//! `kops.k8s.io/instancegroup` tag; one DescribeInstances for all nodes),
//! and the labels that group's node config gives kubelet
//! (`KubeletConfig.nodeLabels`: kops' role labels and `spec.nodeLabels`),
//! plus `kops.k8s.io/instancegroup`. Missing or different labels are set
//! with one merge patch per node; role labels the group does not have are
//! removed. Labels the controller does not manage are left alone. Each
//! node is reconciled on its own: a node that cannot be bound or patched,
//! or a group whose config cannot be read, is named in a warning and the
//! others are labelled all the same.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use kops_bootstrap::text::escape;
use kops_state::ObjectStore;
use kube::api::Api;
use serde_json::Value;

use super::nodes::{instances, tag, Binding};
use crate::identity::INSTANCE_GROUP_TAG;
use crate::node_labels::{all_nodes, reconcile};
use crate::verifier::NodePass;

/// Labels nodes of one cluster.
pub struct Labeler {
    pub nodes: Api<Node>,
    pub ec2: aws_sdk_ec2::Client,
    pub config_store: Arc<dyn ObjectStore>,
    pub binding: Binding,
}

impl Labeler {
    /// One pass over all nodes: the number of nodes patched.
    pub async fn run_once(&self) -> Result<usize, String> {
        let nodes = all_nodes(&self.nodes).await?;
        let ids = Binding::claimed_ids(&nodes);
        if ids.is_empty() {
            return Ok(0);
        }
        let instances = instances(&self.ec2, &ids).await?;
        let mut wanted_by_group: BTreeMap<String, Option<BTreeMap<String, String>>> =
            BTreeMap::new();
        let mut patched = 0;
        for (_, node, instance) in self.binding.bind(&nodes, &instances) {
            let Some(group) = tag(instance, INSTANCE_GROUP_TAG).filter(|g| !g.is_empty()) else {
                continue;
            };
            if !wanted_by_group.contains_key(group) {
                let labels = self.group_labels(group).await.unwrap_or_else(|e| {
                    tracing::warn!("node labelling: instance group {}: {e}", escape(group));
                    None
                });
                wanted_by_group.insert(group.to_string(), labels);
            }
            let Some(Some(wanted)) = wanted_by_group.get(group) else {
                continue;
            };
            if reconcile(&self.nodes, node, group, wanted).await {
                patched += 1;
            }
        }
        Ok(patched)
    }

    /// The labels a group's node config gives kubelet, with the group's
    /// name; `None` when the group has no node config.
    async fn group_labels(&self, group: &str) -> Result<Option<BTreeMap<String, String>>, String> {
        for role in ["node", "control-plane", "apiserver"] {
            let key = format!("igconfig/{role}/{group}/nodeupconfig.yaml");
            let Some(bytes) = self
                .config_store
                .read(&key)
                .await
                .map_err(|e| format!("cannot read {key}: {e}"))?
            else {
                continue;
            };
            let config: Value = serde_yaml_ng::from_slice(&bytes)
                .map_err(|e| format!("{key} does not parse: {e}"))?;
            let mut labels: BTreeMap<String, String> = config
                .pointer("/KubeletConfig/nodeLabels")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                        .collect()
                })
                .unwrap_or_default();
            labels.insert(INSTANCE_GROUP_TAG.to_string(), group.to_string());
            return Ok(Some(labels));
        }
        Ok(None)
    }
}

#[async_trait::async_trait]
impl NodePass for Labeler {
    async fn run_once(&self) -> Result<usize, String> {
        Labeler::run_once(self).await
    }
}
