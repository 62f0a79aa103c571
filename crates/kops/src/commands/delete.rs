//! `kops delete -f FILE`: delete the clusters, instance groups and SSH keys
//! the files name; and the dispatch to `delete cluster|instance|instancegroup|secret|sshpublickey`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use kops_api::manifest::{parse_objects, Object};
use kops_ops::OpsError;

use crate::args::GlobalArgs;
use crate::commands::delete_cluster::{self, DeleteClusterArgs};
use crate::commands::delete_instancegroup::{self, DeleteInstanceGroupArgs};
use crate::commands::{delete_instance, delete_secret, delete_sshpublickey};
use crate::context::{cluster_name, state};
use crate::output::{print, status};

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

pub async fn run(global: &GlobalArgs, args: DeleteArgs) -> Result<i32> {
    match args.what {
        Some(DeleteCommand::Cluster(a)) => delete_cluster::run(global, a).await,
        Some(DeleteCommand::Instance(a)) => delete_instance::run(global, a).await,
        Some(DeleteCommand::Instancegroup(a)) => delete_instancegroup::run(global, a).await,
        Some(DeleteCommand::Secret(a)) => delete_secret::run(global, a).await,
        Some(DeleteCommand::Sshpublickey(a)) => delete_sshpublickey::run(global, a).await,
        None if args.filenames.is_empty() => bail!(
            "nothing to delete\nhint: `kops delete -f FILE`, `kops delete cluster NAME`, `kops delete instancegroup NAME` or `kops delete instance ID`"
        ),
        None => delete_files(global, &args.filenames, args.yes).await,
    }
}

/// `kops delete -f FILE`: deletes every cluster and instance group the
/// files name (groups of a cluster deleted by the same files are skipped).
async fn delete_files(global: &GlobalArgs, files: &[PathBuf], yes: bool) -> Result<i32> {
    // Read and parse every file first: a bad second file must not leave the first deleted.
    let mut objects = Vec::new();
    for f in files {
        let text = if f == Path::new("-") {
            let mut t = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut t)?;
            t
        } else {
            std::fs::read_to_string(f).map_err(|source| OpsError::ReadFile {
                path: f.display().to_string(),
                source,
            })?
        };
        let source = f.display().to_string();
        let parsed = parse_objects(&source, &text).map_err(OpsError::from)?;
        if parsed.is_empty() {
            return Err(OpsError::EmptyManifest {
                source_name: source,
            }
            .into());
        }
        for o in &parsed {
            if let Object::Other(v) = o {
                let kind = v.get("kind").and_then(|k| k.as_str()).unwrap_or("?");
                bail!("`{source}`: `delete -f` cannot delete a {kind}\nhint: it deletes Cluster, InstanceGroup and SSHCredential objects");
            }
        }
        objects.extend(parsed);
    }
    // An SSHCredential names no cluster: the file's only cluster, else --name.
    let file_clusters: Vec<String> = objects
        .iter()
        .filter_map(|o| match o {
            Object::Cluster(c) => Some(c.name().to_string()),
            _ => None,
        })
        .collect();
    let mut deleted_clusters = Vec::new();
    for o in objects {
        match o {
            Object::Cluster(c) => {
                let name = c.name().to_string();
                delete_cluster::run(global, DeleteClusterArgs::named(&name, yes)).await?;
                deleted_clusters.push(name);
            }
            Object::InstanceGroup(ig) => {
                let cluster = match ig.cluster_label().filter(|c| !c.is_empty()) {
                    Some(c) => c.to_string(),
                    None => match &global.name {
                        Some(n) => n.clone(),
                        None => {
                            return Err(OpsError::NoClusterForObject {
                                kind: "InstanceGroup".into(),
                                name: ig.name().to_string(),
                            }
                            .into())
                        }
                    },
                };
                if deleted_clusters.contains(&cluster) {
                    continue;
                }
                let mut g = global.clone();
                g.name = Some(cluster);
                let args = DeleteInstanceGroupArgs {
                    group: ig.name().to_string(),
                    yes,
                };
                delete_instancegroup::run(&g, args).await?;
            }
            Object::SshCredential { public_key, .. } => {
                let registry = state(global).await?;
                let cluster = match file_clusters.as_slice() {
                    [only] => only.clone(),
                    _ => cluster_name(&registry, global, None).await?,
                };
                if deleted_clusters.contains(&cluster) {
                    continue;
                }
                kops_ops::require_cluster(&registry, &cluster).await?;
                let id = kops_state::registry::ssh_fingerprint(public_key.trim())
                    .map_err(OpsError::from)?;
                let known = registry.list_ssh_public_keys(&cluster).await?;
                if !known.iter().any(|k| k.id == id) {
                    bail!("SSH public key {id} not found in cluster `{cluster}`\nhint: `kops get sshpublickeys --name {cluster}` lists its keys");
                }
                if yes {
                    registry.delete_ssh_public_key(&cluster, &id).await?;
                    status(&format!(
                        "Deleted SSH public key {id} from cluster {cluster}."
                    ));
                } else {
                    print(&format!(
                        "SSH public key {id} would be deleted from cluster {cluster}.\n"
                    ));
                    status("Must specify --yes to delete");
                }
            }
            Object::Other(_) => {}
        }
    }
    Ok(0)
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
