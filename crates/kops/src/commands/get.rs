//! `kops get`: the `-o` flag every `get` subcommand shares, and the dispatch;
//! `kops get` alone is `kops get all`.

use anyhow::Result;
use clap::{Args, Subcommand};

use crate::args::{GetOutput, GlobalArgs};
use crate::commands::{
    get_all, get_assets, get_clusters, get_instancegroups, get_instances, get_keypairs,
    get_secrets, get_sshpublickeys,
};

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = false)]
pub struct GetArgs {
    #[command(subcommand)]
    pub what: Option<GetCommand>,
    /// Output format.
    #[arg(short = 'o', long, global = true, value_enum, default_value_t = GetOutput::Table)]
    pub output: GetOutput,
}

pub async fn run(global: &GlobalArgs, args: GetArgs) -> Result<i32> {
    let out = args.output;
    match args.what {
        Some(GetCommand::Clusters(a)) => get_clusters::run(global, a, out).await,
        Some(GetCommand::Instancegroups(a)) => get_instancegroups::run(global, a, out).await,
        Some(GetCommand::Sshpublickeys(a)) => get_sshpublickeys::run(global, a, out).await,
        Some(GetCommand::Keypairs(a)) => get_keypairs::run(global, a, out).await,
        Some(GetCommand::Secrets(a)) => get_secrets::run(global, a, out).await,
        Some(GetCommand::Instances(a)) => get_instances::run(global, a, out).await,
        Some(GetCommand::Assets(a)) => get_assets::run(global, a, out).await,
        Some(GetCommand::All(a)) => get_all::run(global, a, out).await,
        None => get_all::run(global, get_all::GetAllArgs::default(), out).await,
    }
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
