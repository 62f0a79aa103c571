//! EC2's instance type data (DescribeInstanceTypes), for `kops toolbox
//! instance-selector`: the facts its filters read.

use crate::{AwsCloud, AwsError};

/// One instance type as the selector sees it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InstanceTypeInfo {
    pub name: String,
    pub vcpus: i64,
    pub memory_mib: i64,
    /// `x86_64`, `arm64`, ...
    pub architectures: Vec<String>,
    pub gpus: i64,
    pub gpu_memory_mib: i64,
    /// `spot`, `on-demand`.
    pub usage_classes: Vec<String>,
    /// `cluster`, `partition`, `spread`.
    pub placement_group_strategies: Vec<String>,
    /// ENA `supported` or `required`.
    pub ena: bool,
    pub burstable: bool,
    pub max_network_interfaces: i64,
    /// The text EC2 gives (`Up to 12.5 Gigabit`, `25 Gigabit`).
    pub network_performance: String,
    pub current_generation: bool,
}

/// Every instance type offered in the cloud's region.
pub async fn instance_types(cloud: &AwsCloud) -> Result<Vec<InstanceTypeInfo>, AwsError> {
    let mut out = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let page = cloud
            .ec2()
            .describe_instance_types()
            .set_next_token(token.clone())
            .send()
            .await
            .map_err(|e| AwsError::call("DescribeInstanceTypes", cloud.region(), e))?;
        for t in page.instance_types() {
            let gpus = t.gpu_info();
            out.push(InstanceTypeInfo {
                name: t
                    .instance_type()
                    .map(|i| i.as_str().to_string())
                    .unwrap_or_default(),
                vcpus: t
                    .v_cpu_info()
                    .and_then(|v| v.default_v_cpus())
                    .unwrap_or(0)
                    .into(),
                memory_mib: t.memory_info().and_then(|m| m.size_in_mib()).unwrap_or(0),
                architectures: t
                    .processor_info()
                    .map(|p| {
                        p.supported_architectures()
                            .iter()
                            .map(|a| a.as_str().to_string())
                            .collect()
                    })
                    .unwrap_or_default(),
                gpus: gpus
                    .map(|g| {
                        g.gpus()
                            .iter()
                            .map(|d| i64::from(d.count().unwrap_or(0)))
                            .sum()
                    })
                    .unwrap_or(0),
                gpu_memory_mib: gpus
                    .and_then(|g| g.total_gpu_memory_in_mib())
                    .map(i64::from)
                    .unwrap_or(0),
                usage_classes: t
                    .supported_usage_classes()
                    .iter()
                    .map(|u| u.as_str().to_string())
                    .collect(),
                placement_group_strategies: t
                    .placement_group_info()
                    .map(|p| {
                        p.supported_strategies()
                            .iter()
                            .map(|s| s.as_str().to_string())
                            .collect()
                    })
                    .unwrap_or_default(),
                ena: t
                    .network_info()
                    .and_then(|n| n.ena_support())
                    .is_some_and(|e| e.as_str() != "unsupported"),
                burstable: t.burstable_performance_supported().unwrap_or(false),
                max_network_interfaces: t
                    .network_info()
                    .and_then(|n| n.maximum_network_interfaces())
                    .map(i64::from)
                    .unwrap_or(0),
                network_performance: t
                    .network_info()
                    .and_then(|n| n.network_performance())
                    .unwrap_or_default()
                    .to_string(),
                current_generation: t.current_generation().unwrap_or(false),
            });
        }
        token = page.next_token().map(str::to_string);
        if token.is_none() {
            break;
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}
