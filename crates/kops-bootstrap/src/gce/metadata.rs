//! The Compute Engine metadata server, as Google's client libraries reach
//! it: `http://<host>/computeMetadata/v1/<path>` with the header
//! `Metadata-Flavor: Google`, the host `GCE_METADATA_HOST` or else
//! `169.254.169.254`. An answer without `Metadata-Flavor: Google` is not
//! the metadata server's.
//!
//! Nodes read who they are (project, zone, instance name, addresses) and
//! their boot config from it; kops-controller gets its access token for
//! the Compute API from it (the instance's service account).

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde::Deserialize;
use tokio::sync::Mutex;

use crate::http::{client_through, HttpClient};
use crate::text::error_chain;

/// The metadata server's address when `GCE_METADATA_HOST` is not set.
pub const DEFAULT_HOST: &str = "169.254.169.254";
/// How long one metadata request may take.
const TIMEOUT: Duration = Duration::from_secs(10);
/// An access token is renewed when it has less than this left.
const EXPIRY_MARGIN: Duration = Duration::from_secs(60);

/// A client of the metadata server.
pub struct Metadata {
    host: String,
    http: HttpClient,
    token: Mutex<Option<(String, Instant)>>,
}

#[derive(Deserialize)]
struct TokenAnswer {
    access_token: String,
    #[serde(default)]
    expires_in: u64,
}

impl Metadata {
    /// The metadata server at `GCE_METADATA_HOST`, else the link-local one.
    pub fn from_env() -> Result<Metadata, String> {
        let host = std::env::var("GCE_METADATA_HOST")
            .ok()
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| DEFAULT_HOST.to_string());
        Metadata::new(&host)
    }

    /// The metadata server at `host` (`host` or `host:port`).
    pub fn new(host: &str) -> Result<Metadata, String> {
        // The metadata server is on the instance's own link: never through a proxy.
        let http = client_through(None)?;
        Ok(Metadata {
            host: host.to_string(),
            http,
            token: Mutex::new(None),
        })
    }

    /// Where it is (for messages).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The text at `computeMetadata/v1/<path>`; `Ok(None)` for a 404 (an
    /// attribute that is not set).
    pub async fn get_opt(&self, path: &str) -> Result<Option<String>, String> {
        let url = format!("http://{}/computeMetadata/v1/{path}", self.host);
        let failed = |reason: String| format!("metadata server {url}: {reason}");
        let request = http::Request::builder()
            .method("GET")
            .uri(&url)
            .header("Metadata-Flavor", "Google")
            .body(Full::new(Bytes::new()))
            .map_err(|e| failed(e.to_string()))?;
        let response = tokio::time::timeout(TIMEOUT, self.http.request(request))
            .await
            .map_err(|_| failed(format!("no answer in {}s", TIMEOUT.as_secs())))?
            .map_err(|e| failed(error_chain(&e)))?;
        let status = response.status().as_u16();
        let flavor_ok = response
            .headers()
            .get("metadata-flavor")
            .and_then(|v| v.to_str().ok())
            == Some("Google");
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| failed(e.to_string()))?
            .to_bytes();
        if !flavor_ok {
            return Err(failed(
                "the answer has no `Metadata-Flavor: Google`: not a metadata server".into(),
            ));
        }
        match status {
            200 => Ok(Some(String::from_utf8_lossy(&body).into_owned())),
            404 => Ok(None),
            _ => Err(failed(format!(
                "HTTP {status}: {}",
                String::from_utf8_lossy(&body)
                    .chars()
                    .take(200)
                    .collect::<String>()
            ))),
        }
    }

    /// The text at `path`, which must be set.
    pub async fn get(&self, path: &str) -> Result<String, String> {
        self.get_opt(path).await?.ok_or_else(|| {
            format!(
                "metadata server http://{}/computeMetadata/v1/{path}: not set (404)",
                self.host
            )
        })
    }

    /// The project id (`project/project-id`).
    pub async fn project_id(&self) -> Result<String, String> {
        Ok(self.get("project/project-id").await?.trim().to_string())
    }

    /// The instance's zone (`instance/zone` is `projects/<number>/zones/<zone>`).
    pub async fn zone(&self) -> Result<String, String> {
        Ok(last_component(self.get("instance/zone").await?.trim()).to_string())
    }

    /// The instance's name.
    pub async fn instance_name(&self) -> Result<String, String> {
        Ok(self.get("instance/name").await?.trim().to_string())
    }

    /// An instance attribute (custom metadata), `None` when not set.
    pub async fn attribute(&self, key: &str) -> Result<Option<String>, String> {
        self.get_opt(&format!("instance/attributes/{key}")).await
    }

    /// An access token of the instance's default service account, cached
    /// until shortly before it expires.
    pub async fn access_token(&self) -> Result<String, String> {
        let mut cached = self.token.lock().await;
        if let Some((token, renew_at)) = cached.as_ref() {
            if Instant::now() < *renew_at {
                return Ok(token.clone());
            }
        }
        let path = "instance/service-accounts/default/token";
        let text = self.get(path).await?;
        let answer: TokenAnswer = serde_json::from_str(&text).map_err(|e| {
            format!(
                "metadata server http://{}/computeMetadata/v1/{path}: no token in the answer: {e}",
                self.host
            )
        })?;
        let lifetime = Duration::from_secs(if answer.expires_in == 0 {
            300
        } else {
            answer.expires_in
        });
        *cached = Some((
            answer.access_token.clone(),
            Instant::now() + lifetime.saturating_sub(EXPIRY_MARGIN),
        ));
        Ok(answer.access_token)
    }
}

/// What follows the last `/` (zones and machine types are URLs or
/// `projects/<n>/zones/<zone>` paths in Google's answers).
pub fn last_component(text: &str) -> &str {
    text.rsplit('/').next().unwrap_or(text)
}
