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
    pub cloud: kops_aws::AwsCloud,
    pub groups: Vec<CloudGroup>,
    pub details: BTreeMap<String, kops_aws::instances::InstanceDetails>,
}

pub async fn live_instances(
    registry: &Registry,
    cluster: &str,
    nodes: &[NodeInfo],
) -> Result<Live> {
    let spec: Cluster = kops_ops::require_cluster(registry, cluster).await?;
    let groups: Vec<InstanceGroup> = registry.list_instance_groups(cluster).await?;
    let region = kops_ops::update::cluster_region(&spec)?;
    let cloud = kops_aws::AwsCloud::new(&region).await;
    let asgs = kops_aws::instances::cluster_groups(&cloud, cluster).await?;
    let details = kops_aws::instances::instance_details(&cloud, cluster).await?;
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

/// kops' kubelet version-skew rule, read before `update cluster`: the
/// oldest kubelet version of the control plane's nodes, when older than
/// the spec's (workers are then held at it). `None` when the cluster's
/// Kubernetes API cannot be read through the local kubeconfig's context of
/// the cluster's name: kops then assumes no upgrade is under way.
pub async fn kubelet_supported_version(cluster: &str, spec_version: &str) -> Option<String> {
    let files = crate::kubeconfig::local_kubeconfig_files(None).ok()?;
    if !files.files.iter().any(|f| f.exists()) || !files.has_context(cluster) {
        return None;
    }
    let nodes = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        kube_nodes(None, cluster),
    )
    .await
    .ok()?
    .ok()?;
    let running = kops_roll::k8s::control_plane_running_version(&nodes, spec_version);
    (!spec_version.ends_with(&running)).then_some(running)
}
