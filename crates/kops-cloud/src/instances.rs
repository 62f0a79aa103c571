//! A cluster's groups and instances as its cloud runs them, in the shape
//! `validate cluster`, `rolling-update cluster`, `get instances` and
//! `delete instance` read on every cloud.

/// One group of the cluster's instances as the cloud runs it: an AWS
/// autoscaling group, a GCE managed instance group (one per zone), the VMs
/// of a vSphere instance group.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// The group's name (`nodes-us-east-1a.example.com`).
    pub name: String,
    /// Its `kops.k8s.io/instancegroup` tag.
    pub instance_group: Option<String>,
    pub min_size: i32,
    pub max_size: i32,
    pub desired_capacity: i32,
    /// What the group launches now, as `<template id>:<version number>`
    /// (`$Latest`/`$Default` resolved); `None` for a launch configuration.
    pub launch_template: Option<String>,
    /// Members of the group, then instances detached from it for surge.
    pub instances: Vec<Instance>,
}

/// One instance of a group.
#[derive(Debug, Clone, PartialEq)]
pub struct Instance {
    pub id: String,
    /// The group's lifecycle state (`Pending`, `InService`, `Terminating`,
    /// ...); `Detached` for an instance detached for surge.
    pub lifecycle_state: String,
    /// What it was launched from, as `<template id>:<version number>`.
    pub launch_template: Option<String>,
    /// Detached from the group by an earlier roll (tagged
    /// `kops.k8s.io/detached-from-asg` on AWS); it still runs and still needs replacing.
    pub detached: bool,
    pub zone: Option<String>,
    pub private_dns_name: Option<String>,
    pub instance_type: Option<String>,
    /// The EC2 state (`pending`, `running`, ...), when EC2 listed it.
    pub state: Option<String>,
}

impl Group {
    /// True when `instance` runs something else than the group launches now.
    pub fn is_outdated(&self, instance: &Instance) -> bool {
        instance.detached || instance.launch_template != self.launch_template
    }

    /// Members in service (not detached, not leaving).
    pub fn in_service(&self) -> usize {
        self.instances
            .iter()
            .filter(|i| !i.detached && i.lifecycle_state == "InService")
            .count()
    }
}

/// What `get instances` shows of an instance beyond its group's view: its
/// addresses and the roles its `k8s.io/role/<role>` tags give it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InstanceDetails {
    pub private_ip: Option<String>,
    pub public_ip: Option<String>,
    /// `control-plane` (also for the older `master` tag), `node`, `bastion`, ...
    pub roles: Vec<String>,
    pub instance_type: Option<String>,
    /// The image it runs (`toolbox dump` guesses the SSH user from it).
    pub image_id: Option<String>,
}
