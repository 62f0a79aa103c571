//! The GCE task types: one struct per Google Compute / IAM object kops
//! manages, each a task of the engine's contract ([`kops_engine::Task`])
//! run against a [`GceContext`]. They are plain data the model builders
//! fill in and the Terraform renderer reads; references to other objects
//! are the other tasks' [`TaskKey`]s, which are also their dependencies.
//!
//! Direct apply runs them against the REST APIs ([`crate::cloud`]): each
//! kind is its REST resource ([`api`]), found by kops' names, compared
//! field by field, created or changed and its operation awaited. Every
//! task publishes a `String` for its dependants: an address's IP, a
//! template's generated name, a group's instance group, a service
//! account's email, else the self link.

mod api;
mod compute;
mod iam;
mod identity;
mod load_balancer;
mod network;

pub use compute::{Disk, InstanceGroupManager, InstanceTemplate, TemplateServiceAccount};
pub use iam::{ProjectIamBinding, ServiceAccount, StorageBucketIam};
pub use load_balancer::{
    Address, BackendService, ForwardingRule, ForwardingTarget, HealthCheck, HttpHealthCheck,
    TargetPool,
};
pub use network::{Family, FirewallRule, Network, Router, Subnet};

use std::sync::Arc;

use kops_engine::{Changes, Outputs, Task, TaskError, TaskKey};
use serde_json::Value;

use crate::cloud::GceCloud;

/// What GCE tasks run against: the project and region, and the API
/// client for direct apply (`None` when only rendering).
#[derive(Debug, Clone)]
pub struct GceContext {
    pub project: String,
    pub region: String,
    pub cloud: Option<Arc<GceCloud>>,
}

impl GceContext {
    /// The API client; a fatal error when the context has none.
    pub fn cloud(&self) -> Result<&GceCloud, TaskError> {
        self.cloud.as_deref().ok_or_else(|| {
            TaskError::fatal(
                "no Google Cloud API client in this run (a render cannot find or apply)",
            )
        })
    }
}

/// Implements the task contract for a GCE task type with a `name` field,
/// a `KIND` constant, a `dependencies()` method and a REST [`api::Spec`]
/// (`$spec`: how to build it from the task, the client and the outputs),
/// publishing `$output` of the resource.
macro_rules! gce_task {
    ($($ty:ty => |$t:ident, $cloud:ident, $deps:ident| $spec:expr, $out:ident;)*) => {$(
        impl $ty {
            fn rest_spec(&self, cloud: &GceCloud, deps: &Outputs) -> Result<api::Spec, TaskError> {
                let ($t, $cloud, $deps) = (self, cloud, deps);
                let _ = $deps;
                Ok($spec)
            }
        }

        impl Task<GceContext> for $ty {
            type Actual = api::Found;
            type Output = String;

            fn key(&self) -> TaskKey {
                TaskKey::new(Self::KIND, self.name.clone())
            }

            fn dependencies(&self) -> Vec<TaskKey> {
                <$ty>::dependencies(self)
            }

            async fn find(&self, ctx: &GceContext, deps: &Outputs) -> Result<Option<api::Found>, TaskError> {
                let cloud = ctx.cloud()?;
                let spec = self.rest_spec(cloud, deps)?;
                Ok(api::find(cloud, &spec).await?.map(|resource| api::Found { resource, want: spec.body }))
            }

            fn diff(&self, actual: Option<&api::Found>, _deps: &Outputs) -> Result<Changes, TaskError> {
                Ok(api::diff(actual))
            }

            fn output(&self, actual: &api::Found) -> String {
                $out(&actual.resource)
            }

            async fn apply(
                &self,
                ctx: &GceContext,
                deps: &Outputs,
                actual: Option<&api::Found>,
                changes: &Changes,
            ) -> Result<String, TaskError> {
                let cloud = ctx.cloud()?;
                let spec = self.rest_spec(cloud, deps)?;
                let now = api::apply(cloud, &spec, actual.map(|a| &a.resource), changes, Self::KIND).await?;
                Ok($out(&now))
            }
        }
    )*};
}

/// The self link as `projects/...`.
fn self_link(resource: &Value) -> String {
    let link = resource["selfLink"].as_str().unwrap_or("");
    link.find("projects/")
        .map_or(link, |i| &link[i..])
        .to_string()
}

fn ip_address(resource: &Value) -> String {
    resource["address"].as_str().unwrap_or("").to_string()
}

fn instance_group(resource: &Value) -> String {
    let link = resource["instanceGroup"].as_str().unwrap_or("");
    link.find("projects/")
        .map_or(link, |i| &link[i..])
        .to_string()
}

gce_task! {
    Network => |t, c, d| t.spec(c), self_link;
    Subnet => |t, c, d| t.spec(c), self_link;
    Router => |t, c, d| t.spec(c), self_link;
    FirewallRule => |t, c, d| t.spec(c), self_link;
    Disk => |t, c, d| t.spec(c), self_link;
    InstanceGroupManager => |t, c, d| t.spec(c, d)?, instance_group;
    Address => |t, c, d| t.spec(c), ip_address;
    ForwardingRule => |t, c, d| t.spec(c, d)?, self_link;
    HttpHealthCheck => |t, c, d| t.spec(c), self_link;
    HealthCheck => |t, c, d| t.spec(c), self_link;
    BackendService => |t, c, d| t.spec(c, d)?, self_link;
    TargetPool => |t, c, d| t.spec(c), self_link;
}
