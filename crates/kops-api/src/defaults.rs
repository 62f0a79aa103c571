//! Defaults for instance groups created after the cluster (`kops create
//! instancegroup`): sizes by role, subnets by role, and the image and machine
//! type `create cluster` would pick.

use crate::cluster::{Cluster, SubnetType};
use crate::field_error::FieldError;
use crate::instance_group::{InstanceGroup, Role};
use crate::meta::LABEL_INSTANCE_GROUP;
use crate::new_cluster::{default_image, default_machine_type, Architecture};
use crate::version::KubernetesVersion;

/// Builds a new instance group for an existing cluster, as `kops create
/// instancegroup` does: role sizes (control plane and bastion 1/1, nodes
/// 2/2), the subnets that fit the role when none are given, the image and
/// machine type the cluster's other groups of that role use (or kops'
/// defaults), and the `kops.k8s.io/instancegroup` node label.
pub fn default_instance_group(
    cluster: &Cluster,
    existing: &[InstanceGroup],
    name: &str,
    role: Role,
    subnets: &[String],
) -> Result<InstanceGroup, Vec<FieldError>> {
    let mut ig = InstanceGroup::new(cluster.name(), name, role);
    let (min, max) = match role {
        Role::Node => (2, 2),
        _ => (1, 1),
    };
    ig.spec.min_size = Some(min);
    ig.spec.max_size = Some(max);

    let cluster_subnets = cluster.spec.subnets.as_deref().unwrap_or_default();
    let chosen: Vec<String> = if subnets.is_empty() {
        let wanted: &[SubnetType] = match role {
            Role::Bastion => &[SubnetType::Utility, SubnetType::Public],
            _ => &[
                SubnetType::Private,
                SubnetType::Public,
                SubnetType::DualStack,
            ],
        };
        let mut picked = Vec::new();
        for t in wanted {
            picked = cluster_subnets
                .iter()
                .filter(|s| s.subnet_type() == Some(*t))
                .map(|s| s.name.clone())
                .collect();
            if !picked.is_empty() {
                break;
            }
        }
        picked
    } else {
        subnets.to_vec()
    };
    if chosen.is_empty() {
        return Err(vec![FieldError::new(
            "--subnet",
            "no subnet fits this instance group",
        )
        .hint(
            "add subnets to the cluster (kops edit cluster) or name them with --subnet",
        )]);
    }
    if role == Role::ControlPlane && chosen.len() > 1 {
        // kops places one control-plane group per zone.
        return Err(vec![FieldError::new(
            "--subnet",
            "a control-plane instance group runs in one subnet",
        )
        .value(chosen.join(","))
        .hint("pass a single --subnet for each control-plane group")]);
    }
    ig.spec.subnets = Some(chosen);

    // Same image and machine type as the cluster's other groups of this role.
    let sibling = existing
        .iter()
        .find(|g| g.role() == Some(role))
        .or_else(|| existing.iter().find(|g| g.role() == Some(Role::Node)));
    let cloud = cluster.spec.cloud_provider.as_deref().unwrap_or("aws");
    ig.spec.image = sibling.and_then(|g| g.spec.image.clone()).or_else(|| {
        let version = cluster
            .spec
            .kubernetes_version
            .as_deref()
            .and_then(KubernetesVersion::parse)
            .unwrap_or_else(|| crate::version::recommended(None));
        default_image(cloud, &version, Architecture::Amd64).map(str::to_string)
    });
    let region = cluster_subnets
        .iter()
        .find_map(|s| s.zone.as_deref().and_then(crate::zones::aws_region))
        .unwrap_or_default();
    ig.spec.machine_type = existing
        .iter()
        .find(|g| g.role() == Some(role))
        .and_then(|g| g.spec.machine_type.clone())
        .or_else(|| {
            (cloud == "aws")
                .then(|| default_machine_type(&region, role, ig.spec.image.as_deref()).to_string())
        });
    ig.spec
        .node_labels
        .get_or_insert_with(Default::default)
        .insert(LABEL_INSTANCE_GROUP.to_string(), name.to_string());
    Ok(ig)
}
