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

/// The version of an object as it was read ([`ObjectStore::read_versioned`]),
/// for a later [`ObjectStore::write_if`]: a Cloud Storage generation, or a
/// digest of the contents on backends without versions. Opaque.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Version(String);

impl Version {
    /// A version from a backend's own token (e.g. a GCS generation).
    pub fn new(token: impl Into<String>) -> Self {
        Version(token.into())
    }

    /// The version of `data` on backends that keep no versions: its MD5.
    pub fn of_contents(data: &[u8]) -> Self {
        use md5::{Digest, Md5};
        let digest = Md5::digest(data);
        Version(format!(
            "md5:{}",
            digest
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        ))
    }

    /// The token as the backend gave it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
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

    /// Reads an object with its version; `Ok(None)` when it does not exist.
    /// By default the version is a digest of the contents.
    async fn read_versioned(&self, key: &str) -> Result<Option<(Vec<u8>, Version)>, StoreError> {
        Ok(self.read(key).await?.map(|data| {
            let version = Version::of_contents(&data);
            (data, version)
        }))
    }

    /// Replaces an object only if it is still at `expected` (from
    /// [`ObjectStore::read_versioned`]); otherwise fails with
    /// [`StoreError::Conflict`] and writes nothing, so a read-modify-write
    /// never silently drops another writer's update. Backends with
    /// preconditions (gs://, memory://) check atomically; the default
    /// compares the current contents just before writing, which narrows the
    /// window to one round trip but does not close it.
    async fn write_if(
        &self,
        key: &str,
        data: &[u8],
        expected: &Version,
        options: WriteOptions,
    ) -> Result<(), StoreError> {
        match self.read_versioned(key).await? {
            Some((_, current)) if current == *expected => self.write(key, data, options).await,
            _ => Err(StoreError::Conflict {
                url: self.url_of(key),
            }),
        }
    }

    /// Removes one object; removing a missing object is not an error.
    async fn delete(&self, key: &str) -> Result<(), StoreError>;

    /// Every key under `prefix` (recursive), sorted. `prefix` is a directory
    /// path such as `mycluster/instancegroup/` or `""` for everything.
    async fn list(&self, prefix: &str) -> Result<Vec<String>, StoreError>;

    /// The names of the immediate children of `prefix` (directories and
    /// objects), sorted, without the prefix and without a trailing `/`.
    async fn list_children(&self, prefix: &str) -> Result<Vec<String>, StoreError>;
}
