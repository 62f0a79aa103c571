//! `kops toolbox instance-selector NAME`: node instance groups chosen by
//! resources (vCPUs, memory, architecture, GPUs, usage class) from EC2's
//! instance type data in the cluster's region, stored (or printed with
//! --dry-run) with the matching types as their mixed-instances policy.

use anyhow::{bail, Result};
use clap::Args;
use kops_api::manifest::to_json_value;
use kops_ops::instance_selector::{Filters, GroupOptions, Range};

use crate::args::{bool_flag, GlobalArgs, ManifestOutput};
use crate::context::{cluster_name, state};
use crate::output::print_objects;

#[derive(Debug, Args)]
pub struct InstanceSelectorArgs {
    /// Name of the instance group to create (with --ig-count, a prefix).
    #[arg(value_name = "INSTANCE_GROUP")]
    pub group: String,
    /// Minimum number of nodes.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub node_count_min: i64,
    /// Maximum number of nodes.
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub node_count_max: i64,
    /// Instance volume size (in GiB) for nodes.
    #[arg(long, value_name = "GIB")]
    pub node_volume_size: Option<i64>,
    /// Pre-created additional security groups for nodes.
    #[arg(long, value_delimiter = ',', value_name = "IDS")]
    pub node_security_groups: Vec<String>,
    /// Add auto-discovery tags for cluster-autoscaler (default true).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value = "true", value_parser = bool_flag, value_name = "BOOL")]
    pub cluster_autoscaler: bool,
    /// Base instance type to retrieve similarly specified instance types.
    #[arg(long, value_name = "TYPE")]
    pub base_instance_type: Option<String>,
    /// Types spanning generations with opinionated defaults (4 vCPUs, 1:2).
    #[arg(long)]
    pub flexible: bool,
    /// Number of instance groups, with vcpus-to-memory ratios from 1:2, doubling.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub ig_count: usize,
    /// Number of vcpus available to the instance type.
    #[arg(long, value_name = "N")]
    pub vcpus: Option<f64>,
    #[arg(long, value_name = "N")]
    pub vcpus_min: Option<f64>,
    #[arg(long, value_name = "N")]
    pub vcpus_max: Option<f64>,
    /// Amount of memory available (e.g. 4gb).
    #[arg(long, value_name = "SIZE")]
    pub memory: Option<String>,
    #[arg(long, value_name = "SIZE")]
    pub memory_min: Option<String>,
    #[arg(long, value_name = "SIZE")]
    pub memory_max: Option<String>,
    /// Ratio of vcpus to memory in GiB (e.g. 1:2).
    #[arg(long, value_name = "RATIO")]
    pub vcpus_to_memory_ratio: Option<String>,
    /// CPU architecture [amd64, arm64].
    #[arg(long, default_value = "amd64", value_parser = ["amd64", "arm64", "x86_64"], value_name = "ARCH")]
    pub cpu_architecture: String,
    /// Number of GPUs.
    #[arg(long, value_name = "N")]
    pub gpus: Option<f64>,
    #[arg(long, value_name = "N")]
    pub gpus_min: Option<f64>,
    #[arg(long, value_name = "N")]
    pub gpus_max: Option<f64>,
    /// GPUs' total memory (e.g. 4gb).
    #[arg(long, value_name = "SIZE")]
    pub gpu_memory: Option<String>,
    #[arg(long, value_name = "SIZE")]
    pub gpu_memory_min: Option<String>,
    #[arg(long, value_name = "SIZE")]
    pub gpu_memory_max: Option<String>,
    /// Placement group strategy: [cluster, partition, spread].
    #[arg(long, value_parser = ["cluster", "partition", "spread"], value_name = "STRATEGY")]
    pub placement_group_strategy: Option<String>,
    /// Usage class: [spot, on-demand].
    #[arg(long, default_value = "on-demand", value_parser = ["spot", "on-demand"], value_name = "CLASS")]
    pub usage_class: String,
    /// Instance types where ENA is supported or required.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_parser = bool_flag, value_name = "BOOL")]
    pub ena_support: Option<bool>,
    /// Burstable instance types.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_parser = bool_flag, value_name = "BOOL")]
    pub burst_support: Option<bool>,
    /// Subnet(s) of the cluster for the instance group (default: all).
    #[arg(long, value_delimiter = ',', value_name = "SUBNETS")]
    pub subnets: Vec<String>,
    /// Number of network interfaces (ENIs) that can be attached.
    #[arg(long, value_name = "N")]
    pub network_interfaces: Option<f64>,
    #[arg(long, value_name = "N")]
    pub network_interfaces_min: Option<f64>,
    #[arg(long, value_name = "N")]
    pub network_interfaces_max: Option<f64>,
    /// Bandwidth in Gbps.
    #[arg(long, value_name = "GBPS")]
    pub network_performance: Option<f64>,
    #[arg(long, value_name = "GBPS")]
    pub network_performance_min: Option<f64>,
    #[arg(long, value_name = "GBPS")]
    pub network_performance_max: Option<f64>,
    /// Allowed instance types, a regular expression (e.g. m[3-5]\..*).
    #[arg(long, value_name = "REGEX")]
    pub allow_list: Option<String>,
    /// Excluded instance types, a regular expression (e.g. m[1-2]\..*).
    #[arg(long, value_name = "REGEX")]
    pub deny_list: Option<String>,
    /// Maximum number of instance types to return back.
    #[arg(long, default_value_t = 20, value_name = "N")]
    pub max_results: usize,
    /// Only print the groups that would be created.
    #[arg(long)]
    pub dry_run: bool,
    /// Output format: yaml or json.
    #[arg(short = 'o', long, default_value = "yaml", value_name = "FORMAT")]
    pub output: String,
}

