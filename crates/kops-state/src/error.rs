//! Errors of the state store. Every variant names the operation that failed
//! and the object it failed on, so a message alone tells the user what to
//! look at.

/// Why a state-store operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// Reading an object failed (a missing object is not an error).
    #[error("failed to read `{url}`")]
    Read {
        url: String,
        #[source]
        source: std::io::Error,
    },

    /// Writing an object failed.
    #[error("failed to write `{url}`")]
    Write {
        url: String,
        #[source]
        source: std::io::Error,
    },

    /// Deleting an object failed.
    #[error("failed to delete `{url}`")]
    Delete {
        url: String,
        #[source]
        source: std::io::Error,
    },

    /// Listing a directory failed.
    #[error("failed to list `{url}`")]
    List {
        url: String,
        #[source]
        source: std::io::Error,
    },

    /// A `create_only` write found the object already there.
    #[error("`{url}` already exists\nhint: delete it first if you mean to replace it")]
    AlreadyExists { url: String },

    /// The state-store URL has a scheme no backend handles.
    #[error(
        "unsupported state store `{url}`\n\
         hint: use `file:///absolute/path`, `s3://bucket/prefix` or `memory://name`"
    )]
    UnsupportedScheme { url: String },

    /// The state-store URL has a known scheme but cannot be used.
    #[error("invalid state store `{url}`: {reason}")]
    InvalidUrl { url: String, reason: String },

    /// A key is empty, absolute, or escapes the store with `..`.
    #[error("invalid key `{key}` in `{base}`: {reason}")]
    InvalidKey {
        base: String,
        key: String,
        reason: &'static str,
    },

    /// The S3 bucket of the state store does not exist.
    #[error(
        "bucket `{bucket}` does not exist (while accessing `{url}`)\n\
         hint: create it (`aws s3 mb s3://{bucket}`) or point KOPS_STATE_STORE at an existing bucket"
    )]
    NoSuchBucket { bucket: String, url: String },

    /// Any other S3 failure; `message` is the AWS error with its full context.
    #[error("s3 {op} failed for `{url}`: {message}")]
    S3 {
        op: &'static str,
        url: String,
        message: String,
    },
}

impl StoreError {
    /// The URL of the object (or store) the failed operation was about.
    pub fn url(&self) -> &str {
        match self {
            StoreError::Read { url, .. }
            | StoreError::Write { url, .. }
            | StoreError::Delete { url, .. }
            | StoreError::List { url, .. }
            | StoreError::AlreadyExists { url }
            | StoreError::UnsupportedScheme { url }
            | StoreError::InvalidUrl { url, .. }
            | StoreError::NoSuchBucket { url, .. }
            | StoreError::S3 { url, .. } => url,
            StoreError::InvalidKey { base, .. } => base,
        }
    }
}
