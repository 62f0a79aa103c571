//! AWS' request-rate limits, kept on our side: every call of a run waits
//! for a token of its action's bucket before it is sent, so a large cluster
//! is paced to what the account allows instead of retrying into empty
//! buckets.
//!
//! The buckets are those AWS documents for EC2 ("Request throttling for
//! the Amazon EC2 API"): one per action and account, non-mutating actions
//! (`Describe*`, `Get*`, `List*`) 100 tokens refilled at 20 a second,
//! mutating ones 200 at 5 a second, `RunInstances` 1,000 at 2. Auto
//! Scaling, ELB, IAM, SQS and EventBridge publish no figures and are given
//! the same two kinds; Route 53 allows 5 requests a second per account.
//! When AWS throttles a call anyway, its bucket's mirror is emptied and
//! slowed (see [`kops_engine::Pacer`]).
//!
//! `KOPS_AWS_RATE_LIMITS` changes them: `off` (never hold a call back, for
//! an account with raised limits), or a comma list of `KIND=SIZE/REFILL`
//! where KIND is `read`, `write`, `route53` or an action's name
//! (`CreateLaunchTemplate=400/10`).
//!
//! Two pieces: an interceptor that names each attempt's bucket (and reads
//! each answer for a throttling code), and an HTTP client around the SDK's
//! own that waits for the bucket before the request goes out. The wait is
//! in the HTTP client because interceptors cannot wait.

use std::collections::BTreeMap;

use aws_smithy_http_client::proxy::ProxyConfig;
use aws_smithy_http_client::tls;
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient,
    SharedHttpConnector,
};
use aws_smithy_runtime_api::client::interceptors::context::{
    BeforeTransmitInterceptorContextMut, FinalizerInterceptorContextRef,
};
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse, Metadata};
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;
use kops_engine::{BucketLimit, LimitSettings, LimitWaits, Pacer};

/// The environment variable that changes the limits.
pub const RATE_LIMITS_ENV: &str = "KOPS_AWS_RATE_LIMITS";

const READ: BucketLimit = BucketLimit::new(100.0, 20.0);
const WRITE: BucketLimit = BucketLimit::new(200.0, 5.0);
const RUN_INSTANCES: BucketLimit = BucketLimit::new(1000.0, 2.0);
const ROUTE53: BucketLimit = BucketLimit::new(5.0, 5.0);

/// The error codes with which AWS services answer a call over their rate.
const THROTTLING_CODES: &[&str] = &[
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestThrottledException",
    "TooManyRequestsException",
    "RequestLimitExceeded",
    "RequestThrottled",
    "SlowDown",
    "PriorRequestNotComplete",
    "EC2ThrottledException",
];

/// The limits of a run, shared by all its AWS clients.
#[derive(Debug, Clone, Default)]
pub struct RateLimits {
    pacer: Pacer,
    read: Option<BucketLimit>,
    write: Option<BucketLimit>,
    route53: Option<BucketLimit>,
    actions: BTreeMap<String, BucketLimit>,
}

/// The bucket one attempt takes its token from (a request extension).
#[derive(Debug, Clone)]
struct BucketOf {
    key: String,
    limit: BucketLimit,
}

impl RateLimits {
    /// The documented limits, or those `KOPS_AWS_RATE_LIMITS` sets; a
    /// setting that does not parse is an error naming it.
    pub fn from_env() -> Result<Self, String> {
        match std::env::var(RATE_LIMITS_ENV) {
            Ok(text) => Self::parse(&text),
            Err(_) => Ok(Self::default()),
        }
    }

    /// `off`, or `KIND=SIZE/REFILL,...` (see [`kops_engine::LimitSettings`]).
    pub fn parse(text: &str) -> Result<Self, String> {
        let settings = LimitSettings::parse(RATE_LIMITS_ENV, text)?;
        let mut limits = Self::default();
        if settings.off {
            limits.pacer = Pacer::disabled();
        }
        for (kind, limit) in settings.buckets {
            match kind.as_str() {
                "read" => limits.read = Some(limit),
                "write" => limits.write = Some(limit),
                "route53" => limits.route53 = Some(limit),
                action if action.chars().all(|c| c.is_ascii_alphanumeric()) => {
                    limits.actions.insert(kind, limit);
                }
                other => {
                    return Err(format!(
                        "{RATE_LIMITS_ENV}: `{other}` is not read, write, route53 or an action's name (CreateLaunchTemplate)"
                    ))
                }
            }
        }
        Ok(limits)
    }

