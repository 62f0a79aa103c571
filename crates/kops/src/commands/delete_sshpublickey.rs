//! `kops delete sshpublickey ID`: remove an admin SSH public key.

use anyhow::Result;
use clap::Args;

use crate::args::GlobalArgs;
use crate::context::{cluster_name, state};
use crate::output::status;

#[derive(Debug, Args)]
pub struct DeleteSshPublicKeyArgs {
    /// The key's id as `get sshpublickeys` prints it.
    #[arg(value_name = "ID")]
    pub id: String,
}

pub async fn run(global: &GlobalArgs, args: DeleteSshPublicKeyArgs) -> Result<i32> {
    let registry = state(global).await?;
    let id = args.id;

    let cluster = cluster_name(&registry, global, None).await?;
    kops_ops::require_cluster(&registry, &cluster).await?;
    registry.delete_ssh_public_key(&cluster, &id).await?;
    status(&format!(
        "Deleted SSH public key {id} from cluster {cluster}."
    ));
    Ok(0)
}
