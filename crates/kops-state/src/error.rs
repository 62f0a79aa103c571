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

    /// A conditional write found the object changed (or gone) since it was
    /// read: another writer got there first.
    #[error("`{url}` was changed by another writer since it was read; nothing was saved\nhint: run the command again to apply your change on top of theirs")]
    Conflict { url: String },

    /// The state-store URL has a scheme no backend handles.
    #[error(
        "unsupported state store `{url}`\n\
         hint: use `file:///absolute/path`, `s3://bucket/prefix`, `gs://bucket/prefix` or `memory://name`"
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

    /// The bucket (S3 or Cloud Storage) of the state store does not exist.
    #[error(
        "bucket `{bucket}` does not exist (while accessing `{url}`)\n\
         hint: create it (`{}`) or point KOPS_STATE_STORE at an existing bucket",
        make_bucket_command(.url, .bucket)
    )]
    NoSuchBucket { bucket: String, url: String },

    /// Cloud Storage refused the request (401/403).
    #[error("access to `{url}` was denied: {message}\nhint: grant the account in use roles/storage.objectAdmin on gs://{bucket} (`gcloud storage buckets add-iam-policy-binding`), or point GOOGLE_APPLICATION_CREDENTIALS at a key of an account that has it")]
    GcsDenied {
        bucket: String,
        url: String,
        message: String,
    },

    /// No Google credentials were found, or they could not give a token.
    #[error("no usable Google credentials for `{url}`: {reason}\nhint: run `gcloud auth application-default login`, or set GOOGLE_APPLICATION_CREDENTIALS to a service-account key file")]
    GcsCredentials { url: String, reason: String },

    /// Any other Cloud Storage failure.
    #[error("gcs {op} failed for `{url}`: {message}")]
    Gcs {
        op: &'static str,
        url: String,
        message: String,
    },

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
            | StoreError::Conflict { url }
            | StoreError::GcsDenied { url, .. }
            | StoreError::GcsCredentials { url, .. }
            | StoreError::Gcs { url, .. }
            | StoreError::UnsupportedScheme { url }
            | StoreError::InvalidUrl { url, .. }
            | StoreError::NoSuchBucket { url, .. }
            | StoreError::S3 { url, .. } => url,
            StoreError::InvalidKey { base, .. } => base,
        }
    }
}

/// The command that creates `bucket`, for the store scheme of `url`.
fn make_bucket_command(url: &str, bucket: &str) -> String {
    if url.starts_with("gs://") {
        format!("gcloud storage buckets create gs://{bucket}")
    } else {
        format!("aws s3 mb s3://{bucket}")
    }
}
