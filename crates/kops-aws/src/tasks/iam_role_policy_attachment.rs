//! The managed policies attached to a role kops owns, as one set: kops'
//! `spec.externalPolicies` for the instance roles (`<role>-policyoverride`)
//! and `spec.iam.serviceAccountExternalPermissions[].aws.policyARNs` for a
//! service-account role (`external-<role>`).
//!
//! Like kops, the set is authoritative: a policy attached to the role but
//! not listed is detached (an empty list detaches them all), so removing a
//! policy from the spec removes it from the role. Found with one
//! `ListAttachedRolePolicies`.

use kops_engine::{Changes, OutputRef, Outputs, Task, TaskError, TaskKey};

use crate::context::{classify, AwsContext};
use crate::tasks::iam_role::{is_no_such_entity, IamRoleOutput};

/// What should be attached.
#[derive(Debug, Clone, PartialEq)]
pub struct IamRolePolicyAttachment {
    /// kops' task name (`master-policyoverride`, `external-<role>`), which
    /// the Terraform target names each attachment after.
    pub name: String,
    /// The role the policies are attached to.
    pub role: OutputRef<IamRoleOutput>,
    /// Managed policy ARNs, sorted.
    pub policy_arns: Vec<String>,
}

/// What is attached.
#[derive(Debug, Clone)]
pub struct IamRolePolicyAttachmentActual {
    pub policy_arns: Vec<String>,
}

impl IamRolePolicyAttachment {
    pub const KIND: &'static str = "IAMRolePolicyAttachment";

    pub fn new(
        name: impl Into<String>,
        role: OutputRef<IamRoleOutput>,
        policy_arns: &[String],
    ) -> Self {
        let mut policy_arns = policy_arns.to_vec();
        policy_arns.sort();
        policy_arns.dedup();
        IamRolePolicyAttachment {
            name: name.into(),
            role,
            policy_arns,
        }
    }
}

impl Task<AwsContext> for IamRolePolicyAttachment {
    type Actual = IamRolePolicyAttachmentActual;
    type Output = ();

    fn key(&self) -> TaskKey {
        TaskKey::new(Self::KIND, &self.name)
    }

    fn dependencies(&self) -> Vec<TaskKey> {
        vec![self.role.key().clone()]
    }

    async fn find(
        &self,
        ctx: &AwsContext,
        deps: &Outputs,
    ) -> Result<Option<IamRolePolicyAttachmentActual>, TaskError> {
        let none = IamRolePolicyAttachmentActual {
            policy_arns: Vec::new(),
        };
        // A role that would be created, or was just created, has nothing attached.
        let Some(role) = deps.try_get(&self.role)?.filter(|r| !r.created) else {
            return Ok(Some(none));
        };
        // The run's snapshot of the role, when it has one, lists every
        // attached managed policy.
        if let Some(detail) = ctx.iam_role_detail(&role.name).await? {
            let mut arns: Vec<String> = detail
                .attached_managed_policies()
                .iter()
                .filter_map(|p| p.policy_arn().map(str::to_string))
                .collect();
            arns.sort();
            arns.dedup();
            return Ok(Some(IamRolePolicyAttachmentActual { policy_arns: arns }));
        }
        let mut arns = Vec::new();
        let mut marker = None;
        loop {
            let out = match ctx
                .iam()
                .list_attached_role_policies()
                .role_name(&role.name)
                .set_marker(marker.take())
                .send()
                .await
            {
                Ok(out) => out,
                Err(e) if is_no_such_entity(&e) => return Ok(Some(none)),
                Err(e) => return Err(classify("ListAttachedRolePolicies", &role.name, e)),
            };
            arns.extend(
                out.attached_policies()
                    .iter()
                    .filter_map(|p| p.policy_arn().map(str::to_string)),
            );
            match out.marker() {
                Some(next) if out.is_truncated() => marker = Some(next.to_string()),
                _ => break,
            }
        }
        arns.sort();
        arns.dedup();
        Ok(Some(IamRolePolicyAttachmentActual { policy_arns: arns }))
    }

    fn diff(
        &self,
        actual: Option<&IamRolePolicyAttachmentActual>,
        _: &Outputs,
    ) -> Result<Changes, TaskError> {
        let mut changes = Changes::new();
        changes.compare(
            "policyARNs",
            actual.map(|a| &a.policy_arns),
            &self.policy_arns,
        );
        Ok(changes)
    }

    fn output(&self, _: &IamRolePolicyAttachmentActual) {}

    async fn apply(
        &self,
        ctx: &AwsContext,
        deps: &Outputs,
        actual: Option<&IamRolePolicyAttachmentActual>,
        _: &Changes,
    ) -> Result<(), TaskError> {
        let role = deps.get(&self.role)?;
        let have: &[String] = actual.map(|a| a.policy_arns.as_slice()).unwrap_or(&[]);
        for arn in self.policy_arns.iter().filter(|a| !have.contains(a)) {
            // A just-created role that is not visible yet answers
            // NoSuchEntity, which `classify` retries.
            ctx.iam()
                .attach_role_policy()
                .role_name(&role.name)
                .policy_arn(arn)
                .send()
                .await
                .map_err(|e| classify("AttachRolePolicy", arn, e))?;
        }
        for arn in have.iter().filter(|a| !self.policy_arns.contains(a)) {
            match ctx
                .iam()
                .detach_role_policy()
                .role_name(&role.name)
                .policy_arn(arn)
                .send()
                .await
            {
                Ok(_) => {}
                Err(e) if is_no_such_entity(&e) => {}
                Err(e) => return Err(classify("DetachRolePolicy", arn, e)),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tasks::iam_role::IamRole;

    #[test]
    fn the_list_is_a_set() {
        let a = IamRolePolicyAttachment::new(
            "node-policyoverride",
            IamRole::output_ref("nodes.a.example.com"),
            &["arn:b".into(), "arn:a".into(), "arn:b".into()],
        );
        assert_eq!(a.policy_arns, ["arn:a", "arn:b"]);
        let outputs = Outputs::empty(a.key());
        let same = IamRolePolicyAttachmentActual {
            policy_arns: vec!["arn:a".into(), "arn:b".into()],
        };
        assert!(a.diff(Some(&same), &outputs).unwrap().is_empty());
        let extra = IamRolePolicyAttachmentActual {
            policy_arns: vec!["arn:a".into(), "arn:b".into(), "arn:c".into()],
        };
        assert!(a.diff(Some(&extra), &outputs).unwrap().has("policyARNs"));
    }
}
