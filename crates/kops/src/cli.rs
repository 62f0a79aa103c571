//! The command line: every command, flag and environment variable kops users
//! know, parsed with clap.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

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

#[derive(Debug, Args, Clone)]
pub struct GlobalArgs {
    /// Location of the state store (s3://bucket, file:///dir).
    #[arg(long, global = true, env = "KOPS_STATE_STORE", value_name = "URL")]
    pub state: Option<String>,
    /// Name of the cluster.
    #[arg(long, global = true, env = "KOPS_CLUSTER_NAME", value_name = "CLUSTER")]
    pub name: Option<String>,
    /// Log level (0-10); RUST_LOG overrides it.
    #[arg(
        short = 'v',
        long = "v",
        global = true,
        default_value_t = 0,
        value_name = "LEVEL"
    )]
    pub verbosity: u8,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create a resource: a cluster, an instance group, an SSH public key, or everything in a file.
    Create(CreateArgs),
    /// Get one or many resources.
    Get(GetArgs),
    /// Edit a resource in $EDITOR.
    Edit(EditArgs),
    /// Replace resources from a file.
    Replace(ReplaceArgs),
    /// Apply the cluster's spec to the cloud (a dry run without --yes).
    Update(UpdateArgs),
    /// Delete a resource.
    Delete(DeleteArgs),
    /// Export configuration: a kubeconfig for kubectl.
    Export(ExportArgs),
    /// Make a keypair primary (CA rotation).
    Promote(PromoteArgs),
    /// Distrust keypairs (CA rotation).
    Distrust(DistrustArgs),
    /// Trust keypairs again (CA rotation).
    Trust(crate::more_commands::TrustArgs),
    /// Upgrade a cluster's spec to the version its channel recommends.
    Upgrade(crate::more_commands::UpgradeArgs),
    /// Check that a cluster is healthy.
    Validate(crate::roll_commands::ValidateArgs),
    /// Replace instances that run an outdated spec.
    RollingUpdate(crate::roll_commands::RollingUpdateArgs),
    /// Misc infrequently used commands: render cluster.yaml from a template.
    Toolbox(crate::toolbox_commands::ToolboxArgs),
    /// Print the kops version.
    Version(VersionArgs),
    /// Print a shell completion script.
    Completion(CompletionArgs),
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

// ------------------------------------------------------------------ create

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct CreateArgs {
    /// Files holding the resources to create (multi-document YAML); `-` reads stdin.
    #[arg(short = 'f', long = "filename", value_name = "FILE")]
    pub filenames: Vec<PathBuf>,
    #[command(subcommand)]
    pub what: Option<CreateCommand>,
}

#[derive(Debug, Subcommand)]
pub enum CreateCommand {
    /// Create a cluster from flags.
    Cluster(Box<CreateClusterArgs>),
    /// Create an instance group.
    #[command(visible_aliases = ["ig", "instancegroups"])]
    Instancegroup(CreateInstanceGroupArgs),
    /// Add an admin SSH public key.
    Sshpublickey(CreateSshPublicKeyArgs),
    /// Store a secret: dockerconfig, encryptionconfig or ciliumpassword.
    Secret(CreateSecretArgs),
    /// Add a keypair to a keyset (CA rotation).
    Keypair(CreateKeypairArgs),
}

#[derive(Debug, Args, Default)]
pub struct CreateClusterArgs {
    /// Name of the cluster (or --name / KOPS_CLUSTER_NAME).
    #[arg(value_name = "CLUSTER")]
    pub cluster_name: Option<String>,

