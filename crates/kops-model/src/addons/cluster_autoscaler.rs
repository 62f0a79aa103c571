//! cluster-autoscaler (`cluster-autoscaler.addons.k8s.io`) on AWS: resizes
//! the node groups' autoscaling groups within their `minSize`/`maxSize` as
//! pods wait for room or nodes sit idle.
//!
//! From `spec.clusterAutoscaler`: `image` (default: the release matching
//! the Kubernetes minor version), `expander` (`random`; `priority` also
//! writes the priorities ConfigMap from the groups' `autoscalePriority` or
//! `customPriorityExpanderConfig`, unless `createPriorityExpenderConfig` is
//! false), the scale-down and node-group flags, `cpuRequest`,
//! `memoryRequest`, `podAnnotations`. Node groups with `autoscale: false`
//! are left alone. With service-account roles it may run on workers and
//! assumes its own role.

use std::collections::BTreeMap;

use kops_api::Role;
use serde_json::{json, Value};

use super::{service_account_role, template, TemplateError};
use crate::Model;

const TEMPLATE: &str = include_str!("cluster_autoscaler/manifest.yaml");
const SERVICE_ACCOUNT: &str = "cluster-autoscaler";

pub(super) fn objects(model: &Model<'_>) -> Result<Option<Vec<Value>>, TemplateError> {
    let Some(context) = context(model) else {
        return Ok(None);
    };
    let mut objects = template::render("cluster-autoscaler.addons.k8s.io", TEMPLATE, &context)?;
    Ok(service_account_role::add(model, &mut objects, &[SERVICE_ACCOUNT]).map(|()| objects))
}

/// The image kops picks for the cluster's Kubernetes minor version.
fn default_image(kubernetes_version: &str) -> Option<&'static str> {
    let minor: u32 = kubernetes_version
        .trim_start_matches('v')
        .split('.')
        .nth(1)?
        .parse()
        .ok()?;
    Some(match minor {
        32 => "registry.k8s.io/autoscaling/cluster-autoscaler:v1.32.7",
        33 => "registry.k8s.io/autoscaling/cluster-autoscaler:v1.33.5",
        34 => "registry.k8s.io/autoscaling/cluster-autoscaler:v1.34.4",
        35 => "registry.k8s.io/autoscaling/cluster-autoscaler:v1.35.1",
        _ => "registry.k8s.io/autoscaling/cluster-autoscaler:v1.36.0",
    })
}

/// The `--nodes` flags on Google Cloud: kops makes one managed instance
/// group per zone of a group, each its own node group with its share of the
/// group's sizes (zones that can hold none are left out), sorted as kops
/// sorts them (by group, then zone).
fn gce_node_groups(model: &Model<'_>, nodes: &[&kops_api::InstanceGroup]) -> Vec<String> {
    let project = model.cluster.spec.project.as_deref().unwrap_or_default();
    let mut flags = BTreeMap::new();
    for group in nodes {
        let zones = group.spec.zones.clone().unwrap_or_default();
        let min = split_across(group.spec.min_size.unwrap_or(0), zones.len());
        let max = split_across(group.spec.max_size.unwrap_or(0), zones.len());
        for (i, zone) in zones.iter().enumerate() {
            if zones.len() > 1 && max[i] == 0 {
                continue;
            }
            let key = if zones.len() > 1 {
                format!("{}-{zone}", group.name())
            } else {
                group.name().to_string()
            };
            let short_zone = zone.rsplit('-').next().unwrap_or(zone);
            let manager = kops_api::names::truncate_with_hash(
                &kops_api::names::gce_safe_cluster_name(&format!(
                    "{short_zone}.{}-{}",
                    group.name(),
                    model.name()
                )),
                63,
            );
            flags.insert(
                key,
                format!(
                    "--nodes={}:{}:https://www.googleapis.com/compute/v1/projects/{project}/zones/{zone}/instanceGroups/{manager}",
                    min[i], max[i]
                ),
            );
        }
    }
    flags.into_values().collect()
}

/// `count` spread over `zones` as kops spreads a group's size: equal
/// shares, the remainder one each from the first zone on.
fn split_across(count: i64, zones: usize) -> Vec<i64> {
    let n = zones.max(1) as i64;
    (0..zones as i64)
        .map(|i| count / n + i64::from(i < count % n))
        .collect()
}

