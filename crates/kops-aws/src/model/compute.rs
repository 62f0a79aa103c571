//! The compute half on AWS, as kops lays it out:
//!
//! - per instance group (not those Karpenter manages): a launch template and
//!   an autoscaling group, both `<group>.<cluster>` (`<group>.masters.<cluster>`
//!   for control-plane groups, `<group>.apiservers.<cluster>` for API-server
//!   groups), with kops' tags (`k8s.io/role/<role>`,
//!   `kops.k8s.io/instancegroup`, the cluster-autoscaler node-template
//!   labels and taints, the node-termination-handler tag, cloud labels);
//! - per etcd member of each etcd cluster (`main`, `events`): its data
//!   volume `<member>.etcd-<etcd cluster>.<cluster>` in the zone of the
//!   member's control-plane group, tagged so etcd-manager on a control-plane
//!   node finds it.
//!
//! Control-plane nodes are tainted by the node bootstrap (kubelet flags), not
//! by the cloud: kops' own tags carry no taint for them, so neither do these.
//!
//! The user data is the node bootstrap script (kops-nodeup): it fetches and
//! checks nodeup, which reads the group's node config, stored by `update
//! cluster --yes` and pinned by hash in the script, from the state store.
//!
//! A mixed-instances policy carries the group's `spec.maxPrice`; without a
//! policy the price goes in the launch template's market options (spot
//! instances, see [`spot_market`]). A group with `spec.iam.profile`
//! launches with that existing profile (see [`iam::instance_profile_name`]).
//!
//! Not yet: instance-store block devices.

use std::collections::BTreeSet;

use crate::tasks::autoscaling_group::{AutoscalingGroup, MixedInstances, WarmPool};
use crate::tasks::ebs_volume::EbsVolume;
use crate::tasks::iam_instance_profile::IamInstanceProfile;
use crate::tasks::launch_template::{ExtraVolume, LaunchTemplate, RootVolume, SpotMarket};
use crate::tasks::lifecycle_hook::LifecycleHook;
use crate::tasks::security_group::SecurityGroup;
use crate::tasks::ssh_key::SshKey;
use crate::AwsContext;
use kops_api::cluster::WarmPoolSpec;
use kops_api::{InstanceGroup, Role, SubnetType};
use kops_engine::TaskGraph;

use crate::model::network::subnet_ref;
use crate::model::{iam, security, ssh};
pub use kops_model::compute::*;
use kops_model::{Model, ModelError};

/// Root volume sizes (GiB) kops uses when a group sets none.
/// Adds the launch templates, autoscaling groups and etcd volumes.
pub fn build(model: &Model<'_>, graph: &mut TaskGraph<AwsContext>) -> Result<(), ModelError> {
    for (index, group) in model.groups.iter().enumerate() {
        if group.spec.manager.as_deref() == Some("Karpenter") {
            continue;
        }
        let (template, autoscaling) = instance_group(model, index, group)?;
        graph.add(template)?;
        graph.add(autoscaling)?;
        if let Some(hook) = warm_pool_hook(model, group) {
            graph.add(hook)?;
        }
    }
    for volume in etcd_volumes(model)? {
        graph.add(volume)?;
    }
    Ok(())
}

