//! A running cluster as its cloud's [`kops_cloud::Provider`]: what
//! `validate`, `rolling-update`, `get`/`delete instance` and `toolbox dump`
//! read and replace, with no question asked about which cloud it is.

use std::sync::Arc;

use kops_api::Cluster;
use kops_cloud::Provider;

use crate::{OpsError, Registry};

/// The running cluster on its cloud: AWS' autoscaling groups, GCE's
/// managed instance groups in `spec.project`, or vSphere's VMs (their
/// groups and the spec each VM should be made from are loaded here; no
/// cloud call is made yet).
pub async fn provider(
    registry: &Registry,
    cluster: &Cluster,
) -> Result<Arc<dyn Provider>, OpsError> {
    crate::cloud::of(cluster)?.provider(registry, cluster).await
}
