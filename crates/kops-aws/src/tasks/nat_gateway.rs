//! The NAT gateway of a zone with private subnets (`<zone>.<cluster>`), in
//! the zone's utility subnet with the zone's elastic IP. Found by `Name` in
//! the batched DescribeNatGateways (gateways being deleted or that failed
//! are ignored). A new gateway is `pending` for a minute or two: the task
//! reports a retryable error until it is `available`, so the executor
//! waits and the private routes, which depend on it, start after.
//! An existing gateway (`egress: nat-...`) is found by id and only tagged
//! `shared`.

use aws_sdk_ec2::types::{NatGatewayState, ResourceType};
use kops_engine::{Changes, FieldValue, OutputRef, Outputs, Task, TaskError, TaskKey};

use crate::context::{classify, name_tag, tag_map, tag_spec, AwsContext, Tags};
use crate::tasks::ec2::{not_visible_yet, unless_not_found, write_missing_tags};
use crate::tasks::elastic_ip::ElasticIpId;
use crate::tasks::managed_tags;
use crate::tasks::subnet::SubnetId;

/// A NAT gateway id, what private routes read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NatGatewayId(pub String);

impl FieldValue for NatGatewayId {
    fn render(&self) -> String {
        self.0.clone()
    }
}

/// What the gateway should be.
#[derive(Debug, Clone, PartialEq)]
pub struct NatGateway {
    /// The task name and (owned) `Name` tag: `<zone>.<cluster>`.
    pub name: String,
    /// Where it lives: the zone's utility subnet. `None` for an existing gateway.
    pub subnet: Option<OutputRef<SubnetId>>,
    /// Its address. `None` for an existing gateway.
    pub elastic_ip: Option<OutputRef<ElasticIpId>>,
    /// An existing gateway (`egress: nat-...`): found by id, only tagged.
    pub shared_id: Option<String>,
    pub tags: Tags,
}

/// What exists.
#[derive(Debug, Clone)]
pub struct NatGatewayActual {
    pub id: NatGatewayId,
    pub subnet_id: Option<String>,
    pub allocation_id: Option<String>,
    /// `pending` or `available` (deleted and failed ones are not found).
    pub state: String,
    pub tags: Tags,
}

impl NatGateway {
    pub const KIND: &'static str = "NatGateway";

    /// The handle routes keep to read the gateway's id.
    pub fn id_ref(name: &str) -> OutputRef<NatGatewayId> {
        OutputRef::new(TaskKey::new(Self::KIND, name))
    }
}

const AVAILABLE: &str = "available";

fn state_of(gateway: &aws_sdk_ec2::types::NatGateway) -> Option<&NatGatewayState> {
    gateway.state()
}

/// Gateways that are gone or going: not ours to use.
fn is_gone(gateway: &aws_sdk_ec2::types::NatGateway) -> bool {
    matches!(
        state_of(gateway),
        Some(NatGatewayState::Deleted | NatGatewayState::Deleting | NatGatewayState::Failed)
    )
}

fn actual_of(gateway: &aws_sdk_ec2::types::NatGateway) -> NatGatewayActual {
    NatGatewayActual {
        id: NatGatewayId(gateway.nat_gateway_id().unwrap_or_default().to_string()),
        subnet_id: gateway.subnet_id().map(str::to_string),
        allocation_id: gateway
            .nat_gateway_addresses()
            .iter()
            .find_map(|a| a.allocation_id())
            .map(str::to_string),
        state: state_of(gateway).map_or_else(String::new, |s| s.as_str().to_string()),
        tags: tag_map(gateway.tags()),
    }
}

async fn describe_by_id(
    ctx: &AwsContext,
    id: &str,
) -> Result<Option<aws_sdk_ec2::types::NatGateway>, TaskError> {
    let out = unless_not_found(
        "DescribeNatGateways",
        id,
        ctx.ec2()
            .describe_nat_gateways()
            .nat_gateway_ids(id)
            .send()
            .await,
    )?;
    Ok(out.and_then(|o| o.nat_gateways().first().cloned()))
}

impl Task<AwsContext> for NatGateway {
    type Actual = NatGatewayActual;
    type Output = NatGatewayId;

    fn key(&self) -> TaskKey {
        TaskKey::new(Self::KIND, &self.name)
    }

    fn dependencies(&self) -> Vec<TaskKey> {
        let subnet = self.subnet.iter().map(|s| s.key().clone());
        let address = self.elastic_ip.iter().map(|e| e.key().clone());
        subnet.chain(address).collect()
    }