/// The root volume of a group's instances, with kops' defaults.
fn root_volume(index: usize, group: &InstanceGroup, role: Role) -> Result<RootVolume, ModelError> {
    let spec = &group.spec;
    let nested = spec.root_volume.as_ref();
    let size = match nested.and_then(|r| r.size).or(spec.root_volume_size) {
        Some(size) => to_i32(index, "rootVolume.size", size)?,
        None => match role {
            Role::ControlPlane => DEFAULT_ROOT_VOLUME_SIZE_CONTROL_PLANE,
            Role::Bastion => DEFAULT_ROOT_VOLUME_SIZE_BASTION,
            Role::Node | Role::ApiServer => DEFAULT_ROOT_VOLUME_SIZE_NODE,
        },
    };
    let volume_type = nested
        .and_then(|r| r.kind.clone())
        .or_else(|| spec.root_volume_type.clone())
        .unwrap_or_else(|| DEFAULT_VOLUME_TYPE.to_string());
    let iops = nested.and_then(|r| r.volume_iops).or(spec.root_volume_iops);
    let throughput = nested
        .and_then(|r| r.volume_throughput)
        .or(spec.root_volume_throughput);
    let (iops, throughput) = match volume_type.as_str() {
        "gp3" => (
            Some(match iops {
                Some(i) => to_i32(index, "rootVolume.iops", i)?.max(DEFAULT_GP3_IOPS),
                None => DEFAULT_GP3_IOPS,
            }),
            Some(match throughput {
                Some(t) => to_i32(index, "rootVolume.throughput", t)?.max(DEFAULT_GP3_THROUGHPUT),
                None => DEFAULT_GP3_THROUGHPUT,
            }),
        ),
        "io1" | "io2" => (
            Some(match iops {
                Some(i) => to_i32(index, "rootVolume.iops", i)?.max(DEFAULT_IO_IOPS),
                None => DEFAULT_IO_IOPS,
            }),
            None,
        ),
        _ => (None, None),
    };
    Ok(RootVolume {
        size,
        volume_type,
        iops,
        throughput,
        encrypted: nested
            .and_then(|r| r.encryption)
            .or(spec.root_volume_encryption)
            .unwrap_or(true),
        kms_key_id: nested
            .and_then(|r| r.encryption_key.clone())
            .or_else(|| spec.root_volume_encryption_key.clone()),
    })
}

