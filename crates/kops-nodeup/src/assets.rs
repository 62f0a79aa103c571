//! The files a node downloads (kubelet, kubectl, containerd, runc, the CNI
//! plugins, the ECR credential provider), where from, and their sha256.
//!
//! A hash is resolved in this order: the table compiled into this crate
//! ([`crate::known_hashes`]), then a hash the spec gives explicitly
//! (`spec.containerd.packages.hashAmd64`, `spec.containerd.runc.packages...`).
//! Nothing is ever guessed: an asset without a hash is a
//! [`AssetError::UnknownHash`] naming the asset, its version and the fix.
//!
//! `spec.assets.fileRepository` redirects every download to a mirror: the
//! canonical URL's path is appended to the repository (as kops does), and
//! the hash stays the canonical file's.

use std::fmt;

use kops_api::version::KubernetesVersion;
use kops_api::Cluster;

use crate::known_hashes::KNOWN_HASHES;

/// containerd version kops-rs installs when the spec names none.
pub const DEFAULT_CONTAINERD_VERSION: &str = "2.3.4";
/// runc version installed beside the default containerd.
pub const DEFAULT_RUNC_VERSION: &str = "1.4.3";
/// ECR credential provider version (kubelet image-credential plugin on AWS).
pub const ECR_CREDENTIAL_PROVIDER_VERSION: &str = "v1.31.7";
/// Google Cloud's kubelet image-credential plugin: the cloud-provider-gcp
/// release kops pins.
pub const GCP_AUTH_PROVIDER_VERSION: &str = "v35.0.0";

/// CPU architectures nodes may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Arch {
    Amd64,
    Arm64,
}

impl Arch {
    pub const ALL: [Arch; 2] = [Arch::Amd64, Arch::Arm64];

    pub fn as_str(self) -> &'static str {
        match self {
            Arch::Amd64 => "amd64",
            Arch::Arm64 => "arm64",
        }
    }

    pub fn parse(text: &str) -> Option<Arch> {
        match text {
            "amd64" | "x86_64" => Some(Arch::Amd64),
            "arm64" | "aarch64" => Some(Arch::Arm64),
            _ => None,
        }
    }

    /// The architecture of the running machine, if it is one nodes run on.
    pub fn host() -> Option<Arch> {
        Arch::parse(std::env::consts::ARCH)
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What an asset is, which decides how nodeup installs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AssetKind {
    Kubelet,
    Kubectl,
    EcrCredentialProvider,
    /// The kubelet's image credential provider on Google Cloud.
    GcpAuthProvider,
    CniPlugins,
    Containerd,
    Runc,
}

impl AssetKind {
    pub fn as_str(self) -> &'static str {
        match self {
            AssetKind::Kubelet => "kubelet",
            AssetKind::Kubectl => "kubectl",
            AssetKind::EcrCredentialProvider => "ecr-credential-provider",
            AssetKind::GcpAuthProvider => "auth-provider-gcp",
            AssetKind::CniPlugins => "cni-plugins",
            AssetKind::Containerd => "containerd",
            AssetKind::Runc => "runc",
        }
    }

    /// Recognises an asset from its URL's file name.
    pub fn from_url(url: &str) -> Option<AssetKind> {
        let file = url.rsplit('/').next().unwrap_or(url);
        if file == "kubelet" {
            Some(AssetKind::Kubelet)
        } else if file == "kubectl" {
            Some(AssetKind::Kubectl)
        } else if file.starts_with("ecr-credential-provider") {
            Some(AssetKind::EcrCredentialProvider)
        } else if file == "auth-provider-gcp" {
            Some(AssetKind::GcpAuthProvider)
        } else if file.starts_with("cni-plugins") {
            Some(AssetKind::CniPlugins)
        } else if file.starts_with("containerd") && file.ends_with(".tar.gz") {
            Some(AssetKind::Containerd)
        } else if file.starts_with("runc") {
            Some(AssetKind::Runc)
        } else {
            None
        }
    }
}

/// One downloadable file: `sha256@url[,url...]` in the node config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asset {
    pub sha256: String,
    /// Where to download it, in order (the mirror first when there is one).
    pub urls: Vec<String>,
}

impl Asset {
    /// The `sha256@url,url` form kops writes.
    pub fn compact(&self) -> String {
        format!("{}@{}", self.sha256, self.urls.join(","))
    }

