//! An IAM role for one kind of instance (`masters.<cluster>`,
//! `nodes.<cluster>`, `bastions.<cluster>`): its trust policy, permissions
//! boundary and tags.
//!
//! IAM cannot list by tag, so a role is found by name with one `GetRole`,
//! which returns the trust policy, the boundary and the tags together (a
//! single `ListRoles` would return neither tags nor boundary, and pages
//! through every role of the account). Roles are found by name and a kops
//! cluster has at most four, so this is a fixed, small number of calls.

use aws_sdk_iam::types::Tag;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use kops_engine::{Changes, FieldValue, OutputRef, Outputs, Task, TaskError, TaskKey};

use crate::context::{classify, AwsContext, Tags};
use crate::tasks::policy_document::PolicyDocument;
use crate::tasks::{managed_tags, tags_to_write};

/// What dependants (policies, instance profiles) read: the role's name and
/// ARN, and whether this run created it (then it has no inline policies to
/// look up).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IamRoleOutput {
    pub name: String,
    pub arn: String,
    pub created: bool,
}

impl FieldValue for IamRoleOutput {
    fn render(&self) -> String {
        self.name.clone()
    }
}

/// What the role should be.
#[derive(Debug, Clone, PartialEq)]
pub struct IamRole {
    /// The task name and the role's name.
    pub name: String,
    /// Who may assume the role (`ec2.amazonaws.com`).
    pub assume_role_policy: PolicyDocument,
    /// The ARN of a managed policy bounding the role (`spec.iam.permissionsBoundary`).
    pub permissions_boundary: Option<String>,
    pub tags: Tags,
}

/// What exists.
#[derive(Debug, Clone)]
pub struct IamRoleActual {
    pub name: String,
    pub arn: String,
    pub assume_role_policy: Option<PolicyDocument>,
    pub permissions_boundary: Option<String>,
    pub tags: Tags,
}

impl IamRole {
    pub const KIND: &'static str = "IAMRole";

    /// The handle dependants keep to read the role.
    pub fn output_ref(name: &str) -> OutputRef<IamRoleOutput> {
        OutputRef::new(TaskKey::new(Self::KIND, name))
    }
}

/// IAM tags as a map.
pub(crate) fn iam_tag_map(tags: &[Tag]) -> Tags {
    tags.iter()
        .map(|t| (t.key().to_string(), t.value().to_string()))
        .collect()
}

/// IAM tags from a map.
pub(crate) fn iam_tags(tags: &Tags) -> Vec<Tag> {
    tags.iter()
        .filter_map(|(k, v)| Tag::builder().key(k).value(v).build().ok())
        .collect()
}

/// Whether IAM answered "no such entity" (for a look-up: the object does not exist).
pub(crate) fn is_no_such_entity<E: ProvideErrorMetadata>(err: &E) -> bool {
    err.code() == Some("NoSuchEntity")
}

impl Task<AwsContext> for IamRole {
    type Actual = IamRoleActual;
    type Output = IamRoleOutput;

    fn key(&self) -> TaskKey {
        TaskKey::new(Self::KIND, &self.name)
    }

