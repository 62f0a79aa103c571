//! The Google Cloud REST layer direct apply and delete use: Compute,
//! Cloud DNS, IAM and Resource Manager over kops-state's HTTP client (hyper
//! and rustls, already built for the `gs://` store) with its Application
//! Default Credentials. A thin JSON layer rather than the
//! google-cloud-rust clients: see docs/gce.md for the build
//! cost that decided it.
//!
//! - Endpoints: gcloud's `CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE`, `_DNS`,
//!   `_IAM` and `_CLOUDRESOURCEMANAGER` when set (Compute's and DNS's
//!   include the version path, as gcloud documents), else Google's. A
//!   plain `http://` override is a local server: no credentials are sent,
//!   unless `GOOGLE_APPLICATION_CREDENTIALS` names a file whose
//!   `token_uri` is local too (a test server checking tokens).
//! - Rate quotas: each call waits for a token of its API group's bucket
//!   first ([`crate::rate_limits`]); a throttled call (429, or Compute's
//!   403 `rateLimitExceeded`) is retried until its quota has had time to
//!   refill.
//! - Retries: 5xx and failed connections, with backoff.
//! - Compute mutations return operations; [`GceCloud::wait`] polls them
//!   with `operations.wait` until `DONE` and turns an operation's error
//!   into an error.
//! - Lists follow `nextPageToken`.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use hyper::Method;
use kops_google::auth::Credentials;
use kops_google::http::{Call, Http};
use serde_json::Value;
use tokio::sync::OnceCell;

use crate::rate_limits::{self, RateLimits};

pub use crate::endpoints::Endpoints;

/// Attempts of one call that fails with 5xx or in transit.
const ATTEMPTS: u32 = 10;
/// How long one call is retried while Google throttles it: Google's quotas
/// are per minute, so a throttle is waited out within one; the rest is for
/// other clients of the project taking the new minute's share.
const THROTTLE_PATIENCE: Duration = Duration::from_secs(180);
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// An error answer (or a transport failure: status 0).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{method} {url}: {status} {reason}: {message}")]
pub struct ApiError {
    pub method: String,
    pub url: String,
    pub status: u16,
    /// Google's `errors[0].reason` (`notFound`, `resourceInUseByAnotherResource`...).
    pub reason: String,
    pub message: String,
}

impl ApiError {
    /// Whether trying again later may succeed: transport failures, 429,
    /// 5xx, a rate limit answered as 403, a stale fingerprint, and
    /// operations that failed for a passing reason (Google names those in
    /// capitals).
    pub fn is_transient(&self) -> bool {
        self.status == 0
            || self.status == 429
            || self.status >= 500
            || self.is_rate_limit()
            || self.reason == "resourceInUseByAnotherResource"
            || self.reason == "resourceNotReady"
            || self.status == 412
            || TRANSIENT_OPERATION_ERRORS.contains(&self.reason.as_str())
    }

    /// Google's answer to too many calls: 429, or Compute's 403 (see
    /// [`ApiError::is_rate_limit`]).
    pub fn is_throttle(&self) -> bool {
        self.status == 429 || self.is_rate_limit()
    }

    /// Compute's answer to too many calls: 403 `rateLimitExceeded` or
    /// `userRateLimitExceeded` (429 elsewhere).
    pub fn is_rate_limit(&self) -> bool {
        self.status == 403
            && (self.reason == "rateLimitExceeded" || self.reason == "userRateLimitExceeded")
    }

    /// A new service account that IAM does not know yet (Google's IAM is
    /// eventually consistent: a binding naming it can be refused for a
    /// while after it was made).
    pub fn is_iam_propagation(&self) -> bool {
        matches!(self.status, 400 | 403 | 404)
            && self.message.contains("Service account")
            && self.message.contains("does not exist")
    }

    pub fn is_not_found(&self) -> bool {
        self.status == 404
    }

    pub fn into_task_error(self) -> kops_engine::TaskError {
        if self.is_transient() {
            kops_engine::TaskError::retryable(self)
        } else {
            kops_engine::TaskError::fatal(self)
        }
    }
}

