//! The running side of a cluster's instance groups on AWS, for `validate
//! cluster` and `rolling-update cluster`: its autoscaling groups with their
//! sizes, the launch template version each group launches now, and each
//! instance with the version it was launched from; plus the three changes a
//! roll makes (terminate inside the group so it launches a replacement,
//! terminate a detached instance, detach an instance for surge).
//!
//! A read is three calls however many groups the cluster has: one
//! `DescribeAutoScalingGroups` filtered by the cluster tag, one
//! `DescribeInstances` filtered by the same tag, and one
//! `DescribeLaunchTemplates` only when a group names `$Latest`/`$Default`.

use std::collections::BTreeMap;

use aws_sdk_autoscaling::types::Filter as AsgFilter;
use aws_sdk_ec2::types::{Filter, Tag};

use crate::context::{TAG_CLUSTER, TAG_CLUSTER_PREFIX};
use crate::{AwsCloud, AwsError};

pub use kops_cloud::{Group as GroupInstances, Instance, InstanceDetails};

/// The tag a surge detach puts on an instance: the name of the group it
/// left. A later run finds it by this tag (kops' own name for it).
pub const TAG_DETACHED_FROM_ASG: &str = "kops.k8s.io/detached-from-asg";
/// The tag naming an instance's (and a group's) instance group.
pub const TAG_INSTANCE_GROUP: &str = "kops.k8s.io/instancegroup";
/// Tags EC2 writes on an instance launched from a launch template.
pub const TAG_EC2_LAUNCH_TEMPLATE_ID: &str = "aws:ec2launchtemplate:id";
pub const TAG_EC2_LAUNCH_TEMPLATE_VERSION: &str = "aws:ec2launchtemplate:version";
/// The tag prefix of an instance's role (`k8s.io/role/node: 1`).
pub const TAG_ROLE_PREFIX: &str = "k8s.io/role/";

fn tag_value<'a>(tags: &'a [Tag], key: &str) -> Option<&'a str> {
    tags.iter()
        .find(|t| t.key() == Some(key))
        .and_then(|t| t.value())
}

