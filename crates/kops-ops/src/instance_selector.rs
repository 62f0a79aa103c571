//! `kops toolbox instance-selector`: node instance groups chosen by
//! resources (vCPUs, memory, architecture, GPUs, usage class, ...) rather
//! than by instance type, from EC2's instance type data in the cluster's
//! region. Each group gets the matching types as its mixed-instances
//! policy (the first as its machine type); with `--ig-count N`, N groups
//! with vCPU-to-memory ratios starting at the given one (1:2 by default)
//! and doubling.

use kops_api::{Cluster, InstanceGroup, Role};
use kops_aws::instance_types::InstanceTypeInfo;

use crate::{flag_error, OpsError, Registry};

/// The machine types of the cluster's cloud and region (EC2's on AWS;
/// other clouds are refused with one line).
pub async fn instance_types(cluster: &Cluster) -> Result<Vec<InstanceTypeInfo>, OpsError> {
    crate::cloud::of(cluster)?.instance_types(cluster).await
}

/// A closed range; either end may be open.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Range {
    pub min: Option<f64>,
    pub max: Option<f64>,
}

impl Range {
    fn contains(&self, v: f64) -> bool {
        self.min.is_none_or(|m| v >= m) && self.max.is_none_or(|m| v <= m)
    }
}

/// The filters (the instance-selector flags).
#[derive(Debug, Clone, Default)]
pub struct Filters {
    pub vcpus: Range,
    /// MiB.
    pub memory: Range,
    /// Memory GiB per vCPU (`1:2` is 2).
    pub vcpus_to_memory_ratio: Option<f64>,
    /// `x86_64` (also `amd64`) or `arm64`.
    pub cpu_architecture: String,
    pub gpus: Range,
    /// MiB, all GPUs together.
    pub gpu_memory: Range,
    pub placement_group_strategy: Option<String>,
    /// `on-demand` or `spot`.
    pub usage_class: String,
    pub ena_support: Option<bool>,
    pub burst_support: Option<bool>,
    pub network_interfaces: Range,
    /// Gbps.
    pub network_performance: Range,
    pub allow_list: Option<String>,
    pub deny_list: Option<String>,
    pub base_instance_type: Option<String>,
    pub flexible: bool,
    pub max_results: usize,
}

/// The groups' settings (not filters).
#[derive(Debug, Clone, Default)]
pub struct GroupOptions {
    pub cluster: String,
    pub name: String,
    pub count: usize,
    pub node_count_min: i64,
    pub node_count_max: i64,
    pub node_volume_size: Option<i64>,
    pub node_security_groups: Vec<String>,
    pub cluster_autoscaler: bool,
    /// `--subnets`: the cluster's subnets by name (default: all).
    pub subnets: Vec<String>,
    pub dry_run: bool,
}

/// The Gbps of EC2's network performance text (`Up to 12.5 Gigabit` is
/// 12.5, `Low` and `Moderate` are below 1).
fn gbps(text: &str) -> f64 {
    let number = text.split_whitespace().find_map(|w| w.parse::<f64>().ok());
    match (number, text) {
        (Some(n), t) if t.contains("Megabit") => n / 1000.0,
        (Some(n), _) => n,
        (None, t) if t.contains("Very Low") => 0.05,
        (None, t) if t.contains("Low") => 0.1,
        (None, t) if t.contains("Moderate") => 0.5,
        (None, t) if t.contains("High") => 10.0,
        _ => 0.0,
    }
}

