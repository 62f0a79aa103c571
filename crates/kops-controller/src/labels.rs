//! kops-controller's node labelling: a kubelet may not give itself role
//! labels (`node-role.kubernetes.io/*`; the NodeRestriction admission
//! plugin refuses them), so the controller sets them, as kops' does.
//!
//! For every node it finds the instance (`spec.providerID`,
//! `aws:///<zone>/<instance-id>`), the instance's group (its
//! `kops.k8s.io/instancegroup` tag, one DescribeInstances for all nodes),
//! and the labels that group's node config gives kubelet
//! (`KubeletConfig.nodeLabels`: kops' role labels and `spec.nodeLabels`),
//! plus `kops.k8s.io/instancegroup`. Missing or different labels are set
//! with one merge patch per node; role labels the group does not have are
//! removed. Labels the controller does not manage are left alone.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use kops_state::ObjectStore;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::{json, Value};

use crate::verify::INSTANCE_GROUP_TAG;

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
}

/// Every node of the cluster (the controller's passes look at all).
pub(crate) async fn all_nodes(nodes: &Api<Node>) -> Result<Vec<Node>, String> {
    nodes
        .list(&ListParams::default())
        .await
        .map(|list| list.items)
        .map_err(|e| format!("cannot list nodes: {e}"))
}

/// The instance id in a node's provider id (`aws:///us-east-1a/i-0abc`).
pub fn instance_id(provider_id: &str) -> Option<&str> {
    provider_id
        .strip_prefix("aws://")?
        .rsplit('/')
        .next()
        .filter(|id| id.starts_with("i-"))
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

impl Labeler {
    /// One pass over all nodes: the number of nodes patched.
    pub async fn run_once(&self) -> Result<usize, String> {
        let nodes = all_nodes(&self.nodes).await?;
        let mut by_instance: HashMap<String, (String, BTreeMap<String, String>)> = HashMap::new();
        for node in &nodes {
            let Some(name) = node.metadata.name.clone() else {
                continue;
            };
            let Some(id) = node
                .spec
                .as_ref()
                .and_then(|s| s.provider_id.as_deref())
                .and_then(instance_id)
            else {
                continue;
            };
            let labels = node.metadata.labels.clone().unwrap_or_default();
            by_instance.insert(id.to_string(), (name, labels));
        }
        if by_instance.is_empty() {
            return Ok(0);
        }
        let groups = self
            .groups_of(by_instance.keys().cloned().collect())
            .await?;
        let mut wanted_by_group: HashMap<String, Option<BTreeMap<String, String>>> = HashMap::new();
        let mut patched = 0;
        for (instance, (name, current)) in &by_instance {
            let Some(group) = groups.get(instance) else {
                continue;
            };
            if !wanted_by_group.contains_key(group) {
                let labels = self.group_labels(group).await?;
                wanted_by_group.insert(group.clone(), labels);
            }
            let Some(Some(wanted)) = wanted_by_group.get(group) else {
                continue;
            };
            let (set, remove) = label_changes(current, wanted);
            if set.is_empty() && remove.is_empty() {
                continue;
            }
            let mut labels = serde_json::Map::new();
            for (k, v) in set {
                labels.insert(k, Value::String(v));
            }
            for k in remove {
                labels.insert(k, Value::Null);
            }
            self.nodes
                .patch(
                    name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"metadata": {"labels": labels}})),
                )
                .await
                .map_err(|e| format!("cannot label node {name}: {e}"))?;
            tracing::info!("labelled node {name} (instance group {group})");
            patched += 1;
        }
        Ok(patched)
    }

    /// Instance id → instance group, from the instances' tags.
    async fn groups_of(&self, ids: Vec<String>) -> Result<HashMap<String, String>, String> {
        let mut out = HashMap::new();
        let mut pages = self
            .ec2
            .describe_instances()
            .set_instance_ids(Some(ids))
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| {
                format!("EC2 DescribeInstances: {}", crate::verify::error_chain(&e))
            })?;
            for instance in page.reservations().iter().flat_map(|r| r.instances()) {
                let group = instance
                    .tags()
                    .iter()
                    .find(|t| t.key() == Some(INSTANCE_GROUP_TAG))
                    .and_then(|t| t.value());
                if let (Some(id), Some(group)) = (instance.instance_id(), group) {
                    out.insert(id.to_string(), group.to_string());
                }
            }
        }
        Ok(out)
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
    fn provider_ids_name_instances() {
        assert_eq!(instance_id("aws:///us-east-1a/i-0abc"), Some("i-0abc"));
        assert_eq!(instance_id("gce://p/z/n"), None);
    }

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
