//! Settings of the Kubernetes components kops runs. Each struct models the
//! fields kops-rs reads or defaults and keeps every other flag in `extra`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::meta::Extra;

/// Feature gates as kops writes them: name → `"true"` / `"false"`.
pub type FeatureGates = BTreeMap<String, String>;

/// kubelet settings (cluster-wide, control-plane or per instance group).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeletConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub anonymous_auth: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub feature_gates: Option<FeatureGates>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_pods: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kube_reserved: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_reserved: Option<BTreeMap<String, String>>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// kube-apiserver settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeApiServerConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub feature_gates: Option<FeatureGates>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_node_port_range: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_request: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_limit: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_request: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_limit: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audit_webhook_batch_throttle_qps: Option<serde_json::Number>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// kube-controller-manager settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeControllerManagerConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub feature_gates: Option<FeatureGates>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_request: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_limit: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_request: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_limit: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrent_job_syncs: Option<i32>,
    /// Spelled as kops spells it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrent_horizontal_pod_austoscaler_syncs: Option<i32>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// kube-scheduler settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeSchedulerConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub feature_gates: Option<FeatureGates>,
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

/// kube-proxy settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeProxyConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub feature_gates: Option<FeatureGates>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// The external cloud-controller-manager.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CloudControllerManagerConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cloud_provider: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrent_node_syncs: Option<i32>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// containerd settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerdConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skip_install: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub registry_mirrors: Option<BTreeMap<String, Vec<String>>>,
    #[serde(
        rename = "useECRCredentialsForMirrors",
        skip_serializing_if = "Option::is_none"
    )]
    pub use_ecr_credentials_for_mirrors: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub packages: Option<ContainerdPackages>,
    #[serde(rename = "nvidiaGPU", skip_serializing_if = "Option::is_none")]
    pub nvidia_gpu: Option<Extra>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// Custom containerd packages.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerdPackages {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url_amd64: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hash_amd64: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url_arm64: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hash_arm64: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// Cloud-specific settings (the AWS EBS CSI driver and others).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CloudConfiguration {
    #[serde(rename = "awsEBSCSIDriver", skip_serializing_if = "Option::is_none")]
    pub aws_ebs_csi_driver: Option<Extra>,
    #[serde(
        rename = "manageStorageClasses",
        skip_serializing_if = "Option::is_none"
    )]
    pub manage_storage_classes: Option<bool>,
    /// GCE: the service account instances run as (kops makes one per role
    /// when it is not set).
    #[serde(rename = "gceServiceAccount", skip_serializing_if = "Option::is_none")]
    pub gce_service_account: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}
