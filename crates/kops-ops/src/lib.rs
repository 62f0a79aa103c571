//! kops' use cases: create, get, edit, replace and delete of clusters,
//! instance groups and SSH keys in the state store.
//!
//! Each operation validates everything before it writes anything, so a bad
//! input leaves the state store as it was. This crate never prints and never
//! exits: it returns values and [`OpsError`]s to the binary, which owns the
//! terminal. It depends on kops-api and kops-state only.

pub mod cloud;
pub mod clusterapi;
pub mod delete;
pub mod enroll;
mod error;
pub mod gcloud;
pub mod instance_selector;
pub mod kubeconfig;
pub mod kubectl_auth;
pub mod pki;
pub mod provider;
pub mod render;
pub mod spec;
pub mod update;
pub mod vsphere;

/// Whether kops' feature flag `name` is on in `KOPS_FEATURE_FLAGS`
/// (comma-separated; `Name` or `+Name` turns it on, `-Name` off).
pub fn feature_enabled(name: &str) -> bool {
    kops_api::env::feature_enabled(name)
}

use std::collections::BTreeSet;
use std::time::SystemTime;

pub use delete::{delete_cluster, DeleteOutcome, DeleteRequest};
pub use error::OpsError;
use kops_api::manifest::{parse_objects, Object};
use kops_api::new_cluster::{
    chosen_cloud, new_cluster, ExistingNetwork, NewCluster, NewClusterOptions,
};
use kops_api::validation::{self, FieldError};
use kops_api::{Cluster, InstanceGroup, Role};
/// Google's rate quotas as `KOPS_GCE_RATE_LIMITS` sets them (the binary
/// checks the setting before any command runs).
pub use kops_gce::rate_limits::RateLimits as GceRateLimits;
pub use kops_state::registry::{Registry, SshPublicKey};
pub use kops_state::Version;
pub use update::{update_cluster, UpdateOutcome, UpdateRequest, Updated};

/// Opens the state store named by `--state` / `KOPS_STATE_STORE`.
pub async fn open_state(url: Option<&str>) -> Result<Registry, OpsError> {
    let url = url
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .ok_or(OpsError::StateStoreNotSet)?;
    let store = kops_state::open(url)
        .await
        .map_err(|e| OpsError::Registry(e.into()))?;
    Ok(Registry::new(store))
}

/// The current time as kops writes `creationTimestamp`.
pub fn timestamp_now() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

fn stamp(meta: &mut kops_api::ObjectMeta) {
    if meta.creation_timestamp.is_none() {
        meta.creation_timestamp = Some(timestamp_now());
    }
}

/// Loads a cluster or fails with a hint.
pub async fn require_cluster(registry: &Registry, name: &str) -> Result<Cluster, OpsError> {
    registry
        .get_cluster(name)
        .await?
        .ok_or_else(|| OpsError::ClusterNotFound {
            name: name.to_string(),
            store: registry.store().base_url().to_string(),
        })
}

/// Picks the cluster to work on: the one named, or the only one in the store.
pub async fn resolve_cluster_name(
    registry: &Registry,
    name: Option<&str>,
) -> Result<String, OpsError> {
    if let Some(n) = name.filter(|n| !n.is_empty()) {
        return Ok(n.to_string());
    }
    let clusters = registry.list_clusters().await?;
    match clusters.as_slice() {
        [only] => Ok(only.name().to_string()),
        [] => Err(OpsError::ClusterNameRequired { known: Vec::new() }),
        many => Err(OpsError::ClusterNameRequired {
            known: many.iter().map(|c| c.name().to_string()).collect(),
        }),
    }
}

// ---------------------------------------------------------------- create cluster

/// What `create cluster` was asked to do besides the spec flags.
#[derive(Debug, Clone, Default)]
pub struct CreateClusterRequest {
    pub options: NewClusterOptions,
    /// The admin SSH public key's text, if one is to be stored.
    pub ssh_public_key: Option<String>,
    /// Build and return the spec, write nothing.
    pub dry_run: bool,
}

/// The result of `create cluster`.
#[derive(Debug, Clone)]
pub struct CreatedCluster {
    pub spec: NewCluster,
    pub ssh_key_id: Option<String>,
    /// The Google Cloud project taken from gcloud's configuration, when
    /// `--project` was not given.
    pub gcloud_project: Option<String>,
}

