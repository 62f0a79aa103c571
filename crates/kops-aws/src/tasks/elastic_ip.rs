//! The elastic IP of a zone's NAT gateway (`<zone>.<cluster>`). Owned:
//! allocated and tagged, found by `Name` in the batched DescribeAddresses.
//! Existing (`publicIP` of a subnet, or `egress: eipalloc-...`): found by
//! address or allocation id, tagged `shared`, never released.

use aws_sdk_ec2::types::{DomainType, ResourceType};
use kops_engine::{Changes, FieldValue, OutputRef, Outputs, Task, TaskError, TaskKey};

use crate::context::{classify, name_tag, tag_map, tag_spec, AwsContext, Tags};
use crate::tasks::ec2::{not_visible_yet, unless_not_found, write_missing_tags};
use crate::tasks::managed_tags;

/// An allocation id, what the NAT gateway reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElasticIpId(pub String);

impl FieldValue for ElasticIpId {
    fn render(&self) -> String {
        self.0.clone()
    }
}

/// An address the user already has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExistingAddress {
    /// By public IP (`spec.subnets[].publicIP`).
    PublicIp(String),
    /// By allocation id (`egress: eipalloc-...`).
    AllocationId(String),
}

/// What the address should be.
#[derive(Debug, Clone, PartialEq)]
pub struct ElasticIp {
    /// The task name and (owned) `Name` tag: `<zone>.<cluster>`.
    pub name: String,
    pub tags: Tags,
    pub existing: Option<ExistingAddress>,
}

/// What exists.
#[derive(Debug, Clone)]
pub struct ElasticIpActual {
    pub allocation_id: ElasticIpId,
    pub public_ip: Option<String>,
    pub tags: Tags,
}

impl ElasticIp {
    pub const KIND: &'static str = "ElasticIP";

    /// The handle the NAT gateway keeps to read the allocation id.
    pub fn id_ref(name: &str) -> OutputRef<ElasticIpId> {
        OutputRef::new(TaskKey::new(Self::KIND, name))
    }
}

fn actual_of(address: &aws_sdk_ec2::types::Address) -> ElasticIpActual {
    ElasticIpActual {
        allocation_id: ElasticIpId(address.allocation_id().unwrap_or_default().to_string()),
        public_ip: address.public_ip().map(str::to_string),
        tags: tag_map(address.tags()),
    }
}

async fn describe(
    ctx: &AwsContext,
    existing: &ExistingAddress,
) -> Result<Option<aws_sdk_ec2::types::Address>, TaskError> {
    let request = ctx.ec2().describe_addresses();
    let (request, id) = match existing {
        ExistingAddress::PublicIp(ip) => (request.public_ips(ip), ip),
        ExistingAddress::AllocationId(id) => (request.allocation_ids(id), id),
    };
    let out = unless_not_found("DescribeAddresses", id, request.send().await)?;
    Ok(out.and_then(|o| o.addresses().first().cloned()))
}

impl Task<AwsContext> for ElasticIp {
    type Actual = ElasticIpActual;
    type Output = ElasticIpId;

    fn key(&self) -> TaskKey {
        TaskKey::new(Self::KIND, &self.name)
    }

    async fn find(
        &self,
        ctx: &AwsContext,
        _: &Outputs,
    ) -> Result<Option<ElasticIpActual>, TaskError> {
        if let Some(existing) = &self.existing {
            return Ok(describe(ctx, existing).await?.as_ref().map(actual_of));
        }
        let cached = ctx
            .addresses()
            .await?
            .iter()
            .find(|a| name_tag(a.tags()) == Some(self.name.as_str()));
        if let Some(address) = cached {
            return Ok(Some(actual_of(address)));
        }
        let Some(id) = ctx.created_id(&self.key()) else {
            return Ok(None);
        };
        match describe(ctx, &ExistingAddress::AllocationId(id.clone())).await? {
            Some(address) => Ok(Some(actual_of(&address))),
            None => Err(not_visible_yet("elastic IP", &id)),
        }
    }

    fn diff(&self, actual: Option<&ElasticIpActual>, _: &Outputs) -> Result<Changes, TaskError> {
        let mut changes = Changes::new();
        if actual.is_none() {
            match &self.existing {
                Some(ExistingAddress::PublicIp(ip)) => changes.compare("publicIp", None, ip),
                Some(ExistingAddress::AllocationId(id)) => {
                    changes.compare("allocationId", None, id)
                }
                None => changes.compare("domain", None, "vpc"),
            };
        }
        let tags = actual.map(|a| managed_tags(&a.tags, &self.tags));
        changes.compare("tags", tags.as_ref(), &self.tags);
        Ok(changes)
    }

    fn check_changes(
        &self,
        actual: Option<&ElasticIpActual>,
        _: &Changes,
    ) -> Result<(), TaskError> {
        match (actual, &self.existing) {
            (None, Some(ExistingAddress::PublicIp(ip))) => Err(TaskError::fatal(format!(
                "no elastic IP has the address `{ip}` (spec.subnets[].publicIP)\n\
                 hint: allocate it first, or remove publicIP to let kops allocate one"
            ))),
            (None, Some(ExistingAddress::AllocationId(id))) => Err(TaskError::fatal(format!(
                "the elastic IP `{id}` (spec.subnets[].egress) does not exist\n\
                 hint: check the allocation id"
            ))),
            _ => Ok(()),
        }
    }

    fn output(&self, actual: &ElasticIpActual) -> ElasticIpId {
        actual.allocation_id.clone()
    }

    async fn apply(
        &self,
        ctx: &AwsContext,
        _: &Outputs,
        actual: Option<&ElasticIpActual>,
        _: &Changes,
    ) -> Result<ElasticIpId, TaskError> {
        if let Some(actual) = actual {
            write_missing_tags(ctx, &actual.allocation_id.0, &actual.tags, &self.tags).await?;
            return Ok(actual.allocation_id.clone());
        }
        let out = ctx
            .ec2()
            .allocate_address()
            .domain(DomainType::Vpc)
            .tag_specifications(tag_spec(ResourceType::ElasticIp, &self.tags))
            .send()
            .await
            .map_err(|e| classify("AllocateAddress", &self.name, e))?;
        let id = out
            .allocation_id()
            .ok_or_else(|| {
                TaskError::fatal(format!(
                    "AllocateAddress for `{}` returned no allocation id",
                    self.name
                ))
            })?
            .to_string();
        ctx.remember_created(self.key(), &id);
        Ok(ElasticIpId(id))
    }
}
