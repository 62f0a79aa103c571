//! The GCE task types: one struct per Google Compute / IAM object kops
//! manages, each a task of the engine's contract ([`kops_engine::Task`])
//! run against a [`GceContext`]. They are plain data the model builders
//! fill in and the Terraform renderer reads; references to other objects
//! are the other tasks' [`TaskKey`]s, which are also their dependencies.
//!
//! Direct apply on Google Cloud is not built yet: `find` and `apply`
//! refuse with a clear error, `diff` compares the whole object.

mod compute;
mod iam;
mod load_balancer;
mod network;

pub use compute::{Disk, InstanceGroupManager, InstanceTemplate, TemplateServiceAccount};
pub use iam::{ProjectIamBinding, ServiceAccount, StorageBucketIam};
pub use load_balancer::{
    Address, BackendService, ForwardingRule, ForwardingTarget, HealthCheck, HttpHealthCheck,
    TargetPool,
};
pub use network::{Family, FirewallRule, Network, Router, Subnet};

use kops_engine::{Changes, Outputs, Task, TaskError, TaskKey};

/// What GCE tasks run against: the project and region (the API clients
/// come with direct apply).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GceContext {
    pub project: String,
    pub region: String,
}

/// The refusal of `find` and `apply` until direct apply exists.
pub fn not_yet(kind: &str) -> TaskError {
    TaskError::fatal(format!(
        "{kind}: applying to Google Cloud directly is not built yet\nhint: render it with `kops update cluster --target terraform` and apply that with Terraform"
    ))
}

/// Implements the task contract for a GCE task type with a `name` field,
/// a `KIND` constant and a `dependencies()` method.
macro_rules! gce_task {
    ($($ty:ty),* $(,)?) => {$(
        impl Task<GceContext> for $ty {
            type Actual = $ty;
            type Output = ();

            fn key(&self) -> TaskKey {
                TaskKey::new(Self::KIND, self.name.clone())
            }

            fn dependencies(&self) -> Vec<TaskKey> {
                <$ty>::dependencies(self)
            }

            async fn find(
                &self,
                _ctx: &GceContext,
                _deps: &Outputs,
            ) -> Result<Option<Self::Actual>, TaskError> {
                Err(not_yet(Self::KIND))
            }

            fn diff(&self, actual: Option<&Self::Actual>, _deps: &Outputs) -> Result<Changes, TaskError> {
                let mut changes = Changes::new();
                changes.compare_with("spec", actual, self, |t| format!("{t:?}"));
                Ok(changes)
            }

            fn output(&self, _actual: &Self::Actual) -> Self::Output {}

            async fn apply(
                &self,
                _ctx: &GceContext,
                _deps: &Outputs,
                _actual: Option<&Self::Actual>,
                _changes: &Changes,
            ) -> Result<Self::Output, TaskError> {
                Err(not_yet(Self::KIND))
            }
        }
    )*};
}

gce_task!(
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
    StorageBucketIam,
);
