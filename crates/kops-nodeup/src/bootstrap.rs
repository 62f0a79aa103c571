//! What an instance runs at first boot: the boot config (kops'
//! `BootConfig`, written to `/opt/kops/conf/kube_env.yaml`) and the user-data
//! script that downloads `nodeup`, checks it, writes the boot config and
//! runs nodeup.
//!
//! The script is kops' own, byte for byte for the same nodeup URLs, hashes
//! and boot config, so kops and kops-rs see no change in each other's launch
//! templates. kops-rs' nodeup (kops-rs' nodeup accepts kops' flags) is
//! downloaded from `spec.assets.fileRepository` first (when set), then the
//! project's release location, or from the state store where `update`
//! uploaded it; those are plain binaries, which the script then downloads
//! without kops' `.xz` step (see [`render_script_with`]).

use kops_api::{Cluster, InstanceGroup, Role};
use serde::{Deserialize, Serialize};

use crate::assets::{self, Arch};
use crate::config::{self, ConfigError};

/// The kops-rs version whose nodeup the user data downloads.
pub const NODEUP_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Where kops-rs releases are published (the workspace's repository).
pub const RELEASE_BASE: &str = env!("CARGO_PKG_REPOSITORY");

/// sha256 of published nodeup binaries: `(version, arch, sha256)`.
/// Empty until kops-rs publishes a release.
pub const KNOWN_NODEUP_HASHES: &[(&str, &str, &str)] = &[];

/// Where the boot config is written on the instance.
pub const BOOT_CONFIG_PATH: &str = "/opt/kops/conf/kube_env.yaml";

/// kops' `BootConfig` (`kube_env.yaml`): what nodeup needs to find the rest.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BootConfig {
    #[serde(rename = "CloudProvider", default)]
    pub cloud_provider: String,
    #[serde(
        rename = "ClusterName",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub cluster_name: String,
    /// The cluster's directory in the state store.
    #[serde(
        rename = "ConfigBase",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub config_base: Option<String>,
    /// Where workers get their config and certificates instead of the
    /// state store: kops-controller (kops' `ConfigServer`).
    #[serde(
        rename = "ConfigServer",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub config_server: Option<ConfigServer>,
    /// The control plane's addresses a worker reaches it at when the
    /// cluster publishes no DNS names (kops' `APIServerIPs`): nodeup points
    /// `api.internal.<cluster>` and `kops-controller.internal.<cluster>` at
    /// them in `/etc/hosts`.
    #[serde(
        rename = "APIServerIPs",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub api_server_ips: Vec<String>,
    #[serde(
        rename = "InstanceGroupName",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub instance_group_name: String,
    /// `ControlPlane`, `Node` or `APIServer`.
    #[serde(rename = "InstanceGroupRole", default)]
    pub instance_group_role: String,
    /// base64 sha256 of the stored node config.
    #[serde(rename = "NodeupConfigHash", default)]
    pub nodeup_config_hash: String,
    #[serde(flatten)]
    pub extra: config::Settings,
}

/// kops' `ConfigServerOptions`: the kops-controllers a worker asks, and the
/// CA certificates it trusts them with (the cluster's `kubernetes-ca`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ConfigServer {
    #[serde(rename = "CACertificates", default)]
    pub ca_certificates: String,
    #[serde(rename = "servers", default, skip_serializing_if = "Vec::is_empty")]
    pub servers: Vec<String>,
    /// The name to verify the servers' certificate against, when it is not
    /// the URL's host.
    #[serde(
        rename = "tlsServerName",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub tls_server_name: String,
}

/// kops-controller's port on the control plane (and on the API load
/// balancer of a cluster without DNS).
pub const KOPS_CONTROLLER_PORT: u16 = 3988;

/// The kops-controller URL workers use: `https://kops-controller.internal.<cluster>:3988/`.
pub fn kops_controller_url(cluster: &str) -> String {
    format!("https://kops-controller.internal.{cluster}:{KOPS_CONTROLLER_PORT}/")
}

/// Where a worker finds kops-controller. A cluster without DNS names
/// (`dns: None`) exposes it on the API load balancer: the worker asks the
/// balancer's addresses that `control_plane_ips` selects and verifies the
/// certificate against `kops-controller.internal.<cluster>`; otherwise it
/// asks that name.
pub fn config_server_for(
    cluster: &str,
    ca_certificates: String,
    control_plane_ips: &[String],
) -> ConfigServer {
    if control_plane_ips.is_empty() {
        return ConfigServer {
            ca_certificates,
            servers: vec![kops_controller_url(cluster)],
            tls_server_name: String::new(),
        };
    }
    ConfigServer {
        ca_certificates,
        servers: control_plane_ips
            .iter()
            .map(|ip| match ip.parse::<std::net::IpAddr>() {
                Ok(std::net::IpAddr::V6(v6)) => format!("https://[{v6}]:{KOPS_CONTROLLER_PORT}/"),
                _ => format!("https://{ip}:{KOPS_CONTROLLER_PORT}/"),
            })
            .collect(),
        tls_server_name: format!("kops-controller.internal.{cluster}"),
    }
}

/// The API load balancer's addresses a node of the cluster can reach (kops'
/// selection): the IPv4 addresses inside the network CIDR or one of the
/// additional network CIDRs, and every IPv6 address (once per CIDR tried,
/// as kops lists them); never an IPv4 address in an IPv6-only cluster.
/// Names and public addresses are left out.
pub fn control_plane_ips(cluster: &Cluster, addresses: &[String]) -> Vec<String> {
    let spec = &cluster.spec;
    // On vSphere the address is the control plane's virtual IP, which the
    // user chose (no load balancer's addresses to select from).
    if spec.cloud_provider.as_deref() == Some("vsphere") {
        return addresses
            .iter()
            .filter(|a| a.parse::<std::net::IpAddr>().is_ok())
            .cloned()
            .collect();
    }
    // On Google subnets have ranges and networks do not: the internal
    // balancer's addresses, those inside a subnet of the cluster.
    if spec.cloud_provider.as_deref() == Some("gce") {
        let subnets: Vec<ipnet::IpNet> = spec
            .subnets
            .iter()
            .flatten()
            .filter_map(|s| s.cidr.as_deref()?.parse().ok())
            .collect();
        let mut out = Vec::new();
        for address in addresses {
            let Ok(ip) = address.parse::<std::net::IpAddr>() else {
                continue;
            };
            out.extend(
                subnets
                    .iter()
                    .filter(|cidr| cidr.contains(&ip))
                    .map(|_| address.clone()),
            );
        }
        return out;
    }
    let ipv6_only = spec
        .non_masquerade_cidr
        .as_deref()
        .is_some_and(|c| c.contains(':'));
    let cidrs: Vec<ipnet::IpNet> = spec
        .additional_network_cidrs
        .iter()
        .flatten()
        .chain(spec.network_cidr.iter())
        .filter_map(|c| c.parse().ok())
        .collect();
    let mut out = Vec::new();
    for address in addresses {
        let Ok(ip) = address.parse::<std::net::IpAddr>() else {
            continue;
        };
        if ipv6_only && ip.is_ipv4() {
            continue;
        }
        for cidr in &cidrs {
            if ip.is_ipv6() || cidr.contains(&ip) {
                out.push(address.clone());
            }
        }
    }
    out
}

