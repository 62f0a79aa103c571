//! A state store in an S3 bucket (`s3://bucket/prefix`).
//!
//! The client is built on first use from the standard AWS configuration
//! chain (`aws_config::defaults`), so `AWS_ENDPOINT_URL`/`AWS_ENDPOINT_URL_S3`,
//! `AWS_REGION`/`AWS_DEFAULT_REGION`, profiles and the usual credential
//! providers all apply. With a custom endpoint (moto, MinIO) path-style
//! addressing is used. Every object is written with SSE-S3 (AES256).
//!
//! kops' own switch for a non-AWS store is honoured too: with `S3_ENDPOINT`
//! set, the client talks to that endpoint (path-style) in `S3_REGION`
//! (default `us-east-1`, not `AWS_REGION`), signing with
//! `S3_ACCESS_KEY_ID`/`S3_SECRET_ACCESS_KEY` when both are set. Only the
//! state store client follows it; EC2 and the other services do not.

use std::collections::BTreeSet;
use std::fmt;

use async_trait::async_trait;
use aws_config::meta::region::RegionProviderChain;
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::config::Credentials;
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::ServerSideEncryption;
use aws_sdk_s3::Client;
use aws_smithy_types::error::display::DisplayErrorContext;
use tokio::sync::OnceCell;

use crate::{check_key, dir_prefix, ObjectStore, StoreError, WriteOptions};

/// The region used when neither the environment nor a profile names one.
pub const FALLBACK_REGION: &str = "us-east-1";

/// A state store under `s3://bucket/prefix`.
pub struct S3Store {
    base_url: String,
    bucket: String,
    /// The key prefix without leading or trailing `/`; may be empty.
    prefix: String,
    client: OnceCell<Client>,
}

impl fmt::Debug for S3Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Store")
            .field("base_url", &self.base_url)
            .field("client_ready", &self.client.initialized())
            .finish()
    }
}

impl S3Store {
    /// A store for `s3://bucket/prefix`; the AWS client is created from the
    /// default configuration chain on first use.
    pub fn new(url: &str) -> Result<Self, StoreError> {
        let (base_url, bucket, prefix) = crate::bucket_url(url, "s3://")?;
        Ok(S3Store {
            base_url,
            bucket: bucket.to_string(),
            prefix: prefix.to_string(),
            client: OnceCell::new(),
        })
    }

    /// A store using an explicit SDK configuration (tests, custom endpoints)
    /// instead of the default chain.
    pub fn from_sdk_config(url: &str, config: &SdkConfig) -> Result<Self, StoreError> {
        Self::with_client(url, client_for(config))
    }

    /// A store using a ready-made client.
    pub fn with_client(url: &str, client: Client) -> Result<Self, StoreError> {
        let store = Self::new(url)?;
        store
            .client
            .set(client)
            .expect("a fresh store has no client yet");
        Ok(store)
    }

    /// The bucket name.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// The key prefix inside the bucket (no leading/trailing `/`, may be empty).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The S3 object key of a store key.
    pub fn object_key(&self, key: &str) -> String {
        if self.prefix.is_empty() {
            key.to_string()
        } else {
            format!("{}/{}", self.prefix, key)
        }
    }

    /// The client, built from the default AWS configuration (or kops'
    /// `S3_ENDPOINT` settings) on first call.
    pub async fn client(&self) -> &Client {
        self.client
            .get_or_init(|| {
                default_client(CustomEndpoint::from_lookup(&kops_api::env::process_env))
            })
            .await
    }

    /// The object-key prefix of a store directory prefix, e.g.
    /// `kops/mycluster/` for `mycluster/` under `s3://bucket/kops`.
    fn object_dir(&self, prefix: &str) -> Result<String, StoreError> {
        let dir = dir_prefix(&self.base_url, prefix)?;
        Ok(if self.prefix.is_empty() {
            dir
        } else {
            format!("{}/{dir}", self.prefix)
        })
    }

    /// The length of the bucket prefix (with its `/`) to strip from object keys.
    fn strip_len(&self) -> usize {
        if self.prefix.is_empty() {
            0
        } else {
            self.prefix.len() + 1
        }
    }

