//! The `Cluster` object (`kops.k8s.io/v1alpha2`).
//!
//! Every struct keeps the fields it does not model in `extra`, so a manifest
//! written by any kops version reads back unchanged. Values that need parsing
//! (CIDRs, versions, zones) stay strings here and are checked by
//! [`crate::validation`], which can then name the field that is wrong.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::components::{
    CloudConfiguration, CloudControllerManagerConfig, ContainerdConfig, KubeApiServerConfig,
    KubeControllerManagerConfig, KubeProxyConfig, KubeSchedulerConfig, KubeletConfig,
};
use crate::meta::{Extra, ObjectMeta, API_VERSION};
use crate::networking::NetworkingSpec;

/// A kops cluster: the desired state of one Kubernetes cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cluster {
    #[serde(default = "default_api_version")]
    pub api_version: String,
    #[serde(default = "default_cluster_kind")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: ClusterSpec,
    #[serde(flatten)]
    pub extra: Extra,
}

pub(crate) fn default_api_version() -> String {
    API_VERSION.to_string()
}

fn default_cluster_kind() -> String {
    "Cluster".to_string()
}

impl Cluster {
    /// An empty cluster object with the given name.
    pub fn new(name: impl Into<String>) -> Self {
        Cluster {
            api_version: default_api_version(),
            kind: default_cluster_kind(),
            metadata: ObjectMeta {
                name: name.into(),
                ..Default::default()
            },
            spec: ClusterSpec::default(),
            extra: Extra::new(),
        }
    }

    pub fn name(&self) -> &str {
        &self.metadata.name
    }

    /// `spec.api.loadBalancer.class` as written (`Network`, `Classic`).
    pub fn api_load_balancer_class(&self) -> Option<&str> {
        self.spec
            .api
            .as_ref()
            .and_then(|a| a.load_balancer.as_ref())
            .and_then(|lb| lb.class.as_deref())
    }

    /// The AWS region of the cluster: that of the first subnet zone that is
    /// an AWS availability zone (`None` on other clouds).
    pub fn aws_region(&self) -> Option<String> {
        self.spec
            .subnets
            .iter()
            .flatten()
            .filter_map(|s| s.zone.as_deref())
            .find_map(crate::zones::aws_region)
    }

    /// True when the cluster uses gossip DNS (`*.k8s.local`).
    pub fn is_gossip(&self) -> bool {
        crate::dns::is_gossip_name(&self.metadata.name)
    }

    /// The issuer the API server signs service-account tokens with, as kops
    /// sets it: `spec.kubeAPIServer.serviceAccountIssuer`, else the URL of
    /// `spec.serviceAccountIssuerDiscovery.discoveryStore` (see
    /// [`discovery_store_url`]; the bucket is taken to be in `region`), else
    /// the discovery service's URL, else `https://<api public name>` when
    /// anonymous clients may read the keys from anywhere, else
    /// `https://api.internal.<cluster>`.
    pub fn service_account_issuer(&self, region: &str) -> String {
        let spec = &self.spec;
        let api_server = spec.kube_api_server.as_ref();
        if let Some(issuer) = api_server
            .and_then(|a| a.extra.get("serviceAccountIssuer"))
            .and_then(|v| v.as_str())
            .filter(|s| !s.is_empty())
        {
            return issuer.to_string();
        }
        let discovery = spec.service_account_issuer_discovery.as_ref();
        let ipv6_only = spec
            .non_masquerade_cidr
            .as_deref()
            .is_some_and(|c| c.contains(':'));
        if let Some(url) = discovery
            .and_then(|d| d.discovery_store.as_deref())
            .filter(|s| !s.is_empty())
            .and_then(|store| discovery_store_url(store, region, ipv6_only))
        {
            return url;
        }
        if let Some(url) = discovery
            .and_then(|d| d.extra.get("discoveryService"))
            .and_then(|s| s.get("url"))
            .and_then(|u| u.as_str())
            .filter(|s| !s.is_empty())
        {
            return url.to_string();
        }
        let anonymous = api_server
            .and_then(|a| a.extra.get("anonymousAuth"))
            .and_then(|v| v.as_bool())
            == Some(true);
        let access = spec
            .api
            .as_ref()
            .and_then(|a| a.access.clone())
            .or_else(|| spec.kubernetes_api_access.clone())
            .unwrap_or_default();
        let open = access.iter().any(|c| c == "0.0.0.0/0" || c == "::/0");
        let public_name = spec
            .api
            .as_ref()
            .and_then(|a| a.public_name.clone())
            .or_else(|| spec.master_public_name.clone());
        match public_name {
            Some(name) if anonymous && open && !name.is_empty() => format!("https://{name}"),
            _ => format!("https://api.internal.{}", self.name()),
        }
    }
}

