//! aws-iam-authenticator (`authentication.aws`), on when
//! `spec.authentication.aws` is set: a DaemonSet on the control plane that
//! the API server asks (by webhook) who an IAM identity is.
//!
//! From `spec.authentication.aws`: `image`, `backendMode` (the identity
//! mappings' source; the mounted config file unless it says otherwise),
//! `clusterID` (default: the cluster's name, passed when set or when the
//! backend is not the mounted file), `identityMappings` (written as
//! IAMIdentityMapping objects for the `CRD` backend), `cpuRequest`,
//! `cpuLimit`, `memoryRequest`, `memoryLimit`, with kops' defaults. Its
//! objects are selected by `role.kubernetes.io/authentication=1`.

use serde_json::{json, Value};

use super::{pods, template, TemplateError};
use crate::Model;

const KEY: &str = "authentication.aws";
const TEMPLATE: &str = include_str!("authentication_aws/manifest.yaml");
/// The authenticator's image unless `image` says.
const IMAGE: &str =
    "public.ecr.aws/eks-distro/kubernetes-sigs/aws-iam-authenticator:v0.6.20-eks-1-30-7";

pub(super) fn objects(model: &Model<'_>) -> Result<Option<Vec<Value>>, TemplateError> {
    let spec = &model.cluster.spec;
    let Some(aws) = spec.authentication.as_ref().and_then(|a| a.aws.as_ref()) else {
        return Ok(None);
    };
    let text = |key: &str| -> Option<String> {
        match aws.extra.get(key)? {
            Value::String(s) if s.is_empty() => None,
            Value::String(s) => Some(s.clone()),
            Value::Null => None,
            other => Some(other.to_string()),
        }
    };
    let backend_mode = aws.backend_mode.clone().unwrap_or_default();
    let mounted_file = backend_mode.is_empty() || backend_mode.contains("MountedFile");
    let cluster_id = match aws.cluster_id.clone().filter(|c| !c.is_empty()) {
        Some(id) => id,
        None if !mounted_file => model.name().to_string(),
        None => String::new(),
    };
    let mappings: Vec<Value> = if backend_mode.contains("CRD") {
        aws.identity_mappings
            .iter()
            .flatten()
            .map(|m| {
                json!({
                    "arn": m.arn.clone().unwrap_or_default(),
                    "username": m.username.clone().unwrap_or_default(),
                    "groups": m.groups.clone().unwrap_or_default(),
                })
            })
            .collect()
    } else {
        Vec::new()
    };
    let selinux = spec
        .containerd
        .as_ref()
        .and_then(|c| serde_json::to_value(c).ok())
        .and_then(|c| c.get("seLinuxEnabled").and_then(Value::as_bool))
        .unwrap_or(false);
    let context = json!({
        "node_role": "node-role.kubernetes.io/control-plane",
        "selinux": selinux,
        "image": text("image").unwrap_or_else(|| IMAGE.into()),
        "mounted_file": mounted_file,
        "cluster_id": cluster_id,
        "backend_mode": backend_mode,
        "memory_request": text("memoryRequest").unwrap_or_else(|| "20Mi".into()),
        "cpu_request": text("cpuRequest").unwrap_or_else(|| "10m".into()),
        "memory_limit": text("memoryLimit").unwrap_or_else(|| "20Mi".into()),
        "cpu_limit": text("cpuLimit"),
        "mappings": mappings,
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
    fn mounted_file_backend_reads_the_config_map() {
        let (mut cluster, groups) = cluster();
        assert!(objects(&model(&cluster, &groups)).unwrap().is_none());
        cluster.spec.authentication = Some(kops_api::cluster::AuthenticationSpec {
            aws: Some(Default::default()),
            ..Default::default()
        });
        let objects = objects(&model(&cluster, &groups)).unwrap().unwrap();
        let daemonset = objects.iter().find(|o| o["kind"] == "DaemonSet").unwrap();
        let pod = &daemonset["spec"]["template"]["spec"];
        assert_eq!(
            pod["containers"][0]["args"],
            json!([
                "server",
                "--config=/etc/aws-iam-authenticator/config.yaml",
                "--state-dir=/var/aws-iam-authenticator",
                "--kubeconfig-pregenerated=true"
            ])
        );
        assert_eq!(
            pod["volumes"][0]["configMap"]["name"],
            "aws-iam-authenticator"
        );
        let text = manifest_text(&cluster, &groups);
        assert!(text.contains("    role.kubernetes.io/authentication: \"1\"\n"));
        assert!(!text.contains("k8s-addon:"));
    }

    fn manifest_text(cluster: &kops_api::Cluster, groups: &[kops_api::InstanceGroup]) -> String {
        crate::addons::manifest(&model(cluster, groups), KEY)
            .unwrap()
            .unwrap()
    }
}