    /// Zones in which to run the cluster.
    #[arg(long, value_delimiter = ',', value_name = "ZONES")]
    pub zones: Vec<String>,
    /// Zones in which to run the control plane.
    #[arg(
        long,
        alias = "master-zones",
        value_delimiter = ',',
        value_name = "ZONES"
    )]
    pub control_plane_zones: Vec<String>,
    /// Number of control-plane nodes (defaults to one per control-plane zone).
    #[arg(long, alias = "master-count", value_name = "N")]
    pub control_plane_count: Option<u32>,
    /// Machine type(s) for the control plane.
    #[arg(
        long,
        alias = "master-size",
        value_delimiter = ',',
        value_name = "TYPE"
    )]
    pub control_plane_size: Vec<String>,
    /// Root volume size of control-plane nodes in GiB.
    #[arg(long, alias = "master-volume-size", value_name = "GIB")]
    pub control_plane_volume_size: Option<i64>,
    /// Root volume type of control-plane nodes.
    #[arg(long, alias = "master-volume-type", value_name = "TYPE")]
    pub control_plane_volume_type: Option<String>,
    /// Image for control-plane nodes (overrides --image).
    #[arg(long, alias = "master-image", value_name = "IMAGE")]
    pub control_plane_image: Option<String>,
    /// Extra security groups for control-plane nodes.
    #[arg(
        long,
        alias = "master-security-groups",
        value_delimiter = ',',
        value_name = "IDS"
    )]
    pub control_plane_security_groups: Vec<String>,
    /// Number of worker nodes (defaults to one per zone).
    #[arg(long, value_name = "N")]
    pub node_count: Option<u32>,
    /// Machine type(s) for worker nodes.
    #[arg(long, value_delimiter = ',', value_name = "TYPE")]
    pub node_size: Vec<String>,
    /// Root volume size of worker nodes in GiB.
    #[arg(long, value_name = "GIB")]
    pub node_volume_size: Option<i64>,
    /// Image for worker nodes (overrides --image).
    #[arg(long, value_name = "IMAGE")]
    pub node_image: Option<String>,
    /// Extra security groups for worker nodes.
    #[arg(long, value_delimiter = ',', value_name = "IDS")]
    pub node_security_groups: Vec<String>,
    /// Image for bastions (overrides --image).
    #[arg(long, value_name = "IMAGE")]
    pub bastion_image: Option<String>,
    /// Number of API-server-only nodes.
    #[arg(long, value_name = "N")]
    pub apiserver_count: Option<u32>,
    /// Machine type(s) for API-server nodes.
    #[arg(long, value_delimiter = ',', value_name = "TYPE")]
    pub apiserver_size: Vec<String>,
    /// Machine image for all instances.
    #[arg(long, value_name = "IMAGE")]
    pub image: Option<String>,
    /// Networking (CNI): cilium, calico, cni, kubenet, flannel, amazonvpc, kindnet, ...
    #[arg(long, value_name = "CNI")]
    pub networking: Option<String>,
    /// Network topology: public or private.
    #[arg(long, short = 't', value_name = "TOPOLOGY")]
    pub topology: Option<String>,
    /// Create a bastion instance group (private topology).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub bastion: Option<bool>,
    /// DNS type: public, private or none.
    #[arg(long = "dns", value_name = "TYPE")]
    pub dns_type: Option<String>,
    /// DNS hosted zone (name or id).
    #[arg(long, value_name = "ZONE")]
    pub dns_zone: Option<String>,
    /// Network CIDR(s) of the VPC; extra ones become additional CIDRs.
    #[arg(long, value_delimiter = ',', value_name = "CIDR")]
    pub network_cidr: Vec<String>,
    /// An existing VPC to use.
    #[arg(long = "vpc", alias = "network-id", value_name = "VPC-ID")]
    pub vpc: Option<String>,
    /// Existing subnets to use.
    #[arg(long, value_delimiter = ',', value_name = "IDS")]
    pub subnets: Vec<String>,
    /// Existing utility subnets to use.
    #[arg(long, value_delimiter = ',', value_name = "IDS")]
    pub utility_subnets: Vec<String>,
    /// Egress for private subnets: a NAT gateway or instance id.
    #[arg(long, value_name = "ID")]
    pub egress: Option<String>,
    /// Kubernetes version (defaults to the stable channel's recommendation).
    #[arg(long, value_name = "VERSION")]
    pub kubernetes_version: Option<String>,
    /// Kubernetes feature gates: `Gate`, `+Gate` (on) or `-Gate` (off).
    #[arg(long, value_delimiter = ',', value_name = "GATES")]
    pub kubernetes_feature_gates: Vec<String>,
    /// Path to the admin SSH public key (default ~/.ssh/id_rsa.pub when it exists).
    #[arg(long, value_name = "FILE")]
    pub ssh_public_key: Option<PathBuf>,
    /// CIDRs allowed to reach nodes over SSH (default: --admin-access).
    #[arg(long, value_delimiter = ',', value_name = "CIDRS")]
    pub ssh_access: Vec<String>,
    /// CIDRs allowed to reach the Kubernetes API (default 0.0.0.0/0 and ::/0).
    #[arg(long, value_delimiter = ',', value_name = "CIDRS")]
    pub admin_access: Vec<String>,
    /// API load balancer type: public or internal.
    #[arg(long = "api-loadbalancer-type", value_name = "TYPE")]
    pub api_load_balancer_type: Option<String>,
    /// Public DNS name of the API.
    #[arg(long, value_name = "NAME")]
    pub api_public_name: Option<String>,
    /// ACM certificate ARN for the API load balancer.
    #[arg(long, value_name = "ARN")]
    pub api_ssl_certificate: Option<String>,
    /// Encrypt etcd volumes (default true).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub encrypt_etcd_storage: Option<bool>,
    /// etcd clusters to create (default main,events).
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    pub etcd_clusters: Vec<String>,
    /// Cloud provider: aws or gce (guessed from the state store or zones).
    #[arg(long, value_name = "CLOUD")]
    pub cloud: Option<String>,
    /// GCE: the Google Cloud project (default: gcloud's default project).
    #[arg(long, value_name = "PROJECT")]
    pub project: Option<String>,
    /// GCE: the service account instances run as (default: one per role).
    #[arg(long, value_name = "EMAIL")]
    pub gce_service_account: Option<String>,
    /// Tags for all cloud resources: `Key=Value,Key2=Value2`.
    #[arg(long, value_name = "LABELS")]
    pub cloud_labels: Option<String>,
    /// Channel for default versions and images (default stable).
    #[arg(long, value_name = "CHANNEL")]
    pub channel: Option<String>,
    /// Publish OIDC discovery documents here (enables IRSA).
    #[arg(long, value_name = "URL")]
    pub discovery_store: Option<String>,
    /// Instance manager for nodes: cloudgroups or karpenter.
    #[arg(long, value_name = "MANAGER")]
    pub instance_manager: Option<String>,
    /// Use IPv6 for pods and services.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub ipv6: Option<bool>,
    /// Set a field of the spec: `cluster.spec.path=value` (repeatable).
    #[arg(long = "set", value_name = "PATH=VALUE")]
    pub sets: Vec<String>,
    /// Remove a field of the spec: `cluster.spec.path` (repeatable).
    #[arg(long = "unset", value_name = "PATH")]
    pub unsets: Vec<String>,
    /// Print the spec instead of storing it (with -o).
    #[arg(long)]
    pub dry_run: bool,
    /// Output format for --dry-run.
    #[arg(short = 'o', long, value_name = "FORMAT")]
    pub output: Option<ManifestOutput>,
    /// Also apply the cluster to the cloud (runs `update cluster --yes`).
    #[arg(short = 'y', long)]
    pub yes: bool,
    /// Target for --yes: direct or terraform.
    #[arg(long, value_name = "TARGET")]
    pub target: Option<String>,
}