/// The `https://` URL of a service-account discovery store: its S3 address
/// (virtual-hosted for DNS-safe bucket names, path-style for names with
/// dots, dual-stack for IPv6-only clusters), or, for kops' test stores
/// (`memfs://`), the path itself. `None` for other schemes.
pub fn discovery_store_url(store: &str, region: &str, dual_stack: bool) -> Option<String> {
    if let Some(rest) = store.strip_prefix("memfs://") {
        return Some(format!("https://{}", rest.trim_end_matches('/')));
    }
    let rest = store.strip_prefix("s3://")?;
    let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
    let key = key.trim_matches('/');
    let suffix = if region.starts_with("cn-") {
        "amazonaws.com.cn"
    } else {
        "amazonaws.com"
    };
    let endpoint = if dual_stack {
        format!("s3.dualstack.{region}.{suffix}")
    } else {
        format!("s3.{region}.{suffix}")
    };
    let mut url = if bucket.contains('.') {
        format!("https://{endpoint}/{bucket}")
    } else {
        format!("https://{bucket}.{endpoint}")
    };
    if !key.is_empty() {
        url.push('/');
        url.push_str(key);
    }
    Some(url)
}

/// `spec` of a [`Cluster`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub addons: Option<Vec<AddonSpec>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_base: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cloud_provider: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container_runtime: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kubernetes_version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subnets: Option<Vec<ClusterSubnetSpec>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// The API's public DNS name (`api.<cluster>` by default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub master_public_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub master_internal_name: Option<String>,
    #[serde(rename = "networkCIDR", skip_serializing_if = "Option::is_none")]
    pub network_cidr: Option<String>,
    #[serde(
        rename = "additionalNetworkCIDRs",
        skip_serializing_if = "Option::is_none"
    )]
    pub additional_network_cidrs: Option<Vec<String>>,
    /// An existing VPC to use (shared, never modified or deleted).
    #[serde(rename = "networkID", skip_serializing_if = "Option::is_none")]
    pub network_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topology: Option<TopologySpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_store: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_store: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_store: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dns_zone: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_dns_domain: Option<String>,
    #[serde(
        rename = "serviceClusterIPRange",
        skip_serializing_if = "Option::is_none"
    )]
    pub service_cluster_ip_range: Option<String>,
    #[serde(rename = "podCIDR", skip_serializing_if = "Option::is_none")]
    pub pod_cidr: Option<String>,
    #[serde(rename = "nonMasqueradeCIDR", skip_serializing_if = "Option::is_none")]
    pub non_masquerade_cidr: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ssh_access: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_port_access: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ssh_key_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kubernetes_api_access: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub isolate_masters: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub update_policy: Option<String>,
    /// Extra managed IAM policy ARNs per role (`master`, `node`, `bastion`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external_policies: Option<BTreeMap<String, Vec<String>>>,
    /// Extra inline IAM policy documents per role.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additional_policies: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub etcd_clusters: Option<Vec<EtcdClusterSpec>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub containerd: Option<ContainerdConfig>,
    #[serde(rename = "kubeAPIServer", skip_serializing_if = "Option::is_none")]
    pub kube_api_server: Option<KubeApiServerConfig>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kube_controller_manager: Option<KubeControllerManagerConfig>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cloud_controller_manager: Option<CloudControllerManagerConfig>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kube_scheduler: Option<KubeSchedulerConfig>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kube_proxy: Option<KubeProxyConfig>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kubelet: Option<KubeletConfig>,
    /// Kubelet settings for control-plane nodes (`masterKubelet` in v1alpha2).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub master_kubelet: Option<KubeletConfig>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cloud_config: Option<CloudConfiguration>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external_dns: Option<ExternalDnsConfig>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_termination_handler: Option<NodeTerminationHandlerSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_problem_detector: Option<EnabledSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics_server: Option<EnabledSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cert_manager: Option<EnabledSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aws_load_balancer_controller: Option<AddonResourcesSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot_controller: Option<EnabledSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_autoscaler: Option<ClusterAutoscalerSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub karpenter: Option<KarpenterSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub networking: Option<NetworkingSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api: Option<ApiSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub authentication: Option<AuthenticationSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub authorization: Option<AuthorizationSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cloud_labels: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub assets: Option<AssetsSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iam: Option<IamSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warm_pool: Option<WarmPoolSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_account_issuer_discovery: Option<ServiceAccountIssuerDiscoveryConfig>,
    #[serde(
        rename = "serviceOIDCProvider",
        skip_serializing_if = "Option::is_none"
    )]
    pub service_oidc_provider: Option<ServiceOidcProviderSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub openstack_service_account: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<TargetSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rolling_update: Option<RollingUpdateSpec>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// An extra addon channel to install.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AddonSpec {
    #[serde(default)]
    pub manifest: String,
    #[serde(flatten)]
    pub extra: Extra,
}

