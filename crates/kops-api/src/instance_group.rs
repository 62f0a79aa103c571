//! The `InstanceGroup` object (`kops.k8s.io/v1alpha2`): a set of machines
//! with one role, one machine type and one autoscaling group per group.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::cluster::default_api_version;
use crate::components::{ContainerdConfig, GVisorConfig, KubeletConfig};
use crate::meta::{Extra, ObjectMeta, LABEL_CLUSTER_NAME};

/// A group of machines that share a role and a launch template.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceGroup {
    #[serde(default = "default_api_version")]
    pub api_version: String,
    #[serde(default = "default_ig_kind")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: InstanceGroupSpec,
    #[serde(flatten)]
    pub extra: Extra,
}

fn default_ig_kind() -> String {
    "InstanceGroup".to_string()
}

impl InstanceGroup {
    /// A new group for `cluster`, labelled with the cluster's name.
    pub fn new(cluster: &str, name: impl Into<String>, role: Role) -> Self {
        let mut metadata = ObjectMeta {
            name: name.into(),
            ..Default::default()
        };
        metadata
            .labels
            .insert(LABEL_CLUSTER_NAME.to_string(), cluster.to_string());
        InstanceGroup {
            api_version: default_api_version(),
            kind: default_ig_kind(),
            metadata,
            spec: InstanceGroupSpec {
                role: Some(role.as_str().to_string()),
                ..Default::default()
            },
            extra: Extra::new(),
        }
    }

    pub fn name(&self) -> &str {
        &self.metadata.name
    }

    /// The cluster this group belongs to, from its `kops.k8s.io/cluster` label.
    pub fn cluster_label(&self) -> Option<&str> {
        self.metadata
            .labels
            .get(LABEL_CLUSTER_NAME)
            .map(String::as_str)
    }

    pub fn role(&self) -> Option<Role> {
        self.spec.role.as_deref().and_then(Role::parse)
    }

    pub fn is_control_plane(&self) -> bool {
        self.role() == Some(Role::ControlPlane)
    }

    /// The group's `spec.containerd.gvisor`, as written.
    pub fn gvisor(&self) -> Option<&GVisorConfig> {
        self.spec.containerd.as_ref()?.gvisor.as_ref()
    }

    /// Whether the group's nodes run gVisor: a worker group that enables
    /// it (validation refuses it on other roles).
    pub fn has_gvisor(&self) -> bool {
        self.role() == Some(Role::Node) && self.gvisor().and_then(|g| g.enabled) == Some(true)
    }

    /// The group's node labels as kops completes them: `spec.nodeLabels`,
    /// and [`LABEL_GVISOR`] on groups that run gVisor (the `gvisor`
    /// RuntimeClass schedules onto it).
    pub fn node_labels(&self) -> BTreeMap<String, String> {
        let mut labels = self.spec.node_labels.clone().unwrap_or_default();
        if self.has_gvisor() {
            labels.insert(LABEL_GVISOR.to_string(), "1".to_string());
        }
        labels
    }
}

/// The label of nodes that run gVisor.
pub const LABEL_GVISOR: &str = "kops.k8s.io/gvisor";

/// The role of an instance group's machines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    /// Runs the Kubernetes control plane and etcd (`Master` in manifests).
    ControlPlane,
    /// Runs workloads.
    Node,
    /// An SSH jump host.
    Bastion,
    /// Runs kube-apiserver only.
    ApiServer,
}

impl Role {
    pub const ALL: [Role; 4] = [
        Role::ControlPlane,
        Role::Node,
        Role::Bastion,
        Role::ApiServer,
    ];

    /// The name kops writes in manifests.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::ControlPlane => "Master",
            Role::Node => "Node",
            Role::Bastion => "Bastion",
            Role::ApiServer => "APIServer",
        }
    }

    /// The lower-case name used in paths and tags (`control-plane`, `node`, ...).
    pub fn path_name(self) -> &'static str {
        match self {
            Role::ControlPlane => "control-plane",
            Role::Node => "node",
            Role::Bastion => "bastion",
            Role::ApiServer => "apiserver",
        }
    }

    /// Parses a role as kops accepts it (`Master` and `ControlPlane` are the same).
    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "Master" | "ControlPlane" => Some(Role::ControlPlane),
            "Node" => Some(Role::Node),
            "Bastion" => Some(Role::Bastion),
            "APIServer" => Some(Role::ApiServer),
            _ => None,
        }
    }
}

