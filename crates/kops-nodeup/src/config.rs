//! The node config (kops' `nodeup.Config`), one per instance group, stored
//! at `<cluster>/igconfig/<role>/<group>/nodeupconfig.yaml`, and the builder
//! that derives it from the cluster and the group.
//!
//! Field names and casing are kops' own (the Go struct's JSON names: mostly
//! capitalised, a few camelCase), so a config written by kops reads here and
//! the other way round. Component settings (kubelet, kube-proxy, API server,
//! controller manager, scheduler) are kept as ordered maps: kops' defaults
//! with the user's spec laid over them, unknown settings kept.
//!
//! Built as kops builds it: component settings from the completed spec
//! (`kops_api::populate`), the group's kubelet, labels and taints laid over
//! them, CA bundles and keypair ids from the cluster's keysets
//! ([`NodeInputs`]). Rendered as kops writes it (keys sorted, Go's quoting),
//! so the same cluster gives the same bytes, and the same hash in the user
//! data. Left to the caller: the keysets (none given, the config names no
//! CA; nodeup then reads them from `configStore.keypairs`) and whether
//! workers bootstrap through kops-controller (`config_server`; off, every
//! node reads the state store).

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use base64::Engine;
use kops_api::components::{GVisorConfig, GVISOR_DEFAULT_PLATFORM};
use kops_api::{Cluster, InstanceGroup, Role};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use crate::assets::{self, Arch, AssetError};

/// Settings as an ordered map (keys come out sorted, as kops writes them).
pub type Settings = BTreeMap<String, Value>;

/// The pause image containerd's sandbox uses.
pub const SANDBOX_IMAGE: &str = "registry.k8s.io/pause:3.10.1";
/// kube-vip's image (kube-vip's releases on GitHub's registry), which holds
/// a vSphere cluster's control-plane virtual IP.
pub const KUBE_VIP_IMAGE: &str = "ghcr.io/kube-vip/kube-vip:v0.8.9";
/// Where Kubernetes images come from unless `spec.assets.containerRegistry` says otherwise.
pub const DEFAULT_REGISTRY: &str = "registry.k8s.io";

/// The etcd versions etcd-manager can run, as (minor, latest patch): the
/// image of the latest patch of each minor is mounted at every patch's
/// path, `/opt/etcd-v<minor>.<patch>`, where etcd-manager looks for etcd.
pub const ETCD_MINORS: [(&str, u32); 3] = [("3.5", 31), ("3.6", 12), ("3.7", 0)];

/// The ports of one etcd cluster as kops fixes them (its well-known ports):
/// client, peer, etcd-manager's gRPC and the quarantined client port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EtcdPorts {
    pub client: u32,
    pub peer: u32,
    pub grpc: u32,
    pub quarantine: u32,
}

/// kops' ports for each etcd cluster it knows (`main`, `events`, `cilium`,
/// `leases`); `None` for any other name, which kops refuses.
pub fn etcd_ports(name: &str) -> Option<EtcdPorts> {
    let (client, peer, grpc, quarantine) = match name {
        "main" => (4001, 2380, 3996, 3994),
        "events" => (4002, 2381, 3997, 3995),
        "cilium" => (4003, 2382, 3991, 3992),
        "leases" => (4004, 2383, 4006, 4005),
        _ => return None,
    };
    Some(EtcdPorts {
        client,
        peer,
        grpc,
        quarantine,
    })
}

/// The volume mounts and image volumes ([`ETCD_MINORS`]) that give
/// etcd-manager's slim image the etcd binaries, from `registry`.
pub fn etcd_image_volumes(registry: &str) -> (Vec<Value>, Vec<Value>) {
    let mut mounts = Vec::new();
    let mut volumes = Vec::new();
    for (minor, last) in ETCD_MINORS {
        let volume = format!("etcd-v{}-{last}", minor.replace('.', "-"));
        for patch in 0..=last {
            mounts
                .push(json!({"mountPath": format!("/opt/etcd-v{minor}.{patch}"), "name": volume}));
        }
        volumes.push(json!({
            "image": {"pullPolicy": "IfNotPresent", "reference": format!("{registry}/etcd:v{minor}.{last}")},
            "name": volume,
        }));
    }
    (mounts, volumes)
}

/// kops' `nodeup.Config`, the fields kops-rs writes and reads (others are kept).
/// Optional fields are left out when empty, as kops' `omitempty` does;
/// `CAs`, `KeypairIDs`, `Hooks`, `UpdatePolicy` and `usesNoneDNS` are always
/// written, as kops writes them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeupConfig {
    #[serde(
        rename = "APIServerConfig",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub api_server_config: Option<ApiServerConfig>,
    /// The API load balancer's addresses (kops' well-known KubeAPIServer
    /// addresses), for nodes that run the API server: extra names of its
    /// serving certificate. Known only once the balancer exists.
    #[serde(
        rename = "ApiserverAdditionalIPs",
        skip_serializing_if = "Vec::is_empty",
        default
    )]
    pub apiserver_additional_ips: Vec<String>,
    /// Per architecture, `sha256@url[,url...]`.
    #[serde(rename = "Assets", default)]
    pub assets: BTreeMap<String, Vec<String>>,
    /// CA bundles by keyset name (a worker's cluster CA travels in the boot
    /// config instead).
    #[serde(rename = "CAs", default)]
    pub cas: BTreeMap<String, String>,
    #[serde(rename = "ClusterName", default)]
    pub cluster_name: String,
    #[serde(
        rename = "ControlPlaneConfig",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub control_plane_config: Option<ControlPlaneConfig>,
    /// The hosted zone (control plane: dns-controller's zone).
    #[serde(rename = "DNSZone", skip_serializing_if = "Option::is_none", default)]
    pub dns_zone: Option<String>,
    /// The group's first machine type, for CNIs that size by it (AWS VPC CNI, Cilium ENI).
    #[serde(
        rename = "DefaultMachineType",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub default_machine_type: Option<String>,
    #[serde(
        rename = "EnableLifecycleHook",
        skip_serializing_if = "is_false",
        default
    )]
    pub enable_lifecycle_hook: bool,
    #[serde(
        rename = "EtcdClusterNames",
        skip_serializing_if = "Vec::is_empty",
        default
    )]
    pub etcd_cluster_names: Vec<String>,
    /// Files nodeup writes (`path`, `content`, ...): the group's, the
    /// cluster's, then kops' own (the kube-scheduler config).
    #[serde(rename = "FileAssets", skip_serializing_if = "Vec::is_empty", default)]
    pub file_assets: Vec<Value>,
    /// gVisor on a worker group that enables it, its platform completed.
    #[serde(rename = "GVisor", skip_serializing_if = "Option::is_none", default)]
    pub gvisor: Option<GVisorConfig>,
    /// The group's hooks then the cluster's (`null` when none, as kops writes).
    #[serde(rename = "Hooks", default)]
    pub hooks: Vec<Option<Vec<Value>>>,
    #[serde(rename = "InstallCNIAssets", skip_serializing_if = "is_false", default)]
    pub install_cni_assets: bool,
    /// Primary keypair ids by keyset name.
    #[serde(rename = "KeypairIDs", default)]
    pub keypair_ids: BTreeMap<String, String>,
    /// `null` when kube-proxy does not run there (kops writes the field always).
    #[serde(rename = "KubeProxy", default)]
    pub kube_proxy: Option<Settings>,
    #[serde(rename = "KubeletConfig", default)]
    pub kubelet_config: Settings,
    #[serde(rename = "KubernetesVersion", default)]
    pub kubernetes_version: String,
    #[serde(rename = "NTPUnmanaged", skip_serializing_if = "is_false", default)]
    pub ntp_unmanaged: bool,
    #[serde(rename = "Networking", default)]
    pub networking: Settings,
    #[serde(rename = "NvidiaGPU", skip_serializing_if = "Option::is_none", default)]
    pub nvidia_gpu: Option<Value>,
    #[serde(
        rename = "ServiceNodePortRange",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub service_node_port_range: Option<String>,
    #[serde(
        rename = "SysctlParameters",
        skip_serializing_if = "Vec::is_empty",
        default
    )]
    pub sysctl_parameters: Vec<String>,
    #[serde(
        rename = "UpdatePolicy",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub update_policy: Option<String>,
    #[serde(rename = "UseCiliumEtcd", skip_serializing_if = "is_false", default)]
    pub use_cilium_etcd: bool,
    #[serde(rename = "UsesKubenet", skip_serializing_if = "is_false", default)]
    pub uses_kubenet: bool,
    #[serde(
        rename = "VolumeMounts",
        skip_serializing_if = "Vec::is_empty",
        default
    )]
    pub volume_mounts: Vec<Value>,
    /// The channels manifest the control plane applies.
    #[serde(
        rename = "channelsManifest",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub channels_manifest: Option<String>,
    /// Where nodes that run the API server read keysets and secrets (the
    /// others get theirs from kops-controller).
    #[serde(
        rename = "configStore",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub config_store: Option<ConfigStore>,
    #[serde(
        rename = "containerdConfig",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub containerd_config: Option<Settings>,
    /// The etcd-manager manifests of this control-plane group.
    #[serde(
        rename = "etcdManifests",
        skip_serializing_if = "Vec::is_empty",
        default
    )]
    pub etcd_manifests: Vec<String>,
    /// Container images nodeup loads from files instead of pulling, per
    /// architecture (kops' images under `KOPS_BASE_URL`).
    #[serde(rename = "images", skip_serializing_if = "BTreeMap::is_empty", default)]
    pub images: BTreeMap<String, Vec<NodeImage>>,
    /// Google Cloud: the cloud provider looks for nodes in every zone of
    /// the region (kops' `multizone`, always on).
    #[serde(rename = "multizone", skip_serializing_if = "Option::is_none", default)]
    pub multizone: Option<bool>,
    /// Google Cloud: the network tag of the cluster's nodes.
    #[serde(rename = "nodeTags", skip_serializing_if = "Option::is_none", default)]
    pub node_tags: Option<String>,
    /// Extra OS packages (the cluster's, then the group's).
    #[serde(rename = "packages", skip_serializing_if = "Vec::is_empty", default)]
    pub packages: Vec<String>,
    /// Static pod manifests nodeup fetches from the config base.
    #[serde(
        rename = "staticManifests",
        skip_serializing_if = "Vec::is_empty",
        default
    )]
    pub static_manifests: Vec<StaticManifest>,
    #[serde(rename = "usesNoneDNS", default)]
    pub uses_none_dns: bool,
    /// vSphere: kube-vip's image on nodes that hold the control plane's
    /// virtual IP, moved to `spec.assets.containerRegistry` (or
    /// `containerProxy`) as the control plane's images are (kops-rs' own).
    #[serde(
        rename = "kubeVIPImage",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub kube_vip_image: Option<String>,
    #[serde(
        rename = "warmPoolImages",
        skip_serializing_if = "Vec::is_empty",
        default
    )]
    pub warm_pool_images: Vec<String>,
    /// Fields kops writes that kops-rs does not model.
    #[serde(flatten)]
    pub extra: Settings,
}

