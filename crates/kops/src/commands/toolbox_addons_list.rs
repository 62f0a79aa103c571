//! `kops toolbox addons list`: the addons the cluster of the current
//! kubeconfig context records as installed (namespace annotations).

use anyhow::Result;
use clap::Args;

use crate::commands::toolbox_addons_apply::default_kubeconfig;
use crate::output::{print, Table};

#[derive(Debug, Args)]
pub struct ToolboxAddonsListArgs {}

pub async fn run(_args: ToolboxAddonsListArgs) -> Result<i32> {
    let client = kops_channels::client_from_kubeconfig(&default_kubeconfig()?).await?;
    let addons = kops_channels::list_installed(&client).await?;
    if addons.is_empty() {
        print("\nNo managed addons found\n");
        return Ok(0);
    }
    let mut t = Table::new(&["NAME", "NAMESPACE", "HASH", "CHANNEL", "ID"]);
    for a in addons {
        let or_dash = |s: &str| {
            if s.is_empty() {
                "-".to_string()
            } else {
                s.to_string()
            }
        };
        t.row(vec![
            a.name,
            a.namespace,
            or_dash(&a.version.manifest_hash),
            or_dash(a.version.channel.as_deref().unwrap_or_default()),
            or_dash(&a.version.id),
        ]);
    }
    print(&t.render());
    Ok(0)
}
