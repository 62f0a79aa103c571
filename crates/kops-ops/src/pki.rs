//! Keypairs and secrets: `kops get keypairs`, `kops get secrets`, `kops
//! create secret`, the keys an update makes and the node inputs they give
//! (`kops export kubeconfig` is [`crate::kubeconfig`]). The PKI itself
//! (formats, certificates, merging) lives in kops-pki; this module adds the
//! cluster look-ups and the input checks.

use std::sync::Arc;
use std::time::Duration;

use kops_api::Cluster;
use kops_pki::{KeysetItem, Keystore, PkiError, Secret, SecretStore};

use crate::{require_cluster, OpsError, Registry};

/// What can go wrong with keypairs, secrets and kubeconfig.
#[derive(Debug, thiserror::Error)]
pub enum PkiOpsError {
    #[error(transparent)]
    Ops(#[from] OpsError),

    #[error(transparent)]
    Pki(#[from] PkiError),

    #[error(
        "unknown secret type `{kind}`\nhint: kops creates secrets of type {}",
        known_secret_types()
    )]
    UnknownSecretType { kind: String },

    #[error("the {kind} secret is not valid {format}: {reason}\nhint: {hint}")]
    BadSecret {
        kind: &'static str,
        format: &'static str,
        reason: String,
        hint: &'static str,
    },

    #[error("the {kind} secret already exists in cluster `{cluster}`\nhint: pass `--force` to replace it")]
    SecretExists { kind: &'static str, cluster: String },

    #[error("no secrets found for cluster `{cluster}`{}\nhint: `kops update cluster --yes` creates the cluster's secrets; `kops create secret TYPE -f FILE` adds one", names_suffix(.names))]
    NoSecrets { cluster: String, names: Vec<String> },

    #[error("no keypairs found for cluster `{cluster}`{}\nhint: `kops update cluster --yes` creates the cluster's keypairs", names_suffix(.names))]
    NoKeypairs { cluster: String, names: Vec<String> },

    #[error("cannot use both --admin and --user\nhint: --admin writes a new admin credential; --user points the context at an existing kubeconfig user")]
    AdminAndUser,

    #[error("the admin credential lifetime must be more than zero\nhint: write e.g. `--admin=18h` or `--admin=1h30m`")]
    ZeroLifetime,

    #[error("api-version `{version}` is not supported\nhint: use `--api-version v1beta1` (or `v1alpha1`)")]
    ExecApiVersion { version: String },

    #[error("cannot look up the API load balancer of cluster `{cluster}`: {reason}\nhint: pass `--api-server https://...` or `--internal` to skip the look-up")]
    LoadBalancerLookup { cluster: String, reason: String },
}

fn names_suffix(names: &[String]) -> String {
    if names.is_empty() {
        String::new()
    } else {
        format!(" named {}", names.join(", "))
    }
}

// ---------------------------------------------------------------- secrets

/// The secrets users create (`kops create secret TYPE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretKind {
    /// `~/.docker/config.json` for pulling images from private registries.
    DockerConfig,
    /// The API server's encryption-at-rest configuration (YAML).
    EncryptionConfig,
    /// Cilium's IPsec key (YAML).
    CiliumPassword,
}

const SECRET_KINDS: [SecretKind; 3] = [
    SecretKind::DockerConfig,
    SecretKind::EncryptionConfig,
    SecretKind::CiliumPassword,
];

fn known_secret_types() -> String {
    SECRET_KINDS
        .iter()
        .map(|k| format!("`{}`", k.name()))
        .collect::<Vec<_>>()
        .join(", ")
}

