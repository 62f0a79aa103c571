//! Who is asking, on Google Cloud: the verifier of kops' GCE node token
//! ([`token`]).
//!
//! The token claims a project, zone and instance and covers the request
//! body's hash, the time and the audience. Those claims are checked first
//! (this project, kops' audience, within the allowed clock skew, the body
//! it came with, not seen before); then the instance is read from Compute
//! (`instances.get`): it must exist in this region, be running, carry this
//! cluster's `cluster-name` metadata and name its instance group; last,
//! the signature must verify against the instance's shielded-VM signing
//! key (`getShieldedInstanceIdentity`). The node is named after its
//! instance, as kops names GCE nodes.

pub mod compute;
pub mod ipam;
pub mod labels;
pub mod nodes;

use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};

use crate::error::StartError;
use crate::identity::NodeIdentity;
use crate::refusal::Refusal;
use crate::replay::{Denied, ReplayCache, StsLimiter};
use crate::verifier::{NodePass, Verifier};
use compute::{CallError, Compute, Instance};
use kops_bootstrap::config::{GceOptions, Options, CONFIG_PATH};
use kops_bootstrap::gce::{metadata, token};
use kops_bootstrap::text::escape;

pub use compute::{CLUSTER_NAME_KEY, INSTANCE_GROUP_KEY};

/// kops' default clock skew allowance when the options give none.
const DEFAULT_MAX_SKEW: Duration = Duration::from_secs(300);

/// The verifier of a Google Cloud cluster: Compute at gcloud's endpoint
/// (`CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE`, else Google's), with the
/// instance's service-account token from the metadata server
/// (`GCE_METADATA_HOST`, else the link-local one).
pub fn verifier(options: &Options) -> Result<GceVerifier, StartError> {
    let gce = options
        .gce()
        .ok_or_else(|| StartError::Invalid {
            path: CONFIG_PATH.to_string(),
            reason: "server.provider.gce is missing".into(),
        })?
        .clone();
    if gce.project_id.is_empty() || gce.region.is_empty() {
        return Err(StartError::Invalid {
            path: CONFIG_PATH.to_string(),
            reason: "server.provider.gce needs projectID and region".into(),
        });
    }
    let metadata = std::sync::Arc::new(metadata::Metadata::from_env().map_err(StartError::Tls)?);
    let compute = Compute::from_env(metadata).map_err(StartError::Tls)?;
    Ok(GceVerifier::new(&options.cluster_name, gce, compute))
}

/// The verifier of one cluster's controller on Google Cloud.
pub struct GceVerifier {
    options: GceOptions,
    cluster: String,
    compute: std::sync::Arc<Compute>,
    seen: ReplayCache,
    limit: StsLimiter,
}

impl GceVerifier {
    pub fn new(cluster: &str, options: GceOptions, compute: Compute) -> GceVerifier {
        GceVerifier {
            options,
            cluster: cluster.to_string(),
            compute: std::sync::Arc::new(compute),
            seen: ReplayCache::default(),
            limit: StsLimiter::default(),
        }
    }

    /// A node labeller sharing this verifier's Compute client.
    pub fn labeler(
        &self,
        nodes: kube::Api<k8s_openapi::api::core::v1::Node>,
    ) -> labels::GceLabeler {
        labels::GceLabeler {
            nodes,
            binding: self.binding(),
        }
    }

    /// The cloud IPAM sharing this verifier's Compute client.
    pub fn ipam(&self, nodes: kube::Api<k8s_openapi::api::core::v1::Node>) -> ipam::GceIpam {
        ipam::GceIpam {
            nodes,
            binding: self.binding(),
            warned: Default::default(),
        }
    }

    fn binding(&self) -> nodes::GceBinding {
        nodes::GceBinding {
            compute: self.compute.clone(),
            project: self.options.project_id.clone(),
            cluster: self.cluster_metadata().to_string(),
        }
    }

