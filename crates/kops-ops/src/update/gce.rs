//! `kops update cluster` on GCE: kops-gce's graph applied directly through
//! Google's APIs (or compared, in a dry run), with the state-store files
//! nodes read written first, as on AWS.

use std::sync::Arc;

use kops_engine::{Executor, ExecutorOptions, Mode};
use kops_model::Model;

use super::{BoxedProgress, UpdateOutcome, UpdateRequest};
use crate::{OpsError, Registry};

/// The GCE update; `cluster` is the stored spec, its instance groups
/// validated by the caller.
pub(super) async fn update(
    registry: &Registry,
    request: UpdateRequest,
    cluster: kops_api::Cluster,
    groups: Vec<kops_api::InstanceGroup>,
) -> Result<UpdateOutcome, OpsError> {
    let cloud_kind = crate::cloud::Cloud::Gce;
    let region = cloud_kind.region(&cluster)?;
    let project = cluster
        .spec
        .project
        .clone()
        .filter(|p| !p.is_empty())
        .ok_or_else(|| OpsError::NotOnAws {
            cluster: cluster.name().to_string(),
            reason:
                "spec.project is not set; set it to the Google Cloud project the cluster lives in"
                    .into(),
        })?;
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
    let mut resolved = kops_api::populate::with_api_access(&cluster, Some(&groups));
    let ip_alias = kops_gce::model::uses_ip_alias(&resolved);
    kops_gce::model::cidrs::assign(&mut resolved, ip_alias);
    let warnings = kops_api::validation::warnings(&resolved);
    let model = Model {
        cluster: &resolved,
        groups: &groups,
        ssh_public_key: keys.first().map(|k| k.public_key.as_str()),
        node_inputs: Some(&node_inputs),
        account_id: None,
        config_base: &config_base,
    };
    let graph = kops_gce::build(&kops_gce::GceModel {
        model: &model,
        project: &project,
        region: &region,
    })?;
    // The files nodes read (node configs, the completed spec...), in the
    // store before any instance can boot.
    let files =
        crate::render::neutral_files(&model, &resolved).map_err(|e| OpsError::NotOnAws {
            cluster: cluster.name().to_string(),
            reason: e.to_string(),
        })?;
    let mut state_files = Vec::new();
    for file in files.iter().filter(|f| f.base.is_none()) {
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
            "{}: {}",
            if current.is_some() {
                "update"
            } else {
                "create"
            },
            file.path
        ));
        if request.apply {
            registry
                .store()
                .write(&key, &file.contents, kops_state::WriteOptions::default())
                .await
                .map_err(|e| OpsError::Registry(e.into()))?;
        }
    }
    let cloud =
        kops_gce::cloud::GceCloud::new(&project, &region).map_err(|reason| OpsError::NotOnAws {
            cluster: cluster.name().to_string(),
            reason,
        })?;
    let cloud = Arc::new(cloud);
    let ctx = Arc::new(kops_gce::GceContext {
        project: project.clone(),
        region: region.clone(),
        cloud: Some(cloud.clone()),
    });
    let mut executor = Executor::new(ExecutorOptions::default());
    if let Some(p) = request.progress {
        executor = executor.with_progress(BoxedProgress(p));
    }
    let mode = if request.apply {
        Mode::Apply
    } else {
        Mode::DryRun
    };
    let report = executor.run(&graph, ctx, mode).await?;
    if request.apply {
        registry
            .put_completed_spec(&super::completed_spec(&cluster, &config_base))
            .await?;
    }
    Ok(UpdateOutcome {
        report,
        calls: cloud.calls(),
        region,
        tasks: graph.len(),
        longest_chain: graph.longest_chain()?,
        warnings,
        state_files,
    })
}