/// The types matching `filters` (at most `max_results`, by name).
pub fn select(types: &[InstanceTypeInfo], filters: &Filters) -> Result<Vec<String>, OpsError> {
    let regex = |flag: &str, text: &Option<String>| {
        text.as_deref()
            .map(|t| {
                regex::Regex::new(t).map_err(|e| {
                    flag_error(
                        flag,
                        &format!("`{t}` is not a regular expression: {e}"),
                        "write e.g. `m[5-6]\\..*`",
                    )
                })
            })
            .transpose()
    };
    let allow = regex("--allow-list", &filters.allow_list)?;
    let deny = regex("--deny-list", &filters.deny_list)?;
    let arch = match filters.cpu_architecture.as_str() {
        "" | "amd64" | "x86_64" => "x86_64",
        other => other,
    };
    let mut f = filters.clone();
    if let Some(base) = &filters.base_instance_type {
        let b = types.iter().find(|t| &t.name == base).ok_or_else(|| {
            flag_error(
                "--base-instance-type",
                &format!("`{base}` is not an instance type of this region"),
                "name an instance type EC2 offers here, e.g. m5.large",
            )
        })?;
        // Types like the base one: its vCPUs and memory, its architecture.
        if f.vcpus == Range::default() {
            f.vcpus = Range {
                min: Some(b.vcpus as f64),
                max: Some(b.vcpus as f64),
            };
        }
        if f.memory == Range::default() {
            f.memory = Range {
                min: Some(b.memory_mib as f64),
                max: Some(b.memory_mib as f64),
            };
        }
    }
    if filters.flexible {
        // kops' flexible defaults: 4 vCPUs, 1:2 (set by the caller for the ratio).
        if f.vcpus == Range::default() {
            f.vcpus = Range {
                min: Some(4.0),
                max: Some(4.0),
            };
        }
    }
    let selected: Vec<String> = types
        .iter()
        .filter(|t| {
            let vcpus = t.vcpus as f64;
            let gib = t.memory_mib as f64 / 1024.0;
            f.vcpus.contains(vcpus)
                && f.memory.contains(t.memory_mib as f64)
                && f.vcpus_to_memory_ratio
                    .is_none_or(|r| vcpus > 0.0 && ((gib / vcpus) - r).abs() < 1e-6)
                && t.architectures.iter().any(|a| a == arch)
                && f.gpus.contains(t.gpus as f64)
                && f.gpu_memory.contains(t.gpu_memory_mib as f64)
                && f.placement_group_strategy
                    .as_ref()
                    .is_none_or(|s| t.placement_group_strategies.contains(s))
                && t.usage_classes.contains(&f.usage_class)
                && f.ena_support.is_none_or(|e| t.ena == e)
                && f.burst_support.is_none_or(|b| t.burstable == b)
                && f.network_interfaces
                    .contains(t.max_network_interfaces as f64)
                && f.network_performance.contains(gbps(&t.network_performance))
                && allow.as_ref().is_none_or(|r| r.is_match(&t.name))
                && !deny.as_ref().is_some_and(|r| r.is_match(&t.name))
        })
        .map(|t| t.name.clone())
        .take(if f.max_results == 0 {
            usize::MAX
        } else {
            f.max_results
        })
        .collect();
    Ok(selected)
}