    async fn find(
        &self,
        ctx: &AwsContext,
        _: &Outputs,
    ) -> Result<Option<IamRoleActual>, TaskError> {
        // The run's snapshot of the account's roles answers a role that
        // exists; a role missing from it is confirmed with GetRole.
        if let Some(role) = ctx.iam_role_detail(&self.name).await? {
            let assume_role_policy = role
                .assume_role_policy_document()
                .map(PolicyDocument::parse)
                .transpose()
                .map_err(|e| {
                    TaskError::fatal(format!("the trust policy of IAM role `{}`: {e}", self.name))
                })?;
            return Ok(Some(IamRoleActual {
                name: role.role_name().unwrap_or(&self.name).to_string(),
                arn: role.arn().unwrap_or_default().to_string(),
                assume_role_policy,
                permissions_boundary: role
                    .permissions_boundary()
                    .and_then(|b| b.permissions_boundary_arn())
                    .map(str::to_string),
                tags: iam_tag_map(role.tags()),
            }));
        }
        let out = match ctx.iam().get_role().role_name(&self.name).send().await {
            Ok(out) => out,
            Err(e) if is_no_such_entity(&e) => return Ok(None),
            Err(e) => return Err(classify("GetRole", &self.name, e)),
        };
        let Some(role) = out.role() else {
            return Ok(None);
        };
        let assume_role_policy = role
            .assume_role_policy_document()
            .map(PolicyDocument::parse)
            .transpose()
            .map_err(|e| {
                TaskError::fatal(format!("the trust policy of IAM role `{}`: {e}", self.name))
            })?;
        Ok(Some(IamRoleActual {
            name: role.role_name().to_string(),
            arn: role.arn().to_string(),
            assume_role_policy,
            permissions_boundary: role
                .permissions_boundary()
                .and_then(|b| b.permissions_boundary_arn())
                .map(str::to_string),
            tags: iam_tag_map(role.tags()),
        }))
    }

    fn diff(&self, actual: Option<&IamRoleActual>, _: &Outputs) -> Result<Changes, TaskError> {
        let tags = actual.map(|a| managed_tags(&a.tags, &self.tags));
        let expected_policy = Some(self.assume_role_policy.clone());
        let mut changes = Changes::new();
        changes
            .compare(
                "assumeRolePolicy",
                actual.map(|a| &a.assume_role_policy),
                &expected_policy,
            )
            .compare(
                "permissionsBoundary",
                actual.map(|a| &a.permissions_boundary),
                &self.permissions_boundary,
            )
            .compare("tags", tags.as_ref(), &self.tags);
        Ok(changes)
    }

    fn output(&self, actual: &IamRoleActual) -> IamRoleOutput {
        IamRoleOutput {
            name: actual.name.clone(),
            arn: actual.arn.clone(),
            created: false,
        }
    }

    async fn apply(
        &self,
        ctx: &AwsContext,
        _: &Outputs,
        actual: Option<&IamRoleActual>,
        changes: &Changes,
    ) -> Result<IamRoleOutput, TaskError> {
        let iam = ctx.iam();
        let Some(actual) = actual else {
            let out = iam
                .create_role()
                .role_name(&self.name)
                .assume_role_policy_document(self.assume_role_policy.to_json())
                .set_permissions_boundary(self.permissions_boundary.clone())
                .set_tags(Some(iam_tags(&self.tags)))
                .send()
                .await
                .map_err(|e| classify("CreateRole", &self.name, e))?;
            let arn = out.role().map(|r| r.arn().to_string()).unwrap_or_default();
            return Ok(IamRoleOutput {
                name: self.name.clone(),
                arn,
                created: true,
            });
        };
        if changes.has("assumeRolePolicy") {
            iam.update_assume_role_policy()
                .role_name(&self.name)
                .policy_document(self.assume_role_policy.to_json())
                .send()
                .await
                .map_err(|e| classify("UpdateAssumeRolePolicy", &self.name, e))?;
        }
        if changes.has("permissionsBoundary") {
            match &self.permissions_boundary {
                Some(arn) => iam
                    .put_role_permissions_boundary()
                    .role_name(&self.name)
                    .permissions_boundary(arn)
                    .send()
                    .await
                    .map(|_| ())
                    .map_err(|e| classify("PutRolePermissionsBoundary", &self.name, e))?,
                None => iam
                    .delete_role_permissions_boundary()
                    .role_name(&self.name)
                    .send()
                    .await
                    .map(|_| ())
                    .map_err(|e| classify("DeleteRolePermissionsBoundary", &self.name, e))?,
            }
        }
        let missing = tags_to_write(&actual.tags, &self.tags);
        if !missing.is_empty() {
            iam.tag_role()
                .role_name(&self.name)
                .set_tags(Some(iam_tags(&missing)))
                .send()
                .await
                .map_err(|e| classify("TagRole", &self.name, e))?;
        }
        Ok(self.output(actual))
    }
}