/// `kops create cluster`: builds the spec from flags, validates it, and (unless
/// a dry run) writes the cluster, its instance groups and the SSH key.
pub async fn create_cluster(
    registry: &Registry,
    request: CreateClusterRequest,
) -> Result<CreatedCluster, OpsError> {
    let mut options = request.options;
    if options.state_store.is_none() {
        options.state_store = Some(registry.store().base_url().to_string());
    }
    if options.existing_network.is_none() {
        options.existing_network = look_up_existing_network(&options).await?;
    }
    // As kops: without --project a GCE cluster uses gcloud's default project.
    let mut gcloud_project = None;
    if options.project.is_none() && chosen_cloud(&options).as_deref() == Some("gce") {
        gcloud_project = gcloud::default_project(&kops_api::env::process_env);
        options.project = gcloud_project.clone();
    }
    let mut spec = new_cluster(&options).map_err(OpsError::Flags)?;
    stamp(&mut spec.cluster.metadata);
    for ig in &mut spec.instance_groups {
        stamp(&mut ig.metadata);
    }
    validation::validate_all(&spec.cluster, &spec.instance_groups)?;
    let ssh_key_id = match &request.ssh_public_key {
        Some(text) => Some(kops_state::registry::ssh_fingerprint(text.trim())?),
        None => None,
    };
    if request.dry_run {
        return Ok(CreatedCluster {
            spec,
            ssh_key_id,
            gcloud_project,
        });
    }
    let name = spec.cluster.name().to_string();
    if registry.get_cluster(&name).await?.is_some() {
        return Err(OpsError::ClusterExists { name });
    }
    // Instance groups and keys first, the cluster's config last: a cluster
    // that `get` lists is always complete.
    for ig in &spec.instance_groups {
        registry.put_instance_group(&name, ig).await?;
    }
    if let Some(text) = &request.ssh_public_key {
        registry.add_ssh_public_key(&name, text).await?;
    }
    create_new_cluster(registry, &spec.cluster).await?;
    Ok(CreatedCluster {
        spec,
        ssh_key_id,
        gcloud_project,
    })
}

/// Writes a new cluster's config only if no one created it meanwhile (two
/// concurrent creates of one name: one wins, the other is told it exists).
async fn create_new_cluster(registry: &Registry, cluster: &Cluster) -> Result<(), OpsError> {
    match registry.create_cluster(cluster).await {
        Err(kops_state::registry::RegistryError::Store(
            kops_state::StoreError::AlreadyExists { .. },
        )) => Err(OpsError::ClusterExists {
            name: cluster.name().to_string(),
        }),
        other => Ok(other?),
    }
}

/// `--vpc` / `--subnets` / `--utility-subnets` name existing AWS resources:
/// their CIDRs and zones come from AWS (two Describe calls), as in kops.
async fn look_up_existing_network(
    options: &NewClusterOptions,
) -> Result<Option<ExistingNetwork>, OpsError> {
    let wants = options.network_id.is_some()
        || !options.subnet_ids.is_empty()
        || !options.utility_subnet_ids.is_empty();
    let cloud = options.cloud.as_deref().unwrap_or("aws");
    if !wants || cloud != "aws" {
        return Ok(None);
    }
    let zones = options.zones.iter().chain(&options.control_plane_zones);
    let Some(region) = zones.filter_map(|z| kops_api::zones::aws_region(z)).next() else {
        // new_cluster reports the missing zones.
        return Ok(None);
    };
    let cloud = kops_aws::AwsCloud::new(&region).await;
    let ids: Vec<String> = options
        .subnet_ids
        .iter()
        .chain(&options.utility_subnet_ids)
        .cloned()
        .collect();
    let network =
        kops_aws::describe_existing_network(&cloud, options.network_id.as_deref(), &ids).await?;
    tracing::info!(calls = cloud.calls().total(), vpc = %network.network_id, "looked up the existing network");
    Ok(Some(network))
}

// ---------------------------------------------------------------- create -f / replace

/// One object `create -f` or `replace -f` acted on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub kind: String,
    pub name: String,
    pub cluster: String,
    /// `created`, `replaced` or `unchanged`.
    pub action: &'static str,
}

