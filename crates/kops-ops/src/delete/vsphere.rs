//! `delete cluster` on vSphere.

use kops_aws::delete::{DeleteReport, Resource};

use super::request::{DeleteOutcome, DeleteRequest};
use crate::{OpsError, Registry};

/// `delete cluster` on vSphere: the cluster's VMs in its folder (powered
/// off, then destroyed), the folder when nothing else is in it, then the
/// cluster's state.
pub(crate) async fn delete(
    registry: &Registry,
    request: DeleteRequest,
) -> Result<DeleteOutcome, OpsError> {
    let (vms, calls) = crate::vsphere::delete(registry, &request.cluster, request.yes).await?;
    let resources: Vec<Resource> = vms
        .into_iter()
        .map(|vm| Resource {
            phase: 0,
            kind: "VirtualMachine",
            id: vm.clone(),
            name: vm,
            shared: false,
            vpc: None,
        })
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