    /// Parses the `sha256@url[,url...]` form.
    pub fn parse(text: &str) -> Result<Asset, AssetError> {
        let bad = |reason: &str| AssetError::Malformed {
            text: text.to_string(),
            reason: reason.to_string(),
        };
        let (hash, urls) = text
            .split_once('@')
            .ok_or_else(|| bad("it has no `@` between the hash and the URL"))?;
        if !is_sha256_hex(hash) {
            return Err(bad("the part before `@` is not a sha256 (64 hex digits)"));
        }
        let urls: Vec<String> = urls
            .split(',')
            .filter(|u| !u.is_empty())
            .map(str::to_string)
            .collect();
        if urls.is_empty() {
            return Err(bad("it names no URL"));
        }
        Ok(Asset {
            sha256: hash.to_ascii_lowercase(),
            urls,
        })
    }

    /// The file name the asset is saved as (the last path segment).
    pub fn file_name(&self) -> &str {
        let url = self.urls.first().map(String::as_str).unwrap_or_default();
        url.rsplit('/').next().unwrap_or(url)
    }

    pub fn kind(&self) -> Option<AssetKind> {
        self.urls.first().and_then(|u| AssetKind::from_url(u))
    }
}

/// True for 64 hex digits.
pub fn is_sha256_hex(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Why the asset list cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AssetError {
    #[error("no sha256 is known for {asset} {version} ({arch}) at `{url}`\nhint: {hint}")]
    UnknownHash {
        asset: String,
        version: String,
        arch: String,
        url: String,
        hint: String,
    },
    #[error("`{text}` is not an asset (`sha256@url`): {reason}")]
    Malformed { text: String, reason: String },
    #[error("`{value}` in `{field}` is not a sha256 (64 hex digits)\nhint: give the hex sha256 of the file, as `sha256sum` prints it")]
    BadExplicitHash { field: String, value: String },
    #[error("`spec.kubernetesVersion` `{version}` is not a Kubernetes version\nhint: set it to a release such as `v1.34.10`")]
    BadKubernetesVersion { version: String },
    #[error("`spec.assets.fileRepository` `{value}` is not an http(s) URL\nhint: set it to the base URL of your file mirror, e.g. `https://mirror.example.com/files`")]
    BadFileRepository { value: String },
}

/// The sha256 the compiled table has for a canonical URL.
pub fn known_hash(url: &str) -> Option<&'static str> {
    KNOWN_HASHES
        .binary_search_by(|(u, _)| u.cmp(&url))
        .ok()
        .map(|i| KNOWN_HASHES[i].1)
}

/// The download URL for a canonical URL: on the mirror when the cluster
/// has `spec.assets.fileRepository` (the canonical path appended to it).
pub fn remap_url(cluster: &Cluster, canonical: &str) -> Result<String, AssetError> {
    let Some(repo) = file_repository(cluster)? else {
        return Ok(canonical.to_string());
    };
    let path = canonical
        .split_once("://")
        .and_then(|(_, rest)| rest.split_once('/'))
        .map(|(_, path)| path)
        .unwrap_or_default();
    Ok(format!(
        "{}/{}",
        repo.trim_end_matches('/'),
        path.replace(',', "%2C")
    ))
}

/// `spec.assets.fileRepository`, checked.
pub fn file_repository(cluster: &Cluster) -> Result<Option<&str>, AssetError> {
    let Some(repo) = cluster
        .spec
        .assets
        .as_ref()
        .and_then(|a| a.file_repository.as_deref())
        .filter(|r| !r.is_empty())
    else {
        return Ok(None);
    };
    if !(repo.starts_with("https://") || repo.starts_with("http://")) {
        return Err(AssetError::BadFileRepository {
            value: repo.to_string(),
        });
    }
    Ok(Some(repo))
}

/// The cluster's Kubernetes version; kops-rs' recommended release when the
/// spec names none (as `create cluster` would have filled in).
pub fn kubernetes_version(cluster: &Cluster) -> Result<KubernetesVersion, AssetError> {
    let Some(text) = cluster
        .spec
        .kubernetes_version
        .as_deref()
        .filter(|t| !t.is_empty())
    else {
        return Ok(kops_api::version::recommended(None));
    };
    KubernetesVersion::parse(text).ok_or_else(|| AssetError::BadKubernetesVersion {
        version: text.to_string(),
    })
}

