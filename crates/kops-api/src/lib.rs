//! The kops API: `kops.k8s.io/v1alpha2` Cluster and InstanceGroup types, the
//! defaults `kops create cluster` fills in, and validation with errors that
//! name the field and the fix.
//!
//! This crate is pure: no IO, no async, no cloud SDK. It must not depend on
//! any other kops-rs crate. Fields it does not model are kept in each
//! struct's `extra` map, so every kops manifest round-trips unchanged.

pub mod cluster;
pub mod components;
pub mod defaults;
pub mod dns;
pub mod env;
pub mod field_error;
pub mod gce;
pub mod instance_group;
pub mod manifest;
pub mod meta;
pub mod names;
pub mod networking;
pub mod new_cluster;
pub mod populate;
pub mod set;
pub mod store_path;
pub mod switch;
pub mod validation;
pub mod version;
pub mod vsphere;
pub mod zones;

/// The kops release kops-rs follows: the version of kops' own images it
/// deploys (`registry.k8s.io/kops/...`: dns-controller, kops-channels,
/// kube-apiserver-healthcheck), the one it records in `kops-version.txt`
/// (kops refuses to update a cluster a newer kops updated last, so this
/// must be a real kops version, not kops-rs' own), and the channel data
/// compiled in.
pub const KOPS_VERSION: &str = "1.37.0-alpha.1";

pub use cluster::{Cluster, ClusterSpec, ClusterSubnetSpec, SubnetType};
pub use field_error::{FieldError, ValidationError};
pub use instance_group::{InstanceGroup, InstanceGroupSpec, Role, LABEL_GVISOR};
pub use manifest::{parse_objects, to_yaml, ManifestError, Object};
pub use meta::{ObjectMeta, API_VERSION, LABEL_CLUSTER_NAME, LABEL_INSTANCE_GROUP};
