//! Service accounts per role (or the one the spec gives), the control
//! plane's project role, and the state bucket's members in Cloud Storage.

use kops_api::Role;
use kops_engine::{TaskGraph, TaskKey};
use kops_model::ModelError;

use super::GceModel;
use crate::names;
use crate::tasks::{GceContext, ProjectIamBinding, ServiceAccount, StorageBucketIam};

/// The service-account task name of a role.
fn account_name(role: Role) -> &'static str {
    match role {
        Role::ControlPlane | Role::ApiServer => "control-plane",
        Role::Bastion => "bastion",
        Role::Node => "node",
    }
}

impl GceModel<'_> {
    /// The service account instances of `role` run as.
    pub fn service_account_key(&self, role: Role) -> TaskKey {
        if self.shared_service_account().is_some() {
            return ServiceAccount::key_of("shared");
        }
        ServiceAccount::key_of(account_name(role))
    }

    fn service_account_email(&self, role: Role) -> String {
        let id = names::service_account_id(account_name(role), self.cluster_name());
        format!("{id}@{}.iam.gserviceaccount.com", self.project)
    }
}

/// The bucket of a `gs://` config base.
pub fn state_bucket(config_base: &str) -> Option<&str> {
    let rest = config_base.strip_prefix("gs://")?;
    let bucket = rest.split('/').next().unwrap_or(rest);
    (!bucket.is_empty()).then_some(bucket)
}

pub fn build(gce: &GceModel<'_>, graph: &mut TaskGraph<GceContext>) -> Result<(), ModelError> {
    if let Some(email) = gce.shared_service_account() {
        graph.add(ServiceAccount {
            name: "shared".into(),
            account_id: email.split('@').next().unwrap_or(&email).to_string(),
            email,
            display_name: None,
            description: None,
            project: gce.project.to_string(),
            shared: true,
        })?;
        return Ok(());
    }
    let bucket = state_bucket(gce.model.config_base);
    for group in gce.groups() {
        let Some(role) = group.role() else { continue };
        let name = account_name(role);
        let key = ServiceAccount::key_of(name);
        if graph.contains(&key) {
            continue;
        }
        let description = match role {
            Role::ControlPlane | Role::ApiServer => "kubernetes control-plane instances",
            Role::Node => "kubernetes worker nodes",
            Role::Bastion => "bastion nodes",
        };
        graph.add(ServiceAccount {
            name: name.into(),
            email: gce.service_account_email(role),
            account_id: names::service_account_id(name, gce.cluster_name()),
            display_name: Some(name.into()),
            description: Some(description.into()),
            project: gce.project.to_string(),
            shared: false,
        })?;
        if name == "control-plane" {
            graph.add(ProjectIamBinding {
                name: "serviceaccount-control-plane".into(),
                project: gce.project.to_string(),
                role: "roles/container.serviceAgent".into(),
                member: key.clone(),
            })?;
        }
        // The control plane writes to the state bucket (etcd backups);
        // the other roles read it.
        if let Some(bucket) = bucket {
            let (what, bucket_role) = if role == Role::ControlPlane {
                ("objectadmin", "roles/storage.objectAdmin")
            } else if role == Role::Bastion {
                continue;
            } else {
                ("objectviewer", "roles/storage.objectViewer")
            };
            // kops' internal role names, lower-cased.
            let role_name = match role {
                Role::ControlPlane => "controlplane",
                Role::ApiServer => "apiserver",
                Role::Node => "node",
                Role::Bastion => "bastion",
            };
            graph.add(StorageBucketIam {
                name: format!("{what}-{bucket}-serviceaccount-{role_name}"),
                bucket: bucket.to_string(),
                role: bucket_role.into(),
                member: key,
            })?;
        }
    }
    Ok(())
}
