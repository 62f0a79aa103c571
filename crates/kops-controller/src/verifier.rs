//! What the controller asks of its cloud: one [`Verifier`] per cloud
//! (`aws/`, `gce/`, `vsphere/`, `metal/`), picked once from the options
//! ([`crate::cloud::verifier`]). Beside proving who a node is, a cloud may
//! keep the cluster's nodes in line with its instances in the background:
//! label them from their instance groups, give them their pod ranges
//! (cloud IPAM); each is a [`NodePass`] the controller runs every few
//! seconds.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use kops_state::ObjectStore;

use crate::identity::NodeIdentity;
use crate::refusal::Refusal;

/// One pass over the cluster's nodes (node labelling, cloud IPAM): how
/// many it changed.
#[async_trait::async_trait]
pub trait NodePass: Send + Sync {
    async fn run_once(&self) -> Result<usize, String>;
}

/// The verifier of the controller's cloud.
#[async_trait::async_trait]
pub trait Verifier: Send + Sync {
    /// Checks `authorization` for a request with `body`.
    async fn verify(&self, authorization: &str, body: &[u8]) -> Result<NodeIdentity, Refusal>;

    /// Spends the one-time token `verify` left in `identity.one_time`, once
    /// the node's answer is made and before it is sent; an error means the
    /// answer is not sent (another request spent the token first, or the
    /// cloud did not answer: then transient). Nothing to do where the
    /// cloud keeps no such token.
    async fn spend(&self, _identity: &NodeIdentity) -> Result<(), Refusal> {
        Ok(())
    }

    /// Tokens held by the replay cache now (none where the cloud keeps
    /// one-time tokens itself, or where there is no cloud).
    fn replay_entries(&self) -> usize {
        0
    }

    /// The cluster's API, once the controller has a client for it (a
    /// verifier reading its credentials from a Secret keeps it).
    fn connect(&self, _client: &kube::Client) {}

    /// The node labeller of this cloud, if it has one: nodes get the
    /// labels of their instance's group (`config_store` holds the groups'
    /// node configs).
    fn labeller(
        &self,
        _nodes: kube::Api<Node>,
        _config_store: Arc<dyn ObjectStore>,
    ) -> Option<Arc<dyn NodePass>> {
        None
    }

    /// The cloud IPAM of this cloud, if it has one: nodes get their
    /// instance's IPv6 range as their pod range. The controller asks only
    /// when the options enable it (`enableCloudIPAM`).
    fn ipam(&self, _nodes: kube::Api<Node>) -> Option<Arc<dyn NodePass>> {
        None
    }
}
