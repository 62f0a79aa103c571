//! kops' keyset format: `pki/private/<name>/keyset.yaml` holds a
//! `kops.k8s.io/v1alpha2` `Keyset` whose `spec.keys` are the keypairs (id =
//! certificate serial in decimal, `publicMaterial` = the certificate PEM and
//! `privateMaterial` = the key PEM, both base64 in YAML), with
//! `spec.primaryId` naming the one that signs and `spec.type: Keypair`.
//! Items are kept oldest first (numeric ids compare as numbers).

use std::cmp::Ordering;

use base64::Engine;
use serde::{Deserialize, Serialize};

use crate::ca::{certificate_info, CertificateAuthority, CertificateInfo};
use crate::PkiError;

/// The `spec.type` of a keyset holding certificates and keys.
pub const KEYSET_TYPE_KEYPAIR: &str = "Keypair";

/// One keypair of a keyset.
#[derive(Clone, PartialEq, Eq)]
pub struct KeysetItem {
    /// The certificate's serial number in decimal (kops' key id).
    pub id: String,
    /// RFC 3339 time at which the keypair was distrusted, if it was.
    pub distrust_timestamp: Option<String>,
    pub certificate_pem: Option<String>,
    /// Secret: never print unless asked.
    pub private_key_pem: Option<String>,
}

impl std::fmt::Debug for KeysetItem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeysetItem")
            .field("id", &self.id)
            .field("distrust_timestamp", &self.distrust_timestamp)
            .field("has_certificate", &self.certificate_pem.is_some())
            .field("has_private_key", &self.private_key_pem.is_some())
            .finish()
    }
}

impl KeysetItem {
    /// What the item's certificate says, if it has one.
    pub fn certificate_info(&self) -> Option<Result<CertificateInfo, PkiError>> {
        self.certificate_pem.as_deref().map(certificate_info)
    }
}

/// A named set of keypairs; the primary one signs.
#[derive(Debug, Clone, PartialEq)]
pub struct Keyset {
    pub name: String,
    /// Oldest first.
    pub items: Vec<KeysetItem>,
    pub primary_id: Option<String>,
    /// Fields kops-rs does not model, kept as read (metadata and spec).
    extra_metadata: serde_json::Map<String, serde_json::Value>,
    extra_spec: serde_json::Map<String, serde_json::Value>,
}

/// kops' order of key ids: numeric ids by value (older first), then the rest
/// by text.
pub fn compare_ids(a: &str, b: &str) -> Ordering {
    let numeric = |s: &str| !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit());
    match (numeric(a), numeric(b)) {
        (true, true) => {
            let (a, b) = (a.trim_start_matches('0'), b.trim_start_matches('0'));
            a.len().cmp(&b.len()).then_with(|| a.cmp(b))
        }
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => a.cmp(b),
    }
}

// The wire form. Field order is alphabetical, as kops' YAML encoder writes it.
#[derive(Serialize, Deserialize)]
struct KeysetDocument {
    #[serde(rename = "apiVersion", default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    metadata: serde_json::Map<String, serde_json::Value>,
    #[serde(default)]
    spec: KeysetSpec,
}

#[derive(Serialize, Deserialize, Default)]
struct KeysetSpec {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    keys: Vec<KeyDocument>,
    #[serde(rename = "primaryId", default, skip_serializing_if = "Option::is_none")]
    primary_id: Option<String>,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    keyset_type: Option<String>,
    #[serde(flatten)]
    extra: serde_json::Map<String, serde_json::Value>,
}

#[derive(Serialize, Deserialize)]
struct KeyDocument {
    #[serde(
        rename = "distrustTimestamp",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    distrust_timestamp: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    #[serde(
        rename = "privateMaterial",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    private_material: Option<String>,
    #[serde(
        rename = "publicMaterial",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    public_material: Option<String>,
}

fn b64() -> base64::engine::GeneralPurpose {
    base64::engine::general_purpose::STANDARD
}

