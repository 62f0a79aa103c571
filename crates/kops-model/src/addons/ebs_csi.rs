//! The AWS EBS CSI driver (`aws-ebs-csi-driver.addons.k8s.io`): the
//! controller that creates, attaches, resizes and snapshots EBS volumes, and
//! the node daemon that mounts them. The manifest is the upstream chart as
//! kops ships it (`ebs_csi/manifest.yaml`); this module fills it in.
//!
//! From `spec.cloudConfig.awsEBSCSIDriver`: `version` (the driver's image
//! tag, default kops' pinned release), `kubeAPIQPS` / `kubeAPIBurst` (the
//! provisioner's API rate), `hostNetwork` (the node daemon on the host
//! network, dropping its zone-label requirement), `volumeAttachLimit`,
//! `podAnnotations`; `managed: false` means kops does not deploy it (not
//! rendered). From the cluster: the region and cloud labels (tags on the
//! volumes), two controller replicas with more than one control-plane
//! group, IPv6-only clusters' IMDS endpoint, the snapshot sidecar when the
//! snapshot controller runs, Kubernetes 1.35's allocatable refresh.
//!
//! With IAM roles for service accounts (`iam.useServiceAccountExternalPermissions`)
//! the controller leaves the control plane (scheduled on any Linux node,
//! tolerating only critical-addon taints) and its containers get the web
//! identity of the role `ebs-csi-controller-sa.kube-system.sa.<cluster>`,
//! as kops wires it: the role's ARN names the account, so without
//! [`Model::account_id`] the addon is not rendered (placeholder).
//!
//! kops' `SELinuxMount` feature flag has no counterpart in kops-rs: its
//! mounts and CSIDriver field stay off, as in kops by default.

use serde_json::{json, Value};

use super::{service_account_role, template, TemplateError};
use crate::Model;

/// The driver release kops deploys unless `version` says otherwise.
const DEFAULT_VERSION: &str = "v1.58.0";
/// The controller's service account, which carries the IAM role with IRSA.
const CONTROLLER_SERVICE_ACCOUNT: &str = "ebs-csi-controller-sa";

/// The driver's objects; `None` when kops does not deploy it or kops-rs
/// cannot render it (see the module's notes), an error when the template
/// does not render (a kops-rs bug).
pub(super) fn objects(model: &Model<'_>) -> Result<Option<Vec<Value>>, TemplateError> {
    let spec = &model.cluster.spec;
    let empty = Default::default();
    let driver = spec
        .cloud_config
        .as_ref()
        .and_then(|c| c.aws_ebs_csi_driver.as_ref())
        .unwrap_or(&empty);
    if driver.get("managed").and_then(Value::as_bool) == Some(false) {
        return Ok(None);
    }
    let Some(region) = crate::iam::region(model) else {
        return Ok(None);
    };

    let version = driver
        .get("version")
        .and_then(Value::as_str)
        .filter(|v| !v.is_empty())
        .unwrap_or(DEFAULT_VERSION);
    let pod_annotations = driver
        .get("podAnnotations")
        .and_then(Value::as_object)
        .filter(|a| !a.is_empty())
        .map(|a| {
            // kops writes every annotation value as a string.
            a.iter()
                .map(|(k, v)| (k.clone(), json!(scalar(v))))
                .collect::<serde_json::Map<_, _>>()
        });
    let mut cloud_labels: Vec<String> = model
        .cloud_labels()
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    cloud_labels.push(format!("KubernetesCluster={}", model.name()));
    cloud_labels.sort();
    let control_planes = model.groups_with(kops_api::Role::ControlPlane).count();
    let kubernetes_1_35 = spec
        .kubernetes_version
        .as_deref()
        .and_then(kops_api::version::KubernetesVersion::parse)
        .is_some_and(|v| (v.major, v.minor, v.patch) >= (1, 35, 0));

    let context = json!({
        "version": version,
        "pod_annotations": pod_annotations,
        "host_network": driver.get("hostNetwork").and_then(Value::as_bool).unwrap_or(false),
        "volume_attach_limit": driver.get("volumeAttachLimit").and_then(integer),
        "kube_api_qps": driver.get("kubeAPIQPS").map(quantity).unwrap_or_else(|| "20".into()),
        "kube_api_burst": driver.get("kubeAPIBurst").and_then(integer).map_or_else(|| "100".into(), |b| b.to_string()),
        "ipv6_only": model.ipv6_only(),
        "region": region,
        "cluster_name": model.name(),
        "cloud_labels": cloud_labels.join(","),
        "replicas": if control_planes > 1 { 2 } else { 1 },
        "irsa": crate::iam::irsa::uses_service_account_permissions(model),
        "control_plane_mode": spec.karpenter.as_ref().and_then(|k| k.enabled) == Some(true),
        "snapshot_controller": spec.snapshot_controller.as_ref().and_then(|s| s.enabled) == Some(true),
        "kubernetes_1_35": kubernetes_1_35,
        "selinux_mount": false,
    });
    let mut objects = template::render(
        "aws-ebs-csi-driver.addons.k8s.io",
        include_str!("ebs_csi/manifest.yaml"),
        &context,
    )?;
    Ok(
        service_account_role::add(model, &mut objects, &[CONTROLLER_SERVICE_ACCOUNT])
            .map(|()| objects),
    )
}

