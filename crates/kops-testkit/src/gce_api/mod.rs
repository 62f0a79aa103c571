//! A Google Cloud API test server: the Compute Engine, Cloud DNS, IAM
//! (service accounts) and Resource Manager (project IAM policy) REST
//! endpoints kops-rs calls, served over plain HTTP/1.1 on 127.0.0.1 by
//! threads, resources kept in memory.
//!
//! It is written from Google's API reference, not from kops-rs: routes and
//! request bodies come from Google's discovery documents (PyPI's
//! `google-api-python-client` ships them; `scripts/setup-venv` installs it),
//! and every body is checked against the method's request schema, so a
//! request Google refuses (unknown field, wrong type, enum value, missing
//! required field, unknown query parameter) is refused here with Google's
//! 400 error body. The semantics kops relies on:
//!
//! - Compute mutations return an `Operation` (zonal, regional or global)
//!   that is `PENDING`, then `RUNNING`, then `DONE` after
//!   [`GceApi::set_operation_delay`]; its effect shows only once it is done
//!   (`operations.get` polls, `operations.wait` waits for it).
//! - 404 `notFound`, 409 `alreadyExists`, 412 `conditionNotMet` for a stale
//!   fingerprint (labels, metadata, tags, the resource's own), 400
//!   `resourceInUseByAnotherResource` when deleting what another resource
//!   references, 404 when an insert references what does not exist.
//! - `list` pages with `pageToken`; [`GceApi::set_page_size`] caps pages
//!   (2 in tests).
//! - Compute Engine's forms: every reference it stores (given as a full
//!   URL, a `projects/...` path or a path partial to the project) is kept
//!   and returned as `https://www.googleapis.com/compute/v1/projects/...`,
//!   and every link (`selfLink`, `zone`, `region`, operation links) names
//!   that host, whatever endpoint the caller used ([`GOOGLE`]).
//! - Google's front end: a POST, PUT or PATCH with neither
//!   `Content-Length` nor chunked encoding gets 411; with
//!   [`GceApi::require_tokens`], a call needs a bearer token whose scopes
//!   cover the method (401, 403 otherwise).
//! - Switchable behaviours of Google's: [`GceApi::set_fault_rate`] (that
//!   fraction of calls answers 503, 429, 403 `rateLimitExceeded` or drops
//!   the connection, before doing anything), [`GceApi::set_rate_quota`]
//!   and [`GceApi::set_documented_quotas`] (rate quotas per project, and
//!   per region, per API group as Compute Engine documents them, answered
//!   with its 403 `rateLimitExceeded`),
//!   [`GceApi::set_iam_delay`] (a new service account refused in IAM
//!   policies for a while), [`GceApi::set_operation_failure_rate`]
//!   (operations that end in an error) and
//!   [`GceApi::set_wait_returns_early`] (`operations.wait` answering while
//!   the operation still runs).
//!
//! Methods the documents define but the server does not serve answer 501
//! naming the method, so a gap is visible rather than faked.
//!
//! Clients point at it with gcloud's endpoint overrides, see
//! [`GceApi::env`].

mod compute;
mod discovery;
mod error;
mod others;

use std::collections::BTreeMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;

pub use discovery::documents_dir;
use discovery::Discovery;
pub use error::ApiError;

/// The host every Compute link names (`selfLink`, `zone`, `region`,
/// operation links, stored references), as Compute Engine writes them.
pub const GOOGLE: &str = "https://www.googleapis.com";

/// One call the server answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub http_method: String,
    /// The path without the query.
    pub path: String,
    pub query: String,
    /// The discovery method id (`compute.networks.insert`), empty when no
    /// method matched.
    pub method: String,
    /// The status answered; 0 for a dropped connection.
    pub status: u16,
}

impl Call {
    /// Whether the call could change something (not a read, not an
    /// operation poll).
    pub fn is_write(&self) -> bool {
        let verb = self.method.rsplit('.').next().unwrap_or("");
        !matches!(
            verb,
            "get" | "list" | "aggregatedList" | "wait" | "getIamPolicy" | "listManagedInstances"
        ) && !self.method.is_empty()
    }
}

/// A pending Compute operation and what it does when done.
struct Operation {
    /// Where it lives (`compute/v1/projects/p/global/operations/NAME`).
    path: String,
    json: Value,
    started: Instant,
    effect: Option<Effect>,
}

type Effect = Box<dyn FnOnce(&mut State) -> Result<(), ApiError> + Send>;

/// Everything the server holds.
pub(crate) struct State {
    /// Resources by path without the leading slash
    /// (`compute/v1/projects/p/global/networks/n`).
    resources: BTreeMap<String, Value>,
    operations: Vec<Operation>,
    calls: Vec<Call>,
    page_size: Option<usize>,
    fault_rate: f64,
    operation_delay: Duration,
    rng: u64,
    counter: u64,
    /// When each service account was made (by email).
    accounts_made: BTreeMap<String, Instant>,
    /// How long a new service account is refused in IAM policies.
    iam_delay: Duration,
    /// The fraction of operations that end in an error.
    operation_failure_rate: f64,
    /// `operations.wait` answers at once, done or not.
    wait_returns_early: bool,
    /// Per-project rate quotas by API group: the limit per window, and
    /// the calls counted in the current window.
    quotas: BTreeMap<String, Quota>,
    /// Access tokens the server issued, with their scopes; `None`: no
    /// token is asked for (the clients run unauthenticated).
    tokens: Option<BTreeMap<String, Vec<String>>>,
}

