//! Planned files and writing them: only what differs, each atomically.

use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::NodeupError;
use crate::assets::Asset;

/// Where nodeup records what each asset installed.
pub const ASSET_STAMP_DIR: &str = "/var/lib/nodeup/assets";

/// A file nodeup wants on the node.
#[derive(Clone, PartialEq, Eq)]
pub struct PlannedFile {
    /// Absolute path on the node (joined under `--root`).
    pub path: String,
    pub mode: u32,
    pub contents: Vec<u8>,
    /// Holds a private key or token.
    pub secret: bool,
    /// The user and group id owning the file when not root (a service
    /// that runs as that user reads it).
    pub owner: Option<u32>,
}

impl std::fmt::Debug for PlannedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlannedFile")
            .field("path", &self.path)
            .field("mode", &format_args!("{:o}", self.mode))
            .field("bytes", &self.contents.len())
            .finish()
    }
}

impl PlannedFile {
    pub fn new(path: impl Into<String>, mode: u32, contents: impl Into<Vec<u8>>) -> Self {
        PlannedFile {
            path: path.into(),
            mode,
            contents: contents.into(),
            secret: false,
            owner: None,
        }
    }

    pub fn secret(path: impl Into<String>, contents: impl Into<Vec<u8>>) -> Self {
        PlannedFile {
            path: path.into(),
            mode: 0o600,
            contents: contents.into(),
            secret: true,
            owner: None,
        }
    }

    /// The same file owned by user and group `id`.
    pub fn owned_by(mut self, id: u32) -> Self {
        self.owner = Some(id);
        self
    }
}

/// What happened to one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    Created,
    Updated,
    Unchanged,
}

impl ChangeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Created => "created",
            ChangeKind::Updated => "updated",
            ChangeKind::Unchanged => "unchanged",
        }
    }
}

/// One managed file and what happened to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub path: String,
    pub mode: u32,
    pub kind: ChangeKind,
    pub size: usize,
    pub secret: bool,
}

pub(crate) fn under(root: &Path, path: &str) -> PathBuf {
    root.join(path.trim_start_matches('/'))
}

fn io<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> NodeupError + 'a {
    move |source| NodeupError::Io {
        action,
        path: path.display().to_string(),
        source,
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Writes the files that differ from what is on disk (content or mode).
/// Returns every file, sorted by path, with what happened to it.
pub fn apply(
    root: &Path,
    mut planned: Vec<PlannedFile>,
    dry_run: bool,
) -> Result<Vec<Change>, NodeupError> {
    planned.sort_by(|a, b| a.path.cmp(&b.path));
    planned.dedup_by(|a, b| a.path == b.path);
    let mut changes = Vec::new();
    for file in planned {
        let target = under(root, &file.path);
        let existing = match std::fs::metadata(&target) {
            Ok(meta) if meta.is_file() => Some(meta),
            Ok(_) => None,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(io("inspect", &target)(e)),
        };
        let kind = match existing {
            None => ChangeKind::Created,
            Some(meta) => {
                let owned = file
                    .owner
                    .is_none_or(|id| meta.uid() == id && meta.gid() == id);
                let same = meta.permissions().mode() & 0o7777 == file.mode
                    && owned
                    && std::fs::read(&target).map_err(io("read", &target))? == file.contents;
                if same {
                    ChangeKind::Unchanged
                } else {
                    ChangeKind::Updated
                }
            }
        };
        if kind != ChangeKind::Unchanged && !dry_run {
            write_atomic(&target, &file.contents, file.mode)?;
            if let Some(id) = file.owner {
                std::os::unix::fs::chown(&target, Some(id), Some(id))
                    .map_err(io("change the owner of", &target))?;
            }
        }
        changes.push(Change {
            path: file.path,
            mode: file.mode,
            kind,
            size: file.contents.len(),
            secret: file.secret,
        });
    }
    Ok(changes)
}

/// Writes a temporary file beside `target`, sets its mode, syncs it and
/// renames it over `target`.
pub fn write_atomic(target: &Path, contents: &[u8], mode: u32) -> Result<(), NodeupError> {
    let dir = target.parent().unwrap_or(Path::new("/"));
    std::fs::create_dir_all(dir).map_err(io("create the directory", dir))?;
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = dir.join(format!(".{name}.nodeup-{}", std::process::id()));
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&temp)
            .map_err(io("create", &temp))?;
        f.write_all(contents).map_err(io("write", &temp))?;
        f.set_permissions(std::fs::Permissions::from_mode(mode))
            .map_err(io("set the mode of", &temp))?;
        f.sync_all().map_err(io("sync", &temp))?;
        std::fs::rename(&temp, target).map_err(io("rename into place", target))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

fn stamp_path(asset: &Asset) -> String {
    format!("{ASSET_STAMP_DIR}/{}", asset.file_name())
}

/// The record of what an asset installed: its hash, then one line per file
/// (`sha256 mode path`).
pub fn asset_stamp(asset: &Asset, installed: &[PlannedFile]) -> PlannedFile {
    let mut text = format!("asset {} {}\n", asset.sha256, asset.urls[0]);
    for f in installed {
        text.push_str(&format!(
            "{} {:o} {}\n",
            sha256_hex(&f.contents),
            f.mode,
            f.path
        ));
    }
    PlannedFile::new(stamp_path(asset), 0o644, text)
}

/// The files an asset installed, read back from disk, when the stamp says
/// this very asset (same hash) installed them and they are unchanged;
/// `None` when it must be downloaded again.
pub fn installed_asset(
    root: &Path,
    asset: &Asset,
) -> Result<Option<Vec<PlannedFile>>, NodeupError> {
    let stamp_file = under(root, &stamp_path(asset));
    let Ok(stamp) = std::fs::read_to_string(&stamp_file) else {
        return Ok(None);
    };
    let mut lines = stamp.lines();
    let first = lines.next().unwrap_or_default();
    if first.split(' ').nth(1) != Some(asset.sha256.as_str()) {
        return Ok(None);
    }
    let mut files = vec![PlannedFile::new(stamp_path(asset), 0o644, stamp.clone())];
    for line in lines {
        let mut parts = line.splitn(3, ' ');
        let (Some(hash), Some(mode), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            return Ok(None);
        };
        let Ok(mode) = u32::from_str_radix(mode, 8) else {
            return Ok(None);
        };
        let Ok(contents) = std::fs::read(under(root, path)) else {
            return Ok(None);
        };
        if sha256_hex(&contents) != hash {
            return Ok(None);
        }
        files.push(PlannedFile::new(path, mode, contents));
    }
    Ok(Some(files))
}