/// The CNI plugins release kops pairs with a Kubernetes minor.
pub fn cni_version(k8s: &KubernetesVersion) -> &'static str {
    match k8s.minor {
        m if m >= 36 => "v1.9.1",
        35 => "v1.8.0",
        34 => "v1.7.1",
        _ => "v1.6.2",
    }
}

fn string_at<'a>(value: Option<&'a serde_json::Value>, path: &[&str]) -> Option<&'a str> {
    let mut v = value?;
    for key in path {
        v = v.get(key)?;
    }
    v.as_str().filter(|s| !s.is_empty())
}

/// containerd and runc versions and any explicit packages from the spec.
struct RuntimeChoice {
    containerd_version: String,
    runc_version: String,
}

fn runtime_choice(cluster: &Cluster) -> RuntimeChoice {
    let containerd = cluster.spec.containerd.as_ref();
    let runc = containerd.and_then(|c| c.extra.get("runc"));
    RuntimeChoice {
        containerd_version: containerd
            .and_then(|c| c.version.clone())
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| DEFAULT_CONTAINERD_VERSION.to_string()),
        runc_version: string_at(runc, &["version"])
            .unwrap_or(DEFAULT_RUNC_VERSION)
            .to_string(),
    }
}

/// The containerd and runc versions the node config names.
pub fn runtime_versions(cluster: &Cluster) -> (String, String) {
    let r = runtime_choice(cluster);
    (r.containerd_version, r.runc_version)
}

/// The assets of one architecture, in kops' order: kubelet, kubectl,
/// the cloud's image credential provider (AWS: ecr-credential-provider,
/// Google Cloud: auth-provider-gcp), CNI plugins, containerd, runc.
pub fn node_assets(cluster: &Cluster, arch: Arch) -> Result<Vec<Asset>, AssetError> {
    let k8s = kubernetes_version(cluster)?;
    let version = k8s.to_string();
    let a = arch.as_str();
    let mut out = Vec::new();
    let mut add = |kind: AssetKind,
                   version: &str,
                   canonical: String,
                   explicit: Option<(&str, &str)>|
     -> Result<(), AssetError> {
        // An explicit package (URL and hash from the spec) replaces the
        // canonical file.
        if let Some((url, hash)) = explicit {
            if !is_sha256_hex(hash) {
                return Err(AssetError::BadExplicitHash {
                    field: format!("spec.containerd...hash{}", capitalised(a)),
                    value: hash.to_string(),
                });
            }
            out.push(Asset {
                sha256: hash.to_ascii_lowercase(),
                urls: vec![url.to_string()],
            });
            return Ok(());
        }
        let Some(hash) = known_hash(&canonical) else {
            return Err(AssetError::UnknownHash {
                asset: kind.as_str().to_string(),
                version: version.to_string(),
                arch: a.to_string(),
                url: canonical,
                hint: hint_for(kind),
            });
        };
        out.push(Asset {
            sha256: hash.to_string(),
            urls: vec![remap_url(cluster, &canonical)?],
        });
        Ok(())
    };

    add(
        AssetKind::Kubelet,
        &version,
        format!("https://dl.k8s.io/release/{version}/bin/linux/{a}/kubelet"),
        None,
    )?;
    add(
        AssetKind::Kubectl,
        &version,
        format!("https://dl.k8s.io/release/{version}/bin/linux/{a}/kubectl"),
        None,
    )?;
    if cluster.spec.cloud_provider.as_deref() == Some("aws") {
        let v = ECR_CREDENTIAL_PROVIDER_VERSION;
        add(
            AssetKind::EcrCredentialProvider,
            v,
            format!("https://artifacts.k8s.io/binaries/cloud-provider-aws/{v}/linux/{a}/ecr-credential-provider-linux-{a}"),
            None,
        )?;
    }
    if cluster.spec.cloud_provider.as_deref() == Some("gce") {
        let v = GCP_AUTH_PROVIDER_VERSION;
        add(
            AssetKind::GcpAuthProvider,
            v,
            format!("https://artifacts.k8s.io/binaries/cloud-provider-gcp/{v}/auth-provider-gcp/linux/{a}/auth-provider-gcp"),
            None,
        )?;
    }
    let cni = cni_version(&k8s);
    add(
        AssetKind::CniPlugins,
        cni,
        format!("https://github.com/containernetworking/plugins/releases/download/{cni}/cni-plugins-linux-{a}-{cni}.tgz"),
        None,
    )?;

    let runtime = runtime_choice(cluster);
    let containerd = cluster.spec.containerd.as_ref();
    let packages = containerd.and_then(|c| c.packages.as_ref());
    let explicit_containerd = match arch {
        Arch::Amd64 => packages.and_then(|p| p.url_amd64.as_deref().zip(p.hash_amd64.as_deref())),
        Arch::Arm64 => packages.and_then(|p| p.url_arm64.as_deref().zip(p.hash_arm64.as_deref())),
    };
    let cv = &runtime.containerd_version;
    add(
        AssetKind::Containerd,
        cv,
        format!("https://github.com/containerd/containerd/releases/download/v{cv}/containerd-{cv}-linux-{a}.tar.gz"),
        explicit_containerd,
    )?;
    let runc = containerd.and_then(|c| c.extra.get("runc"));
    let key = capitalised(a);
    let explicit_runc = string_at(runc, &["packages", &format!("url{key}")])
        .zip(string_at(runc, &["packages", &format!("hash{key}")]));
    let rv = &runtime.runc_version;
    add(
        AssetKind::Runc,
        rv,
        format!("https://github.com/opencontainers/runc/releases/download/v{rv}/runc.{a}"),
        explicit_runc,
    )?;
    Ok(out)
}

