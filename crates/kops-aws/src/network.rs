//! Look-ups of an existing VPC and its subnets, for `create cluster --vpc`
//! and `--subnets`: at most two calls (DescribeSubnets, DescribeVpcs).

use aws_sdk_ec2::types::Filter;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use kops_api::new_cluster::{ExistingNetwork, ExistingSubnet};

use crate::{AwsCloud, AwsError};

/// Describes the VPC `vpc_id` (or the VPC of `subnet_ids`) and the subnets:
/// the ones named, or every subnet of the VPC when none are named.
pub async fn describe_existing_network(
    cloud: &AwsCloud,
    vpc_id: Option<&str>,
    subnet_ids: &[String],
) -> Result<ExistingNetwork, AwsError> {
    let ec2 = cloud.ec2();
    let mut request = ec2.describe_subnets();
    if subnet_ids.is_empty() {
        if let Some(vpc) = vpc_id {
            request = request.filters(Filter::builder().name("vpc-id").values(vpc).build());
        }
    } else {
        request = request.set_subnet_ids(Some(subnet_ids.to_vec()));
    }
    let resource = if subnet_ids.is_empty() {
        vpc_id.unwrap_or_default().to_string()
    } else {
        subnet_ids.join(",")
    };
    let subnets = request
        .into_paginator()
        .items()
        .send()
        .collect::<Result<Vec<_>, _>>()
        .await
        .map_err(|e| {
            if e.code() == Some("InvalidSubnetID.NotFound") {
                AwsError::NotFound {
                    kind: "subnet",
                    id: resource.clone(),
                    region: cloud.region().to_string(),
                }
            } else {
                AwsError::call("DescribeSubnets", resource.clone(), e)
            }
        })?;

    let mut vpcs: Vec<String> = subnets
        .iter()
        .filter_map(|s| s.vpc_id().map(str::to_string))
        .collect();
    vpcs.sort();
    vpcs.dedup();
    let network_id = match (vpc_id, vpcs.as_slice()) {
        (Some(v), []) => v.to_string(),
        (Some(v), [found]) if found == v => v.to_string(),
        (Some(v), found) => {
            return Err(AwsError::SubnetsInOtherVpc {
                subnets: subnet_ids.to_vec(),
                found: found.join(","),
                expected: v.to_string(),
            })
        }
        (None, [one]) => one.clone(),
        (None, []) => {
            return Err(AwsError::NotFound {
                kind: "subnet",
                id: resource,
                region: cloud.region().to_string(),
            })
        }
        (None, _) => {
            return Err(AwsError::SubnetsInManyVpcs {
                subnets: subnet_ids.to_vec(),
            })
        }
    };

    let vpcs = ec2
        .describe_vpcs()
        .vpc_ids(&network_id)
        .send()
        .await
        .map_err(|e| {
            if e.code() == Some("InvalidVpcID.NotFound") {
                AwsError::NotFound {
                    kind: "VPC",
                    id: network_id.clone(),
                    region: cloud.region().to_string(),
                }
            } else {
                AwsError::call("DescribeVpcs", network_id.clone(), e)
            }
        })?;
    let vpc = vpcs.vpcs().first().ok_or_else(|| AwsError::NotFound {
        kind: "VPC",
        id: network_id.clone(),
        region: cloud.region().to_string(),
    })?;

    let mut existing: Vec<ExistingSubnet> = subnets
        .iter()
        .map(|s| ExistingSubnet {
            id: s.subnet_id().unwrap_or_default().to_string(),
            zone: s.availability_zone().unwrap_or_default().to_string(),
            cidr: s.cidr_block().map(str::to_string),
        })
        .collect();
    // Keep the order the user gave.
    if !subnet_ids.is_empty() {
        existing.sort_by_key(|s| subnet_ids.iter().position(|id| *id == s.id));
    }
    Ok(ExistingNetwork {
        network_id,
        cidr: vpc.cidr_block().map(str::to_string),
        subnets: existing,
    })
}

/// The private addresses (IPv4 primary, IPv6) of the network interfaces of
/// the load balancer `arn`: AWS describes each `ELB <type>/<name>/<id>`,
/// the end of the balancer's ARN. Read before the task graph runs (node
/// configs name them), so asked again while AWS' answer is retryable.
pub async fn load_balancer_interface_addresses(
    cloud: &AwsCloud,
    arn: &str,
) -> Result<Vec<String>, AwsError> {
    let Some((_, id)) = arn.split_once(":loadbalancer/") else {
        return Ok(Vec::new());
    };
    let description = format!("ELB {id}");
    let interfaces = crate::retrying(
        "DescribeNetworkInterfaces",
        crate::context::is_transient,
        || {
            cloud
                .ec2()
                .describe_network_interfaces()
                .filters(
                    Filter::builder()
                        .name("description")
                        .values(&description)
                        .build(),
                )
                .into_paginator()
                .items()
                .send()
                .collect::<Result<Vec<_>, _>>()
        },
    )
    .await
    .map_err(|e| AwsError::call("DescribeNetworkInterfaces", id, e))?;
    Ok(interfaces
        .iter()
        .filter(|ni| ni.description() == Some(description.as_str()))
        .flat_map(|ni| {
            ni.private_ip_address()
                .filter(|a| !a.is_empty())
                .map(str::to_string)
                .into_iter()
                .chain(
                    ni.ipv6_addresses()
                        .iter()
                        .filter_map(|a| a.ipv6_address().map(str::to_string)),
                )
        })
        .collect())
}
