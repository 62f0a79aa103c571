//! kops-rs on AWS: SDK clients built once per run (honouring `AWS_ENDPOINT_URL`,
//! `AWS_REGION` and the usual credential chain), an interceptor that counts
//! every API call by operation, and the look-ups `create cluster` needs for
//! existing VPCs and subnets.
//!
//! This is (with kops-state) the only crate that knows the AWS SDK. It must
//! not depend on kops-ops or print; errors carry the operation, the resource
//! and AWS' own message.

mod calls;
pub mod context;
pub mod delete;
pub mod dns;
pub mod error_text;
pub mod instance_types;
pub mod instances;
pub mod model;
mod network;
pub mod prefetch;
pub mod provider;
pub mod rate_limits;
pub mod render;
pub mod tasks;

use aws_config::{BehaviorVersion, Region, SdkConfig};

pub use calls::CallCounter;
pub use context::AwsContext;
pub use network::{describe_existing_network, load_balancer_interface_addresses};
pub use rate_limits::RateLimits;

pub use kops_model::iam::partition;

/// How often a step outside the task graph (a listing, a look-up before
/// the graph is built, the deletion's listing) is tried while AWS' answers
/// are retryable (throttling, 5xx, a dropped connection), each try after
/// the SDK's own attempts. Tasks are retried by the executor instead.
pub const STEP_ATTEMPTS: u32 = 5;

/// Runs `step` again while it fails with an error `retryable` accepts, up
/// to [`STEP_ATTEMPTS`] times, waiting longer each time (0.25 s, doubled).
pub async fn retrying<T, E, F, Fut>(
    what: &str,
    retryable: impl Fn(&E) -> bool,
    mut step: F,
) -> Result<T, E>
where
    E: std::fmt::Display,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
{
    let mut wait = std::time::Duration::from_millis(250);
    let mut attempt = 1;
    loop {
        match step().await {
            Err(e) if retryable(&e) && attempt < STEP_ATTEMPTS => {
                tracing::info!("{what}: {e}; trying again ({attempt}/{STEP_ATTEMPTS})");
                tokio::time::sleep(wait).await;
                wait *= 2;
                attempt += 1;
            }
            other => return other,
        }
    }
}

/// What went wrong talking to AWS.
#[derive(Debug, thiserror::Error)]
pub enum AwsError {
    /// One failed call: AWS' error code and message (or what failed when
    /// AWS was not reached), and a hint only where one applies.
    #[error("AWS {operation} on `{resource}` failed: {message}{}", .hint.map(|h| format!("\nhint: {h}")).unwrap_or_default())]
    Call {
        operation: &'static str,
        resource: String,
        message: String,
        hint: Option<&'static str>,
        /// AWS may answer differently when asked again (throttling, 5xx,
        /// a dropped connection): callers that can repeat the work do.
        retryable: bool,
    },
    #[error("{kind} `{id}` was not found in region `{region}`\nhint: check the id and that --zones (or AWS_REGION) name the region it lives in")]
    NotFound {
        kind: &'static str,
        id: String,
        region: String,
    },
    #[error("subnets {} are in VPC `{found}`, not `{expected}`\nhint: pass subnets of the VPC given with --vpc, or leave --vpc out", .subnets.join(", "))]
    SubnetsInOtherVpc {
        subnets: Vec<String>,
        found: String,
        expected: String,
    },
    #[error("{} resources still exist after {passes} passes: {}\nlast error: {last_error}\nhint: run `kops delete cluster --yes` again; if something outside the cluster uses them (a load balancer, an ENI), remove that first", .remaining.len(), first_few(.remaining))]
    DeleteIncomplete {
        remaining: Vec<String>,
        passes: u32,
        last_error: String,
    },
    #[error("subnets {} are in more than one VPC\nhint: a cluster lives in one VPC", .subnets.join(", "))]
    SubnetsInManyVpcs { subnets: Vec<String> },
}

/// The first few of `items`, then how many more: a listing of a hundred
/// leftovers would not fit one line.
fn first_few(items: &[String]) -> String {
    const SHOWN: usize = 5;
    let mut text = items
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if items.len() > SHOWN {
        text.push_str(&format!(" and {} more", items.len() - SHOWN));
    }
    text
}

impl AwsError {
    pub(crate) fn call<E>(
        operation: &'static str,
        resource: impl Into<String>,
        err: aws_smithy_runtime_api::client::result::SdkError<
            E,
            aws_smithy_runtime_api::client::orchestrator::HttpResponse,
        >,
    ) -> Self
    where
        E: aws_smithy_types::error::metadata::ProvideErrorMetadata + std::error::Error + 'static,
    {
        let text = error_text::error_text(&err);
        AwsError::Call {
            operation,
            resource: resource.into(),
            message: text.text,
            hint: text.hint,
            retryable: context::is_retryable(&err),
        }
    }

    /// A failure of kops-rs' own around a call (no SDK error to read).
    pub(crate) fn other(
        operation: &'static str,
        resource: impl Into<String>,
        message: impl std::fmt::Display,
    ) -> Self {
        AwsError::Call {
            operation,
            resource: resource.into(),
            message: error_text::shorten(&message.to_string()),
            hint: None,
            retryable: false,
        }
    }

    /// True when asking AWS again may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            AwsError::Call {
                retryable: true,
                ..
            }
        )
    }
}

/// The AWS clients of one kops run, in one region, all counting their calls
/// into one [`CallCounter`].
#[derive(Debug, Clone)]
pub struct AwsCloud {
    region: String,
    config: SdkConfig,
    calls: CallCounter,
    limits: RateLimits,
    ec2: aws_sdk_ec2::Client,
    iam: aws_sdk_iam::Client,
    autoscaling: aws_sdk_autoscaling::Client,
    elbv2: aws_sdk_elasticloadbalancingv2::Client,
    sqs: aws_sdk_sqs::Client,
    eventbridge: aws_sdk_eventbridge::Client,
    route53: aws_sdk_route53::Client,
}

