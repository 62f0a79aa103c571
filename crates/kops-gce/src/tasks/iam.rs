//! Identity: the instances' service accounts, the control plane's project
//! role and the state bucket's members.

use kops_engine::TaskKey;

/// A service account for a role, or an existing one (`shared`: the one
/// the spec gives, used as it is).
#[derive(Debug, Clone, PartialEq)]
pub struct ServiceAccount {
    /// `control-plane`, `node`, `bastion`, or `shared`.
    pub name: String,
    pub email: String,
    /// The id before `@`.
    pub account_id: String,
    pub display_name: Option<String>,
    pub description: Option<String>,
    pub project: String,
    pub shared: bool,
}

impl ServiceAccount {
    pub const KIND: &'static str = "ServiceAccount";

    pub fn key_of(name: &str) -> TaskKey {
        TaskKey::new(Self::KIND, name)
    }

    pub(crate) fn dependencies(&self) -> Vec<TaskKey> {
        Vec::new()
    }
}

/// A project role granted to a service account.
#[derive(Debug, Clone, PartialEq)]
pub struct ProjectIamBinding {
    pub name: String,
    pub project: String,
    pub role: String,
    pub member: TaskKey,
}

impl ProjectIamBinding {
    pub const KIND: &'static str = "ProjectIAMBinding";

    pub(crate) fn dependencies(&self) -> Vec<TaskKey> {
        vec![self.member.clone()]
    }
}

/// A bucket role granted to a service account (the state store in
/// Cloud Storage).
#[derive(Debug, Clone, PartialEq)]
pub struct StorageBucketIam {
    pub name: String,
    pub bucket: String,
    pub role: String,
    pub member: TaskKey,
}

impl StorageBucketIam {
    pub const KIND: &'static str = "StorageBucketIAM";

    pub(crate) fn dependencies(&self) -> Vec<TaskKey> {
        vec![self.member.clone()]
    }
}
