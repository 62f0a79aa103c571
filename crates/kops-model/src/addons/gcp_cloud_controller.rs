//! Google Cloud's controller manager (`gcp-cloud-controller.addons.k8s.io`):
//! it initialises nodes, allocates their pod ranges from the cloud
//! (`CloudAllocator`) and runs the service and route controllers. A
//! DaemonSet on the control plane reading `/etc/kubernetes/cloud.config`,
//! its service account and cloud-provider-gcp's RBAC
//! (`gcp_cloud_controller/manifest.yaml`).
//!
//! Its flags are the completed spec's `cloudControllerManager` (kops'
//! Google Cloud defaults: the cluster name with dashes, cloud-allocated
//! node ranges from the pod range, every controller, leader election; see
//! `kops_api::populate`), as on AWS.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use super::{cloud_controller::flag_list, template, TemplateError};
use crate::Model;

/// The image kops deploys when the spec names none.
const IMAGE: &str = "registry.k8s.io/cloud-provider-gcp/cloud-controller-manager:v35.0.0";

pub(super) fn objects(model: &Model<'_>) -> Result<Option<Vec<Value>>, TemplateError> {
    let completed = kops_api::populate::completed_spec(
        model.cluster,
        &kops_api::populate::PopulateOptions {
            config_base: model.config_base,
            instance_groups: Some(model.groups),
            dns_zone_id: None,
        },
    );
    let user: Map<String, Value> = completed
        .spec
        .cloud_controller_manager
        .as_ref()
        .and_then(|c| serde_json::to_value(c).ok())
        .and_then(|c| c.as_object().cloned())
        .unwrap_or_default();
    let image = user.get("image").and_then(Value::as_str).unwrap_or(IMAGE);
    let cpu = user
        .get("cpuRequest")
        .and_then(Value::as_str)
        .unwrap_or("200m");
    let context = json!({
        "image": image,
        "cpu": cpu,
        "args": flag_list(BTreeMap::new(), &user, "gce"),
    });
    template::render(
        "gcp-cloud-controller.addons.k8s.io",
        include_str!("gcp_cloud_controller/manifest.yaml"),
        &context,
    )
    .map(Some)
}
