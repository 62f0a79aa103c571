//! `delete cluster` on AWS: the resources tagged with the cluster's name
//! in its region (or `--region`), then the cluster's state.

use kops_aws::delete::{delete_resources, list_cluster_resources};
use kops_aws::AwsCloud;

use super::request::{DeleteOutcome, DeleteRequest};
use crate::{OpsError, Registry};

/// The AWS delete; `spec` is `None` with `--external`.
pub(crate) async fn delete(
    registry: &Registry,
    request: DeleteRequest,
    spec: Option<&kops_api::Cluster>,
) -> Result<DeleteOutcome, OpsError> {
    let region = match (&request.region, &spec) {
        (Some(r), _) => r.clone(),
        (None, Some(c)) => crate::cloud::spec::aws_region(c)?,
        (None, None) => {
            return Err(OpsError::ClusterNotFound {
                name: request.cluster.clone(),
                store: registry.store().base_url().to_string(),
            })
        }
    };
    if request.external && kops_gce::names::is_region(&region) {
        return Err(crate::flag_error(
            "--region",
            &format!(
                "`{region}` is a Google Cloud region: --external looks on AWS only, as kops' does"
            ),
            "delete a Google Cloud cluster from the state store that holds its spec: `kops delete cluster NAME --state gs://BUCKET`, without --external",
        ));
    }
    let cloud = AwsCloud::new(&region).await;
    let resources = list_cluster_resources(&cloud, &request.cluster).await?;
    let state_keys = if request.external {
        Vec::new()
    } else {
        registry
            .store()
            .list(&format!("{}/", request.cluster))
            .await
            .map_err(kops_state::registry::RegistryError::from)?
    };
    if !request.yes {
        return Ok(DeleteOutcome {
            resources,
            state_keys,
            report: None,
            calls: format!("{} AWS calls", cloud.calls().total()),
            limits: cloud.limit_waits(),
        });
    }
    let report = delete_resources(
        &cloud,
        resources.clone(),
        request.passes,
        request.interval,
        &*request.progress,
    )
    .await?;
    if spec.is_some() {
        registry.delete_cluster_state(&request.cluster).await?;
    }
    Ok(DeleteOutcome {
        resources,
        state_keys,
        report: Some(report),
        calls: format!("{} AWS calls", cloud.calls().total()),
        limits: cloud.limit_waits(),
    })
}
