//! A vSphere cluster's VMs in the shape `validate cluster`,
//! `rolling-update cluster`, `delete instance` and `toolbox dump` read on
//! every cloud ([`kops_cloud::Provider`]). vSphere has no instance
//! groups of its own: each instance group is one group here, its size its
//! `minSize` (kops-rs keeps exactly that many VMs), its members the VMs
//! carrying the cluster's and the group's markers, each named by its BIOS
//! UUID, which the node's provider ID `vsphere://<uuid>` ends with. A VM is
//! outdated when its spec-hash marker differs from what `update cluster`
//! would make now.
//!
//! Every operation logs in, works and logs out (a roll can outlast a
//! vCenter session); the SOAP calls of all of them are counted together.

use std::collections::BTreeMap;
use std::sync::Mutex;

use kops_api::{InstanceGroup, Role};
use kops_cloud::{
    CloudError, Dump as ClusterDump, DumpedInstance, DumpedResource, Group as GroupInstances,
    Instance, InstanceDetails,
};
use kops_vsphere::cluster::{self, GroupSpec, Vm};
use kops_vsphere::vcenter::Vcenter;

use crate::settings::{connect, Settings};
use crate::ModelError;

/// A vSphere cluster's VMs, read fresh on each call.
pub struct VsphereInstances {
    cluster: String,
    settings: Settings,
    instance_groups: Vec<InstanceGroup>,
    /// The groups as `update cluster` would make them now (user data included).
    specs: Vec<GroupSpec>,
    /// The VMs of the last read.
    vms: Mutex<Vec<Vm>>,
    calls: Mutex<BTreeMap<String, u64>>,
}

impl VsphereInstances {
    /// The cluster's VMs as `instance_groups` (with the `specs` an update
    /// would make now, user data included) ask for; vCenter is not called
    /// yet.
    pub fn new(
        cluster: &str,
        settings: Settings,
        instance_groups: Vec<InstanceGroup>,
        specs: Vec<GroupSpec>,
    ) -> VsphereInstances {
        VsphereInstances {
            cluster: cluster.to_string(),
            settings,
            instance_groups,
            specs,
            vms: Mutex::default(),
            calls: Mutex::default(),
        }
    }

    async fn session(&self) -> Result<Vcenter, ModelError> {
        connect(&self.settings).await
    }

    /// Logs out and counts the session's calls.
    async fn close(&self, vc: Vcenter) {
        vc.logout().await;
        let mut calls = self.calls.lock().unwrap();
        for (method, n) in vc.client.calls() {
            *calls.entry(method).or_default() += n;
        }
    }

    /// The cluster's VMs in its folder (none when there is no folder).
    async fn list(&self, vc: &Vcenter) -> Result<Vec<Vm>, ModelError> {
        let placement = &self.settings.placement;
        let path = format!("{}/vm/{}", placement.datacenter, placement.folder);
        let Some(folder) = vc.find_path(&path).await? else {
            return Ok(Vec::new());
        };
        Ok(cluster::list(vc, &folder, &self.cluster).await?)
    }

    /// One group per instance group of the spec (bastions are not made on
    /// vSphere), with its VMs.
    pub async fn groups(&self) -> Result<Vec<GroupInstances>, ModelError> {
        let vc = self.session().await?;
        let listed = self.list(&vc).await;
        self.close(vc).await;
        let vms = listed?;
        let groups = self
            .specs
            .iter()
            .map(|spec| {
                let size = i32::try_from(spec.count).unwrap_or(i32::MAX);
                GroupInstances {
                    name: spec.name.clone(),
                    instance_group: Some(spec.name.clone()),
                    min_size: size,
                    max_size: size,
                    desired_capacity: size,
                    launch_template: Some(spec.hash(&self.settings.placement)),
                    instances: vms
                        .iter()
                        .filter(|vm| vm.group == spec.name)
                        .map(|vm| self.instance(vm))
                        .collect(),
                }
            })
            .collect();
        *self.vms.lock().unwrap() = vms;
        Ok(groups)
    }

    fn instance(&self, vm: &Vm) -> Instance {
        Instance {
            id: vm.uuid.to_ascii_lowercase(),
            lifecycle_state: if vm.powered_on {
                "InService".into()
            } else {
                "Pending:poweredOff".into()
            },
            launch_template: Some(vm.spec_hash.clone()),
            detached: false,
            zone: None,
            private_dns_name: None,
            instance_type: self
                .group(&vm.group)
                .and_then(|g| g.spec.machine_type.clone()),
            state: Some(if vm.powered_on { "running" } else { "stopped" }.into()),
        }
    }

    fn group(&self, name: &str) -> Option<&InstanceGroup> {
        self.instance_groups.iter().find(|g| g.name() == name)
    }

