//! `kops toolbox addons apply CHANNEL [--yes]`: apply the addons of a
//! channel (kops' channels format, e.g. the cluster's
//! `addons/bootstrap-channel.yaml` in the state store) to the cluster of the
//! current kubeconfig context, as kops' channels tool does on control-plane
//! nodes; without --yes, only what would be applied.

use anyhow::{bail, Result};
use clap::Args;
use kops_channels::{AddonOutcome, ApplyOptions};

use crate::output::{print, Table};

#[derive(Debug, Args)]
pub struct ToolboxAddonsApplyArgs {
    /// The channel's location: s3://, file:// (https:// is not read by kops-rs).
    #[arg(value_name = "CHANNEL")]
    pub channel: String,
    /// Apply update.
    #[arg(long)]
    pub yes: bool,
}

pub async fn run(args: ToolboxAddonsApplyArgs) -> Result<i32> {
    let client = kops_channels::client_from_kubeconfig(&default_kubeconfig()?).await?;
    let options = ApplyOptions {
        dry_run: !args.yes,
        ..Default::default()
    };
    let report = kops_channels::apply_channel(&client, &args.channel, &options).await?;
    let mut t = Table::new(&["NAME", "RESULT"]);
    for a in &report.addons {
        let (name, result) = match a {
            AddonOutcome::Current { name } => (name, "up to date".to_string()),
            AddonOutcome::WouldApply { name, reason } => (name, format!("would apply ({reason})")),
            AddonOutcome::Applied {
                name,
                objects,
                pruned,
                ..
            } => (
                name,
                format!("applied ({objects} objects, {pruned} pruned)"),
            ),
            AddonOutcome::Failed { name, error } => (name, format!("failed: {error}")),
        };
        t.row(vec![name.clone(), result]);
    }
    print(&t.render());
    if !args.yes
        && report
            .addons
            .iter()
            .any(|a| matches!(a, AddonOutcome::WouldApply { .. }))
    {
        print("\nMust specify --yes to update\n");
    }
    if report.failed() > 0 {
        bail!("{} addon(s) failed to apply", report.failed());
    }
    Ok(0)
}

/// The kubeconfig kops' channels tool reads: KUBECONFIG's first file, else ~/.kube/config.
pub fn default_kubeconfig() -> Result<std::path::PathBuf> {
    let files = kops_pki::KubeconfigFiles::resolve(
        None,
        std::env::var("KUBECONFIG").ok().as_deref(),
        std::env::var_os("HOME")
            .map(std::path::PathBuf::from)
            .as_deref(),
    )
    .map_err(kops_ops::OpsError::from)?;
    Ok(files
        .files
        .iter()
        .find(|f| f.exists())
        .unwrap_or(&files.files[0])
        .clone())
}
