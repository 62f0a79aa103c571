//! Commands kops users reach for between create and delete: `edit --set`,
//! `get instances`, `delete instance`, `delete -f`, `trust keypair` and
//! `upgrade cluster`; their flags and the printing of what they return.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use kops_api::manifest::{parse_objects, to_yaml, Object};
use kops_api::version::KubernetesVersion;
use kops_api::{Cluster, InstanceGroup};
use kops_ops::{EditOutcome, OpsError, Registry};
use kops_roll::{CloudGroup, CloudInstance, InstanceStatus, Kubernetes, NodeInfo};

use crate::cli::{parse_duration, DeleteArgs, DeleteCommand, GetOutput, GlobalArgs};
use crate::output::{print, status, Table};

async fn state(global: &GlobalArgs) -> Result<Registry> {
    Ok(kops_ops::open_state(global.state.as_deref()).await?)
}

async fn cluster_name(
    registry: &Registry,
    global: &GlobalArgs,
    positional: Option<&str>,
) -> Result<String> {
    let name = positional.or(global.name.as_deref());
    Ok(kops_ops::resolve_cluster_name(registry, name).await?)
}

// ---------------------------------------------------------------- edit --set

/// `--set` / `--unset` of `edit cluster` and `edit instancegroup`: change
/// the stored object without an editor.
#[derive(Debug, Args, Default, Clone)]
pub struct SetFlags {
    /// Set a field without opening an editor: `spec.path=value` (repeatable).
    #[arg(long = "set", value_name = "PATH=VALUE")]
    pub sets: Vec<String>,
    /// Remove a field without opening an editor: `spec.path` (repeatable).
    #[arg(long = "unset", value_name = "PATH")]
    pub unsets: Vec<String>,
}

impl SetFlags {
    pub fn is_empty(&self) -> bool {
        self.sets.is_empty() && self.unsets.is_empty()
    }
}

/// How many times `--set` is applied again after another writer's save.
const SET_ATTEMPTS: u32 = 10;

/// One read-set-save round of [`edit_with_sets`].
async fn set_and_save(
    registry: &kops_ops::Registry,
    cluster: &str,
    group: Option<&str>,
    flags: &SetFlags,
) -> Result<EditOutcome, OpsError> {
    match group {
        None => {
            let (original, read_at) =
                kops_ops::require_cluster_versioned(registry, cluster).await?;
            let mut c = original.clone();
            kops_api::set::unset_cluster_fields(&mut c, &flags.unsets).map_err(OpsError::Flags)?;
            kops_api::set::set_cluster_fields(&mut c, &flags.sets).map_err(OpsError::Flags)?;
            kops_ops::save_edited_cluster_over(registry, cluster, &original, &read_at, &to_yaml(&c))
                .await
        }
        Some(g) => {
            let (original, read_at) =
                kops_ops::require_instance_group_versioned(registry, cluster, g).await?;
            let mut ig = original.clone();
            kops_api::set::unset_instance_group_fields(&mut ig, &flags.unsets)
                .map_err(OpsError::Flags)?;
            kops_api::set::set_instance_group_fields(&mut ig, &flags.sets)
                .map_err(OpsError::Flags)?;
            kops_ops::save_edited_instance_group_over(
                registry,
                cluster,
                g,
                &original,
                &read_at,
                &to_yaml(&ig),
            )
            .await
        }
    }
}

/// Applies `--unset` then `--set` (kops' order) to the stored cluster or
/// group and saves the result through the same checks as an edit.
pub async fn edit_with_sets(
    global: &GlobalArgs,
    cluster: Option<&str>,
    group: Option<&str>,
    flags: &SetFlags,
) -> Result<i32> {
    let registry = state(global).await?;
    let cluster = cluster_name(&registry, global, cluster).await?;
    // Read, set, save over the version read; when another writer saved in
    // between, read their result and set again, so neither update is lost.
    let mut attempt = 1;
    let outcome = loop {
        let saved = set_and_save(&registry, &cluster, group, flags).await;
        match saved {
            Err(e) if e.is_conflict() && attempt < SET_ATTEMPTS => attempt += 1,
            other => break other?,
        }
    };
    let what = group
        .map(|g| format!("instance group {g}"))
        .unwrap_or_else(|| format!("cluster {cluster}"));
    match outcome {
        EditOutcome::Saved => status(&format!(
            "Saved {what}. Apply it with: kops update cluster --name {cluster} --yes"
        )),
        EditOutcome::Unchanged => status(&format!("No changes made to {what}.")),
    }
    Ok(0)
}

