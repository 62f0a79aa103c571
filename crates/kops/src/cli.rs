//! The command line: the global flags, the tree of commands (each leaf's
//! flags are in its file under `commands/`), and the value types they share.

use clap::{Args, Parser, Subcommand, ValueEnum};

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

#[derive(Debug, Args, Clone, Default)]
pub struct GlobalArgs {
    /// Location of the state store (s3://bucket, file:///dir); overrides
    /// KOPS_STATE_STORE and the config file's kops_state_store.
    #[arg(long, global = true, env = "KOPS_STATE_STORE", value_name = "URL")]
    pub state: Option<String>,
    /// Name of the cluster; overrides KOPS_CLUSTER_NAME.
    #[arg(long, global = true, env = "KOPS_CLUSTER_NAME", value_name = "CLUSTER")]
    pub name: Option<String>,
    /// YAML config file (default $HOME/.kops.yaml, then $HOME/.kops/config).
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<std::path::PathBuf>,
    /// Log level (0-10); RUST_LOG overrides it.
    #[arg(
        short = 'v',
        long = "v",
        global = true,
        default_value_t = 0,
        value_name = "LEVEL"
    )]
    pub verbosity: u8,
    #[command(flatten)]
    pub logging: LoggingArgs,
    /// `lifecycle-overrides` of the config file (read at start).
    #[arg(skip)]
    pub config_lifecycle_overrides: Vec<String>,
}

/// kops' klog flags, which it accepts but hides: accepted here so scripts
/// that pass them run; logs go to stderr at the `-v` level whatever they say.
#[derive(Debug, Args, Clone, Default)]
pub struct LoggingArgs {
    /// Log to stderr as well as files (accepted; logs go to stderr).
    #[arg(long = "alsologtostderr", global = true, hide = true, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub alsologtostderr: Option<String>,
    /// Log to stderr instead of files (accepted; logs go to stderr).
    #[arg(long = "logtostderr", global = true, hide = true, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub logtostderr: Option<String>,
    /// Add the file directory to the header (accepted, no effect).
    #[arg(long = "add_dir_header", global = true, hide = true, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub add_dir_header: Option<String>,
    /// Emit a stack trace at file:line (accepted, no effect).
    #[arg(
        long = "log_backtrace_at",
        global = true,
        hide = true,
        value_name = "FILE:LINE"
    )]
    pub log_backtrace_at: Option<String>,
    /// Write log files in this directory (accepted; logs go to stderr).
    #[arg(long = "log_dir", global = true, hide = true, value_name = "DIR")]
    pub log_dir: Option<String>,
    /// Write logs to this file (accepted; logs go to stderr).
    #[arg(long = "log_file", global = true, hide = true, value_name = "FILE")]
    pub log_file: Option<String>,
    /// Maximum log file size in MB (accepted, no effect).
    #[arg(
        long = "log_file_max_size",
        global = true,
        hide = true,
        value_name = "MB"
    )]
    pub log_file_max_size: Option<String>,
    /// Write each severity to its own file only (accepted, no effect).
    #[arg(long = "one_output", global = true, hide = true, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub one_output: Option<String>,
    /// Leave out log headers (accepted, no effect).
    #[arg(long = "skip_headers", global = true, hide = true, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub skip_headers: Option<String>,
    /// Leave out headers of log files (accepted, no effect).
    #[arg(long = "skip_log_headers", global = true, hide = true, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub skip_log_headers: Option<String>,
    /// Logs at or above this severity go to stderr (accepted; the `-v` level decides).
    #[arg(
        long = "stderrthreshold",
        global = true,
        hide = true,
        value_name = "SEVERITY"
    )]
    pub stderrthreshold: Option<String>,
    /// Logs at or above this severity go to stderr with --alsologtostderr (accepted; the `-v` level decides).
    #[arg(
        long = "alsologtostderrthreshold",
        global = true,
        value_name = "SEVERITY"
    )]
    pub alsologtostderrthreshold: Option<String>,
    /// klog's legacy stderr threshold behaviour (accepted, no effect).
    #[arg(long = "legacy_stderr_threshold_behavior", global = true, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub legacy_stderr_threshold_behavior: Option<String>,
    /// Per-file log levels, `pattern=N,...` (accepted; the `-v` level decides).
    #[arg(long = "vmodule", global = true, hide = true, value_name = "PATTERN=N")]
    pub vmodule: Option<String>,
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum Output {
    #[default]
    Table,
    Yaml,
    Json,
}

