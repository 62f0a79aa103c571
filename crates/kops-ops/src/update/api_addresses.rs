//! The API load balancer's addresses as kops reads them from the cloud
//! (its well-known KubeAPIServer addresses): the balancer's DNS name and,
//! when workers reach kops-controller through it (`dns: None`), the private
//! addresses of its network interfaces, sorted. Nodes that run the API
//! server list them as `ApiserverAdditionalIPs` (extra names of their
//! serving certificate). kops reads them during its apply, after the
//! balancer exists, so even a first apply writes them; kops-rs builds node
//! configs before applying, so `update` reads them first and, when the
//! balancer is new, applies in two parts: what the node configs do not
//! shape, then (with the new balancer's addresses) the rest (see
//! `update_cluster`).

use kops_aws::tasks::launch_template::LaunchTemplate;
use kops_aws::tasks::network_load_balancer::NetworkLoadBalancer;
use kops_aws::{AwsContext, AwsError};
use kops_engine::{Completed, TaskGraph};
use kops_model::Model;

use crate::OpsError;

/// Whether the cluster has an API load balancer whose addresses kops puts
/// in node configs (a Network Load Balancer; kops 1.37 refuses Classic).
pub fn has_api_load_balancer(model: &Model<'_>) -> bool {
    kops_model::security::uses_api_load_balancer(model)
        && !kops_model::api_load_balancer::uses_classic(model)
}

/// The addresses of the cluster's API load balancer, found by its AWS name
/// in the run's load-balancer listing (the one the apply reuses, without
/// waiting for the tags); empty when it does not exist (yet) or the
/// cluster has none.
pub async fn api_server_addresses(
    ctx: &AwsContext,
    model: &Model<'_>,
) -> Result<Vec<String>, OpsError> {
    if !has_api_load_balancer(model) {
        return Ok(Vec::new());
    }
    let name = kops_model::api_load_balancer::resource_name32(model.name(), "api");
    let found = ctx.load_balancer_named(&name).await.map_err(|e| {
        OpsError::Aws(AwsError::Call {
            operation: "DescribeLoadBalancers",
            resource: model.name().to_string(),
            message: e.to_string(),
            hint: None,
            retryable: false,
        })
    })?;
    let Some(lb) = found else {
        return Ok(Vec::new());
    };
    addresses_of(
        ctx,
        model,
        lb.dns_name().unwrap_or_default(),
        lb.load_balancer_arn().unwrap_or_default(),
    )
    .await
}

/// The addresses of the API load balancer the first part of a two-part
/// apply made (or found): its DNS name from the task's output, and the
/// addresses of its interfaces as above.
pub async fn created_addresses(
    ctx: &AwsContext,
    model: &Model<'_>,
    done: &Completed<AwsContext>,
) -> Result<Vec<String>, OpsError> {
    let name = kops_model::api_load_balancer::load_balancer_name(model);
    let Some(lb) = done.output(&NetworkLoadBalancer::output_ref(&name)) else {
        return Ok(Vec::new());
    };
    addresses_of(ctx, model, &lb.dns_name, &lb.arn).await
}

async fn addresses_of(
    ctx: &AwsContext,
    model: &Model<'_>,
    dns_name: &str,
    arn: &str,
) -> Result<Vec<String>, OpsError> {
    let mut addresses = Vec::new();
    if !dns_name.is_empty() {
        addresses.push(dns_name.to_string());
    }
    if model.uses_none_dns() && !arn.is_empty() {
        addresses.extend(interface_addresses(ctx, arn).await?);
    }
    addresses.sort();
    Ok(addresses)
}

/// The private addresses (IPv4 primary, IPv6) of the balancer's network
/// interfaces: AWS describes each `ELB net/<name>/<id>`, the end of the
/// balancer's ARN.
async fn interface_addresses(ctx: &AwsContext, arn: &str) -> Result<Vec<String>, OpsError> {
    let Some((_, id)) = arn.split_once(":loadbalancer/") else {
        return Ok(Vec::new());
    };
    let description = format!("ELB {id}");
    let interfaces = ctx
        .ec2()
        .describe_network_interfaces()
        .filters(
            aws_sdk_ec2::types::Filter::builder()
                .name("description")
                .values(&description)
                .build(),
        )
        .into_paginator()
        .items()
        .send()
        .collect::<Result<Vec<_>, _>>()
        .await
        .map_err(|e| {
            OpsError::Aws(AwsError::Call {
                operation: "DescribeNetworkInterfaces",
                resource: id.to_string(),
                message: kops_aws::error_text::error_text(&e).text,
                hint: None,
                retryable: false,
            })
        })?;
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

/// What the first part of a two-part apply runs: every task but the
/// launch templates (their user data pins the node configs, which name the
/// balancer's addresses) and what depends on them.
pub fn before_node_configs(
    graph: &TaskGraph<AwsContext>,
) -> Result<TaskGraph<AwsContext>, OpsError> {
    Ok(graph.without(|key| key.kind == LaunchTemplate::KIND)?)
}
