//! `kops toolbox enroll`: adds a machine to a cluster over SSH (the
//! system `ssh` client): its `Host` object from its key pair and host
//! name (`--build-host` only prints it), registered in the cluster for a
//! worker, then the group's bootstrap files and script run there. As kops,
//! behind the `Metal` feature flag (`KOPS_FEATURE_FLAGS=Metal`).

use std::sync::Arc;

use anyhow::{bail, Result};
use clap::Args;
use kops_ops::enroll::{self, EnrollRequest, SshHost};

use crate::args::{GlobalArgs, KubeApiFlags};
use crate::context::state;
use crate::kubeconfig::kubeconfig_for;
use crate::output::{print, status};

#[derive(Debug, Args)]
pub struct ToolboxEnrollArgs {
    /// Name of cluster to join.
    #[arg(long, value_name = "CLUSTER")]
    pub cluster: Option<String>,
    /// Name of instance-group to join.
    #[arg(long, value_name = "GROUP")]
    pub instance_group: Option<String>,
    /// IP address range to use for pods that run on this node.
    #[arg(long, value_delimiter = ',', value_name = "CIDRS")]
    pub pod_cidr: Vec<String>,
    /// IP/hostname for machine to add.
    #[arg(long, value_name = "HOST")]
    pub host: Option<String>,
    /// User for ssh.
    #[arg(long, default_value = "root", value_name = "USER")]
    pub ssh_user: String,
    /// Port for ssh.
    #[arg(long, default_value_t = 22, value_name = "PORT")]
    pub ssh_port: u16,
    /// Only build the host resource, don't apply it or enroll the node.
    #[arg(long)]
    pub build_host: bool,
    #[command(flatten)]
    pub kube: KubeApiFlags,
}

pub async fn run(global: &GlobalArgs, a: ToolboxEnrollArgs) -> Result<i32> {
    if !kops_ops::feature_enabled("Metal") {
        bail!("bare-metal support requires the Metal feature flag to be enabled\nhint: set KOPS_FEATURE_FLAGS=Metal");
    }
    let Some(cluster) = a.cluster.clone().filter(|c| !c.is_empty()) else {
        bail!("cluster is required\nhint: pass --cluster NAME");
    };
    let Some(group) = a.instance_group.clone().filter(|g| !g.is_empty()) else {
        bail!("instance-group is required\nhint: pass --instance-group NAME");
    };
    let Some(host) = a.host.clone().filter(|h| !h.is_empty()) else {
        bail!("host is required\nhint: pass --host ADDRESS (the machine to add)");
    };
    let request = EnrollRequest {
        cluster: cluster.clone(),
        instance_group: group,
        pod_cidrs: a.pod_cidr.clone(),
    };
    let registry = state(global).await?;
    let (spec, groups, group) = enroll::load(&registry, &request).await?;
    status(&format!(
        "warning: accepting any SSH host key of {host} (as kops does)"
    ));
    let echo: enroll::Echo = Arc::new(|bytes: &[u8]| {
        use std::io::Write;
        let _ = std::io::stderr().write_all(bytes);
    });
    let target = SshHost::connect(&host, a.ssh_port, &a.ssh_user, echo).await?;
    let host_object = enroll::build_host(&target, &request).await?;
    if a.build_host {
        print(&format!("{}\n", serde_yaml_ng::to_string(&host_object)?));
        return Ok(0);
    }
    let data = enroll::bootstrap_data(&registry, &spec, &groups, &group).await?;
    // The API server of a control-plane machine is not running yet: only
    // a worker is registered.
    if !data.control_plane {
        let (kubeconfig, _guard) = kubeconfig_for(&a.kube, None, &cluster)?;
        let client = kops_roll::KubeClient::connect(kubeconfig.as_deref(), &cluster).await?;
        client.create_kops_object(&host_object, "hosts").await?;
    }
    enroll::enroll(&target, &data).await?;
    status(&format!(
        "enrolled {host} into instance group {} of cluster {cluster}",
        request.instance_group
    ));
    Ok(0)
}
