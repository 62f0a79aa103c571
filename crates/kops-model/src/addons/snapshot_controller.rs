//! The CSI snapshot controller (`snapshot-controller.addons.k8s.io`), on
//! when `spec.snapshotController.enabled` is true: the volume snapshot CRDs,
//! the controller that takes snapshots through the CSI drivers, and its
//! validation webhook (serving certificate from cert-manager).
//!
//! `spec.snapshotController.installDefaultClass` also installs a default
//! VolumeSnapshotClass for the EBS CSI driver.

use serde_json::{json, Value};

use super::{pods, template, TemplateError};
use crate::Model;

const KEY: &str = "snapshot-controller.addons.k8s.io";
const TEMPLATE: &str = include_str!("snapshot_controller/manifest.yaml");

pub(super) fn objects(model: &Model<'_>) -> Result<Option<Vec<Value>>, TemplateError> {
    let Some(spec) = model.cluster.spec.snapshot_controller.as_ref() else {
        return Ok(None);
    };
    if spec.enabled != Some(true) {
        return Ok(None);
    }
    let install_default_class = spec
        .extra
        .get("installDefaultClass")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let context = json!({
        "cluster_name": model.name(),
        "install_default_class": install_default_class,
    });
    let mut objects = template::render(KEY, TEMPLATE, &context)?;
    pods::mark(&mut objects);
    Ok(Some(objects))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addons::tests::{assert_golden, cluster};
    use crate::security::tests::model;

    #[test]
    fn identical_to_kops_in_every_case() {
        assert_golden(KEY, 2);
    }

    #[test]
    fn default_class_only_when_asked() {
        let (mut cluster, groups) = cluster();
        assert!(objects(&model(&cluster, &groups)).unwrap().is_none());
        let mut spec = kops_api::cluster::EnabledSpec {
            enabled: Some(true),
            ..Default::default()
        };
        cluster.spec.snapshot_controller = Some(spec.clone());
        let count = |cluster: &kops_api::Cluster| {
            objects(&model(cluster, &groups))
                .unwrap()
                .unwrap()
                .iter()
                .filter(|o| o["kind"] == "VolumeSnapshotClass")
                .count()
        };
        assert_eq!(count(&cluster), 0);
        spec.extra.insert("installDefaultClass".into(), json!(true));
        cluster.spec.snapshot_controller = Some(spec);
        assert_eq!(count(&cluster), 1);
    }
}
