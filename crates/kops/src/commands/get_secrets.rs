//! `kops get secrets [NAME...]`: a cluster's secrets (`-o plaintext`: their values).

use anyhow::Result;
use clap::Args;
use kops_ops::pki;

use crate::args::{GetOutput, GlobalArgs};
use crate::context::{cluster_name, state};
use crate::output::{print, Table};

#[derive(Debug, Args)]
pub struct GetSecretsArgs {
    #[arg(value_name = "SECRET")]
    pub names: Vec<String>,
}

pub async fn run(global: &GlobalArgs, args: GetSecretsArgs, output: GetOutput) -> Result<i32> {
    let names = &args.names;
    let registry = state(global).await?;
    let cluster = cluster_name(&registry, global, None).await?;
    match output {
        GetOutput::Plaintext => {
            // The values only when asked for, one per line, as kops prints them.
            for (_, data) in pki::secret_values(&registry, &cluster, names).await? {
                print(&format!("{}\n", String::from_utf8_lossy(&data)));
            }
        }
        GetOutput::Table => {
            let items = pki::list_secrets(&registry, &cluster, names).await?;
            let mut t = Table::new(&["NAME"]);
            for i in items {
                t.row(vec![i]);
            }
            print(&t.render());
        }
        GetOutput::Json | GetOutput::Yaml => {
            let items = pki::list_secrets(&registry, &cluster, names).await?;
            let values: Vec<serde_json::Value> = items
                .into_iter()
                .map(|name| serde_json::json!({ "name": name }))
                .collect();
            if output == GetOutput::Json {
                print(&format!("{}\n", serde_json::to_string_pretty(&values)?));
            } else {
                print(&serde_yaml_ng::to_string(&values)?);
            }
        }
    }
    Ok(0)
}
