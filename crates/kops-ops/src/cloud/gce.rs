//! Google Cloud: the use cases' GCE modules and kops-gce, in the spec's
//! project.

use std::sync::Arc;

use async_trait::async_trait;
use kops_api::Cluster;

use super::Cloud;
use crate::delete::request::{DeleteOutcome, DeleteRequest};
use crate::render::request::{CloudRender, Prepared, RenderClusterError, RenderTarget};
use crate::update::request::{UpdateRequest, Updated};
use crate::{OpsError, Registry};

pub(super) struct Gce;

#[async_trait]
impl Cloud for Gce {
    fn region(&self, cluster: &Cluster) -> Result<String, OpsError> {
        super::spec::gce_region(cluster)
    }

    async fn provider(
        &self,
        _registry: &Registry,
        cluster: &Cluster,
    ) -> Result<Arc<dyn kops_cloud::Provider>, OpsError> {
        let name = cluster.name();
        let project = super::spec::gce_project(cluster)?;
        let opened = kops_gce::provider::GceProvider::open(&project, &self.region(cluster)?, name);
        Ok(Arc::new(opened.map_err(|e| OpsError::CannotApply {
            cluster: name.to_string(),
            reason: e.to_string(),
        })?))
    }

    async fn update(
        &self,
        registry: &Registry,
        mut request: UpdateRequest,
    ) -> Result<Updated, OpsError> {
        let (cluster, groups) = crate::update::request::prepare(registry, &mut request).await?;
        crate::update::gce::update(registry, request, cluster, groups)
            .await
            .map(Updated::Tasks)
    }

    async fn render(
        &self,
        _registry: &Registry,
        prepared: &Prepared,
        target: RenderTarget,
        _network_only: bool,
    ) -> Result<CloudRender, RenderClusterError> {
        crate::render::gce::render(prepared, target)
    }

    async fn delete(
        &self,
        registry: &Registry,
        request: DeleteRequest,
        spec: Option<&Cluster>,
    ) -> Result<DeleteOutcome, OpsError> {
        let Some(cluster) = spec else {
            return Err(super::spec::external_is_aws("gs://BUCKET"));
        };
        crate::delete::gce::delete(registry, request, cluster).await
    }
}
