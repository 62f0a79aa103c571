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
//! Differences from kops, on purpose: kops-rs has no kops-controller, so
//! every node (not only the control plane) reads its config, CAs and
//! secrets from the state store (`configStore`); and `CAs`/`KeypairIDs` stay
//! empty because the config is built from the spec alone (nodeup reads the
//! keysets from `configStore.keypairs`). That keeps the config, and the hash
//! the user data carries, a pure function of the spec.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use base64::Engine;
use kops_api::{Cluster, InstanceGroup, Role};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use crate::assets::{self, Arch, AssetError};

/// Settings as an ordered map (keys come out sorted, as kops writes them).
pub type Settings = BTreeMap<String, Value>;

/// The pause image containerd's sandbox uses.
pub const SANDBOX_IMAGE: &str = "registry.k8s.io/pause:3.10.1";
/// Where Kubernetes images come from unless `spec.assets.containerRegistry` says otherwise.
pub const DEFAULT_REGISTRY: &str = "registry.k8s.io";

/// kops' `nodeup.Config`, the fields kops-rs writes and reads (others are kept).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeupConfig {
    #[serde(
        rename = "APIServerConfig",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub api_server_config: Option<ApiServerConfig>,
    /// Per architecture, `sha256@url[,url...]`.
    #[serde(rename = "Assets", default)]
    pub assets: BTreeMap<String, Vec<String>>,
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
    #[serde(
        rename = "EtcdClusterNames",
        skip_serializing_if = "Vec::is_empty",
        default
    )]
    pub etcd_cluster_names: Vec<String>,
    #[serde(rename = "InstallCNIAssets", skip_serializing_if = "is_false", default)]
    pub install_cni_assets: bool,
    #[serde(rename = "KeypairIDs", default)]
    pub keypair_ids: BTreeMap<String, String>,
    #[serde(rename = "KubeProxy", skip_serializing_if = "Option::is_none", default)]
    pub kube_proxy: Option<Settings>,
    #[serde(rename = "KubeletConfig", default)]
    pub kubelet_config: Settings,
    #[serde(rename = "KubernetesVersion", default)]
    pub kubernetes_version: String,
    #[serde(rename = "Networking", default)]
    pub networking: Settings,
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
    #[serde(rename = "usesNoneDNS", default)]
    pub uses_none_dns: bool,
    /// Fields kops writes that kops-rs does not model.
    #[serde(flatten)]
    pub extra: Settings,
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
        rename = "ServiceAccountPublicKeys",
        skip_serializing_if = "String::is_empty",
        default
    )]
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
    #[error("`{field}` `{value}` is not an IPv4 CIDR kops-rs can derive the cluster DNS address from\nhint: set `spec.kubelet.clusterDNS` to the DNS service address")]
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

