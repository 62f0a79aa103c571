//! The assets of `kops get assets [--copy]`: what a cluster downloads, so a private
//! mirror can be filled before nodes boot without Internet access.
//!
//! Files are the node configs' asset lists (kubelet, kubectl, the ECR
//! credential provider, CNI plugins, containerd, runc; each with its
//! sha256) for every architecture the groups run; images are every
//! `image:` of the manifests `update cluster` writes (the addons, the
//! etcd-manager and other static pods). Each has its canonical location and
//! the one nodes download from: `spec.assets.fileRepository` /
//! `containerRegistry` / `containerProxy` remap them as kops does.
//!
//! `--copy` fills a `file://` or `s3://` file repository (read from the
//! canonical URL with `curl`, or through the state-store backends for
//! `file://` / `s3://` sources; the sha256 is checked before anything is
//! written, and a file already there with the right sha256 is left alone).
//! kops-rs has no container registry client: images are listed with the
//! copy to make (`crane copy SRC DST`), not copied.

use std::collections::BTreeSet;

use anyhow::{bail, Result};
use kops_api::{Cluster, InstanceGroup};
use kops_nodeup::Arch;
use kops_ops::Registry;
use serde_json::Value;

use crate::output::status;

/// One file: where kops publishes it, where nodes fetch it, its sha256.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct FileAsset {
    pub canonical: String,
    pub download: String,
    pub sha: String,
}

/// One image: its canonical name and the one nodes pull.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ImageAsset {
    pub canonical: String,
    pub download: String,
}

/// The node configs' files for every architecture the groups run, canonical
/// URLs first remapped onto the file repository.
pub fn file_assets(cluster: &Cluster, groups: &[InstanceGroup]) -> Result<Vec<FileAsset>> {
    // The canonical list comes from the spec without a repository, so a
    // `file://` or `s3://` repository (which nodes cannot use, but a mirror
    // being filled can) does not stop the listing.
    let mut canonical_spec = cluster.clone();
    if let Some(a) = canonical_spec.spec.assets.as_mut() {
        a.file_repository = None;
    }
    let repository = cluster
        .spec
        .assets
        .as_ref()
        .and_then(|a| a.file_repository.as_deref())
        .filter(|r| !r.is_empty());
    let mut archs: BTreeSet<&'static str> = BTreeSet::new();
    let mut wanted = Vec::new();
    for g in groups {
        for arch in kops_nodeup::bootstrap::group_architectures(g) {
            if archs.insert(arch.as_str()) {
                wanted.push(arch);
            }
        }
    }
    if wanted.is_empty() {
        wanted.push(Arch::Amd64);
    }
    let mut out = BTreeSet::new();
    for arch in wanted {
        for asset in kops_nodeup::assets::node_assets(&canonical_spec, arch)? {
            let Some(canonical) = asset.urls.first().cloned() else {
                continue;
            };
            let download = match repository {
                Some(repo) => remap(repo, &canonical),
                None => canonical.clone(),
            };
            out.insert(FileAsset {
                canonical,
                download,
                sha: asset.sha256,
            });
        }
    }
    Ok(out.into_iter().collect())
}

/// `repo` + the canonical URL's path, as kops maps a file onto its repository.
fn remap(repo: &str, canonical: &str) -> String {
    let path = canonical
        .split_once("://")
        .and_then(|(_, rest)| rest.split_once('/'))
        .map(|(_, path)| path)
        .unwrap_or_default();
    format!("{}/{}", repo.trim_end_matches('/'), path)
}

/// Every image of the manifests `update cluster` writes to the state store.
/// The manifests already name the mirror when spec.assets sets one, so they
/// are rendered twice: without the mirrors (canonical names) and as they
/// are (what nodes pull); the two lists pair up image by image.
pub fn image_assets(
    registry: &Registry,
    name: &str,
    cluster: &Cluster,
    groups: &[InstanceGroup],
) -> Result<Vec<ImageAsset>> {
    let mut canonical_spec = cluster.clone();
    if let Some(a) = canonical_spec.spec.assets.as_mut() {
        a.container_registry = None;
        a.container_proxy = None;
    }
    let canonical = manifest_images(registry, name, &canonical_spec, groups)?;
    let pulled = manifest_images(registry, name, cluster, groups)?;
    let assets = cluster.spec.assets.as_ref();
    let registry_mirror = assets
        .and_then(|a| a.container_registry.as_deref())
        .filter(|r| !r.is_empty());
    let proxy = assets
        .and_then(|a| a.container_proxy.as_deref())
        .filter(|r| !r.is_empty());
    let paired = canonical.len() == pulled.len();
    let mut out = BTreeSet::new();
    for (i, image) in canonical.into_iter().enumerate() {
        let download = match paired {
            true => pulled[i].clone(),
            // Should not happen (the mirrors change names, not manifests);
            // kops' mapping is then the best statement of what nodes pull.
            false => normalize_image(&image, registry_mirror, proxy),
        };
        out.insert(ImageAsset {
            canonical: image,
            download,
        });
    }
    Ok(out.into_iter().collect())
}

