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

use crate::iam::irsa::{self, ServiceAccount, AWS_AUDIENCE};
use crate::Model;

/// The driver release kops deploys unless `version` says otherwise.
const DEFAULT_VERSION: &str = "v1.58.0";
/// The controller's service account, which carries the IAM role with IRSA.
const CONTROLLER_SERVICE_ACCOUNT: &str = "ebs-csi-controller-sa";
/// Where the projected web-identity token is mounted in each container.
const TOKEN_DIR: &str = "/var/run/secrets/amazonaws.com/";
/// The projected token volume's name.
const TOKEN_VOLUME: &str = "token-amazonaws-com";

pub(super) fn objects(model: &Model<'_>) -> Option<Vec<Value>> {
    let spec = &model.cluster.spec;
    let empty = Default::default();
    let driver = spec
        .cloud_config
        .as_ref()
        .and_then(|c| c.aws_ebs_csi_driver.as_ref())
        .unwrap_or(&empty);
    if driver.get("managed").and_then(Value::as_bool) == Some(false) {
        return None;
    }
    let region = crate::iam::region(model)?;
    let irsa = irsa::uses_service_account_permissions(model);
    let role_arn = if irsa {
        Some(role_arn(model, &region)?)
    } else {
        None
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
        "irsa": irsa,
        "control_plane_mode": spec.karpenter.as_ref().and_then(|k| k.enabled) == Some(true),
        "snapshot_controller": spec.snapshot_controller.as_ref().and_then(|s| s.enabled) == Some(true),
        "kubernetes_1_35": kubernetes_1_35,
        "selinux_mount": false,
    });
    // A template error is a kops-rs bug the golden tests catch; the caller
    // then writes a placeholder rather than a wrong manifest.
    let mut objects = super::template::render(
        "aws-ebs-csi-driver.addons.k8s.io",
        include_str!("ebs_csi/manifest.yaml"),
        &context,
    )
    .ok()?;
    if let Some(arn) = role_arn {
        for object in &mut objects {
            add_web_identity(object, CONTROLLER_SERVICE_ACCOUNT, &arn);
        }
    }
    Some(objects)
}

/// The ARN of the controller's IRSA role (named as `iam::irsa` creates it),
/// when the account is known.
fn role_arn(model: &Model<'_>, region: &str) -> Option<String> {
    let account = model.account_id?;
    let sa = ServiceAccount {
        namespace: "kube-system".into(),
        name: CONTROLLER_SERVICE_ACCOUNT.into(),
    };
    Some(format!(
        "arn:{}:iam::{account}:role/{}",
        crate::iam::partition(region),
        irsa::role_name(model, &sa)
    ))
}

/// Gives the pods of a Deployment or DaemonSet running as `service_account`
/// the web identity of `role_arn`, as kops does for addons with IRSA roles:
/// a projected token for AWS' audience, mounted and named in every
/// container (`AWS_WEB_IDENTITY_TOKEN_FILE`) next to `AWS_ROLE_ARN`, and a
/// group that may read it (`fsGroup`, when the pod sets none).
fn add_web_identity(object: &mut Value, service_account: &str, role_arn: &str) {
    let workload = matches!(
        object.get("kind").and_then(Value::as_str),
        Some("Deployment" | "DaemonSet")
    ) && object.get("apiVersion").and_then(Value::as_str) == Some("apps/v1");
    if !workload {
        return;
    }
    let Some(pod) = object
        .pointer_mut("/spec/template/spec")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    if pod.get("serviceAccountName").and_then(Value::as_str) != Some(service_account) {
        return;
    }
    push(
        pod,
        "volumes",
        json!({
            "name": TOKEN_VOLUME,
            "projected": {
                "defaultMode": 0o644,
                "sources": [{"serviceAccountToken": {
                    "audience": AWS_AUDIENCE,
                    "expirationSeconds": 86400,
                    "path": "token",
                }}],
            },
        }),
    );
    if let Some(containers) = pod.get_mut("containers").and_then(Value::as_array_mut) {
        for container in containers.iter_mut().filter_map(Value::as_object_mut) {
            push(
                container,
                "volumeMounts",
                json!({"mountPath": TOKEN_DIR, "name": TOKEN_VOLUME, "readOnly": true}),
            );
            push(
                container,
                "env",
                json!({"name": "AWS_ROLE_ARN", "value": role_arn}),
            );
            push(
                container,
                "env",
                json!({"name": "AWS_WEB_IDENTITY_TOKEN_FILE", "value": format!("{TOKEN_DIR}token")}),
            );
        }
    }
    let security = pod.entry("securityContext").or_insert_with(|| json!({}));
    if let Some(security) = security.as_object_mut() {
        security.entry("fsGroup").or_insert(json!(10001));
    }
}

/// Appends `item` to the list `key` of `map`, creating the list.
fn push(map: &mut serde_json::Map<String, Value>, key: &str, item: Value) {
    let list = map.entry(key).or_insert_with(|| json!([]));
    if let Some(list) = list.as_array_mut() {
        list.push(item);
    }
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
    use super::*;
    use crate::addons::manifest;
    use crate::addons::tests::{assert_same, cluster, golden_cases};
    use crate::security::tests::model;

    const KEY: &str = "aws-ebs-csi-driver.addons.k8s.io";
    /// The account kops' test cloud reports.
    const TEST_ACCOUNT: &str = "123456789012";

    #[test]
    fn matches_kops_golden_manifests() {
        let (mut identical, mut placeholders) = (0, 0);
        for (case, cluster, groups, theirs) in golden_cases(KEY) {
            let mut model = model(&cluster, &groups);
            model.account_id = Some(TEST_ACCOUNT);
            // kops' test cloud puts its region in a partition of its own.
            let theirs = theirs.replace("arn:aws-test:", "arn:aws:");
            match manifest(&model, KEY).expect("renders") {
                Some(ours) => {
                    assert_same(&case, &ours, &theirs);
                    identical += 1;
                }
                None => placeholders += 1,
            }
        }
        eprintln!("{KEY}: {identical} identical, {placeholders} not rendered");
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
