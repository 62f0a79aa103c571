//! VMware vSphere: VMs reconciled with the groups' sizes (kops-ops'
//! `vsphere` module over kops-vsphere); no file targets.

use std::sync::Arc;

use async_trait::async_trait;
use kops_api::Cluster;

use super::Cloud;
use crate::delete::request::{DeleteOutcome, DeleteRequest};
use crate::render::request::{CloudRender, Prepared, RenderClusterError, RenderTarget};
use crate::update::request::{UpdateRequest, Updated};
use crate::{OpsError, Registry};

pub(super) struct Vsphere;

#[async_trait]
impl Cloud for Vsphere {
    /// vSphere has no regions: the datacenter stands in.
    fn region(&self, cluster: &Cluster) -> Result<String, OpsError> {
        Ok(kops_vsphere_model::settings::settings(cluster)?
            .placement
            .datacenter)
    }

    async fn provider(
        &self,
        registry: &Registry,
        cluster: &Cluster,
    ) -> Result<Arc<dyn kops_cloud::Provider>, OpsError> {
        let opened = crate::vsphere::instances(registry, cluster.name());
        Ok(Arc::new(opened.await?))
    }

    async fn update(
        &self,
        registry: &Registry,
        request: UpdateRequest,
    ) -> Result<Updated, OpsError> {
        let copy = request.options.vsphere_copy_operator_credentials;
        crate::vsphere::update(registry, &request.cluster, request.apply, copy)
            .await
            .map(Updated::Vms)
    }

    fn renders_files(&self) -> Result<(), OpsError> {
        Err(no_file_targets())
    }

    async fn render(
        &self,
        _registry: &Registry,
        _prepared: &Prepared,
        _target: RenderTarget,
        _network_only: bool,
    ) -> Result<CloudRender, RenderClusterError> {
        Err(no_file_targets().into())
    }

    async fn delete(
        &self,
        registry: &Registry,
        request: DeleteRequest,
        spec: Option<&Cluster>,
    ) -> Result<DeleteOutcome, OpsError> {
        if spec.is_none() {
            return Err(super::spec::external_is_aws("s3://BUCKET"));
        }
        crate::delete::vsphere::delete(registry, request).await
    }
}

/// vSphere clusters have no file target (see docs/vsphere.md).
fn no_file_targets() -> OpsError {
    crate::flag_error(
        "--target",
        "vSphere clusters are applied directly; kops-rs renders no Terraform for them",
        "use `--target direct` (the default)",
    )
}
