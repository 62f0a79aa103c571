//! A cluster as the cloud runs it: its groups' instances matched with the
//! Kubernetes nodes (for `get instances` and `delete instance`).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;
use kops_api::{Cluster, InstanceGroup};
use kops_ops::Registry;
use kops_roll::{CloudGroup, CloudInstance, InstanceStatus, Kubernetes as _, NodeInfo};

/// The cluster's groups as the cloud runs them, matched with its nodes, and
/// each instance's addresses and roles.
pub struct Live {
    pub cluster: Cluster,
    pub instance_groups: Vec<InstanceGroup>,
    pub cloud: std::sync::Arc<dyn kops_roll::Provider>,
    pub groups: Vec<CloudGroup>,
    pub details: BTreeMap<String, kops_cloud::InstanceDetails>,
}

pub async fn live_instances(
    registry: &Registry,
    cluster: &str,
    nodes: &[NodeInfo],
) -> Result<Live> {
    let spec: Cluster = kops_ops::require_cluster(registry, cluster).await?;
    let groups: Vec<InstanceGroup> = registry.list_instance_groups(cluster).await?;
    let cloud = kops_ops::provider::provider(registry, &spec).await?;
    let asgs = cloud.groups().await?;
    let details = cloud.details().await?;
    let built = kops_roll::build_groups(cluster, &groups, &asgs, nodes);
    Ok(Live {
        cluster: spec,
        instance_groups: groups,
        cloud,
        groups: built,
        details,
    })
}

pub async fn kube_nodes(kubeconfig: Option<&Path>, cluster: &str) -> Result<Vec<NodeInfo>> {
    let kube = kops_roll::KubeClient::connect(kubeconfig, cluster).await?;
    Ok(kube.nodes().await?)
}

pub fn status_text(i: &CloudInstance) -> &'static str {
    match i.status {
        InstanceStatus::UpToDate => "UpToDate",
        InstanceStatus::NeedsUpdate => "NeedsUpdate",
        InstanceStatus::Detached => "Detached",
    }
}