impl State {
    fn next_id(&mut self) -> u64 {
        self.counter += 1;
        self.counter
    }

    /// A pseudo-random number in [0, 1).
    fn random(&mut self) -> f64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A link as Compute Engine writes it: on Google's host, whatever
    /// endpoint the caller used.
    fn link(&self, path: &str) -> String {
        format!("{GOOGLE}/{path}")
    }

    /// Finishes the operations whose time has come, oldest first.
    fn advance(&mut self) {
        let now = Instant::now();
        let delay = self.operation_delay;
        let due: Vec<usize> = (0..self.operations.len())
            .filter(|&i| {
                self.operations[i].json["status"] != "DONE"
                    && now.duration_since(self.operations[i].started) >= delay
            })
            .collect();
        for i in due {
            self.finish(i);
        }
        for op in &mut self.operations {
            if op.json["status"] == "PENDING" && now.duration_since(op.started) >= delay / 2 {
                op.json["status"] = "RUNNING".into();
                op.json["progress"] = 50.into();
                op.json["startTime"] = timestamp().into();
            }
        }
    }

    fn finish(&mut self, index: usize) {
        let effect = self.operations[index].effect.take();
        let fails = self.operation_failure_rate > 0.0
            && effect.is_some()
            && self.random() < self.operation_failure_rate;
        let result = if fails {
            let target = self.operations[index].json["targetLink"]
                .as_str()
                .unwrap_or("")
                .to_string();
            Err(if self.random() < 0.5 {
                ApiError::new(
                    500,
                    "INTERNAL_ERROR",
                    "INTERNAL SERVER ERROR",
                    "Internal error. Please try again or contact Google Support.".into(),
                )
            } else {
                ApiError::new(
                    403,
                    "RESOURCE_OPERATION_RATE_EXCEEDED",
                    "FORBIDDEN",
                    format!("Operation rate exceeded for resource '{target}'. Too frequent operations from the source resource."),
                )
            })
        } else {
            effect.map_or(Ok(()), |effect| effect(self))
        };
        let op = &mut self.operations[index];
        op.json["status"] = "DONE".into();
        op.json["progress"] = 100.into();
        op.json["endTime"] = timestamp().into();
        if let Err(error) = result {
            op.json["error"] = serde_json::json!({"errors": [
                {"code": error.reason, "message": error.message}
            ]});
            op.json["httpErrorStatusCode"] = error.code.into();
            op.json["httpErrorMessage"] = error.status.into();
        }
    }
}

/// A rate quota of one API group.
pub(crate) struct Quota {
    limit: u32,
    window: Duration,
    /// By project and location (`global`, or a region for the groups
    /// counted per region): the window counted (its number since the
    /// epoch: windows are synchronized, as Google's minutes are) and the
    /// calls in it.
    used: BTreeMap<(String, String), (u128, u32)>,
}

/// An API group with a rate quota, as Google's documentation names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaGroup {
    /// What [`GceApi::set_rate_quota`] takes: Compute Engine's metric
    /// name without `compute.googleapis.com/` (`list_requests_per_region`),
    /// or `iam-read`, `iam-write`, `dns`, `cloudresourcemanager`.
    pub name: &'static str,
    /// `compute`, `iam`, `dns`, `cloudresourcemanager`.
    pub service: &'static str,
    /// The quota's display name (`List requests`) and its limit's
    /// (`List requests per minute per region`), as quota errors name them.
    pub metric: &'static str,
    pub limit: &'static str,
    /// The limit's id (`ListRequestsPerMinutePerRegion`).
    pub limit_id: &'static str,
    /// Counted per region rather than per project.
    pub per_region: bool,
    /// The documented default, calls a minute per project (and region).
    pub per_minute: Option<u32>,
}

const fn group(
    name: &'static str,
    service: &'static str,
    metric: &'static str,
    limit: &'static str,
    limit_id: &'static str,
    per_region: bool,
    per_minute: Option<u32>,
) -> QuotaGroup {
    QuotaGroup {
        name,
        service,
        metric,
        limit,
        limit_id,
        per_region,
        per_minute,
    }
}

/// Compute Engine's default for its legacy groups (Google's "Compute Engine
/// rate quotas" page gave 1,500 requests a minute per project for queries,
/// reads, lists and operation reads; the page no longer lists defaults, the
/// console shows a project's). The per-region groups are given the same.
const COMPUTE_PER_MINUTE: Option<u32> = Some(1500);

