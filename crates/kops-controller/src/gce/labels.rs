//! Node labels on Google Cloud, as kops' GCE node identifier finds them:
//! the node's instance (its `spec.providerID`, `gce://<project>/<zone>/<name>`)
//! must be in this project, named as the node (kops-controller certified
//! the node as its instance's name, so a kubelet cannot claim another
//! instance), running and of this cluster (`cluster-name` metadata); its
//! instance group comes from the managed instance group that made it
//! (`created-by`), the instance's version in it, and that template's
//! `kops-k8s-io-instance-group-name` metadata (the instance's own
//! metadata is not trusted for it); its role labels from its network tags
//! (kops' role tags). The controller sets those labels and
//! `kops.k8s.io/instancegroup`, and removes role labels the node's tags
//! do not give.

use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use std::collections::BTreeMap;

use super::compute::CallError;
use super::compute::INSTANCE_GROUP_KEY;
use super::nodes::GceBinding;
use crate::identity::INSTANCE_GROUP_TAG;
use crate::verifier::NodePass;
use kops_bootstrap::gce::metadata::last_component;
use kops_bootstrap::text::escape;

/// Labels the nodes of one Google Cloud cluster.
pub struct GceLabeler {
    pub nodes: Api<Node>,
    pub binding: GceBinding,
}

/// The role label each of kops' role tags gives.
fn role_labels(cluster: &str) -> [(String, &'static str); 3] {
    let tag = |role: &str| kops_api::names::gce_tag_for_role(cluster, role);
    [
        (
            tag("control-plane"),
            "node-role.kubernetes.io/control-plane",
        ),
        (tag("node"), "node-role.kubernetes.io/node"),
        (tag("apiserver"), "node-role.kubernetes.io/api-server"),
    ]
}

impl GceLabeler {
    /// One pass over all nodes: the number of nodes patched.
    pub async fn run_once(&self) -> Result<usize, String> {
        let nodes = crate::node_labels::all_nodes(&self.nodes).await?;
        let mut patched = 0;
        for node in &nodes {
            let name = node.metadata.name.clone().unwrap_or_default();
            let Some(provider_id) = node.spec.as_ref().and_then(|s| s.provider_id.clone()) else {
                continue;
            };
            match self.identify(&name, &provider_id).await {
                Ok((group, wanted)) => {
                    if crate::node_labels::reconcile(&self.nodes, node, &group, &wanted).await {
                        patched += 1;
                    }
                }
                Err(reason) => tracing::warn!("node labelling: node {}: {reason}", escape(&name)),
            }
        }
        Ok(patched)
    }

    /// The instance group and the labels of the node `name` claiming
    /// `provider_id`.
    pub async fn identify(
        &self,
        name: &str,
        provider_id: &str,
    ) -> Result<(String, BTreeMap<String, String>), String> {
        let (zone, instance) = self.binding.instance(name, provider_id).await?;
        let (project, zone) = (self.binding.project.as_str(), zone.as_str());
        let failed = |what: &str, e: CallError| match e {
            CallError::NotFound => format!("{what} does not exist"),
            CallError::Failed(reason) => reason,
        };
        // The managed group that made it, and the template of its version.
        let created_by = instance.metadata_value("created-by").unwrap_or_default();
        let group_parts: Vec<&str> = created_by.split('/').collect();
        let [_, _, _, group_zone, "instanceGroupManagers", manager] = group_parts.as_slice() else {
            return Err(format!(
                "instance {name} was not made by a managed instance group"
            ));
        };
        if *group_zone != zone {
            return Err(format!(
                "instance {name} was made by a group of another zone"
            ));
        }
        let members = self
            .binding
            .compute
            .managed_instances(project, zone, manager)
            .await
            .map_err(|e| failed(&format!("managed instance group {manager}"), e))?;
        let member = members
            .iter()
            .find(|m| m.id == instance.id && last_component(&m.instance) == name)
            .ok_or_else(|| format!("instance {name} is not a member of group {manager}"))?;
        let template = member
            .version
            .as_ref()
            .map(|v| last_component(&v.instance_template).to_string())
            .filter(|t| !t.is_empty())
            .ok_or_else(|| format!("instance {name} has no version in group {manager}"))?;
        let template = self
            .binding
            .compute
            .instance_template(project, &template)
            .await
            .map_err(|e| failed(&format!("instance template {template}"), e))?;
        let group = template
            .properties
            .metadata
            .value(INSTANCE_GROUP_KEY)
            .filter(|g| !g.is_empty())
            .ok_or_else(|| {
                format!(
                    "instance template {} names no instance group",
                    template.name
                )
            })?
            .to_string();

        let mut labels = BTreeMap::new();
        for (tag, label) in role_labels(&self.binding.cluster) {
            if instance.tags.items.contains(&tag) {
                labels.insert(label.to_string(), String::new());
            }
        }
        labels.insert(INSTANCE_GROUP_TAG.to_string(), group.clone());
        Ok((group, labels))
    }
}

#[async_trait::async_trait]
impl NodePass for GceLabeler {
    async fn run_once(&self) -> Result<usize, String> {
        GceLabeler::run_once(self).await
    }
}
