//! The command line: the global flags, the tree of commands (each leaf's
//! flags are in its file under `commands/`), and the value types they share.

use clap::{Args, Parser, Subcommand};

use crate::args::GlobalArgs;
use crate::commands::*;

#[derive(Debug, Parser)]
#[command(
    name = "kops",
    version = crate::VERSION,
    about = "kops is Kubernetes Operations: create, change, upgrade and delete production-grade Kubernetes clusters.",
    propagate_version = true,
    max_term_width = 100
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create a resource: a cluster, an instance group, an SSH public key, or everything in a file.
    Create(create::CreateArgs),
    /// Get one or many resources.
    Get(get::GetArgs),
    /// Edit a resource in $EDITOR.
    Edit(EditArgs),
    /// Replace resources from a file.
    Replace(replace::ReplaceArgs),
    /// Apply the cluster's spec to the cloud (a dry run without --yes).
    Update(UpdateArgs),
    /// Delete a resource.
    Delete(delete::DeleteArgs),
    /// Export configuration: a kubeconfig for kubectl.
    Export(ExportArgs),
    /// Make a keypair primary (CA rotation).
    Promote(PromoteArgs),
    /// Distrust keypairs (CA rotation).
    Distrust(DistrustArgs),
    /// Trust keypairs again (CA rotation).
    Trust(TrustArgs),
    /// Upgrade a cluster's spec to the version its channel recommends.
    Upgrade(UpgradeArgs),
    /// Check that a cluster is healthy.
    Validate(ValidateArgs),
    /// Replace instances that run an outdated spec.
    RollingUpdate(RollingUpdateArgs),
    /// Update and roll the control plane, then the nodes.
    Reconcile(ReconcileArgs),
    /// Misc infrequently used commands: render cluster.yaml from a template, dump cloud resources.
    Toolbox(ToolboxArgs),
    /// Print the kops version.
    Version(version::VersionArgs),
    /// Print a shell completion script.
    Completion(completion::CompletionArgs),
    /// Commands for use with other systems (hidden, as in kops).
    #[command(hide = true)]
    Helpers(HelpersArgs),
}

#[derive(Debug, Args)]
pub struct HelpersArgs {
    #[command(subcommand)]
    pub what: HelpersCommand,
}

#[derive(Debug, Subcommand)]
pub enum HelpersCommand {
    /// kubectl authentication plugin.
    KubectlAuth(helpers_kubectl_auth::KubectlAuthArgs),
}

// ------------------------------------------------------------------ the tree

#[derive(Debug, Args)]
pub struct EditArgs {
    #[command(subcommand)]
    pub what: EditCommand,
}

#[derive(Debug, Subcommand)]
pub enum EditCommand {
    /// Edit a cluster.
    Cluster(edit_cluster::EditClusterArgs),
    /// Edit an instance group.
    #[command(visible_aliases = ["ig", "instancegroups"])]
    Instancegroup(edit_instancegroup::EditInstanceGroupArgs),
}

#[derive(Debug, Args)]
pub struct UpdateArgs {
    #[command(subcommand)]
    pub what: UpdateCommand,
}

#[derive(Debug, Subcommand)]
pub enum UpdateCommand {
    /// Compare the cluster's spec with the cloud; with --yes, make the cloud match.
    Cluster(Box<update_cluster::UpdateClusterArgs>),
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    #[command(subcommand)]
    pub what: ExportCommand,
}

#[derive(Debug, Subcommand)]
pub enum ExportCommand {
    /// Write a kubeconfig for a cluster (merged into $KUBECONFIG or ~/.kube/config).
    #[command(visible_aliases = ["kubecfg"])]
    Kubeconfig(export_kubeconfig::ExportKubeconfigArgs),
}

#[derive(Debug, Args)]
pub struct PromoteArgs {
    #[command(subcommand)]
    pub what: PromoteCommand,
}

#[derive(Debug, Subcommand)]
pub enum PromoteCommand {
    /// Make a keypair the one that signs (default: the newest).
    Keypair(promote_keypair::PromoteKeypairArgs),
}

#[derive(Debug, Args)]
pub struct DistrustArgs {
    #[command(subcommand)]
    pub what: DistrustCommand,
}

