//! `kops delete secret NAME...`: remove secrets of a cluster.

use anyhow::{bail, Result};
use clap::Args;
use kops_ops::pki;

use crate::args::GlobalArgs;
use crate::context::{cluster_name, state};
use crate::output::status;

#[derive(Debug, Args)]
pub struct DeleteSecretArgs {
    #[arg(value_name = "SECRET", required = true)]
    pub names: Vec<String>,
}

pub async fn run(global: &GlobalArgs, args: DeleteSecretArgs) -> Result<i32> {
    let names = &args.names;
    let registry = state(global).await?;
    let cluster = cluster_name(&registry, global, None).await?;
    let existing = pki::list_secrets(&registry, &cluster, names).await?;
    for n in names {
        if !existing.contains(n) {
            bail!("secret `{n}` not found in cluster `{cluster}`\nhint: `kops get secrets --name {cluster}` lists them");
        }
    }
    let (_, secrets) = pki::cluster_keystore(&registry, &cluster);
    for n in &existing {
        secrets.delete(n).await.map_err(kops_ops::OpsError::from)?;
        status(&format!("Deleted secret {n} of cluster {cluster}"));
    }
    Ok(0)
}
