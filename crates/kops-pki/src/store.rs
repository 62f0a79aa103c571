//! The keystore and the secret store of a cluster, in kops' layout:
//!
//! ```text
//! <cluster>/pki/private/<keyset>/keyset.yaml   Keyset (CA certificates and keys)
//! <cluster>/secrets/<name>                     JSON {"Data": "<base64>"}
//! ```
//!
//! Both are written as secret objects (mode 0600 on `file://`). Creation is
//! create-only, so two runs racing never replace each other's keys, and a
//! keyset written by kops is read, never regenerated.

use std::sync::Arc;

use base64::Engine;
use kops_api::Cluster;
use kops_state::{ObjectStore, StoreError, WriteOptions};

use crate::ca::CertificateAuthority;
use crate::der::random_bytes;
use crate::keyset::Keyset;
use crate::PkiError;

/// The keyset kops signs client and node certificates with.
pub const KUBERNETES_CA: &str = "kubernetes-ca";
/// The keyset whose key signs service-account tokens.
pub const SERVICE_ACCOUNT: &str = "service-account";

/// The legacy static tokens kops still creates as secrets.
pub const LEGACY_TOKENS: [&str; 9] = [
    "kubelet",
    "kube-proxy",
    "system:scheduler",
    "system:controller_manager",
    "system:logging",
    "system:monitoring",
    "system:dns",
    "kube",
    "admin",
];

/// Older kops stored these keysets under other names.
fn legacy_name(name: &str) -> Option<&'static str> {
    match name {
        SERVICE_ACCOUNT => Some("master"),
        KUBERNETES_CA => Some("ca"),
        _ => None,
    }
}

/// The key of a keyset's file.
pub fn keyset_key(cluster: &str, name: &str) -> String {
    format!("{cluster}/pki/private/{name}/keyset.yaml")
}

/// The key of a secret.
pub fn secret_key(cluster: &str, name: &str) -> String {
    format!("{cluster}/secrets/{name}")
}

const SECRET_WRITE: WriteOptions = WriteOptions {
    secret: true,
    create_only: false,
};
const SECRET_CREATE: WriteOptions = WriteOptions {
    secret: true,
    create_only: true,
};

/// A cluster's keysets.
#[derive(Debug, Clone)]
pub struct Keystore {
    store: Arc<dyn ObjectStore>,
    cluster: String,
}

impl Keystore {
    pub fn new(store: Arc<dyn ObjectStore>, cluster: &str) -> Self {
        Keystore {
            store,
            cluster: cluster.to_string(),
        }
    }

    /// The URL of the keystore's directory (`.../<cluster>/pki`).
    pub fn url(&self) -> String {
        self.store.url_of(&format!("{}/pki", self.cluster))
    }

    async fn read(&self, name: &str) -> Result<Option<Keyset>, PkiError> {
        let key = keyset_key(&self.cluster, name);
        let Some(bytes) = self.store.read(&key).await? else {
            return Ok(None);
        };
        let url = self.store.url_of(&key);
        let mut keyset = Keyset::parse(&url, &String::from_utf8_lossy(&bytes))?;
        if keyset.name.is_empty() {
            keyset.name = name.to_string();
        }
        Ok(Some(keyset))
    }

    /// A keyset by name (also found under its legacy name, `ca` or `master`).
    pub async fn get(&self, name: &str) -> Result<Option<Keyset>, PkiError> {
        if let Some(k) = self.read(name).await? {
            return Ok(Some(k));
        }
        match legacy_name(name) {
            Some(old) => Ok(self.read(old).await?.map(|mut k| {
                k.name = name.to_string();
                k
            })),
            None => Ok(None),
        }
    }

    /// A keyset that must exist.
    pub async fn require(&self, name: &str) -> Result<Keyset, PkiError> {
        self.get(name)
            .await?
            .ok_or_else(|| PkiError::KeysetNotFound {
                name: name.to_string(),
                url: self.url(),
            })
    }

    /// The CA of a keyset (its primary keypair), e.g. `kubernetes-ca`.
    pub async fn certificate_authority(
        &self,
        name: &str,
    ) -> Result<CertificateAuthority, PkiError> {
        self.require(name).await?.certificate_authority()
    }

