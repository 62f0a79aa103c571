//! The node-termination-handler's SQS queue (`<cluster with dashes>-nth`):
//! EventBridge delivers spot interruptions, scheduled changes, instance
//! state changes and ASG lifecycle actions to it, and the handler in the
//! cluster drains the node before AWS takes it away.
//!
//! The queue policy lets EventBridge (and SQS) send to this queue only; it
//! names the queue's ARN, which holds the account id, so it is written right
//! after `CreateQueue` with the ARN AWS returns, and compared on later runs
//! against the ARN the queue reports. Found by name with `GetQueueUrl`.

use std::collections::HashMap;

use aws_sdk_sqs::types::QueueAttributeName;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use kops_engine::{Changes, FieldValue, OutputRef, Outputs, Task, TaskError, TaskKey};

use crate::context::{classify, AwsContext, Tags};
use crate::tasks::{managed_tags, tags_to_write};

/// The queue's ARN, what EventBridge targets read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueArn(pub String);

impl FieldValue for QueueArn {
    fn render(&self) -> String {
        self.0.clone()
    }
}

/// What the queue should be.
#[derive(Debug, Clone, PartialEq)]
pub struct SqsQueue {
    /// The task name and the queue's name.
    pub name: String,
    /// Seconds a message is kept.
    pub message_retention_seconds: i32,
    pub tags: Tags,
}

/// What exists.
#[derive(Debug, Clone)]
pub struct SqsQueueActual {
    pub url: String,
    pub arn: String,
    pub message_retention_seconds: i32,
    /// The policy, normalised to compact JSON (empty when none).
    pub policy: String,
    pub tags: Tags,
}

impl SqsQueue {
    pub const KIND: &'static str = "SQSQueue";

    /// The handle EventBridge targets keep to read the ARN.
    pub fn arn_ref(name: &str) -> OutputRef<QueueArn> {
        OutputRef::new(TaskKey::new(Self::KIND, name))
    }
}

/// The policy of a node-termination-handler queue with ARN `arn`: EventBridge
/// and SQS may send messages to it, nobody else is granted anything.
pub fn nth_queue_policy(arn: &str) -> serde_json::Value {
    serde_json::json!({
        "Statement": [{
            "Action": "sqs:SendMessage",
            "Effect": "Allow",
            "Principal": {"Service": ["events.amazonaws.com", "sqs.amazonaws.com"]},
            "Resource": arn,
        }],
        "Version": "2012-10-17",
    })
}

/// `arn:<partition>:sqs:<region>:<account>:<name>` from a queue URL
/// (`https://sqs.<region>.amazonaws.com/<account>/<name>`).
fn arn_from_url(url: &str, partition: &str, region: &str) -> Option<String> {
    let mut parts = url.trim_end_matches('/').rsplit('/');
    let name = parts.next()?;
    let account = parts.next()?;
    (!account.is_empty() && account.bytes().all(|b| b.is_ascii_digit()))
        .then(|| format!("arn:{partition}:sqs:{region}:{account}:{name}"))
}

fn normalise_policy(text: &str) -> String {
    serde_json::from_str::<serde_json::Value>(text)
        .map(|v| v.to_string())
        .unwrap_or_else(|_| text.to_string())
}

