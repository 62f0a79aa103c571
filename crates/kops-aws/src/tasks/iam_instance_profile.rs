//! An IAM instance profile (what a launch template names) and the task that
//! puts the role in it.
//!
//! The profile is found with one `GetInstanceProfile`, which also returns
//! the role in it; the [`IamInstanceProfileRole`] task reads that from the
//! profile's output instead of asking again. IAM is eventually consistent: a
//! profile or role created a moment ago may answer `NoSuchEntity` to
//! `AddRoleToInstanceProfile`; that is retried (see
//! [`classify`](crate::context::classify)).

use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use kops_engine::{Changes, FieldValue, OutputRef, Outputs, Task, TaskError, TaskKey};

use crate::context::{classify, AwsContext, Tags};
use crate::tasks::iam_role::{iam_tag_map, iam_tags, is_no_such_entity, IamRole, IamRoleOutput};
use crate::tasks::{managed_tags, tags_to_write};

/// What dependants read: the profile's name, ARN and the roles in it when
/// it was found (none for a profile created in this run).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IamInstanceProfileOutput {
    pub name: String,
    pub arn: String,
    pub roles: Vec<String>,
}

impl FieldValue for IamInstanceProfileOutput {
    fn render(&self) -> String {
        self.name.clone()
    }
}

/// What the profile should be.
#[derive(Debug, Clone, PartialEq)]
pub struct IamInstanceProfile {
    /// The task name and the profile's name.
    pub name: String,
    pub tags: Tags,
}

/// What exists.
#[derive(Debug, Clone)]
pub struct IamInstanceProfileActual {
    pub name: String,
    pub arn: String,
    pub roles: Vec<String>,
    pub tags: Tags,
}

impl IamInstanceProfile {
    pub const KIND: &'static str = "IAMInstanceProfile";

    /// The handle dependants (launch templates, the profile's role) keep.
    pub fn output_ref(name: &str) -> OutputRef<IamInstanceProfileOutput> {
        OutputRef::new(TaskKey::new(Self::KIND, name))
    }
}

impl Task<AwsContext> for IamInstanceProfile {
    type Actual = IamInstanceProfileActual;
    type Output = IamInstanceProfileOutput;

    fn key(&self) -> TaskKey {
        TaskKey::new(Self::KIND, &self.name)
    }

    async fn find(
        &self,
        ctx: &AwsContext,
        _: &Outputs,
    ) -> Result<Option<IamInstanceProfileActual>, TaskError> {
        // The run's role snapshot lists the profiles that hold a role. AWS
        // documents the tags of a role there, not those of its profiles: a
        // profile listed with tags is taken as is, one listed without any
        // (kops tags every profile it makes) is read with GetInstanceProfile.
        if let Some(p) = ctx.iam_instance_profile_detail(&self.name).await? {
            if !p.tags().is_empty() {
                return Ok(Some(IamInstanceProfileActual {
                    name: p.instance_profile_name().to_string(),
                    arn: p.arn().to_string(),
                    roles: p
                        .roles()
                        .iter()
                        .map(|r| r.role_name().to_string())
                        .collect(),
                    tags: iam_tag_map(p.tags()),
                }));
            }
        }
        let out = match ctx
            .iam()
            .get_instance_profile()
            .instance_profile_name(&self.name)
            .send()
            .await
        {
            Ok(out) => out,
            Err(e) if is_no_such_entity(&e) => return Ok(None),
            Err(e) => return Err(classify("GetInstanceProfile", &self.name, e)),
        };
        Ok(out.instance_profile().map(|p| IamInstanceProfileActual {
            name: p.instance_profile_name().to_string(),
            arn: p.arn().to_string(),
            roles: p
                .roles()
                .iter()
                .map(|r| r.role_name().to_string())
                .collect(),
            tags: iam_tag_map(p.tags()),
        }))
    }

    fn diff(
        &self,
        actual: Option<&IamInstanceProfileActual>,
        _: &Outputs,
    ) -> Result<Changes, TaskError> {
        let tags = actual.map(|a| managed_tags(&a.tags, &self.tags));
        let mut changes = Changes::new();
        changes
            .compare("name", actual.map(|a| a.name.as_str()), self.name.as_str())
            .compare("tags", tags.as_ref(), &self.tags);
        Ok(changes)
    }

    fn output(&self, actual: &IamInstanceProfileActual) -> IamInstanceProfileOutput {
        IamInstanceProfileOutput {
            name: actual.name.clone(),
            arn: actual.arn.clone(),
            roles: actual.roles.clone(),
        }
    }