/// The instance groups to create (stored unless `dry_run`).
pub async fn instance_selector(
    registry: &Registry,
    cluster: &Cluster,
    types: &[InstanceTypeInfo],
    filters: &Filters,
    options: &GroupOptions,
) -> Result<Vec<InstanceGroup>, OpsError> {
    let cluster_subnets: Vec<String> = cluster
        .spec
        .subnets
        .iter()
        .flatten()
        .map(|s| s.name.clone())
        .collect();
    let subnets = if options.subnets.is_empty() {
        cluster_subnets.clone()
    } else {
        for s in &options.subnets {
            if !cluster_subnets.contains(s) && !options.dry_run {
                return Err(flag_error(
                    "--subnets",
                    &format!(
                        "subnet `{s}` is not one of the cluster's ({})",
                        cluster_subnets.join(", ")
                    ),
                    "name subnets of the cluster",
                ));
            }
        }
        let utility = options
            .subnets
            .iter()
            .filter(|s| s.starts_with("utility-"))
            .count();
        if utility != 0 && utility != options.subnets.len() {
            return Err(flag_error(
                "--subnets",
                "an instance group cannot span public (utility) and private subnets",
                "name only utility subnets, or none",
            ));
        }
        options.subnets.clone()
    };
    let existing = registry.list_instance_groups(&options.cluster).await?;
    let count = options.count.max(1);
    let mut f = filters.clone();
    if (count > 1 || filters.flexible) && f.vcpus_to_memory_ratio.is_none() {
        f.vcpus_to_memory_ratio = Some(2.0);
    }
    let mut out = Vec::new();
    for i in 0..count {
        let name = if count == 1 {
            options.name.clone()
        } else {
            format!("{}{}", options.name, i + 1)
        };
        let selected = select(types, &f)?;
        if selected.is_empty() {
            return Err(OpsError::Flags(vec![kops_api::validation::FieldError::new(
                "instance-selector",
                "no instance types were returned because the criteria specified was too narrow",
            )
            .hint("widen the filters (--vcpus-min/--vcpus-max, --memory-min/--memory-max, --usage-class, ...)")]));
        }
        let mut ig = kops_api::defaults::default_instance_group(
            cluster,
            &existing,
            &name,
            Role::Node,
            &subnets,
        )
        .map_err(OpsError::Flags)?;
        ig.spec.machine_type = Some(selected[0].clone());
        ig.spec.min_size = Some(options.node_count_min);
        ig.spec.max_size = Some(options.node_count_max);
        if let Some(size) = options.node_volume_size {
            ig.spec
                .root_volume
                .get_or_insert_with(Default::default)
                .size = Some(size);
        }
        if !options.node_security_groups.is_empty() {
            ig.spec.additional_security_groups = Some(options.node_security_groups.clone());
        }
        let mut policy = kops_api::instance_group::MixedInstancesPolicy {
            instances: Some(selected),
            ..Default::default()
        };
        if f.usage_class == "spot" {
            policy.on_demand_base = Some(0);
            policy.on_demand_above_base = Some(0);
            policy.spot_allocation_strategy = Some("capacity-optimized".into());
        }
        ig.spec.mixed_instances_policy = Some(policy);
        if options.cluster_autoscaler {
            let labels = ig.spec.cloud_labels.get_or_insert_with(Default::default);
            labels.insert("k8s.io/cluster-autoscaler/enabled".into(), "1".into());
            labels.insert(
                format!("k8s.io/cluster-autoscaler/{}", options.cluster),
                "1".into(),
            );
        }
        out.push(ig);
        if count > 1 {
            f.vcpus_to_memory_ratio = f.vcpus_to_memory_ratio.map(|r| r * 2.0);
        }
    }
    if !options.dry_run {
        for ig in &out {
            let mut ig = ig.clone();
            crate::stamp(&mut ig.metadata);
            crate::validate_result(registry, &options.cluster, Some(cluster), &[&ig], None).await?;
            if registry
                .get_instance_group(&options.cluster, ig.name())
                .await?
                .is_some()
            {
                return Err(OpsError::InstanceGroupExists {
                    cluster: options.cluster.clone(),
                    name: ig.name().to_string(),
                });
            }
            registry.put_instance_group(&options.cluster, &ig).await?;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(name: &str, vcpus: i64, mib: i64, arch: &str) -> InstanceTypeInfo {
        InstanceTypeInfo {
            name: name.into(),
            vcpus,
            memory_mib: mib,
            architectures: vec![arch.into()],
            usage_classes: vec!["on-demand".into(), "spot".into()],
            ..Default::default()
        }
    }

    #[test]
    fn filters_by_vcpus_memory_ratio_architecture_and_lists() {
        let types = [
            t("c5.large", 2, 4096, "x86_64"),
            t("m5.large", 2, 8192, "x86_64"),
            t("m5.xlarge", 4, 16384, "x86_64"),
            t("m6g.xlarge", 4, 16384, "arm64"),
        ];
        let base = Filters {
            usage_class: "on-demand".into(),
            cpu_architecture: "amd64".into(),
            ..Default::default()
        };
        let f = Filters {
            vcpus: Range {
                min: Some(4.0),
                max: None,
            },
            ..base.clone()
        };
        assert_eq!(select(&types, &f).unwrap(), ["m5.xlarge"]);
        let f = Filters {
            vcpus_to_memory_ratio: Some(2.0),
            ..base.clone()
        };
        assert_eq!(select(&types, &f).unwrap(), ["c5.large"]);
        let f = Filters {
            cpu_architecture: "arm64".into(),
            ..base.clone()
        };
        assert_eq!(select(&types, &f).unwrap(), ["m6g.xlarge"]);
        let f = Filters {
            deny_list: Some("^m5\\.".into()),
            ..base.clone()
        };
        assert_eq!(select(&types, &f).unwrap(), ["c5.large"]);
        let f = Filters {
            base_instance_type: Some("m5.large".into()),
            ..base.clone()
        };
        assert_eq!(select(&types, &f).unwrap(), ["m5.large"]);
        let f = Filters {
            allow_list: Some("(".into()),
            ..base
        };
        assert!(select(&types, &f).is_err());
        assert_eq!(gbps("Up to 12.5 Gigabit"), 12.5);
    }
}