/// Reads the cluster's autoscaling groups and their instances.
pub async fn cluster_groups(
    cloud: &AwsCloud,
    cluster: &str,
) -> Result<Vec<GroupInstances>, AwsError> {
    let mut groups = describe_groups(cloud, cluster, format!("tag:{TAG_CLUSTER}"), cluster).await?;
    if groups.is_empty() {
        // Groups tagged only with the newer ownership tag.
        groups = describe_groups(
            cloud,
            cluster,
            "tag-key".to_string(),
            &format!("{TAG_CLUSTER_PREFIX}{cluster}"),
        )
        .await?;
    }
    // Groups being deleted are not rolled (kops skips them too).
    groups.retain(|g| g.status().is_none());

    // `$Latest` / `$Default` become numbers.
    let mut symbolic: Vec<String> = Vec::new();
    for g in &groups {
        if let Some(t) = g.launch_template() {
            let v = t.version().unwrap_or("$Default");
            if v.starts_with('$') {
                if let Some(id) = t.launch_template_id() {
                    symbolic.push(id.to_string());
                }
            }
        }
    }
    let mut resolved: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    if !symbolic.is_empty() {
        symbolic.sort();
        symbolic.dedup();
        let templates = cloud
            .ec2()
            .describe_launch_templates()
            .set_launch_template_ids(Some(symbolic))
            .into_paginator()
            .items()
            .send()
            .collect::<Result<Vec<_>, _>>()
            .await
            .map_err(|e| AwsError::call("DescribeLaunchTemplates", cluster, e))?;
        for t in &templates {
            if let Some(id) = t.launch_template_id() {
                resolved.insert(
                    id.to_string(),
                    (
                        t.latest_version_number().unwrap_or(1),
                        t.default_version_number().unwrap_or(1),
                    ),
                );
            }
        }
    }

    let ec2_instances = cluster_instances(cloud, cluster).await?;

    let mut result = Vec::new();
    for g in &groups {
        let name = g.auto_scaling_group_name().unwrap_or_default().to_string();
        let launch_template = g.launch_template().and_then(|t| {
            let id = t.launch_template_id()?;
            let version = match t.version().unwrap_or("$Default") {
                "$Latest" => resolved.get(id).map(|v| v.0.to_string())?,
                "$Default" => resolved.get(id).map(|v| v.1.to_string())?,
                n => n.to_string(),
            };
            Some(format!("{id}:{version}"))
        });
        let instance_group = g
            .tags()
            .iter()
            .find(|t| t.key() == Some(TAG_INSTANCE_GROUP))
            .and_then(|t| t.value())
            .map(str::to_string);
        let mut instances = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        for member in g.instances() {
            let Some(id) = member.instance_id() else {
                continue;
            };
            seen.insert(id.to_string());
            let ec2 = ec2_instances.get(id);
            // EC2's own tags say what the instance was launched from; the
            // group's view is the fallback.
            let from_tags = ec2.and_then(|i| {
                let tid = tag_value(i.tags(), TAG_EC2_LAUNCH_TEMPLATE_ID)?;
                let v = tag_value(i.tags(), TAG_EC2_LAUNCH_TEMPLATE_VERSION)?;
                Some(format!("{tid}:{v}"))
            });
            let from_group = member.launch_template().and_then(|t| {
                Some(format!(
                    "{}:{}",
                    t.launch_template_id()?,
                    t.version().unwrap_or_default()
                ))
            });
            instances.push(Instance {
                id: id.to_string(),
                lifecycle_state: member
                    .lifecycle_state()
                    .map(|s| s.as_str().to_string())
                    .unwrap_or_default(),
                launch_template: from_tags.or(from_group),
                detached: false,
                zone: member.availability_zone().map(str::to_string),
                private_dns_name: ec2
                    .and_then(|i| i.private_dns_name())
                    .filter(|n| !n.is_empty())
                    .map(str::to_string),
                instance_type: member.instance_type().map(str::to_string),
                state: ec2
                    .and_then(|i| i.state())
                    .and_then(|s| s.name())
                    .map(|n| n.as_str().to_string()),
            });
        }
        for (id, i) in &ec2_instances {
            if seen.contains(id) || tag_value(i.tags(), TAG_DETACHED_FROM_ASG) != Some(&name) {
                continue;
            }
            let launch_template = match (
                tag_value(i.tags(), TAG_EC2_LAUNCH_TEMPLATE_ID),
                tag_value(i.tags(), TAG_EC2_LAUNCH_TEMPLATE_VERSION),
            ) {
                (Some(t), Some(v)) => Some(format!("{t}:{v}")),
                _ => None,
            };
            instances.push(Instance {
                id: id.clone(),
                lifecycle_state: "Detached".to_string(),
                launch_template,
                detached: true,
                zone: i
                    .placement()
                    .and_then(|p| p.availability_zone())
                    .map(str::to_string),
                private_dns_name: i
                    .private_dns_name()
                    .filter(|n| !n.is_empty())
                    .map(str::to_string),
                instance_type: i.instance_type().map(|t| t.as_str().to_string()),
                state: i
                    .state()
                    .and_then(|s| s.name())
                    .map(|n| n.as_str().to_string()),
            });
        }
        result.push(GroupInstances {
            name,
            instance_group,
            min_size: g.min_size().unwrap_or_default(),
            max_size: g.max_size().unwrap_or_default(),
            desired_capacity: g.desired_capacity().unwrap_or_default(),
            launch_template,
            instances,
        });
    }
    result.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(result)
}

async fn describe_groups(
    cloud: &AwsCloud,
    cluster: &str,
    filter: String,
    value: &str,
) -> Result<Vec<aws_sdk_autoscaling::types::AutoScalingGroup>, AwsError> {
    cloud
        .autoscaling()
        .describe_auto_scaling_groups()
        .filters(AsgFilter::builder().name(filter).values(value).build())
        .into_paginator()
        .items()
        .send()
        .collect::<Result<Vec<_>, _>>()
        .await
        .map_err(|e| AwsError::call("DescribeAutoScalingGroups", cluster, e))
}

