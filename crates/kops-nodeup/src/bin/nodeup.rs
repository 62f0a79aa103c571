//! `nodeup --conf FILE [--root DIR] [--dry-run]`: turns this machine into a
//! Kubernetes node from its boot config (written by the instance's user data).
//!
//! `nodeup channels apply [URL...] [--channels-manifest URL] --kubeconfig FILE
//! [--interval 60s]`: applies the addons of the bootstrap channel and of the
//! cluster's custom addon channels (what kops' `channels apply channel`
//! does); control-plane nodes run it as the `kops-channels` service.
//!
//! `nodeup kops-controller --conf FILE`: kops-controller, the node bootstrap
//! service control-plane nodes run (the `kops-controller` unit): workers
//! get their certificates and node config from it.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use kops_nodeup::agent::{self, ChangeKind, Options, PackageAction, ServiceAction};
use kops_nodeup::Arch;

#[derive(Parser, Debug)]
#[command(
    name = "nodeup",
    version,
    about = "Set up a Kubernetes node from its kops-rs boot config",
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    setup: Args,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Addons from a channel file (kops' `channels`).
    #[command(subcommand)]
    Channels(ChannelsCommand),
    /// Serve kops' node bootstrap protocol (port 3988) until stopped.
    KopsController(KopsControllerArgs),
}

