//! Errors from the PKI: one variant per failed operation, with the object it
//! was working on.

use kops_state::StoreError;

/// Everything kops-pki can fail at.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    #[error(transparent)]
    Store(#[from] StoreError),

    #[error("the keyset stored at `{url}` cannot be read: {reason}\nhint: fix or remove that file; it was not written by kops or was edited by hand")]
    CorruptKeyset { url: String, reason: String },

    #[error("the secret stored at `{url}` cannot be read: {reason}\nhint: fix or remove that file; kops stores secrets as JSON `{{\"Data\": \"<base64>\"}}`")]
    CorruptSecret { url: String, reason: String },

    #[error("keyset `{name}` has no primary keypair with a certificate and a private key\nhint: create one with `kops create keypair {name}` or run `kops update cluster --yes`")]
    NoPrimaryKeypair { name: String },

    #[error("keyset `{name}` was not found in `{url}`\nhint: `kops update cluster --yes` creates the cluster's keysets")]
    KeysetNotFound { name: String, url: String },

    #[error("cannot read the {what}: {reason}")]
    BadPem { what: String, reason: String },

    #[error("cannot {action}: {source}")]
    Certificate {
        action: String,
        #[source]
        source: rcgen::Error,
    },

    #[error("bad certificate request: {reason}")]
    BadRequest { reason: String },

    #[error("cannot read random bytes from the operating system: {0}")]
    Random(#[source] std::io::Error),

    #[error("the kubeconfig `{path}` cannot be {action}: {reason}")]
    Kubeconfig {
        path: String,
        action: &'static str,
        reason: String,
    },

    #[error("user `{user}` was not found in the kubeconfig ({files})\nhint: pass a user that `kubectl config view` lists, or use `--admin` for a new admin credential")]
    KubeconfigUserNotFound { user: String, files: String },
}