impl Keyset {
    /// A keyset with no keypairs yet.
    pub fn empty(name: &str) -> Self {
        Keyset {
            name: name.to_string(),
            items: Vec::new(),
            primary_id: None,
            extra_metadata: Default::default(),
            extra_spec: Default::default(),
        }
    }

    /// A keyset holding one CA keypair, primary.
    pub fn from_ca(name: &str, ca: &CertificateAuthority) -> Result<Self, PkiError> {
        let id = ca.info()?.serial;
        Ok(Keyset {
            name: name.to_string(),
            items: vec![KeysetItem {
                id: id.clone(),
                distrust_timestamp: None,
                certificate_pem: Some(ca.certificate_pem().to_string()),
                private_key_pem: Some(ca.private_key_pem().to_string()),
            }],
            primary_id: Some(id),
            extra_metadata: Default::default(),
            extra_spec: Default::default(),
        })
    }

    /// A new keyset with a new self-signed CA `CN=<name>` (what `kops update
    /// cluster` creates for each of the cluster's CAs).
    pub fn generate_ca(name: &str) -> Result<Self, PkiError> {
        Keyset::from_ca(name, &CertificateAuthority::generate(name)?)
    }

    /// Parses `keyset.yaml`; `url` names the file in errors.
    pub fn parse(url: &str, text: &str) -> Result<Self, PkiError> {
        let corrupt = |reason: String| PkiError::CorruptKeyset {
            url: url.to_string(),
            reason,
        };
        let doc: KeysetDocument =
            serde_yaml_ng::from_str(text).map_err(|e| corrupt(e.to_string()))?;
        if doc.kind != "Keyset" {
            return Err(corrupt(format!("its kind is `{}`, not `Keyset`", doc.kind)));
        }
        let version_ok = matches!(
            doc.api_version.as_str(),
            "kops.k8s.io/v1alpha2" | "kops.k8s.io/v1alpha3" | "kops/v1alpha2"
        );
        if !version_ok {
            return Err(corrupt(format!(
                "its apiVersion `{}` is not one kops writes (kops.k8s.io/v1alpha2)",
                doc.api_version
            )));
        }
        let mut metadata = doc.metadata;
        if metadata.get("creationTimestamp") == Some(&serde_json::Value::Null) {
            metadata.remove("creationTimestamp");
        }
        let name = match metadata.remove("name") {
            Some(serde_json::Value::String(n)) => n,
            _ => String::new(),
        };
        let decode = |field: &str, id: &str, value: Option<String>| -> Result<_, PkiError> {
            value
                .map(|v| {
                    let bytes = b64()
                        .decode(v.trim())
                        .map_err(|e| corrupt(format!("key `{id}`: {field} is not base64: {e}")))?;
                    String::from_utf8(bytes)
                        .map_err(|_| corrupt(format!("key `{id}`: {field} is not PEM text")))
                })
                .transpose()
        };
        let mut items = Vec::new();
        for key in doc.spec.keys {
            let id = key.id.unwrap_or_default();
            items.push(KeysetItem {
                certificate_pem: decode("publicMaterial", &id, key.public_material)?,
                private_key_pem: decode("privateMaterial", &id, key.private_material)?,
                distrust_timestamp: key.distrust_timestamp,
                id,
            });
        }
        items.sort_by(|a, b| compare_ids(&a.id, &b.id));
        let mut extra_spec = doc.spec.extra;
        if let Some(t) = doc.spec.keyset_type.filter(|t| t != KEYSET_TYPE_KEYPAIR) {
            extra_spec.insert("type".into(), serde_json::Value::String(t));
        }
        Ok(Keyset {
            name,
            items,
            primary_id: doc.spec.primary_id.filter(|p| !p.is_empty()),
            extra_metadata: metadata,
            extra_spec,
        })
    }

