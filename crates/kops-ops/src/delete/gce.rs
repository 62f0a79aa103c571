//! `delete cluster` on GCE.

use kops_aws::delete::{DeleteReport, Resource};

use super::request::{DeleteOutcome, DeleteRequest};
use crate::{OpsError, Registry};

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
pub(crate) async fn delete(
    registry: &Registry,
    request: DeleteRequest,
    cluster: &kops_api::Cluster,
) -> Result<DeleteOutcome, OpsError> {
    let region = match &request.region {
        Some(r) => r.clone(),
        None => crate::cloud::spec::gce_region(cluster)?,
    };
    let project = crate::cloud::spec::gce_project(cluster)?;
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
        kops_gce::cloud::GceCloud::new(&project, &region).map_err(|e| OpsError::CannotApply {
            cluster: request.cluster.clone(),
            reason: e.to_string(),
        })?;
    let found = kops_gce::delete::list_cluster_resources(&cloud, &scope).await?;
    let state_keys = registry
        .store()
        .list(&format!("{}/", request.cluster))
        .await
        .map_err(kops_state::registry::RegistryError::from)?;
    let calls = |cloud: &kops_gce::cloud::GceCloud| {
        format!("{} Google Cloud calls", cloud.calls().values().sum::<u64>())
    };
    let resources = found.iter().map(reported).collect();
    if !request.yes {
        return Ok(DeleteOutcome {
            resources,
            state_keys,
            report: None,
            calls: calls(&cloud),
            limits: cloud.limit_waits(),
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
    })
}
