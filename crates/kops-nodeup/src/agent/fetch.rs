//! Downloads with retries and sha256 checks: `http://`, `https://` (rustls,
//! the system's roots) and `file://`.

use std::time::Duration;

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use super::files::sha256_hex;
use super::NodeupError;
use crate::assets::Asset;

/// Redirects followed per download.
const MAX_REDIRECTS: usize = 5;

/// Fetches URLs, retrying transient failures with a doubling delay.
pub struct Fetcher {
    attempts: u32,
    delay: Duration,
}

/// Why one attempt failed.
enum Failure {
    /// Worth another try (connection, 5xx, 429).
    Transient(String),
    /// Not (404, bad URL).
    Permanent(String),
}

impl Fetcher {
    pub fn new(attempts: u32, delay: Duration) -> Self {
        Fetcher {
            attempts: attempts.max(1),
            delay,
        }
    }

    /// Downloads `asset` from its mirrors in order and returns the bytes of
    /// the first download whose sha256 matches. A mirror serving the wrong
    /// bytes is an error (after the other mirrors were tried).
    pub async fn fetch_verified(&self, name: &str, asset: &Asset) -> Result<Vec<u8>, NodeupError> {
        let mut reasons = Vec::new();
        let mut mismatch = None;
        for url in &asset.urls {
            match self.fetch(url).await {
                Ok(bytes) => {
                    let actual = sha256_hex(&bytes);
                    if actual == asset.sha256 {
                        return Ok(bytes);
                    }
                    mismatch.get_or_insert(NodeupError::HashMismatch {
                        asset: name.to_string(),
                        url: url.clone(),
                        expected: asset.sha256.clone(),
                        actual,
                    });
                }
                Err(reason) => reasons.push(format!("{url}: {reason}")),
            }
        }
        Err(mismatch.unwrap_or_else(|| NodeupError::Download {
            asset: name.to_string(),
            urls: asset.urls.clone(),
            reason: reasons.join("; "),
        }))
    }

    /// Fetches one URL, with retries.
    pub async fn fetch(&self, url: &str) -> Result<Vec<u8>, String> {
        let mut delay = self.delay;
        let mut last = String::new();
        for attempt in 1..=self.attempts {
            match fetch_once(url).await {
                Ok(bytes) => return Ok(bytes),
                Err(Failure::Permanent(reason)) => return Err(reason),
                Err(Failure::Transient(reason)) => {
                    last = format!("{reason} (after {attempt} attempts)");
                    if attempt < self.attempts {
                        tokio::time::sleep(delay).await;
                        delay *= 2;
                    }
                }
            }
        }
        Err(last)
    }
}

async fn fetch_once(url: &str) -> Result<Vec<u8>, Failure> {
    if let Some(path) = url.strip_prefix("file://") {
        return std::fs::read(path).map_err(|e| Failure::Permanent(e.to_string()));
    }
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(Failure::Permanent(
            "only http://, https:// and file:// URLs are supported".into(),
        ));
    }
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_native_roots()
        .map_err(|e| Failure::Permanent(format!("no TLS root certificates: {e}")))?
        .https_or_http()
        .enable_http1()
        .build();
    let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new()).build(connector);
    let mut current = url.to_string();
    for _ in 0..=MAX_REDIRECTS {
        let uri: hyper::Uri = current
            .parse()
            .map_err(|e| Failure::Permanent(format!("bad URL: {e}")))?;
        let response = client
            .get(uri)
            .await
            .map_err(|e| Failure::Transient(format!("request failed: {e}")))?;
        let status = response.status();
        if status.is_redirection() {
            let location = response
                .headers()
                .get(hyper::header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .ok_or_else(|| Failure::Permanent(format!("HTTP {status} without a Location")))?;
            current = resolve(&current, location);
            continue;
        }
        if status.is_server_error() || status.as_u16() == 429 {
            return Err(Failure::Transient(format!("HTTP {status}")));
        }
        if !status.is_success() {
            return Err(Failure::Permanent(format!("HTTP {status}")));
        }
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| Failure::Transient(format!("reading the body failed: {e}")))?;
        return Ok(body.to_bytes().to_vec());
    }
    Err(Failure::Permanent("too many redirects".into()))
}

/// Resolves a redirect's Location against the URL it came from.
fn resolve(base: &str, location: &str) -> String {
    if location.contains("://") {
        return location.to_string();
    }
    let (scheme, rest) = base.split_once("://").unwrap_or(("http", base));
    let host = rest.split('/').next().unwrap_or(rest);
    if location.starts_with('/') {
        format!("{scheme}://{host}{location}")
    } else {
        let dir = base.rsplit_once('/').map(|(d, _)| d).unwrap_or(base);
        format!("{dir}/{location}")
    }
}
