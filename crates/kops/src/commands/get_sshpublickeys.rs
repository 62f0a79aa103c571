//! `kops get sshpublickeys`: a cluster's admin SSH public keys.

use anyhow::{bail, Result};
use clap::Args;

use crate::args::{GetOutput, GlobalArgs, ManifestOutput};
use crate::context::{cluster_name, state};
use crate::output::{manifest_format, print, Table};

#[derive(Debug, Args)]
pub struct GetSshPublicKeysArgs {}

pub async fn run(
    global: &GlobalArgs,
    _args: GetSshPublicKeysArgs,
    output: GetOutput,
) -> Result<i32> {
    let registry = state(global).await?;
    let format = manifest_format(output.into());

    let name = cluster_name(&registry, global, None).await?;
    kops_ops::require_cluster(&registry, &name).await?;
    let keys = registry.list_ssh_public_keys(&name).await?;
    let values: Vec<serde_json::Value> = keys
        .iter()
        .map(|k| serde_json::json!({"id": k.id, "publicKey": k.public_key}))
        .collect();
    match format {
        Some(ManifestOutput::Json) => {
            print(&format!("{}\n", serde_json::to_string_pretty(&values)?))
        }
        Some(ManifestOutput::Yaml) => print(&serde_yaml_ng::to_string(&values)?),
        None => {
            if keys.is_empty() {
                bail!("no SSH public key found for cluster `{name}`\nhint: add one with `kops create sshpublickey -i ~/.ssh/id_ed25519.pub --name {name}`");
            }
            let mut t = Table::new(&["ID"]);
            for k in keys {
                t.row(vec![k.id]);
            }
            print(&t.render());
        }
    }
    Ok(0)
}
