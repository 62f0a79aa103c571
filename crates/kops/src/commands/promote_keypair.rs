//! `kops promote keypair KEYSET [ID]`: make a keypair the one that signs (CA rotation).

use anyhow::Result;
use clap::Args;
use kops_ops::pki;

use crate::args::GlobalArgs;
use crate::context::{cluster_name, state};
use crate::output::status;

#[derive(Debug, Args)]
pub struct PromoteKeypairArgs {
    /// The keyset, or `all`.
    #[arg(value_name = "KEYSET")]
    pub keyset: String,
    #[arg(value_name = "ID")]
    pub id: Option<String>,
}

pub async fn run(global: &GlobalArgs, args: PromoteKeypairArgs) -> Result<i32> {
    let PromoteKeypairArgs { keyset, id } = args;
    let registry = state(global).await?;
    let cluster = cluster_name(&registry, global, None).await?;
    for (name, promoted) in
        pki::promote_keypair(&registry, &cluster, &keyset, id.as_deref()).await?
    {
        match promoted {
            Some(id) => status(&format!("Promoted {name} {id}")),
            None => status(&format!("No {name} keypair newer than the current primary")),
        }
    }
    Ok(0)
}
