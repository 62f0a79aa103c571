//! `kops get assets [--copy]`: the files and images a cluster downloads.

use anyhow::{bail, Result};
use clap::Args;
use serde_json::{json, Value};

use crate::args::{GetOutput, GlobalArgs};
use crate::assets::{copy, file_assets, image_assets, tab_table};
use crate::context::{cluster_name, state};
use crate::output::print;

#[derive(Debug, Args)]
pub struct GetAssetsArgs {
    /// Cluster name (positional form of --name).
    #[arg(value_name = "CLUSTER")]
    pub cluster_name: Option<String>,
    /// Copy the files to spec.assets.fileRepository (file:// or s3://).
    #[arg(long)]
    pub copy: bool,
}

pub async fn run(global: &GlobalArgs, args: GetAssetsArgs, output: GetOutput) -> Result<i32> {
    let registry = state(global).await?;
    let name = cluster_name(&registry, global, args.cluster_name.as_deref()).await?;
    let cluster = kops_ops::require_cluster(&registry, &name).await?;
    let groups = registry.list_instance_groups(&name).await?;
    let files = file_assets(&cluster, &groups)?;
    let images = image_assets(&registry, &name, &cluster, &groups)?;

    match output {
        GetOutput::Table => {
            // kops prints a blank line before each table.
            print("\n");
            print(&tab_table(
                &["CANONICAL", "DOWNLOAD"],
                images
                    .iter()
                    .map(|i| vec![i.canonical.clone(), i.download.clone()])
                    .collect(),
            ));
            print("\n");
            print(&tab_table(
                &["CANONICAL", "DOWNLOAD", "SHA"],
                files
                    .iter()
                    .map(|f| vec![f.canonical.clone(), f.download.clone(), f.sha.clone()])
                    .collect(),
            ));
        }
        GetOutput::Yaml | GetOutput::Json => {
            let mut doc = serde_json::Map::new();
            if !images.is_empty() {
                let list: Vec<Value> = images
                    .iter()
                    .map(|i| json!({"canonical": i.canonical, "download": i.download}))
                    .collect();
                doc.insert("images".into(), Value::Array(list));
            }
            if !files.is_empty() {
                let list: Vec<Value> = files
                    .iter()
                    .map(
                        |f| json!({"canonical": f.canonical, "download": f.download, "sha": f.sha}),
                    )
                    .collect();
                doc.insert("files".into(), Value::Array(list));
            }
            let doc = Value::Object(doc);
            if output == GetOutput::Json {
                print(&serde_json::to_string(&doc)?);
            } else {
                print(&serde_yaml_ng::to_string(&doc)?);
            }
        }
        GetOutput::Plaintext => {
            bail!("`get assets` prints table, yaml or json\nhint: use `-o table`, `-o yaml` or `-o json`")
        }
    }

    if args.copy {
        return copy(&cluster, &files, &images).await;
    }
    Ok(0)
}
