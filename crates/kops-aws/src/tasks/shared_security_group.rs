//! An existing security group the spec names by id
//! (`InstanceGroup.spec.securityGroupOverride`,
//! `spec.api.loadBalancer.securityGroupOverride`): used in place of the
//! group kops would make, never created, changed, tagged or deleted. The
//! cluster's rules still go on it (named after the group, see kops-model's
//! security module), so it answers to the same key kind as
//! [`SecurityGroup`]: a rule's `SecurityGroup::id_ref(name)` reads its id.
//!
//! `find` describes it by id once per run (the description is kept in the
//! context for the rule tasks, since the group is not in the cluster's
//! tag-filtered discovery). A missing group or one outside the cluster's
//! VPC is refused with the field to fix.

use kops_engine::{Changes, OutputRef, Outputs, Task, TaskError, TaskKey};

use crate::context::AwsContext;
use crate::tasks::security_group::{SecurityGroup, SecurityGroupId};
use crate::tasks::vpc::VpcId;

/// The existing group to use.
#[derive(Debug, Clone, PartialEq)]
pub struct SharedSecurityGroup {
    /// The task name (kops' name for it in rule names, e.g.
    /// `sg-0123-ControlPlane`, or `api-elb.<cluster>` for the API load
    /// balancer's).
    pub name: String,
    /// The group's id (`sg-...`), as the spec gives it.
    pub id: String,
    /// The cluster's VPC, which the group must be in.
    pub vpc: OutputRef<VpcId>,
    /// The spec field that names the group, for errors.
    pub field: String,
}

/// What exists.
#[derive(Debug, Clone)]
pub struct SharedSecurityGroupActual {
    pub id: String,
    pub vpc_id: String,
}

impl SharedSecurityGroup {
    pub const KIND: &'static str = SecurityGroup::KIND;
}

impl Task<AwsContext> for SharedSecurityGroup {
    type Actual = SharedSecurityGroupActual;
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
        _: &Outputs,
    ) -> Result<Option<SharedSecurityGroupActual>, TaskError> {
        let found = ctx.shared_security_group(&self.id).await?;
        Ok(found.map(|g| SharedSecurityGroupActual {
            id: g.group_id().unwrap_or_default().to_string(),
            vpc_id: g.vpc_id().unwrap_or_default().to_string(),
        }))
    }

    fn diff(
        &self,
        actual: Option<&SharedSecurityGroupActual>,
        deps: &Outputs,
    ) -> Result<Changes, TaskError> {
        // Nothing of it is ours to change: the only differences are a
        // missing group or another VPC, both refused by check_changes.
        let vpc = deps.try_get(&self.vpc)?.map(|v| v.0.as_str());
        let mut changes = Changes::new();
        match actual {
            None => {
                changes.compare("id", None, self.id.as_str());
            }
            Some(a) if Some(a.vpc_id.as_str()) != vpc => {
                changes.compare_reference("vpc", Some(a.vpc_id.as_str()), vpc, self.vpc.key());
            }
            Some(_) => {}
        }
        Ok(changes)
    }

    fn check_changes(
        &self,
        actual: Option<&SharedSecurityGroupActual>,
        changes: &Changes,
    ) -> Result<(), TaskError> {
        match actual {
            None => Err(TaskError::fatal(format!(
                "the security group `{}` ({}) does not exist\nhint: create it in the cluster's VPC first, or remove the override",
                self.id, self.field
            ))),
            Some(a) if changes.get("vpc").is_some() => Err(TaskError::fatal(format!(
                "the security group `{}` ({}) is in VPC `{}`, not in the cluster's VPC\nhint: name a group of the cluster's VPC (spec.networkID)",
                self.id, self.field, a.vpc_id
            ))),
            Some(_) => Ok(()),
        }
    }

    fn output(&self, actual: &SharedSecurityGroupActual) -> SecurityGroupId {
        SecurityGroupId(actual.id.clone())
    }

    async fn apply(
        &self,
        _: &AwsContext,
        _: &Outputs,
        actual: Option<&SharedSecurityGroupActual>,
        _: &Changes,
    ) -> Result<SecurityGroupId, TaskError> {
        // check_changes refuses every change, so only an existing group in
        // the right VPC gets here.
        actual
            .map(|a| SecurityGroupId(a.id.clone()))
            .ok_or_else(|| TaskError::fatal(format!("no security group `{}`", self.id)))
    }
}
