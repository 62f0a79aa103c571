//! `update cluster --target terraform|cloudformation`: the same task graph
//! as the direct apply, written as files instead of applied. Nearly
//! offline: the cloud calls are the two look-ups kops' render makes, only
//! when AWS credentials are configured and each bounded by
//! [`ACCOUNT_TIMEOUT`]: the account (STS GetCallerIdentity), which addon
//! manifests name (the termination handler's queue URL, IRSA role ARNs),
//! and, for a cluster publishing its names in Route 53 without
//! `spec.dnsZone`, the hosted zone, whose id dns-controller, external-dns,
//! the IAM policies, the API records and the completed spec name. Without
//! the account those addons stay placeholders and the render says so once;
//! without the zone its name stands in (Terraform looks the id up; see
//! kops-render for what stands in for the other cloud look-ups).
//!
//! State-store files (completed spec, etcd specs, channel, node configs)
//! become `aws_s3_object` resources in Terraform when the config base is in
//! S3 (kops' default), `google_storage_bucket_object` when it is in Cloud
//! Storage; otherwise, and for CloudFormation, which has no S3
//! object resource, they are written to the state store here when the
//! config base is in the state store kops-rs was given.

use std::path::Path;

use kops_api::validation;
use kops_state::WriteOptions;

use crate::update::options::Phase;
use crate::{require_cluster, OpsError, Registry};

pub(crate) mod aws;
pub(crate) mod files;
pub(crate) mod gce;
pub(crate) mod request;

use request::{CloudRender, Prepared};
pub use request::{
    RenderClusterError, RenderOutcome, RenderRequest, RenderTarget, ACCOUNT_TIMEOUT,
};

/// Renders the cluster and writes the files.
pub async fn render_cluster(
    registry: &Registry,
    request: RenderRequest,
) -> Result<RenderOutcome, RenderClusterError> {
    let cluster = require_cluster(registry, &request.cluster).await?;
    let cloud = crate::cloud::of(&cluster)?;
    cloud.renders_files()?;
    if matches!(request.phase, Some(Phase::Security | Phase::Cluster)) {
        return Err(crate::flag_error(
            "--phase",
            "only `--phase network` can be rendered to a file target",
            "apply the security and cluster phases with `--target direct`, or render the whole cluster without --phase",
        )
        .into());
    }
    let network_only = request.phase == Some(Phase::Network);
    let groups = registry.list_instance_groups(&request.cluster).await?;
    validation::validate_all(&cluster, &groups).map_err(OpsError::from)?;
    // Where nodes get nodeup (see update), before anything is written.
    let nodeup =
        crate::update::nodeup::resolve_from_environment(registry, &cluster, &groups).await?;
    let region = cloud.region(&cluster)?;
    let keys = registry.list_ssh_public_keys(&request.cluster).await?;
    let config_base = cluster
        .spec
        .config_base
        .clone()
        .unwrap_or_else(|| registry.config_base(&request.cluster));
    // The CA keysets first, as kops' render does: the node configs and the
    // workers' boot configs carry their certificates.
    crate::pki::ensure_cluster_pki(registry, &cluster)
        .await
        .map_err(OpsError::from)?;
    let mut node_inputs = crate::pki::node_inputs(registry, &cluster, &groups)
        .await
        .map_err(OpsError::from)?;
    node_inputs.nodeup = Some(nodeup.sources.clone());
    // kops' images under KOPS_BASE_URL, as update; the API load balancer's
    // addresses stay unknown here (it may not exist), as in kops' renders.
    node_inputs.base_url_images = nodeup.images.clone();
    let prepared = Prepared {
        cluster,
        groups,
        ssh_public_key: keys.first().map(|k| k.public_key.clone()),
        config_base,
        region,
        node_inputs,
    };
    let rendered = cloud
        .render(registry, &prepared, request.target, network_only)
        .await?;
    let CloudRender {
        outcome,
        files,
        tasks,
        warnings,
    } = rendered;
    let config_base = prepared.config_base;
    let out = request.out.unwrap_or_else(|| request.target.default_out());
    let mut written = Vec::new();
    for (path, bytes) in &outcome.rendered.files {
        write_file(&out.join(path), bytes)?;
        written.push(path.clone());
    }

    // State files the rendered output does not manage go to the store.
    let managed_by_terraform = request.target == RenderTarget::Terraform
        && kops_render::terraform_writes_files(&config_base);
    // The nodeup binaries the user data pins go to the state store.
    let mut state_files_written = nodeup.upload(registry).await?;
    if !managed_by_terraform
        && kops_api::store_path::same(&config_base, &registry.config_base(&request.cluster))
    {
        for file in &files {
            if file.base.is_some() {
                // The discovery store is not the state store.
                continue;
            }
            let key = format!("{}/{}", request.cluster, file.path);
            registry
                .store()
                .write(&key, &file.contents, WriteOptions::default())
                .await
                .map_err(|e| OpsError::Registry(e.into()))?;
            state_files_written.push(registry.store().url_of(&key));
        }
    }
    // The discovery documents go to the discovery store, unless Terraform
    // manages them as S3 objects (kops' test stores, `memfs://`, are not
    // written anywhere).
    for file in &files {
        let Some(base) = &file.base else {
            continue;
        };
        let in_terraform =
            request.target == RenderTarget::Terraform && kops_render::terraform_writes_files(base);
        if in_terraform || base.starts_with("memfs://") {
            continue;
        }
        let store_error = |e: kops_state::StoreError| OpsError::Registry(e.into());
        let store = kops_state::open(base).await.map_err(store_error)?;
        store
            .write(&file.path, &file.contents, WriteOptions::default())
            .await
            .map_err(store_error)?;
        state_files_written.push(store.url_of(&file.path));
    }
    Ok(RenderOutcome {
        out,
        files: written,
        tasks,
        state_files_written,
        unrendered: outcome.unrendered.iter().map(ToString::to_string).collect(),
        warnings,
    })
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), RenderClusterError> {
    let error = |source| RenderClusterError::Write {
        path: path.display().to_string(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(error)?;
    }
    std::fs::write(path, bytes).map_err(error)
}
