//! `kops update cluster` on AWS: kops-aws' graph compared with what exists
//! in AWS and (with `--yes`) applied, the state-store files nodes read
//! written first, the IRSA discovery documents published.

use std::sync::Arc;

use kops_api::validation;
use kops_aws::{AwsCloud, AwsContext};
use kops_engine::{Completed, Executor, ExecutorOptions, Mode};
use kops_model::Model;

use super::request::{BoxedProgress, UpdateOutcome, UpdateRequest};
use super::{api_addresses, classic, nodeup, options, prefetch, state_files};
use crate::{OpsError, Registry};

/// The AWS update; `cluster` is the stored spec, its instance groups
/// validated by the caller ([`super::prepare`]).
pub(crate) async fn update(
    registry: &Registry,
    request: UpdateRequest,
    cluster: kops_api::Cluster,
    groups: Vec<kops_api::InstanceGroup>,
) -> Result<UpdateOutcome, OpsError> {
    let opts = &request.options;
    let selected: Vec<String> = options::select_groups(
        groups.clone(),
        &opts.instance_groups,
        &opts.instance_group_roles,
    )
    .iter()
    .map(|g| g.name().to_string())
    .collect();
    // Phases other than `cluster` leave the files nodes read alone (kops'
    // managed files are cluster-phase tasks).
    let writes_files = matches!(opts.phase, None | Some(options::Phase::Cluster));
    // Where nodes get nodeup, before anything is written: a group whose
    // architecture has none stops the update here.
    let nodeup = nodeup::resolve_from_environment(registry, &cluster, &groups).await?;
    let region = crate::cloud::spec::aws_region(&cluster)?;
    let keys = registry.list_ssh_public_keys(&request.cluster).await?;
    let config_base = cluster
        .spec
        .config_base
        .clone()
        .unwrap_or_else(|| registry.config_base(&request.cluster));
    let cloud = AwsCloud::new(&region).await;
    // The API access kops' populate step defaults (a private control plane
    // without `spec.api` gets its load balancer), then the zone.
    let populated = kops_api::populate::with_api_access(&cluster, Some(&groups));
    let (modelled, retire_classic) = tokio::join!(
        with_resolved_zone(&cloud, &populated),
        classic::may_remain(registry, &request.cluster)
    );
    let (modelled, retire_classic) = (modelled?, retire_classic?);
    let new_context = || {
        Arc::new(AwsContext::new(
            cloud.clone(),
            request.cluster.clone(),
            cluster.spec.cloud_labels.clone().unwrap_or_default(),
        ))
    };
    let ctx = new_context();
    // The account (addons name it: queue URLs, IRSA role ARNs) and the
    // listings the tasks read start now, under the key generation below.
    let account = tokio::spawn({
        let cloud = cloud.clone();
        async move { cloud.account_id().await }
    });
    prefetch::start(
        &ctx,
        &Model {
            cluster: &modelled,
            groups: &groups,
            ssh_public_key: keys.first().map(|k| k.public_key.as_str()),
            node_inputs: None,
            account_id: None,
            config_base: &config_base,
        },
    )?;
    // The keys and the node inputs they give (key generation is CPU work,
    // off the runtime's thread) and the nodeup upload, under the cloud
    // work below.
    let keys_and_nodeup = async {
        if request.apply {
            // The CA keysets and secrets first: nodes' bootstrap reads them.
            crate::pki::ensure_cluster_pki(registry, &cluster).await?;
            // nodeup before the launch templates that pin it.
            nodeup.upload(registry).await?;
        }
        let mut inputs = crate::pki::node_inputs(registry, &cluster, &groups).await?;
        inputs.nodeup = Some(nodeup.sources.clone());
        inputs.base_url_images = nodeup.images.clone();
        Ok::<_, OpsError>(inputs)
    };
    let account_id = account
        .await
        .map_err(|e| OpsError::Account {
            reason: e.to_string(),
        })?
        .map_err(|reason| OpsError::Account { reason })?;
    let mut executor = Executor::new(ExecutorOptions::default());
    let lifecycle_overrides = opts.lifecycle_overrides.clone();
    if let Some(p) = request.progress {
        executor = executor.with_progress(BoxedProgress(p));
    }
    let ssh_public_key = keys.first().map(|k| k.public_key.as_str());
    // What the model needs of the node inputs before the keys exist: all
    // but the keysets (the IAM policies name where nodeup lives).
    let mut early_inputs = crate::pki::node_inputs_without_keys(&groups);
    early_inputs.nodeup = Some(nodeup.sources.clone());
    early_inputs.base_url_images = nodeup.images.clone();
    let probe = Model {
        cluster: &modelled,
        groups: &groups,
        ssh_public_key,
        node_inputs: Some(&early_inputs),
        account_id: Some(&account_id),
        config_base: &config_base,
    };
    // Nodes that run the API server name the API load balancer's addresses
    // (read from the run's listing), which kops reads once the balancer
    // exists. For a new balancer, the apply runs in two parts: first
    // everything the node configs do not shape (all but the launch
    // templates and what needs them), beside the key generation; then,
    // with the balancer's addresses in the node configs, the rest, taking
    // over what the first part did. The first apply then ends with kops'
    // node configs, and time follows the dependency chain.
    // Every kind the model makes, for the phase's lifecycles.
    let kinds: Vec<&'static str> = match opts.phase {
        Some(_) => kops_aws::model::build(&probe)?
            .iter()
            .map(|(k, _)| k.kind)
            .collect(),
        None => Vec::new(),
    };
    let lifecycles = options::lifecycles(kinds, opts.phase, &lifecycle_overrides, !request.apply);
    let executor = executor.with_lifecycles(lifecycles);
    let mut api_server_addresses = api_addresses::api_server_addresses(&ctx, &probe).await?;
    let mut earlier = Completed::new();
    let node_inputs = if request.apply
        && api_server_addresses.is_empty()
        && api_addresses::has_api_load_balancer(&probe)
    {
        let whole = kops_aws::model::build(&probe)?;
        let first = api_addresses::before_node_configs(&whole)?;
        let nothing = Completed::new();
        let (run, inputs) = tokio::join!(
            executor.run_after(&first, ctx.clone(), Mode::Apply, &nothing),
            keys_and_nodeup
        );
        let (_, done) = run?;
        api_server_addresses = api_addresses::created_addresses(&ctx, &probe, &done).await?;
        earlier = done;
        inputs?
    } else {
        keys_and_nodeup.await?
    };
    let spec_version = cluster
        .spec
        .kubernetes_version
        .as_deref()
        .unwrap_or_default();
    let kubelet_version = opts
        .control_plane_running_version
        .clone()
        .filter(|running| !running.is_empty() && !spec_version.ends_with(running.as_str()));
    let node_inputs = kops_nodeup::config::NodeInputs {
        api_server_addresses,
        kubelet_version,
        ..node_inputs
    };
    let model = Model {
        node_inputs: Some(&node_inputs),
        ..probe.clone()
    };
    let graph = if retire_classic {
        kops_aws::model::build_retiring_classic(&model)?
    } else {
        kops_aws::model::build(&model)?
    };
    // Other groups' launch templates and autoscaling groups (and what
    // hangs on them) are not in the run.
    let left_out: Vec<String> = groups
        .iter()
        .filter(|g| !selected.iter().any(|s| s == g.name()))
        .map(|g| kops_model::compute::group_name(&model, g))
        .collect();
    let graph = if left_out.is_empty() {
        graph
    } else {
        graph.without(|k| {
            matches!(k.kind, "LaunchTemplate" | "AutoscalingGroup") && left_out.contains(&k.name)
        })?
    };
    let unknown: Vec<&String> = lifecycle_overrides
        .keys()
        .filter(|k| !graph.iter().any(|(key, _)| key.kind == k.as_str()))
        .collect();
    let mut warnings = validation::warnings(&modelled);
    for k in unknown {
        warnings.push(format!(
            "--lifecycle-overrides: no task of kind `{k}` in this cluster (kops matches task type names exactly, e.g. `SecurityGroup`)"
        ));
    }
    if request.apply && writes_files {
        publish_irsa_and_karpenter_files(registry, &cluster, &model, &region, &config_base).await?;
        // The node configs the launch templates' user data pin by hash,
        // stored before any instance can boot and ask for them.
        for node in kops_model::compute::node_configs(&model)?
            .into_iter()
            .filter(|n| selected.contains(&n.group))
        {
            registry
                .put_nodeup_config(
                    &request.cluster,
                    node.role,
                    &node.group,
                    node.yaml.as_bytes(),
                )
                .await?;
        }
    }
    let file_writes = if writes_files {
        // Control-plane nodes boot kops-rs' own nodeup (and with it its
        // host kops-controller): kops' kops-controller DaemonSet, if kept,
        // must stay off them.
        let host_controller = nodeup.sources.state_store_prefix.is_some();
        state_files::plan(registry, &model, host_controller).await?
    } else {
        Vec::new()
    };
    if request.apply {
        state_files::write(registry, model.name(), &file_writes).await?;
    }

    let mode = if request.apply {
        Mode::Apply
    } else {
        Mode::DryRun
    };
    let (report, _) = executor.run_after(&graph, ctx, mode, &earlier).await?;
    // Only a finished apply gets here (a failed task is an error above):
    // after a failed one the last finished spec stays, so the next run
    // still sees what may need retiring (a Classic ELB) and tries again.
    if request.apply {
        // kops' completed spec names the hosted zone found for the cluster
        // when the user's names none, and the API access the model built.
        let mut input = populated.clone();
        if input.spec.dns_zone.is_none() {
            input.spec.dns_zone = modelled.spec.dns_zone.clone();
        }
        registry
            .put_completed_spec(&crate::spec::completed_spec(&input, &config_base))
            .await?;
    }
    Ok(UpdateOutcome {
        report,
        calls: cloud.calls().snapshot(),
        limits: cloud.limit_waits(),
        provider: "AWS",
        region,
        tasks: graph.len(),
        longest_chain: graph.longest_chain()?,
        warnings,
        state_files: file_writes.iter().map(|w| w.describe()).collect(),
    })
}

