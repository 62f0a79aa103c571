//! `kops delete cluster`: every cloud resource of the cluster, then its
//! state-store entries.

use std::time::Duration;

use kops_aws::delete::{delete_resources, list_cluster_resources, DeleteReport, Resource};
use kops_aws::AwsCloud;

use crate::update::cluster_region;
use crate::{OpsError, Registry};

/// Receives each resource deleted (`None`) or still blocked (`Some(reason)`).
pub type DeleteProgress = dyn Fn(&Resource, Option<&str>) + Sync;

/// What `delete cluster` was asked to do.
pub struct DeleteRequest {
    pub cluster: String,
    pub yes: bool,
    /// The region, when the state store no longer has the cluster's spec.
    pub region: Option<String>,
    /// `--external`: a cluster the state store does not hold; its
    /// resources are found by their `KubernetesCluster` tag in `region`,
    /// and the state store is not touched.
    pub external: bool,
    /// Passes over the remaining resources before giving up.
    pub passes: u32,
    pub interval: Duration,
    /// Called per resource deleted (`None`) or still blocked (`Some(reason)`).
    pub progress: Box<DeleteProgress>,
    /// An SDK configuration to use instead of the environment's (tests).
    pub sdk_config: Option<aws_config::SdkConfig>,
}

/// What was found (and, with `--yes`, deleted).
#[derive(Debug)]
pub struct DeleteOutcome {
    pub resources: Vec<Resource>,
    /// State-store keys of the cluster.
    pub state_keys: Vec<String>,
    pub report: Option<DeleteReport>,
    pub calls: u64,
}

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
    let region = match (&request.region, &spec) {
        (Some(r), _) => r.clone(),
        (None, Some(c)) => cluster_region(c)?,
        (None, None) => {
            return Err(OpsError::ClusterNotFound {
                name: request.cluster.clone(),
                store: registry.store().base_url().to_string(),
            })
        }
    };
    let cloud = match request.sdk_config {
        Some(config) => AwsCloud::from_config(&region, config),
        None => AwsCloud::new(&region).await,
    };
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
            calls: cloud.calls().total(),
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
        calls: cloud.calls().total(),
    })
}
