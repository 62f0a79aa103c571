//! `kops create -f FILE`: create the resources of manifest files; and the
//! dispatch to `create cluster|instancegroup|secret|keypair|sshpublickey`.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use kops_ops::Registry;

use crate::args::GlobalArgs;
use crate::commands::{
    create_cluster, create_instancegroup, create_keypair, create_secret, create_sshpublickey,
};
use crate::context::{read_input, state};
use crate::output::status;

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct CreateArgs {
    /// Files holding the resources to create (multi-document YAML); `-` reads stdin.
    #[arg(short = 'f', long = "filename", value_name = "FILE")]
    pub filenames: Vec<PathBuf>,
    #[command(subcommand)]
    pub what: Option<CreateCommand>,
}

pub async fn run(global: &GlobalArgs, args: CreateArgs) -> Result<i32> {
    match args.what {
        None if args.filenames.is_empty() => {
            bail!("nothing to create\nhint: `kops create -f FILE`, `kops create cluster NAME --zones ZONES`, `kops create instancegroup NAME` or `kops create sshpublickey -i FILE`")
        }
        None => {
            let registry = state(global).await?;
            apply_files(
                &registry,
                &args.filenames,
                false,
                false,
                global.name.as_deref(),
            )
            .await
        }
        Some(CreateCommand::Cluster(a)) => create_cluster::run(global, *a).await,
        Some(CreateCommand::Instancegroup(a)) => create_instancegroup::run(global, a).await,
        Some(CreateCommand::Secret(a)) => create_secret::run(global, a).await,
        Some(CreateCommand::Keypair(a)) => create_keypair::run(global, a).await,
        Some(CreateCommand::Sshpublickey(a)) => create_sshpublickey::run(global, a).await,
    }
}

pub async fn apply_files(
    registry: &Registry,
    files: &[PathBuf],
    replace: bool,
    force: bool,
    default_cluster: Option<&str>,
) -> Result<i32> {
    // Read every file first: a missing second file must not leave the first applied.
    let mut inputs = Vec::new();
    for f in files {
        inputs.push(read_input(f)?);
    }
    for (source, text) in inputs {
        let applied =
            kops_ops::apply_manifest(registry, &source, &text, replace, force, default_cluster)
                .await?;
        for a in applied {
            status(&format!(
                "{} {} {}: {}",
                a.action,
                a.kind,
                a.name,
                describe_owner(&a)
            ));
        }
    }
    Ok(0)
}

fn describe_owner(a: &kops_ops::Applied) -> String {
    if a.kind == "Cluster" {
        "ok".into()
    } else {
        format!("in cluster {}", a.cluster)
    }
}

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