/// The objects of a manifest, grouped by the cluster they belong to.
struct Plan {
    clusters: Vec<Cluster>,
    groups: Vec<(String, InstanceGroup)>,
    ssh_keys: Vec<(String, String)>,
    others: Vec<(String, serde_json::Value)>,
}

fn plan_manifest(objects: Vec<Object>, default_cluster: Option<&str>) -> Result<Plan, OpsError> {
    let mut plan = Plan {
        clusters: Vec::new(),
        groups: Vec::new(),
        ssh_keys: Vec::new(),
        others: Vec::new(),
    };
    let file_clusters: Vec<String> = objects
        .iter()
        .filter_map(|o| match o {
            Object::Cluster(c) => Some(c.name().to_string()),
            _ => None,
        })
        .collect();
    let owner = |label: Option<&str>, kind: &str, name: &str| -> Result<String, OpsError> {
        if let Some(l) = label.filter(|l| !l.is_empty()) {
            return Ok(l.to_string());
        }
        if let [only] = file_clusters.as_slice() {
            return Ok(only.clone());
        }
        if let Some(d) = default_cluster {
            return Ok(d.to_string());
        }
        Err(OpsError::NoClusterForObject {
            kind: kind.to_string(),
            name: name.to_string(),
        })
    };
    for object in objects {
        match object {
            Object::Cluster(c) => plan.clusters.push(*c),
            Object::InstanceGroup(ig) => {
                let cluster = owner(ig.cluster_label(), "InstanceGroup", ig.name())?;
                let mut ig = *ig;
                ig.metadata
                    .labels
                    .entry(kops_api::LABEL_CLUSTER_NAME.to_string())
                    .or_insert_with(|| cluster.clone());
                plan.groups.push((cluster, ig));
            }
            Object::SshCredential { name, public_key } => {
                let cluster = owner(None, "SSHCredential", &name)?;
                plan.ssh_keys.push((cluster, public_key));
            }
            Object::Other(v) => {
                let label = v
                    .pointer("/metadata/labels/kops.k8s.io~1cluster")
                    .and_then(|l| l.as_str())
                    .map(str::to_string);
                let kind = v
                    .get("kind")
                    .and_then(|k| k.as_str())
                    .unwrap_or("")
                    .to_string();
                let name = v
                    .pointer("/metadata/name")
                    .and_then(|k| k.as_str())
                    .unwrap_or("")
                    .to_string();
                let cluster = owner(label.as_deref(), &kind, &name)?;
                plan.others.push((cluster, v));
            }
        }
    }
    Ok(plan)
}

/// The cluster and groups a change results in, validated together.
async fn validate_result(
    registry: &Registry,
    cluster_name: &str,
    cluster: Option<&Cluster>,
    changed_groups: &[&InstanceGroup],
    removed_group: Option<&str>,
) -> Result<(), OpsError> {
    let stored;
    let cluster = match cluster {
        Some(c) => c,
        None => {
            stored = require_cluster(registry, cluster_name).await?;
            &stored
        }
    };
    let mut groups: Vec<InstanceGroup> = registry
        .list_instance_groups(cluster_name)
        .await?
        .into_iter()
        .filter(|g| Some(g.name()) != removed_group)
        .filter(|g| !changed_groups.iter().any(|c| c.name() == g.name()))
        .collect();
    groups.extend(changed_groups.iter().map(|g| (*g).clone()));
    validation::validate_all(cluster, &groups)?;
    Ok(())
}