    /// Every keyset, sorted by name. Files that are not `<name>/keyset.yaml`
    /// are skipped, as kops skips them.
    pub async fn list(&self) -> Result<Vec<Keyset>, PkiError> {
        let prefix = format!("{}/pki/private/", self.cluster);
        let mut out = Vec::new();
        for name in self.store.list_children(&prefix).await? {
            if let Some(k) = self.read(&name).await? {
                out.push(k);
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Writes (or replaces) a keyset.
    pub async fn put(&self, keyset: &Keyset) -> Result<(), PkiError> {
        let key = keyset_key(&self.cluster, &keyset.name);
        self.store
            .write(&key, keyset.to_yaml().as_bytes(), SECRET_WRITE)
            .await?;
        Ok(())
    }

    /// Writes a keyset unless one exists; `false` when it existed.
    pub async fn create(&self, keyset: &Keyset) -> Result<bool, PkiError> {
        let key = keyset_key(&self.cluster, &keyset.name);
        match self
            .store
            .write(&key, keyset.to_yaml().as_bytes(), SECRET_CREATE)
            .await
        {
            Ok(()) => Ok(true),
            Err(StoreError::AlreadyExists { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }
}

/// A secret's content (kops' `fi.Secret`).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret {
    pub data: Vec<u8>,
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret([secret])")
    }
}

impl Secret {
    /// A random 32-character token, as kops makes its legacy tokens: base64
    /// of 128 random bytes without `+`, `/` and `=`, cut to 32 characters.
    pub fn generate_token() -> Result<Self, PkiError> {
        let bytes = random_bytes(128)?;
        let text: String = base64::engine::general_purpose::STANDARD
            .encode(bytes)
            .chars()
            .filter(|c| !matches!(c, '+' | '/' | '='))
            .take(32)
            .collect();
        Ok(Secret {
            data: text.into_bytes(),
        })
    }

    /// kops' file format: `{"Data":"<base64>"}`.
    pub fn to_json(&self) -> String {
        serde_json::json!({
            "Data": base64::engine::general_purpose::STANDARD.encode(&self.data)
        })
        .to_string()
    }

    /// Parses kops' file format; `url` names the file in errors.
    pub fn parse(url: &str, bytes: &[u8]) -> Result<Self, PkiError> {
        let corrupt = |reason: String| PkiError::CorruptSecret {
            url: url.to_string(),
            reason,
        };
        let value: serde_json::Value =
            serde_json::from_slice(bytes).map_err(|e| corrupt(e.to_string()))?;
        let data = match value.get("Data") {
            Some(serde_json::Value::String(s)) => base64::engine::general_purpose::STANDARD
                .decode(s)
                .map_err(|e| corrupt(format!("`Data` is not base64: {e}")))?,
            Some(serde_json::Value::Null) | None => Vec::new(),
            Some(_) => return Err(corrupt("`Data` is not a string".to_string())),
        };
        Ok(Secret { data })
    }
}

/// A cluster's secrets.
#[derive(Debug, Clone)]
pub struct SecretStore {
    store: Arc<dyn ObjectStore>,
    cluster: String,
}

impl SecretStore {
    pub fn new(store: Arc<dyn ObjectStore>, cluster: &str) -> Self {
        SecretStore {
            store,
            cluster: cluster.to_string(),
        }
    }

    pub fn url(&self) -> String {
        self.store.url_of(&format!("{}/secrets", self.cluster))
    }

    /// The names of the secrets, sorted.
    pub async fn list(&self) -> Result<Vec<String>, PkiError> {
        let prefix = format!("{}/secrets/", self.cluster);
        Ok(self.store.list_children(&prefix).await?)
    }

    pub async fn get(&self, name: &str) -> Result<Option<Secret>, PkiError> {
        let key = secret_key(&self.cluster, name);
        let Some(bytes) = self.store.read(&key).await? else {
            return Ok(None);
        };
        Secret::parse(&self.store.url_of(&key), &bytes).map(Some)
    }

    /// Creates a secret unless it exists; `false` when it existed.
    pub async fn create(&self, name: &str, secret: &Secret) -> Result<bool, PkiError> {
        let key = secret_key(&self.cluster, name);
        match self
            .store
            .write(&key, secret.to_json().as_bytes(), SECRET_CREATE)
            .await
        {
            Ok(()) => Ok(true),
            Err(StoreError::AlreadyExists { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Writes a secret, replacing any existing one.
    pub async fn replace(&self, name: &str, secret: &Secret) -> Result<(), PkiError> {
        let key = secret_key(&self.cluster, name);
        self.store
            .write(&key, secret.to_json().as_bytes(), SECRET_WRITE)
            .await?;
        Ok(())
    }

    pub async fn delete(&self, name: &str) -> Result<(), PkiError> {
        self.store.delete(&secret_key(&self.cluster, name)).await?;
        Ok(())
    }
}

/// The CA keysets kops keeps for a cluster: `kubernetes-ca`,
/// `apiserver-aggregator-ca`, `service-account`, `discovery-ca` when a
/// discovery service is configured, and per etcd cluster
/// `etcd-manager-ca-<c>` and `etcd-peers-ca-<c>`, plus the shared
/// `etcd-clients-ca` (and `etcd-clients-ca-cilium` for a `cilium` etcd).
/// Sorted by name.
pub fn cluster_keyset_names(cluster: &Cluster) -> Vec<String> {
    let mut names = vec![
        KUBERNETES_CA.to_string(),
        "apiserver-aggregator-ca".to_string(),
        SERVICE_ACCOUNT.to_string(),
    ];
    let discovery_url = cluster
        .spec
        .service_account_issuer_discovery
        .as_ref()
        .and_then(|d| d.extra.get("discoveryService"))
        .and_then(|s| s.get("url"))
        .and_then(|u| u.as_str())
        .is_some_and(|u| !u.is_empty());
    if discovery_url {
        names.push("discovery-ca".to_string());
    }
    let etcd = cluster.spec.etcd_clusters.as_deref().unwrap_or_default();
    for e in etcd {
        names.push(format!("etcd-manager-ca-{}", e.name));
        names.push(format!("etcd-peers-ca-{}", e.name));
        if e.name == "cilium" {
            names.push("etcd-clients-ca-cilium".to_string());
        }
    }
    if !etcd.is_empty() {
        names.push("etcd-clients-ca".to_string());
    }
    names.sort();
    names.dedup();
    names
}

/// What [`ensure_cluster_pki`] did (or, for [`missing_cluster_pki`], would do).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PkiChanges {
    /// Keysets created, by name.
    pub created_keysets: Vec<String>,
    /// Secrets created, by name.
    pub created_secrets: Vec<String>,
    /// Keysets found under a legacy name and written under the current one.
    pub migrated_keysets: Vec<String>,
}

impl PkiChanges {
    pub fn is_empty(&self) -> bool {
        self.created_keysets.is_empty()
            && self.created_secrets.is_empty()
            && self.migrated_keysets.is_empty()
    }
}

/// What [`ensure_cluster_pki`] would create; writes nothing (dry runs).
pub async fn missing_cluster_pki(
    store: &Arc<dyn ObjectStore>,
    cluster: &Cluster,
) -> Result<PkiChanges, PkiError> {
    let name = cluster.name();
    let keystore = Keystore::new(store.clone(), name);
    let secrets = SecretStore::new(store.clone(), name);
    let mut changes = PkiChanges::default();
    for keyset in cluster_keyset_names(cluster) {
        if keystore.read(&keyset).await?.is_none() {
            if keystore.get(&keyset).await?.is_some() {
                changes.migrated_keysets.push(keyset);
            } else {
                changes.created_keysets.push(keyset);
            }
        }
    }
    let existing = secrets.list().await?;
    for token in LEGACY_TOKENS {
        if !existing.iter().any(|e| e == token) {
            changes.created_secrets.push(token.to_string());
        }
    }
    Ok(changes)
}

/// Creates the cluster's keysets and legacy token secrets that do not exist
/// yet. Existing ones (made by kops or an earlier run) are kept as they are;
/// a second run creates nothing.
pub async fn ensure_cluster_pki(
    store: &Arc<dyn ObjectStore>,
    cluster: &Cluster,
) -> Result<PkiChanges, PkiError> {
    let planned = missing_cluster_pki(store, cluster).await?;
    let name = cluster.name();
    let keystore = Keystore::new(store.clone(), name);
    let secrets = SecretStore::new(store.clone(), name);
    let mut done = PkiChanges::default();
    for keyset in &planned.migrated_keysets {
        if let Some(old) = keystore.get(keyset).await? {
            if keystore.create(&old).await? {
                done.migrated_keysets.push(keyset.clone());
            }
        }
    }
    for keyset in &planned.created_keysets {
        if keystore.create(&Keyset::generate_ca(keyset)?).await? {
            done.created_keysets.push(keyset.clone());
        }
    }
    for token in &planned.created_secrets {
        if secrets.create(token, &Secret::generate_token()?).await? {
            done.created_secrets.push(token.clone());
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_format() {
        let s = Secret {
            data: b"hello".to_vec(),
        };
        assert_eq!(s.to_json(), r#"{"Data":"aGVsbG8="}"#);
        assert_eq!(Secret::parse("u", br#"{"Data":"aGVsbG8="}"#).unwrap(), s);
        assert!(Secret::parse("u", b"nope").is_err());
        assert!(Secret::parse("u", br#"{"Data":"***"}"#).is_err());
        let t = Secret::generate_token().unwrap();
        assert_eq!(t.data.len(), 32);
        assert!(t.data.iter().all(|c| c.is_ascii_alphanumeric()));
        assert_eq!(format!("{t:?}"), "Secret([secret])");
    }

    #[test]
    fn keyset_names_follow_the_etcd_clusters() {
        let yaml = "apiVersion: kops.k8s.io/v1alpha2\nkind: Cluster\nmetadata:\n  name: a.example.com\nspec:\n  etcdClusters:\n  - name: main\n  - name: events\n";
        let cluster: Cluster = kops_api::manifest::parse_one("t", yaml).unwrap();
        assert_eq!(
            cluster_keyset_names(&cluster),
            vec![
                "apiserver-aggregator-ca",
                "etcd-clients-ca",
                "etcd-manager-ca-events",
                "etcd-manager-ca-main",
                "etcd-peers-ca-events",
                "etcd-peers-ca-main",
                "kubernetes-ca",
                "service-account",
            ]
        );
    }
}