    async fn find(
        &self,
        ctx: &AwsContext,
        _: &Outputs,
    ) -> Result<Option<NatGatewayActual>, TaskError> {
        if let Some(id) = &self.shared_id {
            let found = describe_by_id(ctx, id).await?;
            return Ok(found.filter(|g| !is_gone(g)).as_ref().map(actual_of));
        }
        let cached = ctx
            .nat_gateways()
            .await?
            .iter()
            .find(|g| !is_gone(g) && name_tag(g.tags()) == Some(self.name.as_str()));
        let id = match cached {
            // The cache holds the state at the start of the run.
            Some(g) if state_of(g) == Some(&NatGatewayState::Available) => {
                return Ok(Some(actual_of(g)));
            }
            Some(g) => g.nat_gateway_id().unwrap_or_default().to_string(),
            None => match ctx.created_id(&self.key()) {
                Some(id) => id,
                None => return Ok(None),
            },
        };
        let Some(gateway) = describe_by_id(ctx, &id).await? else {
            return Err(not_visible_yet("NAT gateway", &id));
        };
        if state_of(&gateway) == Some(&NatGatewayState::Failed) {
            return Err(TaskError::fatal(format!(
                "the NAT gateway `{id}` (`{}`) failed: {}\n\
                 hint: see the gateway's failure in the AWS console; the next update creates a new one",
                self.name,
                gateway.failure_message().unwrap_or("no reason given")
            )));
        }
        Ok(Some(actual_of(&gateway)).filter(|_| !is_gone(&gateway)))
    }

    fn diff(
        &self,
        actual: Option<&NatGatewayActual>,
        deps: &Outputs,
    ) -> Result<Changes, TaskError> {
        let mut changes = Changes::new();
        let tags = actual.map(|a| managed_tags(&a.tags, &self.tags));
        if let Some(id) = &self.shared_id {
            if actual.is_none() {
                changes.compare("id", None, id);
            }
            changes.compare("tags", tags.as_ref(), &self.tags);
            return Ok(changes);
        }
        if let Some(subnet) = &self.subnet {
            changes.compare_reference(
                "subnet",
                actual.map(|a| a.subnet_id.as_deref().unwrap_or_default()),
                deps.try_get(subnet)?.map(|s| s.0.as_str()),
                subnet.key(),
            );
        }
        if let Some(address) = &self.elastic_ip {
            changes.compare_reference(
                "elasticIp",
                actual.map(|a| a.allocation_id.as_deref().unwrap_or_default()),
                deps.try_get(address)?.map(|e| e.0.as_str()),
                address.key(),
            );
        }
        if let Some(actual) = actual {
            changes.compare("state", Some(actual.state.as_str()), AVAILABLE);
        }
        changes.compare("tags", tags.as_ref(), &self.tags);
        Ok(changes)
    }

    fn check_changes(
        &self,
        actual: Option<&NatGatewayActual>,
        changes: &Changes,
    ) -> Result<(), TaskError> {
        let Some(_) = actual else {
            return match &self.shared_id {
                Some(id) => Err(TaskError::fatal(format!(
                    "the NAT gateway `{id}` (spec.subnets[].egress) does not exist\n\
                     hint: check the egress of the zone's private subnets"
                ))),
                None if self.subnet.is_none() || self.elastic_ip.is_none() => {
                    Err(TaskError::fatal(format!(
                        "the NAT gateway `{}` needs a subnet and an elastic IP",
                        self.name
                    )))
                }
                None => Ok(()),
            };
        };
        for field in ["subnet", "elasticIp"] {
            if let Some(change) = changes.get(field) {
                return Err(TaskError::ImmutableField {
                    field,
                    from: change.from.clone().unwrap_or_default(),
                    to: change.to.clone(),
                });
            }
        }
        Ok(())
    }

    fn output(&self, actual: &NatGatewayActual) -> NatGatewayId {
        actual.id.clone()
    }

    async fn apply(
        &self,
        ctx: &AwsContext,
        deps: &Outputs,
        actual: Option<&NatGatewayActual>,
        _: &Changes,
    ) -> Result<NatGatewayId, TaskError> {
        let (id, state) = match actual {
            Some(actual) => (actual.id.0.clone(), actual.state.clone()),
            None => {
                let (Some(subnet), Some(address)) = (&self.subnet, &self.elastic_ip) else {
                    return Err(TaskError::fatal(format!(
                        "the NAT gateway `{}` needs a subnet and an elastic IP",
                        self.name
                    )));
                };
                let out = ctx
                    .ec2()
                    .create_nat_gateway()
                    .subnet_id(&deps.get(subnet)?.0)
                    .allocation_id(&deps.get(address)?.0)
                    .tag_specifications(tag_spec(ResourceType::Natgateway, &self.tags))
                    .send()
                    .await
                    .map_err(|e| classify("CreateNatGateway", &self.name, e))?;
                let gateway = out.nat_gateway().ok_or_else(|| {
                    TaskError::fatal(format!(
                        "CreateNatGateway for `{}` returned no gateway",
                        self.name
                    ))
                })?;
                let id = gateway.nat_gateway_id().unwrap_or_default().to_string();
                ctx.remember_created(self.key(), &id);
                let state = state_of(gateway).map_or_else(String::new, |s| s.as_str().to_string());
                (id, state)
            }
        };
        if self.shared_id.is_none() && state != AVAILABLE {
            return Err(TaskError::retryable(format!(
                "the NAT gateway `{id}` (`{}`) is `{state}`: waiting for it to be `{AVAILABLE}`",
                self.name
            )));
        }
        if let Some(actual) = actual {
            write_missing_tags(ctx, &id, &actual.tags, &self.tags).await?;
        }
        Ok(NatGatewayId(id))
    }
}
