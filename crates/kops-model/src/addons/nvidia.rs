//! NVIDIA GPU support (`nvidia.addons.k8s.io`), on when
//! `spec.containerd.nvidiaGPU.enabled` is true: the device plugin DaemonSet
//! and the `nvidia` RuntimeClass on GPU nodes, and with
//! `nvidiaGPU.dcgmExporter.enabled` the DCGM metrics exporter.
//!
//! From `spec.containerd`: `nvidiaGPU.image` (the device plugin's image)
//! and `seLinuxEnabled` (the containers' SELinux type). A cluster whose GPU
//! support is switched on by instance groups alone stays a placeholder:
//! kops takes the plugin's settings from the cluster's containerd only.

use serde_json::{json, Value};

use super::{pods, template, TemplateError};
use crate::Model;

const KEY: &str = "nvidia.addons.k8s.io";
const TEMPLATE: &str = include_str!("nvidia/manifest.yaml");
/// The device plugin's image unless `nvidiaGPU.image` says.
const IMAGE: &str = "nvcr.io/nvidia/k8s-device-plugin:v0.17.3";

pub(super) fn objects(model: &Model<'_>) -> Result<Option<Vec<Value>>, TemplateError> {
    let containerd = model
        .cluster
        .spec
        .containerd
        .as_ref()
        .and_then(|c| serde_json::to_value(c).ok())
        .unwrap_or(Value::Null);
    let gpu = &containerd["nvidiaGPU"];
    if gpu["enabled"].as_bool() != Some(true) {
        return Ok(None);
    }
    let context = json!({
        "image": gpu["image"].as_str().filter(|i| !i.is_empty()).unwrap_or(IMAGE),
        "selinux": containerd["seLinuxEnabled"].as_bool().unwrap_or(false),
        "dcgm_exporter": gpu["dcgmExporter"]["enabled"].as_bool().unwrap_or(false),
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
        assert_golden(KEY, 1);
    }

    #[test]
    fn dcgm_exporter_and_selinux_when_asked() {
        let (mut cluster, groups) = cluster();
        assert!(objects(&model(&cluster, &groups)).unwrap().is_none());
        cluster.spec.containerd = serde_json::from_value(json!({
            "seLinuxEnabled": true,
            "nvidiaGPU": {"enabled": true, "dcgmExporter": {"enabled": true}},
        }))
        .unwrap();
        let objects = objects(&model(&cluster, &groups)).unwrap().unwrap();
        let daemonsets: Vec<_> = objects
            .iter()
            .filter(|o| o["kind"] == "DaemonSet")
            .collect();
        assert_eq!(daemonsets.len(), 2);
        for daemonset in daemonsets {
            let container = &daemonset["spec"]["template"]["spec"]["containers"][0];
            assert_eq!(
                container["securityContext"]["seLinuxOptions"]["type"],
                "spc_t"
            );
        }
    }
}
