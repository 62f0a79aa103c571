//! `kops edit cluster [CLUSTER]`: edit the cluster's spec in $EDITOR (or with --set/--unset).

use anyhow::Result;
use clap::Args;

use crate::args::GlobalArgs;
use crate::commands::edit::{edit_object, SetFlags};

#[derive(Debug, Args)]
pub struct EditClusterArgs {
    #[arg(value_name = "CLUSTER")]
    pub cluster_name: Option<String>,
    #[command(flatten)]
    pub set: SetFlags,
}

pub async fn run(global: &GlobalArgs, args: EditClusterArgs) -> Result<i32> {
    edit_object(global, args.cluster_name.as_deref(), None, &args.set).await
}