// ---------------------------------------------------------------- get instances

#[derive(Debug, Args)]
pub struct GetInstancesArgs {
    #[arg(value_name = "CLUSTER")]
    pub cluster_name: Option<String>,
    /// Kubeconfig for the node names (default: KUBECONFIG, then ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
}

/// The cluster's groups as the cloud runs them, matched with its nodes, and
/// each instance's addresses and roles.
struct Live {
    cluster: Cluster,
    instance_groups: Vec<InstanceGroup>,
    cloud: kops_aws::AwsCloud,
    groups: Vec<CloudGroup>,
    details: BTreeMap<String, kops_aws::instances::InstanceDetails>,
}

async fn live_instances(registry: &Registry, cluster: &str, nodes: &[NodeInfo]) -> Result<Live> {
    let spec: Cluster = kops_ops::require_cluster(registry, cluster).await?;
    let groups: Vec<InstanceGroup> = registry.list_instance_groups(cluster).await?;
    let region = kops_ops::update::cluster_region(&spec)?;
    let cloud = kops_aws::AwsCloud::new(&region).await;
    let asgs = kops_aws::instances::cluster_groups(&cloud, cluster).await?;
    let details = kops_aws::instances::instance_details(&cloud, cluster).await?;
    let built = kops_roll::build_groups(cluster, &groups, &asgs, nodes);
    Ok(Live {
        cluster: spec,
        instance_groups: groups,
        cloud,
        groups: built,
        details,
    })
}

async fn kube_nodes(kubeconfig: Option<&Path>, cluster: &str) -> Result<Vec<NodeInfo>> {
    let kube = kops_roll::KubeClient::connect(kubeconfig, cluster).await?;
    Ok(kube.nodes().await?)
}

fn status_text(i: &CloudInstance) -> &'static str {
    match i.status {
        InstanceStatus::UpToDate => "UpToDate",
        InstanceStatus::NeedsUpdate => "NeedsUpdate",
        InstanceStatus::Detached => "Detached",
    }
}

