//! `kops helpers kubectl-auth`: the client credential kubectl asks for
//! through the exec plugin `kops export kubeconfig --auth-plugin` writes.
//! Prints an `ExecCredential` holding a client certificate from the
//! cluster CA (`CN=kubecfg-<user>`, `O=system:masters`, one hour by
//! default), kept in kops' cache file
//! (`~/.kube/cache/kops-authentication/<cluster>_<hash>`) and reused until
//! it expires, so kops and kops-rs share each other's cached credentials.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use kops_pki::{IssueRequest, Keystore, ADMIN_GROUP, KUBERNETES_CA};
use serde::{Deserialize, Serialize};
use sha2::Digest;

use crate::pki::PkiOpsError;
use crate::{require_cluster, Registry};

/// What the plugin was asked.
#[derive(Debug, Clone)]
pub struct KubectlAuthRequest {
    pub cluster: String,
    /// The state store as given (`--state`): part of the cache key.
    pub state: String,
    pub lifetime: Duration,
    /// `v1beta1` or `v1alpha1` (of `client.authentication.k8s.io`).
    pub api_version: String,
    /// The local user's name, for the certificate's `kubecfg-<name>`.
    pub local_user: Option<String>,
    /// The home directory holding `.kube/cache`; `None` caches nothing.
    pub home: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct ExecCredential {
    #[serde(
        rename = "apiVersion",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    api_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    kind: String,
    status: Status,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Status {
    #[serde(
        rename = "clientCertificateData",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    client_certificate_data: String,
    #[serde(
        rename = "clientKeyData",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    client_key_data: String,
    #[serde(rename = "expirationTimestamp", default)]
    expiration_timestamp: String,
}

/// kops' cache file of a cluster's credential: the cluster name with
/// everything but ASCII letters and digits as `_` (32 characters at most),
/// `_`, and the SHA-224 of `<state>\0<cluster>\0` in base 62.
pub fn cache_path(home: &Path, state: &str, cluster: &str) -> PathBuf {
    let mut key = Vec::new();
    key.extend_from_slice(state.as_bytes());
    key.push(0);
    key.extend_from_slice(cluster.as_bytes());
    key.push(0);
    let hash = base62(&sha2::Sha224::digest(&key));
    let sanitized: String = cluster
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .take(32)
        .collect();
    home.join(".kube/cache/kops-authentication")
        .join(format!("{sanitized}_{hash}"))
}

/// A big-endian number in base 62 (digits, then a-z, then A-Z), as Go's
/// `big.Int.Text(62)` writes it.
fn base62(bytes: &[u8]) -> String {
    const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    let mut number: Vec<u8> = bytes.iter().copied().skip_while(|b| *b == 0).collect();
    let mut out = Vec::new();
    while !number.is_empty() {
        let mut remainder = 0u32;
        let mut quotient = Vec::with_capacity(number.len());
        for b in &number {
            let value = remainder * 256 + u32::from(*b);
            let q = value / 62;
            remainder = value % 62;
            if !(quotient.is_empty() && q == 0) {
                quotient.push(q as u8);
            }
        }
        out.push(DIGITS[remainder as usize]);
        number = quotient;
    }
    if out.is_empty() {
        out.push(b'0');
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

fn full_api_version(version: &str) -> Result<String, PkiOpsError> {
    match version {
        "v1alpha1" | "v1beta1" => Ok(format!("client.authentication.k8s.io/{version}")),
        other => Err(PkiOpsError::ExecApiVersion {
            version: other.into(),
        }),
    }
}

/// A cached credential of this API version that has not expired.
fn cached(path: &Path, api_version: &str) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let credential: ExecCredential = serde_json::from_str(&text).ok()?;
    let expires =
        humantime::parse_rfc3339_weak(credential.status.expiration_timestamp.trim_end_matches('Z'))
            .ok()?;
    let usable = credential.api_version == api_version
        && expires > SystemTime::now()
        && !credential.status.client_certificate_data.is_empty()
        && !credential.status.client_key_data.is_empty();
    usable.then_some(text)
}

/// The `ExecCredential` JSON for kubectl: the cached one while it lasts,
/// else a new certificate (then cached, best effort).
pub async fn kubectl_auth(
    registry: &Registry,
    request: &KubectlAuthRequest,
) -> Result<String, PkiOpsError> {
    let api_version = full_api_version(&request.api_version)?;
    let cache = request
        .home
        .as_deref()
        .map(|h| cache_path(h, &request.state, &request.cluster));
    if let Some(text) = cache.as_deref().and_then(|p| cached(p, &api_version)) {
        return Ok(text);
    }
    let cluster = require_cluster(registry, &request.cluster).await?;
    let keyset = Keystore::new(registry.store().clone(), cluster.name())
        .require(KUBERNETES_CA)
        .await?;
    let ca = keyset.certificate_authority()?;
    let mut issue = IssueRequest::client(
        &kops_pki::admin_common_name(request.local_user.as_deref()),
        Some(ADMIN_GROUP),
    );
    issue.validity = Some(request.lifetime);
    let issued_at = SystemTime::now();
    let issued = ca.issue(&issue)?;
    // Expiring five minutes before the certificate does, as kops.
    let expires = issued_at + request.lifetime.saturating_sub(Duration::from_secs(300));
    let credential = ExecCredential {
        api_version,
        kind: "ExecCredential".into(),
        status: Status {
            client_certificate_data: issued.certificate_pem,
            client_key_data: issued.private_key_pem,
            expiration_timestamp: humantime::format_rfc3339_seconds(expires).to_string(),
        },
    };
    let text = serde_json::to_string_pretty(&credential).unwrap_or_default();
    if let Some(path) = cache {
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = write_private(&path, text.as_bytes());
    }
    Ok(text)
}

/// Writes a file only its owner may read (it holds a private key).
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_path_is_kops_own() {
        // kops 1.37 wrote this file for this store and cluster.
        let path = cache_path(Path::new("/h"), "file:///tmp/flags-go/state", "m.k8s.local");
        assert_eq!(
            path,
            Path::new("/h/.kube/cache/kops-authentication/m_k8s_local_7OYBbSCFEeocZ4OE4hKaBXt1X8mTGK3s9VnOov")
        );
    }

    #[test]
    fn base62_as_go() {
        assert_eq!(base62(&[0]), "0");
        assert_eq!(base62(&[61]), "Z");
        assert_eq!(base62(&[62]), "10");
        assert_eq!(base62(&[1, 0]), "48");
    }
}
