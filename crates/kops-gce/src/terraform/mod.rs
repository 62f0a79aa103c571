//! The GCE task graph as kops' Terraform: `provider "google"`, one
//! `google_*` resource per task (the router gives two: the router and its
//! NAT), the state-store objects from the cloud-neutral files, and kops'
//! `cluster_name`, `project` and `region` locals and outputs.

mod compute;
mod iam;
mod load_balancer;
mod network;

use std::any::Any;
use std::collections::BTreeMap;

use kops_engine::{TaskGraph, TaskKey};
use kops_model::files::StateFile;
use kops_render::hcl::{Body, Expr};
use kops_render::terraform::{Provider, Target, Terraform};
use kops_render::{Outcome, RenderError};

use crate::tasks::*;

/// What a GCE render needs besides the graph.
pub struct Input<'a> {
    pub graph: &'a TaskGraph<GceContext>,
    pub cluster: &'a str,
    pub project: &'a str,
    pub region: &'a str,
    /// Where the cluster's state lives (the state-file objects' bucket).
    pub config_base: &'a str,
    /// The cloud-neutral state-store files (completed spec, node configs,
    /// addons...).
    pub files: &'a [StateFile],
    /// The region of the S3 bucket state-file objects go to.
    pub files_region: &'a str,
}

/// How one GCE task type renders.
pub(crate) trait GceResource {
    /// How other resources reach it.
    fn target(&self) -> Target;
    /// Adds its resources.
    fn render(&self, tf: &mut Terraform) -> Result<(), RenderError>;
}

/// A resource target `kind.sanitized-name`.
pub(crate) fn resource(kind: &'static str, name: &str) -> Target {
    Target::Resource {
        kind,
        name: kops_render::terraform::sanitize(name),
    }
}

macro_rules! downcast {
    ($any:expr, $($ty:ty),*) => {{
        let any: &dyn Any = $any;
        None$(.or_else(|| any.downcast_ref::<$ty>().map(|t| t as &dyn GceResource)))*
    }};
}

fn resource_of(any: &dyn Any) -> Option<&dyn GceResource> {
    downcast!(
        any,
        Network,
        Subnet,
        Router,
        FirewallRule,
        Disk,
        InstanceTemplate,
        InstanceGroupManager,
        Address,
        ForwardingRule,
        HttpHealthCheck,
        HealthCheck,
        BackendService,
        TargetPool,
        ServiceAccount,
        ProjectIamBinding,
        StorageBucketIam
    )
}

/// Renders the graph and the state files as `kubernetes.tf` and `data/`.
pub fn terraform(input: &Input<'_>) -> Result<Outcome, RenderError> {
    let mut targets = BTreeMap::new();
    let mut unrendered = Vec::new();
    for (key, task) in input.graph.iter() {
        match resource_of(task.as_any()) {
            Some(r) => {
                targets.insert(key.clone(), r.target());
            }
            None => unrendered.push(key.clone()),
        }
    }
    let mut config = Body::new();
    config
        .set("project", input.project)
        .set("region", input.region);
    let provider = Provider {
        name: "google",
        config,
        source: "hashicorp/google",
        version: ">= 5.11.0",
    };
    let mut tf = Terraform::with_provider(provider, input.files_region, targets);
    for (_, task) in input.graph.iter() {
        if let Some(r) = resource_of(task.as_any()) {
            r.render(&mut tf)?;
        }
    }
    kops_render::state_file_objects(&mut tf, input.config_base, input.files);
    tf.output("cluster_name", Expr::str(input.cluster));
    tf.output("project", Expr::str(input.project));
    tf.output("region", Expr::str(input.region));
    Ok(Outcome {
        rendered: tf.finish(),
        unrendered,
    })
}

/// `[a, b]` of references to other tasks' attribute.
pub(crate) fn references(
    tf: &Terraform,
    keys: &[TaskKey],
    attr: &str,
) -> Result<Expr, RenderError> {
    let items = keys
        .iter()
        .map(|k| tf.reference(k, attr))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Expr::List(items))
}

/// `{ "k" = "v" }` of a label map.
pub(crate) fn string_map(map: &BTreeMap<String, String>) -> Expr {
    Expr::Map(map.iter().map(|(k, v)| (k.clone(), Expr::str(v))).collect())
}

/// `["a", "b"]` of strings.
pub(crate) fn string_list(items: &[String]) -> Expr {
    Expr::List(items.iter().map(Expr::str).collect())
}
