//! kops-controller's node labelling: a kubelet may not give itself role
//! labels (`node-role.kubernetes.io/*`; the NodeRestriction admission
//! plugin refuses them), so the controller sets them, as kops' does.
//!
//! For every node bound to its instance ([`crate::nodes`]: the instance in
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
use kops_state::ObjectStore;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::{json, Value};

use crate::nodes::Binding;
use crate::verify::{escape, tag, INSTANCE_GROUP_TAG};

/// Role labels the controller removes when a node's group does not give
/// them (kops' managed labels).
const MANAGED_ROLE_LABELS: &[&str] = &[
    "node-role.kubernetes.io/api-server",
    "node-role.kubernetes.io/node",
    "node-role.kubernetes.io/control-plane",
];

/// Labels nodes of one cluster.
pub struct Labeler {
    pub nodes: Api<Node>,
    pub ec2: aws_sdk_ec2::Client,
    pub config_store: Arc<dyn ObjectStore>,
    pub binding: Binding,
}

/// Every node of the cluster (the controller's passes look at all).
pub(crate) async fn all_nodes(nodes: &Api<Node>) -> Result<Vec<Node>, String> {
    nodes
        .list(&ListParams::default())
        .await
        .map(|list| list.items)
        .map_err(|e| format!("cannot list nodes: {e}"))
}

/// The labels to set and to remove on a node that has `current`, for a
/// group whose node config gives `wanted` (the group's name included).
pub fn label_changes(
    current: &BTreeMap<String, String>,
    wanted: &BTreeMap<String, String>,
) -> (BTreeMap<String, String>, Vec<String>) {
    let set = wanted
        .iter()
        .filter(|(k, v)| current.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let remove = MANAGED_ROLE_LABELS
        .iter()
        .filter(|l| current.contains_key(**l) && !wanted.contains_key(**l))
        .map(|l| l.to_string())
        .collect();
    (set, remove)
}

/// Gives `node` (of instance group `group`) the `wanted` labels and takes
/// away the role labels its group does not give, with one merge patch;
/// whether it was patched (a failure is a warning).
pub(crate) async fn reconcile(
    nodes: &Api<Node>,
    node: &Node,
    group: &str,
    wanted: &BTreeMap<String, String>,
) -> bool {
    let name = node.metadata.name.as_deref().unwrap_or_default();
    let current = node.metadata.labels.clone().unwrap_or_default();
    let (set, remove) = label_changes(&current, wanted);
    if set.is_empty() && remove.is_empty() {
        return false;
    }
    let mut labels = serde_json::Map::new();
    for (k, v) in set {
        labels.insert(k, Value::String(v));
    }
    for k in remove {
        labels.insert(k, Value::Null);
    }
    let patch = Patch::Merge(json!({"metadata": {"labels": labels}}));
    match nodes.patch(name, &PatchParams::default(), &patch).await {
        Ok(_) => {
            tracing::info!("labelled node {name} (instance group {})", escape(group));
            true
        }
        Err(e) => {
            tracing::warn!("cannot label node {name}: {e}");
            false
        }
    }
}

impl Labeler {
    /// One pass over all nodes: the number of nodes patched.
    pub async fn run_once(&self) -> Result<usize, String> {
        let nodes = all_nodes(&self.nodes).await?;
        let ids = Binding::claimed_ids(&nodes);
        if ids.is_empty() {
            return Ok(0);
        }
        let instances = crate::nodes::instances(&self.ec2, &ids).await?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_set_missing_and_remove_foreign_roles() {
        let current = BTreeMap::from([
            (
                "node-role.kubernetes.io/control-plane".to_string(),
                String::new(),
            ),
            ("team".to_string(), "a".to_string()),
            ("topology.kubernetes.io/zone".to_string(), "z".to_string()),
        ]);
        let wanted = BTreeMap::from([
            ("node-role.kubernetes.io/node".to_string(), String::new()),
            ("team".to_string(), "a".to_string()),
            (INSTANCE_GROUP_TAG.to_string(), "nodes".to_string()),
        ]);
        let (set, remove) = label_changes(&current, &wanted);
        assert_eq!(
            set.keys().cloned().collect::<Vec<_>>(),
            vec![INSTANCE_GROUP_TAG, "node-role.kubernetes.io/node"]
        );
        assert_eq!(remove, vec!["node-role.kubernetes.io/control-plane"]);
    }
}
