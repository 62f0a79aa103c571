//! A state store in a local directory (`file:///abs/path` or a plain path).
//!
//! Writes are atomic: the data goes to a temporary file in the target
//! directory which is then renamed over the key (or hard-linked, for
//! `create_only`, so an existing key is never replaced). Secret objects are
//! created with mode 0600. Each operation is one `spawn_blocking` hop doing
//! plain `std::fs` calls.

use std::io::{ErrorKind, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;

use crate::{check_key, dir_prefix, ObjectStore, StoreError, WriteOptions};

/// Temporary files start with this; listings skip them.
const TMP_PREFIX: &str = ".kops-tmp-";

/// A state store rooted at a local directory.
#[derive(Debug, Clone)]
pub struct FileStore {
    base_url: String,
    root: PathBuf,
}

impl FileStore {
    /// A store for `file:///abs/path` or a plain path. The directory need not
    /// exist yet; it is created by the first write.
    pub fn new(url: &str) -> Result<Self, StoreError> {
        let path = match url.strip_prefix("file://") {
            Some(path) => path,
            None if url.contains("://") => {
                return Err(StoreError::UnsupportedScheme {
                    url: url.to_string(),
                })
            }
            None => url,
        };
        if path.is_empty() {
            return Err(StoreError::InvalidUrl {
                url: url.to_string(),
                reason: "no path after `file://`; use `file:///absolute/path`".to_string(),
            });
        }
        let trimmed = path.trim_end_matches('/');
        let root = if trimmed.is_empty() { "/" } else { trimmed };
        Ok(FileStore {
            base_url: url[..url.len() - (path.len() - trimmed.len())].to_string(),
            root: PathBuf::from(root),
        })
    }

    /// A store rooted at `dir`, with base URL `file://<dir>` (for tests).
    pub fn at(dir: impl Into<PathBuf>) -> Self {
        let root = dir.into();
        FileStore {
            base_url: format!("file://{}", root.display())
                .trim_end_matches('/')
                .to_string(),
            root,
        }
    }

    /// The directory this store lives in.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The local path of a key (after checking the key).
    pub fn path_of(&self, key: &str) -> Result<PathBuf, StoreError> {
        check_key(&self.base_url, key)?;
        Ok(self.root.join(key))
    }
}

/// Runs blocking filesystem work off the async threads, re-raising panics.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    match tokio::task::spawn_blocking(f).await {
        Ok(value) => value,
        Err(err) => std::panic::resume_unwind(err.into_panic()),
    }
}

fn write_sync(path: &Path, data: &[u8], options: WriteOptions) -> std::io::Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().expect("a key path has a parent");
    let tmp = dir.join(format!(
        "{TMP_PREFIX}{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed),
    ));
    let mode = if options.secret { 0o600 } else { 0o644 };
    let open = || {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)
    };
    let mut file = match open() {
        Ok(file) => file,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            std::fs::create_dir_all(dir)?;
            open()?
        }
        Err(e) => return Err(e),
    };
    let result = file.write_all(data).and_then(|()| {
        drop(file);
        if options.create_only {
            // link(2) fails with EEXIST instead of replacing the target.
            std::fs::hard_link(&tmp, path).and_then(|()| std::fs::remove_file(&tmp))
        } else {
            std::fs::rename(&tmp, path)
        }
    });
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

fn delete_sync(root: &Path, path: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    }
    // Drop directories the delete left empty, like S3 "directories" vanish
    // with their last object; stops at the first non-empty one.
    let mut dir = path.parent();
    while let Some(d) = dir {
        if d == root || !d.starts_with(root) || std::fs::remove_dir(d).is_err() {
            break;
        }
        dir = d.parent();
    }
    Ok(())
}

/// Entries of `dir` that are not temporary files; a missing directory (or a
/// file where a directory was expected) has no entries.
fn entries(dir: &Path) -> std::io::Result<Vec<(String, bool)>> {
    let read = match std::fs::read_dir(dir) {
        Ok(read) => read,
        Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
            return Ok(Vec::new())
        }
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    for entry in read {
        let entry = entry?;
        let Ok(name) = entry.file_name().into_string() else {
            tracing::debug!(path = %entry.path().display(), "skipping non-UTF-8 file name");
            continue;
        };
        if name.starts_with(TMP_PREFIX) {
            continue;
        }
        let mut file_type = entry.file_type()?;
        if file_type.is_symlink() {
            file_type = std::fs::metadata(entry.path())?.file_type();
        }
        out.push((name, file_type.is_dir()));
    }
    Ok(out)
}

fn list_sync(dir: &Path, prefix: &str, out: &mut Vec<String>) -> std::io::Result<()> {
    for (name, is_dir) in entries(dir)? {
        let key = format!("{prefix}{name}");
        if is_dir {
            list_sync(&dir.join(&name), &format!("{key}/"), out)?;
        } else {
            out.push(key);
        }
    }
    Ok(())
}

#[async_trait]
impl ObjectStore for FileStore {
    fn base_url(&self) -> &str {
        &self.base_url
    }

    async fn read(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let path = self.path_of(key)?;
        match blocking(move || std::fs::read(path)).await {
            Ok(data) => Ok(Some(data)),
            Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
                Ok(None)
            }
            Err(source) => Err(StoreError::Read {
                url: self.url_of(key),
                source,
            }),
        }
    }

    async fn write(&self, key: &str, data: &[u8], options: WriteOptions) -> Result<(), StoreError> {
        let path = self.path_of(key)?;
        let data = data.to_vec();
        match blocking(move || write_sync(&path, &data, options)).await {
            Ok(()) => Ok(()),
            Err(e) if options.create_only && e.kind() == ErrorKind::AlreadyExists => {
                Err(StoreError::AlreadyExists {
                    url: self.url_of(key),
                })
            }
            Err(source) => Err(StoreError::Write {
                url: self.url_of(key),
                source,
            }),
        }
    }

    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        let path = self.path_of(key)?;
        let root = self.root.clone();
        blocking(move || delete_sync(&root, &path))
            .await
            .map_err(|source| StoreError::Delete {
                url: self.url_of(key),
                source,
            })
    }

    async fn list(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        let prefix = dir_prefix(&self.base_url, prefix)?;
        let dir = self.root.join(&prefix);
        let walk_prefix = prefix.clone();
        blocking(move || {
            let mut keys = Vec::new();
            list_sync(&dir, &walk_prefix, &mut keys).map(|()| {
                keys.sort_unstable();
                keys
            })
        })
        .await
        .map_err(|source| StoreError::List {
            url: self.url_of(&prefix),
            source,
        })
    }

    async fn list_children(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        let prefix = dir_prefix(&self.base_url, prefix)?;
        let dir = self.root.join(&prefix);
        blocking(move || {
            entries(&dir).map(|entries| {
                let mut names: Vec<String> = entries.into_iter().map(|(name, _)| name).collect();
                names.sort_unstable();
                names
            })
        })
        .await
        .map_err(|source| StoreError::List {
            url: self.url_of(&prefix),
            source,
        })
    }
}