#[derive(Debug, Args)]
pub struct CreateInstanceGroupArgs {
    /// Name of the instance group.
    #[arg(value_name = "INSTANCEGROUP")]
    pub group: String,
    /// Role: Node, Master (ControlPlane), Bastion or APIServer.
    #[arg(long, default_value = "Node")]
    pub role: String,
    /// Subnets the group runs in (default: the subnets that fit the role).
    #[arg(long = "subnet", value_delimiter = ',', value_name = "NAMES")]
    pub subnets: Vec<String>,
    /// Print the group instead of storing it.
    #[arg(long)]
    pub dry_run: bool,
    /// Output format for --dry-run.
    #[arg(short = 'o', long, value_name = "FORMAT")]
    pub output: Option<ManifestOutput>,
    /// Open the new group in $EDITOR before storing it (default true).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value_t = true, value_name = "BOOL")]
    pub edit: bool,
}

#[derive(Debug, Args)]
pub struct CreateSshPublicKeyArgs {
    /// Path to the SSH public key.
    #[arg(short = 'i', long = "ssh-public-key", value_name = "FILE")]
    pub public_key: PathBuf,
    /// Cluster name (positional form of --name).
    #[arg(value_name = "CLUSTER")]
    pub cluster_name: Option<String>,
}

// ------------------------------------------------------------------ get

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = false)]
pub struct GetArgs {
    #[command(subcommand)]
    pub what: Option<GetCommand>,
    /// Output format.
    #[arg(short = 'o', long, global = true, value_enum, default_value_t = GetOutput::Table)]
    pub output: GetOutput,
}

