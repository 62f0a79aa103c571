//! The cloud-neutral half of the model, which every cloud's builders reuse
//! (kops' `pkg/model`): the [`Model`] inputs and their helpers, the names
//! kops derives from the spec (including the AWS names the addons' manifests
//! carry: IAM roles, tags, the queue of the termination handler), the node
//! configs and user data, the state-store files and the addons. The builders
//! that turn the spec into a cloud's tasks live with that cloud's task types:
//! `kops_aws::model`, `kops_gce::model`.
//!
//! Pure: no IO, no SDK calls. It depends on kops-api (the spec), kops-engine
//! (the error type) and kops-nodeup (node configs, user data) only.

pub mod addons;
pub mod api_load_balancer;
pub mod compute;
pub mod dns;
pub mod files;
pub mod iam;
pub mod nth;
pub mod security;
pub mod tags;
#[doc(hidden)]
pub mod test_support;

use kops_api::{Cluster, InstanceGroup, Role};
use kops_engine::EngineError;

use crate::tags::{owned_tags, Tags};

/// What the builders read.
#[derive(Debug, Clone)]
pub struct Model<'a> {
    pub cluster: &'a Cluster,
    pub groups: &'a [InstanceGroup],
    /// The admin SSH public key, if the cluster has one.
    pub ssh_public_key: Option<&'a str>,
    /// Where the cluster's state lives (`s3://bucket/prefix/<cluster>` or
    /// `file://...`): IAM policies grant read access to it.
    pub config_base: &'a str,
    /// The AWS account the cluster lives in, when known (a direct apply
    /// asks AWS; kops' test cases use 123456789012). Addons that name the
    /// account (the termination handler's queue URL, IRSA role ARNs) stay
    /// placeholders without it.
    pub account_id: Option<&'a str>,
    /// What node configs and user data need beyond the spec: the cluster's
    /// keysets (CA bundles, keypair ids), the hosted zone found, and
    /// whether workers bootstrap through kops-controller. `None` (tests,
    /// previews before the keysets exist) renders them from the spec alone.
    pub node_inputs: Option<&'a kops_nodeup::config::NodeInputs>,
}

/// Something in the spec the builders cannot turn into tasks.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("{path}: {message}\nhint: {hint}")]
    Spec {
        path: String,
        message: String,
        hint: String,
    },
    #[error(transparent)]
    Graph(#[from] EngineError),
    #[error(transparent)]
    AddonTemplate(#[from] addons::TemplateError),
}

impl<'a> Model<'a> {
    /// The model of the cluster's spec alone (no groups, keys or node
    /// inputs): what the spec decides, such as its DNS, before the rest is
    /// known.
    pub fn of_cluster(cluster: &'a Cluster) -> Model<'a> {
        Model {
            cluster,
            groups: &[],
            ssh_public_key: None,
            node_inputs: None,
            account_id: None,
            config_base: "",
        }
    }

    /// [`Model::node_inputs`], or none.
    pub fn node_inputs(&self) -> std::borrow::Cow<'a, kops_nodeup::config::NodeInputs> {
        match self.node_inputs {
            Some(inputs) => std::borrow::Cow::Borrowed(inputs),
            None => std::borrow::Cow::Owned(Default::default()),
        }
    }

    pub fn name(&self) -> &str {
        self.cluster.name()
    }

    /// The cluster's `cloudLabels`.
    pub fn cloud_labels(&self) -> Tags {
        self.cluster.spec.cloud_labels.clone().unwrap_or_default()
    }

    /// kops' tags for an owned resource named `name`.
    pub fn tags(&self, name: &str, extra: &[(&str, &str)]) -> Tags {
        owned_tags(self.name(), &self.cloud_labels(), name, extra)
    }

    /// The instance groups with a role.
    pub fn groups_with(&self, role: Role) -> impl Iterator<Item = &InstanceGroup> {
        self.groups.iter().filter(move |g| g.role() == Some(role))
    }

    pub fn has_role(&self, role: Role) -> bool {
        self.groups_with(role).next().is_some()
    }

    /// `spec.topology.dns.type`: `Public` (the default), `Private` or `None`.
    pub fn dns_type(&self) -> &str {
        self.cluster
            .spec
            .topology
            .as_ref()
            .and_then(|t| t.dns.as_ref())
            .and_then(|d| d.kind.as_deref())
            .unwrap_or("Public")
    }

    /// Whether DNS is `None` (no records; nodes reach the control plane
    /// through the API load balancer).
    pub fn uses_none_dns(&self) -> bool {
        self.dns_type() == "None"
    }

    /// Whether kops publishes the cluster's names in Route 53: not with
    /// gossip (`*.k8s.local`) nor with DNS `None`.
    pub fn publishes_dns_records(&self) -> bool {
        !self.cluster.is_gossip() && !self.uses_none_dns()
    }

    /// Whether pods and services are IPv6-only (`nonMasqueradeCIDR` is an
    /// IPv6 range): the network then adds an egress-only gateway and NAT64.
    pub fn ipv6_only(&self) -> bool {
        self.cluster
            .spec
            .non_masquerade_cidr
            .as_deref()
            .is_some_and(|c| c.contains(':'))
    }

    /// `<prefix>.<cluster>`, the way kops names per-role resources
    /// (`masters.<cluster>`, `nodes.<cluster>`, `bastion.<cluster>`).
    pub fn scoped(&self, prefix: &str) -> String {
        format!("{prefix}.{}", self.name())
    }
}

/// Whether the node-termination-handler runs in queue mode (SQS +
/// EventBridge + lifecycle hooks): on by default, off when switched off,
/// and off when Karpenter is enabled and the handler is not configured
/// (Karpenter handles interruptions itself), as kops does.
pub fn nth_queue_mode(cluster: &Cluster) -> bool {
    let nth = cluster.spec.node_termination_handler.as_ref();
    let karpenter = cluster
        .spec
        .karpenter
        .as_ref()
        .is_some_and(|k| k.enabled == Some(true));
    if karpenter && nth.is_none() {
        return false;
    }
    kops_api::cluster::NodeTerminationHandlerSpec::queue_mode(nth)
}