/// `kops create -f` (`replace == false`) and `kops replace -f` (`replace == true`).
/// With `force`, replace creates what does not exist yet.
pub async fn apply_manifest(
    registry: &Registry,
    source_name: &str,
    text: &str,
    replace: bool,
    force: bool,
    default_cluster: Option<&str>,
) -> Result<Vec<Applied>, OpsError> {
    let objects = parse_objects(source_name, text)?;
    if objects.is_empty() {
        return Err(OpsError::EmptyManifest {
            source_name: source_name.to_string(),
        });
    }
    let mut plan = plan_manifest(objects, default_cluster)?;

    // Check every object before writing any.
    let mut applied = Vec::new();
    let mut seen = BTreeSet::new();
    for c in &mut plan.clusters {
        let name = c.name().to_string();
        if !seen.insert(("Cluster", name.clone())) {
            return Err(OpsError::Duplicate {
                kind: "Cluster".into(),
                name,
            });
        }
        let existing = registry.get_cluster(&name).await?;
        let action = match (&existing, replace) {
            (Some(_), false) => return Err(OpsError::ClusterExists { name }),
            (None, true) if !force => {
                return Err(OpsError::ClusterNotFound {
                    name,
                    store: registry.store().base_url().to_string(),
                })
            }
            (Some(old), true) => {
                if c.metadata.creation_timestamp.is_none() {
                    c.metadata.creation_timestamp = old.metadata.creation_timestamp.clone();
                }
                if old == c {
                    "unchanged"
                } else {
                    "replaced"
                }
            }
            (None, _) => "created",
        };
        stamp(&mut c.metadata);
        applied.push(Applied {
            kind: "Cluster".into(),
            name: name.clone(),
            cluster: name,
            action,
        });
    }
    for (cluster, ig) in &mut plan.groups {
        let name = ig.name().to_string();
        if !seen.insert(("InstanceGroup", format!("{cluster}/{name}"))) {
            return Err(OpsError::Duplicate {
                kind: "InstanceGroup".into(),
                name,
            });
        }
        let cluster_in_file = plan.clusters.iter().any(|c| c.name() == cluster.as_str());
        let existing = if cluster_in_file && !replace {
            None
        } else {
            registry.get_instance_group(cluster, &name).await?
        };
        let action = match (&existing, replace) {
            (Some(_), false) => {
                return Err(OpsError::InstanceGroupExists {
                    cluster: cluster.clone(),
                    name,
                })
            }
            (None, true) if !force => {
                return Err(OpsError::InstanceGroupNotFound {
                    cluster: cluster.clone(),
                    name,
                })
            }
            (Some(old), true) => {
                if ig.metadata.creation_timestamp.is_none() {
                    ig.metadata.creation_timestamp = old.metadata.creation_timestamp.clone();
                }
                if old == ig {
                    "unchanged"
                } else {
                    "replaced"
                }
            }
            (None, _) => "created",
        };
        stamp(&mut ig.metadata);
        applied.push(Applied {
            kind: "InstanceGroup".into(),
            name,
            cluster: cluster.clone(),
            action,
        });
    }
    for (cluster, key) in &plan.ssh_keys {
        kops_state::registry::ssh_fingerprint(key)?;
        applied.push(Applied {
            kind: "SSHCredential".into(),
            name: "admin".into(),
            cluster: cluster.clone(),
            action: "created",
        });
    }

    // Validate each affected cluster with its resulting set of groups.
    let mut affected: BTreeSet<String> =
        plan.clusters.iter().map(|c| c.name().to_string()).collect();
    affected.extend(plan.groups.iter().map(|(c, _)| c.clone()));
    affected.extend(plan.ssh_keys.iter().map(|(c, _)| c.clone()));
    affected.extend(plan.others.iter().map(|(c, _)| c.clone()));
    for cluster_name in &affected {
        let in_file = plan
            .clusters
            .iter()
            .find(|c| c.name() == cluster_name.as_str());
        let groups: Vec<&InstanceGroup> = plan
            .groups
            .iter()
            .filter(|(c, _)| c == cluster_name)
            .map(|(_, g)| g)
            .collect();
        match in_file {
            // A new cluster is checked with the groups that come with it; its
            // groups may also be created later.
            Some(c) if !replace => {
                let owned: Vec<InstanceGroup> = groups.iter().map(|g| (*g).clone()).collect();
                validation::validate_all(c, &owned)?;
            }
            _ => validate_result(registry, cluster_name, in_file, &groups, None).await?,
        }
    }

    // Write: groups, keys and extra objects first, each cluster's config last.
    for (cluster, ig) in &plan.groups {
        registry.put_instance_group(cluster, ig).await?;
    }
    for (cluster, key) in &plan.ssh_keys {
        registry.add_ssh_public_key(cluster, key).await?;
    }
    let mut extra_by_cluster: std::collections::BTreeMap<&str, Vec<serde_json::Value>> =
        Default::default();
    for (cluster, v) in &plan.others {
        extra_by_cluster
            .entry(cluster.as_str())
            .or_default()
            .push(v.clone());
    }
    for (cluster, values) in extra_by_cluster {
        let mut all = if replace {
            Vec::new()
        } else {
            registry.additional_objects(cluster).await?
        };
        all.extend(values);
        registry.put_additional_objects(cluster, &all).await?;
        applied.push(Applied {
            kind: "additional objects".into(),
            name: "default".into(),
            cluster: cluster.to_string(),
            action: if replace { "replaced" } else { "created" },
        });
    }
    for c in &plan.clusters {
        if replace {
            registry.put_cluster(c).await?;
        } else {
            create_new_cluster(registry, c).await?;
        }
    }
    Ok(applied)
}

