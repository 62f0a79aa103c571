//! Compute: etcd disks, instance templates and the managed instance
//! groups that run them.

use std::collections::BTreeMap;

use kops_engine::TaskKey;

/// A persistent disk (the etcd volumes of control-plane members).
#[derive(Debug, Clone, PartialEq)]
pub struct Disk {
    pub name: String,
    pub zone: String,
    pub size_gb: i64,
    /// `pd-ssd`, `pd-standard`, `hyperdisk-balanced`...
    pub volume_type: String,
    pub iops: Option<i64>,
    pub throughput: Option<i64>,
    pub labels: BTreeMap<String, String>,
}

impl Disk {
    pub const KIND: &'static str = "Disk";

    pub(crate) fn dependencies(&self) -> Vec<TaskKey> {
        Vec::new()
    }
}

/// The service account an instance template runs as: one of the
/// cluster's (a task) or an existing email (`default` included).
#[derive(Debug, Clone, PartialEq)]
pub enum TemplateServiceAccount {
    Task(TaskKey),
    Email(String),
}

/// An instance template: what each instance of a group is.
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceTemplate {
    pub name: String,
    /// kops' name prefix (`<name shortened to 32>-`): templates are
    /// replaced, not changed, so each gets a generated name.
    pub name_prefix: String,
    pub network: TaskKey,
    pub subnet: TaskKey,
    pub machine_type: String,
    pub boot_disk_type: String,
    pub boot_disk_size_gb: i64,
    pub boot_disk_iops: Option<i64>,
    pub boot_disk_throughput: Option<i64>,
    /// The image as a full URL.
    pub boot_disk_image: String,
    pub can_ip_forward: bool,
    pub has_external_ip: bool,
    pub stack_type: String,
    /// IP alias ranges by secondary range name (`/24`).
    pub alias_ip_ranges: BTreeMap<String, String>,
    /// Full OAuth scope URLs.
    pub scopes: Vec<String>,
    pub service_account: TemplateServiceAccount,
    pub tags: Vec<String>,
    pub labels: BTreeMap<String, String>,
    /// Instance metadata; multi-line values (the user data) become files.
    pub metadata: BTreeMap<String, String>,
    pub preemptible: bool,
    /// `STANDARD` or `SPOT`.
    pub provisioning_model: String,
    pub automatic_restart: bool,
    /// `MIGRATE` or `TERMINATE`.
    pub on_host_maintenance: String,
    /// Accelerators: type and count.
    pub guest_accelerators: Vec<(String, i64)>,
}

impl InstanceTemplate {
    pub const KIND: &'static str = "InstanceTemplate";

    pub fn key_of(name: &str) -> TaskKey {
        TaskKey::new(Self::KIND, name)
    }

    pub(crate) fn dependencies(&self) -> Vec<TaskKey> {
        let mut deps = vec![self.network.clone(), self.subnet.clone()];
        if let TemplateServiceAccount::Task(key) = &self.service_account {
            deps.push(key.clone());
        }
        deps
    }
}

/// A zonal managed instance group: one per group and zone.
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceGroupManager {
    pub name: String,
    pub zone: String,
    pub base_instance_name: String,
    pub instance_template: TaskKey,
    pub target_size: i64,
    /// The API's target pools (a public load balancer).
    pub target_pools: Vec<TaskKey>,
    /// `REPLACE`.
    pub minimal_action: String,
    /// `OPPORTUNISTIC`.
    pub update_type: String,
    /// `PAGINATED`.
    pub list_managed_instances_results: String,
}

impl InstanceGroupManager {
    pub const KIND: &'static str = "InstanceGroupManager";

    pub fn key_of(name: &str) -> TaskKey {
        TaskKey::new(Self::KIND, name)
    }

    pub(crate) fn dependencies(&self) -> Vec<TaskKey> {
        let mut deps = vec![self.instance_template.clone()];
        deps.extend(self.target_pools.iter().cloned());
        deps
    }
}
