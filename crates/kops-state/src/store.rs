//! The object-store trait every backend implements.

use async_trait::async_trait;

use crate::StoreError;

/// How an object is written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// The object holds secret material (keys, tokens): on file:// it is
    /// written with mode 0600, on S3 it gets the same server-side encryption
    /// as every other object.
    pub secret: bool,
    /// Fail with [`StoreError::AlreadyExists`] when the key exists.
    pub create_only: bool,
}

/// A flat key/value store under one base URL (`file:///x`, `s3://bucket/prefix`,
/// `memory://name`). Keys are `/`-separated paths relative to that base, without
/// a leading `/`, e.g. `mycluster.example.com/instancegroup/nodes`.
#[async_trait]
pub trait ObjectStore: Send + Sync + std::fmt::Debug {
    /// The base URL as the user gave it, normalised (no trailing `/`).
    fn base_url(&self) -> &str;

    /// The full URL of a key, e.g. `s3://bucket/prefix/<key>`.
    fn url_of(&self, key: &str) -> String {
        format!("{}/{}", self.base_url(), key)
    }

    /// Reads an object; `Ok(None)` when it does not exist.
    async fn read(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError>;

    /// Writes (or replaces) an object.
    async fn write(&self, key: &str, data: &[u8], options: WriteOptions) -> Result<(), StoreError>;

    /// Removes one object; removing a missing object is not an error.
    async fn delete(&self, key: &str) -> Result<(), StoreError>;

    /// Every key under `prefix` (recursive), sorted. `prefix` is a directory
    /// path such as `mycluster/instancegroup/` or `""` for everything.
    async fn list(&self, prefix: &str) -> Result<Vec<String>, StoreError>;

    /// The names of the immediate children of `prefix` (directories and
    /// objects), sorted, without the prefix and without a trailing `/`.
    async fn list_children(&self, prefix: &str) -> Result<Vec<String>, StoreError>;
}
