//! A GCE cluster's running instances as a [`kops_cloud::Provider`], in the
//! shape `validate cluster`, `rolling-update cluster`, `get instances` and
//! `delete instance` read on every cloud: one group per managed
//! instance group (so one per instance group and zone, as kops shows
//! them), its size as its target size (a MIG has no minimum or maximum:
//! kops prints the target size for all three), and each instance named by
//! its GCE name, which the node's provider ID `gce://<project>/<zone>/<name>`
//! ends with. [`crate::instances`] does the reading.
//!
//! A recreated instance keeps its name and gets a new numeric id, so
//! [`GceProvider`] keeps the ids it read to tell a replacement from the
//! instance it replaces.

use std::collections::BTreeMap;
use std::sync::Mutex;

use kops_cloud::{
    CloudError, Dump as ClusterDump, DumpedInstance, DumpedResource, DumpedSubnet,
    Group as GroupInstances, Instance, InstanceDetails,
};

use crate::cloud::{ApiError, GceCloud};
use crate::instances::{ManagedGroup, ManagedInstance};

/// A GCE cluster's managed groups, read fresh on each call.
pub struct GceProvider {
    pub cloud: GceCloud,
    pub cluster: String,
    /// Numeric ids of the last read, by instance name.
    ids: Mutex<BTreeMap<String, String>>,
    /// Numeric ids of the instances this run had recreated, by name.
    recreated: Mutex<BTreeMap<String, String>>,
    /// Addresses, roles and machine types of the last read, by name.
    details: Mutex<BTreeMap<String, InstanceDetails>>,
}

impl GceProvider {
    /// Opens the cluster `cluster` in `project`'s `region`.
    pub fn open(
        project: &str,
        region: &str,
        cluster: &str,
    ) -> Result<GceProvider, crate::GceError> {
        let cloud = GceCloud::new(project, region)?;
        Ok(GceProvider {
            cloud,
            cluster: cluster.to_string(),
            ids: Mutex::default(),
            recreated: Mutex::default(),
            details: Mutex::default(),
        })
    }

    /// The cluster's groups with their instances.
    pub async fn groups(&self) -> Result<Vec<GroupInstances>, ApiError> {
        let managed = crate::instances::cluster_groups(&self.cloud, &self.cluster).await?;
        let mut ids = BTreeMap::new();
        let mut details = BTreeMap::new();
        for i in managed.iter().flat_map(|g| &g.instances) {
            ids.insert(i.name.clone(), i.id.clone());
            details.insert(i.name.clone(), instance_details(i));
        }
        *self.ids.lock().unwrap() = ids;
        *self.details.lock().unwrap() = details;
        Ok(managed.iter().map(group_instances).collect())
    }

    /// Addresses, roles and machine types by instance name (read with the
    /// groups when they were read).
    pub async fn details(&self) -> Result<BTreeMap<String, InstanceDetails>, ApiError> {
        if self.ids.lock().unwrap().is_empty() {
            self.groups().await?;
        }
        Ok(self.details.lock().unwrap().clone())
    }

    /// Has the group make `instance` again from its current template.
    pub async fn recreate(&self, group: &str, instance: &Instance) -> Result<(), ApiError> {
        if self.ids.lock().unwrap().is_empty() {
            self.groups().await?;
        }
        let zone = instance.zone.clone().unwrap_or_default();
        let old = self.ids.lock().unwrap().get(&instance.id).cloned();
        crate::instances::recreate(&self.cloud, &zone, group, &instance.id).await?;
        self.recreated
            .lock()
            .unwrap()
            .insert(instance.id.clone(), old.unwrap_or_default());
        Ok(())
    }

    /// Whether `gone`, recreated earlier, is back as a new instance in
    /// service (or gone for good).
    pub fn is_replaced(&self, group: &GroupInstances, gone: &str) -> bool {
        let Some(member) = group.instances.iter().find(|i| i.id == gone) else {
            return true;
        };
        let old = self.recreated.lock().unwrap().get(gone).cloned();
        let now = self.ids.lock().unwrap().get(gone).cloned();
        member.lifecycle_state == "InService" && old.is_some() && now != old
    }

    /// Calls made, by `METHOD collection`.
    pub fn calls(&self) -> BTreeMap<String, u64> {
        self.cloud.calls()
    }

    /// `toolbox dump`: the cluster's instances (addresses, roles), its
    /// managed groups, its addresses and its network and subnets.
    pub async fn dump(&self) -> Result<ClusterDump, ApiError> {
        let managed = crate::instances::cluster_groups(&self.cloud, &self.cluster).await?;
        dump(&self.cloud, &self.cluster, &managed).await
    }
}

/// A Compute call's error as a roll shows it.
#[derive(Debug, thiserror::Error)]
#[error("Google Compute: {0}")]
struct ComputeError(ApiError);

fn compute(e: ApiError) -> CloudError {
    CloudError::api(ComputeError(e))
}

/// On GCE an instance is replaced by having its group recreate it (kops'
/// `DeleteInstance`), and there is no surge: detaching fails as in kops.
#[async_trait::async_trait]
impl kops_cloud::Provider for GceProvider {
    fn name(&self) -> &'static str {
        crate::CLOUD
    }

    async fn groups(&self) -> Result<Vec<GroupInstances>, CloudError> {
        GceProvider::groups(self).await.map_err(compute)
    }

    async fn terminate(&self, group: &str, instance: &Instance) -> Result<(), CloudError> {
        self.recreate(group, instance).await.map_err(compute)
    }

    fn is_replaced(&self, group: &GroupInstances, gone: &str) -> bool {
        GceProvider::is_replaced(self, group, gone)
    }

    async fn details(&self) -> Result<BTreeMap<String, InstanceDetails>, CloudError> {
        GceProvider::details(self).await.map_err(compute)
    }

    async fn dump(&self) -> Result<ClusterDump, CloudError> {
        let d = GceProvider::dump(self).await.map_err(compute)?;
        tracing::debug!(calls = ?self.calls(), "Google Compute calls");
        Ok(d)
    }
}

