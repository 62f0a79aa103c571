//! What kops-gce's calls can fail with, in one enum.

use crate::cloud::ApiError;
use crate::delete::DeleteError;

/// An error of kops-gce.
#[derive(Debug, thiserror::Error)]
pub enum GceError {
    /// A Google API answered with an error (or did not answer).
    #[error(transparent)]
    Api(#[from] ApiError),

    /// `delete cluster` could not finish.
    #[error(transparent)]
    Delete(#[from] DeleteError),

    /// The HTTP client could not be made (TLS roots, proxy settings).
    #[error("{0}")]
    Client(String),

    /// `KOPS_GCE_RATE_LIMITS` does not parse; the message names it.
    #[error("{0}")]
    RateLimits(String),
}
