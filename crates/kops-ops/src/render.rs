//! `update cluster --target terraform|cloudformation`: the same task graph
//! as the direct apply, written as files instead of applied. Offline: no
//! cloud call (see kops-render for what stands in for cloud look-ups).
//!
//! State-store files (completed spec, etcd specs, channel, node configs)
//! become `aws_s3_object` resources in Terraform when the config base is in
//! S3 (kops' default); otherwise, and for CloudFormation, which has no S3
//! object resource, they are written to the state store here when the
//! config base is in the state store kops-rs was given.

use std::path::{Path, PathBuf};

use kops_api::validation;
use kops_model::files::StateFile;
use kops_model::Model;
use kops_render::Input;
use kops_state::WriteOptions;

use crate::update::{cluster_region, completed_spec};
use crate::{require_cluster, OpsError, Registry};

/// The file formats `update cluster` can write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RenderTarget {
    Terraform,
    CloudFormation,
}

impl RenderTarget {
    /// The output directory when none is given (kops' defaults).
    pub fn default_out(self) -> PathBuf {
        match self {
            RenderTarget::Terraform => PathBuf::from("out/terraform"),
            RenderTarget::CloudFormation => PathBuf::from("out/cloudformation"),
        }
    }
}

pub struct RenderRequest {
    pub cluster: String,
    pub target: RenderTarget,
    /// `None`: [`RenderTarget::default_out`].
    pub out: Option<PathBuf>,
}

