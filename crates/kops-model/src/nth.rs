//! The node-termination-handler's AWS side in queue mode (on by default on
//! AWS): the SQS queue `<cluster with dashes>-nth`, one EventBridge rule
//! and target per event kind sending to it, and a terminating lifecycle
//! hook on every autoscaling group so the handler can drain a node before
//! its instance goes. Off when `spec.nodeTerminationHandler.enabled` or
//! `.enableSQSTerminationDraining` is false.

use kops_aws::tasks::eventbridge::{EventBridgeRule, EventBridgeTarget};
use kops_aws::tasks::lifecycle_hook::LifecycleHook;
use kops_aws::tasks::sqs_queue::SqsQueue;
use kops_aws::AwsContext;
use kops_engine::TaskGraph;

use crate::iam::truncate_with_hash;
use crate::{compute, Model, ModelError};

/// How long the queue keeps a message, and how long a terminating instance
/// waits for the handler (seconds).
pub const MESSAGE_RETENTION_SECONDS: i32 = 300;

/// The event kinds kops routes to the queue, with their patterns.
pub const EVENTS: &[(&str, &str)] = &[
    (
        "ASGLifecycle",
        r#"{"source":["aws.autoscaling"],"detail-type":["EC2 Instance-terminate Lifecycle Action"]}"#,
    ),
    (
        "SpotInterruption",
        r#"{"source": ["aws.ec2"],"detail-type": ["EC2 Spot Instance Interruption Warning"]}"#,
    ),
    (
        "InstanceStateChange",
        r#"{"source": ["aws.ec2"],"detail-type": ["EC2 Instance State-change Notification"]}"#,
    ),
    (
        "InstanceScheduledChange",
        r#"{"source": ["aws.health"],"detail-type": ["AWS Health Event"],"detail": {"service": ["EC2"],"eventTypeCategory": ["scheduledChange"]}}"#,
    ),
];

/// The rebalance-recommendation event, with `enableRebalanceDraining`.
pub const REBALANCE_EVENT: (&str, &str) = (
    "RebalanceRecommendation",
    r#"{"source": ["aws.ec2"],"detail-type": ["EC2 Instance Rebalance Recommendation"]}"#,
);

/// The queue's name: the cluster name with dots as dashes (shortened to 75
/// with a hash when longer), then `-nth`.
pub fn queue_name(cluster: &str) -> String {
    format!("{}-nth", truncate_with_hash(&cluster.replace('.', "-"), 75))
}

/// A rule's name: the cluster name shortened to 40, `-`, the event kind.
pub fn rule_name(cluster: &str, event: &str) -> String {
    format!("{}-{event}", truncate_with_hash(cluster, 40))
}

/// Whether the cluster runs the handler in queue mode.
pub fn enabled(model: &Model<'_>) -> bool {
    crate::nth_queue_mode(model.cluster)
}

/// The events routed to the queue for this cluster.
pub fn events(model: &Model<'_>) -> Vec<(&'static str, &'static str)> {
    let mut events = EVENTS.to_vec();
    let rebalance = model
        .cluster
        .spec
        .node_termination_handler
        .as_ref()
        .and_then(|n| n.enable_rebalance_draining)
        .unwrap_or(false);
    if rebalance {
        events.push(REBALANCE_EVENT);
    }
    events
}

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
        assert!(crate::nth_queue_mode(&parse("")));
        assert!(!crate::nth_queue_mode(&parse(
            "  karpenter: {enabled: true}\n"
        )));
        assert!(crate::nth_queue_mode(&parse(
            "  karpenter: {enabled: true}\n  nodeTerminationHandler: {enabled: true}\n"
        )));
        assert!(!crate::nth_queue_mode(&parse(
            "  nodeTerminationHandler: {enableSQSTerminationDraining: false}\n"
        )));
    }
}