/// The groups the server knows: Compute Engine's, counted per project
/// (global methods) or per project and region (regional and zonal
/// methods), IAM's read and write requests (6,000 and 600 a minute per
/// project, IAM's quotas page), and Cloud DNS and Resource Manager as one
/// group each (no default here).
#[rustfmt::skip]
pub const QUOTA_GROUPS: &[QuotaGroup] = &[
    group("default", "compute", "Queries", "Queries per minute", "defaultPerMinutePerProject", false, COMPUTE_PER_MINUTE),
    group("read_requests", "compute", "Read requests", "Read requests per minute", "ReadRequestsPerMinutePerProject", false, COMPUTE_PER_MINUTE),
    group("list_requests", "compute", "List requests", "List requests per minute", "ListRequestsPerMinutePerProject", false, COMPUTE_PER_MINUTE),
    group("operation_read_requests", "compute", "Operation read requests", "Operation read requests per minute", "OperationReadRequestsPerMinutePerProject", false, COMPUTE_PER_MINUTE),
    group("heavy_weight_read_requests", "compute", "Heavy-weight read requests", "Heavy-weight read requests per minute", "HeavyWeightReadRequestsPerMinutePerProject", false, COMPUTE_PER_MINUTE),
    group("project_set_common_instance_metadata_requests", "compute", "Project set common instance metadata requests", "Project set common instance metadata requests per minute", "ProjectSetCommonInstanceMetadataRequestsPerMinutePerProject", false, Some(36)),
    group("default_per_region", "compute", "Queries", "Queries per minute per region", "QueriesPerMinutePerRegion", true, COMPUTE_PER_MINUTE),
    group("read_requests_per_region", "compute", "Read requests", "Read requests per minute per region", "ReadRequestsPerMinutePerRegion", true, COMPUTE_PER_MINUTE),
    group("list_requests_per_region", "compute", "List requests", "List requests per minute per region", "ListRequestsPerMinutePerRegion", true, COMPUTE_PER_MINUTE),
    group("operation_read_requests_per_region", "compute", "Operation read requests", "Operation read requests per minute per region", "OperationReadRequestsPerMinutePerRegion", true, COMPUTE_PER_MINUTE),
    group("heavy_weight_read_requests_per_region", "compute", "Heavy-weight read requests", "Heavy-weight read requests per minute per region", "HeavyWeightReadRequestsPerMinutePerRegion", true, COMPUTE_PER_MINUTE),
    group("iam-read", "iam", "Read requests", "Read requests per minute", "ReadRequestsPerMinutePerProject", false, Some(6000)),
    group("iam-write", "iam", "Write requests", "Write requests per minute", "WriteRequestsPerMinutePerProject", false, Some(600)),
    group("dns", "dns", "Queries", "Queries per minute", "defaultPerMinutePerProject", false, None),
    group("cloudresourcemanager", "cloudresourcemanager", "Queries", "Queries per minute", "defaultPerMinutePerProject", false, None),
];

/// The region of a zone (`us-test1-a`: `us-test1`).
fn region_of_zone(zone: &str) -> &str {
    zone.rsplit_once('-').map_or(zone, |(region, _)| region)
}

/// The quota group of a method and where it is counted (`global` or a
/// region), as Compute Engine's page sorts its methods: `aggregatedList`
/// is a heavy-weight read; an operation's `get` an operation read and its
/// `wait` a heavy-weight read (Google lists `regionOperations.wait` and
/// `zoneOperations.wait`; `globalOperations.wait` is counted the same
/// here); other `get`s are reads, `list`s lists, and every other method
/// (mutations, `listManagedInstances`) a query. Regional and zonal
/// methods count against the `_per_region` groups of their region.
fn quota_group(
    method: &discovery::Method,
    vars: &BTreeMap<String, String>,
) -> (&'static str, String) {
    let verb = method.id.rsplit('.').next().unwrap_or("");
    let collection = method.id.split('.').nth(1).unwrap_or("");
    let name = match method.service {
        "compute" => {
            let region = match collection {
                "regions" | "zones" => None,
                _ => vars
                    .get("zone")
                    .map(|z| region_of_zone(z).to_string())
                    .or_else(|| vars.get("region").cloned()),
            };
            let base = if verb == "aggregatedList" {
                return ("heavy_weight_read_requests", "global".into());
            } else if method.id == "compute.projects.setCommonInstanceMetadata" {
                "project_set_common_instance_metadata_requests"
            } else if collection.ends_with("Operations") {
                match verb {
                    "get" => "operation_read_requests",
                    "wait" => "heavy_weight_read_requests",
                    "list" => "list_requests",
                    _ => "default",
                }
            } else {
                match verb {
                    "get" => "read_requests",
                    "list" => "list_requests",
                    _ => "default",
                }
            };
            let Some(region) = region else {
                return (base, "global".into());
            };
            let regional = QUOTA_GROUPS
                .iter()
                .find(|g| g.per_region && g.name.strip_suffix("_per_region") == Some(base))
                .map_or(base, |g| g.name);
            return (regional, region);
        }
        "iam" if matches!(verb, "get" | "list" | "getIamPolicy" | "testIamPermissions") => {
            "iam-read"
        }
        "iam" => "iam-write",
        "dns" => "dns",
        _ => "cloudresourcemanager",
    };
    (name, "global".into())
}

