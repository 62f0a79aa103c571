//! Who is asking, on machines enrolled with `kops toolbox enroll`: the
//! verifier of kops' machine-key token ([`token`], kops' `pkiverifier`).
//!
//! `toolbox enroll` made a key pair on the machine and registered its
//! public half in a `Host` object (`kops.k8s.io/v1alpha2`, namespace
//! `kops-system`, named after the machine's host name) naming the machine's
//! instance group. The machine's nodeup signs its requests with the private
//! half. The token's claims are checked first (kops' audience, within the
//! allowed clock skew, the body it came with, a valid object name, not seen
//! before); then the `Host` is read from the Kubernetes API (a limited
//! number of reads at once and per second, as STS calls are); it must have
//! a public key and an instance group, and the signature must verify with
//! that key. The node is named after the `Host`.
//!
//! kops turns this verifier on for `cloudProvider: metal` clusters and,
//! beside the cloud's own, on any cluster updated with
//! `KOPS_FEATURE_FLAGS=Metal` (`server.pki` in the controller's options).

use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use kube::core::{ApiResource, DynamicObject};
use sha2::{Digest, Sha256};

use crate::identity::NodeIdentity;
use crate::refusal::Refusal;
use crate::replay::{Denied, ReplayCache, StsLimiter};
use kops_bootstrap::config::PkiOptions;
use kops_bootstrap::hostkey as token;
use kops_bootstrap::text::escape;

/// The namespace of `Host` objects.
pub const HOST_NAMESPACE: &str = "kops-system";
/// kops' clock skew allowance when the options give none.
const DEFAULT_MAX_SKEW: Duration = Duration::from_secs(300);
/// How long a `Host` read may take.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(10);

/// kops' `Host` kind.
pub fn host_resource() -> ApiResource {
    ApiResource {
        group: "kops.k8s.io".into(),
        version: "v1alpha2".into(),
        api_version: "kops.k8s.io/v1alpha2".into(),
        kind: "Host".into(),
        plural: "hosts".into(),
    }
}

/// The `Host` objects of a cluster, through `client`.
pub fn hosts_api(client: kube::Client) -> kube::Api<DynamicObject> {
    kube::Api::namespaced_with(client, HOST_NAMESPACE, &host_resource())
}

/// The machine-key verifier of one cluster's controller.
pub struct HostKeyVerifier {
    max_skew: Duration,
    /// Set once the controller has its Kubernetes client.
    hosts: OnceLock<kube::Api<DynamicObject>>,
    seen: ReplayCache,
    limit: StsLimiter,
}

impl HostKeyVerifier {
    pub fn new(options: &PkiOptions) -> HostKeyVerifier {
        HostKeyVerifier {
            max_skew: u64::try_from(options.max_time_skew)
                .ok()
                .filter(|s| *s > 0)
                .map_or(DEFAULT_MAX_SKEW, Duration::from_secs),
            hosts: OnceLock::new(),
            seen: ReplayCache::default(),
            limit: StsLimiter::default(),
        }
    }

    /// From now on, `Host` objects are read through `hosts`; until then
    /// every machine is told to come back later.
    pub fn read_hosts_from(&self, hosts: kube::Api<DynamicObject>) {
        let _ = self.hosts.set(hosts);
    }

    /// Tokens held by the replay cache now.
    pub fn replay_entries(&self) -> usize {
        self.seen.len()
    }

    /// Checks `authorization` for a request with `body`.
    pub async fn verify(&self, authorization: &str, body: &[u8]) -> Result<NodeIdentity, Refusal> {
        let (token, data) = token::decode(authorization).map_err(Refusal::Malformed)?;
        let now = SystemTime::now();
        let skew = self.max_skew;
        let signed = crate::signed_claim::check_claim(
            &data.audience,
            kops_bootstrap::gce::token::AUDIENCE,
            data.timestamp,
            &data.request_hash,
            body,
            now,
            skew,
        )?;
        if !is_object_name(&data.instance) {
            return Err(Refusal::Malformed(format!(
                "`{}` is not a valid Host name",
                escape(&data.instance)
            )));
        }
        // The signed bytes are the replay key: an ECDSA signature is
        // random, and a second valid one can be made from the first.
        let key: [u8; 32] = Sha256::digest(&token.data).into();
        self.seen
            .claim(key, signed + skew + skew, now)
            .map_err(|d| match d {
                Denied::Replay => Refusal::Replay,
                Denied::Busy => Refusal::Busy,
            })?;
        let checked = match self.limit.acquire().await {
            Ok(_slot) => self.check_host(&data.instance, &token).await,
            Err(_) => Err(Refusal::Busy),
        };
        if checked.is_err() {
            self.seen.release(&key);
        }
        checked
    }

    async fn check_host(
        &self,
        name: &str,
        token: &kops_bootstrap::gce::token::AuthToken,
    ) -> Result<NodeIdentity, Refusal> {
        let host = format!("{HOST_NAMESPACE}/{name}");
        let lookup = |reason: String| Refusal::HostLookup {
            host: host.clone(),
            reason,
        };
        let api = self
            .hosts
            .get()
            .ok_or_else(|| lookup("the controller has no Kubernetes client yet".into()))?;
        let found = tokio::time::timeout(LOOKUP_TIMEOUT, api.get_opt(name))
            .await
            .map_err(|_| lookup(format!("no answer in {}s", LOOKUP_TIMEOUT.as_secs())))?
            .map_err(|e| lookup(escape(&kops_bootstrap::text::error_chain(&e))))?
            .ok_or_else(|| Refusal::UnknownHost { host: host.clone() })?;
        let field = |name: &str| {
            found.data["spec"][name]
                .as_str()
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map(str::to_string)
        };
        let incomplete = |field: &'static str| Refusal::HostIncomplete {
            host: host.clone(),
            field,
        };
        let public_key = field("publicKey").ok_or_else(|| incomplete("publicKey"))?;
        let instance_group = field("instanceGroup").ok_or_else(|| incomplete("instanceGroup"))?;
        let key =
            token::HostKey::from_pem(&public_key).map_err(|reason| Refusal::HostKeyUnusable {
                host: host.clone(),
                reason,
            })?;
        if !key.verifies(&token.data, &token.signature) {
            return Err(Refusal::HostKeyMismatch { host });
        }
        Ok(NodeIdentity {
            node_name: name.to_string(),
            instance_id: name.to_string(),
            instance_group,
            certificate_names: vec![name.to_string()],
            one_time: None,
        })
    }
}

/// A Kubernetes object name (RFC 1123 subdomain, at most 253 characters).
fn is_object_name(text: &str) -> bool {
    let bytes = text.as_bytes();
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    !bytes.is_empty()
        && bytes.len() <= 253
        && bytes.first().is_some_and(alnum)
        && bytes.last().is_some_and(alnum)
        && bytes.iter().all(|b| alnum(b) || *b == b'-' || *b == b'.')
        && !text.contains("..")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_are_object_names() {
        for good in ["m1", "node-1.example.com", "a"] {
            assert!(is_object_name(good), "{good}");
        }
        for bad in ["", "M1", "a/b", "-a", "a-", "a..b", "a b", &"a".repeat(254)] {
            assert!(!is_object_name(bad), "{bad}");
        }
    }
}
