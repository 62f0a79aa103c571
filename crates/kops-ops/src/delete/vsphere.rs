//! `delete cluster` on vSphere.

use kops_aws::delete::{DeleteReport, Resource};

use super::request::{DeleteOutcome, DeleteRequest};
use crate::{OpsError, Registry};

/// `delete cluster` on vSphere: the cluster's VMs in its folder (powered
/// off, then destroyed), the folder when nothing else is in it, its etcd
/// disks, then the cluster's state.
pub(crate) async fn delete(
    registry: &Registry,
    request: DeleteRequest,
) -> Result<DeleteOutcome, OpsError> {
    let (removal, calls) = crate::vsphere::delete(registry, &request.cluster, request.yes).await?;
    let resource = |phase, kind, name: String| Resource {
        phase,
        kind,
        id: name.clone(),
        name,
        shared: false,
        vpc: None,
    };
    // The etcd disks go after the VMs they may be attached to.
    let resources: Vec<Resource> = removal
        .vms
        .into_iter()
        .map(|vm| resource(0, "VirtualMachine", vm))
        .chain(
            removal
                .disks
                .into_iter()
                .map(|disk| resource(1, "FirstClassDisk", disk)),
        )
        .collect();
    let state_keys = registry
        .store()
        .list(&format!("{}/", request.cluster))
        .await
        .map_err(kops_state::registry::RegistryError::from)?;
    let report = if request.yes {
        registry.delete_cluster_state(&request.cluster).await?;
        Some(DeleteReport {
            deleted: resources.clone(),
            kept: Vec::new(),
            passes: 1,
        })
    } else {
        None
    };
    Ok(DeleteOutcome {
        resources,
        state_keys,
        report,
        calls: kops_vsphere::calls_summary(&calls),
        limits: kops_engine::LimitWaits::default(),
    })
}