#[derive(Debug, Subcommand)]
pub enum GetCommand {
    /// List clusters.
    #[command(visible_aliases = ["cluster"])]
    Clusters {
        #[arg(value_name = "CLUSTER")]
        names: Vec<String>,
    },
    /// List the instance groups of a cluster.
    #[command(visible_aliases = ["instancegroup", "ig", "igs"])]
    Instancegroups {
        #[arg(value_name = "INSTANCEGROUP")]
        names: Vec<String>,
    },
    /// List the admin SSH public keys of a cluster.
    #[command(visible_aliases = ["sshpublickey"])]
    Sshpublickeys,
    /// List the keypairs of a cluster's keysets (CAs).
    #[command(visible_aliases = ["keypair"])]
    Keypairs {
        #[arg(value_name = "KEYSET")]
        names: Vec<String>,
        /// Include distrusted keypairs.
        #[arg(long)]
        distrusted: bool,
    },
    /// List the secrets of a cluster (`-o plaintext` prints their values).
    #[command(visible_aliases = ["secret"])]
    Secrets {
        #[arg(value_name = "SECRET")]
        names: Vec<String>,
    },
    /// List the cluster's instances (from the cloud, with node names when the API answers).
    #[command(visible_aliases = ["instance"])]
    Instances(crate::more_commands::GetInstancesArgs),
    /// Display the files (with sha256) and container images the cluster needs.
    Assets(crate::assets_commands::GetAssetsArgs),
    /// The cluster and its instance groups.
    All {
        #[arg(value_name = "CLUSTER")]
        cluster_name: Option<String>,
    },
}

// ------------------------------------------------------------------ edit / replace

#[derive(Debug, Args)]
pub struct EditArgs {
    #[command(subcommand)]
    pub what: EditCommand,
}

#[derive(Debug, Subcommand)]
pub enum EditCommand {
    /// Edit a cluster.
    Cluster {
        #[arg(value_name = "CLUSTER")]
        cluster_name: Option<String>,
        #[command(flatten)]
        set: crate::more_commands::SetFlags,
    },
    /// Edit an instance group.
    #[command(visible_aliases = ["ig", "instancegroups"])]
    Instancegroup {
        #[arg(value_name = "INSTANCEGROUP")]
        group: String,
        #[command(flatten)]
        set: crate::more_commands::SetFlags,
    },
}

#[derive(Debug, Args)]
pub struct ReplaceArgs {
    /// Files holding the new resources; `-` reads stdin.
    #[arg(short = 'f', long = "filename", required = true, value_name = "FILE")]
    pub filenames: Vec<PathBuf>,
    /// Create resources that do not exist yet.
    #[arg(long)]
    pub force: bool,
}

// ------------------------------------------------------------------ update

#[derive(Debug, Args)]
pub struct UpdateArgs {
    #[command(subcommand)]
    pub what: UpdateCommand,
}

#[derive(Debug, Subcommand)]
pub enum UpdateCommand {
    /// Compare the cluster's spec with the cloud; with --yes, make the cloud match.
    Cluster(UpdateClusterArgs),
}

#[derive(Debug, Args)]
pub struct UpdateClusterArgs {
    #[arg(value_name = "CLUSTER")]
    pub cluster_name: Option<String>,
    /// Apply the changes (otherwise only show them).
    #[arg(short = 'y', long)]
    pub yes: bool,
    /// Where to apply: `direct` (the AWS API), `terraform` (kubernetes.tf + data/)
    /// or `cloudformation` (kubernetes.json); the file targets make no cloud call.
    #[arg(long, default_value = "direct", value_name = "TARGET")]
    pub target: String,
    /// Output directory for file targets (default out/terraform, out/cloudformation).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Plan format: `table` (kops' text) or `json`.
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// In a dry run, exit with 2 when there are changes (0 when none).
    #[arg(long)]
    pub exit_code: bool,
}

// ------------------------------------------------------------------ delete

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct DeleteArgs {
    /// Delete every cluster and instance group these files name; `-` reads stdin.
    #[arg(short = 'f', long = "filename", value_name = "FILE")]
    pub filenames: Vec<PathBuf>,
    /// With -f: delete (otherwise only shows what would go).
    #[arg(short = 'y', long)]
    pub yes: bool,
    #[command(subcommand)]
    pub what: Option<DeleteCommand>,
}