impl SecretKind {
    /// The secret's name in the store, which is also the type's name.
    pub fn name(self) -> &'static str {
        match self {
            SecretKind::DockerConfig => "dockerconfig",
            SecretKind::EncryptionConfig => "encryptionconfig",
            SecretKind::CiliumPassword => "ciliumpassword",
        }
    }

    pub fn parse(text: &str) -> Result<Self, PkiOpsError> {
        SECRET_KINDS
            .into_iter()
            .find(|k| k.name() == text.to_ascii_lowercase())
            .ok_or_else(|| PkiOpsError::UnknownSecretType {
                kind: text.to_string(),
            })
    }

    /// Checks the content the way kops does: JSON for docker, YAML otherwise.
    fn check(self, data: &[u8]) -> Result<(), PkiOpsError> {
        let text = std::str::from_utf8(data).map_err(|_| PkiOpsError::BadSecret {
            kind: self.name(),
            format: "text",
            reason: "it is not UTF-8".into(),
            hint: "pass the file itself, not an archive or an encrypted copy",
        })?;
        match self {
            SecretKind::DockerConfig => {
                let v: serde_json::Value =
                    serde_json::from_str(text).map_err(|e| PkiOpsError::BadSecret {
                        kind: "dockerconfig",
                        format: "JSON",
                        reason: e.to_string(),
                        hint: "pass a Docker config such as ~/.docker/config.json: {\"auths\": {...}}",
                    })?;
                if !v.is_object() {
                    return Err(PkiOpsError::BadSecret {
                        kind: "dockerconfig",
                        format: "JSON",
                        reason: "it is not a JSON object".into(),
                        hint:
                            "pass a Docker config such as ~/.docker/config.json: {\"auths\": {...}}",
                    });
                }
            }
            SecretKind::EncryptionConfig | SecretKind::CiliumPassword => {
                let hint = if self == SecretKind::EncryptionConfig {
                    "pass an EncryptionConfiguration (apiVersion: apiserver.config.k8s.io/v1)"
                } else {
                    "pass a YAML file such as `keys: \"3 rfc4106(gcm(aes)) <hex> 128\"`"
                };
                let v: serde_json::Value =
                    serde_yaml_ng::from_str(text).map_err(|e| PkiOpsError::BadSecret {
                        kind: self.name(),
                        format: "YAML",
                        reason: e.to_string(),
                        hint,
                    })?;
                if !v.is_object() {
                    return Err(PkiOpsError::BadSecret {
                        kind: self.name(),
                        format: "YAML",
                        reason: "it is not a YAML mapping".into(),
                        hint,
                    });
                }
            }
        }
        Ok(())
    }
}

fn secret_store(registry: &Registry, cluster: &str) -> SecretStore {
    SecretStore::new(registry.store().clone(), cluster)
}

fn keystore(registry: &Registry, cluster: &str) -> Keystore {
    Keystore::new(registry.store().clone(), cluster)
}

/// `kops create secret TYPE -f FILE [--force]`: checks the content, then
/// stores it (refusing to replace an existing one without `force`).
pub async fn create_secret(
    registry: &Registry,
    cluster: &str,
    kind: &str,
    data: &[u8],
    force: bool,
) -> Result<SecretKind, PkiOpsError> {
    let kind = SecretKind::parse(kind)?;
    require_cluster(registry, cluster).await?;
    kind.check(data)?;
    let secrets = secret_store(registry, cluster);
    let secret = Secret {
        data: data.to_vec(),
    };
    if force {
        secrets.replace(kind.name(), &secret).await?;
    } else if !secrets.create(kind.name(), &secret).await? {
        return Err(PkiOpsError::SecretExists {
            kind: kind.name(),
            cluster: cluster.to_string(),
        });
    }
    Ok(kind)
}

/// The names of a cluster's secrets (all, or those in `names`).
pub async fn list_secrets(
    registry: &Registry,
    cluster: &str,
    names: &[String],
) -> Result<Vec<String>, PkiOpsError> {
    require_cluster(registry, cluster).await?;
    let mut items = secret_store(registry, cluster).list().await?;
    if !names.is_empty() {
        items.retain(|i| names.contains(i));
    }
    if items.is_empty() {
        return Err(PkiOpsError::NoSecrets {
            cluster: cluster.to_string(),
            names: names.to_vec(),
        });
    }
    Ok(items)
}

