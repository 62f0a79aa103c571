//! `kops completion SHELL`: a shell completion script.

use anyhow::Result;
use clap::Args;

#[derive(Debug, Args)]
pub struct CompletionArgs {
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
    /// Leave out completion descriptions (accepted: the scripts clap writes are used as they are).
    #[arg(long)]
    pub no_descriptions: bool,
}

/// `cmd`: the whole command line's clap tree.
pub fn run(args: CompletionArgs, mut cmd: clap::Command) -> Result<i32> {
    let mut out = std::io::stdout();
    clap_complete::generate(args.shell, &mut cmd, "kops", &mut out);
    Ok(0)
}
