//! Where nodes download nodeup, decided before `update cluster` writes
//! anything: kops' environment variables (`NODEUP_URL_<ARCH>` with
//! `NODEUP_HASH_<ARCH>`, or `KOPS_BASE_URL`), else the nodeup binaries a
//! release ships beside the `kops` binary, which `update --yes` uploads to
//! the state store under a versioned, content-addressed key
//! ([`kops_nodeup::bootstrap::nodeup_store_path`]). Every binary is pinned
//! by its sha256 in the user data. A group whose architecture has no nodeup
//! is an error that names the group, the architecture and the fix.

use std::path::{Path, PathBuf};

use kops_api::{Cluster, InstanceGroup};
use kops_model::ModelError;
use kops_nodeup::bootstrap::{
    self, group_architectures, NodeupBinary, NodeupEnv, NodeupSources, NODEUP_STORE_DIR,
};
use kops_nodeup::config::{base_url_image_url, BaseUrlImage, BASE_URL_IMAGES};
use kops_nodeup::Arch;
use kops_state::WriteOptions;

use crate::{OpsError, Registry};

/// What `update` resolved: the sources the user data pins, and the local
/// binaries to upload before any instance can boot.
#[derive(Debug, Clone, Default)]
pub struct NodeupPlan {
    pub sources: NodeupSources,
    /// kops' images under `KOPS_BASE_URL` (with their published hashes),
    /// which kops' control-plane node configs list; empty without it.
    pub images: Vec<BaseUrlImage>,
    uploads: Vec<Upload>,
}

#[derive(Debug, Clone)]
struct Upload {
    /// Key in the registry's store.
    key: String,
    /// The binary beside `kops`.
    path: PathBuf,
    bytes: Vec<u8>,
}

/// The directory of the running `kops` binary, where a release ships
/// `nodeup-linux-amd64` and `nodeup-linux-arm64`.
pub fn kops_binary_dir() -> Option<PathBuf> {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
}

/// The nodeup binary for `arch` in `dir`: `nodeup-linux-<arch>`, or a plain
/// `nodeup` when `arch` is the machine's own (a build tree).
pub fn local_nodeup(dir: &Path, arch: Arch) -> Option<PathBuf> {
    let named = dir.join(format!("nodeup-linux-{}", arch.as_str()));
    if named.is_file() {
        return Some(named);
    }
    let plain = dir.join("nodeup");
    (Arch::host() == Some(arch) && plain.is_file()).then_some(plain)
}

fn error(path: impl Into<String>, message: String, hint: String) -> OpsError {
    OpsError::Model(ModelError::Spec {
        path: path.into(),
        message,
        hint,
    })
}