#[derive(Debug, Subcommand)]
pub enum DeleteCommand {
    /// Delete one instance (its group replaces it): detach (--surge), drain, terminate.
    Instance(crate::more_commands::DeleteInstanceArgs),
    /// Delete an instance group.
    #[command(visible_aliases = ["ig", "instancegroups"])]
    Instancegroup {
        #[arg(value_name = "INSTANCEGROUP")]
        group: String,
        /// Delete without asking (otherwise only shows what would go).
        #[arg(short = 'y', long)]
        yes: bool,
    },
    /// Delete a cluster: its cloud resources, then its state.
    Cluster {
        #[arg(value_name = "CLUSTER")]
        cluster_name: Option<String>,
        /// Delete (otherwise only shows what would go).
        #[arg(short = 'y', long)]
        yes: bool,
        /// Remove the cluster from the state store only, leaving cloud resources.
        #[arg(long)]
        unregister: bool,
        /// The region, when the state store no longer has the cluster's spec.
        #[arg(long, value_name = "REGION")]
        region: Option<String>,
        /// Passes over resources that still have dependencies before giving up.
        #[arg(long, default_value_t = 30, value_name = "N")]
        count: u32,
        /// Time between passes.
        #[arg(long, default_value = "10s", value_parser = parse_duration, value_name = "DURATION")]
        interval: std::time::Duration,
    },
    /// Delete secrets of a cluster.
    Secret {
        #[arg(value_name = "SECRET", required = true)]
        names: Vec<String>,
    },
    /// Delete an admin SSH public key.
    Sshpublickey {
        /// The key's id as `get sshpublickeys` prints it.
        #[arg(value_name = "ID")]
        id: String,
    },
}

// ------------------------------------------------------------------ misc

#[derive(Debug, Args)]
pub struct VersionArgs {
    /// Print only the version number.
    #[arg(long)]
    pub short: bool,
}

#[derive(Debug, Args)]
pub struct CompletionArgs {
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Parses `10s`, `2m`, `500ms`, `1h30m`.
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    humantime::parse_duration(text)
        .map_err(|e| format!("`{text}` is not a duration ({e}); write e.g. `10s` or `2m`"))
}

// ------------------------------------------------------------------ keypairs, secrets, kubeconfig

#[derive(Debug, Args)]
pub struct CreateSecretArgs {
    /// The secret's type: dockerconfig, encryptionconfig or ciliumpassword.
    #[arg(value_name = "TYPE")]
    pub kind: String,
    /// Cluster name (positional form of --name).
    #[arg(value_name = "CLUSTER")]
    pub cluster_name: Option<String>,
    /// The file holding the secret (`-` reads stdin).
    #[arg(short = 'f', long = "filename", value_name = "FILE")]
    pub filename: PathBuf,
    /// Replace the secret if it exists.
    #[arg(long)]
    pub force: bool,
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
    Kubeconfig(ExportKubeconfigArgs),
}

#[derive(Debug, Args)]
pub struct ExportKubeconfigArgs {
    #[arg(value_name = "CLUSTER")]
    pub cluster_name: Option<String>,
    /// Also write an admin user (client certificate from the cluster CA) valid this long; `--admin` alone is 18h.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "18h", value_name = "DURATION")]
    pub admin: Option<String>,
    /// Use this existing kubeconfig user in the context.
    #[arg(long, value_name = "USER")]
    pub user: Option<String>,
    /// Use the cluster's internal API name (api.internal.CLUSTER).
    #[arg(long)]
    pub internal: bool,
    /// The kubeconfig file to write (instead of $KUBECONFIG or ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The API server URL to write, as is.
    #[arg(long, value_name = "URL")]
    pub api_server: Option<String>,
    /// Export every cluster in the state store.
    #[arg(long)]
    pub all: bool,
}

#[derive(Debug, Args)]
pub struct CreateKeypairArgs {
    /// The keyset (e.g. kubernetes-ca, service-account), or `all` for every CA keyset.
    #[arg(value_name = "KEYSET")]
    pub keyset: String,
    /// A CA certificate to add (PEM); without it a new CA is made.
    #[arg(long, value_name = "FILE")]
    pub cert: Option<PathBuf>,
    /// The CA's private key (PEM).
    #[arg(long, value_name = "FILE")]
    pub key: Option<PathBuf>,
    /// Make the new keypair the one that signs.
    #[arg(long)]
    pub primary: bool,
}

#[derive(Debug, Args)]
pub struct PromoteArgs {
    #[command(subcommand)]
    pub what: PromoteCommand,
}

#[derive(Debug, Subcommand)]
pub enum PromoteCommand {
    /// Make a keypair the one that signs (default: the newest).
    Keypair {
        /// The keyset, or `all`.
        #[arg(value_name = "KEYSET")]
        keyset: String,
        #[arg(value_name = "ID")]
        id: Option<String>,
    },
}

#[derive(Debug, Args)]
pub struct DistrustArgs {
    #[command(subcommand)]
    pub what: DistrustCommand,
}

#[derive(Debug, Subcommand)]
pub enum DistrustCommand {
    /// Stop trusting keypairs (default: every one older than the primary).
    Keypair {
        /// The keyset, or `all`.
        #[arg(value_name = "KEYSET")]
        keyset: String,
        #[arg(value_name = "ID")]
        ids: Vec<String>,
    },
}