/// `N` alone, or the `-min`/`-max` pair.
fn range(exact: Option<f64>, min: Option<f64>, max: Option<f64>) -> Range {
    match exact {
        Some(v) => Range {
            min: Some(v),
            max: Some(v),
        },
        None => Range { min, max },
    }
}

/// A size like `4gb`, `512mb`, `2GiB` or `4096` (MiB), in MiB.
fn mib(flag: &str, text: &Option<String>) -> Result<Option<f64>> {
    let Some(text) = text else { return Ok(None) };
    let t = text.trim().to_ascii_lowercase();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let Ok(n) = number.parse::<f64>() else {
        bail!("--{flag} {text}: not a size\nhint: write e.g. `4gb` or `512mb`");
    };
    let factor = match unit.trim().trim_end_matches('b').trim_end_matches('i') {
        "" | "m" => 1.0,
        "k" => 1.0 / 1024.0,
        "g" => 1024.0,
        "t" => 1024.0 * 1024.0,
        _ => bail!("--{flag} {text}: unknown unit\nhint: write e.g. `4gb` or `512mb`"),
    };
    Ok(Some(n * factor))
}

pub async fn run(global: &GlobalArgs, a: InstanceSelectorArgs) -> Result<i32> {
    let format = match a.output.as_str() {
        "yaml" => ManifestOutput::Yaml,
        "json" => ManifestOutput::Json,
        other => bail!("unsupported output type `{other}`\nhint: use `-o yaml` or `-o json`"),
    };
    let ratio = a
        .vcpus_to_memory_ratio
        .as_deref()
        .map(|r| {
            let parts: Vec<&str> = r.split(':').collect();
            match parts.as_slice() {
                [v, m] => match (v.trim().parse::<f64>(), m.trim().parse::<f64>()) {
                    (Ok(v), Ok(m)) if v > 0.0 => Ok(m / v),
                    _ => Err(anyhow::anyhow!(
                        "--vcpus-to-memory-ratio {r}: not a ratio\nhint: write e.g. `1:2`"
                    )),
                },
                _ => Err(anyhow::anyhow!(
                    "--vcpus-to-memory-ratio {r}: not a ratio\nhint: write e.g. `1:2`"
                )),
            }
        })
        .transpose()?;
    let filters = Filters {
        vcpus: range(a.vcpus, a.vcpus_min, a.vcpus_max),
        memory: range(
            mib("memory", &a.memory)?,
            mib("memory-min", &a.memory_min)?,
            mib("memory-max", &a.memory_max)?,
        ),
        vcpus_to_memory_ratio: ratio,
        cpu_architecture: a.cpu_architecture,
        gpus: range(a.gpus, a.gpus_min, a.gpus_max),
        gpu_memory: range(
            mib("gpu-memory", &a.gpu_memory)?,
            mib("gpu-memory-min", &a.gpu_memory_min)?,
            mib("gpu-memory-max", &a.gpu_memory_max)?,
        ),
        placement_group_strategy: a.placement_group_strategy,
        usage_class: a.usage_class,
        ena_support: a.ena_support,
        burst_support: a.burst_support,
        network_interfaces: range(
            a.network_interfaces,
            a.network_interfaces_min,
            a.network_interfaces_max,
        ),
        network_performance: range(
            a.network_performance,
            a.network_performance_min,
            a.network_performance_max,
        ),
        allow_list: a.allow_list,
        deny_list: a.deny_list,
        base_instance_type: a.base_instance_type,
        flexible: a.flexible,
        max_results: a.max_results,
    };
    let registry = state(global).await?;
    let cluster = cluster_name(&registry, global, None).await?;
    let spec = kops_ops::require_cluster(&registry, &cluster).await?;
    let types = kops_ops::instance_selector::instance_types(&spec).await?;
    let options = GroupOptions {
        cluster: cluster.clone(),
        name: a.group,
        count: a.ig_count,
        node_count_min: a.node_count_min,
        node_count_max: a.node_count_max,
        node_volume_size: a.node_volume_size,
        node_security_groups: a.node_security_groups,
        cluster_autoscaler: a.cluster_autoscaler,
        subnets: a.subnets,
        dry_run: a.dry_run,
    };
    let groups = kops_ops::instance_selector::instance_selector(
        &registry, &spec, &types, &filters, &options,
    )
    .await?;
    let values: Vec<serde_json::Value> = groups.iter().map(to_json_value).collect();
    print_objects(&values, format);
    Ok(0)
}