    /// The YAML kops writes for this keyset.
    pub fn to_yaml(&self) -> String {
        let mut metadata = serde_json::Map::new();
        metadata.insert("creationTimestamp".into(), serde_json::Value::Null);
        for (k, v) in &self.extra_metadata {
            metadata.insert(k.clone(), v.clone());
        }
        metadata.insert("name".into(), self.name.clone().into());
        let mut items: Vec<&KeysetItem> = self.items.iter().collect();
        items.sort_by(|a, b| compare_ids(&a.id, &b.id));
        let mut extra = self.extra_spec.clone();
        let keyset_type = match extra.remove("type") {
            Some(serde_json::Value::String(t)) => t,
            _ => KEYSET_TYPE_KEYPAIR.to_string(),
        };
        let doc = KeysetDocument {
            api_version: "kops.k8s.io/v1alpha2".into(),
            kind: "Keyset".into(),
            metadata,
            spec: KeysetSpec {
                keys: items
                    .into_iter()
                    .map(|i| KeyDocument {
                        distrust_timestamp: i.distrust_timestamp.clone(),
                        id: Some(i.id.clone()),
                        private_material: i.private_key_pem.as_ref().map(|p| b64().encode(p)),
                        public_material: i.certificate_pem.as_ref().map(|p| b64().encode(p)),
                    })
                    .collect(),
                primary_id: self.primary_id.clone(),
                keyset_type: Some(keyset_type),
                extra,
            },
        };
        serde_yaml_ng::to_string(&doc).unwrap_or_default()
    }

    /// Adds a keypair (a CA certificate, and its key if known); with
    /// `primary` it becomes the one that signs. A keyset's first keypair is
    /// always primary. Returns its id (the certificate's serial).
    pub fn add_keypair(
        &mut self,
        certificate_pem: &str,
        private_key_pem: Option<&str>,
        primary: bool,
    ) -> Result<String, PkiError> {
        let info = crate::ca::certificate_info(certificate_pem)?;
        if let Some(key) = private_key_pem {
            // Both must belong together: the key signs for this certificate.
            CertificateAuthority::from_pem(certificate_pem, key)?;
        }
        if self.items.iter().any(|i| i.id == info.serial) {
            return Err(PkiError::BadRequest {
                reason: format!(
                    "keyset `{}` already has a keypair with id {}",
                    self.name, info.serial
                ),
            });
        }
        let first = self.items.is_empty();
        if (primary || first) && private_key_pem.is_none() {
            return Err(PkiError::BadRequest {
                reason: "a primary keypair needs its private key (pass --key)".into(),
            });
        }
        self.items.push(KeysetItem {
            id: info.serial.clone(),
            distrust_timestamp: None,
            certificate_pem: Some(certificate_pem.trim_end().to_string() + "\n"),
            private_key_pem: private_key_pem.map(|k| k.trim_end().to_string() + "\n"),
        });
        self.items.sort_by(|a, b| compare_ids(&a.id, &b.id));
        if primary || first {
            self.primary_id = Some(info.serial.clone());
        }
        Ok(info.serial)
    }

    /// Makes a keypair primary: `id`, or the newest trusted one with a key.
    /// Returns the id, or `None` when no keypair is newer than the primary.
    pub fn promote(&mut self, id: Option<&str>) -> Result<Option<String>, PkiError> {
        let usable = |i: &KeysetItem| {
            i.distrust_timestamp.is_none()
                && i.private_key_pem.is_some()
                && i.certificate_pem.is_some()
        };
        let chosen =
            match id {
                Some(id) => {
                    let item = self.items.iter().find(|i| i.id == id).ok_or_else(|| {
                        PkiError::BadRequest {
                            reason: format!("keyset `{}` has no keypair {id}", self.name),
                        }
                    })?;
                    if !usable(item) {
                        return Err(PkiError::BadRequest {
                            reason: format!(
                                "keypair {id} of `{}` is distrusted or has no private key",
                                self.name
                            ),
                        });
                    }
                    id.to_string()
                }
                None => match self
                    .items
                    .iter()
                    .filter(|i| usable(i))
                    .max_by(|a, b| compare_ids(&a.id, &b.id))
                {
                    Some(newest) if self.primary_id.as_deref() != Some(newest.id.as_str()) => {
                        newest.id.clone()
                    }
                    _ => return Ok(None),
                },
            };
        self.primary_id = Some(chosen.clone());
        Ok(Some(chosen))
    }