#[derive(Debug)]
pub struct RenderOutcome {
    pub out: PathBuf,
    /// Written, relative to `out`.
    pub files: Vec<String>,
    /// Tasks in the graph.
    pub tasks: usize,
    /// State-store files written directly (not managed by the rendered files).
    pub state_files_written: Vec<String>,
    /// Task types without a renderer (a bug to report; empty normally).
    pub unrendered: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum RenderClusterError {
    #[error(transparent)]
    Ops(#[from] OpsError),
    #[error(transparent)]
    Render(#[from] kops_render::RenderError),
    #[error("{0}")]
    NodeConfig(String),
    /// The service-account keyset (for the published JWKS).
    #[error(transparent)]
    Pki(#[from] kops_pki::PkiError),
    #[error("cannot write `{path}`: {source}\nhint: check that the output directory (--out) is writable")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl From<kops_model::ModelError> for RenderClusterError {
    fn from(e: kops_model::ModelError) -> Self {
        Self::Ops(e.into())
    }
}

impl From<kops_state::registry::RegistryError> for RenderClusterError {
    fn from(e: kops_state::registry::RegistryError) -> Self {
        Self::Ops(e.into())
    }
}

/// Renders the cluster and writes the files.
pub async fn render_cluster(
    registry: &Registry,
    request: RenderRequest,
) -> Result<RenderOutcome, RenderClusterError> {
    let cluster = require_cluster(registry, &request.cluster).await?;
    let cloud_provider = cluster.spec.cloud_provider.as_deref().unwrap_or("");
    if cloud_provider != "aws" {
        return Err(OpsError::NotOnAws {
            cluster: request.cluster.clone(),
            reason: format!(
                "its cloudProvider is `{cloud_provider}`; kops-rs renders clusters on AWS only"
            ),
        }
        .into());
    }
    let groups = registry.list_instance_groups(&request.cluster).await?;
    validation::validate_all(&cluster, &groups).map_err(OpsError::from)?;
    // Where nodes get nodeup (see update), before anything is written.
    let nodeup =
        crate::update::nodeup::resolve_from_environment(registry, &cluster, &groups).await?;
    let region = cluster_region(&cluster)?;
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
    let model = Model {
        cluster: &cluster,
        groups: &groups,
        ssh_public_key: keys.first().map(|k| k.public_key.as_str()),
        node_inputs: Some(&node_inputs),
        account_id: None,
        config_base: &config_base,
    };
    let graph = kops_model::build(&model)?;
    let completed = completed_spec(&cluster, &config_base);
    let mut files = kops_model::files::state_files(
        &model,
        &kops_api::manifest::to_yaml(&completed),
        node_configs(&completed, &groups, &config_base, &node_inputs)?,
    )?;
    files.extend(kops_model::files::karpenter_files(&model)?);
    if kops_model::iam::irsa::discovery_store(&model).is_some() {
        let certificates = service_account_certificates(registry, &cluster).await?;
        files.extend(kops_model::files::discovery_files(
            &model,
            &region,
            &certificates,
        )?);
    }
    let input = Input {
        graph: &graph,
        cluster: &request.cluster,
        region: &region,
        config_base: &config_base,
        files: &files,
        private_zone: model.dns_type() == "Private",
    };
    let outcome = match request.target {
        RenderTarget::Terraform => kops_render::terraform(&input)?,
        RenderTarget::CloudFormation => kops_render::cloudformation(&input)?,
    };
    let out = request.out.unwrap_or_else(|| request.target.default_out());
    let mut written = Vec::new();
    for (path, bytes) in &outcome.rendered.files {
        write_file(&out.join(path), bytes)?;
        written.push(path.clone());
    }

    // State files the rendered output does not manage go to the store.
    let managed_by_terraform = request.target == RenderTarget::Terraform
        && kops_render::s3_location(&config_base, "x").is_some();
    // The nodeup binaries the user data pins go to the state store.
    let mut state_files_written = nodeup.upload(registry).await?;
    if !managed_by_terraform && config_base == registry.config_base(&request.cluster) {
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
        let in_terraform = request.target == RenderTarget::Terraform
            && kops_render::s3_location(base, "x").is_some();
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
        tasks: graph.len(),
        state_files_written,
        unrendered: outcome.unrendered.iter().map(ToString::to_string).collect(),
    })
}

/// The trusted certificates of the cluster's `service-account` keyset,
/// whose public keys the discovery store publishes. Like kops, a render
/// creates the keyset in the state store when it does not exist yet, so
/// the keys published are the ones the API server will sign with.
async fn service_account_certificates(
    registry: &Registry,
    cluster: &kops_api::Cluster,
) -> Result<Vec<String>, RenderClusterError> {
    let (keystore, _) = crate::pki::cluster_keystore(registry, cluster.name());
    let keyset = match keystore.get(kops_pki::SERVICE_ACCOUNT).await {
        Ok(Some(keyset)) => keyset,
        Ok(None) => {
            let keyset = kops_pki::Keyset::generate_ca(kops_pki::SERVICE_ACCOUNT)?;
            keystore.create(&keyset).await?;
            // Another run may have created it first: read what is stored.
            keystore
                .get(kops_pki::SERVICE_ACCOUNT)
                .await?
                .unwrap_or(keyset)
        }
        Err(e) => return Err(e.into()),
    };
    Ok(keyset
        .items
        .iter()
        .filter(|i| i.distrust_timestamp.is_none())
        .filter_map(|i| i.certificate_pem.clone())
        .collect())
}

/// Each group's node config (`nodeupconfig-<group>`), as kops-nodeup
/// renders it for the state store (bastions and Karpenter groups have none).
fn node_configs(
    cluster: &kops_api::Cluster,
    groups: &[kops_api::InstanceGroup],
    config_base: &str,
    inputs: &kops_nodeup::config::NodeInputs,
) -> Result<Vec<StateFile>, RenderClusterError> {
    let mut rendered = Vec::new();
    for group in groups {
        if group.spec.manager.as_deref() == Some("Karpenter") {
            continue;
        }
        rendered.extend(
            kops_nodeup::config::rendered_with_inputs(cluster, group, config_base, inputs)
                .map_err(|e| RenderClusterError::NodeConfig(e.to_string()))?,
        );
    }
    Ok(rendered
        .into_iter()
        .map(|r| StateFile::new(format!("nodeupconfig-{}", r.group), r.path, r.yaml))
        .collect())
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
