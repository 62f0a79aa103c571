//! AWS: the use cases' AWS modules and kops-aws.

use std::sync::Arc;

use async_trait::async_trait;
use kops_api::Cluster;

use super::Cloud;
use crate::delete::request::{DeleteOutcome, DeleteRequest};
use crate::render::request::{CloudRender, Prepared, RenderClusterError, RenderTarget};
use crate::update::request::{UpdateRequest, Updated};
use crate::{OpsError, Registry};

pub(super) struct Aws;

#[async_trait]
impl Cloud for Aws {
    fn region(&self, cluster: &Cluster) -> Result<String, OpsError> {
        super::spec::aws_region(cluster)
    }

    fn names_load_balancers(&self) -> bool {
        true
    }

    /// The newest network load balancer whose `Name` tag is
    /// `api.<cluster>`.
    async fn api_load_balancer_dns_name(
        &self,
        cluster: &Cluster,
    ) -> Result<Option<String>, String> {
        let name = cluster.name().to_string();
        let region = self.region(cluster).map_err(|e| e.to_string())?;
        let cloud = kops_aws::AwsCloud::new(&region).await;
        // A fresh listing per try: AWS' retryable answers (throttling, 5xx)
        // are asked again, as the update's own listings are.
        let lbs = kops_aws::retrying(
            "looking up the API load balancer",
            |e: &kops_engine::TaskError| matches!(e, kops_engine::TaskError::Retryable { .. }),
            || {
                let ctx =
                    kops_aws::AwsContext::new(cloud.clone(), name.clone(), Default::default());
                async move { ctx.load_balancers().await.map(<[_]>::to_vec) }
            },
        )
        .await
        .map_err(|e| e.to_string())?;
        let wanted = format!("api.{name}");
        let newest = lbs
            .iter()
            .filter(|(_, tags)| tags.get("Name") == Some(&wanted))
            .max_by_key(|(lb, _)| lb.created_time().map(|t| (t.secs(), t.subsec_nanos())));
        Ok(newest
            .and_then(|(lb, _)| lb.dns_name())
            .filter(|d| !d.is_empty())
            .map(str::to_string))
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
        let (cluster, groups) = crate::update::request::prepare(registry, &mut request).await?;
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