/// Operation error codes that a later try may not meet.
const TRANSIENT_OPERATION_ERRORS: [&str; 5] = [
    "INTERNAL_ERROR",
    "RESOURCE_OPERATION_RATE_EXCEEDED",
    "RATE_LIMIT_EXCEEDED",
    "RESOURCE_NOT_READY",
    "RESOURCE_IN_USE_BY_ANOTHER_RESOURCE",
];

/// A project's APIs, shared by every task of a run.
pub struct GceCloud {
    pub project: String,
    pub region: String,
    pub endpoints: Endpoints,
    http: Http,
    credentials: OnceCell<Option<Credentials>>,
    calls: Mutex<BTreeMap<String, u64>>,
    /// The project's instance templates, listed once per run.
    templates: tokio::sync::Mutex<Option<Vec<Value>>>,
    limits: RateLimits,
}

impl std::fmt::Debug for GceCloud {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GceCloud")
            .field("project", &self.project)
            .field("endpoints", &self.endpoints)
            .finish()
    }
}

impl GceCloud {
    /// A client for `project` with the endpoints of the environment, and
    /// its rate limits (the documented ones unless `KOPS_GCE_RATE_LIMITS`
    /// says otherwise; the binary refuses a setting that does not parse
    /// before it gets here, here it falls back to the documented ones).
    pub fn new(project: &str, region: &str) -> Result<GceCloud, crate::GceError> {
        Self::with_endpoints(
            project,
            region,
            Endpoints::from_lookup(&kops_api::env::process_env),
        )
    }

    pub fn with_endpoints(
        project: &str,
        region: &str,
        endpoints: Endpoints,
    ) -> Result<GceCloud, crate::GceError> {
        Self::with_limits(
            project,
            region,
            endpoints,
            RateLimits::from_env().unwrap_or_default(),
        )
    }

    pub fn with_limits(
        project: &str,
        region: &str,
        endpoints: Endpoints,
        limits: RateLimits,
    ) -> Result<GceCloud, crate::GceError> {
        Ok(GceCloud {
            project: project.to_string(),
            region: region.to_string(),
            endpoints,
            http: Http::new().map_err(|e| crate::GceError::Client(e.to_string()))?,
            credentials: OnceCell::new(),
            calls: Mutex::new(BTreeMap::new()),
            templates: tokio::sync::Mutex::new(None),
            limits,
        })
    }

    /// What the run spent on Google's rate quotas so far.
    pub fn limit_waits(&self) -> kops_engine::LimitWaits {
        self.limits.waits()
    }

    /// Calls made, by `METHOD collection`.
    pub fn calls(&self) -> BTreeMap<String, u64> {
        self.calls.lock().unwrap().clone()
    }

    /// The project's instance templates, listed on first use (every group's
    /// template task reads them: one list per run).
    pub async fn instance_templates(&self) -> Result<Vec<Value>, ApiError> {
        let mut cached = self.templates.lock().await;
        if let Some(list) = cached.as_ref() {
            return Ok(list.clone());
        }
        let list = self
            .list(&self.compute_url("global/instanceTemplates"), "items")
            .await?;
        *cached = Some(list.clone());
        Ok(list)
    }

    /// Drops the listed templates (one was created).
    pub fn forget_instance_templates(&self) {
        if let Ok(mut cached) = self.templates.try_lock() {
            *cached = None;
        }
    }

    /// `{compute}projects/{project}/{rest}`.
    pub fn compute_url(&self, rest: &str) -> String {
        format!("{}projects/{}/{rest}", self.endpoints.compute, self.project)
    }

    /// `{dns}projects/{project}/{rest}`.
    pub fn dns_url(&self, rest: &str) -> String {
        format!("{}projects/{}/{rest}", self.endpoints.dns, self.project)
    }

    /// `{iam}v1/projects/{project}/{rest}`.
    pub fn iam_url(&self, rest: &str) -> String {
        format!("{}v1/projects/{}/{rest}", self.endpoints.iam, self.project)
    }

