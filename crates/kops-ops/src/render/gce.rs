//! The GCE render: kops-gce's graph and Terraform, with the cloud-neutral
//! state-store files. Offline: the project comes from `spec.project`.

use kops_model::Model;

use super::files::neutral_files;
use super::request::{CloudRender, Prepared, RenderClusterError, RenderTarget};
use crate::OpsError;

/// The region kops' tests give the S3 bucket of `memfs://` state-file
/// objects; a real `s3://` bucket's region comes from the environment.
fn files_region(config_base: &str) -> String {
    if config_base.starts_with("memfs://") {
        return "us-test-1".into();
    }
    std::env::var("AWS_REGION")
        .or_else(|_| std::env::var("AWS_DEFAULT_REGION"))
        .unwrap_or_else(|_| "us-east-1".into())
}

/// The spec the GCE model reads: the API access and the network ranges
/// kops' populate step assigns when the network does not exist yet.
pub(crate) fn resolved(
    cluster: &kops_api::Cluster,
    groups: &[kops_api::InstanceGroup],
) -> Result<kops_api::Cluster, OpsError> {
    kops_api::populate::with_gce_network_ranges(&kops_api::populate::with_api_access(
        cluster,
        Some(groups),
    ))
    .map_err(|e| {
        OpsError::Invalid(kops_api::validation::ValidationError {
            object: format!("cluster `{}`", cluster.name()),
            errors: vec![e],
        })
    })
}

pub(crate) fn render(
    prepared: &Prepared,
    target: RenderTarget,
) -> Result<CloudRender, RenderClusterError> {
    let cluster = &prepared.cluster;
    if target == RenderTarget::CloudFormation {
        return Err(OpsError::CannotApply {
            cluster: cluster.name().to_string(),
            reason: "CloudFormation is AWS's; render a GCE cluster with `--target terraform`"
                .into(),
        }
        .into());
    }
    let project = crate::cloud::spec::gce_project(cluster)?;
    let resolved = resolved(cluster, &prepared.groups)?;
    let warnings = kops_api::validation::warnings(&resolved);
    let model = Model {
        cluster: &resolved,
        groups: &prepared.groups,
        ssh_public_key: prepared.ssh_public_key.as_deref(),
        node_inputs: Some(&prepared.node_inputs),
        account_id: None,
        config_base: &prepared.config_base,
    };
    let gce = kops_gce::GceModel {
        model: &model,
        project: &project,
        region: &prepared.region,
    };
    let graph = kops_gce::build(&gce)?;
    let files = neutral_files(&model, &resolved)?;
    let files_region = files_region(&prepared.config_base);
    let outcome = kops_gce::terraform(&kops_gce::Input {
        graph: &graph,
        cluster: cluster.name(),
        project: &project,
        region: &prepared.region,
        config_base: &prepared.config_base,
        files: &files,
        files_region: &files_region,
    })?;
    Ok(CloudRender {
        outcome,
        files,
        tasks: graph.len(),
        warnings,
    })
}
