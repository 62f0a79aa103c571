//! `kops trust keypair KEYSET ID...`: trust distrusted keypairs again.

use anyhow::Result;
use clap::Args;

use crate::args::GlobalArgs;
use crate::context::{cluster_name, state};
use crate::output::{print, status};

#[derive(Debug, Args)]
pub struct TrustKeypairArgs {
    /// The keyset (e.g. kubernetes-ca).
    #[arg(value_name = "KEYSET")]
    pub keyset: String,
    /// The keypairs' ids (`get keypairs --distrusted` lists them).
    #[arg(value_name = "ID", required = true)]
    pub ids: Vec<String>,
}

pub async fn run(global: &GlobalArgs, args: TrustKeypairArgs) -> Result<i32> {
    let TrustKeypairArgs { keyset, ids } = args;
    let registry = state(global).await?;
    let cluster = cluster_name(&registry, global, None).await?;
    let done = kops_ops::pki::trust_keypair(&registry, &cluster, &keyset, &ids).await?;
    if done.is_empty() {
        status(&format!("The {keyset} keypairs named are already trusted"));
    }
    for id in done {
        print(&format!("Trusted {keyset} {id}\n"));
    }
    Ok(0)
}