#[derive(clap::Args, Debug)]
struct KopsControllerArgs {
    /// kops-controller's configuration (kops' JSON), as nodeup writes it.
    #[arg(long, default_value = kops_bootstrap::config::CONFIG_PATH)]
    conf: PathBuf,
    /// The cluster's API, to label nodes from their instance groups.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
enum ChannelsCommand {
    /// Apply the channel's addons that the cluster does not have at their
    /// version, prune what they no longer have, and record them.
    Apply(ChannelsApply),
}

#[derive(clap::Args, Debug)]
struct ChannelsApply {
    /// The channels, applied in order: `<configBase>/addons/bootstrap-channel.yaml`
    /// and custom addons (`spec.addons[].manifest`: an `Addons` index or a
    /// manifest; s3://, file:// or https://).
    channels: Vec<String>,
    /// Also apply the channels kops' kops-channels pod manifest lists
    /// (`<configBase>/manifests/channels/kops-channels.yaml`, written by
    /// `kops update cluster`: the bootstrap channel and `spec.addons`),
    /// read again on every pass so new custom addons need no restart.
    #[arg(long)]
    channels_manifest: Option<String>,
    /// The cluster to apply to.
    #[arg(long)]
    kubeconfig: PathBuf,
    /// Apply again at this interval (e.g. `60s`), forever; once without it.
    #[arg(long)]
    interval: Option<humantime::Duration>,
    /// Only say which addons would be applied.
    #[arg(long)]
    dry_run: bool,
}

#[derive(clap::Args, Debug)]
struct Args {
    /// The boot config the user data wrote (kube_env.yaml).
    #[arg(long, required = true)]
    conf: Option<PathBuf>,
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
    /// Google Cloud: a PEM RSA private key standing in for the vTPM's
    /// attestation key when proving the instance to kops-controller (its
    /// public key must be what Compute reports as the instance's shielded-VM
    /// signing key). Without it, the vTPM signs.
    #[arg(long)]
    gce_signing_key: Option<PathBuf>,
    /// Google Cloud: the TPM with the attestation key (a device, or
    /// `unix:PATH` for a TPM serving raw commands on a socket).
    #[arg(long, default_value = kops_nodeup::agent::tpm::DEFAULT_DEVICE)]
    tpm: String,
    /// Accepted for compatibility with kops' user data; ignored.
    #[arg(long, hide = true)]
    install_systemd_unit: bool,
    /// Accepted for compatibility with kops' user data; ignored.
    #[arg(long = "v", hide = true)]
    verbosity: Option<u32>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
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
    let result = match cli.command {
        Some(Command::Channels(ChannelsCommand::Apply(apply))) => runtime.block_on(channels(apply)),
        Some(Command::KopsController(args)) => runtime.block_on(kops_controller(args)),
        None => runtime.block_on(run(cli.setup)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn kops_controller(args: KopsControllerArgs) -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,aws_config=warn,aws_smithy_runtime=warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let text = std::fs::read_to_string(&args.conf)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", args.conf.display()))?;
    let options = kops_bootstrap::config::Options::parse(&text)
        .map_err(|e| anyhow::anyhow!("{}: {e}", args.conf.display()))?;
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    kops_controller::run(options, args.kubeconfig.as_deref(), shutdown).await?;
    Ok(())
}

/// nodeup's downloader (retries, redirects, the system's roots) for
/// `https://` channels.
struct Download(agent::Fetcher);

impl kops_channels::HttpGet for Download {
    fn get<'a>(&'a self, url: &'a str) -> kops_channels::HttpFuture<'a> {
        Box::pin(self.0.fetch(url))
    }
}

/// A CA for an addon with `needsPKI` (kops makes a self-signed one named
/// after the addon).
fn new_ca(name: &str) -> Result<(String, String), String> {
    let ca = kops_pki::CertificateAuthority::generate(name).map_err(|e| e.to_string())?;
    Ok((
        ca.certificate_pem().to_string(),
        ca.private_key_pem().to_string(),
    ))
}

/// The channels of one pass: those given, then those the pod manifest
/// lists (each once, in order).
async fn channels_to_apply(
    args: &ChannelsApply,
    options: &kops_channels::ApplyOptions,
) -> (Vec<String>, usize) {
    let mut channels = args.channels.clone();
    let mut failed = 0;
    if let Some(manifest) = &args.channels_manifest {
        match kops_channels::channels_from_pod_manifest(manifest, options).await {
            Ok(Some(listed)) => channels.extend(listed),
            Ok(None) => {
                eprintln!("note: {manifest} does not exist; applying only the channels given")
            }
            Err(e) => {
                eprintln!("error: {e}");
                failed += 1;
            }
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    channels.retain(|c| seen.insert(c.clone()));
    (channels, failed)
}

async fn channels(args: ChannelsApply) -> anyhow::Result<()> {
    use kops_channels::AddonOutcome;
    if args.channels.is_empty() && args.channels_manifest.is_none() {
        anyhow::bail!("give at least one channel URL or --channels-manifest");
    }
    let client = kops_channels::client_from_kubeconfig(&args.kubeconfig).await?;
    let options = kops_channels::ApplyOptions {
        dry_run: args.dry_run,
        http: Some(std::sync::Arc::new(Download(agent::Fetcher::new(
            3,
            Duration::from_secs(2),
        )))),
        new_ca: Some(new_ca),
    };
    loop {
        let (channels, mut failed) = channels_to_apply(&args, &options).await;
        for channel in kops_channels::apply_channels(&client, &channels, &options).await {
            match channel.result {
                Ok(report) => {
                    for addon in &report.addons {
                        match addon {
                            AddonOutcome::Current { .. } => {}
                            AddonOutcome::WouldApply { name, reason } => {
                                println!("would apply {name}: {reason}")
                            }
                            AddonOutcome::Applied {
                                name,
                                reason,
                                objects,
                                pruned,
                            } => println!(
                                "applied {name} ({reason}): {objects} object(s), {pruned} pruned"
                            ),
                            AddonOutcome::Failed { name, error } => {
                                eprintln!("error: addon {name}: {error}")
                            }
                        }
                    }
                    let current = report.addons.len() - report.applied() - report.failed();
                    eprintln!(
                        "channel {}: {} applied, {} current, {} failed",
                        channel.channel,
                        report.applied(),
                        current,
                        report.failed()
                    );
                    failed += report.failed();
                }
                Err(e) => {
                    eprintln!("error: channel {}: {e}", channel.channel);
                    failed += 1;
                }
            }
        }
        match args.interval {
            Some(interval) => tokio::time::sleep(*interval).await,
            None if failed > 0 => anyhow::bail!("{failed} addon(s) or channel(s) not applied"),
            None => return Ok(()),
        }
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    let conf = args.conf.clone().unwrap_or_default();
    let mut options = Options::new(&conf, &args.root);
    options.dry_run = args.dry_run;
    options.node_name = args.node_name;
    options.node_ip = args.node_ip;
    options.attempts = args.attempts;
    options.gce_signing_key = args.gce_signing_key.clone();
    options.tpm = args.tpm.clone();
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
    match &outcome.packages {
        PackageAction::None => {}
        PackageAction::NotDebian { packages } => eprintln!(
            "packages not installed ({}): apt packages are installed on Debian and Ubuntu only",
            packages.join(", ")
        ),
        PackageAction::Skipped { packages } => eprintln!(
            "packages not installed ({}): {}",
            packages.join(", "),
            if args.dry_run {
                "dry run"
            } else {
                "--root is not `/`"
            }
        ),
        PackageAction::Installed { packages } if packages.is_empty() => {
            eprintln!("packages already installed")
        }
        PackageAction::Installed { packages } => {
            eprintln!("packages installed: {}", packages.join(", "))
        }
    }
    match &outcome.services {
        ServiceAction::SkippedNotRoot { root } => eprintln!(
            "services not started: --root is `{root}`, not `/` (systemd units are only started on the real node)"
        ),
        ServiceAction::SkippedDryRun => eprintln!("services not started: dry run"),
        ServiceAction::Started { units } => eprintln!("services enabled and started: {}", units.join(", ")),
        ServiceAction::AlreadyRegistered => {
            eprintln!("kops-controller says this node is already registered and Ready: nothing to do")
        }
    }
    Ok(())
}