/// The launch template and autoscaling group of one group.
fn instance_group(
    model: &Model<'_>,
    index: usize,
    group: &InstanceGroup,
) -> Result<(LaunchTemplate, AutoscalingGroup), ModelError> {
    let spec = &group.spec;
    let role = group.role().ok_or_else(|| {
        spec_error(
            index,
            "role",
            format!("instance group `{}` has no known role", group.name()),
            "set `spec.role` to Master, Node, Bastion or APIServer",
        )
    })?;
    let name = group_name(model, group);
    let image = spec
        .image
        .clone()
        .filter(|i| !i.is_empty())
        .ok_or_else(|| {
            spec_error(
                index,
                "image",
                format!("instance group `{}` has no image", group.name()),
                "set `spec.image` to an `ami-...` id or `owner/name`",
            )
        })?;
    let machine_type = spec
        .machine_type
        .as_deref()
        .and_then(|m| m.split(',').next())
        .filter(|m| !m.is_empty())
        .ok_or_else(|| {
            spec_error(
                index,
                "machineType",
                format!("instance group `{}` has no machine type", group.name()),
                "set `spec.machineType`, e.g. `t3.medium`",
            )
        })?
        .to_string();
    let subnet_names = spec.subnets.clone().unwrap_or_default();
    let cluster_subnets = model.cluster.spec.subnets.clone().unwrap_or_default();
    let mut subnet_types = Vec::new();
    for subnet in &subnet_names {
        let found = cluster_subnets.iter().find(|s| &s.name == subnet);
        let Some(found) = found else {
            return Err(spec_error(
                index,
                "subnets",
                format!(
                    "instance group `{}` names the subnet `{subnet}`, which the cluster does not have",
                    group.name()
                ),
                "name subnets from the cluster's spec.subnets",
            ));
        };
        subnet_types.push(found.subnet_type());
    }
    if subnet_names.is_empty() {
        return Err(spec_error(
            index,
            "subnets",
            format!("instance group `{}` has no subnets", group.name()),
            "list the cluster subnets the group's instances go in",
        ));
    }
    let associate_public_ip = match subnet_types.first().copied().flatten() {
        Some(SubnetType::Public) | Some(SubnetType::Utility) => {
            spec.associate_public_ip.unwrap_or(true)
        }
        _ => false,
    };
    let metadata = spec.instance_metadata.as_ref();
    let hop_limit = metadata
        .and_then(|m| m.http_put_response_hop_limit)
        .unwrap_or(1);
    let tags = group_tags(model, group, role);
    let security_groups = match &spec.security_group_override {
        Some(_) => Vec::new(),
        None => vec![SecurityGroup::id_ref(&security::group_name(model, role))],
    };
    let mut additional: Vec<String> = spec.security_group_override.iter().cloned().collect();
    additional.extend(spec.additional_security_groups.iter().flatten().cloned());
    let template = LaunchTemplate {
        name: name.clone(),
        instance_group: group.name().to_string(),
        image,
        instance_type: machine_type,
        root_volume: root_volume(index, group, role)?,
        http_tokens: metadata
            .and_then(|m| m.http_tokens.clone())
            .unwrap_or_else(|| "required".to_string()),
        http_put_response_hop_limit: to_i32(
            index,
            "instanceMetadata.httpPutResponseHopLimit",
            hop_limit,
        )?,
        instance_profile: IamInstanceProfile::output_ref(&iam::instance_profile_name(
            model, index, group, role,
        )?),
        shared_profile: iam::custom_profile_arn(group).is_some(),
        security_groups,
        additional_security_group_ids: additional,
        ssh_key: ssh::ssh_key(model)?.map(|k| SshKey::name_ref(&k.name)),
        associate_public_ip,
        ipv6: cluster_subnets.iter().any(|s| {
            subnet_names.contains(&s.name) && s.ipv6_cidr.as_deref().is_some_and(|c| !c.is_empty())
        }),
        detailed_monitoring: spec.detailed_instance_monitoring.unwrap_or(false),
        extra_volumes: extra_volumes(index, group)?,
        cpu_credits: spec.cpu_credits.clone().filter(|c| !c.is_empty()),
        spot: spot_market(index, group)?,
        user_data: user_data(model, index, group)?,
        tags: tags.clone(),
    };
    let (default_min, default_max) = match role {
        Role::Node => (2, 2),
        _ => (1, 1),
    };
    let min_size = to_i32(index, "minSize", spec.min_size.unwrap_or(default_min))?;
    let max_size = to_i32(index, "maxSize", spec.max_size.unwrap_or(default_max))?;
    let max_instance_lifetime = match spec.max_instance_lifetime.as_deref() {
        None => 0,
        Some(text) => {
            let seconds = parse_go_duration(text).ok_or_else(|| {
                spec_error(
                    index,
                    "maxInstanceLifetime",
                    format!("`{text}` is not a duration"),
                    "write a duration such as `168h` or `48h20m`, or `0` for none",
                )
            })?;
            to_i32(index, "maxInstanceLifetime", seconds)?
        }
    };
    let autoscaling = AutoscalingGroup {
        name: name.clone(),
        launch_template: LaunchTemplate::output_ref(&name),
        min_size,
        max_size,
        subnets: subnet_names.iter().map(|s| subnet_ref(model, s)).collect(),
        tags,
        suspended_processes: spec
            .suspend_processes
            .iter()
            .flatten()
            .cloned()
            .collect::<BTreeSet<_>>(),
        max_instance_lifetime,
        target_groups: crate::model::api_load_balancer::target_groups_for(model, group.role()),
        classic_load_balancers: crate::model::api_load_balancer::classic_load_balancers_for(
            model,
            group.role(),
        ),
        mixed_instances: mixed_instances(group),
        enabled_metrics: enabled_metrics(warm_pool(model, group).is_some()),
        load_balancer_names: spec
            .external_load_balancers
            .iter()
            .flatten()
            .filter_map(|l| l.load_balancer_name.clone())
            .collect(),
        external_target_group_arns: spec
            .external_load_balancers
            .iter()
            .flatten()
            .filter_map(|l| l.target_group_arn.clone())
            .collect(),
        warm_pool: warm_pool(model, group).map(|w| WarmPool {
            min_size: w.min_size.unwrap_or(0) as i32,
            max_group_prepared_capacity: w.max_size.map(|m| m as i32),
        }),
    };
    Ok((template, autoscaling))
}