/// An image file nodeup downloads and loads (kops' `nodeup.Image`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeImage {
    /// The file's sha256 (hex).
    #[serde(skip_serializing_if = "String::is_empty", default)]
    pub hash: String,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub sources: Vec<String>,
}

/// One of kops' own images published under `KOPS_BASE_URL`
/// (`<base>/images/<name>-<arch>.tar.gz`), with the hash read beside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseUrlImage {
    /// `kops-controller`, `kops-channels`, `dns-controller`,
    /// `kube-apiserver-healthcheck`.
    pub name: String,
    pub arch: Arch,
    pub url: String,
    pub sha256: String,
}

/// The images kops' control-plane nodes load from `KOPS_BASE_URL`, in
/// kops' order; nodes of API-server groups load only the last.
pub const BASE_URL_IMAGES: [&str; 4] = [
    "kops-controller",
    "kops-channels",
    "dns-controller",
    "kube-apiserver-healthcheck",
];

/// The URL of a [`BASE_URL_IMAGES`] image under `base`.
pub fn base_url_image_url(base: &str, name: &str, arch: Arch) -> String {
    format!(
        "{}/images/{name}-{}.tar.gz",
        base.trim_end_matches('/'),
        arch.as_str()
    )
}

/// A static pod manifest: its key and its path under the config base.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StaticManifest {
    #[serde(skip_serializing_if = "String::is_empty", default)]
    pub key: String,
    #[serde(skip_serializing_if = "String::is_empty", default)]
    pub path: String,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// Where nodes read keysets and secrets.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigStore {
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub keypairs: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub secrets: Option<String>,
}

/// Settings for nodes that run kube-apiserver.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ApiServerConfig {
    #[serde(rename = "API", default)]
    pub api: Settings,
    #[serde(rename = "ClusterDNSDomain", default)]
    pub cluster_dns_domain: String,
    #[serde(rename = "KubeAPIServer", default)]
    pub kube_api_server: Settings,
    #[serde(
        rename = "Authentication",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub authentication: Option<Value>,
    #[serde(
        rename = "EncryptionConfigSecretHash",
        skip_serializing_if = "String::is_empty",
        default
    )]
    pub encryption_config_secret_hash: String,
    #[serde(rename = "ServiceAccountPublicKeys", default)]
    pub service_account_public_keys: String,
    #[serde(flatten)]
    pub extra: Settings,
}

/// Settings for control-plane nodes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ControlPlaneConfig {
    #[serde(rename = "KubeControllerManager", default)]
    pub kube_controller_manager: Settings,
    #[serde(rename = "KubeScheduler", default)]
    pub kube_scheduler: Settings,
    #[serde(flatten)]
    pub extra: Settings,
}

/// Why a node config cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("instance group `{group}`: {source}")]
    Asset {
        group: String,
        #[source]
        source: Box<AssetError>,
    },
    #[error("instance group `{group}` has no known role\nhint: set `spec.role` to Master, Node, Bastion or APIServer")]
    NoRole { group: String },
    #[error("`{field}` `{value}` is not a CIDR kops-rs can derive the cluster DNS address from\nhint: set `spec.kubelet.clusterDNS` to the DNS service address")]
    BadServiceRange { field: String, value: String },
    #[error("the node config at `{url}` cannot be read: {reason}\nhint: run `kops update cluster --yes` again to rewrite it")]
    Parse { url: String, reason: String },
}

/// The state-store key of a group's node config, relative to the store
/// root: `<cluster>/igconfig/<role>/<group>/nodeupconfig.yaml`.
pub fn nodeup_config_key(cluster: &str, role: Role, group: &str) -> String {
    format!("{cluster}/{}", nodeup_config_path(role, group))
}

/// The same key relative to the cluster's config base.
pub fn nodeup_config_path(role: Role, group: &str) -> String {
    format!("igconfig/{}/{group}/nodeupconfig.yaml", role.path_name())
}

/// The YAML kops-rs stores, as kops writes it (keys sorted at every level,
/// Go's quoting).
pub fn render_yaml(config: &NodeupConfig) -> String {
    let text = kops_api::to_yaml(config);
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        out.push_str(&go_quoted_digits(line));
        out.push('\n');
    }
    out
}

