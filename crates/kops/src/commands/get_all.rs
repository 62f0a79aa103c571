//! `kops get all [CLUSTER]`: the cluster and its instance groups.

use anyhow::Result;
use clap::Args;
use kops_api::manifest::to_json_value;

use crate::args::{GetOutput, GlobalArgs};
use crate::context::{cluster_name, state};
use crate::output::{manifest_format, print, print_objects, Table};
use crate::tables::{cluster_zones, groups_table};

#[derive(Debug, Args, Default)]
pub struct GetAllArgs {
    #[arg(value_name = "CLUSTER")]
    pub cluster_name: Option<String>,
}

pub async fn run(global: &GlobalArgs, args: GetAllArgs, output: GetOutput) -> Result<i32> {
    let registry = state(global).await?;
    let positional = args.cluster_name.as_deref();
    let out: crate::args::Output = output.into();

    let name = cluster_name(&registry, global, positional).await?;
    let cluster = kops_ops::require_cluster(&registry, &name).await?;
    let groups = registry.list_instance_groups(&name).await?;
    match manifest_format(out) {
        Some(f) => {
            let mut values = vec![to_json_value(&cluster)];
            values.extend(groups.iter().map(to_json_value));
            print_objects(&values, f);
        }
        None => {
            let mut t = Table::new(&["NAME", "CLOUD", "ZONES"]);
            t.row(vec![
                name.clone(),
                cluster.spec.cloud_provider.clone().unwrap_or_default(),
                cluster_zones(&cluster),
            ]);
            print(&format!(
                "Cluster\n{}\nInstance Groups\n{}",
                t.render(),
                groups_table(&groups, &cluster)
            ));
        }
    }
    Ok(0)
}