/// A group's data volumes (`spec.volumes`): gp3 by default (3000 IOPS,
/// 125 MiB/s), deleted with the instance unless `deleteOnTermination: false`.
fn extra_volumes(index: usize, group: &InstanceGroup) -> Result<Vec<ExtraVolume>, ModelError> {
    let mut volumes = Vec::new();
    for (i, v) in group.spec.volumes.iter().flatten().enumerate() {
        if v.device.is_empty() {
            return Err(spec_error(
                index,
                &format!("volumes[{i}].device"),
                "a volume needs a device name".to_string(),
                "set `device`, e.g. /dev/xvdd",
            ));
        }
        let Some(size) = v.size.filter(|s| *s > 0) else {
            return Err(spec_error(
                index,
                &format!("volumes[{i}].size"),
                "a volume needs a size in GiB".to_string(),
                "set `size`, e.g. 20",
            ));
        };
        let volume_type = v
            .kind
            .clone()
            .unwrap_or_else(|| DEFAULT_VOLUME_TYPE.to_string());
        let gp3 = volume_type == "gp3";
        volumes.push(ExtraVolume {
            device: v.device.clone(),
            size: size as i32,
            iops: v.iops.map(|i| i as i32).or(gp3.then_some(DEFAULT_GP3_IOPS)),
            throughput: v
                .throughput
                .map(|t| t as i32)
                .or(gp3.then_some(DEFAULT_GP3_THROUGHPUT)),
            volume_type,
            encrypted: v.encrypted.unwrap_or(false),
            kms_key_id: v.key.clone(),
            delete_on_termination: v.delete_on_termination.unwrap_or(true),
        });
    }
    Ok(volumes)
}

/// The group metrics kops collects: the group's sizes and instance
/// counts, and the warm pool's when there is one.
pub fn enabled_metrics(with_warm_pool: bool) -> BTreeSet<String> {
    const GROUP: &[&str] = &[
        "GroupDesiredCapacity",
        "GroupInServiceInstances",
        "GroupMaxSize",
        "GroupMinSize",
        "GroupPendingInstances",
        "GroupStandbyInstances",
        "GroupTerminatingInstances",
        "GroupTotalInstances",
    ];
    const WARM_POOL: &[&str] = &[
        "WarmPoolMinSize",
        "WarmPoolDesiredCapacity",
        "WarmPoolPendingCapacity",
        "WarmPoolTerminatingCapacity",
        "WarmPoolWarmedCapacity",
        "WarmPoolTotalCapacity",
        "GroupAndWarmPoolDesiredCapacity",
        "GroupAndWarmPoolTotalCapacity",
    ];
    let extra: &[&str] = if with_warm_pool { WARM_POOL } else { &[] };
    GROUP.iter().chain(extra).map(|m| m.to_string()).collect()
}

/// A group's mixed-instances policy, as kops builds it for groups it runs
/// as autoscaling groups. The group's `spec.maxPrice` goes inside the policy
/// (AWS refuses a spot request in the launch template of a group with a
/// mixed-instances policy); without one the spot price is `""`, AWS' "up
/// to the on-demand price", which also clears a price set before.
fn mixed_instances(group: &InstanceGroup) -> Option<MixedInstances> {
    let policy = group.spec.mixed_instances_policy.as_ref()?;
    if group
        .spec
        .manager
        .as_deref()
        .is_some_and(|m| !m.is_empty() && m != "CloudGroup")
    {
        return None;
    }
    let int = |v: Option<i64>| v.map(|v| v as i32);
    Some(MixedInstances {
        instance_types: policy.instances.clone().unwrap_or_default(),
        on_demand_allocation_strategy: policy.on_demand_allocation_strategy.clone(),
        on_demand_base: int(policy.on_demand_base),
        on_demand_above_base: int(policy.on_demand_above_base),
        spot_allocation_strategy: policy.spot_allocation_strategy.clone(),
        spot_instance_pools: int(policy.spot_instance_pools),
        spot_max_price: Some(max_price(group).unwrap_or_default()),
    })
}

