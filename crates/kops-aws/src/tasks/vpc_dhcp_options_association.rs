//! Which DHCP option set the VPC uses. Not an object of its own in AWS: the
//! VPC's `DhcpOptionsId`, read from the batched DescribeVpcs and set with
//! AssociateDhcpOptions (which replaces the previous set).

use kops_engine::{Changes, OutputRef, Outputs, Task, TaskError, TaskKey};

use crate::context::{classify, AwsContext};
use crate::tasks::dhcp_options::DhcpOptionsId;
use crate::tasks::vpc::VpcId;

/// The VPC `vpc` should use the option set `dhcp_options`.
#[derive(Debug, Clone, PartialEq)]
pub struct VpcDhcpOptionsAssociation {
    /// The task name: the cluster's name.
    pub name: String,
    pub vpc: OutputRef<VpcId>,
    pub dhcp_options: OutputRef<DhcpOptionsId>,
}

/// The option set the VPC uses now.
#[derive(Debug, Clone)]
pub struct VpcDhcpOptionsAssociationActual {
    pub dhcp_options_id: String,
}

impl VpcDhcpOptionsAssociation {
    pub const KIND: &'static str = "VPCDHCPOptionsAssociation";
}

impl Task<AwsContext> for VpcDhcpOptionsAssociation {
    type Actual = VpcDhcpOptionsAssociationActual;
    type Output = ();

    fn key(&self) -> TaskKey {
        TaskKey::new(Self::KIND, &self.name)
    }

    fn dependencies(&self) -> Vec<TaskKey> {
        vec![self.vpc.key().clone(), self.dhcp_options.key().clone()]
    }

    async fn find(
        &self,
        ctx: &AwsContext,
        deps: &Outputs,
    ) -> Result<Option<VpcDhcpOptionsAssociationActual>, TaskError> {
        let Some(vpc_id) = deps.try_get(&self.vpc)? else {
            return Ok(None);
        };
        // A VPC created in this run is not in the cache: associate anyway,
        // AssociateDhcpOptions is idempotent.
        Ok(ctx
            .vpcs()
            .await?
            .iter()
            .find(|v| v.vpc_id() == Some(vpc_id.0.as_str()))
            .and_then(|v| v.dhcp_options_id())
            .map(|id| VpcDhcpOptionsAssociationActual {
                dhcp_options_id: id.to_string(),
            }))
    }

    fn diff(
        &self,
        actual: Option<&VpcDhcpOptionsAssociationActual>,
        deps: &Outputs,
    ) -> Result<Changes, TaskError> {
        let mut changes = Changes::new();
        changes.compare_reference(
            "dhcpOptions",
            actual.map(|a| a.dhcp_options_id.as_str()),
            deps.try_get(&self.dhcp_options)?.map(|id| id.0.as_str()),
            self.dhcp_options.key(),
        );
        Ok(changes)
    }

    fn output(&self, _: &VpcDhcpOptionsAssociationActual) {}

    async fn apply(
        &self,
        ctx: &AwsContext,
        deps: &Outputs,
        _: Option<&VpcDhcpOptionsAssociationActual>,
        _: &Changes,
    ) -> Result<(), TaskError> {
        let vpc = deps.get(&self.vpc)?;
        let options = deps.get(&self.dhcp_options)?;
        ctx.ec2()
            .associate_dhcp_options()
            .vpc_id(&vpc.0)
            .dhcp_options_id(&options.0)
            .send()
            .await
            .map_err(|e| classify("AssociateDhcpOptions", &vpc.0, e))?;
        Ok(())
    }
}
