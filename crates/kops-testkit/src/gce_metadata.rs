//! A Compute Engine metadata server on a free loopback port, as Google
//! documents it (https://cloud.google.com/compute/docs/metadata): values
//! at `/computeMetadata/v1/<path>`, only for requests carrying
//! `Metadata-Flavor: Google` (403 otherwise, and for requests with
//! `X-Forwarded-For`), every answer carrying `Metadata-Flavor: Google`,
//! directories (a path ending in `/`) listing their entries, 404 for what
//! is not set. Point a client at it with `GCE_METADATA_HOST=<host:port>`.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

/// Path (under `computeMetadata/v1/`) → value.
pub type Values = Arc<Mutex<BTreeMap<String, String>>>;

pub struct MetadataServer {
    /// `127.0.0.1:<port>`, the form of `GCE_METADATA_HOST`.
    pub host: String,
    pub values: Values,
    /// Request lines received (method and path).
    pub requests: Arc<Mutex<Vec<String>>>,
}

/// The values of an instance: project, zone, name, first interface's
/// address, a token for its default service account.
pub fn instance_values(
    project: &str,
    zone: &str,
    name: &str,
    ip: &str,
) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("project/project-id".to_string(), project.to_string()),
        (
            "project/numeric-project-id".to_string(),
            "123456789012".to_string(),
        ),
        (
            "instance/zone".to_string(),
            format!("projects/123456789012/zones/{zone}"),
        ),
        ("instance/name".to_string(), name.to_string()),
        (
            "instance/hostname".to_string(),
            format!("{name}.{zone}.c.{project}.internal"),
        ),
        ("instance/id".to_string(), "4242424242424242".to_string()),
        (
            "instance/network-interfaces/0/ip".to_string(),
            ip.to_string(),
        ),
        (
            "instance/service-accounts/default/token".to_string(),
            r#"{"access_token":"metadata-test-token","expires_in":3599,"token_type":"Bearer"}"#
                .to_string(),
        ),
    ])
}

impl MetadataServer {
    pub fn start(values: BTreeMap<String, String>) -> MetadataServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let host = listener.local_addr().expect("local address").to_string();
        let values: Values = Arc::new(Mutex::new(values));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (v, r) = (values.clone(), requests.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut buf = Vec::new();
                let mut chunk = [0u8; 1024];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut chunk) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&buf).into_owned();
                let (status, body) = answer(&text, &v.lock().unwrap_or_else(|e| e.into_inner()));
                r.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(text.lines().next().unwrap_or_default().to_string());
                let reason = match status {
                    200 => "OK",
                    403 => "Forbidden",
                    404 => "Not Found",
                    _ => "Method Not Allowed",
                };
                let head = format!(
                    "HTTP/1.1 {status} {reason}\r\nMetadata-Flavor: Google\r\nContent-Type: application/text\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = stream
                    .write_all(head.as_bytes())
                    .and_then(|_| stream.write_all(body.as_bytes()));
            }
        });
        MetadataServer {
            host,
            values,
            requests,
        }
    }

    /// Sets (or, with `None`, removes) a value.
    pub fn set(&self, path: &str, value: Option<&str>) {
        let mut values = self.values.lock().unwrap_or_else(|e| e.into_inner());
        match value {
            Some(v) => values.insert(path.to_string(), v.to_string()),
            None => values.remove(path),
        };
    }

    /// The request lines received so far.
    pub fn request_lines(&self) -> Vec<String> {
        self.requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// Status and body for one request.
fn answer(request: &str, values: &BTreeMap<String, String>) -> (u16, String) {
    let mut lines = request.lines();
    let first = lines.next().unwrap_or_default();
    let mut parts = first.split_whitespace();
    let method = parts.next().unwrap_or_default();
    let target = parts.next().unwrap_or("/");
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    if header("x-forwarded-for").is_some() || header("metadata-flavor") != Some("Google") {
        return (
            403,
            "Missing required header \"Metadata-Flavor\": \"Google\"\n".to_string(),
        );
    }
    if method != "GET" {
        return (405, String::new());
    }
    let path = target.split('?').next().unwrap_or_default();
    let Some(path) = path.strip_prefix("/computeMetadata/v1/") else {
        return (404, "Not Found\n".to_string());
    };
    if let Some(value) = values.get(path) {
        return (200, value.clone());
    }
    // A directory: its entries, one a line, sub-directories with a `/`.
    let prefix = if path.is_empty() || path.ends_with('/') {
        path.to_string()
    } else {
        return (404, "Not Found\n".to_string());
    };
    let mut entries: Vec<String> = values
        .keys()
        .filter_map(|k| k.strip_prefix(&prefix))
        .map(|rest| match rest.split_once('/') {
            Some((dir, _)) => format!("{dir}/"),
            None => rest.to_string(),
        })
        .collect();
    entries.dedup();
    if entries.is_empty() {
        return (404, "Not Found\n".to_string());
    }
    (200, entries.join("\n") + "\n")
}