// ---------------------------------------------------------------- instance groups

/// `kops create instancegroup`.
#[derive(Debug, Clone)]
pub struct NewInstanceGroup {
    pub cluster: String,
    pub name: String,
    pub role: Role,
    /// Subnet names; all of the cluster's non-utility subnets when empty.
    pub subnets: Vec<String>,
    /// `--zone`: the group's `spec.zones`.
    pub zones: Vec<String>,
    pub dry_run: bool,
}

/// Builds a new instance group the way kops does: the cluster's defaults
/// for image and machine type, sizes by role.
pub async fn create_instance_group(
    registry: &Registry,
    request: NewInstanceGroup,
) -> Result<InstanceGroup, OpsError> {
    let cluster = require_cluster(registry, &request.cluster).await?;
    if registry
        .get_instance_group(&request.cluster, &request.name)
        .await?
        .is_some()
    {
        return Err(OpsError::InstanceGroupExists {
            cluster: request.cluster,
            name: request.name,
        });
    }
    let existing = registry.list_instance_groups(&request.cluster).await?;
    let mut ig = kops_api::defaults::default_instance_group(
        &cluster,
        &existing,
        &request.name,
        request.role,
        &request.subnets,
    )
    .map_err(OpsError::Flags)?;
    if !request.zones.is_empty() {
        ig.spec.zones = Some(request.zones.clone());
    }
    stamp(&mut ig.metadata);
    validate_result(registry, &request.cluster, Some(&cluster), &[&ig], None).await?;
    if !request.dry_run {
        registry.put_instance_group(&request.cluster, &ig).await?;
    }
    Ok(ig)
}

/// What `delete instancegroup` removes (or would remove).
#[derive(Debug, Clone)]
pub struct DeletedInstanceGroup {
    pub group: InstanceGroup,
    pub deleted: bool,
}

/// `kops delete instancegroup`: refuses to leave the cluster invalid (for
/// example an etcd member without its group).
pub async fn delete_instance_group(
    registry: &Registry,
    cluster: &str,
    name: &str,
    yes: bool,
) -> Result<DeletedInstanceGroup, OpsError> {
    let group = registry
        .get_instance_group(cluster, name)
        .await?
        .ok_or_else(|| OpsError::InstanceGroupNotFound {
            cluster: cluster.to_string(),
            name: name.to_string(),
        })?;
    let owner = require_cluster(registry, cluster).await?;
    let members: Vec<String> = owner
        .spec
        .etcd_clusters
        .iter()
        .flatten()
        .flat_map(|e| {
            e.etcd_members
                .iter()
                .filter(|m| m.instance_group.as_deref() == Some(name))
                .map(move |m| format!("{}/{}", e.name, m.name))
        })
        .collect();
    if !members.is_empty() {
        return Err(OpsError::GroupRunsEtcd {
            name: name.to_string(),
            members,
        });
    }
    validate_result(registry, cluster, Some(&owner), &[], Some(name)).await?;
    if yes {
        registry.delete_instance_group(cluster, name).await?;
    }
    Ok(DeletedInstanceGroup {
        group,
        deleted: yes,
    })
}

// ---------------------------------------------------------------- edit

/// The outcome of applying an edited document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EditOutcome {
    Saved,
    Unchanged,
}

