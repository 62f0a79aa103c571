//! `kops validate cluster`: the checks kops makes, in its words.
//!
//! - every instance group has an autoscaling group, with at least its
//!   desired number of (non-detached) instances;
//! - every instance (except bastions and detached ones) has joined the
//!   cluster as a node;
//! - every control-plane, API-server and worker node is Ready;
//! - every Ready control-plane node runs `kube-apiserver`,
//!   `kube-controller-manager` and `kube-scheduler` (pods in `kube-system`
//!   labelled `k8s-app`);
//! - every pod with priority `system-cluster-critical` or
//!   `system-node-critical` is running with all containers ready.
//!
//! `--max-unready-nodes N` tolerates up to N worker nodes that are not ready.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use tokio::time::Instant;

use kops_api::{InstanceGroup, Role};
use serde::Serialize;

use crate::groups::{build_groups, CloudGroup, InstanceStatus};
use crate::k8s::{NodeInfo, PodInfo, LABEL_HOSTNAME, LABEL_ZONE};
use crate::{Kubernetes, Provider, RollError};

/// The control-plane pods every control-plane node must run.
pub const CONTROL_PLANE_PODS: [&str; 3] = [
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
];

/// One failed check.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ValidationFailure {
    /// `InstanceGroup`, `Machine`, `Node` or `Pod`.
    #[serde(rename = "type")]
    pub kind: String,
    pub name: String,
    pub message: String,
    /// The instance group the failure belongs to, when there is one.
    #[serde(rename = "instanceGroup", skip_serializing_if = "Option::is_none")]
    pub instance_group: Option<InstanceGroup>,
}

impl ValidationFailure {
    /// Whether the failure matters while `group` rolls: failures of no
    /// group, of the control plane, or of `group` itself do; those of other
    /// worker groups do not.
    pub fn relevant_to(&self, group: &str) -> bool {
        match &self.instance_group {
            None => true,
            Some(ig) => ig.is_control_plane() || ig.name() == group,
        }
    }
}

/// A node as validation saw it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ValidationNode {
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub zone: String,
    pub role: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub hostname: String,
    pub status: String,
}

/// The result of one validation (kops' `ValidationCluster`).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ValidationCluster {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<ValidationFailure>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<ValidationNode>,
}

impl ValidationCluster {
    pub fn is_valid(&self) -> bool {
        self.failures.is_empty()
    }

    /// Failures that matter while `group` rolls (all of them for `None`).
    pub fn relevant_failures(&self, group: Option<&str>) -> Vec<&ValidationFailure> {
        self.failures
            .iter()
            .filter(|f| group.is_none_or(|g| f.relevant_to(g)))
            .collect()
    }

    fn add(&mut self, kind: &str, name: &str, message: String, ig: Option<&InstanceGroup>) {
        self.failures.push(ValidationFailure {
            kind: kind.to_string(),
            name: name.to_string(),
            message,
            instance_group: ig.cloned(),
        });
    }
}