/// The cluster's live instances (pending, running, stopping, stopped) by id.
async fn cluster_instances(
    cloud: &AwsCloud,
    cluster: &str,
) -> Result<BTreeMap<String, aws_sdk_ec2::types::Instance>, AwsError> {
    let reservations = cloud
        .ec2()
        .describe_instances()
        .filters(
            Filter::builder()
                .name(format!("tag:{TAG_CLUSTER}"))
                .values(cluster)
                .build(),
        )
        .filters(
            Filter::builder()
                .name("instance-state-name")
                .values("pending")
                .values("running")
                .values("stopping")
                .values("stopped")
                .build(),
        )
        .into_paginator()
        .items()
        .send()
        .collect::<Result<Vec<_>, _>>()
        .await
        .map_err(|e| AwsError::call("DescribeInstances", cluster, e))?;
    let mut out = BTreeMap::new();
    for r in reservations {
        for i in r.instances() {
            if let Some(id) = i.instance_id() {
                out.insert(id.to_string(), i.clone());
            }
        }
    }
    Ok(out)
}

/// Terminates a member of its group without lowering the group's desired
/// capacity, so the group launches a replacement.
pub async fn terminate_in_group(cloud: &AwsCloud, instance_id: &str) -> Result<(), AwsError> {
    match cloud
        .autoscaling()
        .terminate_instance_in_auto_scaling_group()
        .instance_id(instance_id)
        .should_decrement_desired_capacity(false)
        .send()
        .await
    {
        Ok(_) => Ok(()),
        Err(e) => Err(AwsError::call(
            "TerminateInstanceInAutoScalingGroup",
            instance_id,
            e,
        )),
    }
}

/// Terminates an instance outside any group (one detached for surge). An
/// instance that is already gone is not an error.
pub async fn terminate_instance(cloud: &AwsCloud, instance_id: &str) -> Result<(), AwsError> {
    use aws_smithy_types::error::metadata::ProvideErrorMetadata;
    match cloud
        .ec2()
        .terminate_instances()
        .instance_ids(instance_id)
        .send()
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if e.code() == Some("InvalidInstanceID.NotFound") => Ok(()),
        Err(e) => Err(AwsError::call("TerminateInstances", instance_id, e)),
    }
}

/// Detaches an instance from its group for surge: first tags it with the
/// group's name (so a later run still finds and replaces it), then detaches
/// it without lowering the desired capacity, so the group launches its
/// replacement while the old instance keeps serving.
pub async fn detach_for_surge(
    cloud: &AwsCloud,
    group: &str,
    instance_id: &str,
) -> Result<(), AwsError> {
    cloud
        .ec2()
        .create_tags()
        .resources(instance_id)
        .tags(
            Tag::builder()
                .key(TAG_DETACHED_FROM_ASG)
                .value(group)
                .build(),
        )
        .send()
        .await
        .map_err(|e| AwsError::call("CreateTags", instance_id, e))?;
    cloud
        .autoscaling()
        .detach_instances()
        .auto_scaling_group_name(group)
        .instance_ids(instance_id)
        .should_decrement_desired_capacity(false)
        .send()
        .await
        .map_err(|e| AwsError::call("DetachInstances", instance_id, e))?;
    Ok(())
}

/// The cluster's live instances' addresses and roles, by id (one
/// `DescribeInstances` call, filtered by the cluster tag).
pub async fn instance_details(
    cloud: &AwsCloud,
    cluster: &str,
) -> Result<BTreeMap<String, InstanceDetails>, AwsError> {
    let instances = cluster_instances(cloud, cluster).await?;
    Ok(instances
        .into_iter()
        .map(|(id, i)| {
            let mut roles: Vec<String> = i
                .tags()
                .iter()
                .filter_map(|t| t.key()?.strip_prefix(TAG_ROLE_PREFIX))
                .map(|r| match r {
                    "master" => "control-plane".to_string(),
                    other => other.to_string(),
                })
                .collect();
            roles.sort();
            roles.dedup();
            let details = InstanceDetails {
                private_ip: i.private_ip_address().map(str::to_string),
                public_ip: i.public_ip_address().map(str::to_string),
                roles,
                instance_type: i.instance_type().map(|t| t.as_str().to_string()),
                image_id: i.image_id().map(str::to_string),
            };
            (id, details)
        })
        .collect())
}
