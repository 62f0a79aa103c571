//! Renderers for the node-termination-handler (SQS queue, EventBridge rules
//! and targets, lifecycle hooks) and Route 53 alias records.

use std::any::Any;

use crate::tasks::classic_load_balancer::ClassicLoadBalancer;
use crate::tasks::dns_name::DnsName;
use crate::tasks::eventbridge::{EventBridgeRule, EventBridgeTarget};
use crate::tasks::lifecycle_hook::LifecycleHook;
use crate::tasks::sqs_queue::{nth_queue_policy, SqsQueue};
use kops_engine::TaskKey;

use crate::render::cloudformation::{CloudFormation, Json};
use crate::render::resource::{downcast_resource, tags_expr, AwsResource, Ctx};
use kops_render::hcl::{Body, Expr};
use kops_render::terraform::Terraform;
use kops_render::RenderError;

pub(crate) fn resource_of(task: &dyn Any) -> Option<&dyn AwsResource> {
    downcast_resource!(
        task,
        DnsName,
        EventBridgeRule,
        EventBridgeTarget,
        LifecycleHook,
        SqsQueue
    )
}

pub use crate::partition;

impl AwsResource for SqsQueue {
    fn tf_type(&self) -> Option<&'static str> {
        Some("aws_sqs_queue")
    }
    fn tf_name(&self) -> String {
        self.name.clone()
    }
    fn terraform(&self, tf: &mut Terraform, ctx: &Ctx<'_>) -> Result<(), RenderError> {
        // The account is not known offline: the policy names the queue in
        // any account of the partition (the queue name is the cluster's).
        let arn = format!(
            "arn:{}:sqs:{}:*:{}",
            partition(ctx.region),
            ctx.region,
            self.name
        );
        let text = serde_json::to_string_pretty(&nth_queue_policy(&arn)).unwrap_or_default();
        let policy = tf.file(
            "aws_sqs_queue",
            &self.name,
            "policy",
            text.into_bytes(),
            false,
        );
        let mut b = Body::new();
        b.set("message_retention_seconds", self.message_retention_seconds)
            .set("name", &self.name)
            .set("policy", policy)
            .set("tags", tags_expr(&self.tags));
        tf.resource("aws_sqs_queue", &self.name, b);
        Ok(())
    }
    fn cloudformation(&self, cf: &mut CloudFormation, _: &Ctx<'_>) -> Result<(), RenderError> {
        let queue = cf.logical_id(&TaskKey::new(SqsQueue::KIND, &self.name));
        cf.resource(
            "AWS::SQS::Queue",
            &self.name,
            Json::obj([
                ("QueueName", Json::str(&self.name)),
                (
                    "MessageRetentionPeriod",
                    Json::Int(self.message_retention_seconds.into()),
                ),
                ("Tags", Json::tags(&self.tags)),
            ]),
        );
        let arn = Json::obj([(
            "Fn::GetAtt",
            Json::Array(vec![Json::str(&queue), Json::str("Arn")]),
        )]);
        let mut doc = nth_queue_policy("ARN");
        let policy = Json::from_value(&doc["Statement"][0].take());
        let statement = match policy {
            Json::Object(mut entries) => {
                for (k, v) in entries.iter_mut() {
                    if k.as_str() == "Resource" {
                        *v = arn.clone();
                    }
                }
                Json::Object(entries)
            }
            other => other,
        };
        cf.resource(
            "AWS::SQS::QueuePolicy",
            &format!("{}-policy", self.name),
            Json::obj([
                (
                    "Queues",
                    Json::Array(vec![Json::obj([("Ref", Json::str(&queue))])]),
                ),
                (
                    "PolicyDocument",
                    Json::obj([
                        ("Version", Json::str("2012-10-17")),
                        ("Statement", Json::Array(vec![statement])),
                    ]),
                ),
            ]),
        );
        Ok(())
    }
}

impl AwsResource for EventBridgeRule {
    fn tf_type(&self) -> Option<&'static str> {
        Some("aws_cloudwatch_event_rule")
    }
    fn tf_name(&self) -> String {
        self.name.clone()
    }
    fn terraform(&self, tf: &mut Terraform, _: &Ctx<'_>) -> Result<(), RenderError> {
        let pattern = tf.file(
            "aws_cloudwatch_event_rule",
            &self.name,
            "event_pattern",
            self.event_pattern.clone().into_bytes(),
            false,
        );
        let mut b = Body::new();
        b.set("event_pattern", pattern)
            .set("name", &self.name)
            .set("tags", tags_expr(&self.tags));
        tf.resource("aws_cloudwatch_event_rule", &self.name, b);
        Ok(())
    }
    fn cloudformation(&self, cf: &mut CloudFormation, _: &Ctx<'_>) -> Result<(), RenderError> {
        let pattern: serde_json::Value =
            serde_json::from_str(&self.event_pattern).map_err(|e| RenderError::Unsupported {
                what: format!(
                    "EventBridgeRule/{}: event pattern is not JSON: {e}",
                    self.name
                ),
                hint: "this is a bug in the model".into(),
            })?;
        cf.resource(
            "AWS::Events::Rule",
            &self.name,
            Json::obj([
                ("Name", Json::str(&self.name)),
                ("EventPattern", Json::from_value(&pattern)),
                ("State", Json::str("ENABLED")),
            ]),
        );
        Ok(())
    }
}

