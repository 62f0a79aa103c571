//! The internet gateway of the cluster's VPC. Owned: created, tagged and
//! attached. In a shared VPC: the gateway already attached to it is used as
//! it is (found by attachment, never tagged or changed).

use aws_sdk_ec2::types::{Filter, ResourceType};
use kops_engine::{Changes, FieldValue, OutputRef, Outputs, Task, TaskError, TaskKey};

use crate::context::{classify, name_tag, tag_map, tag_spec, AwsContext, Tags};
use crate::tasks::ec2::{not_visible_yet, unless_not_found, write_missing_tags};
use crate::tasks::managed_tags;
use crate::tasks::vpc::VpcId;

/// An internet gateway id, what routes read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InternetGatewayId(pub String);

impl FieldValue for InternetGatewayId {
    fn render(&self) -> String {
        self.0.clone()
    }
}

/// What the gateway should be.
#[derive(Debug, Clone, PartialEq)]
pub struct InternetGateway {
    /// The task name and `Name` tag: the cluster's name.
    pub name: String,
    pub vpc: OutputRef<VpcId>,
    /// The VPC is shared: use the gateway attached to it, change nothing.
    pub shared: bool,
    pub tags: Tags,
}

/// What exists.
#[derive(Debug, Clone)]
pub struct InternetGatewayActual {
    pub id: InternetGatewayId,
    /// The VPC it is attached to.
    pub vpc_id: Option<String>,
    pub tags: Tags,
}

impl InternetGateway {
    pub const KIND: &'static str = "InternetGateway";

    /// The handle routes keep to read the gateway's id.
    pub fn id_ref(name: &str) -> OutputRef<InternetGatewayId> {
        OutputRef::new(TaskKey::new(Self::KIND, name))
    }
}

fn actual_of(gateway: &aws_sdk_ec2::types::InternetGateway) -> InternetGatewayActual {
    InternetGatewayActual {
        id: InternetGatewayId(
            gateway
                .internet_gateway_id()
                .unwrap_or_default()
                .to_string(),
        ),
        vpc_id: gateway
            .attachments()
            .iter()
            .find_map(|a| a.vpc_id())
            .map(str::to_string),
        tags: tag_map(gateway.tags()),
    }
}

impl Task<AwsContext> for InternetGateway {
    type Actual = InternetGatewayActual;
    type Output = InternetGatewayId;

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
    ) -> Result<Option<InternetGatewayActual>, TaskError> {
        if self.shared {
            let Some(vpc) = deps.try_get(&self.vpc)? else {
                return Ok(None);
            };
            let out = ctx
                .ec2()
                .describe_internet_gateways()
                .filters(
                    Filter::builder()
                        .name("attachment.vpc-id")
                        .values(&vpc.0)
                        .build(),
                )
                .send()
                .await
                .map_err(|e| classify("DescribeInternetGateways", &vpc.0, e))?;
            return Ok(out.internet_gateways().first().map(actual_of));
        }
        let cached = ctx
            .internet_gateways()
            .await?
            .iter()
            .find(|g| name_tag(g.tags()) == Some(self.name.as_str()));
        if let Some(gateway) = cached {
            return Ok(Some(actual_of(gateway)));
        }
        let Some(id) = ctx.created_id(&self.key()) else {
            return Ok(None);
        };
        let out = unless_not_found(
            "DescribeInternetGateways",
            &id,
            ctx.ec2()
                .describe_internet_gateways()
                .internet_gateway_ids(&id)
                .send()
                .await,
        )?;
        match out.as_ref().and_then(|o| o.internet_gateways().first()) {
            Some(gateway) => Ok(Some(actual_of(gateway))),
            None => Err(not_visible_yet("internet gateway", &id)),
        }
    }

    fn diff(
        &self,
        actual: Option<&InternetGatewayActual>,
        deps: &Outputs,
    ) -> Result<Changes, TaskError> {
        let mut changes = Changes::new();
        if self.shared {
            // Used as it is; a missing one is refused by check_changes.
            return Ok(changes);
        }
        let tags = actual.map(|a| managed_tags(&a.tags, &self.tags));
        changes
            .compare_reference(
                "vpc",
                actual.map(|a| a.vpc_id.clone()).as_ref(),
                deps.try_get(&self.vpc)?.map(|v| Some(v.0.clone())).as_ref(),
                self.vpc.key(),
            )
            .compare("tags", tags.as_ref(), &self.tags);
        Ok(changes)
    }

    fn check_changes(
        &self,
        actual: Option<&InternetGatewayActual>,
        _: &Changes,
    ) -> Result<(), TaskError> {
        if self.shared && actual.is_none() {
            return Err(TaskError::fatal(
                "the shared VPC (spec.networkID) has no internet gateway attached\n\
                 hint: attach one to the VPC, or set `egress: External` on subnets whose egress is managed outside kops",
            ));
        }
        Ok(())
    }

    fn output(&self, actual: &InternetGatewayActual) -> InternetGatewayId {
        actual.id.clone()
    }

    async fn apply(
        &self,
        ctx: &AwsContext,
        deps: &Outputs,
        actual: Option<&InternetGatewayActual>,
        changes: &Changes,
    ) -> Result<InternetGatewayId, TaskError> {
        let vpc = deps.get(&self.vpc)?;
        let id = match actual {
            Some(actual) => {
                write_missing_tags(ctx, &actual.id.0, &actual.tags, &self.tags).await?;
                actual.id.0.clone()
            }
            None => {
                let out = ctx
                    .ec2()
                    .create_internet_gateway()
                    .tag_specifications(tag_spec(ResourceType::InternetGateway, &self.tags))
                    .send()
                    .await
                    .map_err(|e| classify("CreateInternetGateway", &self.name, e))?;
                let id = out
                    .internet_gateway()
                    .and_then(|g| g.internet_gateway_id())
                    .ok_or_else(|| {
                        TaskError::fatal(format!(
                            "CreateInternetGateway for `{}` returned no id",
                            self.name
                        ))
                    })?
                    .to_string();
                ctx.remember_created(self.key(), &id);
                id
            }
        };
        if changes.has("vpc") {
            ctx.ec2()
                .attach_internet_gateway()
                .internet_gateway_id(&id)
                .vpc_id(&vpc.0)
                .send()
                .await
                .map_err(|e| classify("AttachInternetGateway", &id, e))?;
        }
        Ok(InternetGatewayId(id))
    }
}
