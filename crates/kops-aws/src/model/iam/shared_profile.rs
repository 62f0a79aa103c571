//! An existing instance profile an instance group names in `spec.iam.profile`.
//!
//! kops makes no role, policy or profile for such a group: the launch
//! template names the given profile, which is only looked up (teams whose
//! accounts forbid creating IAM roles rely on this). The task has the key
//! of an [`IamInstanceProfile`] of that name, so the launch template's
//! reference to the profile reads its output either way; it never creates,
//! changes or deletes anything, and a profile that does not exist stops the
//! run (also a dry run) with the group's field in the message.

use crate::context::{classify, AwsContext};
use crate::tasks::iam_instance_profile::{IamInstanceProfile, IamInstanceProfileOutput};
use kops_engine::{Changes, Outputs, Task, TaskError, TaskKey};
pub use kops_model::iam::shared_profile::*;

/// An instance profile kops-rs uses but does not own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedInstanceProfile {
    /// The profile's name (the last part of its ARN).
    pub name: String,
    /// The ARN as the instance group wrote it, for messages.
    pub arn: String,
    /// The instance groups that name it, for messages.
    pub groups: Vec<String>,
}

/// The profile as IAM reports it.
#[derive(Debug, Clone)]
pub struct SharedInstanceProfileActual {
    pub name: String,
    pub arn: String,
    pub roles: Vec<String>,
}

impl SharedInstanceProfile {
    fn missing(&self) -> TaskError {
        TaskError::fatal(format!(
            "instance profile `{}` ({}, spec.iam.profile of instance group {}) does not exist\n\
             hint: create it first, or remove spec.iam.profile so kops-rs makes the group's role and profile",
            self.name,
            self.arn,
            self.groups.join(", ")
        ))
    }
}

impl Task<AwsContext> for SharedInstanceProfile {
    type Actual = SharedInstanceProfileActual;
    type Output = IamInstanceProfileOutput;

    fn key(&self) -> TaskKey {
        TaskKey::new(IamInstanceProfile::KIND, &self.name)
    }

    async fn find(
        &self,
        ctx: &AwsContext,
        _: &Outputs,
    ) -> Result<Option<SharedInstanceProfileActual>, TaskError> {
        let out = match ctx
            .iam()
            .get_instance_profile()
            .instance_profile_name(&self.name)
            .send()
            .await
        {
            Ok(out) => out,
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_no_such_entity_exception()) =>
            {
                return Ok(None)
            }
            Err(e) => return Err(classify("GetInstanceProfile", &self.name, e)),
        };
        Ok(out.instance_profile().map(|p| SharedInstanceProfileActual {
            name: p.instance_profile_name().to_string(),
            arn: p.arn().to_string(),
            roles: p
                .roles()
                .iter()
                .map(|r| r.role_name().to_string())
                .collect(),
        }))
    }

    fn diff(
        &self,
        actual: Option<&SharedInstanceProfileActual>,
        _: &Outputs,
    ) -> Result<Changes, TaskError> {
        // Only the profile's existence matters: nothing of it is managed.
        let mut changes = Changes::new();
        changes.compare("name", actual.map(|a| a.name.as_str()), self.name.as_str());
        Ok(changes)
    }

    fn check_changes(
        &self,
        actual: Option<&SharedInstanceProfileActual>,
        _: &Changes,
    ) -> Result<(), TaskError> {
        match actual {
            Some(_) => Ok(()),
            None => Err(self.missing()),
        }
    }

    fn output(&self, actual: &SharedInstanceProfileActual) -> IamInstanceProfileOutput {
        IamInstanceProfileOutput {
            name: actual.name.clone(),
            arn: actual.arn.clone(),
            roles: actual.roles.clone(),
        }
    }

    async fn apply(
        &self,
        _: &AwsContext,
        _: &Outputs,
        actual: Option<&SharedInstanceProfileActual>,
        _: &Changes,
    ) -> Result<IamInstanceProfileOutput, TaskError> {
        match actual {
            Some(a) => Ok(self.output(a)),
            None => Err(self.missing()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_from_arns() {
        assert_eq!(
            profile_name_from_arn("arn:aws:iam::123456789012:instance-profile/KopsExampleRole"),
            Some("KopsExampleRole")
        );
        assert_eq!(
            profile_name_from_arn("arn:aws-cn:iam::123456789012:instance-profile/teams/a/nodes"),
            Some("nodes")
        );
        assert_eq!(
            profile_name_from_arn("arn:aws:iam::123456789012:role/KopsExampleRole"),
            None
        );
        assert_eq!(profile_name_from_arn("KopsExampleRole"), None);
        assert_eq!(
            profile_name_from_arn("arn:aws:iam::123456789012:instance-profile/"),
            None
        );
    }
}