    async fn apply(
        &self,
        ctx: &AwsContext,
        _: &Outputs,
        actual: Option<&IamInstanceProfileActual>,
        _: &Changes,
    ) -> Result<IamInstanceProfileOutput, TaskError> {
        let Some(actual) = actual else {
            let out = ctx
                .iam()
                .create_instance_profile()
                .instance_profile_name(&self.name)
                .set_tags(Some(iam_tags(&self.tags)))
                .send()
                .await
                .map_err(|e| classify("CreateInstanceProfile", &self.name, e))?;
            return Ok(IamInstanceProfileOutput {
                name: self.name.clone(),
                arn: out
                    .instance_profile()
                    .map(|p| p.arn().to_string())
                    .unwrap_or_default(),
                roles: Vec::new(),
            });
        };
        let missing = tags_to_write(&actual.tags, &self.tags);
        if !missing.is_empty() {
            ctx.iam()
                .tag_instance_profile()
                .instance_profile_name(&self.name)
                .set_tags(Some(iam_tags(&missing)))
                .send()
                .await
                .map_err(|e| classify("TagInstanceProfile", &self.name, e))?;
        }
        Ok(self.output(actual))
    }
}

/// The role an instance profile holds (a profile holds at most one).
#[derive(Debug, Clone, PartialEq)]
pub struct IamInstanceProfileRole {
    pub profile: OutputRef<IamInstanceProfileOutput>,
    pub role: OutputRef<IamRoleOutput>,
}

/// The roles the profile holds now.
#[derive(Debug, Clone)]
pub struct IamInstanceProfileRoleActual {
    pub roles: Vec<String>,
}

impl IamInstanceProfileRole {
    pub const KIND: &'static str = "IAMInstanceProfileRole";

    /// The role named `role` in the profile named `profile`.
    pub fn new(profile: &str, role: &str) -> Self {
        IamInstanceProfileRole {
            profile: IamInstanceProfile::output_ref(profile),
            role: IamRole::output_ref(role),
        }
    }

    fn role_name(&self) -> &str {
        &self.role.key().name
    }

    fn profile_name(&self) -> &str {
        &self.profile.key().name
    }
}

impl Task<AwsContext> for IamInstanceProfileRole {
    type Actual = IamInstanceProfileRoleActual;
    type Output = ();

    fn key(&self) -> TaskKey {
        TaskKey::new(Self::KIND, self.profile_name())
    }

    fn dependencies(&self) -> Vec<TaskKey> {
        vec![self.profile.key().clone(), self.role.key().clone()]
    }

    async fn find(
        &self,
        _: &AwsContext,
        deps: &Outputs,
    ) -> Result<Option<IamInstanceProfileRoleActual>, TaskError> {
        // No call: the profile's own look-up listed its roles.
        Ok(deps
            .try_get(&self.profile)?
            .map(|p| IamInstanceProfileRoleActual {
                roles: p.roles.clone(),
            }))
    }

    fn diff(
        &self,
        actual: Option<&IamInstanceProfileRoleActual>,
        _: &Outputs,
    ) -> Result<Changes, TaskError> {
        let mut changes = Changes::new();
        let expected = vec![self.role_name().to_string()];
        changes.compare("roles", actual.map(|a| &a.roles), &expected);
        Ok(changes)
    }

    fn output(&self, _: &IamInstanceProfileRoleActual) {}

    async fn apply(
        &self,
        ctx: &AwsContext,
        deps: &Outputs,
        actual: Option<&IamInstanceProfileRoleActual>,
        _: &Changes,
    ) -> Result<(), TaskError> {
        let profile = deps.get(&self.profile)?;
        let role = deps.get(&self.role)?;
        let current = actual.map(|a| a.roles.as_slice()).unwrap_or_default();
        // A profile holds one role: take out any other first.
        for other in current.iter().filter(|r| **r != role.name) {
            match ctx
                .iam()
                .remove_role_from_instance_profile()
                .instance_profile_name(&profile.name)
                .role_name(other)
                .send()
                .await
            {
                Ok(_) => {}
                // Already out (a retry after a removal that went through).
                Err(e) if is_no_such_entity(&e) => {}
                Err(e) => return Err(classify("RemoveRoleFromInstanceProfile", &profile.name, e)),
            }
        }
        if current.contains(&role.name) {
            return Ok(());
        }
        let added = ctx
            .iam()
            .add_role_to_instance_profile()
            .instance_profile_name(&profile.name)
            .role_name(&role.name)
            .send()
            .await;
        match added {
            Ok(_) => Ok(()),
            // The profile is full: an earlier attempt may have added the
            // role already (its answer lost). Look before giving up.
            Err(e) if e.code() == Some("LimitExceeded") => {
                let holds = ctx
                    .iam()
                    .get_instance_profile()
                    .instance_profile_name(&profile.name)
                    .send()
                    .await
                    .map_err(|e| classify("GetInstanceProfile", &profile.name, e))?
                    .instance_profile()
                    .is_some_and(|p| p.roles().iter().any(|r| r.role_name() == role.name));
                if holds {
                    Ok(())
                } else {
                    Err(classify("AddRoleToInstanceProfile", &profile.name, e))
                }
            }
            Err(e) => Err(classify("AddRoleToInstanceProfile", &profile.name, e)),
        }
    }
}
