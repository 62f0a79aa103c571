//! Etcd disks, instance templates and managed instance groups (kops'
//! master volumes and autoscaling-group models for GCE).

use std::collections::BTreeMap;

use kops_api::{InstanceGroup, Role};
use kops_engine::TaskGraph;
use kops_model::ModelError;

use super::GceModel;
use crate::names;
use crate::tasks::{
    Disk, GceContext, InstanceGroupManager, InstanceTemplate, TargetPool, TemplateServiceAccount,
};

const DEFAULT_ETCD_VOLUME_TYPE: &str = "pd-ssd";
const DEFAULT_ETCD_VOLUME_SIZE: i64 = 20;
const DEFAULT_BOOT_DISK_TYPE: &str = "pd-standard";

/// The label of the cluster on everything kops labels.
const CLUSTER_LABEL: &str = "k8s-io-cluster-name";

/// The etcd members' disks, in the zone of the member's group.
pub fn build_volumes(
    gce: &GceModel<'_>,
    graph: &mut TaskGraph<GceContext>,
) -> Result<(), ModelError> {
    let cluster = gce.cluster_name();
    let etcd_clusters = gce
        .model
        .cluster
        .spec
        .etcd_clusters
        .as_deref()
        .unwrap_or_default();
    for (ci, etcd) in etcd_clusters.iter().enumerate() {
        for (mi, member) in etcd.etcd_members.iter().enumerate() {
            let path = format!("spec.etcdClusters[{ci}].etcdMembers[{mi}].instanceGroup");
            let group_name = member.instance_group.as_deref().unwrap_or_default();
            let group = gce.groups().iter().find(|g| g.name() == group_name);
            let zones = group.map(|g| gce.group_zones(g)).unwrap_or_default();
            let [zone] = zones.as_slice() else {
                return Err(GceModel::error(
                    path,
                    format!(
                        "etcd member `{}` is on instance group `{group_name}`, which is not a group in exactly one zone",
                        member.name
                    ),
                    "name a control-plane instance group with one zone",
                ));
            };
            let mut prefix = format!("{}.etcd-{}", member.name, etcd.name).replace('.', "-");
            if prefix.starts_with(|c: char| c.is_ascii_digit() || c == '-') {
                prefix.insert(0, 'd');
            }
            let labels = BTreeMap::from([
                (CLUSTER_LABEL.to_string(), names::safe_cluster_name(cluster)),
                ("k8s-io-role-master".to_string(), "master".to_string()),
                (
                    format!("k8s-io-etcd-{}", etcd.name),
                    names::encode_label(&format!("{}/{}", member.name, member.name)),
                ),
            ]);
            graph.add(Disk {
                name: names::suffixed(&prefix, cluster),
                zone: zone.clone(),
                size_gb: member.volume_size.unwrap_or(DEFAULT_ETCD_VOLUME_SIZE),
                volume_type: member
                    .volume_type
                    .clone()
                    .unwrap_or_else(|| DEFAULT_ETCD_VOLUME_TYPE.to_string()),
                iops: member.volume_iops.filter(|i| *i > 0),
                throughput: member.volume_throughput.filter(|t| *t > 0),
                labels,
            })?;
        }
    }
    Ok(())
}

/// A scope's full URL (kops' short forms: `compute-rw`, `storage-ro`...).
fn scope_url(scope: &str) -> String {
    if scope.starts_with("https://") {
        return scope.to_string();
    }
    let long = match scope {
        "compute-rw" => "compute",
        "compute-ro" => "compute.readonly",
        "logging-write" => "logging.write",
        "storage-ro" => "devstorage.read_only",
        "storage-rw" => "devstorage.read_write",
        "storage-full" => "devstorage.full_control",
        other => other,
    };
    format!("https://www.googleapis.com/auth/{long}")
}

/// An image as a full URL: `project/name` in that project, a bare name in
/// the cluster's project, a URL as it is.
fn image_url(project: &str, image: &str) -> String {
    if image.starts_with("https://") {
        return image.to_string();
    }
    match image.split_once('/') {
        Some((image_project, name)) => format!(
            "https://www.googleapis.com/compute/v1/projects/{image_project}/global/images/{name}"
        ),
        None => format!(
            "https://www.googleapis.com/compute/v1/projects/{project}/global/images/{image}"
        ),
    }
}

/// The user `ssh-keys` metadata registers keys for: `ubuntu` on Ubuntu
/// images, else `admin`.
fn ssh_user(image: &str) -> &'static str {
    let name = image.rsplit('/').next().unwrap_or(image);
    if name.to_lowercase().starts_with("ubuntu") {
        "ubuntu"
    } else {
        "admin"
    }
}

