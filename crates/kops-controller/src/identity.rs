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
    /// A one-time token the cloud keeps, proven by this request and still
    /// to be spent ([`crate::verifier::Verifier::spend`]); `None` where
    /// the cloud has none (its tokens expire, or a replay cache holds
    /// them).
    pub one_time: Option<OneTimeToken>,
}

/// A one-time token held by the cloud (vSphere: in the VM's
/// configuration), as the verifier read it. The server spends it once the
/// node's certificates are made, just before they are sent: a failure on
/// the way (the API, the store) leaves the node its retry, and of two
/// requests racing with one token only the one that spends it gets an
/// answer.
#[derive(Clone, PartialEq, Eq)]
pub struct OneTimeToken {
    /// The cloud object holding it (a VM's managed object id).
    pub object: String,
    /// The token.
    pub token: String,
    /// The version of the object's configuration it was read in (vSphere's
    /// `config.changeVersion`): spending is a compare-and-swap against it.
    pub version: String,
}

impl std::fmt::Debug for OneTimeToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OneTimeToken")
            .field("object", &self.object)
            .field("token", &"<redacted>")
            .field("version", &self.version)
            .finish()
    }
}
