//! The AWS half of the model (kops' `pkg/model/awsmodel`): from a kops
//! Cluster and its InstanceGroups to the graph of AWS tasks that realise
//! them (network, security groups, IAM, SSH key, the compute half: launch
//! templates, autoscaling groups, etcd volumes, and the API load balancer).
//! Names and tags are kops' own, so a cluster made by kops is found and
//! kept, not recreated.
//!
//! Pure: no IO, no SDK calls. The cloud-neutral inputs, names and helpers
//! are kops-model's; each module here re-exports the neutral helpers of its
//! namesake there (`kops_model::security` → [`security`]).

pub mod api_load_balancer;
pub mod compute;
pub mod dns;
pub mod iam;
pub mod network;
pub mod nth;
pub mod security;
pub mod ssh;

use kops_engine::TaskGraph;
pub use kops_model::{Model, ModelError};

use crate::AwsContext;

/// Builds every task the model knows for the cluster.
pub fn build(model: &Model<'_>) -> Result<TaskGraph<AwsContext>, ModelError> {
    let mut graph = TaskGraph::new();
    network::build(model, &mut graph)?;
    security::build(model, &mut graph)?;
    iam::build(model, &mut graph)?;
    ssh::build(model, &mut graph)?;
    compute::build(model, &mut graph)?;
    api_load_balancer::build(model, &mut graph)?;
    api_load_balancer::build_bastion(model, &mut graph)?;
    nth::build(model, &mut graph)?;
    dns::build(model, &mut graph)?;
    graph.validate()?;
    Ok(graph)
}

/// `build`, plus the deletion of the Classic ELBs a move off `class:
/// Classic` leaves behind (see `api_load_balancer::retire_classic`). Only
/// a cluster whose last update may have left one needs it: each run with
/// it lists the account's Classic ELBs, a call kops 1.37 never makes.
pub fn build_retiring_classic(model: &Model<'_>) -> Result<TaskGraph<AwsContext>, ModelError> {
    let mut graph = build(model)?;
    api_load_balancer::retire_classic(model, &mut graph)?;
    graph.validate()?;
    Ok(graph)
}
