//! `kops distrust keypair KEYSET [ID...]`: stop trusting keypairs (CA rotation).

use anyhow::Result;
use clap::Args;
use kops_ops::pki;

use crate::args::GlobalArgs;
use crate::context::{cluster_name, state};
use crate::output::status;

#[derive(Debug, Args)]
pub struct DistrustKeypairArgs {
    /// The keyset, or `all`.
    #[arg(value_name = "KEYSET")]
    pub keyset: String,
    #[arg(value_name = "ID")]
    pub ids: Vec<String>,
}

pub async fn run(global: &GlobalArgs, args: DistrustKeypairArgs) -> Result<i32> {
    let DistrustKeypairArgs { keyset, ids } = args;
    let registry = state(global).await?;
    let cluster = cluster_name(&registry, global, None).await?;
    let done = pki::distrust_keypair(&registry, &cluster, &keyset, &ids).await?;
    if done.is_empty() {
        status(&format!("No {keyset} keypairs older than the primary"));
    }
    for (name, id) in done {
        status(&format!("Distrusted {name} {id}"));
    }
    Ok(0)
}