/// An integer setting, given as a number or a numeric string.
fn integer(value: &Value) -> Option<i64> {
    value
        .as_i64()
        .or_else(|| value.as_str().and_then(|s| s.trim().parse().ok()))
}

/// A Kubernetes quantity as kops prints it: whole numbers plain, fractions
/// in thousandths (`1.5` is `1500m`), strings as written.
fn quantity(value: &Value) -> String {
    match value {
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => i.to_string(),
            (None, Some(f)) if (f * 1000.0).fract() == 0.0 => format!("{}m", (f * 1000.0) as i64),
            _ => n.to_string(),
        },
        other => scalar(other),
    }
}

/// A scalar setting as text (strings unquoted).
fn scalar(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use crate::addons::manifest;
    use crate::addons::tests::{cluster, compare_golden_in_account};
    use crate::security::tests::model;

    const KEY: &str = "aws-ebs-csi-driver.addons.k8s.io";
    /// The account kops' test cloud reports.
    const TEST_ACCOUNT: &str = "123456789012";

    #[test]
    fn matches_kops_golden_manifests() {
        let (identical, placeholders) = compare_golden_in_account(KEY, |_, _| {});
        assert_eq!(placeholders, 0);
        if kops_testkit::shared_dir().is_some() {
            assert!(identical >= 47, "{identical}");
        }
    }

    /// Loads the addons' small cluster with `extra` appended to its spec.
    fn with_spec(extra: &str) -> (kops_api::Cluster, Vec<kops_api::InstanceGroup>) {
        let (mut cluster, groups) = cluster();
        let patch: serde_json::Value = serde_yaml_ng::from_str(extra).unwrap();
        let mut spec = serde_json::to_value(&cluster.spec).unwrap();
        for (k, v) in patch.as_object().unwrap() {
            spec[k] = v.clone();
        }
        cluster.spec = serde_json::from_value(spec).unwrap();
        (cluster, groups)
    }

    #[test]
    fn honours_the_driver_settings() {
        let (cluster, groups) = with_spec(
            "cloudConfig:
  awsEBSCSIDriver:
    version: v1.50.0
    kubeAPIQPS: 1.5
    kubeAPIBurst: 200
    volumeAttachLimit: 0
    hostNetwork: true
    podAnnotations:
      a.example.com/x: \"1\"
",
        );
        let model = model(&cluster, &groups);
        let text = manifest(&model, KEY).unwrap().unwrap();
        for line in [
            "image: registry.k8s.io/provider-aws/aws-ebs-csi-driver:v1.50.0\n",
            "- --kube-api-qps=1500m\n",
            "- --kube-api-burst=200\n",
            "- --volume-attach-limit=0\n",
            "a.example.com/x: \"1\"\n",
            "value: us-test-1\n",
        ] {
            assert!(text.contains(line), "{line}");
        }
        assert!(!text.contains("hostNetwork: false"));
        assert!(!text.contains("key: topology.kubernetes.io/zone"));
    }

    #[test]
    fn unmanaged_or_irsa_without_account_is_not_rendered() {
        let (cluster, groups) = with_spec("cloudConfig:\n  awsEBSCSIDriver:\n    managed: false\n");
        assert!(manifest(&model(&cluster, &groups), KEY).unwrap().is_none());

        let (cluster, groups) = with_spec("iam:\n  useServiceAccountExternalPermissions: true\n");
        let mut model = model(&cluster, &groups);
        assert!(manifest(&model, KEY).unwrap().is_none());
        model.account_id = Some(TEST_ACCOUNT);
        let text = manifest(&model, KEY).unwrap().unwrap();
        let arn = "arn:aws:iam::123456789012:role/ebs-csi-controller-sa.kube-system.sa.addons.example.com";
        // The five controller containers, none of the node daemon's.
        assert_eq!(text.matches(arn).count(), 5, "{text}");
    }
}
