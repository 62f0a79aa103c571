//! Who a node is, once a verifier has proven it.

/// The instance tag naming a machine's instance group.
pub const INSTANCE_GROUP_TAG: &str = "kops.k8s.io/instancegroup";

/// A node whose identity was proven.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeIdentity {
    /// The node's name: its instance id (kops' resource-based names) or
    /// its IP-based private DNS name.
    pub node_name: String,
    pub instance_id: String,
    pub instance_group: String,
    /// The names its kubelet serving certificate is valid for.
    pub certificate_names: Vec<String>,
}
