//! The AWS node-termination-handler (`node-termination-handler.aws`),
//! which cordons and drains a node before AWS takes its instance away.
//!
//! Queue mode (kops' default on AWS): one Deployment on the control plane
//! reads the cluster's SQS queue (see [`crate::nth`]) at
//! `https://sqs.<region>.amazonaws.com/<account>/<queue>`, so it needs the
//! AWS account: without it the addon stays a placeholder. IMDS mode
//! (`enableSQSTerminationDraining: false`): a DaemonSet on every node
//! watches its instance's metadata.
//!
//! From `spec.nodeTerminationHandler`: `version`, `managedASGTag`,
//! `enablePrometheusMetrics`, `taintNode`, `enableOutOfServiceTaint`,
//! `excludeFromLoadBalancers`, `podTerminationGracePeriod`,
//! `deleteSQSMsgIfNodeNotFound`, `enableSpotInterruptionDraining`,
//! `enableScheduledEventDraining`, `enableRebalanceMonitoring`,
//! `enableRebalanceDraining`, `webhookTemplate`, `webhookURL`,
//! `cpuRequest`, `memoryRequest`, `memoryLimit`, with kops' defaults. With
//! service-account roles the Deployment may run on workers and assumes its
//! own role. Karpenter clusters leave it a placeholder: kops gives the
//! handler no defaults there.

use serde_json::{json, Value};

use super::{service_account_role, template, TemplateError};
use crate::Model;

const TEMPLATE: &str = include_str!("node_termination_handler/manifest.yaml");
/// The handler's version unless `spec.nodeTerminationHandler.version` says.
const VERSION: &str = "v1.25.5";
/// The service account the handler runs as (and whose IRSA role it uses).
const SERVICE_ACCOUNT: &str = "aws-node-termination-handler";

pub(super) fn objects(model: &Model<'_>) -> Result<Option<Vec<Value>>, TemplateError> {
    let Some(context) = context(model) else {
        return Ok(None);
    };
    let mut objects = template::render("node-termination-handler.aws", TEMPLATE, &context)?;
    Ok(service_account_role::add(model, &mut objects, &[SERVICE_ACCOUNT]).map(|()| objects))
}

/// The template's context; `None` when the addon stays a placeholder.
fn context(model: &Model<'_>) -> Option<Value> {
    let spec = &model.cluster.spec;
    let karpenter = spec
        .karpenter
        .as_ref()
        .is_some_and(|k| k.enabled == Some(true));
    if karpenter {
        return None;
    }
    let nth = spec.node_termination_handler.clone().unwrap_or_default();
    if nth.enabled == Some(false) {
        return None;
    }
    let extra = |key: &str| nth.extra.get(key).filter(|v| !v.is_null());
    let flag = |key: &str, default: bool| -> String {
        extra(key)
            .and_then(Value::as_bool)
            .unwrap_or(default)
            .to_string()
    };
    let text = |key: &str| -> Option<String> {
        match extra(key)? {
            Value::String(s) if s.is_empty() => None,
            Value::String(s) => Some(s.clone()),
            other => Some(other.to_string()),
        }
    };
    let queue_mode = crate::nth_queue_mode(model.cluster);
    let irsa = crate::iam::irsa::uses_service_account_permissions(model);
    let queue_url = if queue_mode {
        let region = crate::iam::region(model)?;
        let domain = if region.contains("cn-") {
            "amazonaws.com.cn"
        } else {
            "amazonaws.com"
        };
        let account = model.account_id?;
        let queue = crate::nth::queue_name(model.name());
        format!("https://sqs.{region}.{domain}/{account}/{queue}")
    } else {
        String::new()
    };
    let version = text("version").unwrap_or_else(|| VERSION.to_string());
    let mut resources = json!({"requests": {
        "cpu": text("cpuRequest").unwrap_or_else(|| "50m".into()),
        "memory": text("memoryRequest").unwrap_or_else(|| "64Mi".into()),
    }});
    if let Some(limit) = text("memoryLimit") {
        resources["limits"] = json!({ "memory": limit });
    }
    let control_planes = model.groups_with(kops_api::Role::ControlPlane).count();
    let selinux = spec
        .containerd
        .as_ref()
        .and_then(|c| serde_json::to_value(c).ok())
        .and_then(|c| c.get("seLinuxEnabled").and_then(Value::as_bool))
        .unwrap_or(false);
    Some(json!({
        "version": version,
        "image": format!("public.ecr.aws/aws-ec2/aws-node-termination-handler:{version}"),
        "queue_mode": queue_mode,
        "queue_url": queue_url,
        "irsa": irsa,
        "replicas": if control_planes > 1 { 2 } else { 1 },
        "selinux": selinux,
        "prometheus": flag("enablePrometheusMetrics", false),
        "managed_tag": nth
            .managed_asg_tag
            .clone()
            .unwrap_or_else(|| "aws-node-termination-handler/managed".into()),
        "taint_node": flag("taintNode", false),
        "out_of_service_taint": flag("enableOutOfServiceTaint", false),
        "exclude_from_load_balancers": flag("excludeFromLoadBalancers", true),
        "pod_grace_period": text("podTerminationGracePeriod").unwrap_or_else(|| "-1".into()),
        "delete_sqs_msg_if_node_not_found": flag("deleteSQSMsgIfNodeNotFound", false),
        "spot_interruption_draining": flag("enableSpotInterruptionDraining", true),
        "scheduled_event_draining": flag("enableScheduledEventDraining", true),
        "rebalance_monitoring": flag("enableRebalanceMonitoring", false),
        "rebalance_draining": nth.enable_rebalance_draining.unwrap_or(false).to_string(),
        "webhook_template": text("webhookTemplate"),
        "webhook_url": text("webhookURL"),
        "resources": resources,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addons::tests::{cluster, compare_golden_in_account};
    use crate::security::tests::model;

    const KEY: &str = "node-termination-handler.aws";

    #[test]
    fn identical_to_kops_in_every_case() {
        let (identical, placeholders) = compare_golden_in_account(KEY, |_, _| {});
        assert_eq!(placeholders, 0);
        if kops_testkit::shared_dir().is_some() {
            assert!(identical >= 40, "{identical}");
        }
    }

    #[test]
    fn queue_mode_needs_the_account() {
        let (cluster, groups) = cluster();
        let mut model = model(&cluster, &groups);
        assert!(objects(&model).unwrap().is_none());
        model.account_id = Some("111122223333");
        let objects = objects(&model).unwrap().unwrap();
        let text = serde_json::to_string(&objects).unwrap();
        assert!(text
            .contains("https://sqs.us-test-1.amazonaws.com/111122223333/addons-example-com-nth"));
        assert!(text.contains("\"kind\":\"PodDisruptionBudget\""));
    }

    #[test]
    fn imds_mode_is_a_daemonset_without_the_account() {
        let (mut cluster, groups) = cluster();
        cluster.spec.node_termination_handler =
            Some(kops_api::cluster::NodeTerminationHandlerSpec {
                enable_sqs_termination_draining: Some(false),
                ..Default::default()
            });
        let model = model(&cluster, &groups);
        let objects = objects(&model).unwrap().unwrap();
        let kinds: Vec<_> = objects
            .iter()
            .map(|o| o["kind"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            [
                "ServiceAccount",
                "ClusterRole",
                "ClusterRoleBinding",
                "DaemonSet"
            ]
        );
    }
}
