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
    // Read before the graph runs, so retried here (a failed listing is not
    // cached: the next look lists again).
    let found = kops_aws::retrying("listing load balancers", AwsError::is_retryable, || async {
        ctx.load_balancer_named(&name)
            .await
            .map_err(|e| AwsError::Call {
                operation: "DescribeLoadBalancers",
                resource: model.name().to_string(),
                message: e.to_string(),
                hint: None,
                retryable: e.is_retryable(),
            })
    })
    .await
    .map_err(OpsError::Aws)?;
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
        addresses.extend(
            kops_aws::load_balancer_interface_addresses(&ctx.cloud, arn)
                .await
                .map_err(OpsError::Aws)?,
        );
    }
    addresses.sort();
    Ok(addresses)
}

/// What the first part of a two-part apply runs: every task but the
/// launch templates (their user data pins the node configs, which name the
/// balancer's addresses) and what depends on them.
pub fn before_node_configs(
    graph: &TaskGraph<AwsContext>,
) -> Result<TaskGraph<AwsContext>, OpsError> {
    Ok(graph.without(|key| key.kind == LaunchTemplate::KIND)?)
}
