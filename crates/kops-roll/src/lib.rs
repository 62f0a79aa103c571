//! `kops validate cluster` and `kops rolling-update cluster`: the cloud's
//! view of each instance group (autoscaling groups, their instances and the
//! launch template version each runs) matched with the Kubernetes nodes and
//! pods, the health checks kops makes, and the roll that replaces outdated
//! instances (bastions, then the control plane one at a time, then nodes;
//! cordon, drain through the Eviction API, terminate or detach for surge,
//! wait and validate between steps).
//!
//! The cloud and the Kubernetes API are reached through two small traits
//! ([`Cloud`], [`Kubernetes`]): a cloud per provider (AWS through kops-aws,
//! GCE and vSphere through kops-ops, chosen once by [`open_cloud`]) and
//! Kubernetes through kube-rs, so the scheduler is the same code on every
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

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use kops_aws::delete::dump::ClusterDump;
use kops_aws::instances::{GroupInstances, Instance, InstanceDetails};

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
    /// Whether the cloud can take an instance out of its group while it
    /// keeps running (surge). AWS can; GCE cannot.
    fn supports_surge(&self) -> bool {
        true
    }
    /// Whether `gone`, terminated by this roll, is replaced in `group` as
    /// read now: no member in service is it any more (AWS gives a
    /// replacement a new id; GCE recreates an instance under its name).
    fn is_replaced(&self, group: &GroupInstances, gone: &str) -> bool {
        !group
            .instances
            .iter()
            .any(|i| !i.detached && !i.lifecycle_state.starts_with("Terminating") && i.id == gone)
    }
    /// The cluster's instances' addresses, roles and machine types by id
    /// (none known by default).
    async fn details(&self) -> Result<BTreeMap<String, InstanceDetails>, RollError> {
        Ok(BTreeMap::new())
    }
    /// `toolbox dump`: the cluster's cloud resources and instances.
    async fn dump(&self) -> Result<ClusterDump, RollError> {
        Ok(ClusterDump::default())
    }
    /// The cloud calls made so far as one status line, when the cloud
    /// counts them.
    fn calls_summary(&self) -> Option<String> {
        None
    }
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

    async fn details(&self) -> Result<BTreeMap<String, InstanceDetails>, RollError> {
        Ok(kops_aws::instances::instance_details(&self.cloud, &self.cluster).await?)
    }

    async fn dump(&self) -> Result<ClusterDump, RollError> {
        Ok(kops_aws::delete::dump::dump_cluster(&self.cloud, &self.cluster).await?)
    }
}

/// [`Cloud`] on GCE: managed instance groups; an instance is replaced by
/// having its group recreate it (kops' `DeleteInstance` on GCE). There is
/// no surge on GCE: detaching fails as it does in kops.
#[async_trait]
impl Cloud for kops_ops::gce_instances::GceInstances {
    async fn groups(&self) -> Result<Vec<GroupInstances>, RollError> {
        Ok(kops_ops::gce_instances::GceInstances::groups(self).await?)
    }

    async fn terminate(&self, group: &str, instance: &Instance) -> Result<(), RollError> {
        Ok(self.recreate(group, instance).await?)
    }

    async fn detach(&self, _group: &str, _instance: &Instance) -> Result<(), RollError> {
        Err(RollError::NoSurge {
            cloud: "gce".into(),
        })
    }

    fn supports_surge(&self) -> bool {
        false
    }

    fn is_replaced(&self, group: &GroupInstances, gone: &str) -> bool {
        kops_ops::gce_instances::GceInstances::is_replaced(self, group, gone)
    }

    async fn details(&self) -> Result<BTreeMap<String, InstanceDetails>, RollError> {
        Ok(kops_ops::gce_instances::GceInstances::details(self).await?)
    }

    async fn dump(&self) -> Result<ClusterDump, RollError> {
        let d = kops_ops::gce_instances::GceInstances::dump(self).await?;
        tracing::debug!(calls = ?self.calls(), "Google Compute calls");
        Ok(d)
    }
}

/// [`Cloud`] on vSphere: no groups of its own, each instance group's VMs
/// found by their markers; a VM is replaced by destroying it and cloning
/// its group's spec again. Like GCE, there is no surge: a VM cannot be
/// taken out of its group while it runs (the group is its marker), so
/// kops' default for clouds other than AWS holds (maxSurge 0) and asking
/// for surge fails as on GCE.
#[async_trait]
impl Cloud for kops_ops::vsphere_instances::VsphereInstances {
    async fn groups(&self) -> Result<Vec<GroupInstances>, RollError> {
        Ok(kops_ops::vsphere_instances::VsphereInstances::groups(self).await?)
    }

    async fn terminate(&self, _group: &str, instance: &Instance) -> Result<(), RollError> {
        self.replace(instance).await?;
        Ok(())
    }

    async fn detach(&self, _group: &str, _instance: &Instance) -> Result<(), RollError> {
        Err(RollError::NoSurge {
            cloud: "vsphere".into(),
        })
    }

    fn supports_surge(&self) -> bool {
        false
    }

    async fn details(&self) -> Result<BTreeMap<String, InstanceDetails>, RollError> {
        Ok(kops_ops::vsphere_instances::VsphereInstances::details(self).await?)
    }

    async fn dump(&self) -> Result<ClusterDump, RollError> {
        Ok(kops_ops::vsphere_instances::VsphereInstances::dump(self).await?)
    }

    fn calls_summary(&self) -> Option<String> {
        Some(self.summary())
    }
}

/// The cluster's cloud as kops-roll reads it: the one dispatch on
/// `spec.cloudProvider` (through [`kops_ops::cloud::Cloud`]).
pub async fn open_cloud(
    registry: &kops_ops::Registry,
    cluster: &kops_api::Cluster,
    sdk_config: Option<aws_config::SdkConfig>,
) -> Result<Arc<dyn Cloud>, RollError> {
    match kops_ops::cloud::Cloud::of(cluster)? {
        kops_ops::cloud::Cloud::Aws => {
            let region = kops_ops::update::cluster_region(cluster)?;
            let cloud = match sdk_config {
                Some(config) => kops_aws::AwsCloud::from_config(&region, config),
                None => kops_aws::AwsCloud::new(&region).await,
            };
            Ok(Arc::new(AwsGroups {
                cloud,
                cluster: cluster.name().to_string(),
            }))
        }
        kops_ops::cloud::Cloud::Gce => Ok(Arc::new(kops_ops::gce_instances::GceInstances::open(
            cluster,
        )?)),
        kops_ops::cloud::Cloud::Vsphere => Ok(Arc::new(
            kops_ops::vsphere_instances::VsphereInstances::open(registry, cluster.name()).await?,
        )),
    }
}

/// Loads the cluster, its instance groups and opens its cloud.
pub(crate) async fn load_cluster(
    registry: &kops_ops::Registry,
    name: &str,
    sdk_config: Option<aws_config::SdkConfig>,
) -> Result<
    (
        kops_api::Cluster,
        Vec<kops_api::InstanceGroup>,
        Arc<dyn Cloud>,
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
    let cloud = open_cloud(registry, &cluster, sdk_config).await?;
    Ok((cluster, groups, cloud))
}