fn context(model: &Model<'_>) -> Option<Value> {
    let spec = &model.cluster.spec;
    let cas = spec.cluster_autoscaler.as_ref()?;
    let extra = |key: &str| cas.extra.get(key).filter(|v| !v.is_null());
    let text = |key: &str, default: &str| -> String {
        match extra(key) {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            Some(Value::String(_)) | None => default.to_string(),
            Some(other) => other.to_string(),
        }
    };
    let flag = |key: &str, default: bool| -> bool {
        extra(key).and_then(Value::as_bool).unwrap_or(default)
    };
    let image = match extra("image").and_then(Value::as_str) {
        Some(image) => image.to_string(),
        None => default_image(spec.kubernetes_version.as_deref()?)?.to_string(),
    };
    let expander = cas
        .expander
        .clone()
        .filter(|e| !e.is_empty())
        .unwrap_or_else(|| "random".into());
    let region = crate::iam::region(model)?;
    let mut nodes: Vec<_> = model
        .groups_with(Role::Node)
        .filter(|g| g.spec.autoscale != Some(false))
        .collect();
    nodes.sort_by(|a, b| a.name().cmp(b.name()));
    let mut command = vec![
        "./cluster-autoscaler".to_string(),
        format!(
            "--balance-similar-node-groups={}",
            flag("balanceSimilarNodeGroups", false)
        ),
        format!(
            "--emit-per-nodegroup-metrics={}",
            flag("emitPerNodegroupMetrics", false)
        ),
    ];
    let gce = spec.cloud_provider.as_deref() == Some("gce");
    if gce {
        command.push("--cloud-provider=gce".to_string());
    } else {
        command.push("--cloud-provider=aws".to_string());
        command.push(format!(
            "--aws-use-static-instance-list={}",
            flag("awsUseStaticInstanceList", false)
        ));
    }
    command.push(format!("--expander={expander}"));
    if gce {
        command.extend(gce_node_groups(model, &nodes));
    } else {
        for group in nodes {
            command.push(format!(
                "--nodes={}:{}:{}.{}",
                group.spec.min_size.unwrap_or(0),
                group.spec.max_size.unwrap_or(0),
                group.name(),
                model.name()
            ));
        }
    }
    command.extend([
        format!(
            "--ignore-daemonsets-utilization={}",
            flag("ignoreDaemonSetsUtilization", false)
        ),
        format!(
            "--scale-down-utilization-threshold={}",
            text("scaleDownUtilizationThreshold", "0.5")
        ),
        format!(
            "--skip-nodes-with-custom-controller-pods={}",
            flag("skipNodesWithCustomControllerPods", true)
        ),
        format!(
            "--skip-nodes-with-local-storage={}",
            flag("skipNodesWithLocalStorage", true)
        ),
        format!(
            "--skip-nodes-with-system-pods={}",
            flag("skipNodesWithSystemPods", true)
        ),
        format!(
            "--scale-down-delay-after-add={}",
            text("scaleDownDelayAfterAdd", "10m0s")
        ),
        format!(
            "--scale-down-unneeded-time={}",
            text("scaleDownUnneededTime", "10m0s")
        ),
        format!(
            "--scale-down-unready-time={}",
            text("scaleDownUnreadyTime", "20m0s")
        ),
        format!(
            "--new-pod-scale-up-delay={}",
            text("newPodScaleUpDelay", "0s")
        ),
        format!(
            "--max-node-provision-time={}",
            text("maxNodeProvisionTime", "15m0s")
        ),
        format!(
            "--cordon-node-before-terminating={}",
            flag("cordonNodeBeforeTerminating", true)
        ),
        "--logtostderr=true".to_string(),
        "--stderrthreshold=info".to_string(),
        "--v=4".to_string(),
    ]);
    let mut annotations = BTreeMap::from([
        ("prometheus.io/port".to_string(), "8085".to_string()),
        ("prometheus.io/scrape".to_string(), "true".to_string()),
    ]);
    for (key, value) in cas.pod_annotations.iter().flatten() {
        annotations.insert(key.clone(), value.clone());
    }
    let priorities = (expander == "priority" && flag("createPriorityExpenderConfig", true))
        .then(|| priorities(model, extra("customPriorityExpanderConfig")));
    let control_planes = model.groups_with(Role::ControlPlane).count();
    Some(json!({
        "irsa": crate::iam::irsa::uses_service_account_permissions(model),
        "replicas": if control_planes > 1 { 2 } else { 1 },
        "image": image,
        "command": command,
        "region": if gce { Value::Null } else { json!(region) },
        "annotations": annotations,
        "priorities": priorities,
        "cpu_request": text("cpuRequest", "100m"),
        "memory_request": text("memoryRequest", "300Mi"),
    }))
}

/// The priority expander's configuration: each priority (sorted as text,
/// as kops does) with its autoscaling groups, from
/// `customPriorityExpanderConfig` or the node groups that set `autoscale`.
fn priorities(model: &Model<'_>, custom: Option<&Value>) -> String {
    let mut by_priority: BTreeMap<String, Vec<String>> = BTreeMap::new();
    match custom.and_then(Value::as_object) {
        Some(custom) => {
            for (priority, groups) in custom {
                let groups = groups.as_array().into_iter().flatten();
                by_priority.insert(
                    priority.clone(),
                    groups
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect(),
                );
            }
        }
        None => {
            let mut nodes: Vec<_> = model
                .groups_with(Role::Node)
                .filter(|g| g.spec.autoscale.is_some())
                .collect();
            nodes.sort_by(|a, b| a.name().cmp(b.name()));
            for group in nodes {
                let priority = group.spec.autoscale_priority.unwrap_or(0).to_string();
                by_priority.entry(priority).or_default().push(format!(
                    "{}.{}",
                    group.name(),
                    model.name()
                ));
            }
        }
    }
    let mut lines = Vec::new();
    for (priority, groups) in by_priority {
        lines.push(format!("{priority}:"));
        lines.extend(groups.into_iter().map(|g| format!("- {g}")));
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addons::tests::compare_golden_in_account;

    const KEY: &str = "cluster-autoscaler.addons.k8s.io";

    #[test]
    fn identical_to_kops_in_every_case() {
        let (identical, placeholders) = compare_golden_in_account(KEY, |_, _| {});
        assert_eq!(placeholders, 0);
        if kops_testkit::shared_dir().is_some() {
            assert!(identical > 0);
        }
    }

    #[test]
    fn images_follow_the_kubernetes_minor_version() {
        assert_eq!(
            default_image("v1.33.2"),
            Some("registry.k8s.io/autoscaling/cluster-autoscaler:v1.33.5")
        );
        assert_eq!(
            default_image("1.40.0"),
            Some("registry.k8s.io/autoscaling/cluster-autoscaler:v1.36.0")
        );
        assert_eq!(default_image("latest"), None);
    }
}