/// The YAML kops-rs stores (sorted keys, as kops writes them).
pub fn render_yaml(config: &NodeupConfig) -> String {
    serde_yaml_ng::to_string(config).unwrap_or_default()
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

/// Builds and renders the node config of one group. `None` for bastions
/// (kops gives them no node config: they do not run nodeup).
pub fn rendered(
    cluster: &Cluster,
    group: &InstanceGroup,
    config_base: &str,
) -> Result<Option<RenderedNodeupConfig>, ConfigError> {
    let role = group.role().ok_or_else(|| ConfigError::NoRole {
        group: group.name().to_string(),
    })?;
    if role == Role::Bastion {
        return Ok(None);
    }
    let config = nodeup_config(cluster, group, config_base)?;
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
    for group in groups {
        if group.spec.manager.as_deref() == Some("Karpenter") {
            continue;
        }
        if let Some(r) = rendered(cluster, group, config_base)? {
            out.push(r);
        }
    }
    Ok(out)
}

fn to_settings(value: &impl Serialize) -> Settings {
    match serde_json::to_value(value) {
        Ok(Value::Object(map)) => map.into_iter().collect(),
        _ => Settings::new(),
    }
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

fn registry(cluster: &Cluster) -> String {
    cluster
        .spec
        .assets
        .as_ref()
        .and_then(|a| a.container_registry.clone())
        .filter(|r| !r.is_empty())
        .unwrap_or_else(|| DEFAULT_REGISTRY.to_string())
}

/// The 10th address of the service range (where kube-dns/CoreDNS listens).
fn cluster_dns(service_range: &str) -> Result<String, ConfigError> {
    let bad = || ConfigError::BadServiceRange {
        field: "spec.serviceClusterIPRange".into(),
        value: service_range.to_string(),
    };
    let (addr, _) = service_range.split_once('/').ok_or_else(bad)?;
    let ip: Ipv4Addr = addr.parse().map_err(|_| bad())?;
    Ok(Ipv4Addr::from(u32::from(ip).wrapping_add(10)).to_string())
}

/// Builds a group's node config from the cluster spec (kops' defaults for
/// whatever the spec leaves out). `config_base` is the cluster's directory
/// in the state store (`s3://bucket/<cluster>`, `file:///...`).
pub fn nodeup_config(
    cluster: &Cluster,
    group: &InstanceGroup,
    config_base: &str,
) -> Result<NodeupConfig, ConfigError> {
    let asset_error = |source| ConfigError::Asset {
        group: group.name().to_string(),
        source: Box::new(source),
    };
    let role = group.role().ok_or_else(|| ConfigError::NoRole {
        group: group.name().to_string(),
    })?;
    let spec = &cluster.spec;
    let k8s = assets::kubernetes_version(cluster).map_err(asset_error)?;
    let version = k8s.to_string();
    let registry = registry(cluster);
    let name = cluster.name().to_string();
    let service_range = spec
        .service_cluster_ip_range
        .clone()
        .unwrap_or_else(|| "100.64.0.0/13".into());
    let non_masquerade = spec
        .non_masquerade_cidr
        .clone()
        .unwrap_or_else(|| "100.64.0.0/10".into());
    let pod_cidr = spec
        .pod_cidr
        .clone()
        .unwrap_or_else(|| "100.96.0.0/11".into());
    let dns_domain = spec
        .cluster_dns_domain
        .clone()
        .unwrap_or_else(|| "cluster.local".into());
    let control_plane = matches!(role, Role::ControlPlane);
    let runs_api_server = matches!(role, Role::ControlPlane | Role::ApiServer);

    let mut assets_by_arch = BTreeMap::new();
    for arch in Arch::ALL {
        let list = assets::node_assets(cluster, arch).map_err(asset_error)?;
        assets_by_arch.insert(
            arch.as_str().to_string(),
            list.iter().map(|a| a.compact()).collect(),
        );
    }

    // kubelet: kops' defaults, then the cluster's (or control plane's), then the group's.
    let mut kubelet: Settings = [
        ("cgroupDriver", json!("systemd")),
        ("cgroupRoot", json!("/")),
        ("cloudProvider", json!("external")),
        ("clusterDomain", json!(dns_domain)),
        ("enableDebuggingHandlers", json!(true)),
        (
            "evictionHard",
            json!("memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%,imagefs.available<10%,imagefs.inodesFree<5%"),
        ),
        ("kubeconfigPath", json!("/var/lib/kubelet/kubeconfig")),
        ("logLevel", json!(2)),
        ("podManifestPath", json!("/etc/kubernetes/manifests")),
        ("protectKernelDefaults", json!(true)),
        ("shutdownGracePeriod", json!("30s")),
        ("shutdownGracePeriodCriticalPods", json!("10s")),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    if let Some(k) = &spec.kubelet {
        overlay(&mut kubelet, to_settings(k));
    }
    if control_plane {
        if let Some(k) = &spec.master_kubelet {
            overlay(&mut kubelet, to_settings(k));
        }
    }
    if let Some(k) = &group.spec.kubelet {
        overlay(&mut kubelet, to_settings(k));
    }
    if !kubelet.contains_key("clusterDNS") {
        kubelet.insert("clusterDNS".into(), json!(cluster_dns(&service_range)?));
    }
    let mut labels: BTreeMap<String, String> = BTreeMap::new();
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
        labels.insert((*l).to_string(), String::new());
    }
    for (k, v) in group.spec.node_labels.iter().flatten() {
        labels.insert(k.clone(), v.clone());
    }
    kubelet.insert("nodeLabels".into(), json!(labels));
    let mut taints: Vec<String> = Vec::new();
    if control_plane {
        taints.push("node-role.kubernetes.io/control-plane=:NoSchedule".into());
    }
    taints.extend(group.spec.taints.iter().flatten().cloned());
    if !taints.is_empty() {
        kubelet.insert("taints".into(), json!(taints));
    }

    let kube_proxy = match spec.kube_proxy.as_ref().and_then(|p| p.enabled) {
        Some(false) => None,
        _ => {
            let mut p: Settings = [
                ("clusterCIDR", json!(pod_cidr)),
                ("cpuRequest", json!("100m")),
                ("image", json!(format!("{registry}/kube-proxy:{version}"))),
                ("logLevel", json!(2)),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
            if let Some(user) = &spec.kube_proxy {
                overlay(&mut p, to_settings(user));
            }
            Some(p)
        }
    };

    let (containerd_version, runc_version) = assets::runtime_versions(cluster);
    let mut containerd: Settings = [
        ("logLevel", json!("info")),
        ("runc", json!({"version": runc_version})),
        ("sandboxImage", json!(SANDBOX_IMAGE)),
        ("version", json!(containerd_version)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    if let Some(user) = &spec.containerd {
        let mut user = to_settings(user);
        user.remove("packages");
        if let Some(Value::Object(r)) = user.get_mut("runc") {
            r.remove("packages");
        }
        overlay(&mut containerd, user);
    }

    let networking: Settings = [
        ("nonMasqueradeCIDR", json!(non_masquerade)),
        ("serviceClusterIPRange", json!(service_range)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();

    let api_server_config = if runs_api_server {
        let public = spec
            .master_public_name
            .clone()
            .unwrap_or_else(|| format!("api.{name}"));
        let etcd_count = spec.etcd_clusters.as_ref().map_or(0, |e| {
            e.iter()
                .find(|c| c.name == "main")
                .map_or(0, |c| c.etcd_members.len())
        });
        // The discovery store's URL with IRSA, else the internal API name.
        let region = spec
            .subnets
            .iter()
            .flatten()
            .filter_map(|s| s.zone.as_deref())
            .find_map(kops_api::new_cluster::aws_zone_region)
            .unwrap_or_default();
        let issuer = cluster.service_account_issuer(&region);
        let mut api: Settings = [
            ("allowPrivileged", json!(true)),
            ("anonymousAuth", json!(false)),
            ("apiAudiences", json!(["kubernetes.svc.default"])),
            ("apiServerCount", json!(etcd_count.max(1))),
            ("authorizationMode", json!("Node,RBAC")),
            ("bindAddress", json!("0.0.0.0")),
            (
                "enableAdmissionPlugins",
                json!([
                    "DefaultStorageClass",
                    "DefaultTolerationSeconds",
                    "LimitRanger",
                    "MutatingAdmissionWebhook",
                    "NamespaceLifecycle",
                    "NodeRestriction",
                    "ResourceQuota",
                    "RuntimeClass",
                    "ServiceAccount",
                    "ValidatingAdmissionPolicy",
                    "ValidatingAdmissionWebhook"
                ]),
            ),
            ("etcdServers", json!(["https://127.0.0.1:4001"])),
            (
                "etcdServersOverrides",
                json!(["/events#https://127.0.0.1:4002"]),
            ),
            (
                "image",
                json!(format!("{registry}/kube-apiserver:{version}")),
            ),
            (
                "kubeletPreferredAddressTypes",
                json!(["InternalIP", "Hostname", "ExternalIP"]),
            ),
            ("logLevel", json!(2)),
            ("requestheaderAllowedNames", json!(["aggregator"])),
            (
                "requestheaderExtraHeaderPrefixes",
                json!(["X-Remote-Extra-"]),
            ),
            ("requestheaderGroupHeaders", json!(["X-Remote-Group"])),
            ("requestheaderUsernameHeaders", json!(["X-Remote-User"])),
            ("securePort", json!(443)),
            ("serviceAccountIssuer", json!(issuer)),
            (
                "serviceAccountJWKSURI",
                json!(format!("{issuer}/openid/v1/jwks")),
            ),
            ("serviceClusterIPRange", json!(service_range)),
            ("storageBackend", json!("etcd3")),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        if let Some(user) = &spec.kube_api_server {
            overlay(&mut api, to_settings(user));
        }
        let mut api_spec = spec.api.as_ref().map(to_settings).unwrap_or_default();
        if api_spec.is_empty() {
            api_spec.insert("dns".into(), json!({}));
        }
        api_spec
            .entry("publicName".into())
            .or_insert_with(|| json!(public));
        Some(ApiServerConfig {
            api: api_spec,
            cluster_dns_domain: dns_domain.clone(),
            kube_api_server: api,
            service_account_public_keys: String::new(),
            extra: Settings::new(),
        })
    } else {
        None
    };

    let control_plane_config = if control_plane {
        let mut kcm: Settings = [
            ("allocateNodeCIDRs", json!(true)),
            ("attachDetachReconcileSyncPeriod", json!("1m0s")),
            ("cloudProvider", json!("external")),
            ("clusterCIDR", json!(pod_cidr)),
            ("clusterName", json!(name)),
            ("configureCloudRoutes", json!(false)),
            (
                "image",
                json!(format!("{registry}/kube-controller-manager:{version}")),
            ),
            ("leaderElection", json!({"leaderElect": true})),
            ("logLevel", json!(2)),
            ("useServiceAccountCredentials", json!(true)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        if let Some(user) = &spec.kube_controller_manager {
            overlay(&mut kcm, to_settings(user));
        }
        let mut sched: Settings = [
            (
                "image",
                json!(format!("{registry}/kube-scheduler:{version}")),
            ),
            ("leaderElection", json!({"leaderElect": true})),
            ("logLevel", json!(2)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        if let Some(user) = &spec.kube_scheduler {
            overlay(&mut sched, to_settings(user));
        }
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

    let uses_none_dns = spec
        .topology
        .as_ref()
        .and_then(|t| t.dns.as_ref())
        .and_then(|d| d.kind.as_deref())
        == Some("None");

    let base = config_base.trim_end_matches('/');
    let config_store = ConfigStore {
        keypairs: Some(
            spec.key_store
                .clone()
                .unwrap_or_else(|| format!("{base}/pki")),
        ),
        secrets: Some(
            spec.secret_store
                .clone()
                .unwrap_or_else(|| format!("{base}/secrets")),
        ),
    };

    Ok(NodeupConfig {
        api_server_config,
        assets: assets_by_arch,
        cas: BTreeMap::new(),
        cluster_name: name,
        control_plane_config,
        etcd_cluster_names,
        install_cni_assets: true,
        keypair_ids: BTreeMap::new(),
        kube_proxy,
        kubelet_config: kubelet,
        kubernetes_version: version.trim_start_matches('v').to_string(),
        networking,
        sysctl_parameters: Vec::new(),
        update_policy: Some(
            spec.update_policy
                .clone()
                .unwrap_or_else(|| "automatic".into()),
        ),
        config_store: Some(config_store),
        containerd_config: Some(containerd),
        uses_none_dns,
        extra: Settings::new(),
    })
}