#[derive(Debug, Subcommand)]
pub enum DistrustCommand {
    /// Stop trusting keypairs (default: every one older than the primary).
    Keypair(distrust_keypair::DistrustKeypairArgs),
}

#[derive(Debug, Args)]
pub struct TrustArgs {
    #[command(subcommand)]
    pub what: TrustCommand,
}

#[derive(Debug, Subcommand)]
pub enum TrustCommand {
    /// Trust distrusted keypairs again (the reverse of `distrust keypair`).
    Keypair(trust_keypair::TrustKeypairArgs),
}

#[derive(Debug, Args)]
pub struct UpgradeArgs {
    #[command(subcommand)]
    pub what: UpgradeCommand,
}

#[derive(Debug, Subcommand)]
pub enum UpgradeCommand {
    /// Propose the Kubernetes version (and images) the cluster's channel recommends; --yes stores them.
    Cluster(upgrade_cluster::UpgradeClusterArgs),
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    #[command(subcommand)]
    pub what: ValidateCommand,
}

#[derive(Debug, Subcommand)]
pub enum ValidateCommand {
    /// Validate a cluster: instance groups against the cloud, nodes Ready, control-plane and critical pods running.
    Cluster(validate_cluster::ValidateClusterArgs),
}

#[derive(Debug, Args)]
pub struct RollingUpdateArgs {
    #[command(subcommand)]
    pub what: RollingUpdateCommand,
}

#[derive(Debug, Subcommand)]
pub enum RollingUpdateCommand {
    /// Replace the instances that run an outdated spec (a dry run without --yes).
    Cluster(Box<rolling_update_cluster::RollingUpdateClusterArgs>),
}

#[derive(Debug, Args)]
pub struct ToolboxArgs {
    #[command(subcommand)]
    pub what: ToolboxCommand,
}

#[derive(Debug, Subcommand)]
pub enum ToolboxCommand {
    /// Generate cluster.yaml from template.
    Template(toolbox_template::ToolboxTemplateArgs),
    /// Dump cloud information (resources, instances, load balancers, subnets, VPC) for a cluster.
    Dump(toolbox_dump::ToolboxDumpArgs),
    /// Manage addons: apply a channel, list what is installed.
    Addons(ToolboxAddonsArgs),
    /// Cluster API commands.
    Clusterapi(ToolboxClusterapiArgs),
    /// Add a machine to a cluster over SSH (not implemented in kops-rs: refused).
    Enroll(toolbox_enroll::ToolboxEnrollArgs),
    /// Generate instance-group specs by providing resource specs such as vcpus and memory.
    InstanceSelector(Box<toolbox_instance_selector::InstanceSelectorArgs>),
}

#[derive(Debug, Args)]
pub struct ToolboxAddonsArgs {
    #[command(subcommand)]
    pub what: ToolboxAddonsCommand,
}

#[derive(Debug, Subcommand)]
pub enum ToolboxAddonsCommand {
    /// Applies updates from the given channel.
    Apply(toolbox_addons_apply::ToolboxAddonsApplyArgs),
    /// Lists installed addons.
    List(toolbox_addons_list::ToolboxAddonsListArgs),
}

#[derive(Debug, Args)]
pub struct ToolboxClusterapiArgs {
    #[command(subcommand)]
    pub what: ToolboxClusterapiCommand,
}

#[derive(Debug, Subcommand)]
pub enum ToolboxClusterapiCommand {
    /// Generate Cluster API configurations.
    Generate(ToolboxClusterapiGenerateArgs),
}

#[derive(Debug, Args)]
pub struct ToolboxClusterapiGenerateArgs {
    #[command(subcommand)]
    pub what: ToolboxClusterapiGenerateCommand,
}

#[derive(Debug, Subcommand)]
pub enum ToolboxClusterapiGenerateCommand {
    /// Generate a MachineDeployment configuration (GCE clusters).
    Machinedeployment(toolbox_clusterapi_generate_machinedeployment::GenerateMachineDeploymentArgs),
}

#[derive(Debug, Args)]
pub struct ReconcileArgs {
    #[command(subcommand)]
    pub what: ReconcileCommand,
}

