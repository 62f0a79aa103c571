//! `kops toolbox clusterapi generate machinedeployment`: print Cluster API
//! objects (KopsConfigTemplate, GCPMachineTemplate, one MachineDeployment
//! per zone) that add nodes to a GCE cluster. kops' own `--name` names the
//! MachineDeployment here (the global `--name` flag, read as such).

use anyhow::{bail, Result};
use clap::Args;
use kops_ops::clusterapi::{machine_deployment, MachineDeploymentRequest};

use crate::args::GlobalArgs;
use crate::context::state;
use crate::output::{print, status};

#[derive(Debug, Args)]
pub struct GenerateMachineDeploymentArgs {
    /// Name of cluster to join.
    #[arg(long, value_name = "CLUSTER")]
    pub cluster: Option<String>,
    /// Namespace for objects.
    #[arg(long, default_value = "kube-system", value_name = "NAMESPACE")]
    pub namespace: String,
    /// Number of replicas for MachineDeployment.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub replicas: u32,
    /// Zones for the MachineDeployment (default: every zone of the instance groups).
    #[arg(long, value_name = "ZONE")]
    pub zones: Vec<String>,
    /// Instance type (default: one of the instance groups').
    #[arg(long, value_name = "TYPE")]
    pub instance_type: Option<String>,
    /// Subnet (default: one of the cluster's).
    #[arg(long, value_name = "SUBNET")]
    pub subnet: Option<String>,
    /// Image (default: one of the instance groups').
    #[arg(long, value_name = "IMAGE")]
    pub image: Option<String>,
}

pub async fn run(global: &GlobalArgs, a: GenerateMachineDeploymentArgs) -> Result<i32> {
    let Some(cluster_name) = a.cluster.clone().filter(|c| !c.is_empty()) else {
        bail!("cluster is required\nhint: pass `--cluster CLUSTER` (and `--name` for the MachineDeployment)");
    };
    let registry = state(global).await?;
    let cluster = kops_ops::require_cluster(&registry, &cluster_name).await?;
    let groups = registry.list_instance_groups(&cluster_name).await?;
    let request = MachineDeploymentRequest {
        name: global.name.clone().unwrap_or_default(),
        namespace: a.namespace,
        replicas: a.replicas,
        zones: a.zones,
        instance_type: a.instance_type,
        subnet: a.subnet,
        image: a.image,
    };
    let (objects, notes) = machine_deployment(&cluster, &groups, &request)?;
    for n in notes {
        status(&format!("warning: {n}"));
    }
    let docs: Vec<String> = objects
        .iter()
        .map(|o| serde_yaml_ng::to_string(o).unwrap_or_default())
        .collect();
    print(&docs.join("---\n"));
    Ok(0)
}