/// The secrets' values (`kops get secrets -o plaintext`), by name.
pub async fn secret_values(
    registry: &Registry,
    cluster: &str,
    names: &[String],
) -> Result<Vec<(String, Vec<u8>)>, PkiOpsError> {
    let items = list_secrets(registry, cluster, names).await?;
    let store = secret_store(registry, cluster);
    let mut out = Vec::new();
    for name in items {
        if let Some(s) = store.get(&name).await? {
            out.push((name, s.data));
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------- keypairs

/// One keypair as `kops get keypairs` shows it (the JSON/YAML field names
/// are kops').
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KeypairRow {
    pub name: String,
    pub id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub distrust_timestamp: Option<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub is_primary: bool,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub subject: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub issuer: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub alternate_names: Vec<String>,
    #[serde(rename = "isCA", skip_serializing_if = "std::ops::Not::not")]
    pub is_ca: bool,
    /// Seconds since the Unix epoch.
    #[serde(skip)]
    pub not_before: Option<i64>,
    #[serde(skip)]
    pub not_after: Option<i64>,
    #[serde(rename = "notBefore", skip_serializing_if = "Option::is_none")]
    pub not_before_text: Option<String>,
    #[serde(rename = "notAfter", skip_serializing_if = "Option::is_none")]
    pub not_after_text: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_length: Option<usize>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub has_private_key: bool,
}

fn rfc3339(unix: i64) -> Option<String> {
    let t = std::time::UNIX_EPOCH.checked_add(Duration::from_secs(u64::try_from(unix).ok()?))?;
    Some(humantime::format_rfc3339_seconds(t).to_string())
}

fn row(name: &str, primary: Option<&str>, item: &KeysetItem) -> KeypairRow {
    let info = item.certificate_info().and_then(Result::ok);
    KeypairRow {
        name: name.to_string(),
        id: item.id.clone(),
        distrust_timestamp: item.distrust_timestamp.clone(),
        is_primary: primary == Some(item.id.as_str()),
        subject: info.as_ref().map(|i| i.subject.clone()).unwrap_or_default(),
        issuer: info.as_ref().map(|i| i.issuer.clone()).unwrap_or_default(),
        alternate_names: info
            .as_ref()
            .map(|i| i.alternate_names.clone())
            .unwrap_or_default(),
        is_ca: info.as_ref().is_some_and(|i| i.is_ca),
        not_before: info.as_ref().map(|i| i.not_before),
        not_after: info.as_ref().map(|i| i.not_after),
        not_before_text: info.as_ref().and_then(|i| rfc3339(i.not_before)),
        not_after_text: info.as_ref().and_then(|i| rfc3339(i.not_after)),
        key_length: info.as_ref().and_then(|i| i.key_bits),
        has_private_key: item.private_key_pem.is_some(),
    }
}

/// The keypairs of a cluster's keysets (all, or those named), sorted by
/// keyset name then id (oldest first). Distrusted keypairs and items without
/// a certificate only with `include_distrusted`, as kops does.
pub async fn list_keypairs(
    registry: &Registry,
    cluster: &str,
    names: &[String],
    include_distrusted: bool,
) -> Result<Vec<KeypairRow>, PkiOpsError> {
    require_cluster(registry, cluster).await?;
    let mut rows = Vec::new();
    for keyset in keystore(registry, cluster).list().await? {
        if !names.is_empty() && !names.contains(&keyset.name) {
            continue;
        }
        for item in &keyset.items {
            let trusted = item.distrust_timestamp.is_none() && item.certificate_pem.is_some();
            if include_distrusted || trusted {
                rows.push(row(&keyset.name, keyset.primary_id.as_deref(), item));
            }
        }
    }
    if rows.is_empty() {
        return Err(PkiOpsError::NoKeypairs {
            cluster: cluster.to_string(),
            names: names.to_vec(),
        });
    }
    Ok(rows)
}

// ---------------------------------------------------------------- rotation

/// Whether users may add keypairs to a keyset (kops' rule: CAs and the
/// service-account key).
pub fn rotatable(keyset: &str) -> bool {
    keyset == "service-account" || keyset.contains("-ca")
}

async fn keysets_named(
    registry: &Registry,
    cluster: &str,
    keyset: &str,
) -> Result<Vec<kops_pki::Keyset>, PkiOpsError> {
    let store = keystore(registry, cluster);
    if keyset == "all" {
        let all: Vec<kops_pki::Keyset> = store
            .list()
            .await?
            .into_iter()
            .filter(|k| rotatable(&k.name))
            .collect();
        if all.is_empty() {
            return Err(PkiOpsError::NoKeypairs {
                cluster: cluster.to_string(),
                names: Vec::new(),
            });
        }
        Ok(all)
    } else {
        Ok(vec![store.require(keyset).await?])
    }
}

/// A keypair to add with `kops create keypair`.
#[derive(Clone, Default)]
pub struct NewKeypair {
    /// A CA certificate (PEM); without it a new CA is made.
    pub certificate_pem: Option<String>,
    /// Its private key (PEM); without a certificate, the new CA's key.
    pub private_key_pem: Option<String>,
    /// Make it the keypair that signs.
    pub primary: bool,
}

/// `kops create keypair KEYSET|all`: adds a keypair to the keyset(s).
/// Returns (keyset, id) per keypair added. Checks every keyset before
/// writing any.
pub async fn create_keypair(
    registry: &Registry,
    cluster: &str,
    keyset: &str,
    new: &NewKeypair,
) -> Result<Vec<(String, String)>, PkiOpsError> {
    if !rotatable(keyset) && keyset != "all" {
        return Err(PkiError::BadRequest {
            reason: format!("adding keypairs to `{keyset}` is not supported; only CA keysets (`*-ca*`), `service-account` and `all`"),
        }
        .into());
    }
    if keyset == "all" && new.certificate_pem.is_some() {
        return Err(PkiError::BadRequest {
            reason: "`--cert` adds one certificate to one keyset; name the keyset instead of `all`"
                .into(),
        }
        .into());
    }
    require_cluster(registry, cluster).await?;
    let store = keystore(registry, cluster);
    let mut targets = if keyset == "all" {
        keysets_named(registry, cluster, "all").await?
    } else {
        match store.get(keyset).await? {
            Some(k) => vec![k],
            None if new.primary => vec![kops_pki::Keyset::empty(keyset)],
            None => {
                return Err(PkiError::BadRequest {
                    reason: format!(
                        "keyset `{keyset}` does not exist; its first keypair must be primary (pass --primary)"
                    ),
                }
                .into())
            }
        }
    };
    let mut added = Vec::new();
    for k in &mut targets {
        let (cert, key) = match &new.certificate_pem {
            Some(cert) => (cert.clone(), new.private_key_pem.clone()),
            None => {
                let ca = kops_pki::CertificateAuthority::generate_rotation(
                    &k.name,
                    new.private_key_pem.as_deref(),
                )?;
                (
                    ca.certificate_pem().to_string(),
                    Some(ca.private_key_pem().to_string()),
                )
            }
        };
        let id = k.add_keypair(&cert, key.as_deref(), new.primary)?;
        added.push((k.name.clone(), id));
    }
    for k in &targets {
        store.put(k).await?;
    }
    Ok(added)
}

/// `kops promote keypair KEYSET|all [ID]`: makes a keypair primary (the
/// newest with a key when no id). Returns (keyset, promoted id or `None`
/// when nothing was newer).
pub async fn promote_keypair(
    registry: &Registry,
    cluster: &str,
    keyset: &str,
    id: Option<&str>,
) -> Result<Vec<(String, Option<String>)>, PkiOpsError> {
    require_cluster(registry, cluster).await?;
    let mut targets = keysets_named(registry, cluster, keyset).await?;
    let mut out = Vec::new();
    for k in &mut targets {
        out.push((k.name.clone(), k.promote(id)?));
    }
    let store = keystore(registry, cluster);
    for (k, (_, promoted)) in targets.iter().zip(&out) {
        if promoted.is_some() {
            store.put(k).await?;
        }
    }
    Ok(out)
}

/// `kops distrust keypair KEYSET|all [ID...]`: distrusts keypairs (every
/// one older than the primary when no ids). Returns (keyset, id) per
/// keypair distrusted.
pub async fn distrust_keypair(
    registry: &Registry,
    cluster: &str,
    keyset: &str,
    ids: &[String],
) -> Result<Vec<(String, String)>, PkiOpsError> {
    require_cluster(registry, cluster).await?;
    let mut targets = keysets_named(registry, cluster, keyset).await?;
    let now = crate::timestamp_now();
    let mut out = Vec::new();
    let mut changed = Vec::new();
    for k in &mut targets {
        let done = k.distrust(ids, &now)?;
        changed.push(!done.is_empty());
        out.extend(done.into_iter().map(|id| (k.name.clone(), id)));
    }
    let store = keystore(registry, cluster);
    for (k, changed) in targets.iter().zip(changed) {
        if changed {
            store.put(k).await?;
        }
    }
    Ok(out)
}

/// `kops trust keypair KEYSET ID...`: trusts distrusted keypairs again (the
/// reverse of [`distrust_keypair`]). Every id must exist before anything is
/// written; ids already trusted are left as they are. Returns the ids that
/// were trusted again.
pub async fn trust_keypair(
    registry: &Registry,
    cluster: &str,
    keyset: &str,
    ids: &[String],
) -> Result<Vec<String>, PkiOpsError> {
    require_cluster(registry, cluster).await?;
    if keyset == "all" {
        return Err(PkiError::BadRequest {
            reason: "`trust keypair` takes one keyset, not `all`; name it (e.g. kubernetes-ca)"
                .to_string(),
        }
        .into());
    }
    let store = keystore(registry, cluster);
    let mut k = store.require(keyset).await?;
    for id in ids {
        if !k.items.iter().any(|i| i.id == *id) {
            return Err(PkiError::BadRequest {
                reason: format!("keyset `{keyset}` has no keypair {id}"),
            }
            .into());
        }
    }
    let mut done = Vec::new();
    for item in &mut k.items {
        if ids.contains(&item.id) && item.distrust_timestamp.take().is_some() {
            done.push(item.id.clone());
        }
    }
    if !done.is_empty() {
        store.put(&k).await?;
    }
    Ok(done)
}

/// The store of a cluster's PKI, for callers that need kops-pki directly
/// (nodeup, update).
pub fn cluster_keystore(registry: &Registry, cluster: &str) -> (Keystore, SecretStore) {
    (keystore(registry, cluster), secret_store(registry, cluster))
}

/// Creates the keysets and secrets `cluster` needs that do not exist yet.
pub async fn ensure_cluster_pki(
    registry: &Registry,
    cluster: &Cluster,
) -> Result<kops_pki::PkiChanges, PkiError> {
    let store: Arc<dyn kops_state::ObjectStore> = registry.store().clone();
    // Key generation is seconds of CPU in a debug build: on a thread of its
    // own, so the run's AWS reads (started before, see `update`) go on
    // meanwhile on the runtime's thread.
    let cluster = cluster.clone();
    let runtime = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || {
        runtime.block_on(kops_pki::ensure_cluster_pki(&store, &cluster))
    })
    .await
    .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
}

/// What node configs and user data take from the state store: every
/// keyset of the cluster that exists (CA bundles and primary ids; the
/// service-account public keys), all the groups, and kops' node bootstrap
/// through kops-controller for workers (whose boot config then carries the
/// cluster CA instead of naming the state store).
pub async fn node_inputs(
    registry: &Registry,
    cluster: &Cluster,
    groups: &[kops_api::InstanceGroup],
) -> Result<kops_nodeup::config::NodeInputs, PkiError> {
    let store: Arc<dyn kops_state::ObjectStore> = registry.store().clone();
    let keystore = kops_pki::Keystore::new(store, cluster.name());
    let mut inputs = node_inputs_without_keys(groups);
    for name in kops_pki::cluster_keyset_names(cluster) {
        let Some(keyset) = keystore.get(&name).await? else {
            continue;
        };
        if name == kops_pki::SERVICE_ACCOUNT {
            inputs.service_account_public_keys = keyset.trusted_public_keys_pem();
        }
        inputs.keysets.insert(
            name,
            kops_nodeup::config::NodeKeyset {
                certificates: keyset.trusted_certificates_pem(),
                primary_id: keyset.primary_id.clone().unwrap_or_default(),
            },
        );
    }
    Ok(inputs)
}

/// [`node_inputs`] before the keysets exist: the groups, workers
/// bootstrapping through kops-controller, and whether kops' `Metal`
/// feature flag is on.
pub fn node_inputs_without_keys(
    groups: &[kops_api::InstanceGroup],
) -> kops_nodeup::config::NodeInputs {
    kops_nodeup::config::NodeInputs {
        instance_groups: Some(groups.to_vec()),
        config_server: true,
        enrolled_hosts: crate::feature_enabled("Metal"),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_kinds() {
        assert_eq!(
            SecretKind::parse("dockerconfig").unwrap(),
            SecretKind::DockerConfig
        );
        let err = SecretKind::parse("weavepassword").unwrap_err().to_string();
        assert!(err.contains("unknown secret type `weavepassword`"), "{err}");
        assert!(err.contains("`ciliumpassword`"), "{err}");
        assert!(SecretKind::DockerConfig.check(br#"{"auths":{}}"#).is_ok());
        assert!(SecretKind::DockerConfig.check(b"[1]").is_err());
        assert!(SecretKind::DockerConfig.check(b"{").is_err());
        assert!(SecretKind::EncryptionConfig
            .check(b"kind: EncryptionConfiguration\n")
            .is_ok());
        assert!(SecretKind::EncryptionConfig.check(b"just text").is_err());
        assert!(SecretKind::CiliumPassword.check(&[0xff, 0xfe]).is_err());
    }

    #[test]
    fn dates_print_like_kops() {
        assert_eq!(rfc3339(0).unwrap(), "1970-01-01T00:00:00Z");
    }
}