/// The kind of a cluster subnet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SubnetType {
    Public,
    Private,
    Utility,
    DualStack,
}

impl SubnetType {
    pub const ALL: [SubnetType; 4] = [
        SubnetType::Public,
        SubnetType::Private,
        SubnetType::Utility,
        SubnetType::DualStack,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SubnetType::Public => "Public",
            SubnetType::Private => "Private",
            SubnetType::Utility => "Utility",
            SubnetType::DualStack => "DualStack",
        }
    }

    pub fn parse(s: &str) -> Option<SubnetType> {
        SubnetType::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

/// One subnet of the cluster's network.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSubnetSpec {
    #[serde(default)]
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cidr: Option<String>,
    #[serde(rename = "ipv6CIDR", skip_serializing_if = "Option::is_none")]
    pub ipv6_cidr: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// An existing subnet to use (`subnet-...`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Egress for a private subnet: `nat-...`, `i-...`, `tgw-...` or `External`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub egress: Option<String>,
    /// `Public`, `Private`, `Utility` or `DualStack`; kept as text so a bad
    /// value can be reported with its path.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(rename = "publicIP", skip_serializing_if = "Option::is_none")]
    pub public_ip: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additional_routes: Option<Vec<RouteSpec>>,
    #[serde(flatten)]
    pub extra: Extra,
}

impl ClusterSubnetSpec {
    pub fn subnet_type(&self) -> Option<SubnetType> {
        self.kind.as_deref().and_then(SubnetType::parse)
    }
}

/// An extra route in a subnet's route table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteSpec {
    #[serde(default)]
    pub cidr: String,
    #[serde(default)]
    pub target: String,
    #[serde(flatten)]
    pub extra: Extra,
}

