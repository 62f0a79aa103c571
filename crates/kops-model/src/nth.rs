//! The node-termination-handler's names and events in queue mode (the SQS
//! queue, EventBridge rules and lifecycle hooks are
//! `kops_aws::model::nth`'s): the addon's manifest names the queue.

use crate::iam::truncate_with_hash;
use crate::Model;

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