/// Validates from what was read: the instance groups, the cloud's groups
/// (already matched with nodes), the nodes and the pods. Pure.
pub fn validate_groups(
    instance_groups: &[InstanceGroup],
    cloud_groups: &[CloudGroup],
    pods: &[PodInfo],
    max_unready_nodes: usize,
) -> ValidationCluster {
    let mut v = ValidationCluster::default();

    // Worker nodes that may be unready (kops: --max-unready-nodes).
    let mut tolerated: BTreeSet<String> = BTreeSet::new();
    if max_unready_nodes > 0 {
        let mut unready = Vec::new();
        for g in cloud_groups.iter().filter(|g| g.role() == Role::Node) {
            for m in g.members() {
                if m.status == InstanceStatus::Detached {
                    continue;
                }
                match &m.node {
                    Some(n) if n.is_ready() => {}
                    Some(n) => unready.push(n.name.clone()),
                    None => unready.push(m.id().to_string()),
                }
            }
        }
        if !unready.is_empty() && unready.len() <= max_unready_nodes {
            tolerated.extend(unready);
        }
    }

    let mut seen = BTreeSet::new();
    let mut ready_nodes: Vec<&NodeInfo> = Vec::new();
    let mut node_group: BTreeMap<String, &InstanceGroup> = BTreeMap::new();
    for g in cloud_groups {
        let ig = &g.instance_group;
        seen.insert(ig.name().to_string());
        let members: Vec<_> = g.members().collect();
        let attached = members
            .iter()
            .filter(|m| m.status != InstanceStatus::Detached)
            .count();
        if (attached as i32) < g.target_size {
            v.add(
                "InstanceGroup",
                ig.name(),
                format!(
                    "InstanceGroup \"{}\" did not have enough nodes {} vs {}",
                    ig.name(),
                    attached,
                    g.target_size
                ),
                Some(ig),
            );
        }
        for m in members {
            let Some(node) = &m.node else {
                let expected = g.role() != Role::Bastion && m.status != InstanceStatus::Detached;
                if expected && !tolerated.contains(m.id()) {
                    v.add(
                        "Machine",
                        m.id(),
                        format!("machine \"{}\" has not yet joined cluster", m.id()),
                        Some(ig),
                    );
                }
                continue;
            };
            node_group.insert(node.name.clone(), ig);
            let role = g.role().path_name();
            let ready = node.is_ready();
            if ready {
                ready_nodes.push(node);
            }
            if g.role() == Role::Bastion {
                continue;
            }
            if !ready && !tolerated.contains(&node.name) {
                v.add(
                    "Node",
                    &node.name,
                    format!("node \"{}\" of role \"{}\" is not ready", node.name, role),
                    Some(ig),
                );
            }
            v.nodes.push(ValidationNode {
                name: node.name.clone(),
                zone: node.labels.get(LABEL_ZONE).cloned().unwrap_or_default(),
                role: role.to_string(),
                hostname: node.labels.get(LABEL_HOSTNAME).cloned().unwrap_or_default(),
                status: node.ready_status.clone(),
            });
        }
    }
    for ig in instance_groups {
        // Karpenter's machines have no autoscaling group.
        let karpenter = ig.spec.manager.as_deref() == Some("Karpenter");
        if !seen.contains(ig.name()) && !karpenter {
            v.add(
                "InstanceGroup",
                ig.name(),
                format!(
                    "InstanceGroup \"{}\" is missing from the cloud provider",
                    ig.name()
                ),
                Some(ig),
            );
        }
    }

    // Control-plane pods on each ready control-plane node.
    let mut missing: BTreeMap<String, BTreeSet<&str>> = ready_nodes
        .iter()
        .filter(|n| n.is_control_plane())
        .map(|n| (n.name.clone(), CONTROL_PLANE_PODS.iter().copied().collect()))
        .collect();
    for pod in pods {
        if pod.namespace == "kube-system" {
            if let (Some(node), Some(app)) = (&pod.node_name, pod.labels.get("k8s-app")) {
                if let Some(left) = missing.get_mut(node) {
                    left.remove(app.as_str());
                }
            }
        }
        let priority = pod.priority_class.as_deref().unwrap_or("");
        if priority != "system-cluster-critical" && priority != "system-node-critical" {
            continue;
        }
        if pod.phase == "Succeeded" {
            continue;
        }
        let node = pod.node_name.as_deref().unwrap_or("");
        if tolerated.contains(node) {
            continue;
        }
        let ig = if priority == "system-node-critical" {
            node_group.get(node).copied()
        } else {
            None
        };
        let key = pod.key();
        match pod.phase.as_str() {
            "Pending" => v.add(
                "Pod",
                &key,
                format!("{priority} pod \"{}\" is pending", pod.name),
                ig,
            ),
            "Unknown" => v.add(
                "Pod",
                &key,
                format!("{priority} pod \"{}\" is unknown phase", pod.name),
                ig,
            ),
            _ if !pod.not_ready_containers.is_empty() => v.add(
                "Pod",
                &key,
                format!(
                    "{priority} pod \"{}\" is not ready ({})",
                    pod.name,
                    pod.not_ready_containers.join(",")
                ),
                ig,
            ),
            _ => {}
        }
    }
    for (node, apps) in missing {
        for app in apps {
            v.add(
                "Node",
                &node,
                format!("control-plane node \"{node}\" is missing {app} pod"),
                node_group.get(&node).copied(),
            );
        }
    }
    v
}