    /// The `cluster-name` metadata this cluster's instances carry: the
    /// GCE options' cluster name, else the controller's.
    fn cluster_metadata(&self) -> &str {
        if self.options.cluster_name.is_empty() {
            &self.cluster
        } else {
            &self.options.cluster_name
        }
    }

    /// Tokens held by the replay cache now.
    pub fn replay_entries(&self) -> usize {
        self.seen.len()
    }

    fn max_skew(&self) -> Duration {
        u64::try_from(self.options.max_time_skew)
            .ok()
            .filter(|s| *s > 0)
            .map_or(DEFAULT_MAX_SKEW, Duration::from_secs)
    }

    /// Checks `authorization` for a request with `body`.
    pub async fn verify(&self, authorization: &str, body: &[u8]) -> Result<NodeIdentity, Refusal> {
        let (token, data) = token::decode(authorization).map_err(Refusal::Malformed)?;
        let skew = self.max_skew();
        let now = SystemTime::now();
        let signed = crate::signed_claim::check_claim(
            &data.audience,
            token::AUDIENCE,
            data.timestamp,
            &data.request_hash,
            body,
            now,
            skew,
        )?;
        if data.project != self.options.project_id {
            return Err(Refusal::WrongProject {
                got: escape(&data.project),
                want: self.options.project_id.clone(),
            });
        }
        for (field, value) in [("zone", &data.zone), ("instance", &data.instance)] {
            if !is_resource_name(value) {
                return Err(Refusal::Malformed(format!(
                    "`{}` is not a valid {field} name",
                    escape(value)
                )));
            }
        }

        // Claimed until its window closes; released when it is refused.
        let key: [u8; 32] = Sha256::digest(&token.signature).into();
        self.seen
            .claim(key, signed + skew + skew, now)
            .map_err(|d| match d {
                Denied::Replay => Refusal::Replay,
                Denied::Busy => Refusal::Busy,
            })?;
        let checked = match self.limit.acquire().await {
            Ok(_slot) => self.check_instance(&data, &token).await,
            Err(_) => Err(Refusal::Busy),
        };
        if checked.is_err() {
            self.seen.release(&key);
        }
        checked
    }

    async fn check_instance(
        &self,
        data: &token::TokenData,
        token: &token::AuthToken,
    ) -> Result<NodeIdentity, Refusal> {
        let name = &data.instance;
        let instance = match self.compute.instance(&data.project, &data.zone, name).await {
            Ok(i) => i,
            Err(CallError::NotFound) => {
                return Err(Refusal::NoInstance {
                    instance: format!("{}/{name}", data.zone),
                })
            }
            Err(CallError::Failed(reason)) => {
                return Err(Refusal::Compute {
                    instance: name.clone(),
                    reason: escape(&reason),
                })
            }
        };
        let zone = metadata::last_component(&instance.zone);
        if !zone.starts_with(&format!("{}-", self.options.region)) {
            return Err(Refusal::WrongRegion {
                instance: name.clone(),
                zone: escape(zone),
                region: self.options.region.clone(),
            });
        }
        if !matches!(
            instance.status.as_str(),
            "RUNNING" | "PROVISIONING" | "STAGING"
        ) {
            return Err(Refusal::NotRunning {
                instance: name.clone(),
                state: escape(&instance.status),
            });
        }
        let want = self.cluster_metadata();
        match instance.metadata_value(CLUSTER_NAME_KEY) {
            Some(cluster) if cluster == want => {}
            got => {
                return Err(Refusal::WrongClusterMetadata {
                    instance: name.clone(),
                    got: got.map_or_else(|| "none".to_string(), |g| format!("`{}`", escape(g))),
                    want: want.to_string(),
                })
            }
        }
        let instance_group = instance
            .metadata_value(INSTANCE_GROUP_KEY)
            .filter(|g| !g.is_empty())
            .ok_or_else(|| Refusal::NoInstanceGroupMetadata {
                instance: name.clone(),
            })?
            .to_string();

        let identity = match self
            .compute
            .shielded_identity(&data.project, &data.zone, name)
            .await
        {
            Ok(i) => i,
            Err(CallError::NotFound) => {
                return Err(Refusal::NoSigningKey {
                    instance: name.clone(),
                })
            }
            Err(CallError::Failed(reason)) => {
                return Err(Refusal::Compute {
                    instance: name.clone(),
                    reason: escape(&reason),
                })
            }
        };
        let key = identity
            .signing_key
            .map(|k| k.ek_pub)
            .filter(|k| !k.is_empty())
            .ok_or_else(|| Refusal::NoSigningKey {
                instance: name.clone(),
            })?;
        match token::signature_matches(&key, &token.data, &token.signature) {
            Ok(true) => {}
            Ok(false) => {
                return Err(Refusal::BadSignature {
                    instance: name.clone(),
                })
            }
            Err(reason) => {
                return Err(Refusal::Compute {
                    instance: name.clone(),
                    reason: escape(&reason),
                })
            }
        }
        Ok(identity_of(&instance, instance_group))
    }
}

