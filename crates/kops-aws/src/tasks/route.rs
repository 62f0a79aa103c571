//! One route of a cluster route table: `0.0.0.0/0` (and `::/0`) to the
//! internet gateway in the public table, `0.0.0.0/0` to the zone's NAT
//! gateway (or the egress named in the spec) in a private one, and the
//! spec's `additionalRoutes`. Found in the route table's entry of the
//! batched DescribeRouteTables, by destination.

use kops_engine::{Changes, OutputRef, Outputs, Task, TaskError, TaskKey};

use crate::context::{classify, AwsContext};
use crate::tasks::egress_only_internet_gateway::EgressOnlyInternetGatewayId;
use crate::tasks::internet_gateway::InternetGatewayId;
use crate::tasks::nat_gateway::NatGatewayId;
use crate::tasks::route_table::RouteTableId;

/// Where a route sends its traffic.
#[derive(Debug, Clone, PartialEq)]
pub enum RouteTarget {
    /// The cluster's internet gateway (owned or the shared VPC's).
    InternetGateway(OutputRef<InternetGatewayId>),
    /// A NAT gateway task (created per zone, or an existing one).
    NatGateway(OutputRef<NatGatewayId>),
    /// The cluster's egress-only internet gateway (IPv6-only clusters).
    EgressOnlyGateway(OutputRef<EgressOnlyInternetGatewayId>),
    /// An existing internet gateway, by id (`igw-...` in additionalRoutes).
    InternetGatewayId(String),
    /// An existing NAT gateway, by id (`nat-...` in additionalRoutes).
    NatGatewayId(String),
    /// A NAT instance (`egress: i-...`).
    Instance(String),
    /// A transit gateway (`egress: tgw-...`).
    TransitGateway(String),
    /// A VPC peering connection (`pcx-...`).
    PeeringConnection(String),
    /// An egress-only internet gateway (`eigw-...`).
    EgressOnlyInternetGateway(String),
}

impl RouteTarget {
    /// The target named by an id from the spec (`additionalRoutes[].target`,
    /// `egress`), or `None` for a kind of id kops does not route to.
    pub fn from_id(id: &str) -> Option<RouteTarget> {
        let id = id.to_string();
        Some(match id.split_once('-')?.0 {
            "igw" => RouteTarget::InternetGatewayId(id),
            "nat" => RouteTarget::NatGatewayId(id),
            "i" => RouteTarget::Instance(id),
            "tgw" => RouteTarget::TransitGateway(id),
            "pcx" => RouteTarget::PeeringConnection(id),
            "eigw" => RouteTarget::EgressOnlyInternetGateway(id),
            _ => return None,
        })
    }

    fn dependency(&self) -> Option<&TaskKey> {
        match self {
            RouteTarget::InternetGateway(r) => Some(r.key()),
            RouteTarget::NatGateway(r) => Some(r.key()),
            RouteTarget::EgressOnlyGateway(r) => Some(r.key()),
            _ => None,
        }
    }

    /// The target's id; `Ok(None)` in a dry run when the target would be created.
    fn id<'a>(&'a self, deps: &'a Outputs) -> Result<Option<&'a str>, TaskError> {
        Ok(match self {
            RouteTarget::InternetGateway(r) => deps.try_get(r)?.map(|id| id.0.as_str()),
            RouteTarget::NatGateway(r) => deps.try_get(r)?.map(|id| id.0.as_str()),
            RouteTarget::EgressOnlyGateway(r) => deps.try_get(r)?.map(|id| id.0.as_str()),
            RouteTarget::InternetGatewayId(id)
            | RouteTarget::NatGatewayId(id)
            | RouteTarget::Instance(id)
            | RouteTarget::TransitGateway(id)
            | RouteTarget::PeeringConnection(id)
            | RouteTarget::EgressOnlyInternetGateway(id) => Some(id.as_str()),
        })
    }
}

/// What the route should be.
#[derive(Debug, Clone, PartialEq)]
pub struct Route {
    /// The task name, as kops names it (`0.0.0.0/0`, `private-<zone>-0.0.0.0/0`).
    pub name: String,
    pub route_table: OutputRef<RouteTableId>,
    /// An IPv4 or (with a `:`) IPv6 CIDR.
    pub destination: String,
    pub target: RouteTarget,
}

/// What exists.
#[derive(Debug, Clone)]
pub struct RouteActual {
    /// The target's id; `<id> (blackhole)` when the target is gone.
    pub target: String,
}

impl Route {
    pub const KIND: &'static str = "Route";

    fn is_ipv6(&self) -> bool {
        self.destination.contains(':')
    }
}

fn target_of(route: &aws_sdk_ec2::types::Route) -> String {
    let id = route
        .nat_gateway_id()
        .or(route.instance_id())
        .or(route.transit_gateway_id())
        .or(route.vpc_peering_connection_id())
        .or(route.egress_only_internet_gateway_id())
        .or(route.gateway_id())
        .unwrap_or_default();
    match route.state() {
        Some(aws_sdk_ec2::types::RouteState::Blackhole) => format!("{id} (blackhole)"),
        _ => id.to_string(),
    }
}