/// Counts a call against its group's quota; the error when over it, as
/// Google answers: Compute 403 `rateLimitExceeded` (`PERMISSION_DENIED`),
/// the other APIs 429 (`RESOURCE_EXHAUSTED`), the message naming the quota
/// and the project's number, and the details a quota error carries (an
/// `ErrorInfo` with the metric, limit and location, a `Help` link).
fn charge_quota(state: &mut State, matched: &discovery::Matched<'_>) -> Result<(), ApiError> {
    let (name, location) = quota_group(matched.method, &matched.vars);
    let Some(quota) = state.quotas.get_mut(name) else {
        return Ok(());
    };
    let project = ["project", "projectsId", "projectId", "resource"]
        .iter()
        .find_map(|k| matched.vars.get(*k))
        .cloned()
        .unwrap_or_default();
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    let window = since_epoch / quota.window.as_nanos().max(1);
    let (counted, used) = quota
        .used
        .entry((project.clone(), location.clone()))
        .or_insert((window, 0));
    if *counted != window {
        *counted = window;
        *used = 0;
    }
    *used += 1;
    if *used <= quota.limit {
        return Ok(());
    }
    let limit = quota.limit;
    let group = QUOTA_GROUPS
        .iter()
        .find(|g| g.name == name)
        .copied()
        .unwrap_or(QUOTA_GROUPS[0]);
    let service = format!("{}.googleapis.com", group.service);
    let number = others::project_number(&project);
    let message = format!(
        "Quota exceeded for quota metric '{}' and limit '{}' of service '{service}' for consumer 'project_number:{number}'.",
        group.metric, group.limit
    );
    let metric = match group.service {
        "compute" => format!("{service}/{name}"),
        _ => format!(
            "{service}/{}",
            group.metric.to_lowercase().replace(' ', "_")
        ),
    };
    let unit = if group.per_region {
        "1/min/{project}/{region}"
    } else {
        "1/min/{project}"
    };
    let details = serde_json::json!([
        {
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "RATE_LIMIT_EXCEEDED",
            "domain": "googleapis.com",
            "metadata": {
                "service": service,
                "consumer": format!("projects/{number}"),
                "quota_metric": metric,
                "quota_limit": group.limit_id,
                "quota_limit_value": limit.to_string(),
                "quota_location": location,
                "quota_unit": unit,
            }
        },
        {
            "@type": "type.googleapis.com/google.rpc.Help",
            "links": [{
                "description": "Request a higher quota limit.",
                "url": "https://cloud.google.com/docs/quotas/help/request_increase"
            }]
        }
    ]);
    let error = if group.service == "compute" {
        ApiError::new(403, "rateLimitExceeded", "PERMISSION_DENIED", message)
    } else {
        ApiError::new(429, "rateLimitExceeded", "RESOURCE_EXHAUSTED", message)
    };
    Err(error.with_details("usageLimits", details))
}

/// A running GCE API test server; it stops when the process exits.
#[derive(Clone)]
pub struct GceApi {
    url: String,
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for GceApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GceApi").field("url", &self.url).finish()
    }
}

/// A started server, or `None` (after printing why) when Google's discovery
/// documents are not installed and the test should be skipped.
///
/// # Panics
///
/// When they are missing and [`crate::in_ci`], or when the server cannot start.
pub fn require_gce_api() -> Option<GceApi> {
    if documents_dir().is_none() {
        crate::skip(
            "GCE API",
            "Google's discovery documents not found (run scripts/setup-venv, which \
             installs google-api-python-client, or set GCE_DISCOVERY_DIR)",
        );
        return None;
    }
    Some(GceApi::start().expect("start the GCE API test server"))
}

