//! Which route table a subnet uses: public and utility subnets the public
//! table, private subnets their zone's private table. Found in the batched
//! DescribeRouteTables by subnet id (in whichever cluster table it is); a
//! subnet associated with another table is moved with
//! ReplaceRouteTableAssociation.

use aws_sdk_ec2::types::Filter;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use kops_engine::{Changes, OutputRef, Outputs, Task, TaskError, TaskKey};

use crate::context::{classify, AwsContext};
use crate::tasks::route_table::RouteTableId;
use crate::tasks::subnet::SubnetId;

/// The subnet `subnet` should use the table `route_table`.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteTableAssociation {
    /// The task name, as kops names it (`<subnet>.<cluster>`,
    /// `private-<subnet>.<cluster>`).
    pub name: String,
    pub route_table: OutputRef<RouteTableId>,
    pub subnet: OutputRef<SubnetId>,
}

/// The subnet's current explicit association.
#[derive(Debug, Clone)]
pub struct RouteTableAssociationActual {
    pub association_id: String,
    pub route_table_id: String,
}

impl RouteTableAssociation {
    pub const KIND: &'static str = "RouteTableAssociation";
}

fn association_of(
    tables: &[aws_sdk_ec2::types::RouteTable],
    subnet: &str,
) -> Option<RouteTableAssociationActual> {
    tables.iter().find_map(|t| {
        t.associations()
            .iter()
            .find(|a| a.subnet_id() == Some(subnet) && a.main() != Some(true))
            .map(|a| RouteTableAssociationActual {
                association_id: a
                    .route_table_association_id()
                    .unwrap_or_default()
                    .to_string(),
                route_table_id: t.route_table_id().unwrap_or_default().to_string(),
            })
    })
}

impl Task<AwsContext> for RouteTableAssociation {
    type Actual = RouteTableAssociationActual;
    type Output = ();

    fn key(&self) -> TaskKey {
        TaskKey::new(Self::KIND, &self.name)
    }

    fn dependencies(&self) -> Vec<TaskKey> {
        vec![self.route_table.key().clone(), self.subnet.key().clone()]
    }

    async fn find(
        &self,
        ctx: &AwsContext,
        deps: &Outputs,
    ) -> Result<Option<RouteTableAssociationActual>, TaskError> {
        let Some(subnet) = deps.try_get(&self.subnet)? else {
            return Ok(None);
        };
        Ok(association_of(ctx.route_tables().await?, &subnet.0))
    }

    fn diff(
        &self,
        actual: Option<&RouteTableAssociationActual>,
        deps: &Outputs,
    ) -> Result<Changes, TaskError> {
        let mut changes = Changes::new();
        // Found by subnet: an existing association has the same one.
        let subnet = deps.try_get(&self.subnet)?.map(|s| s.0.as_str());
        changes
            .compare_reference("subnet", actual.and(subnet), subnet, self.subnet.key())
            .compare_reference(
                "routeTable",
                actual.map(|a| a.route_table_id.as_str()),
                deps.try_get(&self.route_table)?.map(|t| t.0.as_str()),
                self.route_table.key(),
            );
        Ok(changes)
    }

    fn output(&self, _: &RouteTableAssociationActual) {}

    async fn apply(
        &self,
        ctx: &AwsContext,
        deps: &Outputs,
        actual: Option<&RouteTableAssociationActual>,
        _: &Changes,
    ) -> Result<(), TaskError> {
        let table = deps.get(&self.route_table)?;
        let subnet = deps.get(&self.subnet)?;
        let existing = match actual {
            Some(actual) => Some(actual.clone()),
            None => {
                let associated = ctx
                    .ec2()
                    .associate_route_table()
                    .route_table_id(&table.0)
                    .subnet_id(&subnet.0)
                    .send()
                    .await;
                match associated {
                    Ok(_) => return Ok(()),
                    // Associated with a table outside the cluster's: look it up.
                    Err(e) if e.code() == Some("Resource.AlreadyAssociated") => {
                        let out = ctx
                            .ec2()
                            .describe_route_tables()
                            .filters(
                                Filter::builder()
                                    .name("association.subnet-id")
                                    .values(&subnet.0)
                                    .build(),
                            )
                            .send()
                            .await
                            .map_err(|e| classify("DescribeRouteTables", &subnet.0, e))?;
                        association_of(out.route_tables(), &subnet.0)
                    }
                    Err(e) => return Err(classify("AssociateRouteTable", &self.name, e)),
                }
            }
        };
        let Some(existing) = existing.filter(|e| e.route_table_id != table.0) else {
            return Ok(());
        };
        ctx.ec2()
            .replace_route_table_association()
            .association_id(&existing.association_id)
            .route_table_id(&table.0)
            .send()
            .await
            .map_err(|e| classify("ReplaceRouteTableAssociation", &self.name, e))?;
        Ok(())
    }
}