    /// Distrusts keypairs at `timestamp` (RFC 3339): `ids`, or every trusted
    /// one older than the primary. The primary cannot be distrusted. Returns
    /// the ids newly distrusted.
    pub fn distrust(&mut self, ids: &[String], timestamp: &str) -> Result<Vec<String>, PkiError> {
        let primary = self.primary_id.clone().unwrap_or_default();
        let targets: Vec<String> = if ids.is_empty() {
            self.items
                .iter()
                .filter(|i| compare_ids(&i.id, &primary) == Ordering::Less)
                .map(|i| i.id.clone())
                .collect()
        } else {
            ids.to_vec()
        };
        for id in &targets {
            if *id == primary {
                return Err(PkiError::BadRequest {
                    reason: format!(
                        "{id} is the primary keypair of `{}`; promote another one first",
                        self.name
                    ),
                });
            }
            if !self.items.iter().any(|i| i.id == *id) {
                return Err(PkiError::BadRequest {
                    reason: format!("keyset `{}` has no keypair {id}", self.name),
                });
            }
        }
        let mut done = Vec::new();
        for item in &mut self.items {
            if targets.contains(&item.id) && item.distrust_timestamp.is_none() {
                item.distrust_timestamp = Some(timestamp.to_string());
                done.push(item.id.clone());
            }
        }
        Ok(done)
    }

    /// The primary keypair, if the keyset names one that exists.
    pub fn primary(&self) -> Option<&KeysetItem> {
        let id = self.primary_id.as_deref()?;
        self.items.iter().find(|i| i.id == id)
    }

    /// The CA that signs with this keyset: the primary keypair, which must
    /// have both a certificate and a private key.
    pub fn certificate_authority(&self) -> Result<CertificateAuthority, PkiError> {
        let primary = self.primary().ok_or_else(|| PkiError::NoPrimaryKeypair {
            name: self.name.clone(),
        })?;
        match (&primary.certificate_pem, &primary.private_key_pem) {
            (Some(cert), Some(key)) => CertificateAuthority::from_pem(cert, key),
            _ => Err(PkiError::NoPrimaryKeypair {
                name: self.name.clone(),
            }),
        }
    }

    /// The trusted (not distrusted) certificates, oldest first, concatenated:
    /// the CA bundle clients are given.
    /// The public keys of the trusted certificates, in the same order, as
    /// kops lists them for the API server's service-account signing keys
    /// (`RSA PUBLIC KEY` around a DER SubjectPublicKeyInfo).
    pub fn trusted_public_keys_pem(&self) -> String {
        use x509_parser::prelude::{FromDer, X509Certificate};
        let mut out = String::new();
        for pem in self
            .trusted_certificates_pem()
            .split_inclusive("-----END CERTIFICATE-----\n")
        {
            let Ok(der) = crate::ca::parse_certificate_pem(pem) else {
                continue;
            };
            if let Ok((_, cert)) = X509Certificate::from_der(&der) {
                out.push_str(&crate::ca::pem_encode(
                    "RSA PUBLIC KEY",
                    cert.tbs_certificate.subject_pki.raw.to_vec(),
                ));
            }
        }
        out
    }

