//! The [`Provider`] trait: a running cluster on one cloud.

use std::collections::BTreeMap;

use async_trait::async_trait;

use crate::{CloudError, Dump, Group, Instance, InstanceDetails};

/// One cluster on its cloud, as the use cases that read and replace its
/// instances see it (`validate`, `rolling-update`, `get instances`,
/// `delete instance`, `toolbox dump`). Each cloud crate implements it; a
/// use case holds a `dyn Provider` and never asks which cloud it is.
#[async_trait]
pub trait Provider: Send + Sync {
    /// kops' name of the cloud (`spec.cloudProvider`: `aws`, `gce`,
    /// `vsphere`).
    fn name(&self) -> &'static str;

    /// The cluster's groups with their instances, read fresh.
    async fn groups(&self) -> Result<Vec<Group>, CloudError>;

    /// Replaces an instance: its group makes a new one (a detached
    /// instance is simply terminated).
    async fn terminate(&self, group: &str, instance: &Instance) -> Result<(), CloudError>;

    /// Whether the cloud can take an instance out of its group while it
    /// keeps running (surge). AWS can; GCE and vSphere cannot.
    fn supports_surge(&self) -> bool {
        false
    }

    /// Takes an instance out of its group without lowering the group's
    /// size (the group launches a replacement beside it).
    async fn detach(&self, _group: &str, _instance: &Instance) -> Result<(), CloudError> {
        Err(CloudError::NoSurge {
            cloud: self.name().to_string(),
        })
    }

    /// Whether `gone`, replaced by this roll, is replaced in `group` as
    /// read now: no member in service is it any more (AWS gives a
    /// replacement a new id; GCE recreates an instance under its name, and
    /// overrides this).
    fn is_replaced(&self, group: &Group, gone: &str) -> bool {
        !group
            .instances
            .iter()
            .any(|i| !i.detached && !i.lifecycle_state.starts_with("Terminating") && i.id == gone)
    }

    /// The cluster's instances' addresses, roles and machine types by id.
    async fn details(&self) -> Result<BTreeMap<String, InstanceDetails>, CloudError>;

    /// `toolbox dump`: the cluster's cloud resources and instances.
    async fn dump(&self) -> Result<Dump, CloudError>;

    /// The cloud calls made so far as one status line, when the cloud
    /// counts them.
    fn calls_summary(&self) -> Option<String> {
        None
    }
}
