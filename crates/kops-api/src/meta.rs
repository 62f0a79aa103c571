//! Object metadata and the `extra` map that keeps fields we do not model.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Fields this version does not model, kept verbatim and written back.
pub type Extra = BTreeMap<String, serde_json::Value>;

/// The API group and version every kops object is written in.
pub const API_VERSION: &str = "kops.k8s.io/v1alpha2";

/// Kubernetes-style object metadata, the subset kops uses.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    #[serde(default)]
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub creation_timestamp: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// The label that ties an instance group to its cluster.
pub const LABEL_CLUSTER_NAME: &str = "kops.k8s.io/cluster";
/// The node label kops sets to the instance group's name.
pub const LABEL_INSTANCE_GROUP: &str = "kops.k8s.io/instancegroup";