    fn roles(&self, vm: &Vm) -> Vec<String> {
        self.group(&vm.group)
            .map(|g| vec![g.role().unwrap_or(Role::Node).path_name().to_string()])
            .unwrap_or_default()
    }

    /// Destroys the VM `instance` names and clones its replacement (a
    /// new name, the group's current spec); nothing when it is gone.
    pub async fn replace(
        &self,
        instance: &Instance,
    ) -> Result<Option<(String, String)>, ModelError> {
        let vc = self.session().await?;
        let replaced = cluster::replace(
            &vc,
            &self.cluster,
            &self.settings.placement,
            &self.specs,
            &instance.id,
        )
        .await;
        self.close(vc).await;
        Ok(replaced?)
    }

    /// Addresses, roles and machine types by instance id (from the last
    /// read, or a fresh one).
    pub async fn details(&self) -> Result<BTreeMap<String, InstanceDetails>, ModelError> {
        if self.vms.lock().unwrap().is_empty() {
            self.groups().await?;
        }
        let vms = self.vms.lock().unwrap().clone();
        Ok(vms
            .iter()
            .map(|vm| {
                let details = InstanceDetails {
                    private_ip: vm.ip.clone(),
                    public_ip: None,
                    roles: self.roles(vm),
                    instance_type: self
                        .group(&vm.group)
                        .and_then(|g| g.spec.machine_type.clone()),
                    image_id: None,
                };
                (vm.uuid.to_ascii_lowercase(), details)
            })
            .collect())
    }

    /// SOAP calls made so far, by method.
    pub fn calls(&self) -> BTreeMap<String, u64> {
        self.calls.lock().unwrap().clone()
    }

    /// The calls made so far as one line ([`kops_vsphere::calls_summary`]).
    pub fn summary(&self) -> String {
        kops_vsphere::calls_summary(&self.calls())
    }

    /// `toolbox dump`: the cluster's folder and VMs as resources, each VM
    /// as an instance (address, role, the login user its template
    /// suggests).
    pub async fn dump(&self) -> Result<ClusterDump, ModelError> {
        self.groups().await?;
        let vms = self.vms.lock().unwrap().clone();
        let placement = &self.settings.placement;
        let mut d = ClusterDump::default();
        if !vms.is_empty() {
            let path = format!("{}/vm/{}", placement.datacenter, placement.folder);
            d.resources.push(DumpedResource {
                id: path.clone(),
                kind: "Folder",
                raw: vec![("name", placement.folder.clone()), ("path", path)],
            });
        }
        for vm in &vms {
            let template = self
                .specs
                .iter()
                .find(|s| s.name == vm.group)
                .map(|s| s.template.clone())
                .unwrap_or_default();
            d.resources.push(DumpedResource {
                id: vm.name.clone(),
                kind: "VirtualMachine",
                raw: vec![
                    ("name", vm.name.clone()),
                    ("uuid", vm.uuid.to_ascii_lowercase()),
                    ("instanceGroup", vm.group.clone()),
                    (
                        "powerState",
                        if vm.powered_on {
                            "poweredOn"
                        } else {
                            "poweredOff"
                        }
                        .into(),
                    ),
                    ("ipAddress", vm.ip.clone().unwrap_or_default()),
                    ("template", template.clone()),
                ],
            });
            d.instances.push(DumpedInstance {
                name: vm.name.clone(),
                public_addresses: Vec::new(),
                private_addresses: vm.ip.iter().cloned().collect(),
                roles: self.roles(vm),
                ssh_user: kops_vsphere::guess_ssh_user(&template).map(str::to_string),
            });
        }
        d.instances.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(d)
    }
}

/// On vSphere a VM is replaced by destroying it and cloning its group's
/// spec again. There is no surge: a VM cannot leave its group while it
/// runs (the group is its marker), so kops' default for clouds other than
/// AWS holds (maxSurge 0) and asking for surge fails as on GCE.
#[async_trait::async_trait]
impl kops_cloud::Provider for VsphereInstances {
    fn name(&self) -> &'static str {
        kops_vsphere::CLOUD
    }

    async fn groups(&self) -> Result<Vec<GroupInstances>, CloudError> {
        VsphereInstances::groups(self)
            .await
            .map_err(CloudError::api)
    }

    async fn terminate(&self, _group: &str, instance: &Instance) -> Result<(), CloudError> {
        self.replace(instance).await.map_err(CloudError::api)?;
        Ok(())
    }

    async fn details(&self) -> Result<BTreeMap<String, InstanceDetails>, CloudError> {
        VsphereInstances::details(self)
            .await
            .map_err(CloudError::api)
    }

    async fn dump(&self) -> Result<ClusterDump, CloudError> {
        VsphereInstances::dump(self).await.map_err(CloudError::api)
    }

    fn calls_summary(&self) -> Option<String> {
        Some(self.summary())
    }
}