/// Resolves nodeup for every architecture the cluster's groups run (all
/// available ones when Karpenter picks machines). Reads only: nothing is
/// written until [`NodeupPlan::upload`].
pub async fn resolve(
    registry: &Registry,
    cluster: &Cluster,
    groups: &[InstanceGroup],
    env: &NodeupEnv,
    kops_dir: Option<&Path>,
) -> Result<NodeupPlan, OpsError> {
    let any_arch = groups
        .iter()
        .any(|g| g.spec.manager.as_deref() == Some("Karpenter"));
    let needed: Vec<Arch> = Arch::ALL
        .into_iter()
        .filter(|a| any_arch || groups.iter().any(|g| group_architectures(g).contains(a)))
        .collect();
    let mut plan = NodeupPlan::default();
    for arch in Arch::ALL {
        let required = needed.contains(&arch);
        if let Some(from_env) = env.nodeup(arch) {
            // kops writes both architectures' URL and hash when the
            // environment names them; one no group runs is best effort.
            let sha256 = match from_env.sha256 {
                Some(hash) if bootstrap::is_sha256(&hash) => hash,
                Some(hash) => {
                    let variable = NodeupEnv::variable("HASH", arch);
                    return Err(error(
                        variable.clone(),
                        format!("`{hash}` is not a sha256 (64 hex digits)"),
                        format!("set {variable} to the output of `sha256sum nodeup`"),
                    ));
                }
                None => match fetch_sha256(&from_env.url, &from_env.url_variable, arch).await {
                    Ok(hash) => hash,
                    Err(_) if !required => continue,
                    Err(e) => return Err(e),
                },
            };
            plan.sources.binaries.push(NodeupBinary {
                arch,
                urls: vec![from_env.url],
                sha256: Some(sha256),
            });
            continue;
        }
        if !required {
            continue;
        }
        let Some(path) = kops_dir.and_then(|d| local_nodeup(d, arch)) else {
            continue;
        };
        let bytes = tokio::fs::read(&path)
            .await
            .map_err(|source| OpsError::ReadFile {
                path: path.display().to_string(),
                source,
            })?;
        let sha256 = bootstrap::sha256_hex(&bytes);
        let key = format!(
            "{}/{}",
            cluster.name(),
            bootstrap::nodeup_store_path(bootstrap::NODEUP_VERSION, &sha256, arch)
        );
        plan.sources.binaries.push(NodeupBinary {
            arch,
            urls: vec![registry.store().url_of(&key)],
            sha256: Some(sha256),
        });
        plan.sources.state_store_prefix = Some(format!(
            "{}/",
            registry
                .store()
                .url_of(&format!("{}/{NODEUP_STORE_DIR}", cluster.name()))
        ));
        plan.uploads.push(Upload { key, path, bytes });
    }
    for group in groups {
        for arch in group_architectures(group) {
            if plan.sources.binary(arch).is_none() {
                return Err(missing(group.name(), arch, kops_dir));
            }
        }
    }
    if let Some(base) = &env.kops_base_url {
        plan.images = base_url_images(base, groups).await?;
    }
    Ok(plan)
}

/// kops' images under `KOPS_BASE_URL` (`<base>/images/<name>-<arch>.tar.gz`)
/// with the sha256 published beside each, for every architecture, as kops
/// lists them in control-plane node configs (it reads every hash and fails
/// without one). An architecture no control-plane or API-server group runs
/// is best effort: left out when a hash is missing.
async fn base_url_images(
    base: &str,
    groups: &[InstanceGroup],
) -> Result<Vec<BaseUrlImage>, OpsError> {
    let runs_api = |g: &&InstanceGroup| {
        matches!(
            g.role(),
            Some(kops_api::Role::ControlPlane | kops_api::Role::ApiServer)
        )
    };
    let mut images = Vec::new();
    for arch in Arch::ALL {
        let required = groups
            .iter()
            .filter(runs_api)
            .any(|g| group_architectures(g).contains(&arch));
        let mut found = Vec::new();
        for name in BASE_URL_IMAGES {
            let url = base_url_image_url(base, name, arch);
            match read_sha256(&url).await {
                Ok(sha256) => found.push(BaseUrlImage {
                    name: name.to_string(),
                    arch,
                    url,
                    sha256,
                }),
                Err(_) if !required => {
                    found.clear();
                    break;
                }
                Err(reason) => {
                    return Err(error(
                        "KOPS_BASE_URL",
                        format!("no sha256 for the image `{url}`: cannot read `{url}.sha256`: {reason}"),
                        format!(
                            "publish `{url}.sha256` beside the image (control-plane nodes load kops' images from KOPS_BASE_URL), or unset KOPS_BASE_URL"
                        ),
                    ))
                }
            }
        }
        images.extend(found);
    }
    Ok(images)
}

/// [`resolve`] with kops' environment variables of this process and the
/// binaries beside the running `kops`.
pub async fn resolve_from_environment(
    registry: &Registry,
    cluster: &Cluster,
    groups: &[InstanceGroup],
) -> Result<NodeupPlan, OpsError> {
    let env = NodeupEnv::from_lookup(|name| std::env::var(name).ok());
    resolve(
        registry,
        cluster,
        groups,
        &env,
        kops_binary_dir().as_deref(),
    )
    .await
}

