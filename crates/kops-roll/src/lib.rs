//! `kops validate cluster` and `kops rolling-update cluster`: the cloud's
//! view of each instance group (autoscaling groups, their instances and the
//! launch template version each runs) matched with the Kubernetes nodes and
//! pods, the health checks kops makes, and the roll that replaces outdated
//! instances (bastions, then the control plane one at a time, then nodes;
//! cordon, drain through the Eviction API, terminate or detach for surge,
//! wait and validate between steps).
//!
//! The cloud and the Kubernetes API are reached through two small traits
//! ([`Provider`], [`Kubernetes`]): the cluster's cloud as kops-cloud's
//! `Provider` (opened by kops-ops' one dispatch, `kops_ops::cloud::provider`)
//! and Kubernetes through kube-rs, so the scheduler is the same code on every
//! cloud, in tests and benchmarks. This crate lives apart from kops-ops to
//! keep kube-rs out of the other use cases; [`secrets`] is the one write
//! `update cluster` makes through the Kubernetes API. It never prints:
//! progress is reported through [`Progress`] and results are returned as
//! data.

mod error;
pub mod groups;
pub mod k8s;
pub mod rolling_update;
pub mod secrets;
pub mod skew;
pub mod validate;

pub use error::RollError;
pub use groups::{build_groups, CloudGroup, CloudInstance, InstanceStatus};
pub use k8s::{Eviction, KubeClient, Kubernetes, NodeInfo, PodInfo};
pub use rolling_update::{
    plan_rolling_update, resolve_settings, RollEvent, RollOptions, Roller, RollingUpdatePlan,
    RollingUpdateRequest,
};
pub use validate::{
    validate_cluster, validate_groups, ValidateRequest, ValidationCluster, ValidationFailure,
    ValidationNode, ValidationOutcome,
};

use std::sync::Arc;

pub use kops_cloud::{CloudError, Dump, Group, Instance, InstanceDetails, Provider};

/// Receives what a long operation is doing (the binary prints it on stderr).
pub type Progress = std::sync::Arc<dyn Fn(&RollEvent) + Send + Sync>;

/// Loads the cluster, its instance groups and opens its cloud.
pub(crate) async fn load_cluster(
    registry: &kops_ops::Registry,
    name: &str,
) -> Result<
    (
        kops_api::Cluster,
        Vec<kops_api::InstanceGroup>,
        Arc<dyn Provider>,
    ),
    RollError,
> {
    let cluster = kops_ops::require_cluster(registry, name).await?;
    let groups = registry
        .list_instance_groups(name)
        .await
        .map_err(kops_ops::OpsError::from)?;
    if groups.is_empty() {
        return Err(RollError::NoInstanceGroups {
            cluster: name.to_string(),
        });
    }
    let cloud = kops_ops::provider::provider(registry, &cluster).await?;
    Ok((cluster, groups, cloud))
}