    fn error<E, R>(&self, op: &'static str, url: String, err: SdkError<E, R>) -> StoreError
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
        R: fmt::Debug,
    {
        if err.code() == Some("NoSuchBucket") {
            return StoreError::NoSuchBucket {
                bucket: self.bucket.clone(),
                url,
            };
        }
        StoreError::S3 {
            op,
            url,
            message: DisplayErrorContext(&err).to_string(),
        }
    }

    async fn exists(&self, key: &str) -> Result<bool, StoreError> {
        let result = self
            .client()
            .await
            .head_object()
            .bucket(&self.bucket)
            .key(self.object_key(key))
            .send()
            .await;
        match result {
            Ok(_) => Ok(true),
            Err(err) if err.as_service_error().is_some_and(|e| e.is_not_found()) => Ok(false),
            Err(err) => Err(self.error("HeadObject", self.url_of(key), err)),
        }
    }
}

/// kops' settings for an S3-compatible store that is not AWS, from
/// `S3_ENDPOINT`, `S3_REGION`, `S3_ACCESS_KEY_ID` and `S3_SECRET_ACCESS_KEY`.
#[derive(Clone, PartialEq, Eq)]
pub struct CustomEndpoint {
    /// `S3_ENDPOINT`, e.g. `http://minio:9000`.
    pub endpoint: String,
    /// `S3_REGION`, else `us-east-1` (as kops: the process's AWS region is
    /// not the custom store's).
    pub region: String,
    /// `S3_ACCESS_KEY_ID` and `S3_SECRET_ACCESS_KEY` when both are set;
    /// otherwise the standard credential chain signs (kops refuses to run
    /// without them; kops-rs lets `AWS_ACCESS_KEY_ID` etc. serve instead).
    pub credentials: Option<(String, String)>,
}

impl fmt::Debug for CustomEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print the secret key.
        f.debug_struct("CustomEndpoint")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field(
                "access_key_id",
                &self.credentials.as_ref().map(|(id, _)| id),
            )
            .finish()
    }
}

impl CustomEndpoint {
    /// The settings `lookup` (the process environment in production) gives,
    /// or `None` when `S3_ENDPOINT` is unset or empty.
    pub fn from_lookup(lookup: &dyn Fn(&str) -> Option<String>) -> Option<CustomEndpoint> {
        let endpoint = kops_api::env::custom_s3_endpoint(lookup)?;
        let var = |name: &str| lookup(name).filter(|v| !v.is_empty());
        Some(CustomEndpoint {
            endpoint,
            region: var("S3_REGION").unwrap_or_else(|| FALLBACK_REGION.to_string()),
            credentials: var("S3_ACCESS_KEY_ID").zip(var("S3_SECRET_ACCESS_KEY")),
        })
    }
}

/// The default AWS configuration: the standard chain, with `us-east-1` when
/// no region is configured anywhere; with `S3_ENDPOINT` set, kops' custom
/// endpoint, region and credentials ([`CustomEndpoint`]).
pub async fn default_sdk_config() -> SdkConfig {
    sdk_config_for(CustomEndpoint::from_lookup(&kops_api::env::process_env)).await
}

/// [`default_sdk_config`] for kops' custom-endpoint settings, if any.
pub async fn sdk_config_for(custom: Option<CustomEndpoint>) -> SdkConfig {
    let Some(custom) = custom else {
        let region = RegionProviderChain::default_provider().or_else(Region::new(FALLBACK_REGION));
        return aws_config::defaults(BehaviorVersion::latest())
            .region(region)
            .load()
            .await;
    };
    tracing::debug!(
        "S3_ENDPOINT={} set: using it for the state store",
        custom.endpoint
    );
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new(custom.region))
        .endpoint_url(custom.endpoint);
    if let Some((id, secret)) = custom.credentials {
        loader = loader.credentials_provider(Credentials::new(
            id,
            secret,
            None,
            None,
            "S3_ACCESS_KEY_ID",
        ));
    }
    loader.load().await
}

