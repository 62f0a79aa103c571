//! The generic state-sync engine. This crate owns the task contract
//! ([`Task`]: find what exists, diff it field by field with types, refuse
//! impossible changes, apply), the dependency graph ([`TaskGraph`]:
//! duplicate, missing-dependency and cycle checks, deterministic order), the
//! executor ([`Executor`]: independent tasks in parallel, retryable errors
//! retried with jittered backoff until a per-task deadline, a clean stop on
//! the first failure, progress events) and what a run produces ([`Report`],
//! and the kops-style dry-run [`Plan`] with its JSON form). It knows no
//! cloud: it must not depend on an AWS SDK or on any kops crate (cloud
//! tasks live in `kops-aws`, the Terraform writer in `kops-terraform`), and
//! it never prints — progress goes to a [`Progress`] receiver, text is
//! returned for the caller to show.
//!
//! # A task
//!
//! A VPC with a CIDR, DNS flags and tags, against a stand-in for the AWS
//! context (in `kops-aws`, `find` calls `DescribeVpcs` with tag filters and
//! `DescribeVpcAttribute`; `apply` calls `CreateVpc`/`ModifyVpcAttribute`/
//! `CreateTags` and maps throttling codes to [`TaskError::Retryable`]):
//!
//! ```
//! use std::collections::BTreeMap;
//! use std::sync::Arc;
//! use kops_engine::{
//!     Changes, Executor, FieldValue, Mode, OutputRef, Outputs, Task, TaskError, TaskGraph, TaskKey,
//! };
//! # use std::sync::Mutex;
//! # /// Stand-in for kops-aws' context holding the EC2 client.
//! # #[derive(Default)]
//! # struct Cloud { vpcs: Mutex<Vec<VpcActual>> }
//! # impl Cloud {
//! #     async fn describe_vpc(&self, name: &str) -> Result<Option<VpcActual>, TaskError> {
//! #         let vpcs = self.vpcs.lock().unwrap();
//! #         Ok(vpcs.iter().find(|v| v.tags.get("Name").map(String::as_str) == Some(name)).cloned())
//! #     }
//! #     async fn create_vpc(&self, cidr: &str, tags: &BTreeMap<String, String>) -> Result<VpcId, TaskError> {
//! #         let mut vpcs = self.vpcs.lock().unwrap();
//! #         let id = VpcId(format!("vpc-{}", vpcs.len() + 1));
//! #         vpcs.push(VpcActual { id: id.clone(), cidr: cidr.into(), enable_dns_hostnames: false,
//! #             enable_dns_support: true, tags: tags.clone() });
//! #         Ok(id)
//! #     }
//! #     async fn set_dns_hostnames(&self, id: &VpcId, on: bool) -> Result<(), TaskError> {
//! #         let mut vpcs = self.vpcs.lock().unwrap();
//! #         vpcs.iter_mut().filter(|v| &v.id == id).for_each(|v| v.enable_dns_hostnames = on);
//! #         Ok(())
//! #     }
//! #     async fn set_dns_support(&self, id: &VpcId, on: bool) -> Result<(), TaskError> {
//! #         let mut vpcs = self.vpcs.lock().unwrap();
//! #         vpcs.iter_mut().filter(|v| &v.id == id).for_each(|v| v.enable_dns_support = on);
//! #         Ok(())
//! #     }
//! #     async fn set_tags(&self, id: &VpcId, tags: &BTreeMap<String, String>) -> Result<(), TaskError> {
//! #         let mut vpcs = self.vpcs.lock().unwrap();
//! #         vpcs.iter_mut().filter(|v| &v.id == id).for_each(|v| v.tags = tags.clone());
//! #         Ok(())
//! #     }
//! # }
//!
//! /// What dependants (subnets, route tables) read: the VPC's id.
//! #[derive(Debug, Clone, PartialEq)]
//! pub struct VpcId(pub String);
//!
//! impl FieldValue for VpcId {
//!     fn render(&self) -> String {
//!         self.0.clone()
//!     }
//! }
//!
//! /// The task: what the VPC should be.
//! #[derive(Debug, Clone, PartialEq)]
//! pub struct Vpc {
//!     pub name: String,
//!     pub cidr: String,
//!     pub enable_dns_hostnames: bool,
//!     pub enable_dns_support: bool,
//!     pub tags: BTreeMap<String, String>,
//! }
//!
//! /// What `find` saw.
//! #[derive(Debug, Clone)]
//! pub struct VpcActual {
//!     pub id: VpcId,
//!     pub cidr: String,
//!     pub enable_dns_hostnames: bool,
//!     pub enable_dns_support: bool,
//!     pub tags: BTreeMap<String, String>,
//! }
//!
//! impl Vpc {
//!     pub const KIND: &'static str = "VPC";
//!
//!     /// The handle a subnet keeps to read this VPC's id.
//!     pub fn id_ref(name: &str) -> OutputRef<VpcId> {
//!         OutputRef::new(TaskKey::new(Self::KIND, name))
//!     }
//! }
//!
//! impl Task<Cloud> for Vpc {
//!     type Actual = VpcActual;
//!     type Output = VpcId;
//!
//!     fn key(&self) -> TaskKey {
//!         TaskKey::new(Self::KIND, &self.name)
//!     }
//!
//!     async fn find(&self, cloud: &Cloud, _: &Outputs) -> Result<Option<VpcActual>, TaskError> {
//!         cloud.describe_vpc(&self.name).await
//!     }
//!
//!     fn diff(&self, actual: Option<&VpcActual>, _: &Outputs) -> Result<Changes, TaskError> {
//!         let mut changes = Changes::new();
//!         changes
//!             .compare("cidr", actual.map(|a| &a.cidr), &self.cidr)
//!             .compare("enableDnsHostnames", actual.map(|a| &a.enable_dns_hostnames), &self.enable_dns_hostnames)
//!             .compare("enableDnsSupport", actual.map(|a| &a.enable_dns_support), &self.enable_dns_support)
//!             .compare("tags", actual.map(|a| &a.tags), &self.tags);
//!         Ok(changes)
//!     }
//!
//!     fn check_changes(&self, actual: Option<&VpcActual>, _: &Changes) -> Result<(), TaskError> {
//!         match actual {
//!             Some(actual) if actual.cidr != self.cidr => {
//!                 Err(TaskError::immutable("cidr", &actual.cidr, &self.cidr))
//!             }
//!             _ => Ok(()),
//!         }
//!     }
//!
//!     fn output(&self, actual: &VpcActual) -> VpcId {
//!         actual.id.clone()
//!     }
//!
//!     async fn apply(
//!         &self,
//!         cloud: &Cloud,
//!         _: &Outputs,
//!         actual: Option<&VpcActual>,
//!         changes: &Changes,
//!     ) -> Result<VpcId, TaskError> {
//!         let id = match actual {
//!             Some(actual) => actual.id.clone(),
//!             None => cloud.create_vpc(&self.cidr, &self.tags).await?,
//!         };
//!         // A new VPC has the cloud's defaults: `changes` lists every field then.
//!         if changes.has("enableDnsHostnames") {
//!             cloud.set_dns_hostnames(&id, self.enable_dns_hostnames).await?;
//!         }
//!         if changes.has("enableDnsSupport") {
//!             cloud.set_dns_support(&id, self.enable_dns_support).await?;
//!         }
//!         if actual.is_some() && changes.has("tags") {
//!             cloud.set_tags(&id, &self.tags).await?;
//!         }
//!         Ok(id)
//!     }
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! let mut graph = TaskGraph::new();
//! graph.add(Vpc {
//!     name: "main.example.com".into(),
//!     cidr: "172.20.0.0/16".into(),
//!     enable_dns_hostnames: true,
//!     enable_dns_support: true,
//!     tags: BTreeMap::from([("Name".into(), "main.example.com".into())]),
//! })?;
//! let cloud = Arc::new(Cloud::default());
//! let executor = Executor::default();
//!
//! let dry_run = executor.run(&graph, Arc::clone(&cloud), Mode::DryRun).await?;
//! assert!(dry_run.has_changes());
//! assert_eq!(
//!     dry_run.plan().to_string(),
//!     "Will create resources:\n\
//!     \x20 VPC/main.example.com\n\
//!     \x20 \tcidr                \t172.20.0.0/16\n\
//!     \x20 \tenableDnsHostnames  \ttrue\n\
//!     \x20 \tenableDnsSupport    \ttrue\n\
//!     \x20 \ttags                \t{Name: main.example.com}\n\n"
//! );
//!
//! executor.run(&graph, Arc::clone(&cloud), Mode::Apply).await?;
//! let again = executor.run(&graph, cloud, Mode::Apply).await?;
//! assert!(!again.has_changes());
//! # Ok::<(), kops_engine::EngineError>(())
//! # }).unwrap();
//! ```
//!
//! A subnet keeps `vpc: OutputRef<VpcId>` (from `Vpc::id_ref`), returns
//! `vec![self.vpc.key().clone()]` from `dependencies`, compares its VPC with
//! `changes.compare_reference("vpc", actual.map(|a| &a.vpc_id),
//! deps.try_get(&self.vpc)?, self.vpc.key())` (in a dry run a VPC that would
//! be created has no id yet: `try_get` is `None` and the plan shows
//! `<VPC/main.example.com>`), and reads `deps.get(&self.vpc)?` in `apply`.

mod changes;
mod error;
mod executor;
mod graph;
mod key;
mod lifecycle;
mod limit_settings;
mod outputs;
mod pacing;
mod report;
mod task;

pub use changes::{Changes, FieldChange, FieldValue};
pub use error::EngineError;
pub use executor::{Completed, Executor, ExecutorOptions, Progress, ProgressEvent, RetryPolicy};
pub use graph::TaskGraph;
pub use key::{OutputRef, TaskKey};
pub use lifecycle::Lifecycle;
pub use limit_settings::LimitSettings;
pub use outputs::{OutputError, Outputs};
pub use pacing::{BucketLimit, LimitWaits, Pacer};
pub use report::{Outcome, Plan, PlannedDeletion, PlannedTask, Report, SkipReason, TaskReport};
pub use task::{BoxFuture, DynTask, Mode, Operation, Task, TaskError};

#[cfg(test)]
mod tests;