/// `kops get`'s formats: the usual ones, and `plaintext` for secrets' values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum GetOutput {
    #[default]
    Table,
    Yaml,
    Json,
    /// The values themselves (`get secrets` only).
    Plaintext,
}

impl From<GetOutput> for Output {
    fn from(o: GetOutput) -> Output {
        match o {
            GetOutput::Yaml => Output::Yaml,
            GetOutput::Json => Output::Json,
            GetOutput::Table | GetOutput::Plaintext => Output::Table,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ManifestOutput {
    Yaml,
    Json,
}

// ------------------------------------------------------------------ the tree

#[derive(Debug, Subcommand)]
pub enum CreateCommand {
    /// Create a cluster from flags.
    Cluster(Box<create_cluster::CreateClusterArgs>),
    /// Create an instance group.
    #[command(visible_aliases = ["ig", "instancegroups"])]
    Instancegroup(create_instancegroup::CreateInstanceGroupArgs),
    /// Add an admin SSH public key.
    Sshpublickey(create_sshpublickey::CreateSshPublicKeyArgs),
    /// Store a secret: dockerconfig, encryptionconfig or ciliumpassword.
    Secret(create_secret::CreateSecretArgs),
    /// Add a keypair to a keyset (CA rotation).
    Keypair(create_keypair::CreateKeypairArgs),
}

#[derive(Debug, Subcommand)]
pub enum GetCommand {
    /// List clusters.
    #[command(visible_aliases = ["cluster"])]
    Clusters(get_clusters::GetClustersArgs),
    /// List the instance groups of a cluster.
    #[command(visible_aliases = ["instancegroup", "ig", "igs"])]
    Instancegroups(get_instancegroups::GetInstanceGroupsArgs),
    /// List the admin SSH public keys of a cluster.
    #[command(visible_aliases = ["sshpublickey"])]
    Sshpublickeys(get_sshpublickeys::GetSshPublicKeysArgs),
    /// List the keypairs of a cluster's keysets (CAs).
    #[command(visible_aliases = ["keypair"])]
    Keypairs(get_keypairs::GetKeypairsArgs),
    /// List the secrets of a cluster (`-o plaintext` prints their values).
    #[command(visible_aliases = ["secret"])]
    Secrets(get_secrets::GetSecretsArgs),
    /// List the cluster's instances (from the cloud, with node names when the API answers).
    #[command(visible_aliases = ["instance"])]
    Instances(get_instances::GetInstancesArgs),
    /// Display the files (with sha256) and container images the cluster needs.
    Assets(get_assets::GetAssetsArgs),
    /// The cluster and its instance groups.
    All(get_all::GetAllArgs),
}

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

#[derive(Debug, Subcommand)]
pub enum DeleteCommand {
    /// Delete one instance (its group replaces it): detach (--surge), drain, terminate.
    Instance(delete_instance::DeleteInstanceArgs),
    /// Delete an instance group.
    #[command(visible_aliases = ["ig", "instancegroups"])]
    Instancegroup(delete_instancegroup::DeleteInstanceGroupArgs),
    /// Delete a cluster: its cloud resources, then its state.
    Cluster(delete_cluster::DeleteClusterArgs),
    /// Delete secrets of a cluster.
    Secret(delete_secret::DeleteSecretArgs),
    /// Delete an admin SSH public key.
    Sshpublickey(delete_sshpublickey::DeleteSshPublicKeyArgs),
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

/// How commands that talk to the Kubernetes API reach it (kops'
/// `--api-server` and `--use-kubeconfig`).
#[derive(Debug, Args, Clone, Default)]
pub struct KubeApiFlags {
    /// Override the API server used when communicating with the cluster kube-apiserver.
    #[arg(long, value_name = "URL")]
    pub api_server: Option<String>,
    /// Use the server endpoint from the local kubeconfig instead of inferring
    /// from cluster name: only its context named after the cluster (an
    /// error when it has none). Without it kops-rs also reads the local
    /// kubeconfig, falling back to its current context.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value = "false", value_parser = bool_flag, value_name = "BOOL")]
    pub use_kubeconfig: bool,
}

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

/// Parses `10s`, `2m`, `500ms`, `1h30m`.
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    humantime::parse_duration(text)
        .map_err(|e| format!("`{text}` is not a duration ({e}); write e.g. `10s` or `2m`"))
}

/// A boolean flag's value as kops (Go's strconv) reads it.
pub fn bool_flag(text: &str) -> Result<bool, String> {
    match text {
        "true" | "1" | "yes" => Ok(true),
        "false" | "0" | "no" => Ok(false),
        _ => Err(format!("`{text}` is not a boolean; write true or false")),
    }
}