impl GceApi {
    /// Starts a server on a free loopback port.
    pub fn start() -> io::Result<GceApi> {
        let dir = documents_dir().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "Google's discovery documents not found",
            )
        })?;
        let discovery = Discovery::load(&dir).map_err(io::Error::other)?;
        GceApi::start_on("127.0.0.1:0", discovery)
    }

    fn start_on(addr: &str, discovery: Discovery) -> io::Result<GceApi> {
        let listener = TcpListener::bind(addr)?;
        let url = format!("http://{}", listener.local_addr()?);
        let seed = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
            | 1;
        let state = Arc::new(Mutex::new(State {
            resources: BTreeMap::new(),
            operations: Vec::new(),
            calls: Vec::new(),
            page_size: None,
            fault_rate: 0.0,
            operation_delay: Duration::from_millis(40),
            rng: seed,
            counter: 1000,
            tokens: None,
            accounts_made: BTreeMap::new(),
            iam_delay: Duration::ZERO,
            operation_failure_rate: 0.0,
            wait_returns_early: false,
            quotas: BTreeMap::new(),
        }));
        let discovery = Arc::new(discovery);
        let shared = state.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let state = shared.clone();
                let discovery = discovery.clone();
                std::thread::spawn(move || serve(stream, &state, &discovery));
            }
        });
        Ok(GceApi { url, state })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// gcloud's endpoint overrides pointing at this server (Compute and
    /// Cloud DNS with their version path, IAM and Resource Manager at
    /// their root), as `(name, value)`.
    pub fn env(&self) -> Vec<(String, String)> {
        let url = &self.url;
        [
            (
                "CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE",
                format!("{url}/compute/v1/"),
            ),
            (
                "CLOUDSDK_API_ENDPOINT_OVERRIDES_DNS",
                format!("{url}/dns/v1/"),
            ),
            ("CLOUDSDK_API_ENDPOINT_OVERRIDES_IAM", format!("{url}/iam/")),
            (
                "CLOUDSDK_API_ENDPOINT_OVERRIDES_CLOUDRESOURCEMANAGER",
                format!("{url}/cloudresourcemanager/"),
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    /// From now on every API call needs `Authorization: Bearer TOKEN` with
    /// a token this server issued ([`GceApi::issue_token`] or its token
    /// endpoint, [`GceApi::token_uri`]) whose scopes include one of the
    /// method's (its discovery document lists them): 401 without a known
    /// token, 403 `ACCESS_TOKEN_SCOPE_INSUFFICIENT` when no scope covers
    /// the method, as Google answers.
    pub fn require_tokens(&self) {
        let mut state = self.state.lock().unwrap();
        state.tokens.get_or_insert_with(BTreeMap::new);
    }

    /// A new access token with `scopes` (full scope URLs).
    pub fn issue_token(&self, scopes: &[&str]) -> String {
        let mut state = self.state.lock().unwrap();
        let scopes = scopes.iter().map(|s| s.to_string()).collect();
        issue(&mut state, scopes)
    }

    /// The server's OAuth 2.0 token endpoint (`POST`, form-encoded), for a
    /// credentials file's `token_uri`: a service account's signed JWT
    /// (`grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer`) gets a
    /// token with the JWT's `scope` claim; a user's refresh token
    /// (`grant_type=refresh_token`) gets its `scope` parameter, else
    /// `cloud-platform` (what `gcloud auth application-default login`
    /// grants). The JWT's signature is not checked.
    pub fn token_uri(&self) -> String {
        format!("{}/token", self.url)
    }

    /// Caps every list page at `size` items (`None`: only `maxResults`).
    pub fn set_page_size(&self, size: Option<usize>) {
        self.state.lock().unwrap().page_size = size;
    }

    /// The fraction of calls (0.0..=1.0) that fail with 503, 429 or a
    /// dropped connection.
    pub fn set_fault_rate(&self, rate: f64) {
        self.state.lock().unwrap().fault_rate = rate;
    }

    /// How long a new service account is refused as a member of a
    /// project's IAM policy (400 `Service account ... does not exist.`),
    /// as Google's IAM is eventually consistent.
    pub fn set_iam_delay(&self, delay: Duration) {
        self.state.lock().unwrap().iam_delay = delay;
    }

    /// The fraction of Compute operations (0.0..=1.0) that end `DONE` with
    /// an error and no effect, with Google's codes: `INTERNAL_ERROR` (500)
    /// or `RESOURCE_OPERATION_RATE_EXCEEDED` (403).
    pub fn set_operation_failure_rate(&self, rate: f64) {
        self.state.lock().unwrap().operation_failure_rate = rate;
    }

    /// Whether `operations.wait` answers at once with the operation as it
    /// is (Google's wait returns after a while even when it is not done);
    /// otherwise it waits for the operation to finish.
    pub fn set_wait_returns_early(&self, early: bool) {
        self.state.lock().unwrap().wait_returns_early = early;
    }

    /// A rate quota: at most `limit` calls of API group `group` (one of
    /// [`QUOTA_GROUPS`], by name) per `window` per project, and per region
    /// for the `_per_region` groups; windows are synchronized (whole
    /// multiples of `window` since the epoch), as Google refills its
    /// per-minute quotas at the start of each minute. Over it, Compute
    /// answers 403 `rateLimitExceeded`, the other APIs 429
    /// `RESOURCE_EXHAUSTED` (see [`QUOTA_GROUPS`] for which method counts
    /// where).
    ///
    /// # Panics
    ///
    /// When `group` is not one of [`QUOTA_GROUPS`].
    pub fn set_rate_quota(&self, group: &str, limit: u32, window: Duration) {
        assert!(
            QUOTA_GROUPS.iter().any(|g| g.name == group),
            "no quota group {group}: {:?}",
            QUOTA_GROUPS.iter().map(|g| g.name).collect::<Vec<_>>()
        );
        self.state.lock().unwrap().quotas.insert(
            group.to_string(),
            Quota {
                limit,
                window,
                used: BTreeMap::new(),
            },
        );
    }

    /// Every group's documented default ([`QuotaGroup::per_minute`]) on,
    /// per minute; a group without one stays unlimited. Change one with
    /// [`GceApi::set_rate_quota`] afterwards.
    pub fn set_documented_quotas(&self) {
        for group in QUOTA_GROUPS {
            if let Some(limit) = group.per_minute {
                self.set_rate_quota(group.name, limit, Duration::from_secs(60));
            }
        }
    }

    /// How long a Compute operation takes to be `DONE`.
    pub fn set_operation_delay(&self, delay: Duration) {
        self.state.lock().unwrap().operation_delay = delay;
    }

    /// Stores a resource as if it existed, at `path` (as in the URL, with
    /// or without the leading slash: `compute/v1/projects/p/zones/z/instances/i`,
    /// `dns/v1/projects/p/managedZones/z`). Compute resources get their
    /// `selfLink`, `id`, `creationTimestamp` and fingerprints when missing.
    pub fn seed(&self, path: &str, resource: Value) {
        let mut state = self.state.lock().unwrap();
        let path = path.trim_start_matches('/').to_string();
        if path.starts_with("dns/v1/") && path.split('/').nth_back(1) == Some("managedZones") {
            others::seed_zone(&mut state, &path, resource);
            return;
        }
        let resource = compute::with_defaults(&mut state, &path, resource);
        state.resources.insert(path, resource);
    }

    /// The resource at `path`, if any (finished operations applied).
    pub fn get(&self, path: &str) -> Option<Value> {
        let mut state = self.state.lock().unwrap();
        state.advance();
        state.resources.get(path.trim_start_matches('/')).cloned()
    }

    /// Every resource path (operations aside), sorted.
    pub fn paths(&self) -> Vec<String> {
        let mut state = self.state.lock().unwrap();
        state.advance();
        state.resources.keys().cloned().collect()
    }

    /// Removes a resource (as if someone deleted it); whether it existed.
    pub fn remove(&self, path: &str) -> bool {
        let mut state = self.state.lock().unwrap();
        state
            .resources
            .remove(path.trim_start_matches('/'))
            .is_some()
    }

    /// The calls answered so far.
    pub fn calls(&self) -> Vec<Call> {
        self.state.lock().unwrap().calls.clone()
    }

    /// The calls answered since the last call of this method.
    pub fn take_calls(&self) -> Vec<Call> {
        std::mem::take(&mut self.state.lock().unwrap().calls)
    }

    /// Sends one request to the server (path from the root, with any
    /// query) and returns the status and the parsed body (`Null` when
    /// empty or the connection was dropped: status 0).
    pub fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> io::Result<(u16, Value)> {
        let port = self
            .url
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        let text = body.map(Value::to_string).unwrap_or_default();
        match crate::http_request_with(
            port,
            method,
            path,
            "Content-Type: application/json\r\n",
            &text,
        ) {
            Ok((status, bytes)) => Ok((
                status,
                serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            )),
            Err(e) if e.kind() == io::ErrorKind::InvalidData => Ok((0, Value::Null)),
            Err(e) => Err(e),
        }
    }

    /// Serves until the process is killed (for the `kops-testkit` binary).
    pub fn serve_forever(&self) -> ! {
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
}

/// What one request asked.
struct Request {
    method: String,
    path: String,
    query: Vec<(String, String)>,
    raw_query: String,
    body: Vec<u8>,
    /// `Connection: close`: answer, then close.
    close: bool,
    /// Whether the length was given (`Content-Length` or chunked).
    sized: bool,
    /// The `Authorization` header.
    authorization: Option<String>,
}

fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Request> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let target = parts.next()?.to_string();
    let mut length = None;
    let mut chunked = false;
    let mut close = false;
    let mut authorization = None;
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                length = Some(value.parse().ok()?);
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = value.eq_ignore_ascii_case("chunked");
            } else if name.eq_ignore_ascii_case("connection") {
                close = value.eq_ignore_ascii_case("close");
            } else if name.eq_ignore_ascii_case("authorization") {
                authorization = Some(value.to_string());
            }
        }
    }
    let body = if chunked {
        read_chunks(reader)?
    } else {
        let mut body = vec![0; length.unwrap_or(0)];
        reader.read_exact(&mut body).ok()?;
        body
    };
    let (path, raw_query) = target.split_once('?').unwrap_or((&target, ""));
    let query = raw_query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect();
    Some(Request {
        method,
        path: path.to_string(),
        query,
        raw_query: raw_query.to_string(),
        body,
        close,
        sized: length.is_some() || chunked,
        authorization,
    })
}

