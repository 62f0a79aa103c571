//! `kops delete instancegroup NAME`: remove an instance group from the cluster's spec.

use anyhow::Result;
use clap::Args;

use crate::args::GlobalArgs;
use crate::context::{cluster_name, state};
use crate::output::{print, status};

#[derive(Debug, Args)]
pub struct DeleteInstanceGroupArgs {
    #[arg(value_name = "INSTANCEGROUP")]
    pub group: String,
    /// Delete without asking (otherwise only shows what would go).
    #[arg(short = 'y', long)]
    pub yes: bool,
}

pub async fn run(global: &GlobalArgs, args: DeleteInstanceGroupArgs) -> Result<i32> {
    let registry = state(global).await?;
    let DeleteInstanceGroupArgs { group, yes } = args;

    let cluster = cluster_name(&registry, global, None).await?;
    let result = kops_ops::delete_instance_group(&registry, &cluster, &group, yes).await?;
    if result.deleted {
        status(&format!(
            "Deleted instance group {group} from cluster {cluster}."
        ));
        status("Note: kops-rs does not yet remove the group's cloud resources; they go with `kops delete cluster` once the cloud commands land.");
    } else {
        print(&format!(
            "InstanceGroup {group} (role {}, {} to {} instances) would be deleted from cluster {cluster}.\n",
            result.group.spec.role.as_deref().unwrap_or("?"),
            result.group.spec.min_size.unwrap_or(0),
            result.group.spec.max_size.unwrap_or(0)
        ));
        status("Must specify --yes to delete");
    }
    Ok(0)
}
