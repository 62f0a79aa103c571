//! The cloud-neutral face of a running cluster, shared by every cloud crate
//! (kops-aws, kops-gce, kops-vsphere through kops-ops) and by the use cases
//! above them (kops-roll, kops-ops, the CLI): the groups and instances a
//! roll replaces ([`Group`], [`Instance`]), what `get instances` adds
//! ([`InstanceDetails`]), `toolbox dump`'s [`Dump`], a resource `delete
//! cluster` lists ([`Resource`]), and the [`Provider`] trait a cloud
//! implements for them. Nothing here knows a cloud's SDK: the trait is
//! how a use case reaches the cloud without asking which one it is (Go
//! kops' `fi.Cloud`).
//!
//! The one place that turns `spec.cloudProvider` into a provider is
//! kops-ops' `cloud.rs`.

mod delete;
mod dump;
mod error;
mod instances;
mod provider;

pub use delete::{DeleteReport, Resource};
pub use dump::{Dump, DumpedInstance, DumpedLoadBalancer, DumpedResource, DumpedSubnet};
pub use error::CloudError;
pub use instances::{Group, Instance, InstanceDetails};
pub use provider::Provider;