impl AwsResource for EventBridgeTarget {
    fn tf_type(&self) -> Option<&'static str> {
        Some("aws_cloudwatch_event_target")
    }
    fn tf_name(&self) -> String {
        self.name.clone()
    }
    fn terraform(&self, tf: &mut Terraform, _: &Ctx<'_>) -> Result<(), RenderError> {
        let mut b = Body::new();
        b.set("arn", tf.reference(self.queue.key(), "arn")?)
            .set("rule", tf.reference(self.rule.key(), "id")?);
        tf.resource("aws_cloudwatch_event_target", &self.name, b);
        Ok(())
    }
    fn cloudformation(&self, cf: &mut CloudFormation, _: &Ctx<'_>) -> Result<(), RenderError> {
        // CloudFormation declares targets inside their rule.
        let target = Json::obj([
            ("Id", Json::str(crate::tasks::eventbridge::TARGET_ID)),
            ("Arn", cf.attribute(self.queue.key(), "Arn")?),
        ]);
        cf.add_to_list(self.rule.key(), "Targets", target)
    }
}

impl AwsResource for LifecycleHook {
    fn tf_type(&self) -> Option<&'static str> {
        Some("aws_autoscaling_lifecycle_hook")
    }
    fn tf_name(&self) -> String {
        self.id.clone()
    }
    fn terraform(&self, tf: &mut Terraform, _: &Ctx<'_>) -> Result<(), RenderError> {
        let group = TaskKey::new(
            crate::tasks::autoscaling_group::AutoscalingGroup::KIND,
            &self.autoscaling_group,
        );
        let mut b = Body::new();
        b.set("autoscaling_group_name", tf.reference(&group, "id")?)
            .set("default_result", &self.default_result)
            .set("heartbeat_timeout", self.heartbeat_timeout)
            .set("lifecycle_transition", &self.transition)
            .set("name", &self.name);
        tf.resource("aws_autoscaling_lifecycle_hook", &self.id, b);
        Ok(())
    }
    fn cloudformation(&self, cf: &mut CloudFormation, _: &Ctx<'_>) -> Result<(), RenderError> {
        let group = TaskKey::new(
            crate::tasks::autoscaling_group::AutoscalingGroup::KIND,
            &self.autoscaling_group,
        );
        cf.resource(
            "AWS::AutoScaling::LifecycleHook",
            &self.id,
            Json::obj([
                ("AutoScalingGroupName", cf.reference(&group)?),
                ("DefaultResult", Json::str(&self.default_result)),
                ("HeartbeatTimeout", Json::Int(self.heartbeat_timeout.into())),
                ("LifecycleHookName", Json::str(&self.name)),
                ("LifecycleTransition", Json::str(&self.transition)),
            ]),
        );
        Ok(())
    }
}

impl AwsResource for DnsName {
    fn tf_type(&self) -> Option<&'static str> {
        Some("aws_route53_record")
    }
    fn tf_name(&self) -> String {
        self.name.clone()
    }
    fn terraform(&self, tf: &mut Terraform, ctx: &Ctx<'_>) -> Result<(), RenderError> {
        let zone = if self.zone_id.contains('.') {
            // A zone known by name only: Terraform looks its id up.
            let mut z = Body::new();
            z.set("name", self.zone_id.as_str())
                .set("private_zone", ctx.private_zone);
            let address = tf.data_source("aws_route53_zone", &self.zone_id, z);
            Expr::raw(format!("{address}.zone_id"))
        } else {
            Expr::str(format!("/hostedzone/{}", self.zone_id))
        };
        let mut alias = Body::new();
        alias
            .set("evaluate_target_health", false)
            .set("name", tf.reference(self.target.key(), "dns_name")?)
            .set("zone_id", tf.reference(self.target.key(), "zone_id")?);
        let mut b = Body::new();
        b.block("alias", alias)
            .set("name", &self.record_name)
            .set("type", &self.record_type)
            .set("zone_id", zone);
        tf.resource("aws_route53_record", &self.name, b);
        Ok(())
    }
    fn cloudformation(&self, cf: &mut CloudFormation, _: &Ctx<'_>) -> Result<(), RenderError> {
        // A zone known by name only becomes a stack parameter, like an
        // image given by name: CloudFormation cannot look it up.
        let zone = if self.zone_id.contains('.') {
            (
                "HostedZoneId",
                cf.parameter(
                    &format!("HostedZone{}", self.zone_id),
                    "AWS::Route53::HostedZone::Id",
                    &format!("The id of the Route 53 hosted zone `{}`", self.zone_id),
                ),
            )
        } else {
            ("HostedZoneId", Json::str(&self.zone_id))
        };
        cf.resource(
            "AWS::Route53::RecordSet",
            &self.name,
            Json::obj([
                ("Name", Json::str(&self.record_name)),
                ("Type", Json::str(&self.record_type)),
                zone,
                (
                    "AliasTarget",
                    Json::obj([
                        ("DNSName", cf.attribute(self.target.key(), "DNSName")?),
                        (
                            "HostedZoneId",
                            // A Classic ELB names the attribute differently.
                            cf.attribute(
                                self.target.key(),
                                if self.target.key().kind == ClassicLoadBalancer::KIND {
                                    "CanonicalHostedZoneNameID"
                                } else {
                                    "CanonicalHostedZoneID"
                                },
                            )?,
                        ),
                        ("EvaluateTargetHealth", Json::Bool(false)),
                    ]),
                ),
            ]),
        );
        Ok(())
    }
}