/// kops' lifecycle words for a managed instance: `InService` once the
/// group has nothing to do to a running instance, `Terminating:<action>`
/// while it deletes or recreates it, else `Pending:<action>`.
fn lifecycle_state(i: &ManagedInstance) -> String {
    match i.current_action.as_str() {
        "NONE" if i.status == "RUNNING" => "InService".into(),
        "NONE" => format!("Pending:{}", i.status),
        a @ ("DELETING" | "ABANDONING" | "RECREATING") => format!("Terminating:{a}"),
        a => format!("Pending:{a}"),
    }
}

fn group_instances(g: &ManagedGroup) -> GroupInstances {
    let size = i32::try_from(g.target_size).unwrap_or(i32::MAX);
    GroupInstances {
        name: g.name.clone(),
        instance_group: g.instance_group.clone(),
        min_size: size,
        max_size: size,
        desired_capacity: size,
        launch_template: Some(g.template.clone()),
        instances: g
            .instances
            .iter()
            .map(|i| Instance {
                id: i.name.clone(),
                lifecycle_state: lifecycle_state(i),
                launch_template: i.template.clone(),
                detached: false,
                zone: Some(g.zone.clone()),
                private_dns_name: None,
                instance_type: i.machine_type.clone(),
                // An instance the group has not made yet does not exist.
                state: (!i.status.is_empty()).then(|| i.status.to_ascii_lowercase()),
            })
            .collect(),
    }
}

fn instance_details(i: &ManagedInstance) -> InstanceDetails {
    InstanceDetails {
        private_ip: i.internal_ip.clone(),
        public_ip: i.external_ip.clone(),
        roles: i.roles.clone(),
        instance_type: i.machine_type.clone(),
        image_id: None,
    }
}

/// The dump of a GCE cluster from its managed groups, plus its regional
/// addresses, network and subnets (found by kops' cluster-suffixed names).
async fn dump(
    cloud: &GceCloud,
    cluster: &str,
    managed: &[ManagedGroup],
) -> Result<ClusterDump, ApiError> {
    let mut d = ClusterDump::default();
    for g in managed {
        d.resources.push(DumpedResource {
            id: format!("{}/{}", g.zone, g.name),
            kind: "InstanceGroupManager",
            raw: vec![
                ("name", g.name.clone()),
                ("zone", g.zone.clone()),
                ("instanceTemplate", g.template.clone()),
                ("targetSize", g.target_size.to_string()),
            ],
        });
        for i in &g.instances {
            d.resources.push(DumpedResource {
                id: format!("{}/{}", g.zone, i.name),
                kind: "Instance",
                raw: vec![
                    ("name", i.name.clone()),
                    ("zone", g.zone.clone()),
                    ("status", i.status.clone()),
                    ("machineType", i.machine_type.clone().unwrap_or_default()),
                ],
            });
            d.instances.push(DumpedInstance {
                name: i.name.clone(),
                public_addresses: i.external_ip.iter().cloned().collect(),
                private_addresses: i.internal_ip.iter().cloned().collect(),
                roles: i.roles.clone(),
                ssh_user: None,
            });
        }
    }
    d.instances.sort_by(|a, b| a.name.cmp(&b.name));
    let safe = crate::names::safe_cluster_name(cluster);
    let ours = |name: &str| name.ends_with(&format!("-{safe}"));
    let region = cloud.region.clone();
    let addresses = cloud
        .list(
            &cloud.compute_url(&format!("regions/{region}/addresses")),
            "items",
        )
        .await?;
    for a in addresses
        .iter()
        .filter(|a| ours(a["name"].as_str().unwrap_or("")))
    {
        let name = a["name"].as_str().unwrap_or_default().to_string();
        d.resources.push(DumpedResource {
            id: name.clone(),
            kind: "Address",
            raw: vec![
                ("name", name),
                ("address", a["address"].as_str().unwrap_or_default().into()),
                (
                    "addressType",
                    a["addressType"].as_str().unwrap_or("EXTERNAL").into(),
                ),
                ("status", a["status"].as_str().unwrap_or_default().into()),
            ],
        });
    }
    let subnets = cloud
        .list(
            &cloud.compute_url(&format!("regions/{region}/subnetworks")),
            "items",
        )
        .await?;
    for s in subnets
        .iter()
        .filter(|s| ours(s["name"].as_str().unwrap_or("")))
    {
        d.subnets.push(DumpedSubnet {
            id: s["name"].as_str().unwrap_or_default().into(),
            zone: Some(region.clone()),
        });
        if d.vpc.is_none() {
            d.vpc = s["network"]
                .as_str()
                .and_then(|n| n.rsplit('/').next())
                .map(str::to_string);
        }
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn managed_instances_read_as_kops_lifecycle_states() {
        let mut i = ManagedInstance {
            status: "RUNNING".into(),
            current_action: "NONE".into(),
            ..Default::default()
        };
        assert_eq!(lifecycle_state(&i), "InService");
        i.current_action = "RECREATING".into();
        assert_eq!(lifecycle_state(&i), "Terminating:RECREATING");
        i.current_action = "CREATING".into();
        assert_eq!(lifecycle_state(&i), "Pending:CREATING");
        i.current_action = "NONE".into();
        i.status = "STAGING".into();
        assert_eq!(lifecycle_state(&i), "Pending:STAGING");
    }
}