    /// `{resourcemanager}v1/projects/{project}{rest}` (`:getIamPolicy`).
    pub fn resource_manager_url(&self, rest: &str) -> String {
        format!(
            "{}v1/projects/{}{rest}",
            self.endpoints.resource_manager, self.project
        )
    }

    async fn token(&self) -> Result<Option<String>, kops_google::GoogleError> {
        let credentials = self
            .credentials
            .get_or_try_init(|| async {
                if self.endpoints.all_local() && !local_token_server() {
                    return Ok(None);
                }
                kops_google::auth::find(&kops_api::env::process_env, &self.http)
                    .await
                    .map(Some)
            })
            .await?;
        match credentials {
            Some(c) => c.token(&self.http).await.map(Some),
            None => Ok(None),
        }
    }

    fn count(&self, method: &Method, url: &str) {
        let path = url.split('?').next().unwrap_or(url);
        let parts: Vec<&str> = path.split('/').collect();
        // The collection: the last even-positioned segment after the project.
        let after = parts
            .iter()
            .position(|p| *p == "projects")
            .map_or(&parts[..], |i| &parts[(i + 2).min(parts.len())..]);
        let collection = after
            .iter()
            .filter(|s| !matches!(**s, "global" | "regions" | "zones"))
            .copied()
            .collect::<Vec<_>>();
        let label = collection
            .iter()
            .step_by(2)
            .copied()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("/");
        *self
            .calls
            .lock()
            .unwrap()
            .entry(format!("{method} {label}"))
            .or_default() += 1;
    }

    /// One JSON call with retries of transient failures.
    pub async fn call(
        &self,
        method: Method,
        url: &str,
        body: Option<&Value>,
    ) -> Result<Value, ApiError> {
        let error = |status: u16, reason: &str, message: String| ApiError {
            method: method.to_string(),
            url: url.to_string(),
            status,
            reason: reason.to_string(),
            message,
        };
        let token = self
            .token()
            .await
            .map_err(|e| error(0, "credentials", e.to_string()))?;
        let mut call = Call::new(method.clone(), url).header("accept", "application/json");
        if let Some(token) = token {
            call = call.header("authorization", format!("Bearer {token}"));
        }
        if let Some(body) = body {
            call = call
                .header("content-type", "application/json")
                .body(body.to_string());
        }
        let bucket = rate_limits::bucket(&self.endpoints, &method, url);
        let mut pause = FIRST_BACKOFF;
        let mut attempt = 1;
        let mut throttled_since: Option<std::time::Instant> = None;
        loop {
            if let Some(bucket) = &bucket {
                self.limits.acquire(bucket).await;
            }
            self.count(&method, url);
            let mut retry_after = None;
            let result = match self.http.send_once(&call).await {
                Err(e) => Err(error(0, "transport", e.to_string())),
                Ok(response) if (200..300).contains(&response.status) => {
                    if response.body.is_empty() {
                        Ok(Value::Null)
                    } else {
                        serde_json::from_slice(&response.body)
                            .map_err(|e| error(response.status, "badResponse", e.to_string()))
                    }
                }
                Ok(response) => {
                    retry_after = response.header("retry-after").and_then(parse_retry_after);
                    let parsed: Value =
                        serde_json::from_slice(&response.body).unwrap_or(Value::Null);
                    let detail = &parsed["error"];
                    let reason = detail["errors"][0]["reason"]
                        .as_str()
                        .or(detail["status"].as_str())
                        .unwrap_or("")
                        .to_string();
                    let message = detail["message"]
                        .as_str()
                        .map_or_else(|| response.text(), str::to_string);
                    Err(error(response.status, &reason, message))
                }
            };
            let throttled = matches!(&result, Err(e) if e.is_throttle());
            if let Some(bucket) = &bucket {
                if !matches!(&result, Err(e) if e.status == 0) {
                    self.limits.answered(bucket, throttled);
                }
            }
            let retry = match &result {
                Err(_) if throttled => {
                    throttled_since
                        .get_or_insert_with(std::time::Instant::now)
                        .elapsed()
                        < THROTTLE_PATIENCE
                }
                Err(e) => attempt < ATTEMPTS && (e.status == 0 || e.status >= 500),
                Ok(_) => false,
            };
            match result {
                Err(e) if retry => {
                    // Jittered so that parallel tasks do not retry in step;
                    // the server's Retry-After when it asks for longer. A
                    // throttled call also waits for its bucket, emptied and
                    // slowed by the throttle, before it is sent again.
                    let wait = retry_after
                        .map_or(jitter(pause), |after: Duration| after.max(jitter(pause)))
                        .min(MAX_RETRY_AFTER);
                    tracing::debug!("{e} (attempt {attempt}), retrying in {wait:?}");
                    tokio::time::sleep(wait).await;
                    pause = (pause * 2).min(MAX_BACKOFF);
                    if !throttled {
                        attempt += 1;
                    }
                }
                other => return other,
            }
        }
    }

