//! EventBridge rules and their targets for the node-termination-handler:
//! one rule per event kind (`<cluster40>-ASGLifecycle`, `-SpotInterruption`,
//! `-InstanceStateChange`, `-InstanceScheduledChange`, optionally
//! `-RebalanceRecommendation`), each sending to the cluster's SQS queue.
//!
//! Rules are found in one `ListRules` per run (by the cluster's name prefix,
//! see [`AwsContext::event_rules`]); a rule's tags with
//! `ListTagsForResource`; a target with `ListTargetsByRule`, matched by the
//! queue's ARN.

use kops_engine::{Changes, FieldValue, OutputRef, Outputs, Task, TaskError, TaskKey};

use crate::context::{classify, AwsContext, Tags};
use crate::tasks::sqs_queue::QueueArn;
use crate::tasks::{managed_tags, tags_to_write};

/// A rule's name, what targets read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleName(pub String);

impl FieldValue for RuleName {
    fn render(&self) -> String {
        self.0.clone()
    }
}

/// The target id kops gives the queue target of its rules.
pub const TARGET_ID: &str = "1";

/// What the rule should be.
#[derive(Debug, Clone, PartialEq)]
pub struct EventBridgeRule {
    /// The task name and the rule's name.
    pub name: String,
    /// The event pattern, JSON.
    pub event_pattern: String,
    pub tags: Tags,
}

/// What exists.
#[derive(Debug, Clone)]
pub struct EventBridgeRuleActual {
    pub arn: String,
    /// Compact JSON.
    pub event_pattern: String,
    pub tags: Tags,
}

fn compact(json: &str) -> String {
    serde_json::from_str::<serde_json::Value>(json)
        .map(|v| v.to_string())
        .unwrap_or_else(|_| json.to_string())
}

impl EventBridgeRule {
    pub const KIND: &'static str = "EventBridgeRule";

    /// The handle targets keep to read the rule's name.
    pub fn name_ref(name: &str) -> OutputRef<RuleName> {
        OutputRef::new(TaskKey::new(Self::KIND, name))
    }
}

impl Task<AwsContext> for EventBridgeRule {
    type Actual = EventBridgeRuleActual;
    type Output = RuleName;

    fn key(&self) -> TaskKey {
        TaskKey::new(Self::KIND, &self.name)
    }

    async fn find(
        &self,
        ctx: &AwsContext,
        _: &Outputs,
    ) -> Result<Option<EventBridgeRuleActual>, TaskError> {
        let Some(rule) = ctx
            .event_rules()
            .await?
            .iter()
            .find(|r| r.name() == Some(self.name.as_str()))
        else {
            return Ok(None);
        };
        let arn = rule.arn().unwrap_or_default().to_string();
        let fresh = !ctx.first_look(&self.key());
        let tags = ctx.rule_tags(&arn, &self.name, fresh).await?;
        Ok(Some(EventBridgeRuleActual {
            event_pattern: compact(rule.event_pattern().unwrap_or_default()),
            tags,
            arn,
        }))
    }

    fn diff(
        &self,
        actual: Option<&EventBridgeRuleActual>,
        _: &Outputs,
    ) -> Result<Changes, TaskError> {
        let expected = compact(&self.event_pattern);
        let tags = actual.map(|a| managed_tags(&a.tags, &self.tags));
        let mut changes = Changes::new();
        changes
            .compare(
                "eventPattern",
                actual.map(|a| a.event_pattern.as_str()),
                expected.as_str(),
            )
            .compare("tags", tags.as_ref(), &self.tags);
        Ok(changes)
    }

    fn output(&self, _: &EventBridgeRuleActual) -> RuleName {
        RuleName(self.name.clone())
    }

    async fn apply(
        &self,
        ctx: &AwsContext,
        _: &Outputs,
        actual: Option<&EventBridgeRuleActual>,
        changes: &Changes,
    ) -> Result<RuleName, TaskError> {
        let events = ctx.cloud.eventbridge();
        let tag_list = |tags: &Tags| {
            tags.iter()
                .filter_map(|(k, v)| {
                    aws_sdk_eventbridge::types::Tag::builder()
                        .key(k)
                        .value(v)
                        .build()
                        .ok()
                })
                .collect::<Vec<_>>()
        };
        if actual.is_none() || changes.has("eventPattern") {
            // PutRule creates or updates; tags are only taken on create.
            let mut request = events
                .put_rule()
                .name(&self.name)
                .event_pattern(&self.event_pattern);
            if actual.is_none() {
                request = request.set_tags(Some(tag_list(&self.tags)));
            }
            request
                .send()
                .await
                .map_err(|e| classify("PutRule", &self.name, e))?;
        }
        if let Some(a) = actual {
            let missing = tags_to_write(&a.tags, &self.tags);
            if !missing.is_empty() {
                events
                    .tag_resource()
                    .resource_arn(&a.arn)
                    .set_tags(Some(tag_list(&missing)))
                    .send()
                    .await
                    .map_err(|e| classify("TagResource", &self.name, e))?;
            }
        }
        Ok(RuleName(self.name.clone()))
    }
}

