//! The cluster's VPC associated with its private Route 53 hosted zone
//! (`spec.networking.topology.dns: Private`), so that instances resolve
//! the records published there. The zone itself is the user's: never
//! created, changed or deleted here.
//!
//! The zone is given by id (`Z...`, as `update cluster` resolves it) or,
//! when only its name is known, found by name among the private zones.
//! `find` reads the zone's VPCs (one `GetHostedZone`); `apply` makes one
//! `AssociateVPCWithHostedZone` call in the cluster's region.

use aws_sdk_route53::types::{Vpc as Route53Vpc, VpcRegion};
use kops_engine::{Changes, OutputRef, Outputs, Task, TaskError, TaskKey};

use crate::context::{classify, AwsContext};
use crate::tasks::vpc::VpcId;

/// What should be associated.
#[derive(Debug, Clone, PartialEq)]
pub struct HostedZoneAssociation {
    /// The task name: the zone as the spec names it (`spec.dnsZone`).
    pub name: String,
    /// The zone's id (without `/hostedzone/`), or its name.
    pub zone: String,
    pub vpc: OutputRef<VpcId>,
}

/// What exists: the zone, and whether the VPC is among its VPCs.
#[derive(Debug, Clone)]
pub struct HostedZoneAssociationActual {
    pub zone_id: String,
    pub associated: bool,
}

impl HostedZoneAssociation {
    pub const KIND: &'static str = "HostedZoneAssociation";
}

impl Task<AwsContext> for HostedZoneAssociation {
    type Actual = HostedZoneAssociationActual;
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
    ) -> Result<Option<HostedZoneAssociationActual>, TaskError> {
        let zone_id = if self.zone.contains('.') {
            crate::dns::find_hosted_zone(&ctx.cloud, &ctx.cluster, Some(&self.zone), true)
                .await
                .map_err(|e| TaskError::fatal(e.to_string()))?
                .id
        } else {
            self.zone.trim_start_matches("/hostedzone/").to_string()
        };
        let out = ctx
            .cloud
            .route53()
            .get_hosted_zone()
            .id(&zone_id)
            .send()
            .await
            .map_err(|e| classify("GetHostedZone", &zone_id, e))?;
        let vpc = deps.try_get(&self.vpc)?;
        let region = ctx.cloud.region();
        let associated = vpc.is_some_and(|vpc| {
            out.vpcs().iter().any(|v| {
                v.vpc_id() == Some(vpc.0.as_str())
                    && v.vpc_region().is_none_or(|r| r.as_str() == region)
            })
        });
        Ok(Some(HostedZoneAssociationActual {
            zone_id,
            associated,
        }))
    }

    fn diff(
        &self,
        actual: Option<&HostedZoneAssociationActual>,
        _: &Outputs,
    ) -> Result<Changes, TaskError> {
        let mut changes = Changes::new();
        changes.compare("associated", actual.map(|a| &a.associated), &true);
        Ok(changes)
    }

    fn check_changes(
        &self,
        _: Option<&HostedZoneAssociationActual>,
        _: &Changes,
    ) -> Result<(), TaskError> {
        Ok(())
    }

    fn output(&self, _: &HostedZoneAssociationActual) {}

    async fn apply(
        &self,
        ctx: &AwsContext,
        deps: &Outputs,
        actual: Option<&HostedZoneAssociationActual>,
        _: &Changes,
    ) -> Result<(), TaskError> {
        let Some(actual) = actual else {
            return Err(TaskError::fatal(format!(
                "no private Route 53 hosted zone `{}`\nhint: create it, or set spec.dnsZone to an existing private zone",
                self.zone
            )));
        };
        if actual.associated {
            return Ok(());
        }
        let vpc = deps.get(&self.vpc)?;
        ctx.cloud
            .route53()
            .associate_vpc_with_hosted_zone()
            .hosted_zone_id(&actual.zone_id)
            .vpc(
                Route53Vpc::builder()
                    .vpc_id(&vpc.0)
                    .vpc_region(VpcRegion::from(ctx.cloud.region()))
                    .build(),
            )
            .send()
            .await
            .map_err(|e| classify("AssociateVPCWithHostedZone", &actual.zone_id, e))?;
        Ok(())
    }
}