    /// The bucket of `operation` of `service` (the SDK's names: `EC2`,
    /// `Route 53`, `Auto Scaling`).
    fn bucket(&self, service: &str, operation: &str) -> BucketOf {
        if service == "Route 53" {
            // One bucket for the account, whatever the action.
            return BucketOf {
                key: "Route 53".to_string(),
                limit: self.route53.unwrap_or(ROUTE53),
            };
        }
        let limit = if let Some(limit) = self.actions.get(operation) {
            *limit
        } else if service == "EC2" && operation == "RunInstances" {
            RUN_INSTANCES
        } else if ["Describe", "Get", "List"]
            .iter()
            .any(|p| operation.starts_with(p))
        {
            self.read.unwrap_or(READ)
        } else {
            self.write.unwrap_or(WRITE)
        };
        BucketOf {
            key: format!("{service}:{operation}"),
            limit,
        }
    }

    /// What the run spent on limits so far.
    pub fn waits(&self) -> LimitWaits {
        self.pacer.waits()
    }

    /// `inner` (by default the SDK's HTTPS client), wrapped to wait for
    /// each request's bucket.
    pub(crate) fn http_client(&self, inner: Option<SharedHttpClient>) -> SharedHttpClient {
        let inner = inner.unwrap_or_else(|| {
            aws_smithy_http_client::Builder::new().build_with_connector_fn(
                |settings, components| {
                    let mut builder = aws_smithy_http_client::Connector::builder().tls_provider(
                        tls::Provider::Rustls(tls::rustls_provider::CryptoMode::AwsLc),
                    );
                    builder.set_connector_settings(settings.cloned());
                    if let Some(components) = components {
                        builder.set_sleep_impl(components.sleep_impl());
                    }
                    builder.set_proxy_config(Some(ProxyConfig::from_env()));
                    builder.build()
                },
            )
        });
        SharedHttpClient::new(PacedClient {
            inner,
            pacer: self.pacer.clone(),
        })
    }
}

impl Intercept for RateLimits {
    fn name(&self) -> &'static str {
        "kops-rs rate limits"
    }

    fn modify_before_transmit(
        &self,
        context: &mut BeforeTransmitInterceptorContextMut<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if let Some(m) = cfg.load::<Metadata>() {
            let bucket = self.bucket(m.service(), m.name());
            context.request_mut().add_extension(bucket);
        }
        Ok(())
    }

    fn read_after_attempt(
        &self,
        context: &FinalizerInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let (Some(m), Some(response)) = (cfg.load::<Metadata>(), context.response()) else {
            return Ok(());
        };
        let bucket = self.bucket(m.service(), m.name());
        if is_throttle(response) {
            tracing::debug!(bucket = %bucket.key, "throttled by AWS; slowing this action down");
            self.pacer.throttled(&bucket.key);
        } else {
            self.pacer.answered(&bucket.key);
        }
        Ok(())
    }
}

/// Whether AWS answered "too many calls" (in any of its protocols: EC2's
/// and the query APIs' XML `<Code>`, the JSON APIs' `__type`).
fn is_throttle(response: &HttpResponse) -> bool {
    if !matches!(response.status().as_u16(), 400 | 429 | 503) {
        return false;
    }
    if let Some(kind) = response.headers().get("x-amzn-ErrorType") {
        let kind = kind.split(':').next().unwrap_or(kind);
        if THROTTLING_CODES.contains(&kind) {
            return true;
        }
    }
    let Some(body) = response.body().bytes() else {
        return false;
    };
    let body = String::from_utf8_lossy(body);
    THROTTLING_CODES.iter().any(|code| {
        body.contains(&format!("<Code>{code}</Code>"))
            || body.contains(&format!("#{code}\""))
            || body.contains(&format!("\"__type\":\"{code}\""))
            || body.contains(&format!("\"code\":\"{code}\""))
    })
}

#[derive(Debug)]
struct PacedClient {
    inner: SharedHttpClient,
    pacer: Pacer,
}

