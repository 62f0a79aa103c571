//! The egress-only internet gateway of an IPv6-only cluster: its private
//! subnets reach the IPv6 internet through it (`::/0`), while NAT64 sends
//! IPv4 destinations to the zone's NAT gateway. Owned: created in the VPC
//! with the cluster's tags. In a shared VPC: the one attached to the VPC is
//! used as it is, never tagged or changed.
//!
//! DescribeEgressOnlyInternetGateways is filtered by the `Name` tag on AWS;
//! the gateways returned are still matched here on tag and attachment, so a
//! server that ignores the filter gives the same answer.

use aws_sdk_ec2::types::{Filter, ResourceType};
use kops_engine::{Changes, FieldValue, OutputRef, Outputs, Task, TaskError, TaskKey};

use crate::context::{classify, name_tag, tag_map, tag_spec, AwsContext, Tags};
use crate::tasks::ec2::write_missing_tags;
use crate::tasks::managed_tags;
use crate::tasks::vpc::VpcId;

/// An egress-only internet gateway id (`eigw-...`), what routes read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressOnlyInternetGatewayId(pub String);

impl FieldValue for EgressOnlyInternetGatewayId {
    fn render(&self) -> String {
        self.0.clone()
    }
}

/// What the gateway should be.
#[derive(Debug, Clone, PartialEq)]
pub struct EgressOnlyInternetGateway {
    /// The task name and `Name` tag: the cluster's name.
    pub name: String,
    pub vpc: OutputRef<VpcId>,
    /// The VPC is shared: use the gateway attached to it, change nothing.
    pub shared: bool,
    pub tags: Tags,
}

/// What exists.
#[derive(Debug, Clone)]
pub struct EgressOnlyInternetGatewayActual {
    pub id: EgressOnlyInternetGatewayId,
    /// The VPC it is attached to.
    pub vpc_id: Option<String>,
    pub tags: Tags,
}

impl EgressOnlyInternetGateway {
    pub const KIND: &'static str = "EgressOnlyInternetGateway";

    /// The handle routes keep to read the gateway's id.
    pub fn id_ref(name: &str) -> OutputRef<EgressOnlyInternetGatewayId> {
        OutputRef::new(TaskKey::new(Self::KIND, name))
    }
}

fn actual_of(
    gateway: &aws_sdk_ec2::types::EgressOnlyInternetGateway,
) -> EgressOnlyInternetGatewayActual {
    EgressOnlyInternetGatewayActual {
        id: EgressOnlyInternetGatewayId(
            gateway
                .egress_only_internet_gateway_id()
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

/// The egress-only gateways the request returns (every page).
async fn describe(
    ctx: &AwsContext,
    filter: Option<Filter>,
    what: &str,
) -> Result<Vec<aws_sdk_ec2::types::EgressOnlyInternetGateway>, TaskError> {
    let mut gateways = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let out = ctx
            .ec2()
            .describe_egress_only_internet_gateways()
            .set_filters(filter.clone().map(|f| vec![f]))
            .set_next_token(token.take())
            .send()
            .await
            .map_err(|e| classify("DescribeEgressOnlyInternetGateways", what, e))?;
        gateways.extend(out.egress_only_internet_gateways().iter().cloned());
        match out.next_token().filter(|t| !t.is_empty()) {
            Some(next) => token = Some(next.to_string()),
            None => return Ok(gateways),
        }
    }
}

impl Task<AwsContext> for EgressOnlyInternetGateway {
    type Actual = EgressOnlyInternetGatewayActual;
    type Output = EgressOnlyInternetGatewayId;

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
    ) -> Result<Option<EgressOnlyInternetGatewayActual>, TaskError> {
        let vpc = deps.try_get(&self.vpc)?;
        if self.shared {
            let Some(vpc) = vpc else {
                return Ok(None);
            };
            let attached = describe(ctx, None, &vpc.0).await?;
            return Ok(attached
                .iter()
                .map(actual_of)
                .find(|g| g.vpc_id.as_deref() == Some(vpc.0.as_str())));
        }
        let by_name = Filter::builder()
            .name("tag:Name")
            .values(&self.name)
            .build();
        let found = describe(ctx, Some(by_name), &self.name).await?;
        let cluster_tag = self
            .tags
            .iter()
            .find(|(k, _)| k.starts_with(crate::context::TAG_CLUSTER_PREFIX));
        Ok(found
            .iter()
            .filter(|g| name_tag(g.tags()) == Some(self.name.as_str()))
            .map(actual_of)
            .find(|g| cluster_tag.is_none_or(|(k, v)| g.tags.get(k) == Some(v))))
    }

    fn diff(
        &self,
        actual: Option<&EgressOnlyInternetGatewayActual>,
        deps: &Outputs,
    ) -> Result<Changes, TaskError> {
        let mut changes = Changes::new();
        if self.shared {
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
        actual: Option<&EgressOnlyInternetGatewayActual>,
        changes: &Changes,
    ) -> Result<(), TaskError> {
        match actual {
            None if self.shared => Err(TaskError::fatal(
                "the shared VPC (spec.networkID) has no egress-only internet gateway, which the \
                 private subnets of an IPv6-only cluster route `::/0` to\n\
                 hint: create one in the VPC (aws ec2 create-egress-only-internet-gateway), or set \
                 `egress: External` on subnets whose egress is managed outside kops",
            )),
            Some(actual) if changes.has("vpc") => Err(TaskError::ImmutableField {
                field: "vpc",
                from: actual.vpc_id.clone().unwrap_or_default(),
                to: changes.get("vpc").map(|c| c.to.clone()).unwrap_or_default(),
            }),
            _ => Ok(()),
        }
    }

    fn output(&self, actual: &EgressOnlyInternetGatewayActual) -> EgressOnlyInternetGatewayId {
        actual.id.clone()
    }

    async fn apply(
        &self,
        ctx: &AwsContext,
        deps: &Outputs,
        actual: Option<&EgressOnlyInternetGatewayActual>,
        _: &Changes,
    ) -> Result<EgressOnlyInternetGatewayId, TaskError> {
        if let Some(actual) = actual {
            write_missing_tags(ctx, &actual.id.0, &actual.tags, &self.tags).await?;
            return Ok(actual.id.clone());
        }
        let vpc = deps.get(&self.vpc)?;
        let out = ctx
            .ec2()
            .create_egress_only_internet_gateway()
            .vpc_id(&vpc.0)
            .tag_specifications(tag_spec(
                ResourceType::EgressOnlyInternetGateway,
                &self.tags,
            ))
            .send()
            .await
            .map_err(|e| classify("CreateEgressOnlyInternetGateway", &self.name, e))?;
        let id = out
            .egress_only_internet_gateway()
            .and_then(|g| g.egress_only_internet_gateway_id())
            .ok_or_else(|| {
                TaskError::fatal(format!(
                    "CreateEgressOnlyInternetGateway for `{}` returned no id",
                    self.name
                ))
            })?
            .to_string();
        ctx.remember_created(self.key(), &id);
        Ok(EgressOnlyInternetGatewayId(id))
    }
}