/// The state store's client: with kops' custom endpoint, that endpoint
/// (path-style) wins over `AWS_ENDPOINT_URL(_S3)`; without, [`client_for`]
/// the default configuration.
pub async fn default_client(custom: Option<CustomEndpoint>) -> Client {
    let config = sdk_config_for(custom.clone()).await;
    match custom {
        Some(custom) => Client::from_conf(
            aws_sdk_s3::config::Builder::from(&config)
                .endpoint_url(custom.endpoint)
                .force_path_style(true)
                .build(),
        ),
        None => client_for(&config),
    }
}

/// An S3 client for `config`, with path-style addressing when there is a
/// custom endpoint (`config.endpoint_url()` or `AWS_ENDPOINT_URL_S3`; moto,
/// MinIO, ...).
pub fn client_for(config: &SdkConfig) -> Client {
    let mut builder = aws_sdk_s3::config::Builder::from(config);
    if config.region().is_none() {
        builder = builder.region(Region::new(FALLBACK_REGION));
    }
    let s3_endpoint = std::env::var_os("AWS_ENDPOINT_URL_S3").is_some_and(|v| !v.is_empty());
    if config.endpoint_url().is_some() || s3_endpoint {
        builder = builder.force_path_style(true);
    }
    Client::from_conf(builder.build())
}

/// The HTTP status of a failed request, when there was a response.
fn status<E>(err: &SdkError<E, HttpResponse>) -> Option<u16> {
    err.raw_response()
        .map(|response| response.status().as_u16())
}

#[async_trait]
impl ObjectStore for S3Store {
    fn base_url(&self) -> &str {
        &self.base_url
    }

    async fn read(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        check_key(&self.base_url, key)?;
        let result = self
            .client()
            .await
            .get_object()
            .bucket(&self.bucket)
            .key(self.object_key(key))
            .send()
            .await;
        let output = match result {
            Ok(output) => output,
            Err(err) if err.as_service_error().is_some_and(|e| e.is_no_such_key()) => {
                return Ok(None)
            }
            // Some S3-compatible servers answer a bare 404 without a code.
            Err(err) if err.code().is_none() && status(&err) == Some(404) => return Ok(None),
            Err(err) => return Err(self.error("GetObject", self.url_of(key), err)),
        };
        let body = output.body.collect().await.map_err(|err| StoreError::S3 {
            op: "GetObject",
            url: self.url_of(key),
            message: DisplayErrorContext(&err).to_string(),
        })?;
        Ok(Some(body.into_bytes().to_vec()))
    }

