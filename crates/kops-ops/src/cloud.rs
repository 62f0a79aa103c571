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

use crate::delete::{DeleteOutcome, DeleteRequest};
use crate::render::{CloudRender, Prepared, RenderClusterError, RenderTarget};
use crate::update::{UpdateRequest, Updated};
use crate::{OpsError, Registry};

mod aws;
mod gce;
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

/// `--external` on a cloud other than AWS (which [`external`] never
/// picks): the refusal kops' `--external` would give.
fn external_is_aws(store: &str) -> OpsError {
    crate::flag_error(
        "--external",
        "--external finds a cluster's resources on AWS only, as kops' does",
        &format!("delete the cluster from the state store that holds its spec: `kops delete cluster NAME --state {store}`, without --external"),
    )
}

/// An AWS cluster's region: the region of its subnets' zones.
pub fn aws_region(cluster: &kops_api::Cluster) -> Result<String, OpsError> {
    cluster.aws_region().ok_or_else(|| OpsError::CannotApply {
        cluster: cluster.name().to_string(),
        reason: "its subnets name no AWS availability zone".into(),
    })
}

/// The cluster's Google Cloud project (`spec.project`), required on GCE.
pub fn gce_project(cluster: &kops_api::Cluster) -> Result<String, OpsError> {
    cluster
        .spec
        .project
        .clone()
        .filter(|p| !p.is_empty())
        .ok_or_else(|| OpsError::CannotApply {
            cluster: cluster.name().to_string(),
            reason:
                "spec.project is not set; set it to the Google Cloud project the cluster lives in"
                    .into(),
        })
}

/// A GCE cluster's region: `subnets[].region`, else the region of a
/// subnet's zone.
pub fn gce_region(cluster: &Cluster) -> Result<String, OpsError> {
    let subnets = cluster.spec.subnets.iter().flatten();
    subnets
        .clone()
        .find_map(|s| s.region.clone().filter(|r| !r.is_empty()))
        .or_else(|| {
            subnets
                .filter_map(|s| s.zone.as_deref())
                .find_map(kops_api::zones::gce_region)
        })
        .ok_or_else(|| OpsError::CannotApply {
            cluster: cluster.name().to_string(),
            reason: "its subnets name no GCE region (spec.subnets[].region)".into(),
        })
}
