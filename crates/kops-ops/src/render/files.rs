//! The cloud-neutral state-store files every cloud renders.

use kops_model::files::StateFile;
use kops_model::Model;

use super::request::RenderClusterError;
use crate::spec::completed_spec;

/// The cloud-neutral state-store files every cloud renders: the completed
/// spec, etcd specs, the addons and channel, each group's node config.
pub(crate) fn neutral_files(
    model: &Model<'_>,
    resolved: &kops_api::Cluster,
) -> Result<Vec<StateFile>, RenderClusterError> {
    let completed = completed_spec(resolved, model.config_base);
    let inputs = model.node_inputs();
    Ok(kops_model::files::state_files(
        model,
        &kops_api::manifest::to_yaml(&completed),
        node_configs(&completed, model.groups, model.config_base, &inputs)?,
    )?)
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