fn capitalised(arch: &str) -> String {
    let mut c = arch.chars();
    match c.next() {
        Some(f) => f.to_ascii_uppercase().to_string() + c.as_str(),
        None => String::new(),
    }
}

fn hint_for(kind: AssetKind) -> String {
    match kind {
        AssetKind::Kubelet | AssetKind::Kubectl => "kops-rs pins the hashes of the Kubernetes v1.32-v1.36 releases; set `spec.kubernetesVersion` to one of them (e.g. `v1.34.10`)".into(),
        AssetKind::Containerd => "set `spec.containerd.version` to a known release (e.g. `2.3.4`), or give the file and its hash in `spec.containerd.packages` (`urlAmd64`/`hashAmd64`, `urlArm64`/`hashArm64`)".into(),
        AssetKind::Runc => "set `spec.containerd.runc.version` to a known release (e.g. `1.4.3`), or give the file and its hash in `spec.containerd.runc.packages` (`urlAmd64`/`hashAmd64`, `urlArm64`/`hashArm64`)".into(),
        AssetKind::CniPlugins
        | AssetKind::EcrCredentialProvider
        | AssetKind::GcpAuthProvider => "this kops-rs does not know that release's hash; use a supported Kubernetes version".into(),
    }
}

/// The nodeup binary for one architecture: mirrors in order and, when
/// known, its sha256.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeupBinary {
    pub arch: Arch,
    pub urls: Vec<String>,
    pub sha256: Option<String>,
}

/// Where nodes download nodeup from, decided by `update cluster` (kops-ops:
/// kops' environment variables, or the binaries shipped beside `kops` and
/// uploaded to the state store) and handed to the renderer, which reads no
/// environment. Each binary is pinned by its sha256.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeupSources {
    /// One entry per architecture nodeup is available for.
    pub binaries: Vec<NodeupBinary>,
    /// The state-store folder (`s3://bucket/.../<cluster>/kops-rs/nodeup/`)
    /// the uploaded binaries live under, when they live in the state store:
    /// the node role gets read access to exactly this prefix.
    pub state_store_prefix: Option<String>,
}

impl NodeupSources {
    /// The binary for `arch`, if one is available.
    pub fn binary(&self, arch: Arch) -> Option<&NodeupBinary> {
        self.binaries.iter().find(|b| b.arch == arch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_and_well_formed() {
        for w in KNOWN_HASHES.windows(2) {
            assert!(w[0].0 < w[1].0, "{} !< {}", w[0].0, w[1].0);
        }
        assert!(KNOWN_HASHES.iter().all(|(_, h)| is_sha256_hex(h)));
    }

    #[test]
    fn asset_round_trip() {
        let text = "5c0d28cea2a3a5c91861dda088a29d56c1b027e184dae1d792686f0710750076@https://a/x,https://b/x";
        let a = Asset::parse(text).unwrap();
        assert_eq!(a.urls.len(), 2);
        assert_eq!(a.compact(), text);
        assert_eq!(a.file_name(), "x");
        assert!(Asset::parse("nohash@https://a").is_err());
        assert!(Asset::parse("https://a").is_err());
    }
}
