//! Which Google Cloud instance a Kubernetes node is, before the controller
//! acts on it (role labels, an IPv6 pod range): the GCE counterpart of
//! [`crate::aws::nodes`].
//!
//! A kubelet chooses its node's `spec.providerID`
//! (`gce://<project>/<zone>/<instance>`), so the id alone proves nothing.
//! The node's name is another matter: kops-controller certified the node
//! as its instance's name ([`super::identity_of`]), and a kubelet can only
//! write the Node its certificate names. So a node is bound to the
//! instance of its provider id only when that instance is in this
//! project, has the node's name, exists (`instances.get`), is running and
//! carries this cluster's `cluster-name` metadata.

use std::sync::Arc;

use super::compute::CLUSTER_NAME_KEY;
use super::compute::{CallError, Compute, Instance};
use kops_bootstrap::text::escape;

/// How nodes are bound to instances in one Google Cloud cluster.
#[derive(Clone)]
pub struct GceBinding {
    pub compute: Arc<Compute>,
    pub project: String,
    pub cluster: String,
}

/// The project, zone and instance name of a provider id
/// (`gce://<project>/<zone>/<instance>`). Kubelet chooses the provider id,
/// and the zone and name go into a Compute URL: each must be a resource
/// name as Compute's are (RFC 1035: a lowercase letter, then up to 62
/// lowercase letters, digits and hyphens, not ending with a hyphen).
pub fn provider_parts(provider_id: &str) -> Option<(&str, &str, &str)> {
    let parts: Vec<&str> = provider_id.strip_prefix("gce://")?.split('/').collect();
    match parts.as_slice() {
        [project, zone, name]
            if !project.is_empty() && is_resource_name(zone) && is_resource_name(name) =>
        {
            Some((project, zone, name))
        }
        _ => None,
    }
}

/// Whether `text` is a Compute resource name (a zone's, an instance's).
pub fn is_resource_name(text: &str) -> bool {
    let b = text.as_bytes();
    (1..=63).contains(&b.len())
        && b[0].is_ascii_lowercase()
        && b[b.len() - 1] != b'-'
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

impl GceBinding {
    /// The instance of node `name` claiming `provider_id`, with its zone;
    /// otherwise why the node is not bound to it (one line).
    pub async fn instance(
        &self,
        name: &str,
        provider_id: &str,
    ) -> Result<(String, Instance), String> {
        let Some((project, zone, instance_name)) = provider_parts(provider_id) else {
            return Err(format!(
                "provider id `{}` is not gce://<project>/<zone>/<instance>",
                escape(provider_id)
            ));
        };
        if project != self.project {
            return Err(format!(
                "provider id `{}` is not in project {}",
                escape(provider_id),
                self.project
            ));
        }
        if instance_name != name {
            return Err(format!(
                "provider id `{}` names another instance than the node",
                escape(provider_id)
            ));
        }
        let instance = self
            .compute
            .instance(project, zone, name)
            .await
            .map_err(|e| match e {
                CallError::NotFound => format!("instance {zone}/{name} does not exist"),
                CallError::Failed(reason) => reason,
            })?;
        if instance.status != "RUNNING" {
            return Err(format!("instance {name} is {}", escape(&instance.status)));
        }
        if instance.metadata_value(CLUSTER_NAME_KEY) != Some(self.cluster.as_str()) {
            return Err(format!(
                "instance {name} is not part of cluster {}",
                self.cluster
            ));
        }
        Ok((zone.to_string(), instance))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_ids_name_project_zone_and_instance() {
        assert_eq!(
            provider_parts("gce://p/us-test1-a/nodes-x"),
            Some(("p", "us-test1-a", "nodes-x"))
        );
        for bad in [
            "gce://p/us-test1-a",
            "gce://p/us-test1-a/n/extra",
            "gce:///us-test1-a/n",
            "aws:///us-east-1a/i-0123",
            "gce://p//n",
            "gce://p/us-test1-a?x=1/n",
            "gce://p/..%2f..%2fzones%2fz/n",
            "gce://p/US-TEST1-A/n",
            "gce://p/us-test1-a-/n",
            "gce://p/us test1/n",
            "gce://p/us-test1-a/n#f",
        ] {
            assert_eq!(provider_parts(bad), None, "{bad}");
        }
    }
}