/// A chunked body (`Transfer-Encoding: chunked`), trailers skipped.
fn read_chunks(reader: &mut BufReader<TcpStream>) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).ok()?;
        let size = line.trim().split(';').next()?;
        let size = usize::from_str_radix(size, 16).ok()?;
        if size == 0 {
            loop {
                let mut trailer = String::new();
                if reader.read_line(&mut trailer).ok()? == 0 || trailer.trim().is_empty() {
                    return Some(body);
                }
            }
        }
        let start = body.len();
        body.resize(start + size, 0);
        reader.read_exact(&mut body[start..]).ok()?;
        let mut end = [0; 2];
        reader.read_exact(&mut end).ok()?;
    }
}

fn serve(stream: TcpStream, state: &Mutex<State>, discovery: &Discovery) {
    let Ok(clone) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(clone);
    let mut out = stream;
    while let Some(request) = read_request(&mut reader) {
        if !request.sized && matches!(request.method.as_str(), "POST" | "PUT" | "PATCH") {
            // Google's front end, before any API sees the request.
            let page = "<!DOCTYPE html>\n<html lang=en><title>Error 411 (Length Required)!!1</title>\n<p><b>411.</b> <ins>That\u{2019}s an error.</ins>\n<p>POST requests require a <code>Content-length</code> header.  <ins>That\u{2019}s all we know.</ins>\n";
            let reply = format!(
                "HTTP/1.1 411 Length Required\r\nContent-Type: text/html; charset=UTF-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
                page.len()
            );
            state.lock().unwrap().calls.push(Call {
                http_method: request.method.clone(),
                path: request.path.clone(),
                query: request.raw_query.clone(),
                method: String::new(),
                status: 411,
            });
            let _ = out.write_all(reply.as_bytes());
            return;
        }
        let Some((status, body)) = handle(state, discovery, &request) else {
            // A dropped connection.
            let _ = out.shutdown(std::net::Shutdown::Both);
            return;
        };
        let text = body.to_string();
        let reply = format!(
            "HTTP/1.1 {status} {}\r\nContent-Type: application/json; charset=UTF-8\r\nContent-Length: {}\r\n\r\n{text}",
            reason_phrase(status),
            text.len()
        );
        if out.write_all(reply.as_bytes()).is_err() || request.close {
            return;
        }
    }
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        409 => "Conflict",
        412 => "Precondition Failed",
        429 => "Too Many Requests",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

/// Answers one request; `None` drops the connection.
fn handle(state: &Mutex<State>, discovery: &Discovery, request: &Request) -> Option<(u16, Value)> {
    let mut state = state.lock().unwrap();
    state.advance();
    if request.method == "POST" && request.path == "/token" {
        return Some(token_endpoint(&mut state, request));
    }
    let matched = discovery.route(&request.method, &request.path);
    let mut call = Call {
        http_method: request.method.clone(),
        path: request.path.clone(),
        query: request.raw_query.clone(),
        method: matched
            .as_ref()
            .map(|m| m.method.id.clone())
            .unwrap_or_default(),
        status: 0,
    };
    if state.fault_rate > 0.0 && state.random() < state.fault_rate {
        let pick = state.random();
        let fault = if pick < 0.3 {
            Some(ApiError::new(
                503,
                "backendError",
                "UNAVAILABLE",
                "The service is currently unavailable.".into(),
            ))
        } else if pick < 0.55 {
            Some(ApiError::new(
                429,
                "rateLimitExceeded",
                "RESOURCE_EXHAUSTED",
                "Rate Limit Exceeded".into(),
            ))
        } else if pick < 0.8 {
            // Compute's answer to a project over its rate quota.
            Some(ApiError::new(
                403,
                "rateLimitExceeded",
                "PERMISSION_DENIED",
                "Rate Limit Exceeded".into(),
            ))
        } else {
            None
        };
        call.status = fault.as_ref().map_or(0, |f| f.code);
        state.calls.push(call);
        return fault.map(|f| (f.code, f.body()));
    }
    let checked = check_token(&state, request, matched.as_ref().map(|m| m.method));
    let result = match &matched {
        _ if checked.is_err() => checked.map(|()| Value::Null),
        None => Err(ApiError::new(
            404,
            "notFound",
            "NOT_FOUND",
            format!(
                "The requested URL {} was not found on this server.",
                request.path
            ),
        )),
        Some(matched) => match charge_quota(&mut state, matched) {
            Ok(()) => dispatch(&mut state, discovery, matched, request),
            Err(e) => Err(e),
        },
    };
    let (status, body) = match result {
        Ok(body) => (200, body),
        Err(error) => (error.code, error.body()),
    };
    call.status = status;
    state.calls.push(call);
    Some((status, body))
}

fn dispatch(
    state: &mut State,
    discovery: &Discovery,
    matched: &discovery::Matched<'_>,
    request: &Request,
) -> Result<Value, ApiError> {
    discovery.check_query(matched.method, &request.query)?;
    let body: Value = if request.body.iter().all(u8::is_ascii_whitespace) {
        Value::Object(Default::default())
    } else {
        serde_json::from_slice(&request.body)
            .map_err(|e| ApiError::invalid(format!("Invalid JSON payload received. {e}")))?
    };
    if matched.method.request.is_some() {
        discovery.check_body(matched.method, &body)?;
    }
    let call = Incoming {
        id: &matched.method.id,
        vars: &matched.vars,
        path: request.path.trim_start_matches('/'),
        query: &request.query,
        body,
        discovery,
    };
    match matched.method.service {
        "compute" => compute::handle(state, &call),
        _ => others::handle(state, &call),
    }
}

/// A request routed to its method.
pub(crate) struct Incoming<'a> {
    pub id: &'a str,
    pub vars: &'a BTreeMap<String, String>,
    /// The path without the leading slash.
    pub path: &'a str,
    pub query: &'a [(String, String)],
    pub body: Value,
    pub discovery: &'a Discovery,
}