/// The launch template's spot request: a group with `spec.maxPrice` and no
/// mixed-instances policy (a policy carries the price itself, and AWS
/// refuses a spot request in the template of a group with one), with
/// `spec.spotDurationInMinutes` and `spec.instanceInterruptionBehavior`
/// when set. An empty price is no spot request, as in kops.
pub fn spot_market(index: usize, group: &InstanceGroup) -> Result<Option<SpotMarket>, ModelError> {
    if group.spec.mixed_instances_policy.is_some() {
        return Ok(None);
    }
    let Some(max_price) = max_price(group).filter(|p| !p.is_empty()) else {
        return Ok(None);
    };
    let block_duration_minutes = match group.spec.extra.get("spotDurationInMinutes") {
        None | Some(serde_json::Value::Null) => None,
        Some(v) => Some(
            v.as_i64()
                .and_then(|m| i32::try_from(m).ok())
                .ok_or_else(|| {
                    spec_error(
                        index,
                        "spotDurationInMinutes",
                        format!("`{v}` is not a number of minutes"),
                        "write a multiple of 60 from 60 to 360, or remove it",
                    )
                })?,
        ),
    };
    let interruption_behavior = match group.spec.extra.get("instanceInterruptionBehavior") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(b))
            if ["terminate", "stop", "hibernate"].contains(&b.as_str()) =>
        {
            Some(b.clone())
        }
        Some(v) => {
            return Err(spec_error(
                index,
                "instanceInterruptionBehavior",
                format!("`{v}` is not an interruption behavior"),
                "write `terminate`, `stop` or `hibernate`",
            ))
        }
    };
    Ok(Some(SpotMarket {
        max_price,
        block_duration_minutes,
        interruption_behavior,
    }))
}

/// A group's warm pool, as kops resolves it: the group's own settings,
/// completed from the cluster's `spec.warmPool` for nodes (control-plane
/// and bastion groups only have one of their own); none when its maximum
/// size is 0.
pub fn warm_pool(model: &Model<'_>, group: &InstanceGroup) -> Option<WarmPoolSpec> {
    let cluster = model.cluster.spec.warm_pool.as_ref();
    let own = group.spec.warm_pool.as_ref();
    let node_like = !matches!(group.role(), Some(Role::ControlPlane | Role::Bastion));
    let resolved = match (own, cluster) {
        (None, Some(c)) if node_like => c.clone(),
        (None, _) => return None,
        (Some(g), Some(c)) if node_like => {
            let mut spec = g.clone();
            spec.max_size = spec.max_size.or(c.max_size);
            if spec.min_size.unwrap_or(0) == 0 {
                spec.min_size = c.min_size;
            }
            if spec.enable_lifecycle_hook != Some(true) {
                spec.enable_lifecycle_hook = c.enable_lifecycle_hook;
            }
            if !spec.extra.contains_key("lifecycleHookTimeout") {
                if let Some(t) = c.extra.get("lifecycleHookTimeout") {
                    spec.extra.insert("lifecycleHookTimeout".into(), t.clone());
                }
            }
            spec
        }
        (Some(g), _) => g.clone(),
    };
    (resolved.max_size != Some(0)).then_some(resolved)
}

/// The launching hook kops adds with `warmPool.enableLifecycleHook`: a warm
/// instance waits (up to 600 s, or `lifecycleHookTimeout`) for nodeup.
pub fn warm_pool_hook(model: &Model<'_>, group: &InstanceGroup) -> Option<LifecycleHook> {
    let pool = warm_pool(model, group)?;
    if pool.enable_lifecycle_hook != Some(true) {
        return None;
    }
    let timeout = pool
        .extra
        .get("lifecycleHookTimeout")
        .and_then(|v| v.as_i64())
        .unwrap_or(600) as i32;
    Some(LifecycleHook {
        id: format!("kops-warmpool-{}", group.name()),
        name: "kops-warmpool".into(),
        autoscaling_group: group_name(model, group),
        transition: "autoscaling:EC2_INSTANCE_LAUNCHING".into(),
        heartbeat_timeout: timeout,
        default_result: "ABANDON".into(),
    })
}

