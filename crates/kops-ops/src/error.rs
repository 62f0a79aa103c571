//! What can go wrong in a kops operation, each with what to do about it.

use kops_api::manifest::ManifestError;
use kops_api::validation::{FieldError, ValidationError};
use kops_state::registry::RegistryError;

#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    #[error("no state store given\nhint: pass `--state s3://<bucket>` (or `file:///<dir>`), or set KOPS_STATE_STORE")]
    StateStoreNotSet,

    #[error("{}", cluster_name_required(.known))]
    ClusterNameRequired { known: Vec<String> },

    #[error("cluster `{name}` not found in state store `{store}`\nhint: `kops get clusters` lists the clusters in this store; check --state and the name")]
    ClusterNotFound { name: String, store: String },

    #[error("cluster `{name}` already exists\nhint: change it with `kops edit cluster {name}` or `kops replace -f FILE`, or delete it first")]
    ClusterExists { name: String },

    #[error("instance group `{name}` not found in cluster `{cluster}`\nhint: `kops get instancegroups --name {cluster}` lists them")]
    InstanceGroupNotFound { cluster: String, name: String },

    #[error("instance group `{name}` already exists in cluster `{cluster}`\nhint: change it with `kops edit instancegroup {name} --name {cluster}` or `kops replace -f FILE`")]
    InstanceGroupExists { cluster: String, name: String },

    #[error("instance group `{name}` runs etcd members {}; deleting it would leave them without a machine\nhint: move those members to another control-plane group first (`kops edit cluster`)", .members.join(", "))]
    GroupRunsEtcd { name: String, members: Vec<String> },

    #[error("{kind} `{name}` appears twice in the manifest\nhint: keep one document per object")]
    Duplicate { kind: String, name: String },

    #[error("the {kind} `{name}` does not say which cluster it belongs to\nhint: add the label `kops.k8s.io/cluster: <cluster name>` to its metadata, or pass --name")]
    NoClusterForObject { kind: String, name: String },

    #[error("`{source_name}` holds no objects\nhint: a manifest holds YAML documents with `apiVersion: kops.k8s.io/v1alpha2` and `kind: Cluster` or `kind: InstanceGroup`")]
    EmptyManifest { source_name: String },

    #[error("the {kind}'s name cannot change (`{from}` → `{to}`)\nhint: create a new object with the new name and delete the old one instead")]
    Rename {
        kind: String,
        from: String,
        to: String,
    },

    #[error("{}", flags(.0))]
    Flags(Vec<FieldError>),

    #[error("kops version older than last used to update the cluster: it was last updated by kops {last}, this is {current}\nhint: to permit updating by the older version {current}, run with the --allow-kops-downgrade flag")]
    KopsDowngrade { last: String, current: String },

    #[error("error parsing last kops version updated: `{text}` (kops-version.txt in the state store) is not a version\nhint: run with --allow-kops-downgrade to update anyway")]
    KopsVersionUnreadable { text: String },

    #[error(transparent)]
    Manifest(#[from] ManifestError),

    #[error(transparent)]
    Invalid(#[from] ValidationError),

    #[error(transparent)]
    Registry(#[from] RegistryError),

    #[error(transparent)]
    Aws(#[from] kops_aws::AwsError),

    #[error(transparent)]
    Vsphere(#[from] kops_vsphere::VsphereError),

    #[error(transparent)]
    GceDelete(#[from] kops_gce::delete::DeleteError),

    #[error("cluster `{cluster}` cannot be applied: {reason}")]
    CannotApply { cluster: String, reason: String },

    #[error("cannot select instance types from non-aws cluster `{cluster}`\nhint: instance-selector reads EC2's instance types")]
    NoInstanceTypes { cluster: String },

    #[error("cluster `{cluster}`: {message}")]
    DnsZone { cluster: String, message: String },

    #[error("cannot tell which AWS account to work in: {reason}")]
    Account { reason: String },

    #[error(transparent)]
    Pki(#[from] kops_pki::PkiError),

    #[error(transparent)]
    Model(#[from] kops_model::ModelError),

    #[error("{}", engine(.0))]
    Engine(#[from] kops_engine::EngineError),

    #[error("cannot read `{path}`: {source}\nhint: check the path and that you may read it")]
    ReadFile {
        path: String,
        #[source]
        source: std::io::Error,
    },

    #[error(transparent)]
    Enroll(#[from] crate::enroll::EnrollError),
}

fn cluster_name_required(known: &[String]) -> String {
    let mut s = String::from("no cluster name given");
    if known.is_empty() {
        s.push_str("\nhint: pass the cluster's name (as an argument or with --name / KOPS_CLUSTER_NAME); the state store holds no cluster yet");
    } else {
        s.push_str(&format!(
            "\nhint: pass one of {} (as an argument or with --name / KOPS_CLUSTER_NAME)",
            known
                .iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    s
}

fn engine(e: &kops_engine::EngineError) -> String {
    e.to_string()
}

fn flags(errors: &[FieldError]) -> String {
    let mut s = String::from("invalid flags:");
    for e in errors {
        s.push_str(&format!("\n- {}", e.to_string().replace('\n', "\n  ")));
    }
    s
}

impl OpsError {
    /// True when a conditional write found the object changed by another
    /// writer since it was read ([`kops_state::StoreError::Conflict`]).
    pub fn is_conflict(&self) -> bool {
        matches!(
            self,
            OpsError::Registry(RegistryError::Store(
                kops_state::StoreError::Conflict { .. }
            ))
        )
    }
}

impl From<kops_vsphere_model::ModelError> for OpsError {
    fn from(e: kops_vsphere_model::ModelError) -> Self {
        match e {
            kops_vsphere_model::ModelError::Spec(fields) => OpsError::Flags(fields),
            kops_vsphere_model::ModelError::Vsphere(e) => OpsError::Vsphere(e),
        }
    }
}
