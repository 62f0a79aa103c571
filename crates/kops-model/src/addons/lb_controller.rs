//! The AWS Load Balancer Controller
//! (`aws-load-balancer-controller.addons.k8s.io`), which provisions ALBs for
//! Ingresses and NLBs for Services, on when
//! `spec.awsLoadBalancerController.enabled` is true.
//!
//! From `spec.awsLoadBalancerController`: `version` (the image tag),
//! `enableWAF`, `enableWAFv2`, `enableShield`, `cpuRequest`, `cpuLimit`,
//! `memoryRequest`, `memoryLimit`, with kops' defaults. The controller tags
//! what it creates with the cluster's cloud labels. Without service-account
//! roles it runs on the control plane (host network, the masters' IAM
//! role); with them it runs on workers and assumes its own role.

use serde_json::{json, Value};

use super::{service_account_role, template, TemplateError};
use crate::Model;

const KEY: &str = "aws-load-balancer-controller.addons.k8s.io";
const TEMPLATE: &str = include_str!("lb_controller/manifest.yaml");
/// The controller's image tag unless `version` says.
const VERSION: &str = "v3.3.0";
const SERVICE_ACCOUNT: &str = "aws-load-balancer-controller";

pub(super) fn objects(model: &Model<'_>) -> Result<Option<Vec<Value>>, TemplateError> {
    let Some(context) = context(model) else {
        return Ok(None);
    };
    let mut objects = template::render(KEY, TEMPLATE, &context)?;
    Ok(service_account_role::add(model, &mut objects, &[SERVICE_ACCOUNT]).map(|()| objects))
}

/// The controller's `--default-tags`: `KubernetesCluster=<name>` and the
/// cluster's cloud labels, as `k=v` sorted as text and joined by commas.
pub(super) fn default_tags(model: &Model<'_>) -> String {
    let mut tags = vec![format!("KubernetesCluster={}", model.name())];
    for (key, value) in model.cluster.spec.cloud_labels.iter().flatten() {
        tags.push(format!("{key}={value}"));
    }
    tags.sort();
    tags.join(",")
}

fn context(model: &Model<'_>) -> Option<Value> {
    let spec = model.cluster.spec.aws_load_balancer_controller.as_ref()?;
    if spec.enabled != Some(true) {
        return None;
    }
    let flag = |key: &str| -> String {
        spec.extra
            .get(key)
            .and_then(Value::as_bool)
            .unwrap_or(false)
            .to_string()
    };
    let text = |value: &Option<String>, default: &str| {
        value
            .clone()
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| default.to_string())
    };
    let version = spec
        .extra
        .get("version")
        .and_then(Value::as_str)
        .filter(|v| !v.is_empty())
        .unwrap_or(VERSION);
    Some(json!({
        "irsa": crate::iam::irsa::uses_service_account_permissions(model),
        "cluster_name": model.name(),
        "region": crate::iam::region(model)?,
        "enable_waf": flag("enableWAF"),
        "enable_wafv2": flag("enableWAFv2"),
        "enable_shield": flag("enableShield"),
        "default_tags": default_tags(model),
        "version": version,
        "cpu_request": text(&spec.cpu_request, "100m"),
        "cpu_limit": text(&spec.cpu_limit, "200m"),
        "memory_request": text(&spec.memory_request, "200Mi"),
        "memory_limit": text(&spec.memory_limit, "500Mi"),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addons::tests::{cluster, compare_golden_in_account};
    use crate::security::tests::model;

    #[test]
    fn identical_to_kops_in_every_case() {
        let (identical, placeholders) = compare_golden_in_account(KEY, |_, _| {});
        assert_eq!(placeholders, 0);
        if kops_testkit::shared_dir().is_some() {
            assert_eq!(identical, 3);
        }
    }

    #[test]
    fn off_unless_enabled_and_tags_sorted() {
        let (mut cluster, groups) = cluster();
        assert!(objects(&model(&cluster, &groups)).unwrap().is_none());
        cluster.spec.aws_load_balancer_controller = Some(kops_api::cluster::AddonResourcesSpec {
            enabled: Some(true),
            ..Default::default()
        });
        cluster.spec.cloud_labels = Some([("Owner".to_string(), "me".to_string())].into());
        let model = model(&cluster, &groups);
        assert_eq!(
            default_tags(&model),
            "KubernetesCluster=addons.example.com,Owner=me"
        );
        let objects = objects(&model).unwrap().unwrap();
        let text = serde_json::to_string(&objects).unwrap();
        assert!(text.contains("\"hostNetwork\":true"), "{text}");
    }
}