/// The instance labels of a group: the cloud labels, then kops' own.
fn group_labels(gce: &GceModel<'_>, group: &InstanceGroup, role: Role) -> BTreeMap<String, String> {
    let mut labels = gce.model.cloud_labels();
    labels.extend(group.spec.cloud_labels.clone().unwrap_or_default());
    // The cluster autoscaler's node-template taints, `key=value:effect`
    // (kops adds these on every cloud).
    for taint in group.spec.taints.iter().flatten() {
        let (key_value, effect) = taint.rsplit_once(':').unwrap_or((taint, ""));
        if effect.is_empty() {
            continue;
        }
        let (key, value) = key_value.split_once('=').unwrap_or((key_value, ""));
        labels.insert(
            format!("k8s.io/cluster-autoscaler/node-template/taint/{key}"),
            format!("{value}:{effect}"),
        );
    }
    let role_name = names::role_name(role);
    labels.insert(
        CLUSTER_LABEL.into(),
        names::safe_cluster_name(gce.cluster_name()),
    );
    labels.insert(format!("k8s-io-role-{role_name}"), role_name.into());
    labels.insert("k8s-io-instance-group".into(), group.name().into());
    if role == Role::ControlPlane {
        labels.insert("k8s-io-role-master".into(), "master".into());
    }
    labels
}

/// The cluster autoscaler's view of a node group (`kube-env`).
fn autoscaler_env(group: &InstanceGroup) -> String {
    let image = group.spec.image.as_deref().unwrap_or_default();
    let os = if image.starts_with("cos-cloud/") {
        "cos"
    } else {
        "ubuntu"
    };
    let mut env = format!("os_distribution={os};arch=amd64;os=linux");
    let labels = group.node_labels();
    if !labels.is_empty() {
        let joined: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        env.push_str(&format!(";node_labels={}", joined.join(",")));
    }
    if let Some(taints) = group.spec.taints.as_ref().filter(|t| !t.is_empty()) {
        env.push_str(&format!(";node_taints={}", taints.join(",")));
    }
    format!("AUTOSCALER_ENV_VARS: {env}")
}

/// kops' `nodeCIDRMaskSize` (24 by default): each node's pod range.
fn node_cidr_mask_size(gce: &GceModel<'_>) -> i64 {
    gce.model
        .cluster
        .spec
        .kube_controller_manager
        .as_ref()
        .and_then(|k| k.extra.get("nodeCIDRMaskSize"))
        .and_then(|v| v.as_i64())
        .unwrap_or(24)
}

fn template(
    gce: &GceModel<'_>,
    index: usize,
    group: &InstanceGroup,
    role: Role,
) -> Result<InstanceTemplate, ModelError> {
    let cluster = gce.cluster_name();
    let path = format!("instanceGroups[{}]", group.name());
    let subnets = gce.group_subnets(group);
    let [subnet] = subnets.as_slice() else {
        return Err(GceModel::error(
            format!("{path}.spec.subnets"),
            format!(
                "names {} subnets; a GCE instance group has exactly one",
                subnets.len()
            ),
            "list one subnet of spec.subnets",
        ));
    };
    let name = names::safe_object_name(group.name(), cluster);
    let spec = &group.spec;
    let image = spec.image.clone().unwrap_or_default();
    let machine_type = spec.machine_type.clone().unwrap_or_default();
    let boot_disk_size_gb = spec.root_volume_size.unwrap_or(match role {
        Role::ControlPlane => 64,
        Role::Bastion => 32,
        Role::Node | Role::ApiServer => 128,
    });

    let mut metadata = BTreeMap::from([
        ("cluster-name".to_string(), cluster.to_string()),
        (
            "kops-k8s-io-instance-group-name".to_string(),
            group.name().to_string(),
        ),
    ]);
    let user_data = kops_model::compute::user_data(gce.model, index, group)?;
    let use_startup_script = gce
        .model
        .cluster
        .spec
        .cloud_config
        .as_ref()
        .and_then(|c| c.extra.get("gceUseStartupScript"))
        .and_then(|v| v.as_bool())
        .unwrap_or(false);
    let key = if use_startup_script {
        "startup-script"
    } else {
        "user-data"
    };
    metadata.insert(key.into(), user_data);
    if role == Role::Node {
        metadata.insert("kube-env".into(), autoscaler_env(group));
    }
    if let Some(ssh_key) = gce.model.ssh_public_key {
        metadata.insert(
            "ssh-keys".into(),
            format!("{}: {}", ssh_user(&image), ssh_key.trim()),
        );
    }

    let mut scopes: Vec<String> = [
        "compute-rw",
        "monitoring",
        "logging-write",
        "cloud-platform",
    ]
    .map(String::from)
    .to_vec();
    // Only the control plane writes to the state store (etcd backups).
    scopes.push(
        if role == Role::ControlPlane {
            "storage-rw"
        } else {
            "storage-ro"
        }
        .into(),
    );
    let mut tags = Vec::new();
    match role {
        Role::ControlPlane => {
            scopes.push("https://www.googleapis.com/auth/ndev.clouddns.readwrite".into());
            tags.push(gce.tag("control-plane"));
            tags.push(gce.tag("master"));
        }
        Role::ApiServer => {
            scopes.push("https://www.googleapis.com/auth/ndev.clouddns.readwrite".into());
            tags.push(gce.tag("apiserver"));
        }
        Role::Node => tags.push(gce.tag("node")),
        Role::Bastion => tags.push(gce.tag("bastion")),
    }

    let mut alias_ip_ranges = BTreeMap::new();
    if gce.uses_ip_alias() {
        alias_ip_ranges.insert(
            names::suffixed("pods", cluster),
            format!("/{}", node_cidr_mask_size(gce)),
        );
    }
    let has_external_ip = spec
        .associate_public_ip
        .unwrap_or(GceModel::subnet_is_public(subnet) || role == Role::Bastion);
    let service_account = match gce.shared_service_account() {
        Some(email) => TemplateServiceAccount::Email(email),
        None => TemplateServiceAccount::Task(gce.service_account_key(role)),
    };
    let provisioning_model = spec
        .extra
        .get("gcpProvisioningModel")
        .and_then(|v| v.as_str())
        .unwrap_or("STANDARD")
        .to_string();
    let preemptible = provisioning_model == "SPOT";
    let family = machine_type.split('-').next().unwrap_or_default();
    // Machines with GPUs cannot live-migrate.
    let migrates = !matches!(family, "a4x" | "a4" | "a3" | "a2" | "g2" | "g4");
    let on_host_maintenance = if preemptible || !migrates {
        "TERMINATE"
    } else {
        "MIGRATE"
    };
    let stack_type = if gce.model.ipv6_only() {
        "IPV4_IPV6"
    } else {
        "IPV4_ONLY"
    };

    Ok(InstanceTemplate {
        name_prefix: names::template_name_prefix(&name),
        name,
        network: gce.network_key(),
        subnet: gce.subnet_key(subnet),
        machine_type,
        boot_disk_type: spec
            .root_volume_type
            .clone()
            .unwrap_or_else(|| DEFAULT_BOOT_DISK_TYPE.to_string()),
        boot_disk_size_gb,
        boot_disk_iops: spec.root_volume_iops.filter(|i| *i > 0),
        boot_disk_throughput: spec.root_volume_throughput.filter(|t| *t > 0),
        boot_disk_image: image_url(gce.project, &image),
        can_ip_forward: !gce.uses_ip_alias(),
        has_external_ip,
        stack_type: stack_type.into(),
        alias_ip_ranges,
        scopes: scopes.iter().map(|s| scope_url(s)).collect(),
        service_account,
        tags,
        labels: group_labels(gce, group, role),
        metadata,
        preemptible,
        provisioning_model,
        automatic_restart: !preemptible,
        on_host_maintenance: on_host_maintenance.into(),
        guest_accelerators: Vec::new(),
    })
}

