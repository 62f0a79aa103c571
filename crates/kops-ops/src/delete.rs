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
    /// and the state store is not touched. As in kops, this is AWS only:
    /// kops' `--external` always builds an AWS client from `--region`
    /// (there is no Google Cloud path: nothing would name the project),
    /// so a Google Cloud region is refused at once.
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
    /// Time spent waiting on the cloud's request-rate limits.
    pub limits: kops_engine::LimitWaits,
    /// Whose API the calls went to (`AWS`, `Google Cloud`).
    pub provider: &'static str,
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
    if let Some(cluster) = &spec {
        match crate::cloud::Cloud::of(cluster)? {
            crate::cloud::Cloud::Gce => return delete_gce(registry, request, cluster).await,
            crate::cloud::Cloud::Aws | crate::cloud::Cloud::Vsphere => {}
        }
    }
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
    if request.external && is_gce_region(&region) {
        return Err(crate::flag_error(
            "--region",
            &format!(
                "`{region}` is a Google Cloud region: --external looks on AWS only, as kops' does"
            ),
            "delete a Google Cloud cluster from the state store that holds its spec: `kops delete cluster NAME --state gs://BUCKET`, without --external",
        ));
    }
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
            limits: cloud.limit_waits(),
            provider: "AWS",
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
        limits: cloud.limit_waits(),
        provider: "AWS",
    })
}

/// Whether `region` has the shape of a Compute Engine region
/// (`us-central1`, kops' `us-test1`) rather than an AWS one (`us-east-1`).
fn is_gce_region(region: &str) -> bool {
    let zone = format!("{region}-a");
    kops_api::zones::gce_region(&zone).as_deref() == Some(region)
        && kops_api::zones::aws_region(&format!("{region}a")).is_none()
}

/// A GCE resource as the delete use case reports resources.
fn reported(r: &kops_gce::delete::Resource) -> Resource {
    Resource {
        phase: r.phase,
        kind: r.kind,
        id: r.id.clone(),
        name: r.name.clone(),
        shared: r.shared,
        vpc: None,
    }
}

/// `delete cluster` on GCE: kops-gce finds the cluster's resources in the
/// spec's project and region and deletes them; then the state goes.
async fn delete_gce(
    registry: &Registry,
    request: DeleteRequest,
    cluster: &kops_api::Cluster,
) -> Result<DeleteOutcome, OpsError> {
    let cloud_kind = crate::cloud::Cloud::Gce;
    let region = match &request.region {
        Some(r) => r.clone(),
        None => cloud_kind.region(cluster)?,
    };
    let project = crate::render::gce::project(cluster)?;
    let spec = &cluster.spec;
    let shared: std::collections::BTreeSet<String> = spec
        .network_id
        .iter()
        .chain(spec.subnets.iter().flatten().filter_map(|s| s.id.as_ref()))
        .filter(|id| !id.is_empty())
        .map(|id| id.rsplit('/').next().unwrap_or(id).to_string())
        .collect();
    let uses_none_dns = spec
        .topology
        .as_ref()
        .and_then(|t| t.dns.as_ref())
        .and_then(|d| d.kind.as_deref())
        == Some("None");
    let scope = kops_gce::delete::Scope {
        cluster: request.cluster.clone(),
        shared,
        dns: !uses_none_dns && !cluster.is_gossip(),
    };
    let cloud =
        kops_gce::cloud::GceCloud::new(&project, &region).map_err(|reason| OpsError::NotOnAws {
            cluster: request.cluster.clone(),
            reason,
        })?;
    let found = kops_gce::delete::list_cluster_resources(&cloud, &scope).await?;
    let state_keys = registry
        .store()
        .list(&format!("{}/", request.cluster))
        .await
        .map_err(kops_state::registry::RegistryError::from)?;
    let calls = |cloud: &kops_gce::cloud::GceCloud| -> u64 { cloud.calls().values().sum() };
    let resources = found.iter().map(reported).collect();
    if !request.yes {
        return Ok(DeleteOutcome {
            resources,
            state_keys,
            report: None,
            calls: calls(&cloud),
            limits: cloud.limit_waits(),
            provider: "Google Cloud",
        });
    }
    let progress =
        |r: &kops_gce::delete::Resource, why: Option<&str>| (request.progress)(&reported(r), why);
    let done = kops_gce::delete::delete_resources(
        &cloud,
        found,
        request.passes,
        request.interval,
        &progress,
    )
    .await?;
    registry.delete_cluster_state(&request.cluster).await?;
    Ok(DeleteOutcome {
        resources,
        state_keys,
        report: Some(DeleteReport {
            deleted: done.deleted.iter().map(reported).collect(),
            kept: done.kept.iter().map(reported).collect(),
            passes: done.passes,
        }),
        calls: calls(&cloud),
        limits: cloud.limit_waits(),
        provider: "Google Cloud",
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn google_and_aws_regions_are_told_apart() {
        for gce in ["us-central1", "us-test1", "europe-west4", "asia-northeast1"] {
            assert!(super::is_gce_region(gce), "{gce}");
        }
        for aws in [
            "us-east-1",
            "eu-west-2",
            "us-gov-west-1",
            "ap-southeast-5",
            "x",
        ] {
            assert!(!super::is_gce_region(aws), "{aws}");
        }
    }
}