/// Network topology: DNS and bastion settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopologySpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dns: Option<DnsSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bastion: Option<BastionSpec>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// How the cluster's names are published.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DnsSpec {
    /// `Public`, `Private` or `None`.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// Bastion settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BastionSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bastion_public_name: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// One etcd cluster (`main`, `events`, `cilium`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EtcdClusterSpec {
    #[serde(default)]
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_request: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_request: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub etcd_members: Vec<EtcdMemberSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub manager: Option<EtcdManagerSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// One member of an etcd cluster, placed on a control-plane instance group.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EtcdMemberSpec {
    #[serde(default)]
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance_group: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encrypted_volume: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kms_key_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub volume_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub volume_size: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub volume_iops: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub volume_throughput: Option<i64>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// etcd-manager settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EtcdManagerSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backup_retention_days: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_level: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env: Option<Vec<EnvVar>>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// A name/value environment variable.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvVar {
    #[serde(default)]
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// How the Kubernetes API is reached.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dns: Option<Extra>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load_balancer: Option<LoadBalancerAccessSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub public_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additional_sans: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access: Option<Vec<String>>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// The API load balancer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadBalancerAccessSpec {
    /// `Network` (the only class kops still supports on AWS) or `Classic`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    /// `Public` or `Internal`.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_timeout_seconds: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub security_group_override: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additional_security_groups: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub use_for_internal_api: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ssl_certificate: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ssl_policy: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cross_zone_load_balancing: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subnets: Option<Vec<LoadBalancerSubnetSpec>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access_log: Option<AccessLogSpec>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// A subnet the API load balancer is placed in.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadBalancerSubnetSpec {
    #[serde(default)]
    pub name: String,
    #[serde(rename = "privateIPv4Address", skip_serializing_if = "Option::is_none")]
    pub private_ipv4_address: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allocation_id: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// Load balancer access logs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AccessLogSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bucket: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bucket_prefix: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval: Option<i64>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// Authentication options (aws-iam-authenticator and others), kept as given.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthenticationSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aws: Option<AwsAuthenticationSpec>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// aws-iam-authenticator settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AwsAuthenticationSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend_mode: Option<String>,
    #[serde(rename = "clusterID", skip_serializing_if = "Option::is_none")]
    pub cluster_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity_mappings: Option<Vec<AwsIdentityMapping>>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// One IAM identity mapped to a Kubernetes user.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AwsIdentityMapping {
    #[serde(rename = "arn", skip_serializing_if = "Option::is_none")]
    pub arn: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub groups: Option<Vec<String>>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// Authorization mode: `rbac: {}` or `alwaysAllow: {}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthorizationSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rbac: Option<Extra>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub always_allow: Option<Extra>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// Where node assets and images come from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AssetsSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container_registry: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file_repository: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container_proxy: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// IAM options.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IamSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub legacy: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_container_registry: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub permissions_boundary: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub use_service_account_external_permissions: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_account_external_permissions: Option<Vec<ServiceAccountExternalPermission>>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// IAM permissions for a Kubernetes service account (IRSA).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceAccountExternalPermission {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub namespace: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aws: Option<AwsPermission>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// Managed policy ARNs and/or an inline policy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AwsPermission {
    #[serde(rename = "policyARNs", skip_serializing_if = "Option::is_none")]
    pub policy_arns: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inline_policy: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// Warm pool defaults for every instance group.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WarmPoolSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_size: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_size: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enable_lifecycle_hook: Option<bool>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// Publishing of OIDC discovery documents (IRSA).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceAccountIssuerDiscoveryConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub discovery_store: Option<String>,
    #[serde(
        rename = "enableAWSOIDCProvider",
        skip_serializing_if = "Option::is_none"
    )]
    pub enable_aws_oidc_provider: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additional_audiences: Option<Vec<String>>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// An external OIDC issuer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceOidcProviderSpec {
    #[serde(rename = "issuerURL", skip_serializing_if = "Option::is_none")]
    pub issuer_url: Option<String>,
    #[serde(
        rename = "issuerCAThumbprints",
        skip_serializing_if = "Option::is_none"
    )]
    pub issuer_ca_thumbprints: Option<Vec<String>>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// Target-specific options (Terraform provider settings).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TargetSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub terraform: Option<TerraformSpec>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// Extra configuration for the Terraform providers kops writes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TerraformSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider_extra_config: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub files_provider_extra_config: Option<BTreeMap<String, String>>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// Rolling-update settings (cluster default, overridden per instance group).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RollingUpdateSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drain_and_terminate: Option<bool>,
    /// An integer or a percentage such as `"25%"`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<serde_json::Value>,
    /// An integer or a percentage such as `"25%"`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_surge: Option<serde_json::Value>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// External DNS provider selection.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExternalDnsConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub watch_ingress: Option<bool>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// An addon that is only switched on or off (plus whatever else it takes).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnabledSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// An addon with resource requests and limits.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AddonResourcesSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_request: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_limit: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_request: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_limit: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// aws-node-termination-handler.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeTerminationHandlerSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(
        rename = "enableSQSTerminationDraining",
        skip_serializing_if = "Option::is_none"
    )]
    pub enable_sqs_termination_draining: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enable_rebalance_draining: Option<bool>,
    #[serde(rename = "managedASGTag", skip_serializing_if = "Option::is_none")]
    pub managed_asg_tag: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

impl NodeTerminationHandlerSpec {
    /// Queue mode (SQS + EventBridge) is on unless switched off.
    pub fn queue_mode(spec: Option<&Self>) -> bool {
        match spec {
            None => true,
            Some(s) => s.enabled != Some(false) && s.enable_sqs_termination_draining != Some(false),
        }
    }
}

/// cluster-autoscaler.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterAutoscalerSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expander: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_annotations: Option<BTreeMap<String, String>>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// Karpenter.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KarpenterSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub feature_gates: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_request: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_request: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_limit: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}