/// The images of the rendered manifests, in file and document order.
fn manifest_images(
    registry: &Registry,
    name: &str,
    cluster: &Cluster,
    groups: &[InstanceGroup],
) -> Result<Vec<String>> {
    let config_base = cluster
        .spec
        .config_base
        .clone()
        .unwrap_or_else(|| registry.config_base(name));
    let model = kops_model::Model {
        cluster,
        groups,
        ssh_public_key: None,
        config_base: &config_base,
        account_id: None,
        node_inputs: None,
    };
    let completed = kops_ops::spec::completed_spec(cluster, &config_base);
    let files = kops_model::files::state_files(
        &model,
        &kops_api::manifest::to_yaml(&completed),
        Vec::new(),
    )?;
    let mut found = Vec::new();
    for file in &files {
        if !(file.path.ends_with(".yaml") || file.path.ends_with(".yml")) {
            continue;
        }
        let text = String::from_utf8_lossy(&file.contents);
        for doc in documents(&text) {
            if let Ok(value) = serde_yaml_ng::from_str::<Value>(&doc) {
                images_in(&value, &mut found);
            }
        }
    }
    Ok(found)
}

/// The `image` of every container (and init container) in a manifest.
fn images_in(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for key in ["containers", "initContainers", "ephemeralContainers"] {
                if let Some(Value::Array(list)) = m.get(key) {
                    for c in list {
                        if let Some(Value::String(image)) = c.get("image") {
                            if !image.is_empty() {
                                out.push(image.clone());
                            }
                        }
                    }
                }
            }
            for child in m.values() {
                images_in(child, out);
            }
        }
        Value::Array(list) => list.iter().for_each(|c| images_in(c, out)),
        _ => {}
    }
}

/// Where a node pulls `image` from, as kops maps it: through the proxy
/// (its registry host replaced, Docker Hub names prefixed), then onto the
/// registry mirror (flattened: `/` becomes `-`, registry.k8s.io dropped).
fn normalize_image(image: &str, mirror: Option<&str>, proxy: Option<&str>) -> String {
    let mut image = image.to_string();
    if let Some(proxy) = proxy {
        let proxy = proxy.trim_end_matches('/');
        let first = image.split('/').next().unwrap_or_default();
        image = if image.matches('/').count() <= 1 && !first.contains(['.', ':']) {
            format!("{proxy}/{image}")
        } else {
            match image.split_once('/') {
                Some((_, rest)) => format!("{proxy}/{rest}"),
                None => format!("{proxy}/{image}"),
            }
        };
    }
    if let Some(mirror) = mirror {
        let trimmed = image.strip_prefix("registry.k8s.io/").unwrap_or(&image);
        if !trimmed.starts_with(&format!("{mirror}/")) {
            image = format!("{mirror}/{}", trimmed.replace('/', "-"));
        } else {
            image = trimmed.to_string();
        }
    }
    image
}

/// kops' table layout: tab-separated cells, sorted rows, header first.
pub fn tab_table(headers: &[&str], mut rows: Vec<Vec<String>>) -> String {
    rows.sort();
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    // Go's tabwriter with '\t' padding and tab stops of 8: each cell but the
    // last is followed by enough tabs to reach the column's stop.
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        let last = cells.len().saturating_sub(1);
        for (i, cell) in cells.iter().enumerate() {
            s.push_str(cell);
            if i < last {
                let cell_width = widths[i] + 1;
                let stop = cell_width.div_ceil(8) * 8;
                let len = cell.chars().count();
                let tabs = (stop - len).div_ceil(8).max(1);
                s.push_str(&"\t".repeat(tabs));
            }
        }
        s.push('\n');
        s
    };
    let mut out = line(headers.to_vec());
    for row in &rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