#[async_trait::async_trait]
impl Verifier for GceVerifier {
    async fn verify(&self, authorization: &str, body: &[u8]) -> Result<NodeIdentity, Refusal> {
        GceVerifier::verify(self, authorization, body).await
    }

    fn replay_entries(&self) -> usize {
        GceVerifier::replay_entries(self)
    }

    fn labeller(
        &self,
        nodes: kube::Api<k8s_openapi::api::core::v1::Node>,
        _config_store: std::sync::Arc<dyn kops_state::ObjectStore>,
    ) -> Option<std::sync::Arc<dyn NodePass>> {
        Some(std::sync::Arc::new(self.labeler(nodes)))
    }

    fn ipam(
        &self,
        nodes: kube::Api<k8s_openapi::api::core::v1::Node>,
    ) -> Option<std::sync::Arc<dyn NodePass>> {
        Some(std::sync::Arc::new(GceVerifier::ipam(self, nodes)))
    }
}

/// The node an instance is: named after the instance; its kubelet serves
/// as that name and the primary interface's addresses.
pub fn identity_of(instance: &Instance, instance_group: String) -> NodeIdentity {
    let mut names = vec![instance.name.clone()];
    if let Some(nic) = instance.network_interfaces.first() {
        for ip in [&nic.network_ip, &nic.ipv6_address] {
            if !ip.is_empty() && !names.contains(ip) {
                names.push(ip.clone());
            }
        }
    }
    NodeIdentity {
        node_name: instance.name.clone(),
        instance_id: instance.name.clone(),
        instance_group,
        certificate_names: names,
        one_time: None,
    }
}

/// A Compute resource name (RFC 1035 label, at most 63 characters).
fn is_resource_name(text: &str) -> bool {
    let bytes = text.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes[0].is_ascii_lowercase()
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && !text.ends_with('-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_names_are_rfc1035_labels() {
        assert!(is_resource_name("nodes-us-test1-a-abcd"));
        assert!(is_resource_name("us-test1-a"));
        for bad in ["", "Nodes", "a/b", "a-", "1a", "a..b", &"a".repeat(64)] {
            assert!(!is_resource_name(bad), "{bad}");
        }
    }

    #[test]
    fn identity_is_the_instance_name_and_first_interface() {
        let instance: Instance = serde_json::from_value(serde_json::json!({
            "name": "nodes-x",
            "networkInterfaces": [
                {"networkIP": "10.0.16.3", "ipv6Address": "fd20::3"},
                {"networkIP": "10.1.0.9"}
            ]
        }))
        .unwrap();
        let id = identity_of(&instance, "nodes-us-test1-a".into());
        assert_eq!(id.node_name, "nodes-x");
        assert_eq!(id.certificate_names, ["nodes-x", "10.0.16.3", "fd20::3"]);
    }
}
