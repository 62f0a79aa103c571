//! `kops update cluster` on GCE: kops-gce's graph applied directly through
//! Google's APIs (or compared, in a dry run), with the state-store files
//! nodes read written first, as on AWS. `--instance-group` and
//! `--instance-group-roles` leave other groups' instance templates (and
//! what is made from them) out of the run and their node configs as they
//! are; `--phase` gives each kind kops' GCE lifecycle
//! ([`options::gce_lifecycles`]); `--lifecycle-overrides` as on AWS.

use std::sync::Arc;

use kops_engine::{Completed, Executor, ExecutorOptions, Mode};
use kops_model::Model;

use super::options;
use super::request::{BoxedProgress, UpdateOutcome, UpdateRequest};
use crate::{OpsError, Registry};

/// The GCE update; `cluster` is the stored spec, its instance groups
/// validated by the caller.
pub(crate) async fn update(
    registry: &Registry,
    request: UpdateRequest,
    cluster: kops_api::Cluster,
    groups: Vec<kops_api::InstanceGroup>,
) -> Result<UpdateOutcome, OpsError> {
    let region = crate::cloud::spec::gce_region(&cluster)?;
    let project = crate::cloud::spec::gce_project(&cluster)?;
    let nodeup = super::nodeup::resolve_from_environment(registry, &cluster, &groups).await?;
    let keys = registry.list_ssh_public_keys(&request.cluster).await?;
    let config_base = cluster
        .spec
        .config_base
        .clone()
        .unwrap_or_else(|| registry.config_base(&request.cluster));
    if request.apply {
        crate::pki::ensure_cluster_pki(registry, &cluster).await?;
        nodeup.upload(registry).await?;
    }
    let mut node_inputs = crate::pki::node_inputs(registry, &cluster, &groups).await?;
    node_inputs.nodeup = Some(nodeup.sources.clone());
    node_inputs.base_url_images = nodeup.images.clone();
    let resolved = crate::render::gce::resolved(&cluster, &groups)?;
    let mut warnings = kops_api::validation::warnings(&resolved);
    let opts = &request.options;
    let cloud =
        kops_gce::cloud::GceCloud::new(&project, &region).map_err(|e| OpsError::CannotApply {
            cluster: cluster.name().to_string(),
            reason: e.to_string(),
        })?;
    let cloud = Arc::new(cloud);
    let ctx = Arc::new(kops_gce::GceContext {
        project: project.clone(),
        region: region.clone(),
        cloud: Some(cloud.clone()),
    });
    // The model without node inputs; each use below lends it the inputs
    // of its moment (before and after the API's addresses are known).
    let bare = Model {
        cluster: &resolved,
        groups: &groups,
        ssh_public_key: keys.first().map(|k| k.public_key.as_str()),
        node_inputs: None,
        account_id: None,
        config_base: &config_base,
    };
    let (probe, address_names) = {
        let model = Model {
            node_inputs: Some(&node_inputs),
            ..bare.clone()
        };
        let gce = kops_gce::GceModel {
            model: &model,
            project: &project,
            region: &region,
        };
        (
            kops_gce::build(&gce)?,
            kops_gce::model::api_server_address_names(&gce),
        )
    };
    let kinds: Vec<&'static str> = probe.iter().map(|(k, _)| k.kind).collect();
    let lifecycles =
        options::gce_lifecycles(kinds, opts.phase, &opts.lifecycle_overrides, !request.apply);
    let mut executor = Executor::new(ExecutorOptions::default()).with_lifecycles(lifecycles);
    if let Some(p) = request.progress {
        executor = executor.with_progress(BoxedProgress(p));
    }
    // The API's well-known addresses go into node configs, as kops reads
    // them once they exist (control-plane certificates name them; without
    // DNS, workers reach kops-controller at the internal ones). For new
    // addresses the apply runs in two parts: first all but the instance
    // templates (whose user data pins the node configs), then the rest
    // with the addresses, taking over what the first part did.
    let read_addresses = || async {
        cloud
            .addresses(&address_names)
            .await
            .map_err(|e| OpsError::CannotApply {
                cluster: cluster.name().to_string(),
                reason: format!("reading the API's addresses: {e}"),
            })
    };
    let mut api_server_addresses = read_addresses().await?;
    let mut earlier = Completed::new();
    if request.apply && api_server_addresses.is_empty() && !address_names.is_empty() {
        let first = probe.without(|k| k.kind == "InstanceTemplate")?;
        let (_, done) = executor
            .run_after(&first, ctx.clone(), Mode::Apply, &Completed::new())
            .await?;
        earlier = done;
        api_server_addresses = read_addresses().await?;
    }
    node_inputs.api_server_addresses = api_server_addresses;
    let model = Model {
        node_inputs: Some(&node_inputs),
        ..bare
    };
    let graph = kops_gce::build(&kops_gce::GceModel {
        model: &model,
        project: &project,
        region: &region,
    })?;
    // Groups not selected: their templates, and the managed groups (and
    // what uses those) made from them, are not in the run.
    let selected: Vec<String> = options::select_groups(
        groups.clone(),
        &opts.instance_groups,
        &opts.instance_group_roles,
    )
    .iter()
    .map(|g| g.name().to_string())
    .collect();
    let left_out: Vec<&str> = groups
        .iter()
        .map(|g| g.name())
        .filter(|g| !selected.iter().any(|s| s == g))
        .collect();
    let left_out_templates: Vec<String> = left_out
        .iter()
        .map(|g| kops_gce::names::safe_object_name(g, cluster.name()))
        .collect();
    let graph = if left_out.is_empty() {
        graph
    } else {
        graph.without(|k| k.kind == "InstanceTemplate" && left_out_templates.contains(&k.name))?
    };
    for kind in opts.lifecycle_overrides.keys() {
        if !graph.iter().any(|(key, _)| key.kind == kind.as_str()) {
            warnings.push(format!(
                "--lifecycle-overrides: no task of kind `{kind}` in this cluster (kops matches task type names exactly, e.g. `FirewallRule`)"
            ));
        }
    }
    // The files nodes read (node configs, the completed spec...), in the
    // store before any instance can boot; phases other than `cluster`
    // leave them alone (kops' managed files are cluster-phase tasks), and
    // only the selected groups' node configs are written.
    let writes_files = matches!(opts.phase, None | Some(options::Phase::Cluster));
    let files = if writes_files {
        crate::render::files::neutral_files(&model, &resolved).map_err(|e| {
            OpsError::CannotApply {
                cluster: cluster.name().to_string(),
                reason: e.to_string(),
            }
        })?
    } else {
        Vec::new()
    };
    let of_left_out_group = |path: &str| {
        let parts: Vec<&str> = path.split('/').collect();
        matches!(parts.as_slice(), ["igconfig", _, group, ..] if left_out.contains(group))
    };
    // The completed spec and the node configs here; the other files
    // (addons, channel, etcd and static manifests, kops-version.txt) as
    // on AWS: in kops' bytes, and kops' kops-controller addon kept while
    // the nodes boot kops' nodeup (see `state_files`).
    let mut state_files = Vec::new();
    for file in files.iter().filter(|f| {
        f.base.is_none()
            && !of_left_out_group(&f.path)
            && (f.name == "cluster-completed.spec" || f.path.starts_with("igconfig/"))
    }) {
        let key = format!("{}/{}", request.cluster, file.path);
        let current = registry
            .store()
            .read(&key)
            .await
            .map_err(|e| OpsError::Registry(e.into()))?;
        if current.as_deref() == Some(&file.contents[..]) {
            continue;
        }
        state_files.push(format!(
            "{} ({})",
            file.path,
            if current.is_some() { "changed" } else { "new" }
        ));
        if request.apply {
            registry
                .store()
                .write(&key, &file.contents, kops_state::WriteOptions::default())
                .await
                .map_err(|e| OpsError::Registry(e.into()))?;
        }
    }
    if writes_files {
        let host_controller = nodeup.sources.state_store_prefix.is_some();
        let writes = super::state_files::plan(registry, &model, host_controller).await?;
        if request.apply {
            super::state_files::write(registry, model.name(), &writes).await?;
        }
        state_files.extend(writes.iter().map(|w| w.describe()));
    }
    let mode = if request.apply {
        Mode::Apply
    } else {
        Mode::DryRun
    };
    let (report, _) = executor.run_after(&graph, ctx, mode, &earlier).await?;
    if request.apply {
        registry
            .put_completed_spec(&crate::spec::completed_spec(&cluster, &config_base))
            .await?;
    }
    Ok(UpdateOutcome {
        report,
        calls: cloud.calls(),
        limits: cloud.limit_waits(),
        provider: "Google Cloud",
        region,
        tasks: graph.len(),
        longest_chain: graph.longest_chain()?,
        warnings,
        state_files,
    })
}
