//! kops' PKI. This crate owns the cluster's certificate authorities and the
//! certificates they issue ([`CertificateAuthority`], [`IssueRequest`]), the
//! keyset format kops stores them in (`<cluster>/pki/private/<name>/keyset.yaml`,
//! [`Keyset`]), the secrets under `<cluster>/secrets/` ([`Secret`]), the set
//! of keysets and secrets a cluster needs ([`ensure_cluster_pki`]), and
//! kubeconfig files ([`KubeconfigFiles`]). It reads and writes through
//! kops-state's [`kops_state::ObjectStore`]; it must not depend on kops-ops,
//! the AWS SDK or anything that prints. Private keys are only ever returned
//! as values: `Debug` output elides them.
//!
//! # Use
//!
//! ```no_run
//! # async fn demo(store: std::sync::Arc<dyn kops_state::ObjectStore>) -> Result<(), kops_pki::PkiError> {
//! use kops_pki::{CertificateUsage, IssueRequest, Keystore};
//!
//! // The cluster's CA, from the state store (kops' format).
//! let keystore = Keystore::new(store.clone(), "a.example.com");
//! let ca = keystore.certificate_authority(kops_pki::KUBERNETES_CA).await?;
//!
//! // A serving certificate for the API server, valid ten years.
//! let issued = ca.issue(&IssueRequest {
//!     common_name: "kubernetes-master".into(),
//!     organizations: vec![],
//!     alternate_names: vec!["api.internal.a.example.com".into(), "100.64.0.1".into()],
//!     usage: CertificateUsage::Server,
//!     validity: None,
//! })?;
//! // issued.certificate_pem, issued.private_key_pem (PKCS#1), issued.serial
//! // ca.certificate_pem() is what clients trust.
//! # Ok(()) }
//! ```
//!
//! `update cluster --yes` calls [`ensure_cluster_pki`], which creates the
//! missing CA keysets and legacy token secrets and leaves existing ones alone.

mod ca;
mod der;
mod error;
mod keyset;
mod kubeconfig;
mod store;

pub use ca::{
    certificate_info, format_date, kops_serial, new_private_key, parse_certificate_pem,
    parse_private_key, verify_signed_by, CertificateAuthority, CertificateInfo, CertificateUsage,
    IssueRequest, IssuedCertificate, DEFAULT_VALIDITY,
};
pub use der::random_bytes;
pub use error::PkiError;
pub use keyset::{compare_ids, Keyset, KeysetItem, KEYSET_TYPE_KEYPAIR};
pub use kubeconfig::{
    admin_common_name, KubeconfigEntry, KubeconfigFiles, KubeconfigUser, ADMIN_GROUP,
};
pub use store::{
    cluster_keyset_names, ensure_cluster_pki, keyset_key, missing_cluster_pki, secret_key,
    Keystore, PkiChanges, Secret, SecretStore, KUBERNETES_CA, LEGACY_TOKENS, SERVICE_ACCOUNT,
};