    async fn write(&self, key: &str, data: &[u8], options: WriteOptions) -> Result<(), StoreError> {
        check_key(&self.base_url, key)?;
        let already_exists = || StoreError::AlreadyExists {
            url: self.url_of(key),
        };
        // HeadObject catches existing keys on servers that ignore
        // If-None-Match; If-None-Match makes the check atomic on AWS.
        if options.create_only && self.exists(key).await? {
            return Err(already_exists());
        }
        let mut request = self
            .client()
            .await
            .put_object()
            .bucket(&self.bucket)
            .key(self.object_key(key))
            .server_side_encryption(ServerSideEncryption::Aes256)
            .body(ByteStream::from(data.to_vec()));
        if options.create_only {
            request = request.if_none_match("*");
        }
        match request.send().await {
            Ok(_) => Ok(()),
            Err(err)
                if options.create_only
                    && (err.code() == Some("PreconditionFailed") || status(&err) == Some(412)) =>
            {
                Err(already_exists())
            }
            Err(err) => Err(self.error("PutObject", self.url_of(key), err)),
        }
    }

    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        check_key(&self.base_url, key)?;
        self.client()
            .await
            .delete_object()
            .bucket(&self.bucket)
            .key(self.object_key(key))
            .send()
            .await
            .map(|_| ())
            .map_err(|err| self.error("DeleteObject", self.url_of(key), err))
    }

    async fn list(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        let object_dir = self.object_dir(prefix)?;
        let client = self.client().await;
        let strip = self.strip_len();
        let mut keys = Vec::new();
        let mut token = None;
        loop {
            let page = client
                .list_objects_v2()
                .bucket(&self.bucket)
                .prefix(&object_dir)
                .set_continuation_token(token.take())
                .send()
                .await
                .map_err(|err| self.error("ListObjectsV2", self.url_of(prefix), err))?;
            keys.extend(
                page.contents()
                    .iter()
                    .filter_map(|object| object.key())
                    // `dir/` placeholder objects (made by consoles) are not keys.
                    .filter(|key| !key.ends_with('/'))
                    .map(|key| key[strip..].to_string()),
            );
            match page.next_continuation_token() {
                Some(next) if page.is_truncated() == Some(true) => token = Some(next.to_string()),
                _ => break,
            }
        }
        keys.sort_unstable();
        Ok(keys)
    }

    async fn list_children(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        let object_dir = self.object_dir(prefix)?;
        let client = self.client().await;
        let mut children = BTreeSet::new();
        let mut token = None;
        loop {
            let page = client
                .list_objects_v2()
                .bucket(&self.bucket)
                .prefix(&object_dir)
                .delimiter("/")
                .set_continuation_token(token.take())
                .send()
                .await
                .map_err(|err| self.error("ListObjectsV2", self.url_of(prefix), err))?;
            let dirs = page.common_prefixes().iter().filter_map(|p| p.prefix());
            let objects = page.contents().iter().filter_map(|o| o.key());
            for name in dirs.chain(objects) {
                let name = name[object_dir.len()..].trim_end_matches('/');
                if !name.is_empty() {
                    children.insert(name.to_string());
                }
            }
            match page.next_continuation_token() {
                Some(next) if page.is_truncated() == Some(true) => token = Some(next.to_string()),
                _ => break,
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
    fn custom_endpoint_follows_kops_variables() {
        assert_eq!(CustomEndpoint::from_lookup(&lookup(&[])), None);
        assert_eq!(
            CustomEndpoint::from_lookup(&lookup(&[("S3_ENDPOINT", ""), ("S3_REGION", "x")])),
            None
        );
        let custom = CustomEndpoint::from_lookup(&lookup(&[
            ("S3_ENDPOINT", "http://minio:9000"),
            ("S3_REGION", "eu-central-1"),
            ("S3_ACCESS_KEY_ID", "id"),
            ("S3_SECRET_ACCESS_KEY", "secret"),
            ("AWS_REGION", "us-west-2"),
        ]))
        .unwrap();
        assert_eq!(custom.endpoint, "http://minio:9000");
        assert_eq!(custom.region, "eu-central-1");
        assert_eq!(
            custom.credentials,
            Some(("id".to_string(), "secret".to_string()))
        );
        assert!(!format!("{custom:?}").contains("secret"));
        // The region defaults to us-east-1, not AWS_REGION; one key alone
        // is no credentials.
        let custom = CustomEndpoint::from_lookup(&lookup(&[
            ("S3_ENDPOINT", "http://minio:9000"),
            ("S3_ACCESS_KEY_ID", "id"),
            ("AWS_REGION", "us-west-2"),
        ]))
        .unwrap();
        assert_eq!(custom.region, "us-east-1");
        assert_eq!(custom.credentials, None);
    }

    #[tokio::test]
    async fn sdk_config_uses_custom_endpoint_region_and_keys() {
        use aws_sdk_s3::config::ProvideCredentials;
        let custom = CustomEndpoint::from_lookup(&lookup(&[
            ("S3_ENDPOINT", "http://127.0.0.1:9"),
            ("S3_REGION", "eu-central-1"),
            ("S3_ACCESS_KEY_ID", "id"),
            ("S3_SECRET_ACCESS_KEY", "secret"),
        ]));
        let config = sdk_config_for(custom).await;
        assert_eq!(config.endpoint_url(), Some("http://127.0.0.1:9"));
        assert_eq!(config.region().map(|r| r.as_ref()), Some("eu-central-1"));
        let creds = config
            .credentials_provider()
            .unwrap()
            .provide_credentials()
            .await
            .unwrap();
        assert_eq!(creds.access_key_id(), "id");
        assert_eq!(creds.secret_access_key(), "secret");
    }
}
