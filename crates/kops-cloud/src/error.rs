//! What a [`crate::Provider`] call can fail with.

/// An error of a cloud's [`crate::Provider`].
#[derive(Debug, thiserror::Error)]
pub enum CloudError {
    /// A call to the cloud failed: the cloud crate's own error, shown as
    /// it shows itself (its causes kept).
    #[error(transparent)]
    Api(Box<dyn std::error::Error + Send + Sync>),

    /// The cloud cannot run a replacement beside the instance it replaces.
    #[error("{cloud} cloud provider does not support surging\nhint: pass --surge=false (it replaces an instance where it stands; the replacement cannot run beside it)")]
    NoSurge { cloud: String },
}

impl CloudError {
    /// Wraps a cloud crate's error.
    pub fn api(error: impl std::error::Error + Send + Sync + 'static) -> CloudError {
        CloudError::Api(Box::new(error))
    }
}