pub async fn get_instances(
    global: &GlobalArgs,
    args: GetInstancesArgs,
    output: GetOutput,
) -> Result<i32> {
    if output == GetOutput::Plaintext {
        bail!("`get instances` prints table, yaml or json\nhint: use `-o table`, `-o yaml` or `-o json`");
    }
    let registry = state(global).await?;
    let cluster = cluster_name(&registry, global, args.cluster_name.as_deref()).await?;
    kops_ops::require_cluster(&registry, &cluster).await?;
    // As kops: without the Kubernetes API the list still comes, without node names.
    let nodes = match kube_nodes(args.kubeconfig.as_deref(), &cluster).await {
        Ok(n) => n,
        Err(e) => {
            status(&format!(
                "warning: cannot list node names. Kubernetes API unavailable: {}",
                e.to_string().lines().next().unwrap_or_default()
            ));
            Vec::new()
        }
    };
    let live = live_instances(&registry, &cluster, &nodes).await?;
    let mut rows = Vec::new();
    for g in &live.groups {
        let mut members: Vec<&CloudInstance> = g.members().collect();
        members.sort_by(|a, b| a.id().cmp(b.id()));
        for m in members {
            let d = live.details.get(m.id()).cloned().unwrap_or_default();
            let state = if m.instance.lifecycle_state.starts_with("Warmed") {
                "WarmPool"
            } else {
                ""
            };
            rows.push(serde_json::json!({
                "id": m.id(),
                "nodeName": m.node.as_ref().map(|n| n.name.clone()),
                "status": status_text(m),
                "roles": d.roles,
                "internalIP": d.private_ip.unwrap_or_default(),
                "externalIP": d.public_ip.unwrap_or_default(),
                "instanceGroup": g.name,
                "machineType": d.instance_type.or_else(|| m.instance.instance_type.clone()).unwrap_or_default(),
                "state": state,
            }));
        }
    }
    for r in &mut rows {
        if let Some(o) = r.as_object_mut() {
            if o.get("nodeName").is_some_and(|v| v.is_null()) {
                o.remove("nodeName");
            }
        }
    }
    match output {
        GetOutput::Json => print(&format!("{}\n", kops_order_json(&rows))),
        GetOutput::Yaml => print(&serde_yaml_ng::to_string(&rows)?),
        _ => {
            let text = |v: &serde_json::Value, k: &str| -> String {
                match v.get(k) {
                    Some(serde_json::Value::String(s)) => s.clone(),
                    Some(serde_json::Value::Array(a)) => a
                        .iter()
                        .filter_map(|x| x.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                    _ => String::new(),
                }
            };
            let mut t = Table::new(&[
                "ID",
                "NODE-NAME",
                "STATUS",
                "ROLES",
                "STATE",
                "INTERNAL-IP",
                "EXTERNAL-IP",
                "INSTANCE-GROUP",
                "MACHINE-TYPE",
            ]);
            for r in &rows {
                t.row(
                    [
                        "id",
                        "nodeName",
                        "status",
                        "roles",
                        "state",
                        "internalIP",
                        "externalIP",
                        "instanceGroup",
                        "machineType",
                    ]
                    .iter()
                    .map(|k| text(r, k))
                    .collect(),
                );
            }
            print(&format!("\n{}", t.render()));
        }
    }
    Ok(0)
}

/// kops' `get instances -o json`: one compact array, each object's fields
/// in kops' order (`nodeName` left out when unknown, `roles` null when none).
fn kops_order_json(rows: &[serde_json::Value]) -> String {
    const FIELDS: [&str; 9] = [
        "id",
        "nodeName",
        "status",
        "roles",
        "internalIP",
        "externalIP",
        "instanceGroup",
        "machineType",
        "state",
    ];
    let objects: Vec<String> = rows
        .iter()
        .map(|row| {
            let fields: Vec<String> = FIELDS
                .iter()
                .filter_map(|k| {
                    let v = match row.get(*k) {
                        None => return None,
                        Some(serde_json::Value::Array(a)) if a.is_empty() => {
                            serde_json::Value::Null
                        }
                        Some(v) => v.clone(),
                    };
                    Some(format!("{}:{}", serde_json::Value::from(*k), v))
                })
                .collect();
            format!("{{{}}}", fields.join(","))
        })
        .collect();
    format!("[{}]", objects.join(","))
}

// ---------------------------------------------------------------- delete instance

#[derive(Debug, Args)]
pub struct DeleteInstanceArgs {
    /// The instance's id (`i-...`) or its node's name.
    #[arg(value_name = "INSTANCE|NODE")]
    pub target: String,
    /// Delete it (otherwise only say what would happen).
    #[arg(short = 'y', long)]
    pub yes: bool,
    /// Detach the instance from its group first, so the group launches the
    /// replacement before the instance goes (default true, as kops; never
    /// for control-plane instances).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value = "true", value_parser = bool_flag, value_name = "BOOL")]
    pub surge: bool,
    /// Do not use the Kubernetes API: no node lookup, drain or validation.
    #[arg(long)]
    pub cloudonly: bool,
    /// Maximum time to wait for the cluster to validate (and for the replacement).
    #[arg(long, default_value = "15m", value_parser = parse_duration, value_name = "DURATION")]
    pub validation_timeout: Duration,
    /// Consecutive successful validations required after the replacement.
    #[arg(long, default_value_t = 2, value_name = "N")]
    pub validate_count: u32,
    /// Time to wait after draining the node.
    #[arg(long, default_value = "5s", value_parser = parse_duration, value_name = "DURATION")]
    pub post_drain_delay: Duration,
    /// Fail if draining the node fails (otherwise terminate it anyway).
    #[arg(long, default_value = "true", num_args = 0..=1, default_missing_value = "true", value_parser = bool_flag, value_name = "BOOL")]
    pub fail_on_drain_error: bool,
    /// Fail if the cluster does not validate.
    #[arg(long, default_value = "true", num_args = 0..=1, default_missing_value = "true", value_parser = bool_flag, value_name = "BOOL")]
    pub fail_on_validate_error: bool,
    /// Kubeconfig for the node lookup, drain and validation (default: KUBECONFIG, then ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Time between validation attempts while waiting for health.
    #[arg(long, default_value = "30s", value_parser = parse_duration, hide = true)]
    pub validate_tick: Duration,
    /// Pause between two consecutive successful validations.
    #[arg(long, default_value = "10s", value_parser = parse_duration, hide = true)]
    pub validate_success_pause: Duration,
}

fn bool_flag(text: &str) -> Result<bool, String> {
    match text {
        "true" | "1" | "yes" => Ok(true),
        "false" | "0" | "no" => Ok(false),
        _ => Err(format!("`{text}` is not a boolean; write true or false")),
    }
}

/// `kops delete instance`: as kops' single-instance update. Detach for surge
/// (not control-plane instances), validate, drain, terminate, wait for the
/// group's replacement and validate again; kops-roll's roller does each step
/// on a group made of just this instance.
pub async fn delete_instance(global: &GlobalArgs, a: DeleteInstanceArgs) -> Result<i32> {
    let registry = state(global).await?;
    let cluster = cluster_name(&registry, global, None).await?;
    kops_ops::require_cluster(&registry, &cluster).await?;
    let kube = if a.cloudonly {
        None
    } else {
        let connected = async {
            let k = kops_roll::KubeClient::connect(a.kubeconfig.as_deref(), &cluster).await?;
            let nodes = k.nodes().await?;
            Ok::<_, kops_roll::RollError>((k, nodes))
        }
        .await;
        match connected {
            Ok(k) => Some(k),
            Err(e) => bail!(
                "cannot reach the Kubernetes API of cluster `{cluster}`: {}\nhint: pass --kubeconfig, or --cloudonly to delete without draining",
                e.to_string().lines().next().unwrap_or_default()
            ),
        }
    };
    let nodes = kube.as_ref().map(|(_, n)| n.clone()).unwrap_or_default();
    let live = live_instances(&registry, &cluster, &nodes).await?;
    let found = live.groups.iter().find_map(|g| {
        g.members()
            .find(|m| {
                m.id() == a.target
                    || (!a.cloudonly && m.node.as_ref().is_some_and(|n| n.name == a.target))
            })
            .map(|m| (g, m))
    });
    let Some((group, member)) = found else {
        bail!(
            "instance `{}` not found in cluster `{cluster}`\nhint: `kops get instances --name {cluster}` lists its instances and their node names",
            a.target
        );
    };
    let id = member.id().to_string();
    match (&member.node, a.cloudonly) {
        (_, true) => print(&format!("Instance {id} found for deletion\n")),
        (Some(n), false) => print(&format!("Instance {id} ({}) found for deletion\n", n.name)),
        (None, false) => bail!(
            "instance {id} has no node in cluster `{cluster}`\nhint: use --cloudonly to delete it without the Kubernetes API"
        ),
    }
    if !a.yes {
        print("\nMust specify --yes to delete instance\n");
        return Ok(0);
    }

    let mut target = member.clone();
    target.status = InstanceStatus::NeedsUpdate;
    let mut surge = a.surge && !target.instance.detached;
    if surge && group.role() == kops_api::Role::ControlPlane {
        status("warning: cannot detach control-plane instances; assuming --surge=false");
        surge = false;
    }
    if group.instance_group.spec.manager.as_deref() == Some("Karpenter") {
        surge = false;
    }
    if target.instance.detached {
        target.status = InstanceStatus::Detached;
    }
    // The roller surges only with the Kubernetes API; without it, detach here.
    if surge && a.cloudonly {
        kops_aws::instances::detach_for_surge(&live.cloud, &group.name, &id).await?;
        status(&format!("[{}] detached {id}", group.ig_name()));
        target.status = InstanceStatus::Detached;
        target.instance.detached = true;
        surge = false;
    }
    let mut ig = group.instance_group.clone();
    let settings = ig.spec.rolling_update.get_or_insert_with(Default::default);
    settings.max_surge = Some(serde_json::json!(usize::from(surge)));
    settings.max_unavailable = Some(serde_json::json!(1));
    settings.drain_and_terminate = Some(true);
    let one = CloudGroup {
        instance_group: ig,
        name: group.name.clone(),
        min_size: group.min_size,
        target_size: group.target_size,
        max_size: group.max_size,
        ready: group.members().filter(|m| m.id() != id).cloned().collect(),
        need_update: vec![target],
    };
    let options = kops_roll::RollOptions {
        cloud_only: a.cloudonly,
        fail_on_drain_error: a.fail_on_drain_error,
        fail_on_validate_error: a.fail_on_validate_error,
        post_drain_delay: a.post_drain_delay,
        validation_timeout: a.validation_timeout,
        validate_count: a.validate_count,
        control_plane_interval: Duration::ZERO,
        node_interval: Duration::ZERO,
        bastion_interval: Duration::ZERO,
        validate_tick: a.validate_tick,
        validate_success_pause: a.validate_success_pause,
        ..Default::default()
    };
    let progress: kops_roll::Progress =
        std::sync::Arc::new(|event: &kops_roll::RollEvent| status(&event.to_string()));
    let roller = kops_roll::Roller {
        cluster_name: cluster.clone(),
        cluster: live.cluster,
        instance_groups: live.instance_groups,
        cloud: std::sync::Arc::new(kops_roll::AwsGroups {
            cloud: live.cloud,
            cluster: cluster.clone(),
        }),
        kube: kube.map(|(k, _)| std::sync::Arc::new(k) as std::sync::Arc<dyn Kubernetes>),
        options,
        progress: Some(progress),
    };
    std::sync::Arc::new(roller).run(vec![one]).await?;
    status(&format!(
        "Deleted instance {id}; group {} replaced it",
        group.name
    ));
    Ok(0)
}

// ---------------------------------------------------------------- delete -f

/// `kops delete -f FILE`: deletes every cluster and instance group the
/// files name (groups of a cluster deleted by the same files are skipped).
pub async fn delete_files(global: &GlobalArgs, files: &[PathBuf], yes: bool) -> Result<i32> {
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
                let args = DeleteArgs {
                    filenames: Vec::new(),
                    yes: false,
                    what: Some(DeleteCommand::Cluster {
                        cluster_name: Some(name.clone()),
                        yes,
                        unregister: false,
                        region: None,
                        count: 30,
                        interval: std::time::Duration::from_secs(10),
                    }),
                };
                Box::pin(crate::commands::delete(global, args)).await?;
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
                let args = DeleteArgs {
                    filenames: Vec::new(),
                    yes: false,
                    what: Some(DeleteCommand::Instancegroup {
                        group: ig.name().to_string(),
                        yes,
                    }),
                };
                Box::pin(crate::commands::delete(&g, args)).await?;
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

// ---------------------------------------------------------------- trust keypair

#[derive(Debug, Args)]
pub struct TrustArgs {
    #[command(subcommand)]
    pub what: TrustCommand,
}

#[derive(Debug, Subcommand)]
pub enum TrustCommand {
    /// Trust distrusted keypairs again (the reverse of `distrust keypair`).
    Keypair {
        /// The keyset (e.g. kubernetes-ca).
        #[arg(value_name = "KEYSET")]
        keyset: String,
        /// The keypairs' ids (`get keypairs --distrusted` lists them).
        #[arg(value_name = "ID", required = true)]
        ids: Vec<String>,
    },
}

pub async fn trust(global: &GlobalArgs, args: TrustArgs) -> Result<i32> {
    let TrustCommand::Keypair { keyset, ids } = args.what;
    let registry = state(global).await?;
    let cluster = cluster_name(&registry, global, None).await?;
    let done = kops_ops::pki::trust_keypair(&registry, &cluster, &keyset, &ids).await?;
    if done.is_empty() {
        status(&format!("The {keyset} keypairs named are already trusted"));
    }
    for id in done {
        print(&format!("Trusted {keyset} {id}\n"));
    }
    Ok(0)
}

// ---------------------------------------------------------------- upgrade cluster

#[derive(Debug, Args)]
pub struct UpgradeArgs {
    #[command(subcommand)]
    pub what: UpgradeCommand,
}

#[derive(Debug, Subcommand)]
pub enum UpgradeCommand {
    /// Propose the Kubernetes version (and images) the cluster's channel recommends; --yes stores them.
    Cluster(UpgradeClusterArgs),
}

#[derive(Debug, Args)]
pub struct UpgradeClusterArgs {
    #[arg(value_name = "CLUSTER")]
    pub cluster_name: Option<String>,
    /// Store the proposed changes (otherwise only show them).
    #[arg(short = 'y', long)]
    pub yes: bool,
    /// Channel to upgrade with: stable, alpha, or a channel file (path or file:// URL).
    #[arg(long, value_name = "CHANNEL")]
    pub channel: Option<String>,
    /// Kubernetes version to upgrade to (instead of the channel's recommendation).
    #[arg(long, value_name = "VERSION")]
    pub kubernetes_version: Option<String>,
}

/// The kops release whose channel data is compiled in: a minor upgrade is
/// proposed only up to its own minor version (as kops does).
const KOPS_VERSION: (u64, u64, u64) = (1, 37, 0);
/// kops' release is a pre-release of 1.37.0, so 1.37.0 itself is newer.
const KOPS_IS_PRERELEASE: bool = true;

/// `kubernetesVersions` of kops' `channels/stable` (`channels/alpha` has the
/// same list): the lowest version of each range and the recommended release.
const CHANNEL_KUBERNETES_VERSIONS: &[((u64, u64, u64), &str)] = &[
    ((1, 36, 0), "1.36.3"),
    ((1, 35, 0), "1.35.7"),
    ((1, 34, 0), "1.34.10"),
    ((1, 33, 0), "1.33.13"),
    ((1, 32, 0), "1.32.13"),
    ((1, 31, 0), "1.31.14"),
    ((1, 30, 0), "1.30.14"),
    ((1, 29, 0), "1.29.15"),
    ((1, 28, 0), "1.28.15"),
    ((1, 27, 0), "1.27.16"),
    ((1, 26, 0), "1.26.15"),
    ((1, 25, 0), "1.25.16"),
    ((1, 24, 0), "1.24.17"),
    ((1, 23, 0), "1.23.17"),
    ((1, 22, 0), "1.22.17"),
    ((1, 21, 0), "1.21.14"),
    ((1, 20, 0), "1.20.15"),
    ((1, 19, 0), "1.19.16"),
    ((1, 18, 0), "1.18.20"),
    ((1, 17, 0), "1.17.17"),
    ((1, 16, 0), "1.16.15"),
    ((1, 15, 0), "1.15.12"),
    ((1, 14, 0), "1.14.10"),
    ((1, 13, 0), "1.13.12"),
    ((1, 12, 0), "1.12.10"),
    ((1, 11, 0), "1.11.10"),
];

type Triple = (u64, u64, u64);

fn triple(v: &KubernetesVersion) -> Triple {
    (v.major, v.minor, v.patch)
}

/// One `kubernetesVersions` entry: a range and its recommended version.
struct VersionSpec {
    range: Vec<(String, Triple)>,
    recommended: String,
}

impl VersionSpec {
    fn matches(&self, v: Triple) -> bool {
        self.range.iter().all(|(op, bound)| match op.as_str() {
            ">=" => v >= *bound,
            ">" => v > *bound,
            "<=" => v <= *bound,
            "<" => v < *bound,
            _ => v == *bound,
        })
    }
}

/// Parses a semver range as kops' channels write them (`>=1.36.0`,
/// `>=1.4.0 <1.5.0`); pre-release suffixes of bounds are ignored.
fn parse_range(text: &str) -> Option<Vec<(String, Triple)>> {
    text.split_whitespace()
        .map(|part| {
            let op_len = part
                .chars()
                .take_while(|c| matches!(c, '<' | '>' | '='))
                .count();
            let (op, rest) = part.split_at(op_len);
            let v = KubernetesVersion::parse(rest)?;
            Some((op.to_string(), triple(&v)))
        })
        .collect()
}

/// The channel's Kubernetes versions: compiled in for `stable` and `alpha`,
/// read from the file for a path or `file://` URL.
fn channel_versions(channel: &str) -> Result<Vec<VersionSpec>> {
    let builtin = |_: ()| {
        CHANNEL_KUBERNETES_VERSIONS
            .iter()
            .map(|(low, rec)| VersionSpec {
                range: vec![(">=".to_string(), *low)],
                recommended: rec.to_string(),
            })
            .collect::<Vec<_>>()
    };
    let name = channel
        .trim_start_matches("https://raw.githubusercontent.com/kubernetes/kops/master/channels/");
    match name {
        "stable" | "alpha" => return Ok(builtin(())),
        _ => {}
    }
    let path = channel.strip_prefix("file://").unwrap_or(channel);
    if !(path.starts_with('/') || path.starts_with('.')) {
        bail!("channel `{channel}` is not known\nhint: use `stable`, `alpha`, or a channel file as a path or file:// URL");
    }
    let text = std::fs::read_to_string(path).map_err(|source| OpsError::ReadFile {
        path: path.to_string(),
        source,
    })?;
    let doc: serde_json::Value = serde_yaml_ng::from_str(&text)
        .map_err(|e| anyhow::anyhow!("channel file `{path}` is not YAML: {e}"))?;
    let mut out = Vec::new();
    for entry in doc
        .pointer("/spec/kubernetesVersions")
        .and_then(|v| v.as_array())
        .into_iter()
        .flatten()
    {
        let (Some(range), Some(rec)) = (
            entry.get("range").and_then(|r| r.as_str()),
            entry.get("recommendedVersion").and_then(|r| r.as_str()),
        ) else {
            continue;
        };
        let Some(range) = parse_range(range) else {
            bail!("channel file `{path}`: cannot read the range `{range}`");
        };
        out.push(VersionSpec {
            range,
            recommended: rec.to_string(),
        });
    }
    if out.is_empty() {
        bail!("channel file `{path}` lists no spec.kubernetesVersions\nhint: a channel file is kops' channel format (see kops' channels/stable)");
    }
    Ok(out)
}

fn find_spec(specs: &[VersionSpec], v: Triple) -> Option<&VersionSpec> {
    specs.iter().find(|s| s.matches(v))
}

/// The version kops proposes: the recommended release of the current
/// version's range, or of the next minor version when the compiled-in kops
/// release is at least that new; never a downgrade.
fn proposed_version(
    specs: &[VersionSpec],
    current: &KubernetesVersion,
) -> Option<KubernetesVersion> {
    let recommended = KubernetesVersion::parse(&find_spec(specs, triple(current))?.recommended)?;
    let mut proposed = recommended.clone();
    let next = (recommended.major, recommended.minor + 1, 0);
    let kops_ok = if KOPS_IS_PRERELEASE {
        next < KOPS_VERSION
    } else {
        next <= KOPS_VERSION
    };
    if kops_ok {
        if let Some(v) =
            find_spec(specs, next).and_then(|s| KubernetesVersion::parse(&s.recommended))
        {
            proposed = v;
        }
    }
    if triple(current) > triple(&proposed) {
        return Some(current.clone());
    }
    Some(proposed)
}

/// kops' test for images it may replace: those of the distributions its
/// channels name (a custom image is left alone).
fn upstream_image(image: &str) -> bool {
    [
        "kope.io/k8s-",
        "099720109477/ubuntu/images/hvm-ssd-gp3/ubuntu-noble-24.04-",
        "099720109477/ubuntu/images/hvm-ssd/ubuntu-jammy-22.04-",
        "099720109477/ubuntu/images/hvm-ssd/ubuntu-focal-20.04-",
    ]
    .iter()
    .any(|p| image.starts_with(p))
}

fn semver_text(v: &KubernetesVersion) -> String {
    v.to_string().trim_start_matches('v').to_string()
}

pub async fn upgrade(global: &GlobalArgs, args: UpgradeArgs) -> Result<i32> {
    let UpgradeCommand::Cluster(a) = args.what;
    let registry = state(global).await?;
    let name = cluster_name(&registry, global, a.cluster_name.as_deref()).await?;
    let mut cluster = kops_ops::require_cluster(&registry, &name).await?;
    let mut groups = registry.list_instance_groups(&name).await?;
    let current_channel = cluster.spec.channel.clone().unwrap_or_default();
    let channel = a
        .channel
        .clone()
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| {
            if current_channel.is_empty() {
                "stable".to_string()
            } else {
                current_channel.clone()
            }
        });
    let specs = channel_versions(&channel)?;
    // (item, property, old, new)
    let mut actions: Vec<[String; 4]> = Vec::new();
    if channel != current_channel {
        actions.push([
            "Cluster".into(),
            "Channel".into(),
            current_channel.clone(),
            channel.clone(),
        ]);
        cluster.spec.channel = Some(channel.clone());
    }
    let old_text = cluster.spec.kubernetes_version.clone().unwrap_or_default();
    let current = KubernetesVersion::parse(&old_text);
    if current.is_none() {
        status(&format!(
            "warning: cannot read the cluster's kubernetesVersion `{old_text}`"
        ));
    }
    let proposed = match &a.kubernetes_version {
        Some(v) => Some(KubernetesVersion::parse(v).ok_or_else(|| {
            kops_ops::flag_error(
                "--kubernetes-version",
                &format!("`{v}` is not a Kubernetes version"),
                "write e.g. `1.35.7`",
            )
        })?),
        None => current.as_ref().and_then(|c| {
            let p = proposed_version(&specs, c);
            if p.is_none() {
                status(&format!(
                    "warning: channel `{channel}` has no version information for Kubernetes {old_text}"
                ));
            }
            p
        }),
    };
    let proposed = match (&current, proposed) {
        (Some(c), Some(p)) if triple(c) > triple(&p) => Some(c.clone()),
        (_, p) => p,
    };
    if let (Some(c), Some(p)) = (&current, &proposed) {
        if c != p {
            let new = semver_text(p);
            actions.push([
                "Cluster".into(),
                "KubernetesVersion".into(),
                old_text.clone(),
                new.clone(),
            ]);
            cluster.spec.kubernetes_version = Some(new);
        }
    }
    let target = proposed.or(current);
    let mut changed_groups = Vec::new();
    if let Some(v) = &target {
        let cloud = cluster.spec.cloud_provider.clone().unwrap_or_default();
        for g in &mut groups {
            let arch = kops_api::new_cluster::machine_architecture(
                g.spec.machine_type.as_deref().unwrap_or_default(),
            );
            let Some(image) = kops_api::new_cluster::default_image(&cloud, v, arch) else {
                continue;
            };
            let old = g.spec.image.clone().unwrap_or_default();
            if (old.is_empty() || upstream_image(&old)) && old != image {
                actions.push([
                    format!("InstanceGroup/{}", g.name()),
                    "Image".into(),
                    old,
                    image.to_string(),
                ]);
                g.spec.image = Some(image.to_string());
                changed_groups.push(g.name().to_string());
            }
        }
    }
    if actions.is_empty() {
        status("\nNo upgrade required");
        return Ok(0);
    }
    let mut t = Table::new(&["ITEM", "PROPERTY", "OLD", "NEW"]);
    for row in &actions {
        t.row(row.to_vec());
    }
    print(&t.render());
    if !a.yes {
        print("\nMust specify --yes to perform upgrade\n");
        return Ok(0);
    }
    kops_ops::save_edited_cluster(&registry, &name, &to_yaml(&cluster)).await?;
    for g in groups
        .iter()
        .filter(|g| changed_groups.iter().any(|c| c == g.name()))
    {
        kops_ops::save_edited_instance_group(&registry, &name, g.name(), &to_yaml(g)).await?;
    }
    print(&format!(
        "\nUpdates applied to configuration.\nYou can now apply these changes, using `kops update cluster {name}`\n"
    ));
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(text: &str) -> KubernetesVersion {
        KubernetesVersion::parse(text).unwrap()
    }

    #[test]
    fn proposes_as_kops_stable_channel() {
        let specs = channel_versions("stable").unwrap();
        // Next minor when kops (1.37 pre-release) is at least that new.
        assert_eq!(
            semver_text(&proposed_version(&specs, &v("1.34.1")).unwrap()),
            "1.35.7"
        );
        assert_eq!(
            semver_text(&proposed_version(&specs, &v("1.35.0")).unwrap()),
            "1.36.3"
        );
        // 1.37.0 is newer than kops 1.37.0-alpha.1: stay on 1.36.
        assert_eq!(
            semver_text(&proposed_version(&specs, &v("1.36.0")).unwrap()),
            "1.36.3"
        );
        // Never a downgrade.
        assert_eq!(
            semver_text(&proposed_version(&specs, &v("1.36.9")).unwrap()),
            "1.36.9"
        );
    }

    #[test]
    fn ranges() {
        let r = parse_range(">=1.4.0 <1.5.0").unwrap();
        let s = VersionSpec {
            range: r,
            recommended: String::new(),
        };
        assert!(s.matches((1, 4, 7)));
        assert!(!s.matches((1, 5, 0)));
        assert!(channel_versions("beta").is_err());
    }
}