/// Copies the files to the repository; lists the image copies to make.
pub async fn copy(cluster: &Cluster, files: &[FileAsset], images: &[ImageAsset]) -> Result<i32> {
    let Some(repo) = cluster
        .spec
        .assets
        .as_ref()
        .and_then(|a| a.file_repository.as_deref())
        .filter(|r| !r.is_empty())
    else {
        bail!("--copy needs spec.assets.fileRepository\nhint: set it with `kops edit cluster --set spec.assets.fileRepository=s3://BUCKET/PREFIX` (or file://DIR)");
    };
    if !(repo.starts_with("file://") || repo.starts_with("s3://")) {
        bail!("--copy writes to a file:// or s3:// fileRepository, not `{repo}`\nhint: copy to the bucket or directory that serves {repo}, then point fileRepository at it for nodes");
    }
    let store = kops_state::open(repo).await?;
    let mut failed = Vec::new();
    let (mut copied, mut present) = (0, 0);
    for f in files {
        let key = f
            .download
            .strip_prefix(repo.trim_end_matches('/'))
            .unwrap_or(&f.download)
            .trim_start_matches('/')
            .to_string();
        if let Ok(Some(existing)) = store.read(&key).await {
            if sha256_hex(&existing) == f.sha {
                present += 1;
                status(&format!("present {} (sha256 matches)", f.download));
                continue;
            }
        }
        let bytes = match fetch(&f.canonical).await {
            Ok(b) => b,
            Err(e) => {
                failed.push(format!("{}: {e}", f.canonical));
                continue;
            }
        };
        let got = sha256_hex(&bytes);
        if got != f.sha {
            failed.push(format!(
                "{}: its sha256 is {got}, the node config expects {}",
                f.canonical, f.sha
            ));
            continue;
        }
        if let Err(e) = store
            .write(&key, &bytes, kops_state::WriteOptions::default())
            .await
        {
            failed.push(format!("{}: cannot write: {e}", f.download));
            continue;
        }
        copied += 1;
        status(&format!("copied {} -> {}", f.canonical, f.download));
    }
    let to_copy: Vec<&ImageAsset> = images
        .iter()
        .filter(|i| i.canonical != i.download)
        .collect();
    if to_copy.is_empty() {
        status("images: nothing to copy (no spec.assets.containerRegistry or containerProxy remaps them)");
    } else {
        status(&format!(
            "images: kops-rs has no container registry client; copy these {} with e.g. `crane copy SRC DST`:",
            to_copy.len()
        ));
        for i in to_copy {
            status(&format!("  would copy {} -> {}", i.canonical, i.download));
        }
    }
    status(&format!(
        "files: {copied} copied, {present} already present, {} failed",
        failed.len()
    ));
    if !failed.is_empty() {
        bail!(
            "{} file(s) not copied to {repo}:\n{}",
            failed.len(),
            failed.join("\n")
        );
    }
    Ok(0)
}

/// The bytes at `url`: `file://` and `s3://` through the state-store
/// backends, `http(s)://` with curl (as kops-rs fetches nodeup's hash).
async fn fetch(url: &str) -> Result<Vec<u8>> {
    if url.starts_with("file://") || url.starts_with("s3://") {
        let Some((dir, name)) = url.rsplit_once('/') else {
            bail!("not a URL with a path");
        };
        let store = kops_state::open(dir).await?;
        return match store.read(name).await? {
            Some(bytes) => Ok(bytes),
            None => bail!("it does not exist"),
        };
    }
    let output = tokio::process::Command::new("curl")
        .args(["-fsSL", "--max-time", "300", "--retry", "3", url])
        .output()
        .await
        .map_err(|e| anyhow::anyhow!("cannot run curl: {e}"))?;
    if !output.status.success() {
        bail!(
            "download failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(output.stdout)
}

fn sha256_hex(bytes: &[u8]) -> String {
    kops_nodeup::bootstrap::sha256_hex(bytes)
}

/// The documents of a YAML stream (split at `---` lines).
fn documents(text: &str) -> Vec<String> {
    let mut docs = vec![String::new()];
    for line in text.lines() {
        if line.trim_end() == "---" || line.starts_with("--- ") {
            docs.push(String::new());
        } else if let Some(d) = docs.last_mut() {
            d.push_str(line);
            d.push('\n');
        }
    }
    docs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_are_remapped_as_kops_does() {
        assert_eq!(
            normalize_image(
                "registry.k8s.io/kops/dns-controller:1.30.0",
                Some("mirror.example.com"),
                None
            ),
            "mirror.example.com/kops-dns-controller:1.30.0"
        );
        assert_eq!(
            normalize_image("calico/node:v3", None, Some("proxy.example.com/")),
            "proxy.example.com/calico/node:v3"
        );
        assert_eq!(
            normalize_image("quay.io/cilium/cilium:v1", None, Some("proxy.example.com")),
            "proxy.example.com/cilium/cilium:v1"
        );
    }

    #[test]
    fn files_are_remapped_onto_the_repository() {
        assert_eq!(
            remap(
                "s3://b/p/",
                "https://dl.k8s.io/release/v1.34.0/bin/linux/amd64/kubelet"
            ),
            "s3://b/p/release/v1.34.0/bin/linux/amd64/kubelet"
        );
    }
}
