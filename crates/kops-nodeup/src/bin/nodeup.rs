//! `nodeup --conf FILE [--root DIR] [--dry-run]`: turns this machine into a
//! Kubernetes node from its boot config (written by the instance's user data).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use kops_nodeup::agent::{self, ChangeKind, Options, ServiceAction};
use kops_nodeup::Arch;

#[derive(Parser, Debug)]
#[command(
    name = "nodeup",
    version,
    about = "Set up a Kubernetes node from its kops-rs boot config"
)]
struct Args {
    /// The boot config the user data wrote (kube_env.yaml).
    #[arg(long)]
    conf: PathBuf,
    /// Where the node's file system is; services are started only when it is `/`.
    #[arg(long, default_value = "/")]
    root: PathBuf,
    /// Print what would change; write nothing.
    #[arg(long)]
    dry_run: bool,
    /// The node's name (default: the host name).
    #[arg(long)]
    node_name: Option<String>,
    /// The node's IP address (added to serving certificates and kubelet's --node-ip).
    #[arg(long)]
    node_ip: Option<String>,
    /// Install for this architecture (amd64, arm64) instead of this machine's.
    #[arg(long)]
    arch: Option<String>,
    /// Attempts per URL for transient download errors.
    #[arg(long, default_value_t = 4)]
    attempts: u32,
    /// Accepted for compatibility with kops' user data; ignored.
    #[arg(long, hide = true)]
    install_systemd_unit: bool,
    /// Accepted for compatibility with kops' user data; ignored.
    #[arg(long = "v", hide = true)]
    verbosity: Option<u32>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    let mut options = Options::new(&args.conf, &args.root);
    options.dry_run = args.dry_run;
    options.node_name = args.node_name;
    options.node_ip = args.node_ip;
    options.attempts = args.attempts;
    options.region = std::env::var("AWS_REGION").ok().filter(|r| !r.is_empty());
    options.retry_delay = Duration::from_secs(2);
    if let Some(a) = &args.arch {
        options.arch = Some(
            Arch::parse(a).ok_or_else(|| anyhow::anyhow!("`--arch {a}` is not amd64 or arm64"))?,
        );
    }
    let outcome = agent::run(&options).await?;
    eprintln!(
        "nodeup: cluster {}, instance group {} ({:?})",
        outcome.cluster, outcome.instance_group, outcome.role
    );
    for url in &outcome.downloaded {
        eprintln!("downloaded {url}");
    }
    let verb = |k: ChangeKind| match (args.dry_run, k) {
        (true, ChangeKind::Created) => "would create",
        (true, ChangeKind::Updated) => "would update",
        (_, k) => k.as_str(),
    };
    for change in &outcome.changes {
        println!(
            "{:<12} {:04o} {}",
            verb(change.kind),
            change.mode,
            change.path
        );
    }
    let changed = outcome.changed();
    if changed == 0 {
        eprintln!("nothing to change: every file is unchanged");
    } else if args.dry_run {
        eprintln!("{changed} file(s) would change (dry run: nothing written)");
    } else {
        eprintln!("{changed} file(s) changed");
    }
    match &outcome.services {
        ServiceAction::SkippedNotRoot { root } => eprintln!(
            "services not started: --root is `{root}`, not `/` (systemd units are only started on the real node)"
        ),
        ServiceAction::SkippedDryRun => eprintln!("services not started: dry run"),
        ServiceAction::Started { units } => eprintln!("services enabled and started: {}", units.join(", ")),
    }
    Ok(())
}
