//! An extra IPv4 CIDR block of the owned VPC (`spec.additionalNetworkCIDRs`),
//! read from the VPC's CIDR block associations in the batched DescribeVpcs.
//! Subnets in the block depend on it.

use kops_engine::{Changes, OutputRef, Outputs, Task, TaskError, TaskKey};

use crate::context::{classify, AwsContext};
use crate::tasks::ec2::settle;
use crate::tasks::vpc::VpcId;

/// The VPC `vpc` should have the CIDR block `cidr`.
#[derive(Debug, Clone, PartialEq)]
pub struct VpcCidrBlock {
    pub vpc: OutputRef<VpcId>,
    /// The block, also the task name (as in kops).
    pub cidr: String,
}

/// The association that exists.
#[derive(Debug, Clone)]
pub struct VpcCidrBlockActual {
    pub association_id: String,
    /// `associated`, or `associating` just after the association.
    pub state: String,
}

impl VpcCidrBlock {
    pub const KIND: &'static str = "VPCCIDRBlock";

    /// The key of the task for `cidr`, for subnets to depend on.
    pub fn key_for(cidr: &str) -> TaskKey {
        TaskKey::new(Self::KIND, cidr)
    }
}

const ASSOCIATED: &str = "associated";

fn association(vpc: &aws_sdk_ec2::types::Vpc, cidr: &str) -> Option<VpcCidrBlockActual> {
    vpc.cidr_block_association_set()
        .iter()
        .filter(|a| a.cidr_block() == Some(cidr))
        .find_map(|a| {
            let state = a.cidr_block_state()?.state()?.as_str().to_string();
            (state == ASSOCIATED || state == "associating").then(|| VpcCidrBlockActual {
                association_id: a.association_id().unwrap_or_default().to_string(),
                state,
            })
        })
}

impl Task<AwsContext> for VpcCidrBlock {
    type Actual = VpcCidrBlockActual;
    type Output = ();

    fn key(&self) -> TaskKey {
        Self::key_for(&self.cidr)
    }

    fn dependencies(&self) -> Vec<TaskKey> {
        vec![self.vpc.key().clone()]
    }

    async fn find(
        &self,
        ctx: &AwsContext,
        deps: &Outputs,
    ) -> Result<Option<VpcCidrBlockActual>, TaskError> {
        let Some(vpc_id) = deps.try_get(&self.vpc)? else {
            return Ok(None);
        };
        let cached = ctx
            .vpcs()
            .await?
            .iter()
            .find(|v| v.vpc_id() == Some(vpc_id.0.as_str()))
            .and_then(|v| association(v, &self.cidr));
        // Associated in this run (the cache predates it, or it was
        // `associating` there): ask again.
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
        Ok(out.vpcs().first().and_then(|v| association(v, &self.cidr)))
    }

    fn diff(&self, actual: Option<&VpcCidrBlockActual>, _: &Outputs) -> Result<Changes, TaskError> {
        let mut changes = Changes::new();
        changes.compare("cidr", actual.map(|_| &self.cidr), &self.cidr);
        if let Some(actual) = actual {
            changes.compare("state", Some(actual.state.as_str()), ASSOCIATED);
        }
        Ok(changes)
    }

    fn output(&self, _: &VpcCidrBlockActual) {}

    async fn apply(
        &self,
        ctx: &AwsContext,
        deps: &Outputs,
        actual: Option<&VpcCidrBlockActual>,
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
                    .cidr_block(&self.cidr)
                    .send()
                    .await
                    .map_err(|e| classify("AssociateVpcCidrBlock", &self.cidr, e))?;
                let association = out.cidr_block_association();
                ctx.remember_created(
                    self.key(),
                    association
                        .and_then(|a| a.association_id())
                        .unwrap_or_default(),
                );
                association
                    .and_then(|a| a.cidr_block_state())
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
                let found = out.vpcs().first().and_then(|v| association(v, &self.cidr));
                Ok(found.is_some_and(|a| a.state == ASSOCIATED))
            })
            .await?;
        if settled {
            Ok(())
        } else {
            Err(TaskError::retryable(format!(
                "the CIDR block `{}` of the VPC is `{state}`: waiting for `{ASSOCIATED}`",
                self.cidr
            )))
        }
    }
}
