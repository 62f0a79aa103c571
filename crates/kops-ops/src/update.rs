//! `kops update cluster`: the spec becomes its cloud's work (a task graph
//! on AWS and GCE, VMs on vSphere), compared with what exists and (with
//! `--yes`) applied. The request and outcome types and the checks every
//! task-graph cloud makes first live here; each cloud's update is its own
//! module, reached through [`crate::cloud`].

use crate::{require_cluster, OpsError, Registry};

pub mod api_addresses;
pub(crate) mod aws;
mod classic;
pub(crate) mod gce;
pub mod nodeup;
pub mod options;
mod prefetch;
pub(crate) mod request;
pub mod state_files;

pub use request::{RunningVersion, UpdateOptions, UpdateOutcome, UpdateRequest, Updated};

/// `update cluster` (direct): plans, or with `request.apply` applies, the
/// cluster on its cloud.
pub async fn update_cluster(
    registry: &Registry,
    request: UpdateRequest,
) -> Result<Updated, OpsError> {
    let cluster = require_cluster(registry, &request.cluster).await?;
    crate::cloud::of(&cluster)?.update(registry, request).await
}
