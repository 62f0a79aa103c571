//! A state store in a Cloud Storage bucket (`gs://bucket/prefix`), over the
//! Cloud Storage JSON API (`storage/v1`).
//!
//! - Reads are `GET .../o/<object>?alt=media`; the object's generation
//!   comes back in `X-Goog-Generation` and is the [`Version`] of
//!   [`ObjectStore::read_versioned`].
//! - Writes are multipart uploads carrying the MD5 of the data, so Cloud
//!   Storage refuses a corrupted upload (as kops does). `create_only`
//!   writes send `ifGenerationMatch=0` and [`ObjectStore::write_if`] sends
//!   the generation read: both are atomic on the server, so two writers
//!   can never both believe they won.
//! - Lists are paged with `pageToken`.
//! - Credentials are Application Default Credentials (see `auth.rs`); with
//!   `STORAGE_EMULATOR_HOST` set, requests go to that host without
//!   credentials, as Google's own clients do.

use std::collections::BTreeSet;
use std::fmt;

use async_trait::async_trait;
use base64::Engine;
use hyper::Method;
use md5::{Digest, Md5};
use tokio::sync::OnceCell;

use crate::{check_key, dir_prefix, ObjectStore, StoreError, Version, WriteOptions};
use kops_google::auth::{self, Credentials};
use kops_google::escape;
use kops_google::http::{Call, Http, Response};

/// Cloud Storage's own endpoint.
pub const DEFAULT_ENDPOINT: &str = "https://storage.googleapis.com";

/// Where requests go and how they are authorised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// `https://storage.googleapis.com`, or the emulator's `http://host:port`.
    pub url: String,
    /// False for an emulator: requests carry no credentials.
    pub authenticated: bool,
}

impl Endpoint {
    /// The endpoint `lookup` (the process environment in production)
    /// selects: `STORAGE_EMULATOR_HOST` (a bare `host:port` means http, as
    /// in Google's clients) without credentials, else Cloud Storage.
    pub fn from_lookup(lookup: &dyn Fn(&str) -> Option<String>) -> Endpoint {
        match lookup("STORAGE_EMULATOR_HOST").filter(|v| !v.trim().is_empty()) {
            Some(host) => {
                let host = host.trim().trim_end_matches('/');
                let url = if host.contains("://") {
                    host.to_string()
                } else {
                    format!("http://{host}")
                };
                Endpoint {
                    url,
                    authenticated: false,
                }
            }
            None => Endpoint {
                url: DEFAULT_ENDPOINT.to_string(),
                authenticated: true,
            },
        }
    }
}

/// The HTTP client and credentials, made on first use.
#[derive(Debug)]
struct Connection {
    http: Http,
    credentials: Option<Credentials>,
}

/// A state store under `gs://bucket/prefix`.
pub struct GcsStore {
    base_url: String,
    bucket: String,
    /// The object-name prefix without leading or trailing `/`; may be empty.
    prefix: String,
    endpoint: Endpoint,
    /// `maxResults` of list requests; the server's default (1000) if unset.
    page_size: Option<u32>,
    connection: OnceCell<Connection>,
}

impl fmt::Debug for GcsStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GcsStore")
            .field("base_url", &self.base_url)
            .field("endpoint", &self.endpoint.url)
            .finish()
    }
}

/// The parts of a JSON API error answer we use.
#[derive(serde::Deserialize, Default)]
struct ErrorBody {
    #[serde(default)]
    error: ErrorDetail,
}

#[derive(serde::Deserialize, Default)]
struct ErrorDetail {
    #[serde(default)]
    message: String,
}

/// One page of `objects.list`.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct ListPage {
    #[serde(default)]
    items: Vec<ListedObject>,
    #[serde(default)]
    prefixes: Vec<String>,
    next_page_token: Option<String>,
}

#[derive(serde::Deserialize)]
struct ListedObject {
    name: String,
}

impl GcsStore {
    /// A store for `gs://bucket/prefix` with the endpoint the environment
    /// selects ([`Endpoint::from_lookup`]).
    pub fn new(url: &str) -> Result<Self, StoreError> {
        Self::with_endpoint(url, Endpoint::from_lookup(&kops_api::env::process_env))
    }

    /// A store for `gs://bucket/prefix` talking to `endpoint`.
    pub fn with_endpoint(url: &str, endpoint: Endpoint) -> Result<Self, StoreError> {
        let (base_url, bucket, prefix) = crate::bucket_url(url, "gs://")?;
        Ok(GcsStore {
            base_url,
            bucket: bucket.to_string(),
            prefix: prefix.to_string(),
            endpoint,
            page_size: None,
            connection: OnceCell::new(),
        })
    }

    /// Lists in pages of `size` objects (tests of paging).
    pub fn with_page_size(mut self, size: u32) -> Self {
        self.page_size = Some(size);
        self
    }

