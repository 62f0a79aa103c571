//! The node-termination-handler's AWS side in queue mode (on by default on
//! AWS): the SQS queue `<cluster with dashes>-nth`, one EventBridge rule
//! and target per event kind sending to it, and a terminating lifecycle
//! hook on every autoscaling group so the handler can drain a node before
//! its instance goes. Off when `spec.nodeTerminationHandler.enabled` or
//! `.enableSQSTerminationDraining` is false.

use crate::tasks::eventbridge::{EventBridgeRule, EventBridgeTarget};
use crate::tasks::lifecycle_hook::LifecycleHook;
use crate::tasks::sqs_queue::SqsQueue;
use crate::AwsContext;
use kops_engine::TaskGraph;

use crate::model::compute;
pub use kops_model::nth::*;
use kops_model::{Model, ModelError};

/// Adds the queue, the rules with their targets, and the hooks.
pub fn build(model: &Model<'_>, graph: &mut TaskGraph<AwsContext>) -> Result<(), ModelError> {
    if !enabled(model) {
        return Ok(());
    }
    let queue = queue_name(model.name());
    graph.add(SqsQueue {
        name: queue.clone(),
        message_retention_seconds: MESSAGE_RETENTION_SECONDS,
        tags: model.tags(&queue, &[]),
    })?;
    for (event, pattern) in events(model) {
        let rule = rule_name(model.name(), event);
        graph.add(EventBridgeRule {
            name: rule.clone(),
            event_pattern: pattern.to_string(),
            tags: model.tags(&rule, &[]),
        })?;
        graph.add(EventBridgeTarget {
            name: format!("{rule}-Target"),
            rule: EventBridgeRule::name_ref(&rule),
            queue: SqsQueue::arn_ref(&queue),
        })?;
    }
    for group in compute::cloud_groups(model) {
        let name = format!("{}-NTHLifecycleHook", group.name());
        graph.add(LifecycleHook {
            id: name.clone(),
            name,
            autoscaling_group: compute::group_name(model, group),
            transition: "autoscaling:EC2_INSTANCE_TERMINATING".into(),
            heartbeat_timeout: MESSAGE_RETENTION_SECONDS,
            default_result: "CONTINUE".into(),
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_kops() {
        assert_eq!(
            queue_name("minimal-aws.example.com"),
            "minimal-aws-example-com-nth"
        );
        assert_eq!(
            rule_name("minimal-aws.example.com", "ASGLifecycle"),
            "minimal-aws.example.com-ASGLifecycle"
        );
        let long =
            "this.is.truly.a.really.really.really.really.really.long.cluster-name.minimal.example.com";
        assert_eq!(
            rule_name(long, "ASGLifecycle"),
            "this.is.truly.a.really.really.rea-cbmd7d-ASGLifecycle"
        );
        assert_eq!(
            queue_name(long),
            "this-is-truly-a-really-really-really-really-really-long-cluster-name-ueip1f-nth"
        );
    }

    #[test]
    fn karpenter_clusters_have_no_queue_unless_asked() {
        let parse = |extra: &str| -> kops_api::Cluster {
            let yaml = format!(
                "apiVersion: kops.k8s.io/v1alpha2\nkind: Cluster\nmetadata: {{name: k.example.com}}\nspec:\n  cloudProvider: aws\n{extra}"
            );
            match kops_api::parse_objects("t.yaml", &yaml).unwrap().remove(0) {
                kops_api::Object::Cluster(c) => *c,
                _ => unreachable!(),
            }
        };
        assert!(kops_model::nth_queue_mode(&parse("")));
        assert!(!kops_model::nth_queue_mode(&parse(
            "  karpenter: {enabled: true}\n"
        )));
        assert!(kops_model::nth_queue_mode(&parse(
            "  karpenter: {enabled: true}\n  nodeTerminationHandler: {enabled: true}\n"
        )));
        assert!(!kops_model::nth_queue_mode(&parse(
            "  nodeTerminationHandler: {enableSQSTerminationDraining: false}\n"
        )));
    }
}
