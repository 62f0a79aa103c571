//! An inline policy of an IAM role, compared semantically (see
//! [`PolicyDocument`]).
//!
//! A policy without a document must not exist: kops builds an empty policy
//! for roles that need no permissions (bastions, and nodes in most
//! clusters) and then removes any inline policy of that name left from an
//! earlier configuration. Found with one `GetRolePolicy`.

use kops_engine::{Changes, OutputRef, Outputs, Task, TaskError, TaskKey};

use crate::context::{classify, AwsContext};
use crate::tasks::iam_role::{is_no_such_entity, IamRole, IamRoleOutput};
use crate::tasks::policy_document::PolicyDocument;

/// What the policy should be.
#[derive(Debug, Clone, PartialEq)]
pub struct IamRolePolicy {
    /// The policy's name (kops: the role's name, or `additional.<role>`).
    pub name: String,
    /// The role it belongs to.
    pub role: OutputRef<IamRoleOutput>,
    /// The document; `None`: the policy must not exist.
    pub document: Option<PolicyDocument>,
}

/// What exists: the document, or `None` when a policy that must not exist
/// does not (so there is nothing to do).
#[derive(Debug, Clone)]
pub struct IamRolePolicyActual {
    pub document: Option<PolicyDocument>,
}

impl IamRolePolicy {
    pub const KIND: &'static str = "IAMRolePolicy";

    /// A policy of the role named `role`.
    pub fn new(name: impl Into<String>, role: &str, document: Option<PolicyDocument>) -> Self {
        IamRolePolicy {
            name: name.into(),
            role: IamRole::output_ref(role),
            document,
        }
    }

    fn role_name(&self) -> &str {
        &self.role.key().name
    }
}

impl Task<AwsContext> for IamRolePolicy {
    type Actual = IamRolePolicyActual;
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
    ) -> Result<Option<IamRolePolicyActual>, TaskError> {
        let absent = if self.document.is_none() {
            Some(IamRolePolicyActual { document: None })
        } else {
            None
        };
        // A role that would be created, or was just created, has no policies yet.
        let Some(role) = deps.try_get(&self.role)?.filter(|r| !r.created) else {
            return Ok(absent);
        };
        // The run's snapshot of the role, when it has one, lists every
        // inline policy: absent there means absent.
        if let Some(detail) = ctx.iam_role_detail(&role.name).await? {
            let Some(policy) = detail
                .role_policy_list()
                .iter()
                .find(|p| p.policy_name() == Some(self.name.as_str()))
            else {
                return Ok(absent);
            };
            let document = PolicyDocument::parse(policy.policy_document().unwrap_or_default())
                .map_err(|e| {
                    TaskError::fatal(format!(
                        "the inline policy `{}` of IAM role `{}`: {e}",
                        self.name, role.name
                    ))
                })?;
            return Ok(Some(IamRolePolicyActual {
                document: Some(document),
            }));
        }
        let out = match ctx
            .iam()
            .get_role_policy()
            .role_name(&role.name)
            .policy_name(&self.name)
            .send()
            .await
        {
            Ok(out) => out,
            Err(e) if is_no_such_entity(&e) => return Ok(absent),
            Err(e) => return Err(classify("GetRolePolicy", &self.name, e)),
        };
        let document = PolicyDocument::parse(out.policy_document()).map_err(|e| {
            TaskError::fatal(format!(
                "the inline policy `{}` of IAM role `{}`: {e}",
                self.name, role.name
            ))
        })?;
        Ok(Some(IamRolePolicyActual {
            document: Some(document),
        }))
    }

    fn diff(
        &self,
        actual: Option<&IamRolePolicyActual>,
        _: &Outputs,
    ) -> Result<Changes, TaskError> {
        let mut changes = Changes::new();
        changes
            .compare("role", actual.map(|_| self.role_name()), self.role_name())
            .compare(
                "policyDocument",
                actual.map(|a| &a.document),
                &self.document,
            );
        Ok(changes)
    }

    fn output(&self, _: &IamRolePolicyActual) {}

    async fn apply(
        &self,
        ctx: &AwsContext,
        deps: &Outputs,
        _: Option<&IamRolePolicyActual>,
        _: &Changes,
    ) -> Result<(), TaskError> {
        let role = deps.get(&self.role)?;
        match &self.document {
            // A role created a moment ago may not be visible yet: the
            // NoSuchEntity that follows is retried (see `classify`).
            Some(document) => ctx
                .iam()
                .put_role_policy()
                .role_name(&role.name)
                .policy_name(&self.name)
                .policy_document(document.to_json())
                .send()
                .await
                .map(|_| ())
                .map_err(|e| classify("PutRolePolicy", &self.name, e)),
            None => match ctx
                .iam()
                .delete_role_policy()
                .role_name(&role.name)
                .policy_name(&self.name)
                .send()
                .await
            {
                Ok(_) => Ok(()),
                // Already gone (a retry after a delete that went through).
                Err(e) if is_no_such_entity(&e) => Ok(()),
                Err(e) => Err(classify("DeleteRolePolicy", &self.name, e)),
            },
        }
    }
}