impl BootConfig {
    /// The role as kops-rs knows it.
    pub fn role(&self) -> Option<Role> {
        match self.instance_group_role.as_str() {
            "ControlPlane" | "Master" => Some(Role::ControlPlane),
            "Node" => Some(Role::Node),
            "APIServer" => Some(Role::ApiServer),
            "Bastion" => Some(Role::Bastion),
            _ => None,
        }
    }

    /// The YAML kops writes: keys sorted (kops marshals through JSON),
    /// empty optional fields left out.
    pub fn to_yaml(&self) -> String {
        let Ok(value) = serde_yaml_ng::to_value(self) else {
            return String::new();
        };
        let value = match value {
            serde_yaml_ng::Value::Mapping(map) => {
                let mut entries: Vec<_> = map.into_iter().collect();
                entries.sort_by(|(a, _), (b, _)| a.as_str().cmp(&b.as_str()));
                serde_yaml_ng::Value::Mapping(entries.into_iter().collect())
            }
            other => other,
        };
        serde_yaml_ng::to_string(&value).unwrap_or_default()
    }

    pub fn parse(text: &str) -> Result<BootConfig, String> {
        serde_yaml_ng::from_str(text).map_err(|e| e.to_string())
    }
}

/// kops' spelling of a role in the boot config.
pub fn role_name(role: Role) -> &'static str {
    match role {
        Role::ControlPlane => "ControlPlane",
        Role::Node => "Node",
        Role::ApiServer => "APIServer",
        Role::Bastion => "Bastion",
    }
}

// Where nodeup comes from sits with the other downloads, below both the
// boot script and the node config; named here as well for callers.
pub use crate::assets::{NodeupBinary, NodeupSources};

/// kops' environment variables that say where nodeup is, read by the caller
/// (`update`, `render`) and passed in. Empty values count as unset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeupEnv {
    /// `KOPS_BASE_URL`: nodeup is at `<base>/linux/<arch>/nodeup`.
    pub kops_base_url: Option<String>,
    /// `NODEUP_URL_AMD64` / `NODEUP_URL_ARM64`: nodeup for one architecture.
    pub url_amd64: Option<String>,
    pub url_arm64: Option<String>,
    /// `NODEUP_HASH_AMD64` / `NODEUP_HASH_ARM64`: its sha256 (hex).
    pub hash_amd64: Option<String>,
    pub hash_arm64: Option<String>,
}

/// Where nodeup comes from for one architecture according to [`NodeupEnv`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvNodeup {
    pub url: String,
    /// The variable the URL came from, for messages.
    pub url_variable: String,
    /// The pinned sha256; `None`: read it from `<url>.sha256`, as kops does.
    pub sha256: Option<String>,
}

impl NodeupEnv {
    /// The variables, from a look-up such as `std::env::var`.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let get = |name: &str| {
            lookup(name)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        NodeupEnv {
            kops_base_url: get("KOPS_BASE_URL"),
            url_amd64: get("NODEUP_URL_AMD64"),
            url_arm64: get("NODEUP_URL_ARM64"),
            hash_amd64: get("NODEUP_HASH_AMD64"),
            hash_arm64: get("NODEUP_HASH_ARM64"),
        }
    }

    /// The name of an architecture's variable (`NODEUP_URL_AMD64`, ...).
    pub fn variable(kind: &str, arch: Arch) -> String {
        format!("NODEUP_{kind}_{}", arch.as_str().to_ascii_uppercase())
    }

    /// nodeup for `arch`: `NODEUP_URL_<ARCH>` first, then `KOPS_BASE_URL`
    /// (kops joins `linux/<arch>/nodeup` to the base's path); the hash from
    /// `NODEUP_HASH_<ARCH>` when set. `None` when neither variable is set.
    pub fn nodeup(&self, arch: Arch) -> Option<EnvNodeup> {
        let (url, hash) = match arch {
            Arch::Amd64 => (&self.url_amd64, &self.hash_amd64),
            Arch::Arm64 => (&self.url_arm64, &self.hash_arm64),
        };
        let (url, url_variable) = match (url, &self.kops_base_url) {
            (Some(url), _) => (url.clone(), Self::variable("URL", arch)),
            (None, Some(base)) => (
                format!(
                    "{}/linux/{}/nodeup",
                    base.trim_end_matches('/'),
                    arch.as_str()
                ),
                "KOPS_BASE_URL".to_string(),
            ),
            (None, None) => return None,
        };
        Some(EnvNodeup {
            url,
            url_variable,
            sha256: hash.as_ref().map(|h| h.to_ascii_lowercase()),
        })
    }
}