impl HttpClient for PacedClient {
    fn http_connector(
        &self,
        settings: &HttpConnectorSettings,
        components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(PacedConnector {
            inner: self.inner.http_connector(settings, components),
            pacer: self.pacer.clone(),
        })
    }
}

#[derive(Debug)]
struct PacedConnector {
    inner: SharedHttpConnector,
    pacer: Pacer,
}

impl HttpConnector for PacedConnector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let bucket = request.extension::<BucketOf>().cloned();
        let inner = self.inner.clone();
        let pacer = self.pacer.clone();
        HttpConnectorFuture::new(async move {
            if let Some(bucket) = bucket {
                pacer.acquire(&bucket.key, bucket.limit).await;
            }
            inner.call(request).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_smithy_runtime_api::http::StatusCode;
    use aws_smithy_types::body::SdkBody;

    fn answer(status: u16, body: &str) -> HttpResponse {
        HttpResponse::new(
            StatusCode::try_from(status).expect("status"),
            SdkBody::from(body.to_string()),
        )
    }

    #[test]
    fn throttles_are_told_from_other_errors_in_each_protocol() {
        let ec2 = "<Response><Errors><Error><Code>RequestLimitExceeded</Code><Message>Request limit exceeded.</Message></Error></Errors><RequestID>x</RequestID></Response>";
        assert!(is_throttle(&answer(503, ec2)));
        let query = "<ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code><Message>Rate exceeded</Message></Error></ErrorResponse>";
        assert!(is_throttle(&answer(400, query)));
        let json = r#"{"__type":"com.amazon.coral.availability#ThrottlingException","message":"Rate exceeded"}"#;
        assert!(is_throttle(&answer(400, json)));
        let route53 =
            "<ErrorResponse><Error><Code>PriorRequestNotComplete</Code></Error></ErrorResponse>";
        assert!(is_throttle(&answer(400, route53)));
        // Not throttles: another error, and a success that mentions one.
        let invalid = "<Response><Errors><Error><Code>InvalidParameterValue</Code></Error></Errors></Response>";
        assert!(!is_throttle(&answer(400, invalid)));
        assert!(!is_throttle(&answer(200, query)));
    }

    #[test]
    fn each_action_has_the_documented_bucket() {
        let limits = RateLimits::default();
        assert_eq!(limits.bucket("EC2", "DescribeVpcs").limit, READ);
        assert_eq!(limits.bucket("EC2", "CreateTags").limit, WRITE);
        assert_eq!(limits.bucket("EC2", "RunInstances").limit, RUN_INSTANCES);
        assert_eq!(
            limits.bucket("Auto Scaling", "PutLifecycleHook").limit,
            WRITE
        );
        // Route 53: one bucket for the account.
        let a = limits.bucket("Route 53", "ListHostedZones");
        let b = limits.bucket("Route 53", "ChangeResourceRecordSets");
        assert_eq!((a.key.as_str(), a.limit), ("Route 53", ROUTE53));
        assert_eq!(a.key, b.key);
        // Per action elsewhere.
        assert_ne!(
            limits.bucket("EC2", "DescribeVpcs").key,
            limits.bucket("EC2", "DescribeSubnets").key
        );
    }

    #[test]
    fn the_environment_overrides_kinds_and_actions() {
        let limits =
            RateLimits::parse("read=50/10, write=400/10,route53=2/1,CreateLaunchTemplate=9/3")
                .expect("parses");
        assert_eq!(
            limits.bucket("EC2", "DescribeVpcs").limit,
            BucketLimit::new(50.0, 10.0)
        );
        assert_eq!(
            limits
                .bucket("Auto Scaling", "CreateAutoScalingGroup")
                .limit,
            BucketLimit::new(400.0, 10.0)
        );
        assert_eq!(
            limits.bucket("Route 53", "GetChange").limit,
            BucketLimit::new(2.0, 1.0)
        );
        assert_eq!(
            limits.bucket("EC2", "CreateLaunchTemplate").limit,
            BucketLimit::new(9.0, 3.0)
        );
        assert!(RateLimits::parse("off").is_ok());
        for bad in [
            "write",
            "write=200",
            "write=0/5",
            "write=200/0",
            "x-y=1/1",
            "=1/1",
        ] {
            let e = RateLimits::parse(bad).expect_err(bad);
            assert!(e.starts_with(RATE_LIMITS_ENV), "{e}");
        }
    }
}
