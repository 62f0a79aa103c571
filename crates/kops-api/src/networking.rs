//! The `networking` block: which CNI runs and its options.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::meta::Extra;

/// The CNIs kops knows, by the key they take in `spec.networking`.
pub const KNOWN_NETWORKING: &[&str] = &[
    "amazonvpc",
    "calico",
    "cilium",
    "cni",
    "external",
    "flannel",
    "gce",
    "kindnet",
    "kopeio",
    "kubenet",
    "kuberouter",
];

/// `spec.networking`: exactly one CNI key, with its options.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkingSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cni: Option<Extra>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kubenet: Option<Extra>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external: Option<Extra>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kopeio: Option<Extra>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kuberouter: Option<Extra>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kindnet: Option<Extra>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gce: Option<Extra>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flannel: Option<FlannelSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calico: Option<CalicoSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cilium: Option<CiliumSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub amazonvpc: Option<AmazonVpcSpec>,
    #[serde(flatten)]
    pub extra: Extra,
}

impl NetworkingSpec {
    /// The keys of the CNIs that are set, known or not.
    pub fn providers(&self) -> Vec<&str> {
        let mut out = Vec::new();
        let known = [
            ("amazonvpc", self.amazonvpc.is_some()),
            ("calico", self.calico.is_some()),
            ("cilium", self.cilium.is_some()),
            ("cni", self.cni.is_some()),
            ("external", self.external.is_some()),
            ("flannel", self.flannel.is_some()),
            ("gce", self.gce.is_some()),
            ("kindnet", self.kindnet.is_some()),
            ("kopeio", self.kopeio.is_some()),
            ("kubenet", self.kubenet.is_some()),
            ("kuberouter", self.kuberouter.is_some()),
        ];
        out.extend(known.iter().filter(|(_, set)| *set).map(|(k, _)| *k));
        out.extend(self.extra.keys().map(String::as_str));
        out
    }

    /// A spec with only the given CNI set, with empty options.
    pub fn with_provider(name: &str) -> Option<NetworkingSpec> {
        let mut n = NetworkingSpec::default();
        match name {
            "cni" => n.cni = Some(Extra::new()),
            "kubenet" => n.kubenet = Some(Extra::new()),
            "external" => n.external = Some(Extra::new()),
            "kopeio" | "kopeio-vxlan" => n.kopeio = Some(Extra::new()),
            "kuberouter" | "kube-router" => n.kuberouter = Some(Extra::new()),
            "kindnet" => n.kindnet = Some(Extra::new()),
            "gce" => n.gce = Some(Extra::new()),
            "flannel" | "flannel-vxlan" => {
                n.flannel = Some(FlannelSpec {
                    backend: Some("vxlan".into()),
                    ..Default::default()
                })
            }
            "flannel-udp" => {
                n.flannel = Some(FlannelSpec {
                    backend: Some("udp".into()),
                    ..Default::default()
                })
            }
            "calico" => n.calico = Some(CalicoSpec::default()),
            "cilium" => n.cilium = Some(CiliumSpec::default()),
            "cilium-etcd" => {
                n.cilium = Some(CiliumSpec {
                    etcd_managed: Some(true),
                    ..Default::default()
                })
            }
            "cilium-eni" => {
                n.cilium = Some(CiliumSpec {
                    ipam: Some("eni".into()),
                    enable_node_port: Some(true),
                    ..Default::default()
                })
            }
            "amazonvpc" | "amazon-vpc-routed-eni" => n.amazonvpc = Some(AmazonVpcSpec::default()),
            _ => return None,
        }
        Some(n)
    }

    /// True when the CNI replaces kube-proxy by default.
    pub fn replaces_kube_proxy(&self) -> bool {
        self.cilium
            .as_ref()
            .is_some_and(|c| c.enable_node_port == Some(true))
            || self
                .calico
                .as_ref()
                .is_some_and(|c| c.bpf_enabled == Some(true))
    }
}

/// The names `--networking` accepts.
pub const NETWORKING_FLAG_VALUES: &[&str] = &[
    "amazonvpc",
    "amazon-vpc-routed-eni",
    "calico",
    "cilium",
    "cilium-eni",
    "cilium-etcd",
    "cni",
    "external",
    "flannel",
    "flannel-udp",
    "flannel-vxlan",
    "gce",
    "kindnet",
    "kopeio",
    "kopeio-vxlan",
    "kube-router",
    "kubenet",
];

/// flannel options.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FlannelSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// Calico options.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CalicoSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bpf_enabled: Option<bool>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// Cilium options.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CiliumSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipam: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enable_node_port: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub etcd_managed: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enable_host_firewall: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disable_masquerade: Option<bool>,
    #[serde(rename = "clusterID", skip_serializing_if = "Option::is_none")]
    pub cluster_id: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_pod_annotations: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operator_pod_annotations: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hubble: Option<Extra>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ingress: Option<Extra>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// Amazon VPC CNI options.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AmazonVpcSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub init_image_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_policy_agent_image: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}