/// The cluster as the model sees it: when it publishes its names in Route
/// 53, `spec.dnsZone` holds the hosted zone's id, looked up once here (by
/// id, by name, or as the longest zone suffix of the cluster name), so the
/// API records and the IAM policies name the zone itself.
async fn with_resolved_zone(
    cloud: &AwsCloud,
    cluster: &kops_api::Cluster,
) -> Result<kops_api::Cluster, OpsError> {
    let mut modelled = cluster.clone();
    let probe = Model::of_cluster(cluster);
    if !probe.publishes_dns_records() {
        return Ok(modelled);
    }
    let private = probe.dns_type() == "Private";
    let found = kops_aws::dns::find_hosted_zone(
        cloud,
        cluster.name(),
        cluster.spec.dns_zone.as_deref(),
        private,
    )
    .await;
    match found {
        Ok(zone) => modelled.spec.dns_zone = Some(zone.id),
        // Without API records to write, a missing zone only means the IAM
        // policies name no zone for dns-controller (as before the look-up).
        Err(kops_aws::dns::ZoneError::NotFound { .. }) if !kops_model::dns::needs_zone(&probe) => {}
        Err(e) => {
            return Err(OpsError::DnsZone {
                cluster: cluster.name().to_string(),
                message: e.to_string(),
            })
        }
    }
    Ok(modelled)
}

