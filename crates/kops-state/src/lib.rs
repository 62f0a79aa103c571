//! The kops state store. This crate owns everything about where kops keeps
//! its state: the [`ObjectStore`] trait, its backends (`file://` and plain
//! paths, `s3://bucket/prefix`, `gs://bucket/prefix`, `memory://name` for tests), and [`open`],
//! which picks a backend from a URL. It knows nothing about cluster
//! operations: it must not depend on `kops-ops`, and it never prints —
//! failures come back as [`StoreError`] values for the caller to render.

pub mod error;
pub mod file;
pub mod gcs;
pub mod memory;
pub mod registry;
pub mod s3;
pub mod store;

use std::sync::Arc;

pub use error::StoreError;
pub use file::FileStore;
pub use gcs::GcsStore;
pub use memory::MemoryStore;
pub use s3::S3Store;
pub use store::{ObjectStore, Version, WriteOptions};

/// Opens the state store at `url`:
///
/// - `file:///abs/path` or a plain path (`/abs/path`, `rel/path`) → [`FileStore`]
/// - `s3://bucket/prefix` → [`S3Store`] (the AWS client is built on first use)
/// - `gs://bucket/prefix` → [`GcsStore`] (credentials are found on first use)
/// - `memory://name` → a process-global [`MemoryStore`]: opening the same
///   name twice gives the same data
pub async fn open(url: &str) -> Result<Arc<dyn ObjectStore>, StoreError> {
    match url.split_once("://") {
        Some(("file", _)) => Ok(Arc::new(FileStore::new(url)?)),
        Some(("s3", _)) => Ok(Arc::new(S3Store::new(url)?)),
        Some(("gs", _)) => Ok(Arc::new(GcsStore::new(url)?)),
        Some(("memory", _)) => Ok(MemoryStore::global(url)?),
        Some(_) => Err(StoreError::UnsupportedScheme {
            url: url.to_string(),
        }),
        None if url.is_empty() => Err(StoreError::InvalidUrl {
            url: url.to_string(),
            reason: "the state store url is empty".to_string(),
        }),
        None => Ok(Arc::new(FileStore::new(url)?)),
    }
}

/// Checks that `key` is a relative `/`-separated path that stays inside the
/// store: not empty, no leading `/`, no empty, `.` or `..` segments.
/// A bucket store's URL (`<scheme>bucket/prefix`) split into its
/// normalised base URL, bucket and prefix (no leading or trailing `/`).
pub(crate) fn bucket_url<'a>(
    url: &'a str,
    scheme: &str,
) -> Result<(String, &'a str, &'a str), StoreError> {
    let rest = url
        .strip_prefix(scheme)
        .ok_or_else(|| StoreError::UnsupportedScheme {
            url: url.to_string(),
        })?;
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Err(StoreError::InvalidUrl {
            url: url.to_string(),
            reason: format!("no bucket name; use `{scheme}bucket/prefix`"),
        });
    }
    let prefix = prefix.trim_matches('/');
    if !prefix.is_empty() {
        check_key(url, prefix).map_err(|_| StoreError::InvalidUrl {
            url: url.to_string(),
            reason: "the prefix must not contain empty, `.` or `..` segments".to_string(),
        })?;
    }
    let base_url = if prefix.is_empty() {
        format!("{scheme}{bucket}")
    } else {
        format!("{scheme}{bucket}/{prefix}")
    };
    Ok((base_url, bucket, prefix))
}

pub(crate) fn check_key(base: &str, key: &str) -> Result<(), StoreError> {
    let invalid = |reason| StoreError::InvalidKey {
        base: base.to_string(),
        key: key.to_string(),
        reason,
    };
    if key.is_empty() {
        return Err(invalid("keys must not be empty"));
    }
    if key.starts_with('/') {
        return Err(invalid("keys are relative and must not start with `/`"));
    }
    if key.contains('\0') {
        return Err(invalid("keys must not contain NUL"));
    }
    for segment in key.split('/') {
        match segment {
            "" => return Err(invalid("keys must not contain empty path segments")),
            "." | ".." => return Err(invalid("keys must not contain `.` or `..` segments")),
            _ => {}
        }
    }
    Ok(())
}

/// Normalises a list prefix to a directory prefix: `""` stays `""`,
/// anything else ends in exactly one `/`.
pub(crate) fn dir_prefix(base: &str, prefix: &str) -> Result<String, StoreError> {
    let trimmed = prefix.trim_end_matches('/');
    if trimmed.is_empty() {
        return Ok(String::new());
    }
    check_key(base, trimmed)?;
    Ok(format!("{trimmed}/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys() {
        assert!(check_key("b", "a.example.com/pki/ssh/public/admin/abcdef").is_ok());
        assert!(check_key("b", "config").is_ok());
        for bad in ["", "/a", "a//b", "a/../b", "./a", "a/"] {
            assert!(check_key("b", bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn prefixes() {
        assert_eq!(dir_prefix("b", "").unwrap(), "");
        assert_eq!(dir_prefix("b", "/").unwrap(), "");
        assert_eq!(dir_prefix("b", "a/b").unwrap(), "a/b/");
        assert_eq!(dir_prefix("b", "a/b/").unwrap(), "a/b/");
        assert!(dir_prefix("b", "../").is_err());
    }

    #[tokio::test]
    async fn open_dispatches_by_scheme() {
        let s = open("file:///tmp/x/").await.unwrap();
        assert_eq!(s.base_url(), "file:///tmp/x");
        let s = open("/tmp/y").await.unwrap();
        assert_eq!(s.base_url(), "/tmp/y");
        let s = open("s3://bucket/some/prefix/").await.unwrap();
        assert_eq!(s.base_url(), "s3://bucket/some/prefix");
        assert_eq!(s.url_of("k"), "s3://bucket/some/prefix/k");
        let s = open("gs://bucket/kops/").await.unwrap();
        assert_eq!(s.url_of("k"), "gs://bucket/kops/k");
        let err = open("azblob://bucket").await.unwrap_err();
        assert!(matches!(err, StoreError::UnsupportedScheme { .. }));
        assert!(err.to_string().contains("hint:"), "{err}");
        assert!(matches!(
            open("s3://").await.unwrap_err(),
            StoreError::InvalidUrl { .. }
        ));
    }

    #[tokio::test]
    async fn memory_urls_share_data() {
        let a = open("memory://lib-shared").await.unwrap();
        let b = open("memory://lib-shared/").await.unwrap();
        a.write("k", b"v", WriteOptions::default()).await.unwrap();
        assert_eq!(b.read("k").await.unwrap().as_deref(), Some(&b"v"[..]));
        let c = open("memory://lib-other").await.unwrap();
        assert_eq!(c.read("k").await.unwrap(), None);
    }
}

/// Environment look-ups from a fixed list, for the stores' unit tests of
/// the variables they read.
#[cfg(test)]
pub(crate) mod test_env {
    pub fn lookup(
        vars: &'static [(&'static str, &'static str)],
    ) -> impl Fn(&str) -> Option<String> {
        move |name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        }
    }
}
