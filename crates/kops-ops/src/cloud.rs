//! The one place kops-ops looks at `spec.cloudProvider`: [`of`] turns it
//! into the cluster's [`Cloud`], and every use case that depends on the
//! cloud (update, render, delete, the running cluster as a
//! [`kops_cloud::Provider`], the region, machine types) asks that value.
//! Each implementation (`aws.rs`, `gce.rs`, `vsphere.rs`) only hands the
//! cloud-neutral inputs to its cloud's use-case modules
//! (`update/aws.rs`, `render/gce.rs`, `delete/vsphere.rs`, ...) and its
//! cloud crate; nothing else asks which cloud it is.

use std::sync::Arc;

use async_trait::async_trait;
use kops_api::Cluster;

use crate::delete::request::{DeleteOutcome, DeleteRequest};
use crate::render::request::{CloudRender, Prepared, RenderClusterError, RenderTarget};
use crate::update::request::{UpdateRequest, Updated};
use crate::{OpsError, Registry};

mod aws;
mod gce;
pub mod spec;
mod vsphere;

/// What the use cases ask of the cluster's cloud.
#[async_trait]
pub(crate) trait Cloud: Send + Sync {
    /// The cluster's region (vSphere: its datacenter).
    fn region(&self, cluster: &Cluster) -> Result<String, OpsError>;

    /// Whether the API's load balancer has a DNS name of the cloud's own
    /// that a kubeconfig reaches it by (AWS' `*.elb.amazonaws.com`); on
    /// the other clouds the API's name is what the kubeconfig says.
    fn names_load_balancers(&self) -> bool {
        false
    }

    /// That name, when the cloud has the cluster's API load balancer
    /// (`None`: not found); why the look-up failed.
    async fn api_load_balancer_dns_name(
        &self,
        _cluster: &Cluster,
    ) -> Result<Option<String>, String> {
        Ok(None)
    }

    /// The machine types the cluster's region offers, with the resources
    /// `toolbox instance-selector` filters on (EC2's; the other clouds'
    /// are not read: an error naming the cluster).
    async fn instance_types(
        &self,
        cluster: &Cluster,
    ) -> Result<Vec<kops_aws::instance_types::InstanceTypeInfo>, OpsError> {
        Err(OpsError::NoInstanceTypes {
            cluster: cluster.name().to_string(),
        })
    }

    /// The running cluster: its groups and instances as they are (no
    /// cloud call is made yet).
    async fn provider(
        &self,
        registry: &Registry,
        cluster: &Cluster,
    ) -> Result<Arc<dyn kops_cloud::Provider>, OpsError>;

    /// `update cluster` (direct), planned or applied.
    async fn update(
        &self,
        registry: &Registry,
        request: UpdateRequest,
    ) -> Result<Updated, OpsError>;

    /// Whether `update cluster --target` can render this cloud's clusters
    /// to files; an error naming `--target` when not.
    fn renders_files(&self) -> Result<(), OpsError> {
        Ok(())
    }

    /// `update cluster --target`: the cloud's files for the prepared
    /// cluster (`network_only`: `--phase network`).
    async fn render(
        &self,
        registry: &Registry,
        prepared: &Prepared,
        target: RenderTarget,
        network_only: bool,
    ) -> Result<CloudRender, RenderClusterError>;

    /// `delete cluster`: the cluster's resources found and, with `--yes`,
    /// deleted, then its state. `spec` is `None` with `--external`.
    async fn delete(
        &self,
        registry: &Registry,
        request: DeleteRequest,
        spec: Option<&Cluster>,
    ) -> Result<DeleteOutcome, OpsError>;
}

/// The cluster's cloud; an error naming `spec.cloudProvider` for one
/// kops-rs does not build for. The only `match` on the cloud.
pub(crate) fn of(cluster: &Cluster) -> Result<&'static dyn Cloud, OpsError> {
    match cluster.spec.cloud_provider.as_deref().unwrap_or("") {
        "aws" => Ok(&aws::Aws),
        kops_gce::CLOUD => Ok(&gce::Gce),
        kops_vsphere::CLOUD => Ok(&vsphere::Vsphere),
        other => Err(OpsError::CannotApply {
            cluster: cluster.name().to_string(),
            reason: format!(
                "its cloudProvider is `{other}`; kops-rs renders clusters on AWS, GCE and vSphere only"
            ),
        }),
    }
}

/// The cloud of `delete cluster --external`, which has no spec: AWS, as in
/// kops (its `--external` always builds an AWS client from `--region`).
pub(crate) fn external() -> &'static dyn Cloud {
    &aws::Aws
}
