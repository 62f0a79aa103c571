//! Why the controller could not start.

/// Everything that stops the controller from starting.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot read `{path}`: {reason}\nhint: nodeup writes kops-controller's files on control-plane nodes; run it first")]
    Read { path: String, reason: String },
    #[error("`{path}`: {reason}")]
    Invalid { path: String, reason: String },
    #[error("TLS: {0}")]
    Tls(String),
    #[error("cannot listen on {addr}: {reason}")]
    Listen { addr: String, reason: String },
    #[error("state store: {0}")]
    Store(#[from] kops_state::StoreError),
    #[error("AWS: {0}")]
    Aws(String),
}