impl Task<AwsContext> for Route {
    type Actual = RouteActual;
    type Output = ();

    fn key(&self) -> TaskKey {
        TaskKey::new(Self::KIND, &self.name)
    }

    fn dependencies(&self) -> Vec<TaskKey> {
        let mut keys = vec![self.route_table.key().clone()];
        keys.extend(self.target.dependency().cloned());
        keys
    }

    async fn find(
        &self,
        ctx: &AwsContext,
        deps: &Outputs,
    ) -> Result<Option<RouteActual>, TaskError> {
        let Some(table_id) = deps.try_get(&self.route_table)? else {
            return Ok(None);
        };
        // A table created in this run is not in the cache: it has no routes yet.
        let found = ctx
            .route_tables()
            .await?
            .iter()
            .filter(|t| t.route_table_id() == Some(table_id.0.as_str()))
            .flat_map(|t| t.routes())
            .find(|r| {
                let destination = if self.is_ipv6() {
                    r.destination_ipv6_cidr_block()
                } else {
                    r.destination_cidr_block()
                };
                destination == Some(self.destination.as_str())
            })
            .map(|r| RouteActual {
                target: target_of(r),
            });
        Ok(found)
    }

    fn diff(&self, actual: Option<&RouteActual>, deps: &Outputs) -> Result<Changes, TaskError> {
        let mut changes = Changes::new();
        let key = self.target.dependency().unwrap_or(self.route_table.key());
        changes
            .compare(
                "destination",
                actual.map(|_| &self.destination),
                &self.destination,
            )
            .compare_reference(
                "target",
                actual.map(|a| a.target.as_str()),
                self.target.id(deps)?,
                key,
            );
        Ok(changes)
    }

    fn output(&self, _: &RouteActual) {}

    async fn apply(
        &self,
        ctx: &AwsContext,
        deps: &Outputs,
        actual: Option<&RouteActual>,
        _: &Changes,
    ) -> Result<(), TaskError> {
        let table = deps.get(&self.route_table)?;
        let target = self.target.id(deps)?.ok_or_else(|| {
            TaskError::fatal(format!("the target of route `{}` has no id", self.name))
        })?;
        let (v4, v6) = if self.is_ipv6() {
            (None, Some(self.destination.clone()))
        } else {
            (Some(self.destination.clone()), None)
        };
        let (mut gateway, mut nat, mut instance, mut transit, mut peering, mut egress_only) =
            (None, None, None, None, None, None);
        let id = Some(target.to_string());
        match &self.target {
            RouteTarget::InternetGateway(_) | RouteTarget::InternetGatewayId(_) => gateway = id,
            RouteTarget::NatGateway(_) | RouteTarget::NatGatewayId(_) => nat = id,
            RouteTarget::Instance(_) => instance = id,
            RouteTarget::TransitGateway(_) => transit = id,
            RouteTarget::PeeringConnection(_) => peering = id,
            RouteTarget::EgressOnlyGateway(_) | RouteTarget::EgressOnlyInternetGateway(_) => {
                egress_only = id
            }
        }
        let replace = || async {
            ctx.ec2()
                .replace_route()
                .route_table_id(&table.0)
                .set_destination_cidr_block(v4.clone())
                .set_destination_ipv6_cidr_block(v6.clone())
                .set_gateway_id(gateway.clone())
                .set_nat_gateway_id(nat.clone())
                .set_instance_id(instance.clone())
                .set_transit_gateway_id(transit.clone())
                .set_vpc_peering_connection_id(peering.clone())
                .set_egress_only_internet_gateway_id(egress_only.clone())
                .send()
                .await
                .map_err(|e| classify("ReplaceRoute", &self.name, e))
        };
        if actual.is_some() {
            replace().await?;
            return Ok(());
        }
        let created = ctx
            .ec2()
            .create_route()
            .route_table_id(&table.0)
            .set_destination_cidr_block(v4.clone())
            .set_destination_ipv6_cidr_block(v6.clone())
            .set_gateway_id(gateway.clone())
            .set_nat_gateway_id(nat.clone())
            .set_instance_id(instance.clone())
            .set_transit_gateway_id(transit.clone())
            .set_vpc_peering_connection_id(peering.clone())
            .set_egress_only_internet_gateway_id(egress_only.clone())
            .send()
            .await;
        match created {
            Ok(_) => Ok(()),
            // Made by an earlier attempt the cache did not see: point it here.
            Err(e)
                if aws_smithy_types::error::metadata::ProvideErrorMetadata::code(&e)
                    == Some("RouteAlreadyExists") =>
            {
                replace().await?;
                Ok(())
            }
            Err(e) => Err(classify("CreateRoute", &self.name, e)),
        }
    }
}