impl AwsCloud {
    /// Loads the SDK configuration from the environment for `region`.
    pub async fn new(region: &str) -> Self {
        let config = aws_config::defaults(BehaviorVersion::latest())
            .region(Region::new(region.to_string()))
            .load()
            .await;
        Self::from_config(region, config)
    }

    /// The account the credentials act in (STS GetCallerIdentity): addon
    /// manifests name it (the termination handler's queue URL, IRSA role
    /// ARNs). One call per run.
    pub async fn account_id(&self) -> Result<String, String> {
        let sts = aws_sdk_sts::Client::from_conf(
            aws_sdk_sts::config::Builder::from(&self.config)
                .interceptor(self.calls.clone())
                .interceptor(self.limits.clone())
                .build(),
        );
        // Retried as the tasks' calls are (a busy endpoint, throttling): a
        // missing account would change addon manifests between runs.
        let mut delay = std::time::Duration::from_millis(200);
        let mut attempt = 1;
        loop {
            match sts.get_caller_identity().send().await {
                Ok(out) => {
                    return out
                        .account()
                        .map(str::to_string)
                        .ok_or_else(|| "STS GetCallerIdentity named no account".to_string())
                }
                Err(e) if attempt >= 5 => {
                    let text = error_text::error_text(&e);
                    return Err(match text.hint {
                        Some(hint) => format!("STS GetCallerIdentity: {}\nhint: {hint}", text.text),
                        None => format!("STS GetCallerIdentity: {}", text.text),
                    });
                }
                Err(_) => {
                    tokio::time::sleep(delay).await;
                    delay *= 2;
                    attempt += 1;
                }
            }
        }
    }

    /// Uses an SDK configuration built elsewhere (tests point it at moto).
    /// The limits are the documented ones unless `KOPS_AWS_RATE_LIMITS`
    /// says otherwise (the binary refuses a setting that does not parse
    /// before it gets here; here it falls back to the documented ones).
    pub fn from_config(region: &str, config: SdkConfig) -> Self {
        let limits = RateLimits::from_env().unwrap_or_default();
        Self::with_limits(region, config, limits)
    }

    /// As [`AwsCloud::from_config`], with the rate limits `limits`.
    pub fn with_limits(region: &str, config: SdkConfig, limits: RateLimits) -> Self {
        let calls = CallCounter::default();
        // A call waiting for its bucket has sent no byte of its body yet;
        // the SDK's upload stall check would count that wait as a stalled
        // upload and fail the attempt after 5 s. The bodies are small
        // forms; answers keep their download check.
        let config = config
            .to_builder()
            .http_client(limits.http_client(config.http_client()))
            .stalled_stream_protection(
                aws_smithy_runtime_api::client::stalled_stream_protection::StalledStreamProtectionConfig::enabled()
                    .upload_enabled(false)
                    .build(),
            )
            .build();
        macro_rules! client {
            ($sdk:ident) => {
                $sdk::Client::from_conf(
                    $sdk::config::Builder::from(&config)
                        .interceptor(calls.clone())
                        .interceptor(limits.clone())
                        .build(),
                )
            };
        }
        AwsCloud {
            region: region.to_string(),
            ec2: client!(aws_sdk_ec2),
            iam: client!(aws_sdk_iam),
            autoscaling: client!(aws_sdk_autoscaling),
            elbv2: client!(aws_sdk_elasticloadbalancingv2),
            sqs: client!(aws_sdk_sqs),
            eventbridge: client!(aws_sdk_eventbridge),
            route53: client!(aws_sdk_route53),
            config,
            calls,
            limits,
        }
    }

    pub fn region(&self) -> &str {
        &self.region
    }

    pub fn sdk_config(&self) -> &SdkConfig {
        &self.config
    }

    pub fn ec2(&self) -> &aws_sdk_ec2::Client {
        &self.ec2
    }

    pub fn iam(&self) -> &aws_sdk_iam::Client {
        &self.iam
    }

    pub fn autoscaling(&self) -> &aws_sdk_autoscaling::Client {
        &self.autoscaling
    }

    pub fn elbv2(&self) -> &aws_sdk_elasticloadbalancingv2::Client {
        &self.elbv2
    }

    pub fn sqs(&self) -> &aws_sdk_sqs::Client {
        &self.sqs
    }

    pub fn eventbridge(&self) -> &aws_sdk_eventbridge::Client {
        &self.eventbridge
    }

    pub fn route53(&self) -> &aws_sdk_route53::Client {
        &self.route53
    }

    /// Every API call made through this cloud so far.
    pub fn calls(&self) -> &CallCounter {
        &self.calls
    }

    /// The run's rate limits: a client built outside this struct adds them
    /// as an interceptor to be paced and counted too.
    pub fn limits(&self) -> &RateLimits {
        &self.limits
    }

    /// What the run spent waiting on AWS' rate limits so far.
    pub fn limit_waits(&self) -> kops_engine::LimitWaits {
        self.limits.waits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn many_leftovers_are_named_by_the_first_few() {
        let e = AwsError::DeleteIncomplete {
            remaining: (0..100)
                .map(|i| format!("launch-template lt-{i:017}"))
                .collect(),
            passes: 3,
            last_error: "launch-template `lt-0`: DeleteLaunchTemplate: Throttling: slow".into(),
        };
        let text = e.to_string();
        let first = text.lines().next().unwrap_or_default();
        assert!(first.ends_with(" and 95 more"), "{first}");
        assert!(text.lines().all(|l| l.len() < 300), "{text}");
    }
}