/// One data volume per etcd member and etcd cluster.
pub fn etcd_volumes(model: &Model<'_>) -> Result<Vec<EbsVolume>, ModelError> {
    let mut volumes = Vec::new();
    let subnets = model.cluster.spec.subnets.clone().unwrap_or_default();
    for (ci, etcd) in model
        .cluster
        .spec
        .etcd_clusters
        .iter()
        .flatten()
        .enumerate()
    {
        let members: Vec<&str> = etcd.etcd_members.iter().map(|m| m.name.as_str()).collect();
        for (mi, member) in etcd.etcd_members.iter().enumerate() {
            let path = format!("spec.etcdClusters[{ci}].etcdMembers[{mi}]");
            let group_name = member.instance_group.as_deref().unwrap_or_default();
            let group = model.groups.iter().find(|g| g.name() == group_name);
            let zone = group
                .and_then(|g| g.spec.subnets.as_ref())
                .and_then(|s| s.first())
                .and_then(|s| subnets.iter().find(|c| &c.name == s))
                .and_then(|s| s.zone.clone())
                .ok_or_else(|| ModelError::Spec {
                    path: format!("{path}.instanceGroup"),
                    message: format!(
                        "etcd member `{}` is on instance group `{group_name}`, which is not a group with a subnet in a zone",
                        member.name
                    ),
                    hint: "name the control-plane instance group the member runs on".into(),
                })?;
            let volume_type = member
                .volume_type
                .clone()
                .unwrap_or_else(|| DEFAULT_VOLUME_TYPE.to_string());
            let size = match member.volume_size {
                Some(s) => i32::try_from(s).unwrap_or(i32::MAX),
                None => DEFAULT_ETCD_VOLUME_SIZE,
            };
            let iops = member
                .volume_iops
                .map(|i| i32::try_from(i).unwrap_or(i32::MAX));
            let throughput = member
                .volume_throughput
                .map(|t| i32::try_from(t).unwrap_or(i32::MAX));
            let (iops, throughput) = match volume_type.as_str() {
                "gp3" => (
                    Some(iops.unwrap_or(0).max(DEFAULT_GP3_IOPS)),
                    Some(throughput.unwrap_or(0).max(DEFAULT_GP3_THROUGHPUT)),
                ),
                "io1" | "io2" => (Some(iops.unwrap_or(0).max(DEFAULT_IO_IOPS)), None),
                _ => (None, None),
            };
            let name = format!("{}.etcd-{}.{}", member.name, etcd.name, model.name());
            let etcd_tag = format!("{TAG_ETCD_PREFIX}{}", etcd.name);
            let etcd_value = format!("{}/{}", member.name, members.join(","));
            let tags = model.tags(
                &name,
                &[
                    (etcd_tag.as_str(), etcd_value.as_str()),
                    ("k8s.io/role/control-plane", "1"),
                    ("k8s.io/role/master", "1"),
                ],
            );
            volumes.push(EbsVolume {
                name,
                availability_zone: zone,
                size,
                volume_type,
                iops,
                throughput,
                // As kops: encrypted when the member says so (`kops create
                // cluster` writes `encryptedVolume: true`).
                encrypted: member.encrypted_volume.unwrap_or(false),
                kms_key_id: member.kms_key_id.clone(),
                tags,
            });
        }
    }
    Ok(volumes)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"apiVersion: kops.k8s.io/v1alpha2
kind: Cluster
metadata: {name: minimal-aws.example.com}
spec:
  cloudProvider: aws
  networkCIDR: 172.20.0.0/16
  etcdClusters:
  - {name: main, etcdMembers: [{name: us-test-1a, instanceGroup: master-us-test-1a}]}
  - {name: events, etcdMembers: [{name: us-test-1a, instanceGroup: master-us-test-1a}]}
  subnets:
  - {name: us-test-1a, zone: us-test-1a, cidr: 172.20.32.0/19, type: Public}
---
apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata: {name: nodes, labels: {kops.k8s.io/cluster: minimal-aws.example.com}}
spec: {role: Node, image: ami-12345678, machineType: t2.medium, minSize: 2, maxSize: 2, maxInstanceLifetime: 48h20m, subnets: [us-test-1a]}
---
apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata: {name: master-us-test-1a, labels: {kops.k8s.io/cluster: minimal-aws.example.com}}
spec: {role: Master, image: ami-12345678, machineType: m3.medium, minSize: 1, maxSize: 1, subnets: [us-test-1a]}
"#;

    fn load() -> (kops_api::Cluster, Vec<InstanceGroup>) {
        let mut cluster = None;
        let mut groups = Vec::new();
        for object in kops_api::parse_objects("minimal.yaml", MINIMAL).unwrap() {
            match object {
                kops_api::Object::Cluster(c) => cluster = Some(*c),
                kops_api::Object::InstanceGroup(g) => groups.push(*g),
                _ => {}
            }
        }
        (cluster.unwrap(), groups)
    }

    /// Names, tags and defaults as in kops' minimal-aws golden output.
    #[test]
    fn minimal_aws_matches_kops() {
        let (cluster, groups) = load();
        let model = Model {
            cluster: &cluster,
            groups: &groups,
            ssh_public_key: None,
            node_inputs: None,
            account_id: None,
            config_base: "memfs://tests/minimal-aws.example.com",
        };
        let (template, asg) = instance_group(&model, 1, &groups[1]).unwrap();
        assert_eq!(
            template.name,
            "master-us-test-1a.masters.minimal-aws.example.com"
        );
        assert_eq!(template.root_volume.size, 64);
        assert_eq!(template.root_volume.volume_type, "gp3");
        assert_eq!(template.root_volume.iops, Some(3000));
        assert_eq!(template.root_volume.throughput, Some(125));
        assert!(template.root_volume.encrypted);
        assert_eq!(template.http_tokens, "required");
        assert_eq!(template.http_put_response_hop_limit, 1);
        assert!(template.associate_public_ip);
        let keys: Vec<&str> = template.tags.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "KubernetesCluster",
                "Name",
                "aws-node-termination-handler/managed",
                "k8s.io/cluster-autoscaler/node-template/label/kops.k8s.io/kops-controller-pki",
                "k8s.io/cluster-autoscaler/node-template/label/node-role.kubernetes.io/control-plane",
                "k8s.io/cluster-autoscaler/node-template/label/node.kubernetes.io/exclude-from-external-load-balancers",
                "k8s.io/role/control-plane",
                "k8s.io/role/master",
                "kops.k8s.io/instancegroup",
                "kubernetes.io/cluster/minimal-aws.example.com",
            ]
        );
        assert_eq!(
            (asg.min_size, asg.max_size, asg.max_instance_lifetime),
            (1, 1, 0)
        );

        let (template, asg) = instance_group(&model, 0, &groups[0]).unwrap();
        assert_eq!(template.name, "nodes.minimal-aws.example.com");
        assert_eq!(template.root_volume.size, 128);
        assert_eq!(asg.max_instance_lifetime, 174_000);
        assert_eq!(
            asg.tags.get("k8s.io/role/node").map(String::as_str),
            Some("1")
        );

        let volumes = etcd_volumes(&model).unwrap();
        let main = &volumes[0];
        assert_eq!(main.name, "us-test-1a.etcd-main.minimal-aws.example.com");
        assert_eq!(main.availability_zone, "us-test-1a");
        assert_eq!(
            (main.size, main.iops, main.throughput, main.encrypted),
            (20, Some(3000), Some(125), false)
        );
        assert_eq!(
            main.tags.get("k8s.io/etcd/main").map(String::as_str),
            Some("us-test-1a/us-test-1a")
        );
        assert_eq!(
            volumes[1].name,
            "us-test-1a.etcd-events.minimal-aws.example.com"
        );
    }

    #[test]
    fn go_durations() {
        assert_eq!(parse_go_duration("48h20m"), Some(174_000));
        assert_eq!(parse_go_duration("0"), Some(0));
        assert_eq!(parse_go_duration("90s"), Some(90));
        assert_eq!(parse_go_duration("1.5h"), Some(5400));
        assert_eq!(parse_go_duration("3 days"), None);
        assert_eq!(parse_go_duration(""), None);
    }

    #[test]
    fn taints() {
        assert_eq!(
            parse_taint("dedicated=gpu:NoSchedule"),
            Some(("dedicated".into(), "gpu".into(), "NoSchedule".into()))
        );
        assert_eq!(
            parse_taint("spot:NoExecute"),
            Some(("spot".into(), String::new(), "NoExecute".into()))
        );
        assert_eq!(parse_taint("novalue"), None);
    }

    #[test]
    fn max_price_goes_inside_the_mixed_instances_policy() {
        let (cluster, mut groups) = load();
        let model_groups = groups.clone();
        let model = Model {
            cluster: &cluster,
            groups: &model_groups,
            ssh_public_key: None,
            node_inputs: None,
            account_id: None,
            config_base: "memfs://tests/minimal-aws.example.com",
        };
        let nodes = &mut groups[0];
        nodes
            .spec
            .extra
            .insert("maxPrice".into(), serde_json::json!("0.1"));
        nodes.spec.mixed_instances_policy = Some(kops_api::instance_group::MixedInstancesPolicy {
            instances: Some(vec!["m5.large".into(), "m5a.large".into()]),
            on_demand_base: Some(0),
            on_demand_above_base: Some(0),
            spot_allocation_strategy: Some("capacity-optimized".into()),
            ..Default::default()
        });
        let (template, asg) = instance_group(&model, 0, nodes).unwrap();
        assert_eq!(template.spot, None, "AWS refuses both");
        let mixed = asg.mixed_instances.expect("a mixed instances policy");
        assert_eq!(mixed.instance_types, ["m5.large", "m5a.large"]);
        assert_eq!(mixed.spot_max_price.as_deref(), Some("0.1"));
        assert_eq!(mixed.on_demand_above_base, Some(0));
        assert_eq!(
            mixed.spot_allocation_strategy.as_deref(),
            Some("capacity-optimized")
        );

        // Unquoted, as YAML reads `maxPrice: 0.1`.
        nodes
            .spec
            .extra
            .insert("maxPrice".into(), serde_json::json!(0.25));
        let (_, asg) = instance_group(&model, 0, nodes).unwrap();
        assert_eq!(
            asg.mixed_instances.unwrap().spot_max_price.as_deref(),
            Some("0.25")
        );

        // No maxPrice: the on-demand price, written as "" so a price set before is cleared.
        nodes.spec.extra.remove("maxPrice");
        let (_, asg) = instance_group(&model, 0, nodes).unwrap();
        assert_eq!(
            asg.mixed_instances.unwrap().spot_max_price.as_deref(),
            Some("")
        );
    }

    #[test]
    fn max_price_without_a_policy_is_a_spot_launch_template() {
        let (cluster, mut groups) = load();
        let model_groups = groups.clone();
        let model = Model {
            cluster: &cluster,
            groups: &model_groups,
            ssh_public_key: None,
            node_inputs: None,
            account_id: None,
            config_base: "memfs://tests/minimal-aws.example.com",
        };
        let nodes = &mut groups[0];
        let (template, _) = instance_group(&model, 0, nodes).unwrap();
        assert_eq!(template.spot, None);

        nodes
            .spec
            .extra
            .insert("maxPrice".into(), serde_json::json!(0.05));
        nodes.spec.extra.insert(
            "instanceInterruptionBehavior".into(),
            serde_json::json!("stop"),
        );
        let (template, asg) = instance_group(&model, 0, nodes).unwrap();
        assert_eq!(asg.mixed_instances, None);
        assert_eq!(
            template.spot,
            Some(SpotMarket {
                max_price: "0.05".into(),
                block_duration_minutes: None,
                interruption_behavior: Some("stop".into()),
            })
        );

        nodes.spec.extra.insert(
            "instanceInterruptionBehavior".into(),
            serde_json::json!("pause"),
        );
        let e = instance_group(&model, 0, nodes).unwrap_err().to_string();
        assert!(
            e.starts_with("instanceGroups[0].spec.instanceInterruptionBehavior: `\"pause\"`"),
            "{e}"
        );

        // An empty price asks for nothing, as in kops.
        nodes.spec.extra.remove("instanceInterruptionBehavior");
        nodes
            .spec
            .extra
            .insert("maxPrice".into(), serde_json::json!(""));
        let (template, _) = instance_group(&model, 0, nodes).unwrap();
        assert_eq!(template.spot, None);
    }

    #[test]
    fn a_group_with_its_own_profile_launches_with_it() {
        use crate::model::security::tests::{load, model, PUBLIC};
        let yaml = PUBLIC.replace(
            "spec: {role: Node, ",
            "spec: {iam: {profile: 'arn:aws:iam::123456789012:instance-profile/KopsExampleRole'}, role: Node, ",
        );
        let (cluster, groups) = load(&yaml);
        let m = model(&cluster, &groups);
        let (template, _) = instance_group(&m, 1, &groups[1]).unwrap();
        assert_eq!(template.instance_profile.key().name, "KopsExampleRole");
        let (template, _) = instance_group(&m, 0, &groups[0]).unwrap();
        assert_eq!(
            template.instance_profile.key().name,
            "masters.pub.example.com"
        );
    }
}
