//! A security group in the cluster's VPC (`masters.<cluster>`,
//! `nodes.<cluster>`, `api-elb.<cluster>`...). Its rules are separate
//! [`SecurityGroupRule`](super::security_group_rule::SecurityGroupRule)
//! tasks.
//!
//! A new VPC security group comes with AWS' default egress rule (all
//! traffic to 0.0.0.0/0). kops keeps it: that rule is exactly kops' own
//! `ipv4-<role>-egress` rule, so nothing is revoked here (the rule task
//! counts it as present on a group created in the same run).

use aws_sdk_ec2::types::ResourceType;
use kops_engine::{Changes, FieldValue, OutputRef, Outputs, Task, TaskError, TaskKey};

use crate::context::{classify, ec2_tags, tag_map, tag_spec, AwsContext, Tags};
use crate::tasks::vpc::VpcId;
use crate::tasks::{managed_tags, tags_to_write};

/// A security group id (`sg-...`), what rules and instances read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecurityGroupId(pub String);

impl FieldValue for SecurityGroupId {
    fn render(&self) -> String {
        self.0.clone()
    }
}

/// What the security group should be.
#[derive(Debug, Clone, PartialEq)]
pub struct SecurityGroup {
    /// The task name and the group's name (`GroupName`), e.g. `nodes.<cluster>`.
    pub name: String,
    /// Fixed at creation: AWS cannot change a group's description.
    pub description: String,
    pub vpc: OutputRef<VpcId>,
    pub tags: Tags,
}

/// What exists.
#[derive(Debug, Clone)]
pub struct SecurityGroupActual {
    pub id: SecurityGroupId,
    pub vpc_id: String,
    pub description: String,
    pub tags: Tags,
}

impl SecurityGroup {
    pub const KIND: &'static str = "SecurityGroup";

    /// The handle rules and launch templates keep to read the group's id.
    pub fn id_ref(name: &str) -> OutputRef<SecurityGroupId> {
        OutputRef::new(TaskKey::new(Self::KIND, name))
    }
}

impl Task<AwsContext> for SecurityGroup {
    type Actual = SecurityGroupActual;
    type Output = SecurityGroupId;

    fn key(&self) -> TaskKey {
        TaskKey::new(Self::KIND, &self.name)
    }

    fn dependencies(&self) -> Vec<TaskKey> {
        vec![self.vpc.key().clone()]
    }

    async fn find(
        &self,
        ctx: &AwsContext,
        deps: &Outputs,
    ) -> Result<Option<SecurityGroupActual>, TaskError> {
        // A VPC that would be created holds no groups yet.
        let Some(vpc) = deps.try_get(&self.vpc)? else {
            return Ok(None);
        };
        let found = ctx.security_groups().await?.iter().find(|g| {
            g.group_name() == Some(self.name.as_str()) && g.vpc_id() == Some(vpc.0.as_str())
        });
        Ok(found.map(|g| SecurityGroupActual {
            id: SecurityGroupId(g.group_id().unwrap_or_default().to_string()),
            vpc_id: g.vpc_id().unwrap_or_default().to_string(),
            description: g.description().unwrap_or_default().to_string(),
            tags: tag_map(g.tags()),
        }))
    }

    fn diff(
        &self,
        actual: Option<&SecurityGroupActual>,
        deps: &Outputs,
    ) -> Result<Changes, TaskError> {
        let vpc = deps.try_get(&self.vpc)?.map(|v| v.0.as_str());
        let tags = actual.map(|a| managed_tags(&a.tags, &self.tags));
        let mut changes = Changes::new();
        changes
            .compare(
                "description",
                actual.map(|a| a.description.as_str()),
                self.description.as_str(),
            )
            .compare_reference(
                "vpc",
                actual.map(|a| a.vpc_id.as_str()),
                vpc,
                self.vpc.key(),
            )
            .compare("tags", tags.as_ref(), &self.tags);
        Ok(changes)
    }

    fn check_changes(
        &self,
        actual: Option<&SecurityGroupActual>,
        _: &Changes,
    ) -> Result<(), TaskError> {
        match actual {
            Some(a) if a.description != self.description => Err(TaskError::immutable(
                "description",
                a.description.as_str(),
                self.description.as_str(),
            )),
            _ => Ok(()),
        }
    }

    fn output(&self, actual: &SecurityGroupActual) -> SecurityGroupId {
        actual.id.clone()
    }

    async fn apply(
        &self,
        ctx: &AwsContext,
        deps: &Outputs,
        actual: Option<&SecurityGroupActual>,
        _: &Changes,
    ) -> Result<SecurityGroupId, TaskError> {
        let Some(actual) = actual else {
            let vpc = deps.get(&self.vpc)?;
            let out = ctx
                .ec2()
                .create_security_group()
                .group_name(&self.name)
                .description(&self.description)
                .vpc_id(&vpc.0)
                .tag_specifications(tag_spec(ResourceType::SecurityGroup, &self.tags))
                .send()
                .await
                .map_err(|e| classify("CreateSecurityGroup", &self.name, e))?;
            let id = out.group_id().ok_or_else(|| {
                TaskError::fatal(format!(
                    "CreateSecurityGroup for `{}` returned no id",
                    self.name
                ))
            })?;
            return Ok(SecurityGroupId(id.to_string()));
        };
        let missing = tags_to_write(&actual.tags, &self.tags);
        if !missing.is_empty() {
            ctx.ec2()
                .create_tags()
                .resources(&actual.id.0)
                .set_tags(Some(ec2_tags(&missing)))
                .send()
                .await
                .map_err(|e| classify("CreateTags", &actual.id.0, e))?;
        }
        Ok(actual.id.clone())
    }
}