    /// A GET; `None` on 404.
    pub async fn get(&self, url: &str) -> Result<Option<Value>, ApiError> {
        match self.call(Method::GET, url, None).await {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The IP addresses the region's addresses `names` hold, sorted (kops
    /// sorts well-known addresses); an address not made yet adds none.
    pub async fn addresses(&self, names: &[String]) -> Result<Vec<String>, ApiError> {
        let urls: Vec<String> = names
            .iter()
            .map(|name| self.compute_url(&format!("regions/{}/addresses/{name}", self.region)))
            .collect();
        let found = futures::future::try_join_all(urls.iter().map(|url| self.get(url))).await?;
        let mut held: Vec<String> = found
            .iter()
            .flatten()
            .filter_map(|address| address["address"].as_str().map(str::to_string))
            .collect();
        held.sort();
        Ok(held)
    }

    /// Every item of a paged list (`field`: `items`, `rrsets`, `accounts`...).
    pub async fn list(&self, url: &str, field: &str) -> Result<Vec<Value>, ApiError> {
        self.list_with(Method::GET, url, field).await
    }

    /// Every item of an `aggregatedList` (`items` maps each zone or region
    /// to `{collection: [...]}`), whatever its scope.
    pub async fn aggregated(&self, collection: &str) -> Result<Vec<Value>, ApiError> {
        let url = self.compute_url(&format!("aggregated/{collection}"));
        let scopes = self.list_with(Method::GET, &url, "items").await?;
        Ok(scopes
            .iter()
            .filter_map(|scope| scope[collection].as_array())
            .flatten()
            .cloned()
            .collect())
    }

    /// Every item of a paged list answered to `method` (`POST` for
    /// `listManagedInstances`). A field holding a map (an aggregated
    /// list's `items`) contributes its values.
    pub async fn list_with(
        &self,
        method: Method,
        url: &str,
        field: &str,
    ) -> Result<Vec<Value>, ApiError> {
        let mut items = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let sep = if url.contains('?') { '&' } else { '?' };
            let page_url = match &token {
                Some(t) => format!("{url}{sep}pageToken={}", encode(t)),
                None => url.to_string(),
            };
            let page = self.call(method.clone(), &page_url, None).await?;
            match &page[field] {
                Value::Array(found) => items.extend(found.iter().cloned()),
                Value::Object(found) => items.extend(found.values().cloned()),
                _ => {}
            }
            match page["nextPageToken"].as_str().filter(|t| !t.is_empty()) {
                Some(t) => token = Some(t.to_string()),
                None => return Ok(items),
            }
        }
    }

    /// A Compute mutation: sends it and waits for its operation.
    pub async fn mutate(
        &self,
        method: Method,
        url: &str,
        body: Option<&Value>,
    ) -> Result<Value, ApiError> {
        let op = self.call(method, url, body).await?;
        self.wait(op).await
    }

    /// Waits for a Compute operation to be `DONE`; its error, if any, as
    /// an error.
    pub async fn wait(&self, mut op: Value) -> Result<Value, ApiError> {
        let mut pause = Duration::from_millis(20);
        while op["status"] != "DONE" {
            let Some(link) = op["selfLink"].as_str().map(str::to_string) else {
                break;
            };
            let link = self.local_link(&link);
            op = self
                .call(Method::POST, &format!("{link}/wait"), None)
                .await?;
            if op["status"] != "DONE" {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(2));
            }
        }
        if let Some(error) = op["error"]["errors"].as_array().and_then(|e| e.first()) {
            return Err(ApiError {
                method: op["operationType"].as_str().unwrap_or("").to_string(),
                url: op["targetLink"].as_str().unwrap_or("").to_string(),
                status: op["httpErrorStatusCode"].as_u64().unwrap_or(400) as u16,
                reason: error["code"].as_str().unwrap_or("").to_string(),
                message: error["message"].as_str().unwrap_or("").to_string(),
            });
        }
        Ok(op)
    }

