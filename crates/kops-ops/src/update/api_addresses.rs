//! The API load balancer's addresses as kops reads them from the cloud
//! (its well-known KubeAPIServer addresses): the balancer's DNS name and,
//! when workers reach kops-controller through it (`dns: None`), the private
//! addresses of its network interfaces, sorted. Nodes that run the API
//! server list them as `ApiserverAdditionalIPs` (extra names of their
//! serving certificate). kops reads them during its apply, after the
//! balancer exists, so even a first apply writes them; kops-rs builds node
//! configs before applying, so `update` reads them first and, when the
//! balancer is new, once more after the apply (see `update_cluster`).

use std::collections::BTreeSet;

use kops_aws::context::TAG_NAME;
use kops_aws::tasks::network_load_balancer::NetworkLoadBalancer;
use kops_aws::tasks::security_group::SecurityGroup;
use kops_aws::tasks::security_group_rule::SecurityGroupRule;
use kops_aws::{AwsContext, AwsError};
use kops_engine::{Outcome, Report, TaskGraph, TaskKey};
use kops_model::Model;

use crate::OpsError;

/// Whether the cluster has an API load balancer whose addresses kops puts
/// in node configs (a Network Load Balancer; kops 1.37 refuses Classic).
pub fn has_api_load_balancer(model: &Model<'_>) -> bool {
    kops_model::security::uses_api_load_balancer(model)
        && !kops_model::api_load_balancer::uses_classic(model)
}

/// The addresses of the cluster's API load balancer, found by its `Name`
/// tag in the run's load-balancer listing (the one the apply reuses);
/// empty when it does not exist (yet) or the cluster has none.
pub async fn api_server_addresses(
    ctx: &AwsContext,
    model: &Model<'_>,
) -> Result<Vec<String>, OpsError> {
    if !has_api_load_balancer(model) {
        return Ok(Vec::new());
    }
    let name = kops_model::api_load_balancer::load_balancer_name(model);
    let all = ctx.load_balancers().await.map_err(|e| {
        OpsError::Aws(AwsError::Call {
            operation: "DescribeLoadBalancers",
            resource: model.name().to_string(),
            message: e.to_string(),
            hint: None,
            retryable: false,
        })
    })?;
    let Some((lb, _)) = all
        .iter()
        .find(|(_, tags)| tags.get(TAG_NAME) == Some(&name))
    else {
        return Ok(Vec::new());
    };
    let mut addresses = Vec::new();
    if let Some(dns) = lb.dns_name().filter(|d| !d.is_empty()) {
        addresses.push(dns.to_string());
    }
    if model.uses_none_dns() {
        if let (Some(vpc), Some(lb_name)) = (lb.vpc_id(), lb.load_balancer_name()) {
            addresses.extend(interface_addresses(ctx, vpc, lb_name).await?);
        }
    }
    addresses.sort();
    Ok(addresses)
}

/// The private addresses (IPv4 primary, IPv6) of the balancer's network
/// interfaces: those of its VPC described `ELB net/<name>/...`.
async fn interface_addresses(
    ctx: &AwsContext,
    vpc: &str,
    lb_name: &str,
) -> Result<Vec<String>, OpsError> {
    let prefix = format!("ELB net/{lb_name}/");
    let interfaces = ctx
        .ec2()
        .describe_network_interfaces()
        .filters(
            aws_sdk_ec2::types::Filter::builder()
                .name("vpc-id")
                .values(vpc)
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
                resource: lb_name.to_string(),
                message: kops_aws::error_text::error_text(&e).text,
                hint: None,
                retryable: false,
            })
        })?;
    Ok(interfaces
        .iter()
        .filter(|ni| ni.description().is_some_and(|d| d.starts_with(&prefix)))
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

/// The API load balancer's task and everything it depends on (network,
/// subnets, security groups), to create it before the node configs are
/// built; `None` when the graph has no such task.
pub fn load_balancer_subgraph(
    graph: &TaskGraph<AwsContext>,
    model: &Model<'_>,
) -> Result<Option<TaskGraph<AwsContext>>, OpsError> {
    let root = TaskKey::new(
        NetworkLoadBalancer::KIND,
        kops_model::api_load_balancer::load_balancer_name(model),
    );
    if !graph.contains(&root) {
        return Ok(None);
    }
    let mut seen = BTreeSet::new();
    let mut todo = vec![root];
    let mut sub = TaskGraph::new();
    while let Some(key) = todo.pop() {
        if !seen.insert(key.clone()) {
            continue;
        }
        let Some(task) = graph.get(&key) else {
            continue;
        };
        sub.add_dyn(task.clone())?;
        todo.extend(
            graph
                .dependencies_of(&key)
                .unwrap_or_default()
                .iter()
                .cloned(),
        );
        // A group created here comes with AWS' default egress rule, which
        // only its own task tags (and only in the run that creates the
        // group): it goes along.
        if key.kind == SecurityGroup::KIND {
            for target in ["0.0.0.0/0", "::/0"] {
                todo.push(TaskKey::new(
                    SecurityGroupRule::KIND,
                    format!("from-{}-egress-all-0to0-{target}", key.name),
                ));
            }
        }
    }
    Ok(Some(sub))
}

/// The report of an apply made in two runs (the load balancer first, then
/// everything): the second run's, where a task it found unchanged takes
/// what the first run did to it (created, modified).
pub fn merge_reports(first: Report, mut second: Report) -> Report {
    for task in &mut second.tasks {
        if task.outcome != Outcome::Unchanged {
            continue;
        }
        if let Some(earlier) = first.get(&task.key).filter(|t| t.outcome.is_change()) {
            *task = earlier.clone();
        }
    }
    second.elapsed += first.elapsed;
    second
}
