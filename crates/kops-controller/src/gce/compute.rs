//! The few Compute Engine API reads kops-controller makes (REST, JSON):
//! `instances.get` and `instances.getShieldedInstanceIdentity`, with the
//! instance's service-account token from the metadata server. The
//! endpoint is gcloud's: `CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE` when
//! set (a private endpoint, a proxy, a test server), else Google's.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde::Deserialize;

use kops_bootstrap::gce::metadata::Metadata;
use kops_bootstrap::http::{http_client, HttpClient};
use kops_bootstrap::text::error_chain;

/// Google's Compute API base.
/// The metadata item naming the cluster an instance belongs to.
pub const CLUSTER_NAME_KEY: &str = "cluster-name";
/// The metadata item naming an instance's instance group.
pub const INSTANCE_GROUP_KEY: &str = "kops-k8s-io-instance-group-name";

pub const DEFAULT_ENDPOINT: &str = "https://compute.googleapis.com/compute/v1/";
/// The variable gcloud reads to send Compute calls elsewhere.
pub const ENDPOINT_VARIABLE: &str = "CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE";
/// How long one call may take.
const TIMEOUT: Duration = Duration::from_secs(30);

/// A Compute client.
pub struct Compute {
    base: String,
    http: HttpClient,
    metadata: Arc<Metadata>,
}

