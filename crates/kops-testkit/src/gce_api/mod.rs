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
//! - [`GceApi::set_fault_rate`]: that fraction of calls answers 503, 429 or
//!   drops the connection without an answer (before doing anything).
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
    /// The base URL, for self links.
    url: String,
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

    fn link(&self, path: &str) -> String {
        format!("{}/{path}", self.url)
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
        let result = effect.map_or(Ok(()), |effect| effect(self));
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
            url: url.clone(),
            resources: BTreeMap::new(),
            operations: Vec::new(),
            calls: Vec::new(),
            page_size: None,
            fault_rate: 0.0,
            operation_delay: Duration::from_millis(40),
            rng: seed,
            counter: 1000,
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

    /// Caps every list page at `size` items (`None`: only `maxResults`).
    pub fn set_page_size(&self, size: Option<usize>) {
        self.state.lock().unwrap().page_size = size;
    }

    /// The fraction of calls (0.0..=1.0) that fail with 503, 429 or a
    /// dropped connection.
    pub fn set_fault_rate(&self, rate: f64) {
        self.state.lock().unwrap().fault_rate = rate;
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
}

fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Request> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let target = parts.next()?.to_string();
    let mut length = 0;
    let mut close = false;
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().ok()?;
            } else if name.eq_ignore_ascii_case("connection") {
                close = value.trim().eq_ignore_ascii_case("close");
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
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
    })
}

fn serve(stream: TcpStream, state: &Mutex<State>, discovery: &Discovery) {
    let Ok(clone) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(clone);
    let mut out = stream;
    while let Some(request) = read_request(&mut reader) {
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
        let fault = if pick < 0.4 {
            Some(ApiError::new(
                503,
                "backendError",
                "UNAVAILABLE",
                "The service is currently unavailable.".into(),
            ))
        } else if pick < 0.8 {
            Some(ApiError::new(
                429,
                "rateLimitExceeded",
                "RESOURCE_EXHAUSTED",
                "Rate Limit Exceeded".into(),
            ))
        } else {
            None
        };
        call.status = fault.as_ref().map_or(0, |f| f.code);
        state.calls.push(call);
        return fault.map(|f| (f.code, f.body()));
    }
    let result = match &matched {
        None => Err(ApiError::new(
            404,
            "notFound",
            "NOT_FOUND",
            format!(
                "The requested URL {} was not found on this server.",
                request.path
            ),
        )),
        Some(matched) => dispatch(&mut state, discovery, matched, request),
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
