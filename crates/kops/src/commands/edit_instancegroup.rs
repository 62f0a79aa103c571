//! `kops edit instancegroup NAME`: edit an instance group in $EDITOR (or with --set/--unset).

use anyhow::Result;
use clap::Args;

use crate::args::GlobalArgs;
use crate::commands::edit::{edit_object, SetFlags};

#[derive(Debug, Args)]
pub struct EditInstanceGroupArgs {
    #[arg(value_name = "INSTANCEGROUP")]
    pub group: String,
    #[command(flatten)]
    pub set: SetFlags,
}

pub async fn run(global: &GlobalArgs, args: EditInstanceGroupArgs) -> Result<i32> {
    edit_object(global, None, Some(args.group), &args.set).await
}
