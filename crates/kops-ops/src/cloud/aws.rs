//! AWS: the use cases' AWS modules and kops-aws.

use std::sync::Arc;

use async_trait::async_trait;
use kops_api::Cluster;

use super::Cloud;
use crate::delete::{DeleteOutcome, DeleteRequest};
use crate::render::{CloudRender, Prepared, RenderClusterError, RenderTarget};
use crate::update::{UpdateRequest, Updated};
use crate::{OpsError, Registry};

pub(super) struct Aws;

#[async_trait]
impl Cloud for Aws {
    fn region(&self, cluster: &Cluster) -> Result<String, OpsError> {
        super::aws_region(cluster)
    }

    fn names_load_balancers(&self) -> bool {
        true
    }

    async fn instance_types(
        &self,
        cluster: &Cluster,
    ) -> Result<Vec<kops_aws::instance_types::InstanceTypeInfo>, OpsError> {
        let cloud = kops_aws::AwsCloud::new(&self.region(cluster)?).await;
        Ok(kops_aws::instance_types::instance_types(&cloud).await?)
    }

    async fn provider(
        &self,
        _registry: &Registry,
        cluster: &Cluster,
    ) -> Result<Arc<dyn kops_cloud::Provider>, OpsError> {
        Ok(Arc::new(kops_aws::provider::AwsProvider {
            cloud: kops_aws::AwsCloud::new(&self.region(cluster)?).await,
            cluster: cluster.name().to_string(),
        }))
    }

    async fn update(
        &self,
        registry: &Registry,
        mut request: UpdateRequest,
    ) -> Result<Updated, OpsError> {
        let (cluster, groups) = crate::update::prepare(registry, &mut request).await?;
        crate::update::aws::update(registry, request, cluster, groups)
            .await
            .map(Updated::Tasks)
    }

    async fn render(
        &self,
        registry: &Registry,
        prepared: &Prepared,
        target: RenderTarget,
        network_only: bool,
    ) -> Result<CloudRender, RenderClusterError> {
        crate::render::aws::render(registry, prepared, target, network_only).await
    }

    async fn delete(
        &self,
        registry: &Registry,
        request: DeleteRequest,
        spec: Option<&Cluster>,
    ) -> Result<DeleteOutcome, OpsError> {
        crate::delete::aws::delete(registry, request, spec).await
    }
}