/// Go quotes a string of digits too long for an integer (keypair ids) in
/// double quotes, like any string that reads as a number; the YAML emitter
/// under `kops_api::to_yaml` gives those single quotes.
fn go_quoted_digits(line: &str) -> std::borrow::Cow<'_, str> {
    let Some(head) = line.strip_suffix('\'') else {
        return line.into();
    };
    let Some(i) = head.rfind(": '") else {
        return line.into();
    };
    let digits = &head[i + 3..];
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return line.into();
    }
    format!("{}: \"{digits}\"", &head[..i]).into()
}

/// Parses a stored node config.
pub fn parse_yaml(url: &str, text: &str) -> Result<NodeupConfig, ConfigError> {
    serde_yaml_ng::from_str(text).map_err(|e| ConfigError::Parse {
        url: url.to_string(),
        reason: e.to_string(),
    })
}

/// kops' `NodeupConfigHash`: the base64 (standard) of the sha256 of the
/// stored bytes.
pub fn config_hash(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(Sha256::digest(bytes))
}

/// A group's node config with its stored form and hash, for the state store
/// (and the Terraform target's file list).
#[derive(Debug, Clone, PartialEq)]
pub struct RenderedNodeupConfig {
    pub role: Role,
    pub group: String,
    pub config: NodeupConfig,
    /// The bytes to store.
    pub yaml: String,
    /// `NodeupConfigHash` of `yaml`.
    pub hash: String,
    /// Relative to the cluster's config base.
    pub path: String,
}

/// One keyset as the node config names it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeKeyset {
    /// The trusted certificates, PEM, one after the other.
    pub certificates: String,
    /// The primary keypair's id.
    pub primary_id: String,
}

/// What a node config needs beyond the spec: the cluster's keysets (kops'
/// `keysets` argument to its node config builder: which CAs a node trusts,
/// which keypair ids it pins) and what the cloud told `update`. Left empty,
/// the config names no CA, no keypair and no zone the spec does not name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeInputs {
    pub keysets: BTreeMap<String, NodeKeyset>,
    /// The service-account keyset's public keys, PEM.
    pub service_account_public_keys: String,
    /// The id of the hosted zone found for the cluster when the spec names
    /// no `dnsZone` (the control plane's `DNSZone`).
    pub dns_zone: Option<String>,
    /// All the cluster's groups, when known (where the API servers run
    /// decides how the API is reached).
    pub instance_groups: Option<Vec<InstanceGroup>>,
    /// Workers bootstrap through kops-controller (kops' config server), as
    /// kops' do: their config names no config store and leaves the cluster
    /// CA to the boot config. Off, every node reads the state store.
    pub config_server: bool,
    /// The objects the cluster's file carries beside the cluster and its
    /// groups (a `KubeSchedulerConfiguration` becomes the scheduler's config).
    pub additional_objects: Vec<Value>,
    /// Where nodes download nodeup, as `update` resolved it (kops'
    /// environment variables or the uploaded binaries). `None`: the
    /// default mirrors (tests, previews).
    pub nodeup: Option<crate::assets::NodeupSources>,
    /// The API load balancer's addresses as the cloud reports them (its
    /// DNS name; with `dns: None` also its interfaces' private addresses),
    /// sorted: nodes that run the API server list them as
    /// `ApiserverAdditionalIPs`. Empty when the balancer does not exist yet
    /// (and in Terraform/CloudFormation renders, as kops').
    pub api_server_addresses: Vec<String>,
    /// kops' images under `KOPS_BASE_URL` when that is set (`update`
    /// resolves them once, with their hashes).
    pub base_url_images: Vec<BaseUrlImage>,
    /// The newest Kubernetes workers may run while an upgrade is half
    /// rolled (kops' `ControlPlaneRunningVersion`: the oldest control-plane
    /// kubelet, when older than the spec's). Groups that run no API server
    /// get this version's kubelet and `KubernetesVersion`; `None`: the
    /// spec's for all.
    pub kubelet_version: Option<String>,
    /// kops' `Metal` feature flag was on (`KOPS_FEATURE_FLAGS=Metal`):
    /// kops-controller also verifies machines enrolled with `toolbox
    /// enroll` by their `Host` key (its options' `pki`), whatever the cloud.
    pub enrolled_hosts: bool,
}

/// Builds and renders the node config of one group. `None` for bastions
/// (kops gives them no node config: they do not run nodeup).
pub fn rendered(
    cluster: &Cluster,
    group: &InstanceGroup,
    config_base: &str,
) -> Result<Option<RenderedNodeupConfig>, ConfigError> {
    rendered_with_inputs(cluster, group, config_base, &NodeInputs::default())
}

/// [`rendered`] with the cluster's keysets.
pub fn rendered_with_inputs(
    cluster: &Cluster,
    group: &InstanceGroup,
    config_base: &str,
    inputs: &NodeInputs,
) -> Result<Option<RenderedNodeupConfig>, ConfigError> {
    let role = group.role().ok_or_else(|| ConfigError::NoRole {
        group: group.name().to_string(),
    })?;
    if role == Role::Bastion {
        return Ok(None);
    }
    let config = nodeup_config_with_inputs(cluster, group, config_base, inputs)?;
    let yaml = render_yaml(&config);
    Ok(Some(RenderedNodeupConfig {
        role,
        group: group.name().to_string(),
        hash: config_hash(yaml.as_bytes()),
        path: nodeup_config_path(role, group.name()),
        config,
        yaml,
    }))
}

/// Every group's rendered node config (bastions have none).
pub fn rendered_all(
    cluster: &Cluster,
    groups: &[InstanceGroup],
    config_base: &str,
) -> Result<Vec<RenderedNodeupConfig>, ConfigError> {
    let mut out = Vec::new();
    let inputs = NodeInputs {
        instance_groups: Some(groups.to_vec()),
        ..NodeInputs::default()
    };
    for group in groups {
        if group.spec.manager.as_deref() == Some("Karpenter") {
            continue;
        }
        if let Some(r) = rendered_with_inputs(cluster, group, config_base, &inputs)? {
            out.push(r);
        }
    }
    Ok(out)
}

