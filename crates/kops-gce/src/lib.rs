//! Google Cloud (GCE) for kops-rs: everything that is GCE's own.
//!
//! - [`model`]: kops' GCE model builders (`pkg/model/gcemodel`): the
//!   cluster spec and instance groups to a graph of GCE tasks, with kops'
//!   names ([`names`]), labels and fields.
//! - [`tasks`]: the GCE task types (kops' `gcetasks`), each a task of the
//!   engine's contract against a [`tasks::GceContext`], applied directly
//!   through [`cloud`], the REST layer over Google's APIs.
//! - [`terraform`]: those tasks as kops' Terraform (`google_*` resources,
//!   the `google` provider), written with kops-render's HCL writer; the
//!   state-store objects come from the cloud-neutral files.
//! - [`delete`]: `delete cluster`: the cluster's resources found as kops
//!   finds them and deleted in dependency order.
//! - [`rate_limits`]: Google's per-minute rate quotas mirrored on our
//!   side, so that [`cloud`] paces its calls to them.
//!
//! The cloud-neutral pieces are reused, not copied: the spec (kops-api),
//! the [`kops_model::Model`] inputs and the state-store files, node
//! configs and user data (kops-model, kops-nodeup), the Terraform writer
//! (kops-render). kops-ops picks this crate for `cloudProvider: gce`.
//!
//! The model and the Terraform are pure; the tasks' find and apply and
//! [`cloud`] talk to Google's APIs. No printing.

pub mod cloud;
pub mod delete;
pub mod endpoints;
mod error;
pub mod instances;
pub mod model;
pub mod names;
pub mod provider;
pub mod rate_limits;
pub mod tasks;
pub mod terraform;

pub use error::GceError;

pub use model::{build, GceModel};
pub use tasks::GceContext;
pub use terraform::{terraform, Input};

/// The cloud's name in `spec.cloudProvider`.
pub const CLOUD: &str = "gce";