/// The queue `name` as it exists (`None`: no such queue): GetQueueUrl,
/// then its attributes and tags side by side.
pub(crate) async fn read_queue(
    ctx: &AwsContext,
    name: &str,
) -> Result<Option<SqsQueueActual>, TaskError> {
    let sqs = ctx.cloud.sqs();
    let url = match sqs.get_queue_url().queue_name(name).send().await {
        Ok(out) => out.queue_url().unwrap_or_default().to_string(),
        Err(e)
            if e.code().is_some_and(|c| {
                c == "AWS.SimpleQueueService.NonExistentQueue" || c.contains("QueueDoesNotExist")
            }) =>
        {
            return Ok(None)
        }
        Err(e) => return Err(classify("GetQueueUrl", name, e)),
    };
    let (attributes, tags) = tokio::join!(
        sqs.get_queue_attributes()
            .queue_url(&url)
            .attribute_names(QueueAttributeName::QueueArn)
            .attribute_names(QueueAttributeName::MessageRetentionPeriod)
            .attribute_names(QueueAttributeName::Policy)
            .send(),
        sqs.list_queue_tags().queue_url(&url).send(),
    );
    let attributes = attributes.map_err(|e| classify("GetQueueAttributes", name, e))?;
    let tags = tags.map_err(|e| classify("ListQueueTags", name, e))?;
    let empty = HashMap::new();
    let attrs = attributes.attributes().unwrap_or(&empty);
    Ok(Some(SqsQueueActual {
        arn: attrs
            .get(&QueueAttributeName::QueueArn)
            .cloned()
            .unwrap_or_default(),
        message_retention_seconds: attrs
            .get(&QueueAttributeName::MessageRetentionPeriod)
            .and_then(|p| p.parse().ok())
            .unwrap_or_default(),
        policy: attrs
            .get(&QueueAttributeName::Policy)
            .map(|p| normalise_policy(p))
            .unwrap_or_default(),
        tags: tags
            .tags()
            .map(|t| t.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default(),
        url,
    }))
}

impl Task<AwsContext> for SqsQueue {
    type Actual = SqsQueueActual;
    type Output = QueueArn;

    fn key(&self) -> TaskKey {
        TaskKey::new(Self::KIND, &self.name)
    }

    async fn find(
        &self,
        ctx: &AwsContext,
        _: &Outputs,
    ) -> Result<Option<SqsQueueActual>, TaskError> {
        ctx.queue(&self.name, !ctx.first_look(&self.key())).await
    }

    fn diff(&self, actual: Option<&SqsQueueActual>, _: &Outputs) -> Result<Changes, TaskError> {
        let mut changes = Changes::new();
        changes.compare(
            "messageRetentionPeriod",
            actual.map(|a| &a.message_retention_seconds),
            &self.message_retention_seconds,
        );
        if let Some(a) = actual {
            let expected = nth_queue_policy(&a.arn).to_string();
            changes.compare("policy", Some(a.policy.as_str()), expected.as_str());
        }
        let tags = actual.map(|a| managed_tags(&a.tags, &self.tags));
        changes.compare("tags", tags.as_ref(), &self.tags);
        Ok(changes)
    }

    fn output(&self, actual: &SqsQueueActual) -> QueueArn {
        QueueArn(actual.arn.clone())
    }

    async fn apply(
        &self,
        ctx: &AwsContext,
        _: &Outputs,
        actual: Option<&SqsQueueActual>,
        changes: &Changes,
    ) -> Result<QueueArn, TaskError> {
        let sqs = ctx.cloud.sqs();
        let (url, arn) = match actual {
            Some(a) => (a.url.clone(), a.arn.clone()),
            None => {
                let out = sqs
                    .create_queue()
                    .queue_name(&self.name)
                    .attributes(
                        QueueAttributeName::MessageRetentionPeriod,
                        self.message_retention_seconds.to_string(),
                    )
                    .set_tags(Some(self.tags.clone().into_iter().collect()))
                    .send()
                    .await
                    .map_err(|e| classify("CreateQueue", &self.name, e))?;
                let url = out.queue_url().unwrap_or_default().to_string();
                let region = ctx.cloud.region();
                let arn =
                    arn_from_url(&url, crate::partition(region), region).ok_or_else(|| {
                        TaskError::fatal(format!(
                            "CreateQueue for `{}` returned the URL `{url}`, which names no account",
                            self.name
                        ))
                    })?;
                (url, arn)
            }
        };
        let policy_changed = actual.is_none() || changes.has("policy");
        if policy_changed || changes.has("messageRetentionPeriod") {
            let mut request = sqs.set_queue_attributes().queue_url(&url).attributes(
                QueueAttributeName::MessageRetentionPeriod,
                self.message_retention_seconds.to_string(),
            );
            if policy_changed {
                request = request.attributes(
                    QueueAttributeName::Policy,
                    nth_queue_policy(&arn).to_string(),
                );
            }
            request
                .send()
                .await
                .map_err(|e| classify("SetQueueAttributes", &self.name, e))?;
        }
        if let Some(a) = actual {
            let missing = tags_to_write(&a.tags, &self.tags);
            if !missing.is_empty() {
                sqs.tag_queue()
                    .queue_url(&url)
                    .set_tags(Some(missing.into_iter().collect()))
                    .send()
                    .await
                    .map_err(|e| classify("TagQueue", &self.name, e))?;
            }
        }
        Ok(QueueArn(arn))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arn_comes_from_the_queue_url() {
        assert_eq!(
            arn_from_url(
                "https://sqs.us-east-1.amazonaws.com/123456789012/a-b-nth",
                "aws",
                "us-east-1"
            )
            .as_deref(),
            Some("arn:aws:sqs:us-east-1:123456789012:a-b-nth")
        );
        assert_eq!(
            arn_from_url("http://127.0.0.1:5000/123456789012/q", "aws", "us-east-1").as_deref(),
            Some("arn:aws:sqs:us-east-1:123456789012:q")
        );
        assert_eq!(arn_from_url("http://127.0.0.1:5000/q", "aws", "x"), None);
    }
}