    pub fn trusted_certificates_pem(&self) -> String {
        let mut items: Vec<&KeysetItem> = self
            .items
            .iter()
            .filter(|i| i.distrust_timestamp.is_none())
            .collect();
        items.sort_by(|a, b| compare_ids(&a.id, &b.id));
        items
            .into_iter()
            .filter_map(|i| i.certificate_pem.as_deref())
            .map(|p| {
                let mut p = p.trim_end().to_string();
                p.push('\n');
                p
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_sort_like_kops() {
        let mut ids = vec!["b", "10", "9", "a", "0011"];
        ids.sort_by(|a, b| compare_ids(a, b));
        assert_eq!(ids, vec!["a", "b", "9", "10", "0011"]);
    }

    #[test]
    fn round_trip() {
        let keyset = Keyset::generate_ca("kubernetes-ca").unwrap();
        let yaml = keyset.to_yaml();
        assert!(yaml.starts_with("apiVersion: kops.k8s.io/v1alpha2\nkind: Keyset\nmetadata:\n  creationTimestamp: null\n  name: kubernetes-ca\nspec:\n  keys:\n  - id: '"), "{yaml}");
        assert!(yaml.ends_with("type: Keypair\n"), "{yaml}");
        let back = Keyset::parse("test", &yaml).unwrap();
        assert_eq!(back, keyset);
        assert_eq!(back.to_yaml(), yaml);
        let ca = back.certificate_authority().unwrap();
        assert_eq!(
            ca.info().unwrap().serial,
            keyset.primary_id.clone().unwrap()
        );
    }

    #[test]
    fn rotation() {
        let mut keyset = Keyset::generate_ca("kubernetes-ca").unwrap();
        let first = keyset.primary_id.clone().unwrap();
        let next = CertificateAuthority::generate_rotation("kubernetes-ca", None).unwrap();
        let info = next.info().unwrap();
        assert_eq!(
            info.subject,
            format!("CN=kubernetes-ca,SERIALNUMBER={}", info.serial)
        );
        let id = keyset
            .add_keypair(next.certificate_pem(), Some(next.private_key_pem()), false)
            .unwrap();
        assert_eq!(keyset.primary_id.as_deref(), Some(first.as_str()));
        assert_eq!(keyset.items.len(), 2);
        assert!(keyset
            .add_keypair(next.certificate_pem(), None, false)
            .is_err());
        assert!(keyset
            .distrust(std::slice::from_ref(&first), "2026-01-01T00:00:00Z")
            .is_err());
        assert_eq!(keyset.promote(None).unwrap(), Some(id.clone()));
        assert_eq!(keyset.promote(None).unwrap(), None);
        assert_eq!(
            keyset.distrust(&[], "2026-01-01T00:00:00Z").unwrap(),
            vec![first.clone()]
        );
        assert!(keyset
            .distrust(&[], "2026-01-02T00:00:00Z")
            .unwrap()
            .is_empty());
        assert!(keyset.promote(Some(&first)).is_err());
        assert_eq!(keyset.trusted_certificates_pem(), next.certificate_pem());
        let back = Keyset::parse("u", &keyset.to_yaml()).unwrap();
        assert_eq!(back, keyset);
        let yaml = back.to_yaml();
        assert!(yaml.contains("distrustTimestamp:"), "{yaml}");
        assert!(yaml.contains("2026-01-01T00:00:00Z"), "{yaml}");
        // New certificates come from the promoted CA.
        let ca = back.certificate_authority().unwrap();
        let issued = ca.issue(&crate::IssueRequest::client("x", None)).unwrap();
        assert!(crate::verify_signed_by(&issued.certificate_pem, next.certificate_pem()).unwrap());
    }

    #[test]
    fn rejects_what_is_not_a_keyset() {
        assert!(Keyset::parse("u", "kind: Cluster\napiVersion: kops.k8s.io/v1alpha2\n").is_err());
        assert!(Keyset::parse("u", "kind: Keyset\napiVersion: v1\n").is_err());
        assert!(Keyset::parse("u", ": : :").is_err());
        let bad = "apiVersion: kops.k8s.io/v1alpha2\nkind: Keyset\nspec:\n  keys:\n  - id: \"1\"\n    publicMaterial: '!!!'\n";
        let err = Keyset::parse("u", bad).unwrap_err().to_string();
        assert!(err.contains("publicMaterial is not base64"), "{err}");
        let none = Keyset::parse("u", "apiVersion: kops.k8s.io/v1alpha2\nkind: Keyset\n").unwrap();
        assert!(matches!(
            none.certificate_authority(),
            Err(PkiError::NoPrimaryKeypair { .. })
        ));
    }
}