/// `count` spread over `zones`, the remainder to the first ones.
fn split_across_zones(count: i64, zones: &[String]) -> Vec<(String, i64)> {
    let n = zones.len() as i64;
    zones
        .iter()
        .enumerate()
        .map(|(i, zone)| (zone.clone(), count / n + i64::from((i as i64) < count % n)))
        .collect()
}

/// Each group's instance template and its managed instance groups.
pub fn build(gce: &GceModel<'_>, graph: &mut TaskGraph<GceContext>) -> Result<(), ModelError> {
    let cluster = gce.cluster_name();
    let api_server_only = gce.has_api_server_only_groups();
    for (index, group) in gce.groups().iter().enumerate() {
        let Some(role) = group.role() else { continue };
        let template = template(gce, index, group, role)?;
        let template_key = InstanceTemplate::key_of(&template.name);
        graph.add(template)?;
        let zones = gce.group_zones(group);
        if zones.is_empty() {
            return Err(GceModel::error(
                format!("instanceGroups[{}].spec.zones", group.name()),
                "names no zone",
                "list the zones the group's instances run in",
            ));
        }
        let min_size = group
            .spec
            .min_size
            .unwrap_or(if role == Role::Node { 2 } else { 1 });
        let serves_api =
            role == Role::ApiServer || (!api_server_only && role == Role::ControlPlane);
        let target_pools = if serves_api && gce.api_load_balancer_type() == Some("Public") {
            vec![TargetPool::key_of(&names::suffixed("api", cluster))]
        } else {
            Vec::new()
        };
        for (zone, size) in split_across_zones(min_size, &zones) {
            graph.add(InstanceGroupManager {
                name: names::instance_group_manager(cluster, group.name(), &zone),
                zone,
                base_instance_name: group.name().to_string(),
                instance_template: template_key.clone(),
                target_size: size,
                target_pools: target_pools.clone(),
                minimal_action: "REPLACE".into(),
                update_type: "OPPORTUNISTIC".into(),
                list_managed_instances_results: "PAGINATED".into(),
            })?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_spread_over_zones_as_kops() {
        let zones: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        assert_eq!(
            split_across_zones(4, &zones),
            vec![("a".into(), 2), ("b".into(), 1), ("c".into(), 1)]
        );
        assert_eq!(
            scope_url("storage-ro"),
            "https://www.googleapis.com/auth/devstorage.read_only"
        );
        assert_eq!(
            image_url("p", "ubuntu-os-cloud/ubuntu-2404"),
            "https://www.googleapis.com/compute/v1/projects/ubuntu-os-cloud/global/images/ubuntu-2404"
        );
    }
}