    /// The bucket name.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// The object name of a store key.
    pub fn object_name(&self, key: &str) -> String {
        if self.prefix.is_empty() {
            key.to_string()
        } else {
            format!("{}/{}", self.prefix, key)
        }
    }

    /// The HTTP client and (unless talking to an emulator) the credentials,
    /// found on first use; `url` names the object in the error.
    async fn connection(&self, url: &str) -> Result<&Connection, StoreError> {
        self.connection
            .get_or_try_init(|| async {
                let http = Http::new().map_err(|message| StoreError::Gcs {
                    op: "connect",
                    url: url.to_string(),
                    message: message.to_string(),
                })?;
                let credentials = if self.endpoint.authenticated {
                    let found = auth::find(&kops_api::env::process_env, &http).await;
                    Some(found.map_err(|reason| StoreError::GcsCredentials {
                        url: url.to_string(),
                        reason: reason.to_string(),
                    })?)
                } else {
                    None
                };
                Ok(Connection { http, credentials })
            })
            .await
    }

    /// Sends `call` with the credentials' token; `op` and `url` name it in
    /// errors.
    async fn send(
        &self,
        op: &'static str,
        url: &str,
        mut call: Call<'_>,
    ) -> Result<Response, StoreError> {
        let connection = self.connection(url).await?;
        if let Some(credentials) = &connection.credentials {
            let token = credentials
                .token(&connection.http)
                .await
                .map_err(|reason| StoreError::GcsCredentials {
                    url: url.to_string(),
                    reason: reason.to_string(),
                })?;
            call = call.header("authorization", format!("Bearer {token}"));
        }
        connection
            .http
            .send(&call)
            .await
            .map_err(|message| StoreError::Gcs {
                op,
                url: url.to_string(),
                message: message.to_string(),
            })
    }

    /// The error for a failed answer: a missing bucket, a refusal, or the
    /// server's message.
    fn error(&self, op: &'static str, url: &str, response: &Response) -> StoreError {
        let text = response.text();
        let message = serde_json::from_str::<ErrorBody>(&text)
            .map(|b| b.error.message)
            .ok()
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| text.trim().to_string());
        match response.status {
            401 | 403 => StoreError::GcsDenied {
                bucket: self.bucket.clone(),
                url: url.to_string(),
                message,
            },
            404 => StoreError::NoSuchBucket {
                bucket: self.bucket.clone(),
                url: url.to_string(),
            },
            status => StoreError::Gcs {
                op,
                url: url.to_string(),
                message: format!("HTTP {status}: {message}"),
            },
        }
    }

    /// True when a 404 answer says the bucket (not the object) is missing.
    fn bucket_missing(response: &Response) -> bool {
        response.text().contains("bucket does not exist")
    }

    fn object_url(&self, key: &str) -> String {
        format!(
            "{}/storage/v1/b/{}/o/{}",
            self.endpoint.url,
            escape(&self.bucket),
            escape(&self.object_name(key))
        )
    }

    async fn get(&self, key: &str) -> Result<Option<Response>, StoreError> {
        check_key(&self.base_url, key)?;
        let url = self.url_of(key);
        let request_url = format!("{}?alt=media", self.object_url(key));
        let response = self
            .send("get", &url, Call::new(Method::GET, &request_url))
            .await?;
        match response.status {
            200 => Ok(Some(response)),
            404 if !Self::bucket_missing(&response) => Ok(None),
            _ => Err(self.error("get", &url, &response)),
        }
    }

    /// Uploads `data` as `key`, with `ifGenerationMatch=generation` when
    /// given; `Ok(false)` when that precondition failed.
    async fn upload(
        &self,
        key: &str,
        data: &[u8],
        if_generation: Option<&str>,
    ) -> Result<bool, StoreError> {
        check_key(&self.base_url, key)?;
        let url = self.url_of(key);
        let mut request_url = format!(
            "{}/upload/storage/v1/b/{}/o?uploadType=multipart",
            self.endpoint.url,
            escape(&self.bucket)
        );
        if let Some(generation) = if_generation {
            request_url.push_str(&format!("&ifGenerationMatch={}", escape(generation)));
        }
        let metadata = serde_json::json!({
            "name": self.object_name(key),
            "md5Hash": base64::engine::general_purpose::STANDARD.encode(Md5::digest(data)),
            "contentType": "application/octet-stream",
        });
        let boundary = multipart_boundary(data);
        let mut body = Vec::with_capacity(data.len() + 512);
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n{metadata}\r\n\
                 --{boundary}\r\nContent-Type: application/octet-stream\r\n\r\n"
            )
            .as_bytes(),
        );
        body.extend_from_slice(data);
        body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
        let call = Call::new(Method::POST, &request_url)
            .header(
                "content-type",
                format!("multipart/related; boundary={boundary}"),
            )
            .body(body);
        let response = self.send("upload", &url, call).await?;
        match response.status {
            200 => Ok(true),
            412 if if_generation.is_some() => Ok(false),
            _ => Err(self.error("upload", &url, &response)),
        }
    }

    /// Every page of `objects.list` under `object_dir`, with `delimiter`.
    async fn list_pages(
        &self,
        prefix: &str,
        object_dir: &str,
        delimiter: Option<&str>,
    ) -> Result<Vec<ListPage>, StoreError> {
        let url = if prefix.is_empty() {
            self.base_url.clone()
        } else {
            self.url_of(prefix)
        };
        let mut pages = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut request_url = format!(
                "{}/storage/v1/b/{}/o?prefix={}",
                self.endpoint.url,
                escape(&self.bucket),
                escape(object_dir)
            );
            if let Some(size) = self.page_size {
                request_url.push_str(&format!("&maxResults={size}"));
            }
            if let Some(delimiter) = delimiter {
                request_url.push_str(&format!("&delimiter={}", escape(delimiter)));
            }
            if let Some(token) = &token {
                request_url.push_str(&format!("&pageToken={}", escape(token)));
            }
            let response = self
                .send("list", &url, Call::new(Method::GET, &request_url))
                .await?;
            if response.status != 200 {
                return Err(self.error("list", &url, &response));
            }
            let page: ListPage =
                serde_json::from_slice(&response.body).map_err(|e| StoreError::Gcs {
                    op: "list",
                    url: url.clone(),
                    message: format!("unreadable answer: {e}"),
                })?;
            token = page.next_page_token.clone().filter(|t| !t.is_empty());
            pages.push(page);
            if token.is_none() {
                return Ok(pages);
            }
        }
    }

    /// The object-name prefix of a store directory prefix.
    fn object_dir(&self, prefix: &str) -> Result<String, StoreError> {
        let dir = dir_prefix(&self.base_url, prefix)?;
        Ok(if self.prefix.is_empty() {
            dir
        } else {
            format!("{}/{dir}", self.prefix)
        })
    }
}