impl Incoming<'_> {
    pub fn var(&self, name: &str) -> &str {
        self.vars.get(name).map_or("", String::as_str)
    }

    pub fn param(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn verb(&self) -> &str {
        self.id.rsplit('.').next().unwrap_or("")
    }
}

/// One page of `items` from `pageToken`, at most `maxResults` (or
/// `pageSize`) and the server's page size; the next token if more remain.
pub(crate) fn page<T: Clone>(
    state: &State,
    call: &Incoming<'_>,
    items: &[T],
) -> Result<(Vec<T>, Option<String>), ApiError> {
    let start = match call.param("pageToken").filter(|t| !t.is_empty()) {
        None => 0,
        Some(token) => token
            .strip_prefix("page-")
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|&n| n <= items.len())
            .ok_or_else(|| {
                ApiError::invalid(format!(
                    "Invalid value for field 'pageToken': '{token}'. Invalid page token."
                ))
            })?,
    };
    let asked = call
        .param("maxResults")
        .or(call.param("pageSize"))
        .and_then(|n| n.parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(500);
    let size = state.page_size.map_or(asked, |cap| cap.min(asked));
    let end = (start + size).min(items.len());
    let next = (end < items.len()).then(|| format!("page-{end}"));
    Ok((items[start..end].to_vec(), next))
}

