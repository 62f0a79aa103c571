//! The cloud's view of each instance group: its autoscaling group matched by
//! name (or by its `kops.k8s.io/instancegroup` tag), sizes, and each live
//! instance with its Kubernetes node and whether it needs replacing.
//!
//! An instance needs an update when it was launched from another launch
//! template version than the group launches now, when it was detached for
//! surge by an earlier (interrupted) roll, or when its node carries the
//! `kops.k8s.io/needs-update` annotation. Everything is read fresh each time,
//! so an interrupted roll picks up where it stopped.

use std::collections::BTreeMap;

use kops_api::{InstanceGroup, Role};
use kops_cloud::{Group as GroupInstances, Instance};

use crate::k8s::NodeInfo;

/// The node annotation that asks for a node's replacement.
pub const ANNOTATION_NEEDS_UPDATE: &str = "kops.k8s.io/needs-update";

/// Where an instance stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum InstanceStatus {
    UpToDate,
    NeedsUpdate,
    /// Detached from its group for surge; replaced, still to be removed.
    Detached,
}

/// One instance and its node.
#[derive(Debug, Clone)]
pub struct CloudInstance {
    pub instance: Instance,
    pub status: InstanceStatus,
    pub node: Option<NodeInfo>,
}

impl CloudInstance {
    pub fn id(&self) -> &str {
        &self.instance.id
    }
}

/// An instance group and its autoscaling group.
#[derive(Debug, Clone)]
pub struct CloudGroup {
    pub instance_group: InstanceGroup,
    /// The autoscaling group's name.
    pub name: String,
    pub min_size: i32,
    pub target_size: i32,
    pub max_size: i32,
    pub ready: Vec<CloudInstance>,
    pub need_update: Vec<CloudInstance>,
}

impl CloudGroup {
    pub fn ig_name(&self) -> &str {
        self.instance_group.name()
    }

    pub fn role(&self) -> Role {
        self.instance_group.role().unwrap_or(Role::Node)
    }

    /// `Ready` or `NeedsUpdate`, as kops prints it.
    pub fn status(&self) -> &'static str {
        if self.need_update.is_empty() {
            "Ready"
        } else {
            "NeedsUpdate"
        }
    }

    /// Instances that have a node.
    pub fn nodes(&self) -> usize {
        self.ready
            .iter()
            .chain(&self.need_update)
            .filter(|i| i.node.is_some())
            .count()
    }

    pub fn members(&self) -> impl Iterator<Item = &CloudInstance> {
        self.ready.iter().chain(&self.need_update)
    }
}

/// The autoscaling group name kops gives an instance group.
pub fn autoscaling_group_name(cluster: &str, group: &InstanceGroup) -> String {
    match group.role() {
        Some(Role::ControlPlane) => format!("{}.masters.{cluster}", group.name()),
        Some(Role::ApiServer) => format!("{}.apiservers.{cluster}", group.name()),
        _ => format!("{}.{cluster}", group.name()),
    }
}

