//! `kops create sshpublickey -i FILE`: add an admin SSH public key.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use crate::args::GlobalArgs;
use crate::context::{cluster_name, read_input, state};
use crate::output::status;

#[derive(Debug, Args)]
pub struct CreateSshPublicKeyArgs {
    /// Path to the SSH public key.
    #[arg(short = 'i', long = "ssh-public-key", value_name = "FILE")]
    pub public_key: PathBuf,
    /// Cluster name (positional form of --name).
    #[arg(value_name = "CLUSTER")]
    pub cluster_name: Option<String>,
}

pub async fn run(global: &GlobalArgs, a: CreateSshPublicKeyArgs) -> Result<i32> {
    let registry = state(global).await?;
    let name = cluster_name(&registry, global, a.cluster_name.as_deref()).await?;
    let (_, text) = read_input(&a.public_key)?;
    let id = kops_ops::add_ssh_public_key(&registry, &name, &text).await?;
    status(&format!("Added SSH public key {id} to cluster {name}"));
    Ok(0)
}
