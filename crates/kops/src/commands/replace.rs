//! `kops replace -f FILE`: replace stored resources with the files' objects.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use crate::args::GlobalArgs;
use crate::context::state;

#[derive(Debug, Args)]
pub struct ReplaceArgs {
    /// Files holding the new resources; `-` reads stdin.
    #[arg(short = 'f', long = "filename", required = true, value_name = "FILE")]
    pub filenames: Vec<PathBuf>,
    /// Create resources that do not exist yet.
    #[arg(long)]
    pub force: bool,
}

pub async fn run(global: &GlobalArgs, args: ReplaceArgs) -> Result<i32> {
    let registry = state(global).await?;
    crate::commands::create::apply_files(
        &registry,
        &args.filenames,
        true,
        args.force,
        global.name.as_deref(),
    )
    .await
}
