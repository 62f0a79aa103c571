//! Google Cloud's persistent-disk CSI driver
//! (`gcp-pd-csi-driver.addons.k8s.io`): the controller that creates and
//! attaches persistent disks (labelled with the cluster's name) and the
//! node daemon that mounts them, plus kops' CSI storage classes when kops
//! manages storage classes. The manifest is the driver's deployment as kops
//! ships it (`gcp_pd_csi_driver/manifest.yaml`).
//!
//! From `spec.cloudConfig.gcpPDCSIDriver`: `version` (the driver's image
//! tag, default kops' pinned release) and `defaultStorageClassName` (which
//! of `balanced-csi`, the default, and `balanced-storage` is the cluster's
//! default class). kops' `SELinuxMount` feature flag has no counterpart in
//! kops-rs: its mounts stay off, as in kops by default.

use serde_json::{json, Value};

use super::{template, TemplateError};
use crate::Model;

/// Whether kops deploys Google Cloud's persistent-disk CSI driver:
/// `cloudConfig.gcpPDCSIDriver.enabled`, on unless turned off.
pub fn enabled(model: &Model<'_>) -> bool {
    model
        .cluster
        .spec
        .cloud_config
        .as_ref()
        .and_then(|c| c.extra.get("gcpPDCSIDriver"))
        .and_then(|d| d.get("enabled"))
        .and_then(Value::as_bool)
        .unwrap_or(true)
}

/// The driver release kops deploys unless `version` says otherwise.
const DEFAULT_VERSION: &str = "v1.22.1";

pub(super) fn objects(model: &Model<'_>) -> Result<Option<Vec<Value>>, TemplateError> {
    let config = model.cluster.spec.cloud_config.as_ref();
    let driver = config.and_then(|c| c.extra.get("gcpPDCSIDriver"));
    let setting = |key: &str| {
        driver
            .and_then(|d| d.get(key))
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
    };
    let context = json!({
        "manage_storage_classes": config.and_then(|c| c.manage_storage_classes).unwrap_or(true),
        "default_class": setting("defaultStorageClassName").unwrap_or("balanced-csi"),
        "version": setting("version").unwrap_or(DEFAULT_VERSION),
        "cluster_label": kops_api::names::gce_safe_cluster_name(model.name()),
        "selinux_mount": false,
    });
    template::render(
        "gcp-pd-csi-driver.addons.k8s.io",
        include_str!("gcp_pd_csi_driver/manifest.yaml"),
        &context,
    )
    .map(Some)
}