/// Lays `over` onto `base` (maps merge key by key, anything else replaces).
fn overlay(base: &mut Settings, over: Settings) {
    for (k, v) in over {
        match (base.get_mut(&k), v) {
            (Some(Value::Object(b)), Value::Object(o)) => merge_objects(b, o),
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
}

fn merge_objects(base: &mut Map<String, Value>, over: Map<String, Value>) {
    for (k, v) in over {
        match (base.get_mut(&k), v) {
            (Some(Value::Object(b)), Value::Object(o)) => merge_objects(b, o),
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
}

/// The 10th address of the service range (where kube-dns/CoreDNS listens).
fn cluster_dns(service_range: &str) -> Result<String, ConfigError> {
    let bad = || ConfigError::BadServiceRange {
        field: "spec.serviceClusterIPRange".into(),
        value: service_range.to_string(),
    };
    let (addr, _) = service_range.split_once('/').ok_or_else(bad)?;
    match addr.parse::<IpAddr>().map_err(|_| bad())? {
        IpAddr::V4(ip) => Ok(Ipv4Addr::from(u32::from(ip).wrapping_add(10)).to_string()),
        IpAddr::V6(ip) => Ok(Ipv6Addr::from(u128::from(ip).wrapping_add(10)).to_string()),
    }
}

/// Builds a group's node config from the cluster spec (kops' defaults for
/// whatever the spec leaves out). `config_base` is the cluster's directory
/// in the state store (`s3://bucket/<cluster>`, `file:///...`).
pub fn nodeup_config(
    cluster: &Cluster,
    group: &InstanceGroup,
    config_base: &str,
) -> Result<NodeupConfig, ConfigError> {
    nodeup_config_with_inputs(cluster, group, config_base, &NodeInputs::default())
}

/// [`nodeup_config`] with the cluster's keysets.
pub fn nodeup_config_with_inputs(
    cluster: &Cluster,
    group: &InstanceGroup,
    config_base: &str,
    inputs: &NodeInputs,
) -> Result<NodeupConfig, ConfigError> {
    let asset_error = |source| ConfigError::Asset {
        group: group.name().to_string(),
        source: Box::new(source),
    };
    let role = group.role().ok_or_else(|| ConfigError::NoRole {
        group: group.name().to_string(),
    })?;
    let v = NodeView::new(cluster, group, config_base, inputs, role);
    let (spec_json, group_json) = (&v.spec_json, &v.group_json);
    let (control_plane, runs_api_server) = (v.control_plane, v.runs_api_server);
    let spec = &cluster.spec;
    // Workers held back to the control plane's running version (kops
    // forces the group's version: its kubelet assets and KubernetesVersion).
    let held_back;
    let versioned = match inputs.kubelet_version.as_deref() {
        Some(v) if !matches!(role, Role::ControlPlane | Role::ApiServer) => {
            held_back = {
                let mut c = cluster.clone();
                c.spec.kubernetes_version = Some(v.to_string());
                c
            };
            &held_back
        }
        _ => cluster,
    };
    let k8s = assets::kubernetes_version(versioned).map_err(asset_error)?;
    let version = k8s.to_string();
    let name = cluster.name().to_string();
    let service_range = v.completed_str(
        "serviceClusterIPRange",
        if v.ipv6 {
            "fd00:5e4f:ce::/108"
        } else {
            "100.64.0.0/13"
        },
    );
    let non_masquerade = v.completed_str("nonMasqueradeCIDR", "100.64.0.0/10");
    let dns_domain = v.completed_str("clusterDNSDomain", "cluster.local");
    let install_cni_assets = match v.networking_json.get("cilium").filter(|v| !v.is_null()) {
        Some(c) => c.get("chainingMode").and_then(Value::as_str) == Some("portmap"),
        None => !v.has_cni("amazonvpc") && !v.has_cni("calico"),
    };
    let assets_by_arch = assets_by_arch(&v, versioned, install_cni_assets).map_err(asset_error)?;
    let kubelet = kubelet_config(&v, &service_range)?;
    let isolated = control_plane && spec.isolate_masters == Some(true);
    let kube_proxy = match spec.kube_proxy.as_ref().and_then(|p| p.enabled) {
        Some(false) => None,
        _ if isolated => None,
        _ => Some(object_at(&v.completed, "kubeProxy")),
    };
    let (containerd, gvisor, nvidia_gpu) = containerd_config(&v);
    let NodeNetworking {
        networking,
        default_machine_type,
        use_cilium_etcd,
        uses_kubenet,
    } = node_networking(&v, non_masquerade, service_range);
    let api_server_config = runs_api_server.then(|| api_server_config(&v, dns_domain));

    let (control_plane_config, etcd_cluster_names) = control_plane_config(&v);
    let uses_none_dns = spec
        .topology
        .as_ref()
        .and_then(|t| t.dns.as_ref())
        .and_then(|d| d.kind.as_deref())
        == Some("None");
    let base = config_base.trim_end_matches('/');
    let config_store = config_store(&v, base);

    let (cas, keypair_ids) = trusted_keys(cluster, role, inputs);
    let (hooks, file_assets, static_manifests) = hooks_and_files(&v);
    let sysctl_parameters = sysctl_parameters(&v);
    let (channels_manifest, etcd_manifests, dns_zone) = control_plane_manifests(&v, base);
    let extra = extra_settings(&v);
    let (multizone, node_tags) = gce_settings(&v, &name);
    let apiserver_additional_ips = if runs_api_server {
        inputs.api_server_addresses.clone()
    } else {
        Vec::new()
    };
    let kube_vip_image = (spec.cloud_provider.as_deref() == Some("vsphere")
        && !apiserver_additional_ips.is_empty())
    .then(|| {
        let empty = serde_json::Map::new();
        kops_api::populate::remap_image(spec_json.as_object().unwrap_or(&empty), KUBE_VIP_IMAGE)
    });
    let images = base_url_images(role, inputs);

    Ok(NodeupConfig {
        api_server_config,
        apiserver_additional_ips,
        assets: assets_by_arch,
        cas,
        cluster_name: name,
        control_plane_config,
        dns_zone,
        default_machine_type,
        enable_lifecycle_hook: warm_pool_lifecycle_hook(spec_json, group_json, role),
        etcd_cluster_names,
        file_assets,
        gvisor,
        hooks,
        install_cni_assets,
        keypair_ids,
        kube_proxy,
        kubelet_config: kubelet,
        kubernetes_version: version.trim_start_matches('v').to_string(),
        ntp_unmanaged: v.ntp_unmanaged(),
        networking,
        nvidia_gpu,
        service_node_port_range: v.service_node_port_range(),
        sysctl_parameters,
        update_policy: Some(v.update_policy()),
        use_cilium_etcd,
        uses_kubenet,
        volume_mounts: v.volume_mounts(),
        channels_manifest,
        config_store,
        containerd_config: Some(containerd),
        etcd_manifests,
        images,
        multizone,
        node_tags,
        packages: v.packages(),
        static_manifests,
        uses_none_dns,
        kube_vip_image,
        warm_pool_images: Vec::new(),
        extra,
    })
}

/// What the steps of [`nodeup_config_with_inputs`] read: the cluster and
/// the group, typed and as JSON, and what the node's role makes of them.
struct NodeView<'a> {
    cluster: &'a Cluster,
    group: &'a InstanceGroup,
    inputs: &'a NodeInputs,
    role: Role,
    /// The spec as JSON: fields kops-rs does not model are read from it.
    spec_json: Value,
    /// The completed spec (kops' populate step) as JSON.
    completed: Value,
    group_json: Value,
    networking_json: Value,
    control_plane: bool,
    runs_api_server: bool,
    ipv6: bool,
}

impl<'a> NodeView<'a> {
    fn new(
        cluster: &'a Cluster,
        group: &'a InstanceGroup,
        config_base: &str,
        inputs: &'a NodeInputs,
        role: Role,
    ) -> Self {
        let spec = &cluster.spec;
        let spec_json = serde_json::to_value(spec).unwrap_or(Value::Null);
        // Component settings come from the completed spec (kops' populate
        // step), as kops builds its node configs from the completed cluster.
        // `create cluster` always writes the non-masquerade range; a spec
        // written by hand may not, and kops-rs' default before was kops' one.
        let mut with_range;
        let populated = if spec.non_masquerade_cidr.is_none() {
            with_range = cluster.clone();
            with_range.spec.non_masquerade_cidr = Some("100.64.0.0/10".into());
            &with_range
        } else {
            cluster
        };
        let completed = kops_api::populate::completed_spec(
            populated,
            &kops_api::populate::PopulateOptions {
                config_base,
                instance_groups: inputs.instance_groups.as_deref(),
                dns_zone_id: inputs.dns_zone.as_deref(),
            },
        );
        let networking_json = spec_json.get("networking").cloned().unwrap_or(Value::Null);
        NodeView {
            cluster,
            group,
            inputs,
            role,
            completed: serde_json::to_value(&completed.spec).unwrap_or(Value::Null),
            group_json: serde_json::to_value(&group.spec).unwrap_or(Value::Null),
            networking_json,
            spec_json,
            control_plane: matches!(role, Role::ControlPlane),
            runs_api_server: matches!(role, Role::ControlPlane | Role::ApiServer),
            ipv6: spec.non_masquerade_cidr.as_deref() == Some("::/0"),
        }
    }

    /// Whether the cluster runs CNI `name` (its block in `spec.networking`).
    fn has_cni(&self, name: &str) -> bool {
        self.networking_json.get(name).is_some_and(|v| !v.is_null())
    }

    /// A string of the completed spec, or `default`.
    fn completed_str(&self, key: &str, default: &str) -> String {
        self.completed
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or(default)
            .to_string()
    }

    /// The packages of the cluster, then of the group.
    fn packages(&self) -> Vec<String> {
        let (spec_json, group_json) = (&self.spec_json, &self.group_json);
        [spec_json.get("packages"), group_json.get("packages")]
            .into_iter()
            .flatten()
            .filter_map(Value::as_array)
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect()
    }

    /// The group's volume mounts.
    fn volume_mounts(&self) -> Vec<Value> {
        self.group_json
            .get("volumeMounts")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    }

    /// Whether the cluster manages NTP itself (`spec.ntp.managed: false`).
    fn ntp_unmanaged(&self) -> bool {
        self.spec_json
            .get("ntp")
            .and_then(|n| n.get("managed"))
            .and_then(Value::as_bool)
            == Some(false)
    }

    /// `spec.kubeAPIServer.serviceNodePortRange`.
    fn service_node_port_range(&self) -> Option<String> {
        self.spec_json
            .get("kubeAPIServer")
            .and_then(|a| a.get("serviceNodePortRange"))
            .and_then(Value::as_str)
            .map(str::to_string)
    }

    /// The group's update policy, else the cluster's, else `automatic`.
    fn update_policy(&self) -> String {
        self.group_json
            .get("updatePolicy")
            .and_then(Value::as_str)
            .map(str::to_string)
            .or_else(|| self.cluster.spec.update_policy.clone())
            .unwrap_or_else(|| "automatic".into())
    }
}

/// A control plane's controller manager and scheduler settings, and its
/// etcd clusters.
fn control_plane_config(v: &NodeView<'_>) -> (Option<ControlPlaneConfig>, Vec<String>) {
    let spec = &v.cluster.spec;
    let control_plane = v.control_plane;
    let control_plane_config = if control_plane {
        let kcm = object_at(&v.completed, "kubeControllerManager");
        let sched = object_at(&v.completed, "kubeScheduler");
        Some(ControlPlaneConfig {
            kube_controller_manager: kcm,
            kube_scheduler: sched,
            extra: Settings::new(),
        })
    } else {
        None
    };

    let etcd_cluster_names = if control_plane {
        spec.etcd_clusters
            .iter()
            .flatten()
            .map(|c| c.name.clone())
            .collect()
    } else {
        Vec::new()
    };
    (control_plane_config, etcd_cluster_names)
}

/// Where the node reads keys and secrets: nodes that run the API server
/// read the keystore; with a config server the others get their
/// certificates from kops-controller.
fn config_store(v: &NodeView<'_>, base: &str) -> Option<ConfigStore> {
    let spec = &v.cluster.spec;
    (v.runs_api_server || !v.inputs.config_server).then(|| ConfigStore {
        keypairs: Some(
            spec.key_store
                .clone()
                .unwrap_or_else(|| kops_api::store_path::join(base, "pki")),
        ),
        secrets: Some(
            spec.secret_store
                .clone()
                .unwrap_or_else(|| kops_api::store_path::join(base, "secrets")),
        ),
    })
}

/// The node's downloads per architecture.
fn assets_by_arch(
    v: &NodeView<'_>,
    versioned: &Cluster,
    install_cni_assets: bool,
) -> Result<BTreeMap<String, Vec<String>>, AssetError> {
    let completed = &v.completed;
    // kops leaves out the CNI plugins when the CNI brings its own, and the
    // runtime (containerd and runc, the list's last two) when the image has
    // it (`containerd.skipInstall`).
    let skip_runtime = completed
        .get("containerd")
        .and_then(|c| c.get("skipInstall"))
        .and_then(Value::as_bool)
        == Some(true);
    let mut assets_by_arch = BTreeMap::new();
    for arch in Arch::ALL {
        let mut list = assets::node_assets(versioned, arch)?;
        if skip_runtime {
            list.truncate(list.len().saturating_sub(2));
        }
        if !install_cni_assets {
            list.retain(|a| {
                a.urls.first().and_then(|u| assets::AssetKind::from_url(u))
                    != Some(assets::AssetKind::CniPlugins)
            });
        }
        assets_by_arch.insert(
            arch.as_str().to_string(),
            list.iter().map(|a| a.compact()).collect(),
        );
    }
    Ok(assets_by_arch)
}

/// The kubelet as kops' instance-group populate step leaves it: the
/// completed spec's (the control plane's own for control planes), the
/// group's laid over it, the role's labels and taints added.
fn kubelet_config(v: &NodeView<'_>, service_range: &str) -> Result<Settings, ConfigError> {
    let (completed, group_json) = (&v.completed, &v.group_json);
    let (group, role, inputs, control_plane) = (v.group, v.role, v.inputs, v.control_plane);
    // The kubelet as kops' instance-group populate step leaves it: the
    // completed spec's (the control plane's own for control planes), the
    // group's laid over it, the role's labels and taints added.
    let mut kubelet = object_at(
        completed,
        if control_plane {
            "masterKubelet"
        } else {
            "kubelet"
        },
    );
    if control_plane
        && completed
            .get("kubelet")
            .and_then(|k| k.get("anonymousAuth"))
            == Some(&json!(false))
    {
        kubelet.insert("anonymousAuth".into(), json!(false));
    }
    let mut labels: BTreeMap<String, Value> = kubelet
        .get("nodeLabels")
        .and_then(Value::as_object)
        .map(|m| m.clone().into_iter().collect())
        .unwrap_or_default();
    let group_kubelet = group_json.get("kubelet").filter(|v| !v.is_null());
    if let Some(Value::Object(l)) = group_kubelet.and_then(|k| k.get("nodeLabels")) {
        labels.extend(l.clone());
    }
    let own: &[&str] = match role {
        Role::ControlPlane => &[
            "kops.k8s.io/kops-controller-pki",
            "node-role.kubernetes.io/control-plane",
            "node.kubernetes.io/exclude-from-external-load-balancers",
        ],
        Role::ApiServer => &["node-role.kubernetes.io/api-server"],
        Role::Node => &["node-role.kubernetes.io/node"],
        Role::Bastion => &[],
    };
    for l in own {
        labels.insert((*l).to_string(), json!(""));
    }
    // kops labels control planes as API servers too when its APIServerNodes
    // feature is on, which a cluster with API server groups must have.
    let has_api_server_groups = inputs
        .instance_groups
        .iter()
        .flatten()
        .any(|g| g.role() == Some(Role::ApiServer));
    if control_plane && has_api_server_groups {
        labels.insert("node-role.kubernetes.io/api-server".into(), json!(""));
    }
    let gpu = has_gpu(completed, group_json, group.spec.machine_type.as_deref());
    let mut group_taints: Vec<String> = group.spec.taints.iter().flatten().cloned().collect();
    if gpu {
        labels.insert("kops.k8s.io/gpu".into(), json!("1"));
        if !group_taints.iter().any(|t| t.starts_with("nvidia.com/gpu")) {
            group_taints.push("nvidia.com/gpu:NoSchedule".into());
        }
    }
    for (k, v) in group.node_labels() {
        labels.insert(k, json!(v));
    }
    let mut taints: std::collections::BTreeSet<String> = strings_at(
        &Value::Object(kubelet.clone().into_iter().collect()),
        "taints",
    )
    .into_iter()
    .collect();
    taints.extend(group_taints);
    if let Some(k) = group_kubelet {
        taints.extend(strings_at(k, "taints"));
    }
    if let Some(k) = completed.get("kubelet") {
        taints.extend(strings_at(k, "taints"));
    }
    if let Some(Value::Object(k)) = group_kubelet {
        overlay(&mut kubelet, k.clone().into_iter().collect());
    }
    match role {
        Role::ControlPlane => {
            taints.insert("node-role.kubernetes.io/control-plane=:NoSchedule".into());
        }
        Role::ApiServer => {
            taints.insert("node-role.kubernetes.io/api-server=:NoSchedule".into());
        }
        _ => {}
    }
    if group.spec.manager.as_deref() == Some("Karpenter") {
        taints.insert("karpenter.sh/unregistered=:NoExecute".into());
    }
    kubelet.insert("nodeLabels".into(), json!(labels));
    if taints.is_empty() {
        kubelet.remove("taints");
    } else {
        kubelet.insert("taints".into(), json!(taints));
    }
    if !kubelet.contains_key("clusterDNS") {
        kubelet.insert("clusterDNS".into(), json!(cluster_dns(service_range)?));
    }
    Ok(kubelet)
}

/// containerd as the completed spec has it (the group's laid over it);
/// gVisor's settings only on a group that runs it; the NVIDIA driver.
fn containerd_config(v: &NodeView<'_>) -> (Settings, Option<GVisorConfig>, Option<Value>) {
    let (completed, group_json, group) = (&v.completed, &v.group_json, v.group);
    // containerd as the completed spec has it (the group's laid over it);
    // gVisor's settings only on a group that runs it.
    let mut containerd = object_at(completed, "containerd");
    if let Some(Value::Object(c)) = group_json.get("containerd") {
        overlay(&mut containerd, c.clone().into_iter().collect());
    }
    let gvisor = group.has_gvisor().then(|| {
        let mut gvisor = group.gvisor().cloned().unwrap_or_default();
        if gvisor.platform.as_deref().is_none_or(str::is_empty) {
            gvisor.platform = Some(GVISOR_DEFAULT_PLATFORM.to_string());
        }
        gvisor
    });
    if gvisor.is_none() {
        containerd.remove("gvisor");
    }
    let nvidia_gpu = containerd
        .get("nvidiaGPU")
        .filter(|g| !g.is_null())
        .cloned()
        .map(|mut g| {
            if let Value::Object(m) = &mut g {
                m.entry("package")
                    .or_insert_with(|| json!("nvidia-driver-535-server"));
            }
            g
        });
    (containerd, gvisor, nvidia_gpu)
}

/// What nodeup hears of the cluster's network.
struct NodeNetworking {
    networking: Settings,
    default_machine_type: Option<String>,
    use_cilium_etcd: bool,
    uses_kubenet: bool,
}

/// The node's ranges and its CNI's block with only what nodeup needs of it
/// (as kops passes it).
fn node_networking(
    v: &NodeView<'_>,
    non_masquerade: String,
    service_range: String,
) -> NodeNetworking {
    let (spec_json, networking_json, group) = (&v.spec_json, &v.networking_json, v.group);
    let spec = &v.cluster.spec;
    let runs_api_server = v.runs_api_server;
    let has_cni = |name: &str| v.has_cni(name);
    let mut networking: Settings = [
        ("nonMasqueradeCIDR", json!(non_masquerade)),
        ("serviceClusterIPRange", json!(service_range)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    // kops passes each CNI's block with only what nodeup needs of it.
    let first_machine_type = || {
        group
            .spec
            .machine_type
            .as_deref()
            .map(|m| m.split(',').next().unwrap_or_default().to_string())
    };
    let mut default_machine_type = None;
    if has_cni("amazonvpc") {
        networking.insert("amazonVPC".into(), json!({}));
        default_machine_type = first_machine_type();
    }
    if let Some(calico) = networking_json.get("calico").filter(|v| !v.is_null()) {
        let mut c = Map::new();
        if let Some(w) = calico
            .get("wireguardEnabled")
            .filter(|v| v.as_bool() == Some(true))
        {
            c.insert("wireguardEnabled".into(), w.clone());
        }
        networking.insert("calico".into(), Value::Object(c));
    }
    let mut use_cilium_etcd = false;
    if let Some(cilium) = networking_json.get("cilium").filter(|v| !v.is_null()) {
        let mut c = Map::new();
        if cilium.get("ipam").and_then(Value::as_str) == Some("eni") {
            c.insert("ipam".into(), json!("eni"));
            default_machine_type = first_machine_type();
        }
        networking.insert("cilium".into(), Value::Object(c));
        use_cilium_etcd = spec
            .etcd_clusters
            .iter()
            .flatten()
            .any(|e| e.name == "cilium");
    }
    if networking_json
        .get("cni")
        .and_then(|c| c.get("usesSecondaryIP"))
        .and_then(Value::as_bool)
        == Some(true)
    {
        networking.insert("cni".into(), json!({"usesSecondaryIP": true}));
    }
    for (spec_name, name) in [
        ("flannel", "flannel"),
        ("kuberouter", "kubeRouter"),
        ("kindnet", "kindnet"),
    ] {
        if has_cni(spec_name) {
            networking.insert(name.into(), json!({}));
        }
    }
    if runs_api_server {
        if let Some(p) = spec_json.get("egressProxy").filter(|v| !v.is_null()) {
            networking.insert("egressProxy".into(), p.clone());
        }
    }
    let uses_kubenet = ["kubenet", "gce", "external", "kopeio"]
        .iter()
        .any(|n| has_cni(n));
    NodeNetworking {
        networking,
        default_machine_type,
        use_cilium_etcd,
        uses_kubenet,
    }
}

/// What a node that runs the API server is told of it.
fn api_server_config(v: &NodeView<'_>, dns_domain: String) -> ApiServerConfig {
    let (completed, spec_json, inputs) = (&v.completed, &v.spec_json, v.inputs);
    let api = object_at(completed, "kubeAPIServer");
    // Of the API spec, nodes get the names and how the API is reached.
    let user_api = spec_json.get("api").cloned().unwrap_or(Value::Null);
    let mut api_spec = Settings::new();
    // The public name as the user or kops' populate step set it (a
    // hosted zone or public DNS); gossip and `dns: None` clusters have
    // none, and kops writes none.
    if let Some(public) = user_api
        .get("publicName")
        .filter(|v| v.as_str().is_some_and(|s| !s.is_empty()))
        .or_else(|| {
            completed
                .get("masterPublicName")
                .filter(|v| v.as_str().is_some_and(|s| !s.is_empty()))
        })
    {
        api_spec.insert("publicName".into(), public.clone());
    }
    if let Some(sans) = user_api.get("additionalSANs").filter(|v| !v.is_null()) {
        api_spec.insert("additionalSANs".into(), sans.clone());
    }
    let load_balancer = user_api.get("loadBalancer").filter(|v| !v.is_null());
    if user_api.get("dns").is_some_and(|v| !v.is_null()) || load_balancer.is_none() {
        api_spec.insert("dns".into(), json!({}));
    }
    if load_balancer
        .and_then(|lb| {
            lb.get("useForInternalApi")
                .or_else(|| lb.get("useForInternalAPI"))
        })
        .and_then(Value::as_bool)
        == Some(true)
    {
        api_spec.insert("loadBalancer".into(), json!({"useForInternalAPI": true}));
    }
    // Authentication as configured, except that AWS IAM's settings
    // stay with its addon.
    let authentication = spec_json
        .get("authentication")
        .filter(|v| !v.is_null())
        .cloned()
        .map(|mut a| {
            if let Some(aws) = a.get_mut("aws").filter(|v| !v.is_null()) {
                *aws = json!({});
            }
            a
        });
    ApiServerConfig {
        api: api_spec,
        authentication,
        cluster_dns_domain: dns_domain.clone(),
        encryption_config_secret_hash: String::new(),
        kube_api_server: api,
        service_account_public_keys: inputs.service_account_public_keys.clone(),
        extra: Settings::new(),
    }
}

/// Hooks, file assets and static manifests for the node's role.
fn hooks_and_files(v: &NodeView<'_>) -> (Vec<Option<Vec<Value>>>, Vec<Value>, Vec<StaticManifest>) {
    let (completed, spec_json, group_json) = (&v.completed, &v.spec_json, &v.group_json);
    let (role, inputs, runs_api_server) = (v.role, v.inputs, v.runs_api_server);
    let applies = |item: &Value| match item.get("roles").and_then(Value::as_array) {
        Some(roles) if !roles.is_empty() => roles
            .iter()
            .filter_map(Value::as_str)
            .any(|r| Role::parse(r) == Some(role)),
        _ => true,
    };
    let for_role = |list: Option<&Value>| -> Option<Vec<Value>> {
        let items: Vec<Value> = list
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|i| applies(i))
            .map(|i| {
                let mut i = i.clone();
                if let Value::Object(m) = &mut i {
                    m.remove("roles");
                }
                i
            })
            .collect();
        (!items.is_empty()).then_some(items)
    };
    let hooks = vec![
        for_role(group_json.get("hooks")),
        for_role(spec_json.get("hooks")),
    ];
    let mut file_assets: Vec<Value> = for_role(group_json.get("fileAssets"))
        .into_iter()
        .chain(for_role(spec_json.get("fileAssets")))
        .flatten()
        .collect();
    let mut static_manifests = Vec::new();
    if runs_api_server {
        // kops' own files for nodes that run the API server: the
        // scheduler's config and the API server's health check.
        file_assets.push(json!({
            "content": scheduler_config(completed, &inputs.additional_objects),
            "path": "/var/lib/kube-scheduler/config.yaml",
        }));
        static_manifests.push(StaticManifest {
            key: "kube-apiserver-healthcheck".into(),
            path: "manifests/static/kube-apiserver-healthcheck.yaml".into(),
        });
    }
    (hooks, file_assets, static_manifests)
}

/// The custom sysctl parameters of the group, then of the cluster.
fn sysctl_parameters(v: &NodeView<'_>) -> Vec<String> {
    let (spec_json, group_json) = (&v.spec_json, &v.group_json);
    let mut sysctl_parameters = Vec::new();
    for (list, from) in [
        (group_json.get("sysctlParameters"), "instance group"),
        (spec_json.get("sysctlParameters"), "cluster"),
    ] {
        let list: Vec<String> = list
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect();
        if !list.is_empty() {
            sysctl_parameters.push(format!("# Custom sysctl parameters from {from} spec"));
            sysctl_parameters.push(String::new());
            sysctl_parameters.extend(list);
        }
    }
    sysctl_parameters
}

/// A control plane's channel manifest, its etcd members' manifests and the
/// DNS zone.
fn control_plane_manifests(
    v: &NodeView<'_>,
    base: &str,
) -> (Option<String>, Vec<String>, Option<String>) {
    let (spec, group, inputs) = (&v.cluster.spec, v.group, v.inputs);
    let control_plane = v.control_plane;
    if control_plane {
        let manifests = spec
            .etcd_clusters
            .iter()
            .flatten()
            .flat_map(|c| {
                c.etcd_members
                    .iter()
                    .filter(|m| m.instance_group.as_deref() == Some(group.name()))
                    .map(move |_| {
                        let manifest = format!("manifests/etcd/{}-{}.yaml", c.name, group.name());
                        kops_api::store_path::join(base, &manifest)
                    })
            })
            .collect();
        (
            Some(kops_api::store_path::join(
                base,
                "manifests/channels/kops-channels.yaml",
            )),
            manifests,
            spec.dns_zone.clone().or_else(|| inputs.dns_zone.clone()),
        )
    } else {
        (None, Vec::new(), None)
    }
}

/// Settings kops passes beside the typed ones: AWS's for API servers,
/// IP-based node names, the discovery service.
fn extra_settings(v: &NodeView<'_>) -> Settings {
    let spec_json = &v.spec_json;
    let (runs_api_server, ipv6) = (v.runs_api_server, v.ipv6);
    let mut extra = Settings::new();
    let aws = spec_json
        .get("cloudProvider")
        .and_then(|c| c.get("aws"))
        .cloned()
        .unwrap_or(Value::Null);
    if runs_api_server {
        for key in [
            "disableSecurityGroupIngress",
            "elbSecurityGroup",
            "nlbSecurityGroupMode",
            "nodeIPFamilies",
        ] {
            if let Some(v) = aws.get(key).filter(|v| !v.is_null()) {
                extra.insert(key.into(), v.clone());
            }
        }
        // IPv6 clusters prefer IPv6 node addresses (kops' default).
        if ipv6 && !extra.contains_key("nodeIPFamilies") {
            extra.insert("nodeIPFamilies".into(), json!(["ipv6", "ipv4"]));
        }
    }
    if aws.get("useIPBasedNodeNames").and_then(Value::as_bool) == Some(true) {
        extra.insert("useIPBasedNodeNames".into(), json!(true));
    }
    if let Some(url) = spec_json
        .get("serviceAccountIssuerDiscovery")
        .and_then(|d| d.get("discoveryService"))
        .filter(|v| !v.is_null())
        .map(|d| d.get("url").cloned().unwrap_or(json!("")))
    {
        let mut d = Map::new();
        if url.as_str().is_some_and(|u| !u.is_empty()) {
            d.insert("url".into(), url);
        }
        extra.insert("discoveryServiceWithUniverse".into(), Value::Object(d));
    }
    extra
}

/// Google Cloud: the cloud provider's view of the nodes (kops copies them
/// from the completed spec's cloud config).
fn gce_settings(v: &NodeView<'_>, name: &str) -> (Option<bool>, Option<String>) {
    let spec = &v.cluster.spec;
    let completed = &v.completed;
    // Google Cloud: the cloud provider's view of the nodes (kops copies
    // them from the completed spec's cloud config).
    let gce = spec.cloud_provider.as_deref() == Some("gce");
    let gce_config = completed.get("cloudConfig");
    let multizone = gce.then(|| {
        gce_config
            .and_then(|c| c.get("multizone"))
            .and_then(Value::as_bool)
            .unwrap_or(true)
    });
    let node_tags = gce.then(|| {
        gce_config
            .and_then(|c| c.get("nodeTags"))
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| kops_api::names::gce_tag_for_role(name, "node"))
    });
    (multizone, node_tags)
}

/// kops' images under `KOPS_BASE_URL` that nodes of `role` load.
fn base_url_images(role: Role, inputs: &NodeInputs) -> BTreeMap<String, Vec<NodeImage>> {
    let image_names: &[&str] = match role {
        Role::ControlPlane => &BASE_URL_IMAGES,
        Role::ApiServer => &["kube-apiserver-healthcheck"],
        _ => &[],
    };
    let mut images: BTreeMap<String, Vec<NodeImage>> = BTreeMap::new();
    for arch in Arch::ALL {
        for name in image_names {
            if let Some(i) = inputs
                .base_url_images
                .iter()
                .find(|i| i.arch == arch && i.name == *name)
            {
                images
                    .entry(arch.as_str().to_string())
                    .or_default()
                    .push(NodeImage {
                        hash: i.sha256.clone(),
                        sources: vec![i.url.clone()],
                    });
            }
        }
    }
    images
}

/// kube-scheduler's config file as kops writes it: the cluster's
/// `KubeSchedulerConfiguration` object (or an empty one), pointed at the
/// scheduler's kubeconfig, with `kubeScheduler.qps`/`burst` as its client
/// connection's.
fn scheduler_config(completed: &Value, additional_objects: &[Value]) -> String {
    let mut matches = additional_objects.iter().filter(|o| {
        o.get("kind").and_then(Value::as_str) == Some("KubeSchedulerConfiguration")
            && o.get("apiVersion")
                .and_then(Value::as_str)
                .is_some_and(|v| v.split('/').next() == Some("kubescheduler.config.k8s.io"))
    });
    let mut config = match (matches.next(), matches.next()) {
        (Some(one), None) => one.clone(),
        _ => json!({
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
        }),
    };
    let Value::Object(root) = &mut config else {
        return String::new();
    };
    let connection = root.entry("clientConnection").or_insert_with(|| json!({}));
    if !connection.is_object() {
        *connection = json!({});
    }
    if let Value::Object(c) = connection {
        c.insert(
            "kubeconfig".into(),
            json!("/var/lib/kube-scheduler/kubeconfig"),
        );
        let scheduler = completed.get("kubeScheduler");
        if let Some(qps) = scheduler.and_then(|s| s.get("qps")).and_then(quantity) {
            c.insert("qps".into(), json!(qps));
        }
        if let Some(burst) = scheduler
            .and_then(|s| s.get("burst"))
            .and_then(Value::as_i64)
            .filter(|b| *b != 0)
        {
            c.insert("burst".into(), json!(burst));
        }
    }
    kops_api::to_yaml(&config)
}

/// A decimal quantity (`3.1`, `"3.1"`, `"500m"`) as a number.
fn quantity(value: &Value) -> Option<f64> {
    match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => match s.strip_suffix('m') {
            Some(milli) => milli.parse::<f64>().ok().map(|m| m / 1000.0),
            None => s.parse().ok(),
        },
        _ => None,
    }
}

/// Whether the group's warm pool (its own laid over the cluster's, none for
/// control planes and bastions unless they set one) is on and waits for
/// nodeup through a lifecycle hook.
fn warm_pool_lifecycle_hook(spec: &Value, group: &Value, role: Role) -> bool {
    let present = |v: Option<&Value>| v.filter(|v| !v.is_null()).cloned();
    let cluster = present(spec.get("warmPool")).or_else(|| {
        present(
            spec.get("cloudProvider")
                .and_then(|c| c.get("aws"))
                .and_then(|a| a.get("warmPool")),
        )
    });
    let own = present(group.get("warmPool"));
    let inherits = !matches!(role, Role::ControlPlane | Role::Bastion);
    let resolved = match (own, cluster) {
        (None, Some(c)) if inherits => c,
        (None, _) => return false,
        (Some(o), Some(c)) if inherits => {
            let mut o = o;
            if let Value::Object(m) = &mut o {
                if m.get("maxSize").is_none_or(Value::is_null) {
                    if let Some(v) = c.get("maxSize") {
                        m.insert("maxSize".into(), v.clone());
                    }
                }
                if m.get("enableLifecycleHook").and_then(Value::as_bool) != Some(true) {
                    if let Some(v) = c.get("enableLifecycleHook") {
                        m.insert("enableLifecycleHook".into(), v.clone());
                    }
                }
            }
            o
        }
        (Some(o), _) => o,
    };
    let enabled = resolved.get("maxSize").and_then(Value::as_i64) != Some(0);
    enabled && resolved.get("enableLifecycleHook").and_then(Value::as_bool) == Some(true)
}

/// The object at `key` of the completed spec, as settings (empty when absent).
fn object_at(completed: &Value, key: &str) -> Settings {
    match completed.get(key) {
        Some(Value::Object(m)) => m.clone().into_iter().collect(),
        _ => Settings::new(),
    }
}

/// The strings of the list at `key`.
fn strings_at(value: &Value, key: &str) -> Vec<String> {
    value
        .get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect()
}

/// Whether the group gets kops' GPU label and taint: NVIDIA enabled (the
/// cluster's or the group's containerd) on an AWS GPU instance family
/// (g*, p*; kops asks EC2, kops-rs goes by the family's name).
fn has_gpu(completed: &Value, group: &Value, machine_type: Option<&str>) -> bool {
    let enabled = |v: Option<&Value>| {
        v.and_then(|c| c.get("nvidiaGPU"))
            .and_then(|g| g.get("enabled"))
            .and_then(Value::as_bool)
            == Some(true)
    };
    if !enabled(completed.get("containerd")) && !enabled(group.get("containerd")) {
        return false;
    }
    let family = machine_type
        .unwrap_or_default()
        .split(',')
        .next()
        .unwrap_or_default()
        .split('.')
        .next()
        .unwrap_or_default();
    let mut chars = family.chars();
    matches!(chars.next(), Some('g' | 'p')) && chars.next().is_some_and(|c| c.is_ascii_digit())
}

/// The CA bundles and keypair ids a node of `role` is given, as kops picks
/// them: every node the cluster CA (a worker's bundle goes to its boot
/// config, only the id stays), the control plane etcd's CAs, nodes that run
/// the API server the aggregator CA and the service-account key. Keysets the
/// cluster does not have are left out.
fn trusted_keys(
    cluster: &Cluster,
    role: Role,
    inputs: &NodeInputs,
) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let mut cas = BTreeMap::new();
    let mut ids = BTreeMap::new();
    if role == Role::Bastion {
        return (cas, ids);
    }
    let keyset = |name: &str| inputs.keysets.get(name);
    let trust =
        |name: &str, cas: &mut BTreeMap<String, String>, ids: &mut BTreeMap<String, String>| {
            if let Some(k) = keyset(name) {
                cas.insert(name.to_string(), k.certificates.clone());
                if !k.primary_id.is_empty() {
                    ids.insert(name.to_string(), k.primary_id.clone());
                }
            }
        };
    let pin = |name: &str, ids: &mut BTreeMap<String, String>| {
        if let Some(k) = keyset(name).filter(|k| !k.primary_id.is_empty()) {
            ids.insert(name.to_string(), k.primary_id.clone());
        }
    };
    let control_plane = role == Role::ControlPlane;
    let runs_api_server = matches!(role, Role::ControlPlane | Role::ApiServer);
    trust("kubernetes-ca", &mut cas, &mut ids);
    trust("etcd-clients-ca-cilium", &mut cas, &mut ids);
    if control_plane {
        trust("etcd-clients-ca", &mut cas, &mut ids);
        for etcd in cluster.spec.etcd_clusters.iter().flatten() {
            let k = &etcd.name;
            trust(&format!("etcd-manager-ca-{k}"), &mut cas, &mut ids);
            trust(&format!("etcd-peers-ca-{k}"), &mut cas, &mut ids);
            if !matches!(k.as_str(), "events" | "main" | "leases") {
                trust(&format!("etcd-clients-ca-{k}"), &mut cas, &mut ids);
            }
        }
        pin("service-account", &mut ids);
        let discovery_url = serde_json::to_value(&cluster.spec)
            .ok()
            .and_then(|s| {
                s.get("serviceAccountIssuerDiscovery")?
                    .get("discoveryService")?
                    .get("url")?
                    .as_str()
                    .map(str::to_string)
            })
            .filter(|u| !u.is_empty());
        if discovery_url.is_some() {
            pin("discovery-ca", &mut ids);
        }
    } else {
        pin("etcd-client-cilium", &mut ids);
    }
    if runs_api_server {
        trust("apiserver-aggregator-ca", &mut cas, &mut ids);
        trust("etcd-clients-ca", &mut cas, &mut ids);
        pin("service-account", &mut ids);
    } else {
        for name in ["kubelet", "kube-proxy", "kube-router"] {
            pin(name, &mut ids);
        }
        // Workers get the cluster CA with the address of kops-controller.
        if inputs.config_server {
            cas.remove("kubernetes-ca");
        }
    }
    (cas, ids)
}