/// RFC 3339 now, as Google writes it.
pub(crate) fn timestamp() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.000-00:00",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

pub(crate) fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => match u8::from_str_radix(&text[i + 1..i + 3], 16) {
                Ok(b) => {
                    out.push(b);
                    i += 3;
                }
                Err(_) => {
                    out.push(b'%');
                    i += 1;
                }
            },
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A short stable hash of a JSON value, base64 like Google's fingerprints.
pub(crate) fn fingerprint(value: &Value) -> String {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let mut hasher = DefaultHasher::new();
    value.to_string().hash(&mut hasher);
    let bytes = hasher.finish().to_be_bytes();
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    while !out.len().is_multiple_of(4) {
        out.push('=');
    }
    out
}

fn issue(state: &mut State, scopes: Vec<String>) -> String {
    let id = state.next_id();
    let token = format!("ya29.testkit-{id}-{:08x}", (state.random() * 4e9) as u64);
    state
        .tokens
        .get_or_insert_with(BTreeMap::new)
        .insert(token.clone(), scopes);
    token
}

/// `POST /token`: Google's OAuth token endpoint (see [`GceApi::token_uri`]).
fn token_endpoint(state: &mut State, request: &Request) -> (u16, Value) {
    let form: BTreeMap<String, String> = String::from_utf8_lossy(&request.body)
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (percent_decode(k), percent_decode(v)))
        .collect();
    let refused = |what: &str| {
        (
            400,
            serde_json::json!({"error": "invalid_grant", "error_description": what}),
        )
    };
    let scopes = match form.get("grant_type").map(String::as_str) {
        Some("urn:ietf:params:oauth:grant-type:jwt-bearer") => {
            use base64::Engine;
            let claims = form
                .get("assertion")
                .and_then(|jwt| jwt.split('.').nth(1))
                .and_then(|part| {
                    base64::engine::general_purpose::URL_SAFE_NO_PAD
                        .decode(part.trim_end_matches('='))
                        .ok()
                })
                .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok());
            let Some(claims) = claims else {
                return refused("Invalid JWT.");
            };
            match claims["scope"].as_str() {
                Some(scope) => scope.split_whitespace().map(str::to_string).collect(),
                None => return refused("Invalid JWT: No valid scope or audience claim."),
            }
        }
        Some("refresh_token") if form.contains_key("refresh_token") => match form.get("scope") {
            Some(scope) => scope.split_whitespace().map(str::to_string).collect(),
            None => vec![CLOUD_PLATFORM.to_string()],
        },
        _ => return refused("Invalid grant."),
    };
    let token = issue(state, scopes);
    (
        200,
        serde_json::json!({"access_token": token, "expires_in": 3599, "token_type": "Bearer"}),
    )
}

const CLOUD_PLATFORM: &str = "https://www.googleapis.com/auth/cloud-platform";

/// Google's answer to a call without a token it knows, or with one whose
/// scopes do not cover the method.
fn check_token(
    state: &State,
    request: &Request,
    method: Option<&discovery::Method>,
) -> Result<(), ApiError> {
    let Some(tokens) = &state.tokens else {
        return Ok(());
    };
    let given = request
        .authorization
        .as_deref()
        .and_then(|h| h.strip_prefix("Bearer "))
        .and_then(|t| tokens.get(t.trim()));
    let Some(scopes) = given else {
        return Err(ApiError::new(
            401,
            "required",
            "UNAUTHENTICATED",
            "Request is missing required authentication credential. Expected OAuth 2 access token, login cookie or other valid authentication credential.".into(),
        ));
    };
    match method {
        Some(m) if !m.scopes.is_empty() && !m.scopes.iter().any(|s| scopes.contains(s)) => {
            Err(ApiError::new(
                403,
                "insufficientPermissions",
                "PERMISSION_DENIED",
                "Request had insufficient authentication scopes.".into(),
            ))
        }
        _ => Ok(()),
    }
}
