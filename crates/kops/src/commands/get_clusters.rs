//! `kops get clusters [NAME...]`: the clusters of the state store.

use anyhow::Result;
use clap::Args;
use kops_api::manifest::to_json_value;
use kops_ops::OpsError;

use crate::args::{GetOutput, GlobalArgs};
use crate::context::state;
use crate::output::{manifest_format, print, print_objects, status, Table};
use crate::tables::cluster_zones;

#[derive(Debug, Args)]
pub struct GetClustersArgs {
    #[arg(value_name = "CLUSTER")]
    pub names: Vec<String>,
    /// Show the fully populated spec (the completed spec the last
    /// `update cluster` stored).
    #[arg(long)]
    pub full: bool,
}

/// The reminder kops prints above a `--full` spec, in the same shape (the
/// text is kops-rs' own).
const FULL_WARNING: &str = "
//
//   WARNING: a '--full' spec is the completed spec, with every default filled in.
//   Do not write it back as the cluster's definition: keep only the fields you set.
//
//   The fields you set: kops get cluster -o yaml
//

";

pub async fn run(global: &GlobalArgs, args: GetClustersArgs, output: GetOutput) -> Result<i32> {
    let registry = state(global).await?;
    let format = manifest_format(output.into());
    let names = args.names;
    let args_full = args.full;

    let mut clusters = registry.list_clusters().await?;
    // With no names, every cluster: --name / KOPS_CLUSTER_NAME picks the
    // cluster other commands work on, it does not filter this list.
    let wanted = names;
    if !wanted.is_empty() {
        for w in &wanted {
            if !clusters.iter().any(|c| c.name() == w) {
                return Err(OpsError::ClusterNotFound {
                    name: w.clone(),
                    store: registry.store().base_url().to_string(),
                }
                .into());
            }
        }
        clusters.retain(|c| wanted.iter().any(|w| w == c.name()));
    }
    if args_full {
        let mut full = Vec::new();
        for c in &clusters {
            let completed = registry.get_completed_spec(c.name()).await?.ok_or_else(|| {
                anyhow::anyhow!(
                    "error loading the completed spec of cluster `{}`: not found in {}\nhint: `kops update cluster {} --yes` stores it",
                    c.name(),
                    registry.store().base_url(),
                    c.name()
                )
            })?;
            full.push(completed);
        }
        clusters = full;
        print(FULL_WARNING);
    }
    match format {
        Some(f) => print_objects(&clusters.iter().map(to_json_value).collect::<Vec<_>>(), f),
        None => {
            if clusters.is_empty() {
                status(&format!(
                    "No clusters found in {}",
                    registry.store().base_url()
                ));
                return Ok(0);
            }
            let mut t = Table::new(&["NAME", "CLOUD", "ZONES"]);
            for c in &clusters {
                t.row(vec![
                    c.name().to_string(),
                    c.spec.cloud_provider.clone().unwrap_or_default(),
                    cluster_zones(c),
                ]);
            }
            print(&t.render());
        }
    }
    Ok(0)
}
