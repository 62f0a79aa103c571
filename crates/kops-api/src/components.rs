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
    /// The gVisor sandbox (`runsc`); kops allows it on worker groups only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gvisor: Option<GVisorConfig>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// gVisor's sandboxed runtime: nodeup installs `runsc` (Debian and Ubuntu)
/// and registers it with containerd as the `runsc` handler, which the
/// `gvisor` RuntimeClass names.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GVisorConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// How the sandbox intercepts system calls: `systrap` (the default,
    /// which runs in any VM) or `kvm` (needs `/dev/kvm`, so bare metal or
    /// nested virtualisation). kops passes it on unchecked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub platform: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// gVisor's platform when `platform` is not set.
pub const GVISOR_DEFAULT_PLATFORM: &str = "systrap";

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
    /// vSphere: the vCenter (host name or URL; kops 1.17's `--vsphere-server`).
    #[serde(rename = "vSphereServer", skip_serializing_if = "Option::is_none")]
    pub vsphere_server: Option<String>,
    /// vSphere: the datacenter the VMs run in.
    #[serde(rename = "vSphereDatacenter", skip_serializing_if = "Option::is_none")]
    pub vsphere_datacenter: Option<String>,
    /// vSphere: the cluster, host or resource pool the VMs run in.
    #[serde(
        rename = "vSphereResourcePool",
        skip_serializing_if = "Option::is_none"
    )]
    pub vsphere_resource_pool: Option<String>,
    /// vSphere: the datastore of the VMs' disks.
    #[serde(rename = "vSphereDatastore", skip_serializing_if = "Option::is_none")]
    pub vsphere_datastore: Option<String>,
    /// vSphere (kops 1.17): the CoreDNS server kops used for names; read and kept, unused by kops-rs.
    #[serde(
        rename = "vSphereCoreDNSServer",
        skip_serializing_if = "Option::is_none"
    )]
    pub vsphere_core_dns_server: Option<String>,
    /// vSphere (kops-rs): the VM folder of the cluster (default: the cluster name).
    #[serde(rename = "vSphereFolder", skip_serializing_if = "Option::is_none")]
    pub vsphere_folder: Option<String>,
    /// vSphere (kops-rs): the network (port group) of the VMs' first NIC (default: the template's).
    #[serde(rename = "vSphereNetwork", skip_serializing_if = "Option::is_none")]
    pub vsphere_network: Option<String>,
    /// vSphere (kops-rs): the virtual IP kube-vip holds for the API on the control-plane VMs.
    #[serde(
        rename = "vSphereControlPlaneVIP",
        skip_serializing_if = "Option::is_none"
    )]
    pub vsphere_control_plane_vip: Option<String>,
    /// vSphere (kops-rs): a static address (`IP/prefix`) per control-plane
    /// instance group, given to its VM through cloud-init's network config;
    /// etcd's members find each other at these (required for more than one
    /// etcd member).
    #[serde(
        rename = "vSphereControlPlaneAddresses",
        skip_serializing_if = "Option::is_none"
    )]
    pub vsphere_control_plane_addresses: Option<std::collections::BTreeMap<String, String>>,
    /// vSphere (kops-rs): the default gateway of the control-plane VMs' static addresses.
    #[serde(rename = "vSphereGateway", skip_serializing_if = "Option::is_none")]
    pub vsphere_gateway: Option<String>,
    /// vSphere (kops-rs): the DNS servers of the control-plane VMs' static addresses.
    #[serde(rename = "vSphereNameservers", skip_serializing_if = "Option::is_none")]
    pub vsphere_nameservers: Option<Vec<String>>,
    /// vSphere (kops-rs): the SHA-1 fingerprint of vCenter's certificate
    /// (`AB:CD:...`, as govc prints it), pinned by kops-rs and given to the
    /// cloud controller manager and the CSI driver.
    #[serde(rename = "vSphereThumbprint", skip_serializing_if = "Option::is_none")]
    pub vsphere_thumbprint: Option<String>,
    /// vSphere (kops-rs): the CA certificates (PEM) vCenter's certificate is
    /// checked against (`--vsphere-ca-file`'s content).
    #[serde(
        rename = "vSphereCACertificate",
        skip_serializing_if = "Option::is_none"
    )]
    pub vsphere_ca_certificate: Option<String>,
    /// vSphere (kops 1.17): credentials in the spec. Read so an old spec loads; kops-rs refuses to use them (see VSPHERE_USERNAME).
    #[serde(rename = "vSphereUsername", skip_serializing_if = "Option::is_none")]
    pub vsphere_username: Option<String>,
    /// vSphere (kops 1.17): see `vSphereUsername`.
    #[serde(rename = "vSpherePassword", skip_serializing_if = "Option::is_none")]
    pub vsphere_password: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}
