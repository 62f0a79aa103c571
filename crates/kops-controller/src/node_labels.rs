//! What the node labellers of every cloud share: the cluster's nodes, the
//! label changes a node needs, and the patch that makes them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use kops_bootstrap::text::escape;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::{json, Value};

/// Role labels the controller removes when a node's group does not give
/// them (kops' managed labels).
const MANAGED_ROLE_LABELS: &[&str] = &[
    "node-role.kubernetes.io/api-server",
    "node-role.kubernetes.io/node",
    "node-role.kubernetes.io/control-plane",
];

/// Every node of the cluster (the controller's passes look at all).
pub async fn all_nodes(nodes: &Api<Node>) -> Result<Vec<Node>, String> {
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
pub async fn reconcile(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::INSTANCE_GROUP_TAG;

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