    /// A self link the API returned, on the configured Compute endpoint
    /// (a link names Google's host even behind an override).
    pub fn local_link(&self, link: &str) -> String {
        match link.find("/projects/") {
            Some(i) => format!("{}{}", self.endpoints.compute, &link[i + 1..]),
            None => link.to_string(),
        }
    }
}

/// The longest pause a `Retry-After` may ask for.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// `Retry-After` as seconds (the HTTP-date form is not used by Google's
/// APIs).
fn parse_retry_after(value: &str) -> Option<Duration> {
    value.trim().parse::<u64>().ok().map(Duration::from_secs)
}

/// `pause` scaled by a random factor in [0.5, 1.5).
fn jitter(pause: Duration) -> Duration {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(pause.as_nanos() as u64);
    let unit = (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64;
    pause.mul_f64(0.5 + unit)
}

/// Whether `GOOGLE_APPLICATION_CREDENTIALS` names a credentials file whose
/// `token_uri` is a plain `http://` server: a local token server (a test
/// server's), so even local endpoints get its tokens.
fn local_token_server() -> bool {
    kops_api::env::process_env("GOOGLE_APPLICATION_CREDENTIALS")
        .and_then(|path| std::fs::read_to_string(path).ok())
        .and_then(|text| serde_json::from_str::<Value>(&text).ok())
        .and_then(|file| file["token_uri"].as_str().map(str::to_string))
        .is_some_and(|uri| uri.starts_with("http://"))
}

/// Percent-encodes a query value.
pub fn encode(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_are_jittered_and_honour_retry_after() {
        let pause = Duration::from_millis(400);
        let waits: Vec<Duration> = (0..20).map(|_| jitter(pause)).collect();
        assert!(waits.iter().all(|w| *w >= pause / 2 && *w < pause * 3 / 2));
        assert!(waits.iter().any(|w| *w != waits[0]), "{waits:?}");
        assert_eq!(parse_retry_after(" 7 "), Some(Duration::from_secs(7)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
    }

    #[test]
    fn rate_limits_iam_propagation_and_failed_operations_are_told_apart() {
        let e = |status: u16, reason: &str, message: &str| ApiError {
            method: "POST".into(),
            url: "u".into(),
            status,
            reason: reason.into(),
            message: message.into(),
        };
        assert!(e(403, "rateLimitExceeded", "Rate Limit Exceeded").is_transient());
        assert!(e(403, "userRateLimitExceeded", "x").is_transient());
        assert!(!e(403, "forbidden", "x").is_transient());
        assert!(e(500, "INTERNAL_ERROR", "x").is_transient());
        assert!(e(403, "RESOURCE_OPERATION_RATE_EXCEEDED", "x").is_transient());
        assert!(!e(400, "ZONE_RESOURCE_POOL_EXHAUSTED", "x").is_transient());
        let young = e(
            400,
            "invalid",
            "Service account a@p.iam.gserviceaccount.com does not exist.",
        );
        assert!(young.is_iam_propagation());
        assert!(!young.is_transient());
        assert!(!e(400, "invalid", "Invalid policy").is_iam_propagation());
    }
}