/// Reads the cloud and the Kubernetes API once and validates.
pub async fn validate_once(
    cluster: &str,
    instance_groups: &[InstanceGroup],
    cloud: &dyn Provider,
    kube: &dyn Kubernetes,
    max_unready_nodes: usize,
) -> Result<(ValidationCluster, Vec<CloudGroup>), RollError> {
    let nodes = kube.nodes().await?;
    let raw = cloud.groups().await?;
    let groups = build_groups(cluster, instance_groups, &raw, &nodes);
    let pods = kube.pods(None).await?;
    Ok((
        validate_groups(instance_groups, &groups, &pods, max_unready_nodes),
        groups,
    ))
}

/// What `validate cluster` was asked to do.
pub struct ValidateRequest {
    pub cluster: String,
    pub kubeconfig: Option<PathBuf>,
    /// Keep validating until valid or this much time passed (0: once).
    pub wait: Duration,
    /// Consecutive successful validations required.
    pub count: u32,
    /// Time between attempts.
    pub interval: Duration,
    pub max_unready_nodes: usize,
}

/// What `validate cluster` found.
#[derive(Debug)]
pub struct ValidationOutcome {
    pub cluster: kops_api::Cluster,
    pub instance_groups: Vec<InstanceGroup>,
    /// The last validation.
    pub result: ValidationCluster,
    /// Attempts made.
    pub attempts: u32,
    /// The cloud's calls as a status line, when it counts them.
    pub cloud_calls: Option<String>,
}

/// One attempt's result, for a progress line.
pub type OnAttempt<'a> = &'a (dyn Fn(u32, &ValidationCluster) + Send + Sync);