/// A multipart boundary that does not occur in `data`.
fn multipart_boundary(data: &[u8]) -> String {
    let mut n = 0u32;
    loop {
        let boundary = format!("kops-rs-boundary-{n:08x}");
        if !data
            .windows(boundary.len())
            .any(|w| w == boundary.as_bytes())
        {
            return boundary;
        }
        n += 1;
    }
}

#[async_trait]
impl ObjectStore for GcsStore {
    fn base_url(&self) -> &str {
        &self.base_url
    }

    async fn read(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.get(key).await?.map(|r| r.body.to_vec()))
    }

    async fn read_versioned(&self, key: &str) -> Result<Option<(Vec<u8>, Version)>, StoreError> {
        let Some(response) = self.get(key).await? else {
            return Ok(None);
        };
        let generation = response
            .header("x-goog-generation")
            .map(str::to_string)
            .ok_or_else(|| StoreError::Gcs {
                op: "get",
                url: self.url_of(key),
                message: "the answer has no X-Goog-Generation header".to_string(),
            })?;
        Ok(Some((response.body.to_vec(), Version::new(generation))))
    }

    async fn write(&self, key: &str, data: &[u8], options: WriteOptions) -> Result<(), StoreError> {
        // Generation 0 means "no live object": the create is atomic.
        let precondition = options.create_only.then_some("0");
        if self.upload(key, data, precondition).await? {
            Ok(())
        } else {
            Err(StoreError::AlreadyExists {
                url: self.url_of(key),
            })
        }
    }

    async fn write_if(
        &self,
        key: &str,
        data: &[u8],
        expected: &Version,
        _options: WriteOptions,
    ) -> Result<(), StoreError> {
        if self.upload(key, data, Some(expected.as_str())).await? {
            Ok(())
        } else {
            Err(StoreError::Conflict {
                url: self.url_of(key),
            })
        }
    }

    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        check_key(&self.base_url, key)?;
        let url = self.url_of(key);
        let request_url = self.object_url(key);
        let response = self
            .send("delete", &url, Call::new(Method::DELETE, &request_url))
            .await?;
        match response.status {
            200 | 204 => Ok(()),
            404 if !Self::bucket_missing(&response) => Ok(()),
            _ => Err(self.error("delete", &url, &response)),
        }
    }

    async fn list(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        let object_dir = self.object_dir(prefix)?;
        let strip = if self.prefix.is_empty() {
            0
        } else {
            self.prefix.len() + 1
        };
        let mut keys: Vec<String> = self
            .list_pages(prefix, &object_dir, None)
            .await?
            .into_iter()
            .flat_map(|page| page.items)
            // `dir/` placeholder objects (made by consoles) are not keys.
            .filter(|object| !object.name.ends_with('/'))
            .map(|object| object.name[strip..].to_string())
            .collect();
        keys.sort_unstable();
        Ok(keys)
    }

    async fn list_children(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        let object_dir = self.object_dir(prefix)?;
        let mut children = BTreeSet::new();
        for page in self.list_pages(prefix, &object_dir, Some("/")).await? {
            let objects = page.items.into_iter().map(|o| o.name);
            for name in page.prefixes.into_iter().chain(objects) {
                let name = name[object_dir.len()..].trim_end_matches('/');
                if !name.is_empty() {
                    children.insert(name.to_string());
                }
            }
        }
        Ok(children.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_env::lookup;

    #[test]
    fn emulator_host_as_googles_clients_read_it() {
        assert_eq!(
            Endpoint::from_lookup(&lookup(&[])),
            Endpoint {
                url: DEFAULT_ENDPOINT.into(),
                authenticated: true
            }
        );
        assert_eq!(
            Endpoint::from_lookup(&lookup(&[("STORAGE_EMULATOR_HOST", "localhost:4443")])),
            Endpoint {
                url: "http://localhost:4443".into(),
                authenticated: false
            }
        );
        assert_eq!(
            Endpoint::from_lookup(&lookup(&[("STORAGE_EMULATOR_HOST", "https://gcs.test/")])).url,
            "https://gcs.test"
        );
        assert!(Endpoint::from_lookup(&lookup(&[("STORAGE_EMULATOR_HOST", "")])).authenticated);
    }

    #[test]
    fn urls_and_object_names() {
        let endpoint = Endpoint::from_lookup(&lookup(&[]));
        let store = GcsStore::with_endpoint("gs://b/kops/state/", endpoint.clone()).unwrap();
        assert_eq!(store.base_url(), "gs://b/kops/state");
        assert_eq!(store.object_name("c/config"), "kops/state/c/config");
        assert_eq!(
            store.object_url("c/config"),
            "https://storage.googleapis.com/storage/v1/b/b/o/kops%2Fstate%2Fc%2Fconfig"
        );
        let bare = GcsStore::with_endpoint("gs://b", endpoint.clone()).unwrap();
        assert_eq!(bare.object_name("c/config"), "c/config");
        for bad in ["gs://", "gs:///x", "gs://b/a//c", "gs://b/../x"] {
            assert!(
                matches!(
                    GcsStore::with_endpoint(bad, endpoint.clone()),
                    Err(StoreError::InvalidUrl { .. })
                ),
                "{bad}"
            );
        }
    }

    /// A refusal in the shape Cloud Storage's JSON API documents for its
    /// errors (`error.code`, `error.message`, `error.errors[].reason`
    /// `forbidden`). fake-gcs-server cannot answer 401/403: it has no
    /// authentication or IAM (it ignores the `Authorization` header and
    /// maps backend failures to 400/412/500), so the mapping is tested here
    /// on the answer's text, not against a server.
    #[test]
    fn refusals_name_the_bucket_and_the_fix() {
        let store =
            GcsStore::with_endpoint("gs://team-state/kops", Endpoint::from_lookup(&lookup(&[])))
                .unwrap();
        let message = "kops@p.iam.gserviceaccount.com does not have storage.objects.get access to the Google Cloud Storage object. Permission 'storage.objects.get' denied on resource (or it may not exist).";
        for status in [401, 403] {
            let body = serde_json::json!({"error": {
                "code": status,
                "message": message,
                "errors": [{"message": message, "domain": "global", "reason": "forbidden"}],
            }});
            let response = Response {
                status,
                headers: Default::default(),
                body: body.to_string().into(),
            };
            let url = store.url_of("c.example.com/config");
            let error = store.error("get", &url, &response);
            assert!(matches!(error, StoreError::GcsDenied { .. }), "{error:?}");
            let text = error.to_string();
            assert!(
                text.starts_with(&format!("access to `{url}` was denied: {message}")),
                "{text}"
            );
            assert!(
                text.contains("roles/storage.objectAdmin on gs://team-state"),
                "{text}"
            );
        }
        // An answer without Google's error body keeps its text.
        let response = Response {
            status: 403,
            headers: Default::default(),
            body: "Forbidden\n".into(),
        };
        let error = store.error("list", "gs://team-state/kops", &response);
        assert!(
            error.to_string().contains("was denied: Forbidden\nhint:"),
            "{error}"
        );
    }

    #[test]
    fn boundaries_avoid_the_data() {
        let first = multipart_boundary(b"data");
        let tricky = format!("x{first}y");
        assert_ne!(multipart_boundary(tricky.as_bytes()), first);
    }
}