/// Whether `text` is a sha256 as nodes compare it (64 hex digits).
pub fn is_sha256(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The sha256 in a `.sha256` file: its first word (kops' files hold only
/// the hash; `sha256sum` output adds the file name).
pub fn parse_sha256_file(text: &str) -> Option<String> {
    let word = text.split_whitespace().next()?;
    is_sha256(word).then(|| word.to_ascii_lowercase())
}

/// The sha256 of `bytes`, lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Where `update` uploads a nodeup shipped beside `kops`, relative to the
/// cluster's folder in the state store:
/// `kops-rs/nodeup/<version>/<sha256>/linux/<arch>/nodeup`. Its own folder
/// (kops keeps nothing under `kops-rs/`), versioned, and content-addressed
/// so a rebuilt binary of the same version never replaces the one older
/// launch templates pin.
pub fn nodeup_store_path(version: &str, sha256: &str, arch: Arch) -> String {
    format!(
        "{NODEUP_STORE_DIR}/{version}/{sha256}/linux/{}/nodeup",
        arch.as_str()
    )
}

/// The folder of uploaded nodeup binaries inside the cluster's folder; the
/// node role may read this prefix and nothing else of the state store.
pub const NODEUP_STORE_DIR: &str = "kops-rs/nodeup";

/// The architectures a group's instances run: arm64 when its image names
/// arm64 (or aarch64), else those of its machine types (the group's and
/// its mixed-instances policy's). Bastions and Karpenter-managed groups
/// run no nodeup kops-rs pins, and need none.
pub fn group_architectures(group: &InstanceGroup) -> Vec<Arch> {
    if matches!(group.role(), Some(Role::Bastion) | None)
        || group.spec.manager.as_deref() == Some("Karpenter")
    {
        return Vec::new();
    }
    let image = group.spec.image.as_deref().unwrap_or_default();
    if image.contains("arm64") || image.contains("aarch64") {
        return vec![Arch::Arm64];
    }
    let mut types: Vec<&str> = group.spec.machine_type.iter().map(String::as_str).collect();
    if let Some(policy) = &group.spec.mixed_instances_policy {
        types.extend(policy.instances.iter().flatten().map(String::as_str));
    }
    let mut arches: Vec<Arch> = types
        .into_iter()
        .flat_map(|t| t.split(','))
        .map(
            |t| match kops_api::new_cluster::machine_architecture(t.trim()) {
                kops_api::new_cluster::Architecture::Arm64 => Arch::Arm64,
                kops_api::new_cluster::Architecture::Amd64 => Arch::Amd64,
            },
        )
        .collect();
    if arches.is_empty() {
        arches.push(Arch::Amd64);
    }
    arches.sort();
    arches.dedup();
    arches
}

/// Where nodes download nodeup from, per architecture, when `update` gave
/// no [`NodeupSources`] (tests, previews): the file repository, then the
/// release location.
pub fn nodeup_binaries(cluster: &Cluster) -> Result<Vec<NodeupBinary>, assets::AssetError> {
    let repo = assets::file_repository(cluster)?;
    let mut out = Vec::new();
    for arch in Arch::ALL {
        let a = arch.as_str();
        let mut urls = Vec::new();
        if let Some(repo) = repo {
            urls.push(format!(
                "{}/kops-rs/{NODEUP_VERSION}/linux/{a}/nodeup",
                repo.trim_end_matches('/')
            ));
        }
        urls.push(format!(
            "{}/releases/download/v{NODEUP_VERSION}/nodeup-linux-{a}",
            RELEASE_BASE.trim_end_matches('/')
        ));
        let sha256 = KNOWN_NODEUP_HASHES
            .iter()
            .find(|(v, ar, _)| *v == NODEUP_VERSION && *ar == a)
            .map(|(_, _, h)| h.to_string());
        out.push(NodeupBinary { arch, urls, sha256 });
    }
    Ok(out)
}

/// The region of the cluster (from its first subnet's zone), for
/// `AWS_REGION` on the instance.
fn region(cluster: &Cluster) -> Option<String> {
    cluster.aws_region()
}

/// The boot config of a group whose node config hashes to `hash`.
pub fn boot_config(
    cluster: &Cluster,
    group: &InstanceGroup,
    role: Role,
    config_base: &str,
    hash: &str,
) -> BootConfig {
    BootConfig {
        cloud_provider: cluster
            .spec
            .cloud_provider
            .clone()
            .unwrap_or_else(|| "aws".into()),
        cluster_name: cluster.name().to_string(),
        config_base: Some(config_base.trim_end_matches('/').to_string()),
        config_server: None,
        api_server_ips: Vec::new(),
        instance_group_name: group.name().to_string(),
        instance_group_role: role_name(role).to_string(),
        nodeup_config_hash: hash.to_string(),
        extra: Default::default(),
    }
}

/// The user data of a group's instances: the bootstrap script, or, for a
/// bastion (which runs no nodeup), none (empty) unless the group adds its own.
pub fn user_data(
    cluster: &Cluster,
    group: &InstanceGroup,
    config_base: &str,
) -> Result<String, ConfigError> {
    user_data_with(cluster, group, config_base, &config::NodeInputs::default())
}

/// [`user_data`] with the cluster's keysets and bootstrap choices: when
/// workers bootstrap through kops-controller (`inputs.config_server`), a
/// worker's boot config names kops-controller and carries the cluster CA it
/// trusts it with, and no state store (workers may not read it).
pub fn user_data_with(
    cluster: &Cluster,
    group: &InstanceGroup,
    config_base: &str,
    inputs: &config::NodeInputs,
) -> Result<String, ConfigError> {
    let additional = group
        .spec
        .additional_user_data
        .as_deref()
        .unwrap_or_default();
    let Some(rendered) = config::rendered_with_inputs(cluster, group, config_base, inputs)? else {
        if !additional.is_empty() {
            return Ok(multipart(None, additional));
        }
        // kops gives bastions no user data at all; the same here, so that
        // either tool sees the other's bastion template unchanged.
        return Ok(String::new());
    };
    let mut boot = boot_config(cluster, group, rendered.role, config_base, &rendered.hash);
    if inputs.config_server && rendered.role == Role::Node {
        // Without DNS names, workers reach kops-controller and the API
        // through the API load balancer's addresses (kops' choice).
        if rendered.config.uses_none_dns {
            boot.api_server_ips = control_plane_ips(cluster, &inputs.api_server_addresses);
        }
        boot.config_base = None;
        boot.config_server = Some(config_server_for(
            cluster.name(),
            inputs
                .keysets
                .get("kubernetes-ca")
                .map(|k| k.certificates.clone())
                .unwrap_or_default(),
            &boot.api_server_ips,
        ));
    }
    let binaries = match &inputs.nodeup {
        Some(sources) => sources.binaries.clone(),
        None => nodeup_binaries(cluster).map_err(|source| ConfigError::Asset {
            group: group.name().to_string(),
            source: Box::new(source),
        })?,
    };
    Ok(group_user_data(cluster, group, &binaries, &boot))
}

/// The user data of a (non-bastion) group from its nodeup binaries and boot
/// config: the script, wrapped in a MIME multipart document with the
/// group's `additionalUserData` when it has any. Split from
/// [`user_data_with`] so the output can be compared with kops' for the
/// same nodeup and boot config.
pub fn group_user_data(
    cluster: &Cluster,
    group: &InstanceGroup,
    binaries: &[NodeupBinary],
    boot: &BootConfig,
) -> String {
    let script = render_script_with(binaries, &ScriptOptions::of(cluster, group), boot);
    match group.spec.additional_user_data.as_deref() {
        Some(additional) if !additional.is_empty() => multipart(Some(&script), additional),
        _ => script,
    }
}

/// The MIME multipart document cloud-init reads when a group adds its own
/// user data (`spec.additionalUserData`): the bootstrap script first (as
/// `nodeup.sh`), then each addition in order. Byte for byte what kops
/// writes (Go's multipart writer): CRLF line ends in the MIME framing,
/// headers in sorted order, and no closing delimiter after the explicit one.
pub fn multipart(
    script: Option<&str>,
    additional: &[kops_api::instance_group::UserData],
) -> String {
    const BOUNDARY: &str = "MIMEBOUNDARY";
    let mut out = format!(
        "Content-Type: multipart/mixed; boundary=\"{BOUNDARY}\"\r\nMIME-Version: 1.0\r\n\r\n"
    );
    let mut first = true;
    let mut part = |name: &str, kind: &str, content: &str| {
        if !first {
            out.push_str("\r\n");
        }
        first = false;
        out.push_str(&format!(
            "--{BOUNDARY}\r\nContent-Disposition: attachment; filename=\"{name}\"\r\n\
             Content-Transfer-Encoding: 7bit\r\nContent-Type: {kind}\r\nMime-Version: 1.0\r\n\r\n{content}"
        ));
    };
    if let Some(script) = script {
        part("nodeup.sh", "text/x-shellscript", script);
    }
    for extra in additional {
        part(&extra.name, &extra.kind, &extra.content);
    }
    out.push_str(&format!("\r\n--{BOUNDARY}--\r\n"));
    out
}

/// What the script depends on besides nodeup and the boot config, as kops
/// decides it for a cluster and group.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScriptOptions {
    /// The cluster's cloud (`aws`, ...).
    pub cloud_provider: String,
    /// `export` lines at the top of the script, sorted by name
    /// (`AWS_REGION` on AWS).
    pub environment: Vec<(String, String)>,
    /// kops' egress-proxy set-up lines (empty without `spec.egressProxy`).
    pub proxy_env: String,
    /// `spec.compressUserData`: the boot config travels gzipped and base64
    /// encoded instead of as a heredoc.
    pub compress: bool,
    /// The region to sign s3:// downloads for. kops uses the bucket's
    /// region; kops-rs' state store is in the cluster's region.
    pub s3_region: Option<String>,
}

impl ScriptOptions {
    /// The options kops derives from the cluster and group, with the
    /// `S3_*` variables of this process (see [`ScriptOptions::of_with_env`]).
    pub fn of(cluster: &Cluster, group: &InstanceGroup) -> ScriptOptions {
        Self::of_with_env(cluster, group, &kops_api::env::process_env)
    }

    /// The options kops derives from the cluster and group; `lookup` gives
    /// the variables kops forwards: a control-plane group exports kops'
    /// custom S3 endpoint settings (`S3_ENDPOINT` etc.) so that nodeup
    /// reaches the same state store, sorted with `AWS_REGION`.
    pub fn of_with_env(
        cluster: &Cluster,
        group: &InstanceGroup,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> ScriptOptions {
        let cloud_provider = cluster
            .spec
            .cloud_provider
            .clone()
            .unwrap_or_else(|| "aws".into());
        let region = if cloud_provider == "aws" {
            region(cluster)
        } else {
            None
        };
        let control_plane = matches!(group.role(), Some(Role::ControlPlane));
        let mut environment: Vec<(String, String)> = region
            .iter()
            .map(|r| ("AWS_REGION".to_string(), r.clone()))
            .collect();
        environment.extend(kops_api::env::forwarded_env(
            kops_api::env::EnvTarget::UserData { control_plane },
            None,
            lookup,
        ));
        environment.sort();
        ScriptOptions {
            environment,
            proxy_env: proxy_env(cluster),
            compress: group.spec.compress_user_data == Some(true),
            s3_region: region,
            cloud_provider,
        }
    }
}

/// kops' egress-proxy lines: the proxy in `/etc/environment`, the package
/// manager and systemd's default environment.
fn proxy_env(cluster: &Cluster) -> String {
    let Some(proxy) = cluster.spec.extra.get("egressProxy") else {
        return String::new();
    };
    let http = proxy.get("httpProxy");
    let host = http
        .and_then(|h| h.get("host"))
        .and_then(|h| h.as_str())
        .unwrap_or_default();
    if host.is_empty() {
        return String::new();
    }
    let port = http
        .and_then(|h| h.get("port"))
        .and_then(|p| p.as_i64())
        .unwrap_or(0);
    let excludes = proxy
        .get("excludes")
        .and_then(|e| e.as_str())
        .unwrap_or_default();
    let scheme = if host.starts_with("http://") {
        ""
    } else {
        "http://"
    };
    let url = if port != 0 {
        format!("{scheme}{host}:{port}")
    } else {
        format!("{scheme}{host}")
    };
    format!(
        "{{\n  echo \"http_proxy={url}\"\n  echo \"https_proxy={url}\"\n  echo \"no_proxy={excludes}\"\n  \
         echo \"NO_PROXY={excludes}\"\n}} >> /etc/environment\n\
         while read -r in; do export \"${{in?}}\"; done < /etc/environment\n\
         case $(cat /proc/version) in\n*[Dd]ebian* | *[Uu]buntu*)\n  \
         echo \"Acquire::http::Proxy \\\"{url}\\\";\" > /etc/apt/apt.conf.d/30proxy ;;\n\
         *[Rr]ed[Hh]at*)\n  echo \"proxy={url}\" >> /etc/yum.conf ;;\nesac\n\
         echo \"DefaultEnvironment=\\\"http_proxy={url}\\\" \\\"https_proxy={url}\\\" \
         \\\"NO_PROXY={excludes}\\\" \\\"no_proxy={excludes}\\\"\" >> /etc/systemd/system.conf\n\
         systemctl daemon-reload\nsystemctl daemon-reexec\n"
    )
}

/// Whether `url` is a nodeup kops-rs published itself (uploaded to the
/// state store, in a file repository's `kops-rs/` folder, or a kops-rs
/// release): those are plain binaries, while kops' mirrors (`KOPS_BASE_URL`,
/// `NODEUP_URL_*`) serve `<url>.xz`, which kops' script downloads.
pub fn is_plain_binary(url: &str) -> bool {
    url.contains("/kops-rs/") || url.starts_with(RELEASE_BASE.trim_end_matches('/'))
}

/// An s3:// URL with its key escaped for a SigV4-signed request path, as
/// kops escapes it (everything but unreserved characters and `/`).
fn escape_s3(url: &str) -> String {
    let Some(rest) = url.strip_prefix("s3://") else {
        return url.to_string();
    };
    let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
    let mut out = format!("s3://{bucket}/");
    for b in key.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Renders the bootstrap script with only an AWS region known (no proxy,
/// no compression).
pub fn render_script(binaries: &[NodeupBinary], region: Option<&str>, boot: &BootConfig) -> String {
    let options = ScriptOptions {
        cloud_provider: if boot.cloud_provider.is_empty() {
            "aws".into()
        } else {
            boot.cloud_provider.clone()
        },
        environment: region
            .iter()
            .map(|r| ("AWS_REGION".to_string(), r.to_string()))
            .collect(),
        s3_region: region.map(str::to_string),
        ..Default::default()
    };
    render_script_with(binaries, &options, boot)
}

/// Renders the bootstrap script: kops' script, line for line, for the same
/// nodeup sources and boot config. Two additions kops-rs needs, each only
/// when used: nodeups kops-rs published itself ([`is_plain_binary`]) are
/// plain binaries, so the download loop fetches `<url>` instead of
/// `<url>.xz` and skips `xz -d`; an architecture without nodeup stops with
/// a message instead of looping on an empty URL list.
pub fn render_script_with(
    binaries: &[NodeupBinary],
    options: &ScriptOptions,
    boot: &BootConfig,
) -> String {
    let source = |arch: Arch| binaries.iter().find(|b| b.arch == arch);
    let urls = |arch: Arch| {
        source(arch)
            .map(|b| {
                b.urls
                    .iter()
                    .map(|u| escape_s3(u))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_default()
    };
    let hash = |arch: Arch| {
        source(arch)
            .and_then(|b| b.sha256.clone())
            .unwrap_or_default()
    };
    let all_urls = || binaries.iter().flat_map(|b| b.urls.iter());
    let use_s3 = options.cloud_provider == "aws" && all_urls().any(|u| u.starts_with("s3://"));
    let plain = all_urls().any(|u| is_plain_binary(u));
    let missing = Arch::ALL.into_iter().any(|a| source(a).is_none());

    let mut s = String::from("#!/bin/bash\nset -o errexit\nset -o nounset\nset -o pipefail\n\n");
    s.push_str(&format!(
        "NODEUP_URL_AMD64={}\nNODEUP_HASH_AMD64={}\nNODEUP_URL_ARM64={}\nNODEUP_HASH_ARM64={}\n\n",
        urls(Arch::Amd64),
        hash(Arch::Amd64),
        urls(Arch::Arm64),
        hash(Arch::Arm64)
    ));
    for (name, value) in &options.environment {
        s.push_str(&format!("export {name}={value}\n"));
    }
    s.push_str("\n\n");
    s.push_str(&options.proxy_env);
    s.push_str("\n\n");
    s.push_str(SYSCTLS);
    s.push_str("\n\n");
    s.push_str(ENSURE_INSTALL_DIR);
    if use_s3 {
        s.push_str(IMDS_GET);
        s.push_str(JSON_FIELD);
    }
    s.push_str("\n\n");
    let mut download = String::from(DOWNLOAD_HEAD);
    if use_s3 {
        let region = options.s3_region.as_deref().unwrap_or("us-east-1");
        download.push_str(&S3_FETCH.replace("{{S3_REGION}}", region));
    } else {
        download.push_str(HTTP_FETCH);
    }
    download.push_str(DOWNLOAD_TAIL);
    if plain {
        download = download
            .replace(XZ_STEP, "")
            .replace(".xz\"", "\"")
            .replace(".xz =", " =")
            .replace(".xz and", " and")
            .replace("decompressed hash", "hash");
    }
    s.push_str(&download);
    let mut release = DOWNLOAD_RELEASE.to_string();
    if missing {
        release = release.replace(
            "  cd ${INSTALL_DIR}/bin\n",
            "  # kops-rs: no nodeup was published for this architecture.\n  \
             if [[ -z \"${NODEUP_URL}\" ]]; then\n    \
             echo \"No nodeup for host arch: $(uname -m)\" >&2\n    exit 1\n  fi\n\n  \
             cd ${INSTALL_DIR}/bin\n",
        );
    }
    s.push_str(&release);
    s.push_str(
        "\n####################################################################################\n\n\
         /bin/systemd-machine-id-setup || echo \"== Failed to initialize the machine ID; ensure machine-id configured ==\"\n",
    );
    if options.cloud_provider == "digitalocean" {
        s.push_str(
            "  # DO has machine-id baked into the image and journald should be flushed\n  \
             # to use the new machine-id\n  systemctl restart systemd-journald\n",
        );
    }
    s.push_str("\necho \"== nodeup node config starting ==\"\nensure-install-dir\n\n");
    let kube_env = boot.to_yaml();
    if options.compress {
        s.push_str(&format!(
            "echo \"{}\" | base64 -d | gzip -d > conf/kube_env.yaml",
            gzip_base64(kube_env.as_bytes())
        ));
    } else {
        s.push_str(&format!(
            "cat > conf/kube_env.yaml << '{BOOT_CONFIG_MARKER}'\n{kube_env}\n{BOOT_CONFIG_MARKER}"
        ));
    }
    s.push_str("\n\ndownload-release\necho \"== nodeup node config done ==\"\n");
    s
}

/// The heredoc delimiter around the boot config in the script (kops').
pub const BOOT_CONFIG_MARKER: &str = "__EOF_KUBE_ENV";

/// The boot config text in a script rendered without compression, for
/// tests and tools that read user data back.
pub fn boot_config_text(user_data: &str) -> Option<&str> {
    let start = format!("<< '{BOOT_CONFIG_MARKER}'\n");
    let rest = user_data.split_once(&start)?.1;
    Some(rest.split_once(&format!("\n{BOOT_CONFIG_MARKER}"))?.0)
}

/// `data` gzipped (stored, uncompressed deflate blocks: any gzip reads
/// them, and the renderer needs no compression library) and base64
/// encoded, for `spec.compressUserData`. The header is Go's (no time, no
/// name, unknown OS), so only the compressed bytes differ from kops'.
pub fn gzip_base64(data: &[u8]) -> String {
    use base64::Engine;
    let mut out = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
    let mut chunks = data.chunks(0xffff).peekable();
    if chunks.peek().is_none() {
        out.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
    }
    while let Some(chunk) = chunks.next() {
        out.push(u8::from(chunks.peek().is_none()));
        let len = chunk.len() as u16;
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(chunk);
    }
    out.extend_from_slice(&crc32(data).to_le_bytes());
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    base64::engine::general_purpose::STANDARD.encode(out)
}

/// CRC-32 (IEEE), for the gzip trailer.
fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

const SYSCTLS: &str = "sysctl -w net.core.rmem_max=16777216 || true
sysctl -w net.core.wmem_max=16777216 || true
sysctl -w net.ipv4.tcp_rmem='4096 87380 16777216' || true
sysctl -w net.ipv4.tcp_wmem='4096 87380 16777216' || true
";

const ENSURE_INSTALL_DIR: &str = r#"function ensure-install-dir() {
  INSTALL_DIR="/opt/kops"
  # On ContainerOS, we install under /var/lib/toolbox; /opt is ro and noexec
  if [[ -d /var/lib/toolbox ]]; then
    INSTALL_DIR="/var/lib/toolbox/kops"
  fi
  mkdir -p ${INSTALL_DIR}/bin
  mkdir -p ${INSTALL_DIR}/conf
  cd ${INSTALL_DIR}
}"#;

const IMDS_GET: &str = r#"
# Fetch a path from the instance metadata service. args: token, path
imds-get() {
  curl -s -f --noproxy '*' --connect-timeout 2 --max-time 5 \
    -H "X-aws-ec2-metadata-token: $1" "http://169.254.169.254/latest/$2"
}"#;

const JSON_FIELD: &str = r#"

# Extract a string field from a JSON object. args: json, field
json-field() {
  local pattern="\"$2\"[[:space:]]*:[[:space:]]*\"([^\"]+)\""
  [[ $1 =~ $pattern ]] && printf '%s' "${BASH_REMATCH[1]}"
}"#;

const DOWNLOAD_HEAD: &str = r#"# Retry a download until we get it. sha covers the uncompressed binary. args: name, sha, urls
download-or-bust() {
  echo "== Downloading $1 with hash $2 from $3 =="
  local -r file="$1"
  local -r hash="$2"
  local -a urls
  IFS=, read -r -a urls <<< "$3"

  if [[ -f "${file}" ]]; then
    if ! validate-hash "${file}" "${hash}"; then
      rm -f "${file}"
    else
      return 0
    fi
  fi

  while true; do
    for url in "${urls[@]}"; do
      echo "== Downloading ${url}.xz =="
"#;

const HTTP_FETCH: &str = r#"      if ! curl -f -Lo "${file}.xz" --connect-timeout 20 --retry 6 --retry-delay 10 "${url}.xz"; then
        echo "== Failed to download ${url}.xz =="
        rm -f "${file}.xz"
"#;

/// kops' download from an s3:// URL: the instance profile's credentials
/// from the metadata service, passed to curl on stdin, signed by curl.
const S3_FETCH: &str = r#"      local imds_token profile creds access_key secret_key session_token
      # Use the IP of the metadata server, to not depend on DNS this early in boot
      if ! imds_token=$(curl -s -f -X PUT --noproxy '*' --connect-timeout 2 --max-time 5 -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' "http://169.254.169.254/latest/api/token"); then
        echo "== Failed to get an IMDS token =="
      elif ! profile=$(imds-get "${imds_token}" meta-data/iam/security-credentials/ | head -n 1); then
        echo "== Failed to get the instance profile name =="
      elif ! creds=$(imds-get "${imds_token}" "meta-data/iam/security-credentials/${profile}"); then
        echo "== Failed to get the instance profile credentials =="
      elif ! access_key=$(json-field "${creds}" AccessKeyId) || ! secret_key=$(json-field "${creds}" SecretAccessKey) || ! session_token=$(json-field "${creds}" Token); then
        echo "== Failed to parse the instance profile credentials =="
      # Pass credentials through stdin so they do not appear in files, logs, or process arguments.
      elif ! printf 'user "%s:%s"\nheader "x-amz-security-token: %s"\n' "${access_key}" "${secret_key}" "${session_token}" |
        curl -f -Lo "${file}.xz" --connect-timeout 20 --retry 6 --retry-delay 10 \
          --config - --aws-sigv4 "aws:amz:{{S3_REGION}}:s3" \
          "https://s3.{{S3_REGION}}.amazonaws.com/${url#s3://}.xz"; then
        echo "== Failed to download ${url}.xz =="
        rm -f "${file}.xz"
"#;

/// The decompression step, dropped for plain binaries.
const XZ_STEP: &str = r#"      elif ! xz -d "${file}.xz"; then
        echo "== Failed to decompress ${url}.xz =="
        rm -f "${file}" "${file}.xz"
"#;

const DOWNLOAD_TAIL: &str = r#"      elif ! xz -d "${file}.xz"; then
        echo "== Failed to decompress ${url}.xz =="
        rm -f "${file}" "${file}.xz"
      elif ! validate-hash "${file}" "${hash}"; then
        echo "== Failed to validate decompressed hash for ${url}.xz =="
        rm -f "${file}"
      else
        echo "== Downloaded ${url}.xz and validated decompressed hash ${hash} =="
        return 0
      fi
    done

    echo "== All downloads failed; sleeping before retrying =="
    sleep 60
  done
}

validate-hash() {
  local -r file="$1"
  local -r expected="$2"
  local actual

  actual=$(sha256sum "${file}" | awk '{ print $1 }') || true
  if [[ "${actual}" != "${expected}" ]]; then
    echo "== File ${file} is corrupted; hash ${actual} doesn't match expected ${expected} =="
    return 1
  fi
}

"#;

const DOWNLOAD_RELEASE: &str = r#"function download-release() {
  case "$(uname -m)" in
  x86_64*|i?86_64*|amd64*)
    NODEUP_URL="${NODEUP_URL_AMD64}"
    NODEUP_HASH="${NODEUP_HASH_AMD64}"
    ;;
  aarch64*|arm64*)
    NODEUP_URL="${NODEUP_URL_ARM64}"
    NODEUP_HASH="${NODEUP_HASH_ARM64}"
    ;;
  *)
    echo "Unsupported host arch: $(uname -m)" >&2
    exit 1
    ;;
  esac

  cd ${INSTALL_DIR}/bin
  download-or-bust nodeup "${NODEUP_HASH}" "${NODEUP_URL}"

  chmod +x nodeup

  echo "== Running nodeup =="
  # We can't run in the foreground because of https://github.com/docker/docker/issues/23793
  ( cd ${INSTALL_DIR}/bin; ./nodeup --install-systemd-unit --conf=${INSTALL_DIR}/conf/kube_env.yaml --v=8  )
}
"#;

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> NodeupEnv {
        NodeupEnv::from_lookup(|name| {
            pairs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn nodeup_from_kops_environment_variables() {
        // Nothing set (or empty): no override.
        assert_eq!(env(&[]).nodeup(Arch::Amd64), None);
        assert_eq!(env(&[("KOPS_BASE_URL", " ")]).nodeup(Arch::Amd64), None);
        // KOPS_BASE_URL: `<base>/linux/<arch>/nodeup`, with or without a
        // trailing slash; the hash is read later from `<url>.sha256`.
        let base = env(&[("KOPS_BASE_URL", "https://example.com/kops/1.2.3/")]);
        assert_eq!(
            base.nodeup(Arch::Arm64),
            Some(EnvNodeup {
                url: "https://example.com/kops/1.2.3/linux/arm64/nodeup".into(),
                url_variable: "KOPS_BASE_URL".into(),
                sha256: None,
            })
        );
        assert_eq!(
            env(&[("KOPS_BASE_URL", "s3://b/k")])
                .nodeup(Arch::Amd64)
                .unwrap()
                .url,
            "s3://b/k/linux/amd64/nodeup"
        );
        // NODEUP_URL_<ARCH> wins over KOPS_BASE_URL for its architecture
        // only; NODEUP_HASH_<ARCH> pins whichever URL is used.
        let hash = "AB".repeat(32);
        let both = env(&[
            ("KOPS_BASE_URL", "https://example.com/kops/1.2.3"),
            ("NODEUP_URL_AMD64", "https://mirror/nodeup-amd64"),
            ("NODEUP_HASH_AMD64", &hash),
            ("NODEUP_HASH_ARM64", "cd"),
        ]);
        assert_eq!(
            both.nodeup(Arch::Amd64),
            Some(EnvNodeup {
                url: "https://mirror/nodeup-amd64".into(),
                url_variable: "NODEUP_URL_AMD64".into(),
                sha256: Some(hash.to_ascii_lowercase()),
            })
        );
        let arm = both.nodeup(Arch::Arm64).unwrap();
        assert_eq!(arm.url, "https://example.com/kops/1.2.3/linux/arm64/nodeup");
        assert_eq!(arm.sha256.as_deref(), Some("cd"));
        // A hash alone names no URL.
        assert_eq!(
            env(&[("NODEUP_HASH_AMD64", &hash)]).nodeup(Arch::Amd64),
            None
        );
    }

    #[test]
    fn sha256_files_and_store_keys() {
        let h = "0123456789abcdef".repeat(4);
        assert_eq!(parse_sha256_file(&format!("{h}\n")), Some(h.clone()));
        assert_eq!(
            parse_sha256_file(&format!("{h}  nodeup\n")),
            Some(h.clone())
        );
        assert_eq!(parse_sha256_file("<html>not found</html>"), None);
        assert_eq!(parse_sha256_file(""), None);
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            nodeup_store_path("1.0.0", &h, Arch::Arm64),
            format!("kops-rs/nodeup/1.0.0/{h}/linux/arm64/nodeup")
        );
    }

    #[test]
    fn group_architectures_from_image_and_machine_types() {
        let group = |yaml: &str| -> InstanceGroup {
            serde_yaml_ng::from_str(&format!(
                "apiVersion: kops.k8s.io/v1alpha2\nkind: InstanceGroup\nmetadata: {{name: g}}\nspec:\n{yaml}"
            ))
            .unwrap()
        };
        assert_eq!(
            group_architectures(&group("  role: Node\n  machineType: t3.medium\n")),
            vec![Arch::Amd64]
        );
        assert_eq!(
            group_architectures(&group("  role: Node\n  machineType: m7g.large\n")),
            vec![Arch::Arm64]
        );
        assert_eq!(
            group_architectures(&group(
                "  role: Node\n  machineType: t3.medium\n  image: ubuntu/images/ubuntu-noble-24.04-arm64-server\n"
            )),
            vec![Arch::Arm64]
        );
        assert_eq!(
            group_architectures(&group(
                "  role: Node\n  machineType: t3.medium\n  mixedInstancesPolicy:\n    instances: [t4g.medium, t3.large]\n"
            )),
            vec![Arch::Amd64, Arch::Arm64]
        );
        assert!(
            group_architectures(&group("  role: Bastion\n  machineType: t3.micro\n")).is_empty()
        );
    }

    #[test]
    fn script_pins_given_sources_and_stops_without_one() {
        let h = "ab".repeat(32);
        let binaries = vec![NodeupBinary {
            arch: Arch::Amd64,
            urls: vec!["s3://bucket/c/kops-rs/nodeup/x/linux/amd64/nodeup".into()],
            sha256: Some(h.clone()),
        }];
        let script = render_script(&binaries, Some("eu-west-1"), &BootConfig::default());
        assert!(
            script.contains("NODEUP_URL_AMD64=s3://bucket/c/kops-rs/nodeup/x/linux/amd64/nodeup\n")
        );
        assert!(script.contains(&format!("NODEUP_HASH_AMD64={h}\n")));
        assert!(script.contains("NODEUP_URL_ARM64=\nNODEUP_HASH_ARM64=\n"));
        assert!(script.contains("No nodeup for host arch"));
        // kops' signed S3 download, for the plain binary kops-rs uploaded.
        assert!(script.contains("--aws-sigv4 \"aws:amz:eu-west-1:s3\""));
        assert!(script.contains("\"https://s3.eu-west-1.amazonaws.com/${url#s3://}\"; then"));
        assert!(!script.contains(".xz"), "{script}");
        assert!(script.contains("export AWS_REGION=eu-west-1\n"));
        assert_bash_syntax(&script);
    }

    /// `bash -n` accepts the script (skipped where bash is missing).
    fn assert_bash_syntax(script: &str) {
        use std::io::Write;
        let Ok(mut child) = std::process::Command::new("bash")
            .arg("-n")
            .stdin(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
        else {
            eprintln!("skipping: no bash");
            return;
        };
        child
            .stdin
            .take()
            .unwrap()
            .write_all(script.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}\n{script}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    #[test]
    fn script_for_kops_mirrors_is_kops_own() {
        let binaries: Vec<NodeupBinary> = Arch::ALL
            .into_iter()
            .map(|arch| NodeupBinary {
                arch,
                urls: vec![format!(
                    "https://artifacts.k8s.io/binaries/kops/1.34.0/linux/{}/nodeup",
                    arch.as_str()
                )],
                sha256: Some("cd".repeat(32)),
            })
            .collect();
        let boot = BootConfig {
            cloud_provider: "aws".into(),
            instance_group_role: "Node".into(),
            ..Default::default()
        };
        let script = render_script(&binaries, Some("us-east-1"), &boot);
        assert!(script.contains("\"${url}.xz\"; then"));
        assert!(script.contains("elif ! xz -d \"${file}.xz\"; then"));
        assert!(!script.contains("imds-get"));
        assert!(!script.contains("No nodeup for host arch"));
        assert_eq!(
            boot_config_text(&script),
            Some("CloudProvider: aws\nInstanceGroupRole: Node\nNodeupConfigHash: ''\n")
        );
        assert_bash_syntax(&script);
    }

    #[test]
    fn gzip_is_readable() {
        for data in [&b""[..], b"CloudProvider: aws\n"] {
            let text = gzip_base64(data);
            assert!(text.starts_with("H4sIAAAAAAAA/"), "{text}");
        }
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
    }

    #[test]
    fn boot_config_round_trip() {
        let b = BootConfig {
            cloud_provider: "aws".into(),
            cluster_name: "c".into(),
            config_base: Some("s3://b/c".into()),
            config_server: None,
            api_server_ips: vec!["172.20.1.5".into()],
            instance_group_name: "nodes".into(),
            instance_group_role: "Node".into(),
            nodeup_config_hash: "x".into(),
            extra: Default::default(),
        };
        let text = b.to_yaml();
        assert!(
            text.starts_with("APIServerIPs:\n- 172.20.1.5\nCloudProvider: aws\n"),
            "{text}"
        );
        assert_eq!(BootConfig::parse(&text).unwrap(), b);
        assert_eq!(b.role(), Some(Role::Node));
    }

    /// Without DNS names a worker asks kops-controller at the API load
    /// balancer's private addresses and checks its certificate against
    /// kops-controller's name (kops' selection: inside the network CIDRs,
    /// no DNS names, no public addresses).
    #[test]
    fn workers_of_a_cluster_without_dns_reach_kops_controller_by_address() {
        let cluster: Cluster = serde_yaml_ng::from_str(
            "apiVersion: kops.k8s.io/v1alpha2\nkind: Cluster\nmetadata: {name: c.k8s.local}\n\
             spec:\n  cloudProvider: aws\n  networkCIDR: 172.20.0.0/16\n  \
             additionalNetworkCIDRs: [10.1.0.0/16]\n",
        )
        .unwrap();
        let found = control_plane_ips(
            &cluster,
            &[
                "api-c-k8s-local-1234.elb.us-east-1.amazonaws.com".into(),
                "172.20.3.7".into(),
                "10.1.0.9".into(),
                "54.1.2.3".into(),
            ],
        );
        assert_eq!(found, ["172.20.3.7", "10.1.0.9"]);
        let server = config_server_for("c.k8s.local", "CA".into(), &found);
        assert_eq!(
            server.servers,
            ["https://172.20.3.7:3988/", "https://10.1.0.9:3988/"]
        );
        assert_eq!(
            server.tls_server_name,
            "kops-controller.internal.c.k8s.local"
        );
        // On Google, networks have no range: the subnets' ranges select.
        let gce: Cluster = serde_yaml_ng::from_str(
            "apiVersion: kops.k8s.io/v1alpha2\nkind: Cluster\nmetadata: {name: g.example.com}\n\
             spec:\n  cloudProvider: gce\n  subnets: [{name: us-central1, region: us-central1, cidr: 10.0.16.0/20}]\n",
        )
        .unwrap();
        let found = control_plane_ips(&gce, &["10.0.16.65".into(), "203.0.113.9".into()]);
        assert_eq!(found, ["10.0.16.65"]);
        let v6 = config_server_for("c.k8s.local", "CA".into(), &["2001:db8::5".into()]);
        assert_eq!(v6.servers, ["https://[2001:db8::5]:3988/"]);
        let by_name = config_server_for("c.example.com", "CA".into(), &[]);
        assert_eq!(
            by_name.servers,
            ["https://kops-controller.internal.c.example.com:3988/"]
        );
        assert!(by_name.tls_server_name.is_empty());
    }

    /// kops' custom S3 endpoint settings are exported on control-plane
    /// groups only, sorted with AWS_REGION (kops 1.37's bytes).
    #[test]
    fn control_plane_user_data_exports_custom_s3_variables() {
        let cluster: Cluster = serde_yaml_ng::from_str(
            "apiVersion: kops.k8s.io/v1alpha2\nkind: Cluster\nmetadata: {name: c.example.com}\n\
             spec:\n  cloudProvider: aws\n  subnets:\n  - {name: us-east-1a, zone: us-east-1a}\n",
        )
        .unwrap();
        let group = |role: &str| -> InstanceGroup {
            serde_yaml_ng::from_str(&format!(
                "apiVersion: kops.k8s.io/v1alpha2\nkind: InstanceGroup\nmetadata: {{name: g}}\nspec: {{role: {role}}}\n"
            ))
            .unwrap()
        };
        let vars = |name: &str| {
            match name {
                "S3_ENDPOINT" => Some("http://127.0.0.1:45261"),
                "S3_REGION" => Some("us-east-1"),
                "S3_ACCESS_KEY_ID" | "S3_SECRET_ACCESS_KEY" => Some("test"),
                _ => None,
            }
            .map(str::to_string)
        };
        let script = |role: &str, lookup: &dyn Fn(&str) -> Option<String>| {
            let options = ScriptOptions::of_with_env(&cluster, &group(role), lookup);
            render_script_with(&[], &options, &BootConfig::default())
        };
        assert!(script("ControlPlane", &vars).contains(
            "\nexport AWS_REGION=us-east-1\nexport S3_ACCESS_KEY_ID=test\n\
             export S3_ENDPOINT=http://127.0.0.1:45261\nexport S3_REGION=us-east-1\n\
             export S3_SECRET_ACCESS_KEY=test\n\n"
        ));
        for text in [script("Node", &vars), script("ControlPlane", &|_| None)] {
            assert!(text.contains("\nexport AWS_REGION=us-east-1\n\n"), "{text}");
            assert!(!text.contains("S3_"), "{text}");
        }
    }
}
