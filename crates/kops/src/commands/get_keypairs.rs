//! `kops get keypairs [KEYSET...]`: the keypairs of a cluster's keysets (CAs).

use anyhow::{bail, Result};
use clap::Args;
use kops_ops::pki::{self, KeypairRow};

use crate::args::{GetOutput, GlobalArgs};
use crate::context::{cluster_name, state};
use crate::output::{print, Table};

#[derive(Debug, Args)]
pub struct GetKeypairsArgs {
    #[arg(value_name = "KEYSET")]
    pub names: Vec<String>,
    /// Include distrusted keypairs.
    #[arg(long)]
    pub distrusted: bool,
}

pub async fn run(global: &GlobalArgs, args: GetKeypairsArgs, output: GetOutput) -> Result<i32> {
    let (names, distrusted) = (&args.names, args.distrusted);
    let registry = state(global).await?;
    let cluster = cluster_name(&registry, global, None).await?;
    let rows = pki::list_keypairs(&registry, &cluster, names, distrusted).await?;
    match output {
        GetOutput::Json => print(&format!("{}\n", serde_json::to_string_pretty(&rows)?)),
        GetOutput::Yaml => print(&serde_yaml_ng::to_string(&rows)?),
        GetOutput::Plaintext => bail!(
            "`-o plaintext` is for secrets\nhint: `kops get keypairs` prints a table, `-o yaml` or `-o json`"
        ),
        GetOutput::Table => print(&keypairs_table(&rows, distrusted)),
    }
    Ok(0)
}

fn keypairs_table(rows: &[KeypairRow], distrusted: bool) -> String {
    let mut headers = vec!["NAME", "ID", "ISSUED", "EXPIRES"];
    if distrusted {
        headers.push("DISTRUSTED");
    }
    headers.extend(["PRIMARY", "HASPRIVATE"]);
    let mut t = Table::new(&headers);
    let date = |t: Option<i64>| t.map(kops_pki::format_date).unwrap_or_default();
    let star = |b: bool| if b { "*" } else { "" }.to_string();
    for r in rows {
        let mut cells = vec![
            r.name.clone(),
            r.id.clone(),
            date(r.not_before),
            date(r.not_after),
        ];
        if distrusted {
            cells.push(
                r.distrust_timestamp
                    .as_deref()
                    .map(|d| d.chars().take(10).collect())
                    .unwrap_or_default(),
            );
        }
        cells.push(star(r.is_primary));
        cells.push(star(r.has_private_key));
        t.row(cells);
    }
    t.render()
}