/// `kops validate cluster`. Returns the last result; with `wait`, retries
/// until `count` consecutive validations pass or the wait is over (the last,
/// failed, result is returned then).
pub async fn validate_cluster(
    registry: &kops_ops::Registry,
    request: ValidateRequest,
    on_attempt: OnAttempt<'_>,
) -> Result<ValidationOutcome, RollError> {
    let (cluster, instance_groups, cloud) = crate::load_cluster(registry, &request.cluster).await?;
    let kube = crate::KubeClient::connect(request.kubeconfig.as_deref(), &request.cluster).await?;
    let deadline = Instant::now() + request.wait;
    let need = request.count.max(1);
    let mut consecutive = 0;
    let mut attempts = 0;
    loop {
        attempts += 1;
        let result = validate_once(
            &request.cluster,
            &instance_groups,
            cloud.as_ref(),
            &kube,
            request.max_unready_nodes,
        )
        .await;
        let result = match result {
            Ok((r, _)) => r,
            Err(e) if request.wait.is_zero() || Instant::now() >= deadline => return Err(e),
            Err(_) => {
                consecutive = 0;
                tokio::time::sleep(request.interval).await;
                continue;
            }
        };
        on_attempt(attempts, &result);
        if result.is_valid() {
            consecutive += 1;
        } else {
            consecutive = 0;
        }
        let out_of_time = Instant::now() + request.interval > deadline;
        if request.wait.is_zero() || consecutive >= need || (consecutive == 0 && out_of_time) {
            return Ok(ValidationOutcome {
                cluster,
                instance_groups,
                result,
                attempts,
                cloud_calls: cloud.calls_summary(),
            });
        }
        tokio::time::sleep(request.interval).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::groups::CloudInstance;
    use kops_cloud::Instance;

    fn ig(name: &str, role: Role) -> InstanceGroup {
        InstanceGroup::new("c.example.com", name, role)
    }

    fn member(id: &str, node: Option<NodeInfo>) -> CloudInstance {
        CloudInstance {
            instance: Instance {
                id: id.into(),
                lifecycle_state: "InService".into(),
                launch_template: None,
                detached: false,
                zone: None,
                private_dns_name: None,
                instance_type: None,
                state: Some("running".into()),
            },
            status: InstanceStatus::UpToDate,
            node,
        }
    }

    fn group(ig: InstanceGroup, target: i32, members: Vec<CloudInstance>) -> CloudGroup {
        CloudGroup {
            instance_group: ig,
            name: "asg".into(),
            min_size: target,
            target_size: target,
            max_size: target,
            ready: members,
            need_update: Vec::new(),
        }
    }

    fn control_plane_node(name: &str, id: &str) -> NodeInfo {
        let mut n = NodeInfo::ready_for_test(name, &format!("aws:///us-east-1a/{id}"));
        n.labels.insert(
            "node-role.kubernetes.io/control-plane".into(),
            String::new(),
        );
        n
    }

    fn static_pods(node: &str) -> Vec<PodInfo> {
        CONTROL_PLANE_PODS
            .iter()
            .map(|app| PodInfo {
                namespace: "kube-system".into(),
                name: format!("{app}-{node}"),
                node_name: Some(node.into()),
                labels: [("k8s-app".to_string(), app.to_string())].into(),
                priority_class: Some("system-cluster-critical".into()),
                phase: "Running".into(),
                ..Default::default()
            })
            .collect()
    }

    fn healthy() -> (Vec<InstanceGroup>, Vec<CloudGroup>, Vec<PodInfo>) {
        let cp = ig("control-plane", Role::ControlPlane);
        let nodes = ig("nodes", Role::Node);
        let bastion = ig("bastions", Role::Bastion);
        let groups = vec![
            group(
                cp.clone(),
                1,
                vec![member("i-cp", Some(control_plane_node("cp", "i-cp")))],
            ),
            group(
                nodes.clone(),
                2,
                vec![
                    member(
                        "i-1",
                        Some(NodeInfo::ready_for_test("n1", "aws:///us-east-1a/i-1")),
                    ),
                    member(
                        "i-2",
                        Some(NodeInfo::ready_for_test("n2", "aws:///us-east-1a/i-2")),
                    ),
                ],
            ),
            group(bastion.clone(), 1, vec![member("i-b", None)]),
        ];
        (vec![cp, nodes, bastion], groups, static_pods("cp"))
    }

    #[test]
    fn a_healthy_cluster_validates() {
        let (igs, groups, pods) = healthy();
        let v = validate_groups(&igs, &groups, &pods, 0);
        assert!(v.is_valid(), "{:?}", v.failures);
        assert_eq!(v.nodes.len(), 3);
    }

    #[test]
    fn missing_and_unready_nodes_and_failing_pods_are_reported() {
        let (igs, mut groups, mut pods) = healthy();
        groups[1].ready[0].node = None;
        groups[1].ready[1].node.as_mut().unwrap().ready_status = "False".into();
        pods[0].not_ready_containers = vec!["kube-apiserver".into()];
        pods.remove(2);
        let v = validate_groups(&igs, &groups, &pods, 0);
        let messages: Vec<_> = v.failures.iter().map(|f| f.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "machine \"i-1\" has not yet joined cluster",
                "node \"n2\" of role \"node\" is not ready",
                "system-cluster-critical pod \"kube-apiserver-cp\" is not ready (kube-apiserver)",
                "control-plane node \"cp\" is missing kube-scheduler pod",
            ]
        );
        // While `nodes` rolls all matter; another worker group ignores the
        // first two.
        assert_eq!(v.relevant_failures(Some("nodes")).len(), 4);
        assert_eq!(v.relevant_failures(Some("other")).len(), 2);
    }

    #[test]
    fn short_groups_and_groups_missing_from_the_cloud_fail() {
        let (mut igs, mut groups, pods) = healthy();
        groups[1].target_size = 3;
        igs.push(ig("extra", Role::Node));
        let v = validate_groups(&igs, &groups, &pods, 0);
        let messages: Vec<_> = v.failures.iter().map(|f| f.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "InstanceGroup \"nodes\" did not have enough nodes 2 vs 3",
                "InstanceGroup \"extra\" is missing from the cloud provider",
            ]
        );
    }

    #[test]
    fn max_unready_nodes_tolerates_workers() {
        let (igs, mut groups, pods) = healthy();
        groups[1].ready[1].node.as_mut().unwrap().ready_status = "False".into();
        assert!(!validate_groups(&igs, &groups, &pods, 0).is_valid());
        assert!(validate_groups(&igs, &groups, &pods, 1).is_valid());
    }
}
