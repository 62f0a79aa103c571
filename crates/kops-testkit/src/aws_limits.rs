//! AWS' request-rate limits in front of moto, which has none: a loopback
//! proxy that keeps a token bucket per account the way AWS documents them
//! and answers a call that finds its bucket empty as the service does,
//! without forwarding it.
//!
//! The buckets ("Request throttling for the Amazon EC2 API"): one per API
//! action, non-mutating actions (`Describe*`, `Get*`, `List*`) 100 tokens
//! refilled at 20 a second, mutating ones 200 at 5 a second, EC2's
//! `RunInstances` 1,000 at 2. Auto Scaling, ELB, IAM, SQS and EventBridge
//! publish no figures and get the same two kinds; Route 53 allows 5
//! requests a second for the whole account. S3 is not metered here (its
//! limits are per prefix and far above what a cluster does). Sizes and
//! rates are set per run ([`AwsLimits::start_with`]).
//!
//! The answers, as AWS sends them:
//! - EC2: HTTP 503, `RequestLimitExceeded`, "Request limit exceeded.";
//! - the other query APIs (Auto Scaling, ELB, IAM, STS) and Route 53:
//!   HTTP 400, an `ErrorResponse` of type `Sender`, `Throttling`, "Rate
//!   exceeded";
//! - JSON APIs (SQS, EventBridge): HTTP 400, `ThrottlingException`.
//!
//! The same model as `../shared/tools/awsproxy.py --buckets`, so the two
//! can be compared on one run.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::fault_proxy::{read_request, relay, Request};

/// Bucket sizes and refill rates (tokens a second).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Buckets {
    /// Non-mutating actions, per action.
    pub read: (f64, f64),
    /// Mutating actions, per action.
    pub write: (f64, f64),
    /// EC2 `RunInstances`.
    pub run_instances: (f64, f64),
    /// Route 53, one for the account.
    pub route53: (f64, f64),
}

impl Default for Buckets {
    /// AWS' documented defaults.
    fn default() -> Self {
        Buckets {
            read: (100.0, 20.0),
            write: (200.0, 5.0),
            run_instances: (1000.0, 2.0),
            route53: (5.0, 5.0),
        }
    }
}

/// Calls per action: relayed, and answered with a throttle.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ActionCount {
    pub relayed: u64,
    pub throttled: u64,
}

/// A running proxy; stopped on drop.
pub struct AwsLimits {
    url: String,
    stop: Arc<AtomicBool>,
    shared: Arc<Shared>,
}

struct Shared {
    buckets: Buckets,
    /// By `service:Action` (Route 53: `route53`): tokens, last refill.
    levels: Mutex<BTreeMap<String, (f64, Instant)>>,
    counts: Mutex<BTreeMap<String, ActionCount>>,
    requests: AtomicU64,
    /// A JSON line per request (`op`, `status`, `fault`), as
    /// awsproxy.py's `--log` writes them.
    log: Option<Mutex<std::fs::File>>,
}

impl AwsLimits {
    /// A proxy to `upstream` (`http://host:port`) with AWS' default buckets.
    pub fn start(upstream: &str) -> std::io::Result<AwsLimits> {
        Self::start_with(upstream, Buckets::default())
    }

    /// A proxy to `upstream` with the buckets `buckets`.
    pub fn start_with(upstream: &str, buckets: Buckets) -> std::io::Result<AwsLimits> {
        Self::start_logged(upstream, buckets, None)
    }

    /// As [`AwsLimits::start_with`], appending a line per request to `log`.
    pub fn start_logged(
        upstream: &str,
        buckets: Buckets,
        log: Option<&std::path::Path>,
    ) -> std::io::Result<AwsLimits> {
        let log = match log {
            Some(path) => Some(Mutex::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)?,
            )),
            None => None,
        };
        let authority = upstream
            .strip_prefix("http://")
            .ok_or_else(|| std::io::Error::other("the upstream must be http://"))?
            .trim_end_matches('/')
            .to_string();
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        let stop = Arc::new(AtomicBool::new(false));
        let shared = Arc::new(Shared {
            buckets,
            levels: Mutex::new(BTreeMap::new()),
            counts: Mutex::new(BTreeMap::new()),
            requests: AtomicU64::new(0),
            log,
        });
        {
            let stop = stop.clone();
            let shared = shared.clone();
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((client, _)) => {
                            let shared = shared.clone();
                            let authority = authority.clone();
                            std::thread::spawn(move || {
                                let _ = serve(client, &authority, &shared);
                            });
                        }
                        Err(_) => std::thread::sleep(std::time::Duration::from_millis(2)),
                    }
                }
            });
        }
        Ok(AwsLimits {
            url: format!("http://127.0.0.1:{port}"),
            stop,
            shared,
        })
    }

    /// The proxy's URL: clients' `AWS_ENDPOINT_URL`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Calls by `service:Action` so far.
    pub fn counts(&self) -> BTreeMap<String, ActionCount> {
        self.shared
            .counts
            .lock()
            .map(|c| c.clone())
            .unwrap_or_default()
    }

    /// All requests so far, and how many were throttled.
    pub fn totals(&self) -> (u64, u64) {
        let throttled = self.counts().values().map(|c| c.throttled).sum();
        (self.shared.requests.load(Ordering::Relaxed), throttled)
    }
}