/// Applies an edited cluster document: same name, valid with its groups.
/// The stored cluster is replaced only if no one changed it since it was
/// read here.
pub async fn save_edited_cluster(
    registry: &Registry,
    name: &str,
    text: &str,
) -> Result<EditOutcome, OpsError> {
    let (original, read_at) = require_cluster_versioned(registry, name).await?;
    save_edited_cluster_over(registry, name, &original, &read_at, text).await
}

/// [`save_edited_cluster`] over the cluster as the caller read it (before
/// opening an editor, say): if another writer saved it since `read_at`, the
/// edit fails with a conflict instead of dropping their update.
pub async fn save_edited_cluster_over(
    registry: &Registry,
    name: &str,
    original: &Cluster,
    read_at: &Version,
    text: &str,
) -> Result<EditOutcome, OpsError> {
    let edited: Cluster = kops_api::manifest::parse_one("edited cluster", text)?;
    if edited.name() != name {
        return Err(OpsError::Rename {
            kind: "cluster".into(),
            from: name.to_string(),
            to: edited.name().to_string(),
        });
    }
    if edited == *original {
        return Ok(EditOutcome::Unchanged);
    }
    validate_result(registry, name, Some(&edited), &[], None).await?;
    registry.replace_cluster(&edited, read_at).await?;
    Ok(EditOutcome::Saved)
}

/// The cluster with the version it was read at, or "not found".
pub async fn require_cluster_versioned(
    registry: &Registry,
    name: &str,
) -> Result<(Cluster, Version), OpsError> {
    registry
        .get_cluster_versioned(name)
        .await?
        .ok_or_else(|| OpsError::ClusterNotFound {
            name: name.to_string(),
            store: registry.store().base_url().to_string(),
        })
}

/// The instance group with the version it was read at, or "not found".
pub async fn require_instance_group_versioned(
    registry: &Registry,
    cluster: &str,
    name: &str,
) -> Result<(InstanceGroup, Version), OpsError> {
    registry
        .get_instance_group_versioned(cluster, name)
        .await?
        .ok_or_else(|| OpsError::InstanceGroupNotFound {
            cluster: cluster.to_string(),
            name: name.to_string(),
        })
}

/// Applies an edited instance-group document (replaced only if unchanged
/// since it was read here).
pub async fn save_edited_instance_group(
    registry: &Registry,
    cluster: &str,
    name: &str,
    text: &str,
) -> Result<EditOutcome, OpsError> {
    let (original, read_at) = require_instance_group_versioned(registry, cluster, name).await?;
    save_edited_instance_group_over(registry, cluster, name, &original, &read_at, text).await
}

/// [`save_edited_instance_group`] over the group as the caller read it.
pub async fn save_edited_instance_group_over(
    registry: &Registry,
    cluster: &str,
    name: &str,
    original: &InstanceGroup,
    read_at: &Version,
    text: &str,
) -> Result<EditOutcome, OpsError> {
    let edited: InstanceGroup = kops_api::manifest::parse_one("edited instance group", text)?;
    if edited.name() != name {
        return Err(OpsError::Rename {
            kind: "instance group".into(),
            from: name.to_string(),
            to: edited.name().to_string(),
        });
    }
    if edited == *original {
        return Ok(EditOutcome::Unchanged);
    }
    validate_result(registry, cluster, None, &[&edited], None).await?;
    registry
        .replace_instance_group(cluster, &edited, read_at)
        .await?;
    Ok(EditOutcome::Saved)
}

// ---------------------------------------------------------------- ssh keys

/// `kops create sshpublickey`.
pub async fn add_ssh_public_key(
    registry: &Registry,
    cluster: &str,
    text: &str,
) -> Result<String, OpsError> {
    require_cluster(registry, cluster).await?;
    Ok(registry.add_ssh_public_key(cluster, text).await?)
}

/// `kops delete cluster --unregister`: removes the cluster from the state
/// store only. Returns how many objects were removed.
pub async fn unregister_cluster(registry: &Registry, cluster: &str) -> Result<usize, OpsError> {
    require_cluster(registry, cluster).await?;
    Ok(registry.delete_cluster_state(cluster).await?)
}

/// Flags that name no cluster object are reported through this.
pub fn flag_error(flag: &str, message: &str, hint: &str) -> OpsError {
    OpsError::Flags(vec![FieldError::new(flag, message).hint(hint)])
}