/// `spec` of an [`InstanceGroup`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceGroupSpec {
    /// `Master`, `Node`, `Bastion` or `APIServer`; text so a bad value can be
    /// reported with its path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// `CloudGroup` (the default) or `Karpenter`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub manager: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub machine_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_size: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_size: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub autoscale: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub autoscale_priority: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subnets: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zones: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_labels: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cloud_labels: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub taints: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additional_security_groups: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub security_group_override: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additional_user_data: Option<Vec<UserData>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub associate_public_ip: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compress_user_data: Option<bool>,
    /// The group's containerd settings, laid over the cluster's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub containerd: Option<ContainerdConfig>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_credits: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detailed_instance_monitoring: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external_load_balancers: Option<Vec<LoadBalancerRef>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance_metadata: Option<InstanceMetadataOptions>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance_protection: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kubelet: Option<KubeletConfig>,
    /// A Go duration such as `48h20m`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_instance_lifetime: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mixed_instances_policy: Option<MixedInstancesPolicy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub packages: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root_volume: Option<RootVolumeSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root_volume_size: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root_volume_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root_volume_iops: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root_volume_throughput: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root_volume_encryption: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root_volume_encryption_key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suspend_processes: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub volumes: Option<Vec<VolumeSpec>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warm_pool: Option<crate::cluster::WarmPoolSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rolling_update: Option<crate::cluster::RollingUpdateSpec>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// A part of a multipart user-data document.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserData {
    #[serde(default)]
    pub name: String,
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(default)]
    pub content: String,
    #[serde(flatten)]
    pub extra: Extra,
}

/// An existing load balancer or target group the group's ASG joins.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadBalancerRef {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load_balancer_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_group_arn: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// Instance metadata service options.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceMetadataOptions {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_put_response_hop_limit: Option<i64>,
    /// `required` (IMDSv2, the default) or `optional`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_tokens: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// Spot and mixed instance types.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MixedInstancesPolicy {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instances: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_demand_allocation_strategy: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_demand_base: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_demand_above_base: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spot_allocation_strategy: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spot_instance_pools: Option<i64>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// The root volume (newer form of the `rootVolume*` fields).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RootVolumeSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<i64>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub volume_iops: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub volume_throughput: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encryption: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encryption_key: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// An extra EBS volume attached to every instance.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeSpec {
    #[serde(default)]
    pub device: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<i64>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encrypted: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delete_on_termination: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iops: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throughput: Option<i64>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[cfg(test)]
mod tests {
    use super::*;

    const SANDBOXED: &str = "apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata:
  labels:
    kops.k8s.io/cluster: c.example.com
  name: sandboxed
spec:
  containerd:
    gvisor:
      enabled: true
      futureSetting: kept
      platform: kvm
    logLevel: debug
  machineType: m5.metal
  nodeLabels:
    team: a
  role: Node
";

    #[test]
    fn gvisor_settings_load_and_are_written_back_as_read() {
        let ig: InstanceGroup = crate::manifest::parse_one("ig.yaml", SANDBOXED).unwrap();
        let gvisor = ig.gvisor().unwrap();
        assert_eq!(gvisor.enabled, Some(true));
        assert_eq!(gvisor.platform.as_deref(), Some("kvm"));
        assert_eq!(gvisor.extra["futureSetting"], "kept");
        assert_eq!(
            ig.spec.containerd.as_ref().unwrap().extra["logLevel"],
            "debug"
        );
        assert_eq!(crate::manifest::to_yaml(&ig), SANDBOXED);
    }

    #[test]
    fn workers_that_run_gvisor_get_its_node_label() {
        let mut ig: InstanceGroup = crate::manifest::parse_one("ig.yaml", SANDBOXED).unwrap();
        assert!(ig.has_gvisor());
        let labels = ig.node_labels();
        assert_eq!(labels.get(LABEL_GVISOR).map(String::as_str), Some("1"));
        assert_eq!(labels.get("team").map(String::as_str), Some("a"));
        // The spec itself keeps only what the user wrote.
        assert_eq!(ig.spec.node_labels.as_ref().unwrap().len(), 1);

        ig.spec.role = Some("Master".into());
        assert!(!ig.has_gvisor(), "control planes never run it");
        assert!(!ig.node_labels().contains_key(LABEL_GVISOR));
        ig.spec.role = Some("Node".into());
        ig.spec
            .containerd
            .as_mut()
            .unwrap()
            .gvisor
            .as_mut()
            .unwrap()
            .enabled = Some(false);
        assert!(!ig.has_gvisor());
        ig.spec.containerd = None;
        assert!(!ig.has_gvisor() && ig.gvisor().is_none());
    }
}