impl Drop for AwsLimits {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The service a request is signed for (its SigV4 credential scope).
fn service_of(request: &Request) -> String {
    request
        .header("Authorization")
        .and_then(|a| a.split("Credential=").nth(1))
        .and_then(|c| c.split('/').nth(3))
        .unwrap_or("")
        .to_string()
}

/// The action: a JSON API's target, a query API's `Action`, or for REST
/// (Route 53) the method and path.
fn action_of(request: &Request) -> String {
    if let Some(target) = request.header("X-Amz-Target") {
        return target.rsplit('.').next().unwrap_or(target).to_string();
    }
    let (method, target) = request.method_and_target();
    let body = String::from_utf8_lossy(&request.body);
    let query = target.split_once('?').map_or("", |(_, q)| q);
    for form in [body.as_ref(), query] {
        if let Some(action) = form
            .split('&')
            .find_map(|pair| pair.strip_prefix("Action="))
        {
            return action.to_string();
        }
    }
    format!("{method} {}", target.split('?').next().unwrap_or(target))
}

impl Shared {
    /// Takes a token from the bucket of `service`'s `action`; false when
    /// it is empty.
    fn take(&self, service: &str, action: &str) -> bool {
        let (key, (size, rate)) = if service == "route53" {
            ("route53".to_string(), self.buckets.route53)
        } else if service == "ec2" && action == "RunInstances" {
            (format!("{service}:{action}"), self.buckets.run_instances)
        } else if ["Describe", "Get", "List", "GET ", "HEAD "]
            .iter()
            .any(|p| action.starts_with(p))
        {
            (format!("{service}:{action}"), self.buckets.read)
        } else {
            (format!("{service}:{action}"), self.buckets.write)
        };
        let now = Instant::now();
        let Ok(mut levels) = self.levels.lock() else {
            return true;
        };
        let (tokens, at) = levels.entry(key).or_insert((size, now));
        *tokens = (*tokens + now.duration_since(*at).as_secs_f64() * rate).min(size);
        *at = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }

    fn count(&self, service: &str, action: &str, throttled: bool) {
        if let Some(Ok(mut log)) = self.log.as_ref().map(Mutex::lock) {
            let line = serde_json::json!({
                "op": action,
                "service": service,
                "fault": if throttled { Some("bucket") } else { None },
            });
            let _ = writeln!(log, "{line}");
        }
        if let Ok(mut counts) = self.counts.lock() {
            let c = counts.entry(format!("{service}:{action}")).or_default();
            if throttled {
                c.throttled += 1;
            } else {
                c.relayed += 1;
            }
        }
    }
}

fn serve(client: TcpStream, authority: &str, shared: &Shared) -> std::io::Result<()> {
    let Some(request) = read_request(&client)? else {
        return Ok(());
    };
    shared.requests.fetch_add(1, Ordering::Relaxed);
    let service = service_of(&request);
    let action = action_of(&request);
    if service == "s3" || service.is_empty() || shared.take(&service, &action) {
        shared.count(&service, &action, false);
        return relay(client, authority, &request);
    }
    shared.count(&service, &action, true);
    let (status, content_type, body, extra) = throttle_answer(&service, &request);
    let mut client = client;
    write!(
        client,
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{extra}x-amzn-RequestId: {}\r\nConnection: close\r\n\r\n",
        body.len(),
        request_id(shared),
    )?;
    client.write_all(body.as_bytes())?;
    client.shutdown(Shutdown::Both)
}

/// An id in the shape of AWS' request ids.
fn request_id(shared: &Shared) -> String {
    let n = shared.requests.load(Ordering::Relaxed);
    format!("00000000-0000-4000-8000-{n:012x}")
}

/// The service's "too many requests": status line, content type, body and
/// extra header lines.
fn throttle_answer(service: &str, request: &Request) -> (&'static str, String, String, String) {
    if request.header("X-Amz-Target").is_some() {
        let content_type = request
            .header("Content-Type")
            .unwrap_or("application/x-amz-json-1.1")
            .to_string();
        return (
            "400 Bad Request",
            content_type,
            r#"{"__type":"ThrottlingException","message":"Rate exceeded"}"#.to_string(),
            "x-amzn-ErrorType: ThrottlingException\r\nx-amzn-query-error: Throttling;Sender\r\n"
                .to_string(),
        );
    }
    if service == "ec2" {
        return (
            "503 Service Unavailable",
            "text/xml;charset=UTF-8".to_string(),
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>RequestLimitExceeded</Code><Message>Request limit exceeded.</Message></Error></Errors><RequestID>00000000-0000-4000-8000-000000000000</RequestID></Response>".to_string(),
            String::new(),
        );
    }
    (
        "400 Bad Request",
        "text/xml".to_string(),
        "<ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code><Message>Rate exceeded</Message></Error><RequestId>00000000-0000-4000-8000-000000000000</RequestId></ErrorResponse>".to_string(),
        String::new(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Read};

    /// An upstream that answers 200 `ok` to anything.
    fn upstream() -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                std::thread::spawn(move || {
                    let Ok(Some(_)) = read_request(&client) else {
                        return;
                    };
                    let mut client = client;
                    let _ = client.write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                    );
                });
            }
        });
        format!("http://127.0.0.1:{port}")
    }

    /// Sends a signed-looking request; the status and body.
    fn call(url: &str, service: &str, extra: &str, body: &str) -> (u16, String) {
        let authority = url.trim_start_matches("http://");
        let mut s = TcpStream::connect(authority).unwrap();
        write!(
            s,
            "POST / HTTP/1.1\r\nHost: {authority}\r\nAuthorization: AWS4-HMAC-SHA256 Credential=AKID/20261129/us-east-1/{service}/aws4_request, SignedHeaders=host, Signature=0\r\n{extra}Content-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut reader = BufReader::new(s);
        let mut status = String::new();
        reader.read_line(&mut status).unwrap();
        let mut rest = String::new();
        reader.read_to_string(&mut rest).unwrap();
        let code = status.split_whitespace().nth(1).unwrap().parse().unwrap();
        (code, rest)
    }

    #[test]
    fn each_service_is_throttled_past_its_bucket_in_its_own_words() {
        let up = upstream();
        let proxy = AwsLimits::start_with(
            &up,
            Buckets {
                read: (3.0, 0.01),
                write: (2.0, 0.01),
                ..Buckets::default()
            },
        )
        .unwrap();
        let url = proxy.url().to_string();
        let ec2 = |action: &str| {
            call(
                &url,
                "ec2",
                "",
                &format!("Action={action}&Version=2016-11-15"),
            )
        };
        for _ in 0..3 {
            assert_eq!(ec2("DescribeVpcs").0, 200);
        }
        let (status, body) = ec2("DescribeVpcs");
        assert_eq!(status, 503);
        assert!(body.contains("<Code>RequestLimitExceeded</Code>"), "{body}");
        // Per action: another one has its own bucket.
        assert_eq!(ec2("DescribeSubnets").0, 200);
        let asg = |action: &str| call(&url, "autoscaling", "", &format!("Action={action}"));
        assert_eq!(asg("CreateAutoScalingGroup").0, 200);
        assert_eq!(asg("CreateAutoScalingGroup").0, 200);
        let (status, body) = asg("CreateAutoScalingGroup");
        assert_eq!(status, 400);
        assert!(body.contains("<Code>Throttling</Code>") && body.contains("Rate exceeded"));
        let sqs = || {
            call(
                &url,
                "sqs",
                "X-Amz-Target: AmazonSQS.CreateQueue\r\nContent-Type: application/x-amz-json-1.0\r\n",
                "{}",
            )
        };
        sqs();
        sqs();
        let (status, body) = sqs();
        assert_eq!(status, 400);
        assert!(
            body.contains("x-amzn-ErrorType: ThrottlingException"),
            "{body}"
        );
        assert!(body.contains(r#""__type":"ThrottlingException""#));
        // Route 53: five a second for the account, whatever the action.
        let mut statuses = Vec::new();
        for n in 0..6 {
            let (method, path) = if n % 2 == 0 {
                ("GET", "/2013-04-01/hostedzone")
            } else {
                ("POST", "/2013-04-01/hostedzone/Z1/rrset")
            };
            let authority = url.trim_start_matches("http://");
            let mut s = TcpStream::connect(authority).unwrap();
            write!(s, "{method} {path} HTTP/1.1\r\nHost: {authority}\r\nAuthorization: AWS4-HMAC-SHA256 Credential=AKID/20261129/us-east-1/route53/aws4_request, SignedHeaders=host, Signature=0\r\nContent-Length: 0\r\n\r\n").unwrap();
            let mut line = String::new();
            BufReader::new(s).read_line(&mut line).unwrap();
            statuses.push(line.split_whitespace().nth(1).unwrap().to_string());
        }
        assert_eq!(statuses, ["200", "200", "200", "200", "200", "400"]);
        let counts = proxy.counts();
        assert_eq!(
            counts["ec2:DescribeVpcs"],
            ActionCount {
                relayed: 3,
                throttled: 1
            }
        );
        assert_eq!(proxy.totals(), (17, 4));
    }

    #[test]
    fn an_empty_bucket_refills_at_its_rate() {
        let up = upstream();
        let proxy = AwsLimits::start_with(
            &up,
            Buckets {
                write: (1.0, 10.0),
                ..Buckets::default()
            },
        )
        .unwrap();
        let url = proxy.url().to_string();
        let create = || call(&url, "ec2", "", "Action=CreateTags").0;
        assert_eq!(create(), 200);
        assert_eq!(create(), 503);
        std::thread::sleep(std::time::Duration::from_millis(150));
        assert_eq!(create(), 200);
    }
}