/// Matches the cloud's groups with the instance groups and the nodes.
/// Groups of the cloud that match no instance group are left out; so are
/// instances that are terminating or that EC2 no longer lists.
pub fn build_groups(
    cluster: &str,
    instance_groups: &[InstanceGroup],
    cloud: &[GroupInstances],
    nodes: &[NodeInfo],
) -> Vec<CloudGroup> {
    let mut by_instance: BTreeMap<&str, &NodeInfo> = BTreeMap::new();
    for node in nodes {
        if let Some(id) = node.instance_id() {
            by_instance.insert(id, node);
        }
    }
    let by_name: BTreeMap<&str, &NodeInfo> = nodes.iter().map(|n| (n.name.as_str(), n)).collect();
    let node_of = |i: &Instance| -> Option<NodeInfo> {
        by_instance
            .get(i.id.as_str())
            .or_else(|| by_name.get(i.id.as_str()))
            .or_else(|| i.private_dns_name.as_deref().and_then(|d| by_name.get(d)))
            .map(|n| (*n).clone())
    };

    let mut out = Vec::new();
    for asg in cloud {
        let ig = instance_groups
            .iter()
            .find(|g| autoscaling_group_name(cluster, g) == asg.name)
            .or_else(|| {
                let tag = asg.instance_group.as_deref()?;
                instance_groups.iter().find(|g| g.name() == tag)
            });
        let Some(ig) = ig else {
            continue;
        };
        let mut group = CloudGroup {
            instance_group: ig.clone(),
            name: asg.name.clone(),
            min_size: asg.min_size,
            target_size: asg.desired_capacity,
            max_size: asg.max_size,
            ready: Vec::new(),
            need_update: Vec::new(),
        };
        for i in &asg.instances {
            if i.lifecycle_state.starts_with("Terminating") || i.state.is_none() {
                continue;
            }
            let node = node_of(i);
            let mut status = if i.detached {
                InstanceStatus::Detached
            } else if asg.is_outdated(i) {
                InstanceStatus::NeedsUpdate
            } else {
                InstanceStatus::UpToDate
            };
            if status == InstanceStatus::UpToDate
                && node
                    .as_ref()
                    .is_some_and(|n| n.annotations.contains_key(ANNOTATION_NEEDS_UPDATE))
            {
                status = InstanceStatus::NeedsUpdate;
            }
            let member = CloudInstance {
                instance: i.clone(),
                status,
                node,
            };
            if status == InstanceStatus::UpToDate {
                group.ready.push(member);
            } else {
                group.need_update.push(member);
            }
        }
        out.push(group);
    }
    out.sort_by(|a, b| a.ig_name().cmp(b.ig_name()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ig(name: &str, role: &str) -> InstanceGroup {
        InstanceGroup::new("c.example.com", name, Role::parse(role).unwrap())
    }

    fn instance(id: &str, lt: &str) -> Instance {
        Instance {
            id: id.into(),
            lifecycle_state: "InService".into(),
            launch_template: Some(lt.into()),
            detached: false,
            zone: Some("us-east-1a".into()),
            private_dns_name: None,
            instance_type: None,
            state: Some("running".into()),
        }
    }

    #[test]
    fn outdated_detached_and_annotated_instances_need_update() {
        let mut detached = instance("i-3", "lt-1:1");
        detached.detached = true;
        detached.lifecycle_state = "Detached".into();
        let cloud = vec![GroupInstances {
            name: "nodes.c.example.com".into(),
            instance_group: Some("nodes".into()),
            min_size: 2,
            max_size: 4,
            desired_capacity: 2,
            launch_template: Some("lt-1:2".into()),
            instances: vec![
                instance("i-1", "lt-1:1"),
                instance("i-2", "lt-1:2"),
                detached,
                instance("i-4", "lt-1:2"),
            ],
        }];
        let mut annotated = NodeInfo::ready_for_test("n4", "aws:///us-east-1a/i-4");
        annotated
            .annotations
            .insert(ANNOTATION_NEEDS_UPDATE.into(), String::new());
        let nodes = vec![
            NodeInfo::ready_for_test("n1", "aws:///us-east-1a/i-1"),
            annotated,
        ];
        let groups = build_groups("c.example.com", &[ig("nodes", "Node")], &cloud, &nodes);
        assert_eq!(groups.len(), 1);
        let g = &groups[0];
        let ids = |v: &[CloudInstance]| v.iter().map(|i| i.id().to_string()).collect::<Vec<_>>();
        assert_eq!(ids(&g.ready), ["i-2"]);
        assert_eq!(ids(&g.need_update), ["i-1", "i-3", "i-4"]);
        assert_eq!(g.need_update[1].status, InstanceStatus::Detached);
        assert_eq!(g.need_update[0].node.as_ref().unwrap().name, "n1");
        assert_eq!(g.nodes(), 2);
        assert_eq!(g.status(), "NeedsUpdate");
    }

    #[test]
    fn control_plane_groups_match_by_kops_name() {
        let cloud = vec![GroupInstances {
            name: "control-plane-us-east-1a.masters.c.example.com".into(),
            instance_group: None,
            min_size: 1,
            max_size: 1,
            desired_capacity: 1,
            launch_template: Some("lt-9:1".into()),
            instances: vec![instance("i-9", "lt-9:1")],
        }];
        let groups = build_groups(
            "c.example.com",
            &[ig("control-plane-us-east-1a", "Master")],
            &cloud,
            &[],
        );
        assert_eq!(groups[0].ready.len(), 1);
        assert_eq!(groups[0].status(), "Ready");
    }
}
