//! `kops validate cluster` and `kops rolling-update cluster`: the cloud's
//! view of each instance group (autoscaling groups, their instances and the
//! launch template version each runs) matched with the Kubernetes nodes and
//! pods, the health checks kops makes, and the roll that replaces outdated
//! instances (bastions, then the control plane one at a time, then nodes;
//! cordon, drain through the Eviction API, terminate or detach for surge,
//! wait and validate between steps).
//!
//! The cloud and the Kubernetes API are reached through two small traits
//! ([`Cloud`], [`Kubernetes`]) with one production implementation each (AWS
//! through kops-aws, Kubernetes through kube-rs), so the scheduler is the
//! same code in tests and benchmarks. This crate lives apart from kops-ops
//! to keep kube-rs out of the other use cases. It never prints: progress is
//! reported through [`Progress`] and results are returned as data.

mod error;
pub mod groups;
pub mod k8s;
pub mod rolling_update;
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

use async_trait::async_trait;
use kops_aws::instances::{GroupInstances, Instance};

/// Receives what a long operation is doing (the binary prints it on stderr).
pub type Progress = std::sync::Arc<dyn Fn(&RollEvent) + Send + Sync>;

/// The cloud side of a roll: read the cluster's groups, replace instances.
#[async_trait]
pub trait Cloud: Send + Sync {
    /// The cluster's autoscaling groups with their instances, read fresh.
    async fn groups(&self) -> Result<Vec<GroupInstances>, RollError>;
    /// Terminates an instance so that its group replaces it (a detached
    /// instance is simply terminated).
    async fn terminate(&self, group: &str, instance: &Instance) -> Result<(), RollError>;
    /// Detaches an instance from its group without lowering the group's
    /// desired capacity (the group launches a replacement).
    async fn detach(&self, group: &str, instance: &Instance) -> Result<(), RollError>;
}

/// [`Cloud`] on AWS.
pub struct AwsGroups {
    pub cloud: kops_aws::AwsCloud,
    pub cluster: String,
}

#[async_trait]
impl Cloud for AwsGroups {
    async fn groups(&self) -> Result<Vec<GroupInstances>, RollError> {
        Ok(kops_aws::instances::cluster_groups(&self.cloud, &self.cluster).await?)
    }

    async fn terminate(&self, _group: &str, instance: &Instance) -> Result<(), RollError> {
        if instance.detached {
            kops_aws::instances::terminate_instance(&self.cloud, &instance.id).await?;
        } else {
            kops_aws::instances::terminate_in_group(&self.cloud, &instance.id).await?;
        }
        Ok(())
    }

    async fn detach(&self, group: &str, instance: &Instance) -> Result<(), RollError> {
        Ok(kops_aws::instances::detach_for_surge(&self.cloud, group, &instance.id).await?)
    }
}

/// Loads the cluster, its instance groups and opens AWS for it.
pub(crate) async fn load_cluster(
    registry: &kops_ops::Registry,
    name: &str,
    sdk_config: Option<aws_config::SdkConfig>,
) -> Result<
    (
        kops_api::Cluster,
        Vec<kops_api::InstanceGroup>,
        kops_aws::AwsCloud,
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
    let region = kops_ops::update::cluster_region(&cluster)?;
    let cloud = match sdk_config {
        Some(config) => kops_aws::AwsCloud::from_config(&region, config),
        None => kops_aws::AwsCloud::new(&region).await,
    };
    Ok((cluster, groups, cloud))
}