/// A group runs an architecture no nodeup is available for.
fn missing(group: &str, arch: Arch, kops_dir: Option<&Path>) -> OpsError {
    let a = arch.as_str();
    let upper = a.to_ascii_uppercase();
    let dir = kops_dir
        .map(|d| format!("`{}`", d.display()))
        .unwrap_or_else(|| "the kops binary's directory".into());
    error(
        format!("instance group `{group}`"),
        format!(
            "its instances are linux/{a} and no nodeup is available for linux/{a}: \
             no `nodeup-linux-{a}` in {dir}, no NODEUP_URL_{upper}, no KOPS_BASE_URL"
        ),
        format!(
            "put the release's `nodeup-linux-{a}` beside `kops` (update uploads it to the state store), \
             or set NODEUP_URL_{upper} (with NODEUP_HASH_{upper}) or KOPS_BASE_URL"
        ),
    )
}

impl NodeupPlan {
    /// Uploads the binaries shipped beside `kops` to the state store (only
    /// those not there yet: the keys are content-addressed). Returns the
    /// URLs written.
    pub async fn upload(&self, registry: &Registry) -> Result<Vec<String>, OpsError> {
        let store_error = |e: kops_state::StoreError| OpsError::Registry(e.into());
        let mut written = Vec::new();
        for upload in &self.uploads {
            let (dir, _) = upload.key.rsplit_once('/').unwrap_or(("", &upload.key));
            let present = registry
                .store()
                .list(&format!("{dir}/"))
                .await
                .map_err(store_error)?
                .contains(&upload.key);
            if present {
                continue;
            }
            tracing::info!(
                "uploading {} to {}",
                upload.path.display(),
                registry.store().url_of(&upload.key)
            );
            registry
                .store()
                .write(&upload.key, &upload.bytes, WriteOptions::default())
                .await
                .map_err(store_error)?;
            written.push(registry.store().url_of(&upload.key));
        }
        Ok(written)
    }
}

/// The sha256 published beside a nodeup URL (`<url>.sha256`), as kops reads
/// it when no hash is given. `s3://` and `file://` are read through the
/// state-store backends (with the caller's AWS credentials); `http(s)://`
/// with `curl`.
async fn fetch_sha256(url: &str, variable: &str, arch: Arch) -> Result<String, OpsError> {
    let hash_url = format!("{url}.sha256");
    let hash_variable = NodeupEnv::variable("HASH", arch);
    read_sha256(url).await.map_err(|reason| {
        error(
            variable.to_string(),
            format!("no sha256 for nodeup at `{url}`: cannot read `{hash_url}`: {reason}"),
            format!("publish `{hash_url}` beside the binary, or set {hash_variable} to its sha256"),
        )
    })
}