#[derive(Debug, Subcommand)]
pub enum ReconcileCommand {
    /// Reconcile a cluster: update and roll the control plane, then the nodes.
    Cluster(Box<reconcile_cluster::ReconcileClusterArgs>),
}

// ------------------------------------------------------------------ flag groups

/// kops' `kops get CLUSTER` (a cluster name where a `get` subcommand
/// goes) as `kops get all CLUSTER`; `None` when the command line has no
/// such word after `get`.
pub fn get_cluster_shorthand(argv: Vec<std::ffi::OsString>) -> Option<Vec<std::ffi::OsString>> {
    let at = argv.iter().skip(1).position(|a| a == "get")? + 1;
    let next = argv.get(at + 1)?.to_str()?;
    if next.starts_with('-') {
        return None;
    }
    let mut out = argv;
    out.insert(at + 1, "all".into());
    Some(out)
}

// ------------------------------------------------------------------ value parsers

/// Runs the parsed command line's command; its process exit code.
pub async fn run(cli: Cli) -> anyhow::Result<i32> {
    let global = &cli.global;
    match cli.command {
        Command::Version(a) => version::run(global, a).await,
        Command::Completion(a) => completion::run(a, <Cli as clap::CommandFactory>::command()),
        Command::Create(a) => create::run(global, a).await,
        Command::Get(a) => get::run(global, a).await,
        Command::Edit(a) => match a.what {
            EditCommand::Cluster(a) => edit_cluster::run(global, a).await,
            EditCommand::Instancegroup(a) => edit_instancegroup::run(global, a).await,
        },
        Command::Replace(a) => replace::run(global, a).await,
        Command::Update(a) => match a.what {
            UpdateCommand::Cluster(a) => update_cluster::run(global, *a).await,
        },
        Command::Delete(a) => delete::run(global, a).await,
        Command::Export(a) => match a.what {
            ExportCommand::Kubeconfig(a) => export_kubeconfig::run(global, a).await,
        },
        Command::Promote(a) => match a.what {
            PromoteCommand::Keypair(a) => promote_keypair::run(global, a).await,
        },
        Command::Distrust(a) => match a.what {
            DistrustCommand::Keypair(a) => distrust_keypair::run(global, a).await,
        },
        Command::Trust(a) => match a.what {
            TrustCommand::Keypair(a) => trust_keypair::run(global, a).await,
        },
        Command::Upgrade(a) => match a.what {
            UpgradeCommand::Cluster(a) => upgrade_cluster::run(global, a).await,
        },
        Command::Validate(a) => match a.what {
            ValidateCommand::Cluster(a) => validate_cluster::run(global, a).await,
        },
        Command::RollingUpdate(a) => match a.what {
            RollingUpdateCommand::Cluster(a) => rolling_update_cluster::run(global, *a).await,
        },
        Command::Toolbox(a) => match a.what {
            ToolboxCommand::Template(a) => toolbox_template::run(global, a),
            ToolboxCommand::Dump(a) => toolbox_dump::run(global, a).await,
            ToolboxCommand::Addons(a) => match a.what {
                ToolboxAddonsCommand::Apply(a) => toolbox_addons_apply::run(a).await,
                ToolboxAddonsCommand::List(a) => toolbox_addons_list::run(a).await,
            },
            ToolboxCommand::Enroll(a) => toolbox_enroll::run(global, a).await,
            ToolboxCommand::InstanceSelector(a) => toolbox_instance_selector::run(global, *a).await,
            ToolboxCommand::Clusterapi(a) => match a.what {
                ToolboxClusterapiCommand::Generate(g) => match g.what {
                    ToolboxClusterapiGenerateCommand::Machinedeployment(a) => {
                        toolbox_clusterapi_generate_machinedeployment::run(global, a).await
                    }
                },
            },
        },
        Command::Reconcile(a) => match a.what {
            ReconcileCommand::Cluster(a) => reconcile_cluster::run(global, *a).await,
        },
        Command::Helpers(a) => match a.what {
            HelpersCommand::KubectlAuth(a) => helpers_kubectl_auth::run(global, a).await,
        },
    }
}
