//! `kops delete cluster`: every cloud resource of the cluster, then its
//! state-store entries.

use crate::{OpsError, Registry};

pub(crate) mod aws;
pub(crate) mod gce;
pub(crate) mod request;
pub(crate) mod vsphere;

pub use request::{DeleteOutcome, DeleteProgress, DeleteRequest};

pub async fn delete_cluster(
    registry: &Registry,
    request: DeleteRequest,
) -> Result<DeleteOutcome, OpsError> {
    let spec = if request.external {
        if request.region.is_none() {
            return Err(crate::flag_error(
                "--region",
                "--region is required (when --external)",
                "name the region the cluster's resources are in, e.g. `--region us-east-1`",
            ));
        }
        None
    } else {
        registry.get_cluster(&request.cluster).await?
    };
    match &spec {
        Some(cluster) => crate::cloud::of(cluster)?,
        None => crate::cloud::external(),
    }
    .delete(registry, request, spec.as_ref())
    .await
}
