//! `kops toolbox enroll`: kops adds a machine it did not create to a
//! cluster over SSH (uploads nodeup and its config, registers the host).
//! kops-rs accepts kops' flags so scripts parse, and refuses in one line:
//! enrolling over SSH is not implemented.

use anyhow::{bail, Result};
use clap::Args;

use crate::cli::KubeApiFlags;

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

pub fn run(a: ToolboxEnrollArgs) -> Result<i32> {
    bail!(
        "toolbox enroll{}: enrolling a machine over SSH is not implemented in kops-rs\nhint: create an instance group for the machine's role and let kops-rs launch it, or enroll it with kops",
        a.host.map(|h| format!(" --host {h}")).unwrap_or_default()
    )
}
