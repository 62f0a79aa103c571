//! `kops get instancegroups [NAME...]`: a cluster's instance groups.

use anyhow::Result;
use clap::Args;
use kops_api::manifest::to_json_value;
use kops_ops::OpsError;

use crate::args::{GetOutput, GlobalArgs};
use crate::context::{cluster_name, state};
use crate::output::{manifest_format, print, print_objects};
use crate::tables::groups_table;

#[derive(Debug, Args)]
pub struct GetInstanceGroupsArgs {
    #[arg(value_name = "INSTANCEGROUP")]
    pub names: Vec<String>,
}

pub async fn run(
    global: &GlobalArgs,
    args: GetInstanceGroupsArgs,
    output: GetOutput,
) -> Result<i32> {
    let registry = state(global).await?;
    let format = manifest_format(output.into());
    let names = args.names;

    let name = cluster_name(&registry, global, None).await?;
    let cluster = kops_ops::require_cluster(&registry, &name).await?;
    let mut groups = registry.list_instance_groups(&name).await?;
    for w in &names {
        if !groups.iter().any(|g| g.name() == w) {
            return Err(OpsError::InstanceGroupNotFound {
                cluster: name.clone(),
                name: w.clone(),
            }
            .into());
        }
    }
    if !names.is_empty() {
        groups.retain(|g| names.iter().any(|w| w == g.name()));
    }
    match format {
        Some(f) => print_objects(&groups.iter().map(to_json_value).collect::<Vec<_>>(), f),
        None => print(&groups_table(&groups, &cluster)),
    }
    Ok(0)
}