/// The sha256 in `<url>.sha256`, or why it cannot be read.
async fn read_sha256(url: &str) -> Result<String, String> {
    let hash_url = format!("{url}.sha256");
    let text = if url.starts_with("s3://") || url.starts_with("file://") {
        let (dir, name) = hash_url.rsplit_once('/').ok_or("not a URL with a path")?;
        let store = kops_state::open(dir).await.map_err(|e| e.to_string())?;
        match store.read(name).await.map_err(|e| e.to_string())? {
            Some(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            None => return Err("it does not exist".into()),
        }
    } else if url.starts_with("https://") || url.starts_with("http://") {
        let output = tokio::process::Command::new("curl")
            .args(["-fsSL", "--max-time", "60", "--retry", "3", &hash_url])
            .output()
            .await
            .map_err(|e| format!("cannot run curl: {e}"))?;
        if !output.status.success() {
            return Err(String::from_utf8_lossy(&output.stderr).trim().to_string());
        }
        String::from_utf8_lossy(&output.stdout).into_owned()
    } else {
        return Err("kops-rs reads s3://, file:// and http(s):// URLs".into());
    };
    bootstrap::parse_sha256_file(&text)
        .ok_or_else(|| "it does not start with a sha256 (64 hex digits)".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_binaries_by_name_then_plain_for_the_host() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(local_nodeup(dir.path(), Arch::Arm64), None);
        std::fs::write(dir.path().join("nodeup"), b"x").unwrap();
        let host = Arch::host().unwrap();
        let other = if host == Arch::Amd64 {
            Arch::Arm64
        } else {
            Arch::Amd64
        };
        assert_eq!(
            local_nodeup(dir.path(), host),
            Some(dir.path().join("nodeup"))
        );
        assert_eq!(local_nodeup(dir.path(), other), None);
        let named = dir.path().join(format!("nodeup-linux-{}", other.as_str()));
        std::fs::write(&named, b"y").unwrap();
        assert_eq!(local_nodeup(dir.path(), other), Some(named));
    }

    #[tokio::test]
    async fn hash_files_beside_a_url() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("file://{}/nodeup", dir.path().display());
        let err = fetch_sha256(&url, "KOPS_BASE_URL", Arch::Amd64)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("nodeup.sha256") && err.contains("NODEUP_HASH_AMD64"),
            "{err}"
        );
        let hash = "ab".repeat(32);
        std::fs::write(
            dir.path().join("nodeup.sha256"),
            format!("{hash}  nodeup\n"),
        )
        .unwrap();
        assert_eq!(
            fetch_sha256(&url, "KOPS_BASE_URL", Arch::Amd64)
                .await
                .unwrap(),
            hash
        );
        std::fs::write(dir.path().join("nodeup.sha256"), "not a hash").unwrap();
        assert!(fetch_sha256(&url, "KOPS_BASE_URL", Arch::Amd64)
            .await
            .is_err());
    }
}

#[cfg(test)]
mod base_url_image_tests {
    use super::*;

    fn groups(yaml: &str) -> Vec<InstanceGroup> {
        kops_api::parse_objects("test.yaml", yaml)
            .unwrap()
            .into_iter()
            .filter_map(|o| match o {
                kops_api::Object::InstanceGroup(g) => Some(*g),
                _ => None,
            })
            .collect()
    }

    #[tokio::test]
    async fn kops_images_with_their_published_hashes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("images")).unwrap();
        let base = format!("file://{}/", dir.path().display());
        let groups = groups(
            "apiVersion: kops.k8s.io/v1alpha2\nkind: InstanceGroup\nmetadata: {name: cp}\n\
             spec: {role: Master, machineType: t3.medium, subnets: [a]}\n",
        );
        let publish = |name: &str, arch: &str, hash: &str| {
            std::fs::write(
                dir.path()
                    .join(format!("images/{name}-{arch}.tar.gz.sha256")),
                format!("{hash}  {name}-{arch}.tar.gz\n"),
            )
            .unwrap();
        };
        for (i, name) in BASE_URL_IMAGES.iter().enumerate() {
            publish(name, "amd64", &format!("{i}").repeat(64));
        }
        // arm64 runs no control plane here: best effort, left out.
        let images = base_url_images(&base, &groups).await.unwrap();
        assert_eq!(images.len(), 4);
        assert_eq!(images[0].name, "kops-controller");
        assert_eq!(images[0].arch, Arch::Amd64);
        assert_eq!(
            images[0].url,
            format!(
                "file://{}/images/kops-controller-amd64.tar.gz",
                dir.path().display()
            )
        );
        assert_eq!(images[3].sha256, "3".repeat(64));
        for name in BASE_URL_IMAGES {
            publish(name, "arm64", &"a".repeat(64));
        }
        assert_eq!(base_url_images(&base, &groups).await.unwrap().len(), 8);

        // A missing hash for an architecture the control plane runs stops
        // the update, as kops stops.
        std::fs::remove_file(dir.path().join("images/dns-controller-amd64.tar.gz.sha256")).unwrap();
        let err = base_url_images(&base, &groups)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("images/dns-controller-amd64.tar.gz.sha256")
                && err.contains("KOPS_BASE_URL"),
            "{err}"
        );
    }
}