/// Writes what is not a cloud object but must exist before nodes and pods
/// use the cluster: the OIDC discovery document and signing keys (JWKS) in
/// the discovery store, so IAM can verify service-account tokens, and the
/// node config and bootstrap script of Karpenter's groups in the state
/// store (when the config base is the state store kops-rs was given).
/// The discovery store's objects are written without an ACL: its bucket
/// must let anyone read them (a bucket policy), as IAM and STS fetch them
/// anonymously.
async fn publish_irsa_and_karpenter_files(
    registry: &Registry,
    cluster: &kops_api::Cluster,
    model: &Model<'_>,
    region: &str,
    config_base: &str,
) -> Result<(), OpsError> {
    let store_error = |e: kops_state::StoreError| OpsError::Registry(e.into());
    if let Some(store) = kops_model::iam::irsa::discovery_store(model) {
        let (keystore, _) = crate::pki::cluster_keystore(registry, cluster.name());
        let keyset = keystore.get(kops_pki::SERVICE_ACCOUNT).await?;
        let certificates: Vec<String> = keyset
            .iter()
            .flat_map(|k| k.items.iter())
            .filter(|i| i.distrust_timestamp.is_none())
            .filter_map(|i| i.certificate_pem.clone())
            .collect();
        let files = kops_model::files::discovery_files(model, region, &certificates)?;
        let target = kops_state::open(store).await.map_err(store_error)?;
        for file in files {
            target
                .write(
                    &file.path,
                    &file.contents,
                    kops_state::WriteOptions::default(),
                )
                .await
                .map_err(store_error)?;
        }
    }
    if kops_api::store_path::same(config_base, &registry.config_base(cluster.name())) {
        for file in kops_model::files::karpenter_files(model)? {
            let key = format!("{}/{}", cluster.name(), file.path);
            registry
                .store()
                .write(&key, &file.contents, kops_state::WriteOptions::default())
                .await
                .map_err(store_error)?;
        }
    }
    Ok(())
}
