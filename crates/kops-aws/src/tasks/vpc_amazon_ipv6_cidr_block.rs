//! The Amazon-provided IPv6 block kops associates with every VPC it owns
//! (Terraform: `assign_generated_ipv6_cidr_block = true`), read from the
//! VPC's IPv6 associations in the batched DescribeVpcs.

use kops_engine::{Changes, OutputRef, Outputs, Task, TaskError, TaskKey};

use crate::context::{classify, AwsContext};
use crate::tasks::ec2::settle;
use crate::tasks::vpc::VpcId;

/// The VPC `vpc` should have an Amazon-provided IPv6 block.
#[derive(Debug, Clone, PartialEq)]
pub struct VpcAmazonIpv6CidrBlock {
    /// The task name: `AmazonIPv6`, as in kops.
    pub name: String,
    pub vpc: OutputRef<VpcId>,
}

/// The association that exists.
#[derive(Debug, Clone)]
pub struct VpcAmazonIpv6CidrBlockActual {
    /// The block, when AWS has assigned it.
    pub cidr: Option<String>,
    /// `associated`, or `associating` just after the association.
    pub state: String,
}

impl VpcAmazonIpv6CidrBlock {
    pub const KIND: &'static str = "VPCAmazonIPv6CIDRBlock";
    pub const NAME: &'static str = "AmazonIPv6";
}

const ASSOCIATED: &str = "associated";

fn association(vpc: &aws_sdk_ec2::types::Vpc) -> Option<VpcAmazonIpv6CidrBlockActual> {
    vpc.ipv6_cidr_block_association_set().iter().find_map(|a| {
        let state = a.ipv6_cidr_block_state()?.state()?.as_str().to_string();
        (state == ASSOCIATED || state == "associating").then(|| VpcAmazonIpv6CidrBlockActual {
            cidr: a.ipv6_cidr_block().map(str::to_string),
            state,
        })
    })
}

impl Task<AwsContext> for VpcAmazonIpv6CidrBlock {
    type Actual = VpcAmazonIpv6CidrBlockActual;
    type Output = ();

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
    ) -> Result<Option<VpcAmazonIpv6CidrBlockActual>, TaskError> {
        let Some(vpc_id) = deps.try_get(&self.vpc)? else {
            return Ok(None);
        };
        let cached = ctx
            .vpcs()
            .await?
            .iter()
            .find(|v| v.vpc_id() == Some(vpc_id.0.as_str()))
            .and_then(association);
        if cached.as_ref().is_some_and(|a| a.state == ASSOCIATED)
            || ctx.created_id(&self.key()).is_none()
        {
            return Ok(cached);
        }
        let out = ctx
            .ec2()
            .describe_vpcs()
            .vpc_ids(&vpc_id.0)
            .send()
            .await
            .map_err(|e| classify("DescribeVpcs", &vpc_id.0, e))?;
        Ok(out.vpcs().first().and_then(association))
    }

    fn diff(
        &self,
        actual: Option<&VpcAmazonIpv6CidrBlockActual>,
        _: &Outputs,
    ) -> Result<Changes, TaskError> {
        let mut changes = Changes::new();
        changes.compare("amazonProvided", actual.map(|_| &true), &true);
        if let Some(actual) = actual {
            changes.compare("state", Some(actual.state.as_str()), ASSOCIATED);
        }
        Ok(changes)
    }

    fn output(&self, _: &VpcAmazonIpv6CidrBlockActual) {}

    async fn apply(
        &self,
        ctx: &AwsContext,
        deps: &Outputs,
        actual: Option<&VpcAmazonIpv6CidrBlockActual>,
        _: &Changes,
    ) -> Result<(), TaskError> {
        let vpc = deps.get(&self.vpc)?;
        let state = match actual {
            Some(actual) => actual.state.clone(),
            None => {
                let out = ctx
                    .ec2()
                    .associate_vpc_cidr_block()
                    .vpc_id(&vpc.0)
                    .amazon_provided_ipv6_cidr_block(true)
                    .send()
                    .await
                    .map_err(|e| classify("AssociateVpcCidrBlock", &vpc.0, e))?;
                let association = out.ipv6_cidr_block_association();
                ctx.remember_created(
                    self.key(),
                    association
                        .and_then(|a| a.association_id())
                        .unwrap_or_default(),
                );
                association
                    .and_then(|a| a.ipv6_cidr_block_state())
                    .and_then(|s| s.state())
                    .map_or_else(String::new, |s| s.as_str().to_string())
            }
        };
        let settled = state == ASSOCIATED
            || settle(5, || async {
                let out = ctx
                    .ec2()
                    .describe_vpcs()
                    .vpc_ids(&vpc.0)
                    .send()
                    .await
                    .map_err(|e| classify("DescribeVpcs", &vpc.0, e))?;
                let found = out.vpcs().first().and_then(association);
                Ok(found.is_some_and(|a| a.state == ASSOCIATED))
            })
            .await?;
        if settled {
            Ok(())
        } else {
            Err(TaskError::retryable(format!(
                "the Amazon-provided IPv6 block of the VPC is `{state}`: waiting for `{ASSOCIATED}`"
            )))
        }
    }
}