/// The fields of an instance kops-controller reads.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Instance {
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub name: String,
    /// A URL ending in the zone's name.
    #[serde(default)]
    pub zone: String,
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub self_link: String,
    #[serde(default)]
    pub metadata: MetadataItems,
    #[serde(default)]
    pub network_interfaces: Vec<NetworkInterface>,
    #[serde(default)]
    pub tags: Tags,
    #[serde(default)]
    pub labels: std::collections::BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct MetadataItems {
    #[serde(default)]
    pub items: Vec<MetadataItem>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct MetadataItem {
    pub key: String,
    #[serde(default)]
    pub value: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Tags {
    #[serde(default)]
    pub items: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkInterface {
    #[serde(default, rename = "networkIP")]
    pub network_ip: String,
    #[serde(default)]
    pub ipv6_address: String,
    #[serde(default)]
    pub access_configs: Vec<AccessConfig>,
    #[serde(default)]
    pub ipv6_access_configs: Vec<AccessConfig>,
    #[serde(default)]
    pub alias_ip_ranges: Vec<AliasIpRange>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AccessConfig {
    #[serde(default, rename = "natIP")]
    pub nat_ip: String,
    /// The first address of the external IPv6 range (`ipv6AccessConfigs`).
    #[serde(default)]
    pub external_ipv6: String,
    #[serde(default)]
    pub external_ipv6_prefix_length: u32,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AliasIpRange {
    #[serde(default)]
    pub ip_cidr_range: String,
    #[serde(default)]
    pub subnetwork_range_name: String,
}

impl Instance {
    /// A metadata item's value.
    pub fn metadata_value(&self, key: &str) -> Option<&str> {
        self.metadata.value(key)
    }
}

/// `getShieldedInstanceIdentity`'s answer (the keys kops uses).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShieldedInstanceIdentity {
    #[serde(default)]
    pub signing_key: Option<IdentityEntry>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IdentityEntry {
    /// The public key, PEM.
    #[serde(default)]
    pub ek_pub: String,
}

/// A page of `listManagedInstances`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ManagedInstancesPage {
    #[serde(default)]
    managed_instances: Vec<ManagedInstance>,
    #[serde(default)]
    next_page_token: Option<String>,
}

/// A member of a managed instance group.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManagedInstance {
    /// The instance's URL.
    #[serde(default)]
    pub instance: String,
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub version: Option<ManagedInstanceVersion>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManagedInstanceVersion {
    /// The template's URL.
    #[serde(default)]
    pub instance_template: String,
}

/// The fields of an instance template kops-controller reads.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct InstanceTemplate {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub properties: TemplateProperties,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct TemplateProperties {
    #[serde(default)]
    pub metadata: MetadataItems,
}

impl MetadataItems {
    /// An item's value.
    pub fn value(&self, key: &str) -> Option<&str> {
        self.items
            .iter()
            .find(|i| i.key == key)
            .and_then(|i| i.value.as_deref())
    }
}

/// Why a call failed.
#[derive(Debug)]
pub enum CallError {
    /// 404: the resource does not exist.
    NotFound,
    /// Anything else (unreachable, refused, an unreadable answer).
    Failed(String),
}

impl Compute {
    /// The client at the configured endpoint, authenticated by `metadata`.
    pub fn from_env(metadata: Arc<Metadata>) -> Result<Compute, String> {
        let base = std::env::var(ENDPOINT_VARIABLE)
            .ok()
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| DEFAULT_ENDPOINT.to_string());
        Compute::new(&base, metadata)
    }

    pub fn new(base: &str, metadata: Arc<Metadata>) -> Result<Compute, String> {
        let base = format!("{}/", base.trim_end_matches('/'));
        Ok(Compute {
            http: http_client(&base, "Compute")?,
            base,
            metadata,
        })
    }

    /// `projects/<p>/zones/<z>/instances/<name>`.
    pub async fn instance(
        &self,
        project: &str,
        zone: &str,
        name: &str,
    ) -> Result<Instance, CallError> {
        self.get(&format!("projects/{project}/zones/{zone}/instances/{name}"))
            .await
    }

    /// The instance's shielded-VM identity (its vTPM keys).
    pub async fn shielded_identity(
        &self,
        project: &str,
        zone: &str,
        name: &str,
    ) -> Result<ShieldedInstanceIdentity, CallError> {
        self.get(&format!(
            "projects/{project}/zones/{zone}/instances/{name}/getShieldedInstanceIdentity"
        ))
        .await
    }

    /// The instances of a managed instance group (every page).
    pub async fn managed_instances(
        &self,
        project: &str,
        zone: &str,
        group: &str,
    ) -> Result<Vec<ManagedInstance>, CallError> {
        let mut out = Vec::new();
        let mut token = String::new();
        loop {
            let mut path = format!(
                "projects/{project}/zones/{zone}/instanceGroupManagers/{group}/listManagedInstances"
            );
            if !token.is_empty() {
                path.push_str(&format!("?pageToken={token}"));
            }
            let page: ManagedInstancesPage = self.call("POST", &path).await?;
            out.extend(page.managed_instances);
            match page.next_page_token {
                Some(next)
                    if !next.is_empty()
                        && next
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b"-_=".contains(&b)) =>
                {
                    token = next
                }
                _ => return Ok(out),
            }
        }
    }

    /// `projects/<p>/global/instanceTemplates/<name>`.
    pub async fn instance_template(
        &self,
        project: &str,
        name: &str,
    ) -> Result<InstanceTemplate, CallError> {
        self.get(&format!(
            "projects/{project}/global/instanceTemplates/{name}"
        ))
        .await
    }

    async fn get<T: serde::de::DeserializeOwned>(&self, path: &str) -> Result<T, CallError> {
        self.call("GET", path).await
    }

    async fn call<T: serde::de::DeserializeOwned>(
        &self,
        method: &str,
        path: &str,
    ) -> Result<T, CallError> {
        let url = format!("{}{path}", self.base);
        let failed = |reason: String| CallError::Failed(format!("{method} {url}: {reason}"));
        let token = self
            .metadata
            .access_token()
            .await
            .map_err(CallError::Failed)?;
        let mut request = http::Request::builder()
            .method(method)
            .uri(&url)
            .header("Authorization", format!("Bearer {token}"));
        // hyper sends an empty POST with no length at all, which Google's
        // front end answers with 411 (listManagedInstances is a POST).
        if method != "GET" {
            request = request.header("Content-Length", "0");
        }
        let request = request
            .body(Full::new(Bytes::new()))
            .map_err(|e| failed(e.to_string()))?;
        let response = tokio::time::timeout(TIMEOUT, self.http.request(request))
            .await
            .map_err(|_| failed(format!("no answer in {}s", TIMEOUT.as_secs())))?
            .map_err(|e| failed(error_chain(&e)))?;
        let status = response.status().as_u16();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| failed(e.to_string()))?
            .to_bytes();
        match status {
            200 => {
                serde_json::from_slice(&body).map_err(|e| failed(format!("unreadable answer: {e}")))
            }
            404 => Err(CallError::NotFound),
            _ => Err(failed(format!("HTTP {status}: {}", google_message(&body)))),
        }
    }
}

/// The message of Google's error body (`{"error":{"message":…}}`), or the
/// start of the text.
fn google_message(body: &[u8]) -> String {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| {
            v.pointer("/error/message")
                .and_then(|m| m.as_str())
                .map(str::to_string)
        })
        .unwrap_or_else(|| String::from_utf8_lossy(body).chars().take(200).collect())
}
