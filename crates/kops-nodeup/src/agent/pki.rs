//! Keysets from the state store and the node's certificates: issued from
//! the cluster's CAs, kept when the existing one is still good. Workers that
//! bootstrap through kops-controller have no keysets: their CA bundle is the
//! boot config's and their certificates are the ones kops-controller issued
//! ([`Keystore::remote`]).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use kops_pki::{IssueRequest, Keyset};
use kops_state::ObjectStore;

use super::files::{under, PlannedFile};
use super::{Loaded, NodeupError};

/// Certificates closer than this to expiry are issued again.
const RENEW_BEFORE_SECONDS: i64 = 30 * 24 * 3600;

/// The cluster's keysets, read on demand, or a worker's certificates from
/// kops-controller.
pub struct Keystore {
    source: Source,
    cache: std::sync::Mutex<BTreeMap<String, Keyset>>,
}

enum Source {
    Store(Arc<dyn ObjectStore>),
    /// `kubernetes-ca`'s bundle and, by certificate path, the certificate
    /// and key to install.
    Remote {
        ca_bundle: String,
        issued: BTreeMap<String, (String, String)>,
    },
}

impl Keystore {
    /// A worker's keystore: the CA bundle from its boot config and what
    /// kops-controller issued (or the still-good files kept on disk).
    pub fn remote(ca_bundle: String, issued: BTreeMap<String, (String, String)>) -> Keystore {
        Keystore {
            source: Source::Remote { ca_bundle, issued },
            cache: Default::default(),
        }
    }

    fn store(&self) -> Option<&Arc<dyn ObjectStore>> {
        match &self.source {
            Source::Store(store) => Some(store),
            Source::Remote { .. } => None,
        }
    }

    pub async fn open(loaded: &Loaded) -> Result<Keystore, NodeupError> {
        let url = loaded
            .config
            .config_store
            .as_ref()
            .and_then(|c| c.keypairs.clone())
            .unwrap_or_else(|| format!("{}/pki", loaded.config_base.trim_end_matches('/')));
        Ok(Keystore {
            source: Source::Store(kops_state::open(&url).await?),
            cache: Default::default(),
        })
    }

    /// Loads the keysets a role needs (before anything is planned, so a
    /// missing one stops the run early).
    pub async fn load(&self, names: &[String]) -> Result<(), NodeupError> {
        let Some(store) = self.store() else {
            return Ok(());
        };
        for name in names {
            let key = format!("private/{name}/keyset.yaml");
            let url = store.url_of(&key);
            let bytes = store
                .read(&key)
                .await?
                .ok_or_else(|| NodeupError::MissingKeyset {
                    name: name.clone(),
                    url: url.clone(),
                })?;
            let keyset = Keyset::parse(&url, &String::from_utf8_lossy(&bytes))?;
            self.cache
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(name.clone(), keyset);
        }
        Ok(())
    }

    fn keyset(&self, name: &str) -> Result<Keyset, NodeupError> {
        self.cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
            .ok_or_else(|| NodeupError::MissingKeyset {
                name: name.to_string(),
                url: self
                    .store()
                    .map(|s| s.url_of(&format!("private/{name}/keyset.yaml")))
                    .unwrap_or_else(|| "the boot config".to_string()),
            })
    }

    /// The CA bundle (trusted certificates) of a keyset.
    pub fn bundle(&self, name: &str) -> Result<String, NodeupError> {
        if let Source::Remote { ca_bundle, .. } = &self.source {
            if name == kops_pki::KUBERNETES_CA {
                return Ok(ca_bundle.clone());
            }
        }
        Ok(self.keyset(name)?.trusted_certificates_pem())
    }

    /// The primary keypair's id of a keyset.
    pub fn primary_id(&self, name: &str) -> Result<String, NodeupError> {
        Ok(self.keyset(name)?.primary_id.unwrap_or_default())
    }

    /// The primary certificate and private key of a keyset, PEM.
    pub fn primary_pem(&self, name: &str) -> Result<(String, String), NodeupError> {
        let ca = self.keyset(name)?.certificate_authority()?;
        Ok((
            ca.certificate_pem().to_string(),
            ca.private_key_pem().to_string(),
        ))
    }

    /// A certificate and key at `cert_path`/`key_path` signed by keyset
    /// `ca`: the ones on disk when they are still good (signed by that CA,
    /// same subject and names, not about to expire), else newly issued.
    pub fn certificate(
        &self,
        root: &Path,
        ca: &str,
        cert_path: &str,
        key_path: &str,
        request: &IssueRequest,
    ) -> Result<Vec<PlannedFile>, NodeupError> {
        if let Source::Remote { issued, .. } = &self.source {
            let (cert, key) = issued
                .get(cert_path)
                .ok_or_else(|| NodeupError::NotIssued {
                    path: cert_path.to_string(),
                })?;
            return Ok(vec![
                PlannedFile::new(cert_path, 0o644, cert.clone()),
                PlannedFile::secret(key_path, key.clone().into_bytes()),
            ]);
        }
        let keyset = self.keyset(ca)?;
        let authority = keyset.certificate_authority()?;
        let existing_cert = std::fs::read_to_string(under(root, cert_path)).ok();
        let existing_key = std::fs::read(under(root, key_path)).ok();
        if let (Some(cert), Some(key)) = (existing_cert, existing_key) {
            if still_good(&cert, authority.certificate_pem(), request) {
                return Ok(vec![
                    PlannedFile::new(cert_path, 0o644, cert),
                    PlannedFile::secret(key_path, key),
                ]);
            }
        }
        let issued = authority.issue(request)?;
        Ok(vec![
            PlannedFile::new(cert_path, 0o644, issued.certificate_pem),
            PlannedFile::secret(key_path, issued.private_key_pem),
        ])
    }
}

pub(super) fn still_good(cert: &str, ca_pem: &str, request: &IssueRequest) -> bool {
    let Ok(info) = kops_pki::certificate_info(cert) else {
        return false;
    };
    if !matches!(kops_pki::verify_signed_by(cert, ca_pem), Ok(true)) {
        return false;
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    if info.not_after - now < RENEW_BEFORE_SECONDS {
        return false;
    }
    let mut wanted = request.alternate_names.clone();
    wanted.sort();
    wanted.dedup();
    let mut have = info.alternate_names.clone();
    have.sort();
    have.dedup();
    wanted == have
        && info
            .subject
            .contains(&format!("CN={}", request.common_name))
}