/// What the target should be: the rule sends to the queue.
#[derive(Debug, Clone, PartialEq)]
pub struct EventBridgeTarget {
    /// The task name (`<rule>-Target`).
    pub name: String,
    pub rule: OutputRef<RuleName>,
    pub queue: OutputRef<QueueArn>,
}

/// What exists: the target's id.
#[derive(Debug, Clone)]
pub struct EventBridgeTargetActual {
    pub id: String,
    pub arn: String,
}

impl EventBridgeTarget {
    pub const KIND: &'static str = "EventBridgeTarget";
}

impl Task<AwsContext> for EventBridgeTarget {
    type Actual = EventBridgeTargetActual;
    type Output = ();

    fn key(&self) -> TaskKey {
        TaskKey::new(Self::KIND, &self.name)
    }

    fn dependencies(&self) -> Vec<TaskKey> {
        vec![self.rule.key().clone(), self.queue.key().clone()]
    }

    async fn find(
        &self,
        ctx: &AwsContext,
        deps: &Outputs,
    ) -> Result<Option<EventBridgeTargetActual>, TaskError> {
        let (Some(rule), Some(queue)) = (deps.try_get(&self.rule)?, deps.try_get(&self.queue)?)
        else {
            return Ok(None);
        };
        let fresh = !ctx.first_look(&self.key());
        let Some(targets) = ctx.rule_targets(&rule.0, &self.name, fresh).await? else {
            return Ok(None);
        };
        Ok(targets
            .iter()
            .find(|t| t.arn() == queue.0)
            .map(|t| EventBridgeTargetActual {
                id: t.id().to_string(),
                arn: t.arn().to_string(),
            }))
    }

    fn diff(
        &self,
        actual: Option<&EventBridgeTargetActual>,
        deps: &Outputs,
    ) -> Result<Changes, TaskError> {
        let queue = deps.try_get(&self.queue)?.map(|q| q.0.as_str());
        let mut changes = Changes::new();
        changes.compare_reference(
            "queue",
            actual.map(|a| a.arn.as_str()),
            queue,
            self.queue.key(),
        );
        Ok(changes)
    }

    fn output(&self, _: &EventBridgeTargetActual) {}

    async fn apply(
        &self,
        ctx: &AwsContext,
        deps: &Outputs,
        _: Option<&EventBridgeTargetActual>,
        _: &Changes,
    ) -> Result<(), TaskError> {
        let rule = deps.get(&self.rule)?;
        let queue = deps.get(&self.queue)?;
        let target = aws_sdk_eventbridge::types::Target::builder()
            .id(TARGET_ID)
            .arn(&queue.0)
            .build()
            .map_err(|e| TaskError::fatal(format!("target of `{}`: {e}", self.name)))?;
        let out = ctx
            .cloud
            .eventbridge()
            .put_targets()
            .rule(&rule.0)
            .targets(target)
            .send()
            .await
            .map_err(|e| classify("PutTargets", &self.name, e))?;
        if out.failed_entry_count() > 0 {
            let reason = out
                .failed_entries()
                .first()
                .and_then(|f| f.error_message())
                .unwrap_or("no reason given");
            return Err(TaskError::retryable(format!(
                "PutTargets for `{}` failed: {reason}",
                self.name
            )));
        }
        Ok(())
    }
}

/// Every target of the rule `rule` (ListTargetsByRule, all pages).
pub async fn list_targets(
    client: &aws_sdk_eventbridge::Client,
    rule: &str,
) -> Result<
    Vec<aws_sdk_eventbridge::types::Target>,
    aws_smithy_runtime_api::client::result::SdkError<
        aws_sdk_eventbridge::operation::list_targets_by_rule::ListTargetsByRuleError,
        aws_smithy_runtime_api::client::orchestrator::HttpResponse,
    >,
> {
    let mut targets = Vec::new();
    let mut next = None;
    loop {
        let out = client
            .list_targets_by_rule()
            .rule(rule)
            .set_next_token(next)
            .send()
            .await?;
        targets.extend(out.targets().iter().cloned());
        next = out.next_token().map(str::to_string);
        if next.is_none() {
            return Ok(targets);
        }
    }
}
