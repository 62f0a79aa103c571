//! One [`AwsResource`] implementation per task type of kops-aws: how each
//! task is addressed and rendered. A task type the renderer does not know is
//! reported (see [`kops_render::Rendered`]), never silently dropped.

use std::any::Any;

use crate::model::iam::shared_profile::SharedInstanceProfile;
use crate::tasks::autoscaling_group::AutoscalingGroup;
use crate::tasks::classic_load_balancer::{ClassicLoadBalancer, ClassicLoadBalancerRetirement};
use crate::tasks::dhcp_options::DhcpOptions;
use crate::tasks::ebs_volume::EbsVolume;
use crate::tasks::egress_only_internet_gateway::EgressOnlyInternetGateway;
use crate::tasks::elastic_ip::{ElasticIp, ExistingAddress};
use crate::tasks::hosted_zone_association::HostedZoneAssociation;
use crate::tasks::iam_instance_profile::{IamInstanceProfile, IamInstanceProfileRole};
use crate::tasks::iam_role::IamRole;
use crate::tasks::iam_role_policy::IamRolePolicy;
use crate::tasks::internet_gateway::InternetGateway;
use crate::tasks::launch_template::LaunchTemplate;
use crate::tasks::listener::Listener;
use crate::tasks::nat_gateway::NatGateway;
use crate::tasks::network_load_balancer::NetworkLoadBalancer;
use crate::tasks::route::{Route, RouteTarget};
use crate::tasks::route_table::RouteTable;
use crate::tasks::route_table_association::RouteTableAssociation;
use crate::tasks::security_group::SecurityGroup;
use crate::tasks::security_group_cleanup::SecurityGroupCleanup;
use crate::tasks::security_group_rule::{RuleTarget, SecurityGroupRule};
use crate::tasks::shared_security_group::SharedSecurityGroup;
use crate::tasks::ssh_key::SshKey;
use crate::tasks::subnet::{parse_relative_ipv6, Subnet};
use crate::tasks::target_group::TargetGroup;
use crate::tasks::vpc::Vpc;
use crate::tasks::vpc_amazon_ipv6_cidr_block::VpcAmazonIpv6CidrBlock;
use crate::tasks::vpc_cidr_block::VpcCidrBlock;
use crate::tasks::vpc_dhcp_options_association::VpcDhcpOptionsAssociation;
use kops_engine::TaskKey;

use crate::render::cloudformation::{CloudFormation, Json};
use crate::render::resource::{downcast_resource, id, tags_expr, AwsResource, Ctx};
use kops_render::hcl::{Body, Expr};
use kops_render::terraform::Terraform;
use kops_render::RenderError;

/// The task as an [`AwsResource`], for the network, compute, IAM and load
/// balancer task types.
pub(crate) fn resource_of(task: &dyn Any) -> Option<&dyn AwsResource> {
    downcast_resource!(
        task,
        AutoscalingGroup,
        ClassicLoadBalancer,
        ClassicLoadBalancerRetirement,
        DhcpOptions,
        EbsVolume,
        ElasticIp,
        HostedZoneAssociation,
        IamInstanceProfile,
        IamInstanceProfileRole,
        IamRole,
        IamRolePolicy,
        InternetGateway,
        EgressOnlyInternetGateway,
        LaunchTemplate,
        Listener,
        NatGateway,
        NetworkLoadBalancer,
        Route,
        RouteTable,
        RouteTableAssociation,
        SecurityGroup,
        SecurityGroupCleanup,
        SecurityGroupRule,
        SharedInstanceProfile,
        SharedSecurityGroup,
        SshKey,
        Subnet,
        TargetGroup,
        Vpc,
        VpcAmazonIpv6CidrBlock,
        VpcCidrBlock,
        VpcDhcpOptionsAssociation,
    )
}

// ---------------------------------------------------------------- network

impl AwsResource for Vpc {
    fn tf_type(&self) -> Option<&'static str> {
        Some("aws_vpc")
    }
    fn tf_name(&self) -> String {
        self.name.clone()
    }
    fn existing_id(&self) -> Option<String> {
        self.shared_id.clone()
    }
    fn terraform(&self, tf: &mut Terraform, ctx: &Ctx<'_>) -> Result<(), RenderError> {
        if let Some(id) = &self.shared_id {
            let mut body = Body::new();
            body.set("id", id);
            tf.data_source("aws_vpc", &self.name, body);
            return Ok(());
        }
        let ipv6 = ctx.find::<VpcAmazonIpv6CidrBlock>().next().is_some();
        let mut b = Body::new();
        b.set("assign_generated_ipv6_cidr_block", ipv6)
            .set("cidr_block", &self.cidr)
            .set("enable_dns_hostnames", self.enable_dns_hostnames)
            .set("enable_dns_support", self.enable_dns_support)
            .set("tags", tags_expr(&self.tags));
        tf.resource("aws_vpc", &self.name, b);
        Ok(())
    }
    fn cloudformation(&self, cf: &mut CloudFormation, _: &Ctx<'_>) -> Result<(), RenderError> {
        if self.shared_id.is_some() {
            return Ok(());
        }
        cf.resource(
            "AWS::EC2::VPC",
            &self.name,
            Json::obj([
                ("CidrBlock", Json::str(&self.cidr)),
                ("EnableDnsHostnames", Json::Bool(self.enable_dns_hostnames)),
                ("EnableDnsSupport", Json::Bool(self.enable_dns_support)),
                ("Tags", Json::tags(&self.tags)),
            ]),
        );
        Ok(())
    }
}

impl AwsResource for VpcAmazonIpv6CidrBlock {
    fn tf_type(&self) -> Option<&'static str> {
        None // `assign_generated_ipv6_cidr_block` on the VPC
    }
    fn tf_name(&self) -> String {
        self.name.clone()
    }
    fn terraform(&self, _: &mut Terraform, _: &Ctx<'_>) -> Result<(), RenderError> {
        Ok(())
    }
    fn cloudformation(&self, cf: &mut CloudFormation, _: &Ctx<'_>) -> Result<(), RenderError> {
        cf.resource(
            "AWS::EC2::VPCCidrBlock",
            &self.name,
            Json::obj([
                ("VpcId", cf.reference(self.vpc.key())?),
                ("AmazonProvidedIpv6CidrBlock", Json::Bool(true)),
            ]),
        );
        Ok(())
    }
}

impl AwsResource for VpcCidrBlock {
    fn tf_type(&self) -> Option<&'static str> {
        Some("aws_vpc_ipv4_cidr_block_association")
    }
    fn tf_name(&self) -> String {
        format!("cidr-{}", self.cidr)
    }
    fn terraform(&self, tf: &mut Terraform, _: &Ctx<'_>) -> Result<(), RenderError> {
        let mut b = Body::new();
        b.set("cidr_block", &self.cidr)
            .set("vpc_id", id(tf, self.vpc.key())?);
        tf.resource("aws_vpc_ipv4_cidr_block_association", &self.tf_name(), b);
        Ok(())
    }
    fn cloudformation(&self, cf: &mut CloudFormation, _: &Ctx<'_>) -> Result<(), RenderError> {
        cf.resource(
            "AWS::EC2::VPCCidrBlock",
            &self.tf_name(),
            Json::obj([
                ("VpcId", cf.reference(self.vpc.key())?),
                ("CidrBlock", Json::str(&self.cidr)),
            ]),
        );
        Ok(())
    }
}

impl AwsResource for DhcpOptions {
    fn tf_type(&self) -> Option<&'static str> {
        Some("aws_vpc_dhcp_options")
    }
    fn tf_name(&self) -> String {
        self.name.clone()
    }
    fn terraform(&self, tf: &mut Terraform, _: &Ctx<'_>) -> Result<(), RenderError> {
        let mut b = Body::new();
        b.set("domain_name", &self.domain_name)
            .set(
                "domain_name_servers",
                Expr::List(self.domain_name_servers.iter().map(Expr::from).collect()),
            )
            .set("tags", tags_expr(&self.tags));
        tf.resource("aws_vpc_dhcp_options", &self.name, b);
        Ok(())
    }
    fn cloudformation(&self, cf: &mut CloudFormation, _: &Ctx<'_>) -> Result<(), RenderError> {
        cf.resource(
            "AWS::EC2::DHCPOptions",
            &self.name,
            Json::obj([
                ("DomainName", Json::str(&self.domain_name)),
                ("DomainNameServers", Json::strs(&self.domain_name_servers)),
                ("Tags", Json::tags(&self.tags)),
            ]),
        );
        Ok(())
    }
}

impl AwsResource for VpcDhcpOptionsAssociation {
    fn tf_type(&self) -> Option<&'static str> {
        Some("aws_vpc_dhcp_options_association")
    }
    fn tf_name(&self) -> String {
        self.name.clone()
    }
    fn terraform(&self, tf: &mut Terraform, _: &Ctx<'_>) -> Result<(), RenderError> {
        let mut b = Body::new();
        b.set("dhcp_options_id", id(tf, self.dhcp_options.key())?)
            .set("vpc_id", id(tf, self.vpc.key())?);
        tf.resource("aws_vpc_dhcp_options_association", &self.name, b);
        Ok(())
    }
    fn cloudformation(&self, cf: &mut CloudFormation, _: &Ctx<'_>) -> Result<(), RenderError> {
        cf.resource(
            "AWS::EC2::VPCDHCPOptionsAssociation",
            &self.name,
            Json::obj([
                ("DhcpOptionsId", cf.reference(self.dhcp_options.key())?),
                ("VpcId", cf.reference(self.vpc.key())?),
            ]),
        );
        Ok(())
    }
}

impl AwsResource for InternetGateway {
    fn tf_type(&self) -> Option<&'static str> {
        Some("aws_internet_gateway")
    }
    fn tf_data_type(&self) -> Option<&'static str> {
        self.shared.then_some("aws_internet_gateway")
    }
    fn tf_name(&self) -> String {
        self.name.clone()
    }
    fn terraform(&self, tf: &mut Terraform, _: &Ctx<'_>) -> Result<(), RenderError> {
        if self.shared {
            // kops looks the shared VPC's gateway up; Terraform reads it.
            let mut filter = Body::new();
            filter
                .set("name", "attachment.vpc-id")
                .set("values", Expr::List(vec![id(tf, self.vpc.key())?]));
            let mut b = Body::new();
            b.block("filter", filter);
            tf.data_source("aws_internet_gateway", &self.name, b);
            return Ok(());
        }
        let mut b = Body::new();
        b.set("tags", tags_expr(&self.tags))
            .set("vpc_id", id(tf, self.vpc.key())?);
        tf.resource("aws_internet_gateway", &self.name, b);
        Ok(())
    }
    fn cloudformation(&self, cf: &mut CloudFormation, _: &Ctx<'_>) -> Result<(), RenderError> {
        if self.shared {
            return Err(RenderError::Unsupported {
                what: format!(
                    "InternetGateway/{}: a shared VPC's internet gateway",
                    self.name
                ),
                hint: "CloudFormation cannot look the gateway up; use --target terraform or direct"
                    .into(),
            });
        }
        cf.resource(
            "AWS::EC2::InternetGateway",
            &self.name,
            Json::obj([("Tags", Json::tags(&self.tags))]),
        );
        cf.resource(
            "AWS::EC2::VPCGatewayAttachment",
            &self.name,
            Json::obj([
                (
                    "InternetGatewayId",
                    cf.reference_kind("AWS::EC2::InternetGateway"),
                ),
                ("VpcId", cf.reference(self.vpc.key())?),
            ]),
        );
        Ok(())
    }
}

/// The input variable a shared VPC's egress-only gateway id comes from.
const EGRESS_ONLY_GATEWAY_VARIABLE: &str = "egress_only_internet_gateway_id";

impl AwsResource for EgressOnlyInternetGateway {
    fn tf_type(&self) -> Option<&'static str> {
        Some("aws_egress_only_internet_gateway")
    }
    fn tf_name(&self) -> String {
        self.name.clone()
    }
    fn tf_variable(&self) -> Option<String> {
        // The AWS provider has no data source for these gateways.
        self.shared
            .then(|| EGRESS_ONLY_GATEWAY_VARIABLE.to_string())
    }
    fn terraform(&self, tf: &mut Terraform, _: &Ctx<'_>) -> Result<(), RenderError> {
        if self.shared {
            tf.variable(
                EGRESS_ONLY_GATEWAY_VARIABLE,
                "The egress-only internet gateway (eigw-...) of the shared VPC, which the private subnets route ::/0 to",
            );
            return Ok(());
        }
        let mut b = Body::new();
        b.set("tags", tags_expr(&self.tags))
            .set("vpc_id", id(tf, self.vpc.key())?);
        tf.resource("aws_egress_only_internet_gateway", &self.name, b);
        Ok(())
    }
    fn cloudformation(&self, cf: &mut CloudFormation, _: &Ctx<'_>) -> Result<(), RenderError> {
        if self.shared {
            return Err(RenderError::Unsupported {
                what: format!(
                    "EgressOnlyInternetGateway/{}: a shared VPC's egress-only internet gateway",
                    self.name
                ),
                hint: "CloudFormation cannot look the gateway up; use --target terraform or direct"
                    .into(),
            });
        }
        cf.resource(
            "AWS::EC2::EgressOnlyInternetGateway",
            &self.name,
            Json::obj([
                ("Tags", Json::tags(&self.tags)),
                ("VpcId", cf.reference(self.vpc.key())?),
            ]),
        );
        Ok(())
    }
}

impl AwsResource for Subnet {
    fn tf_type(&self) -> Option<&'static str> {
        Some("aws_subnet")
    }
    fn tf_name(&self) -> String {
        self.name.clone()
    }
    fn existing_id(&self) -> Option<String> {
        self.shared_id.clone()
    }
    fn terraform(&self, tf: &mut Terraform, _: &Ctx<'_>) -> Result<(), RenderError> {
        if self.shared_id.is_some() {
            return Ok(());
        }
        let mut b = Body::new();
        b.set("availability_zone", &self.availability_zone)
            .set_opt("cidr_block", self.cidr.as_ref())
            .set("tags", tags_expr(&self.tags))
            .set("vpc_id", id(tf, self.vpc.key())?);
        if let Some(ipv6) = &self.ipv6_cidr {
            let block = match parse_relative_ipv6(ipv6) {
                // Carved from the VPC's block, as Terraform computes it.
                Some((size, index)) => Expr::raw(format!(
                    "cidrsubnet(local.vpc_ipv6_cidr_block, {size} - local.vpc_ipv6_cidr_length, {index})"
                )),
                None => Expr::str(ipv6),
            };
            b.set("ipv6_cidr_block", block)
                .set("assign_ipv6_address_on_creation", true);
        }
        if self.cidr.is_none() {
            b.set("ipv6_native", true).set("enable_dns64", true);
        }
        if let Some(on) = self.resource_based_naming {
            b.set(
                "private_dns_hostname_type_on_launch",
                if on { "resource-name" } else { "ip-name" },
            );
            if self.cidr.is_some() {
                b.set("enable_resource_name_dns_a_record_on_launch", on);
            }
            if self.ipv6_cidr.is_some() {
                b.set("enable_resource_name_dns_aaaa_record_on_launch", on);
            }
        }
        tf.resource("aws_subnet", &self.name, b);
        Ok(())
    }
    fn cloudformation(&self, cf: &mut CloudFormation, _: &Ctx<'_>) -> Result<(), RenderError> {
        if self.shared_id.is_some() {
            return Ok(());
        }
        let mut props = vec![
            ("AvailabilityZone", Json::str(&self.availability_zone)),
            ("VpcId", cf.reference(self.vpc.key())?),
            ("Tags", Json::tags(&self.tags)),
        ];
        if let Some(cidr) = &self.cidr {
            props.push(("CidrBlock", Json::str(cidr)));
        }
        if let Some(ipv6) = &self.ipv6_cidr {
            let block = match parse_relative_ipv6(ipv6) {
                Some((size, index)) => {
                    let vpc_block = Json::obj([(
                        "Fn::Select",
                        Json::Array(vec![
                            Json::Int(0),
                            cf.attribute(self.vpc.key(), "Ipv6CidrBlocks")?,
                        ]),
                    )]);
                    let count = i64::try_from(index + 1).unwrap_or(i64::MAX);
                    Json::obj([(
                        "Fn::Select",
                        Json::Array(vec![
                            Json::Int(count - 1),
                            Json::obj([(
                                "Fn::Cidr",
                                Json::Array(vec![
                                    vpc_block,
                                    Json::Int(count),
                                    Json::str((128 - u32::from(size)).to_string()),
                                ]),
                            )]),
                        ]),
                    )])
                }
                None => Json::str(ipv6),
            };
            props.push(("Ipv6CidrBlock", block));
            props.push(("AssignIpv6AddressOnCreation", Json::Bool(true)));
        }
        if self.cidr.is_none() {
            props.push(("Ipv6Native", Json::Bool(true)));
            props.push(("EnableDns64", Json::Bool(true)));
        }
        if let Some(rbn) = self.resource_based_naming {
            let mut options = vec![(
                "HostnameType",
                Json::str(if rbn { "resource-name" } else { "ip-name" }),
            )];
            if self.cidr.is_some() {
                options.push(("EnableResourceNameDnsARecord", Json::Bool(rbn)));
            }
            if self.ipv6_cidr.is_some() {
                options.push(("EnableResourceNameDnsAAAARecord", Json::Bool(rbn)));
            }
            props.push(("PrivateDnsNameOptionsOnLaunch", Json::obj(options)));
        }
        let mut depends = Vec::new();
        if let Some(block) = &self.vpc_cidr_block {
            depends.push(block.clone());
        }
        if let Some(block) = &self.vpc_ipv6_block {
            depends.push(block.clone());
        }
        cf.resource_with_deps("AWS::EC2::Subnet", &self.name, Json::obj(props), &depends)?;
        Ok(())
    }
}

impl AwsResource for RouteTable {
    fn tf_type(&self) -> Option<&'static str> {
        Some("aws_route_table")
    }
    fn tf_name(&self) -> String {
        self.name.clone()
    }
    fn terraform(&self, tf: &mut Terraform, _: &Ctx<'_>) -> Result<(), RenderError> {
        let mut b = Body::new();
        b.set("tags", tags_expr(&self.tags))
            .set("vpc_id", id(tf, self.vpc.key())?);
        tf.resource("aws_route_table", &self.name, b);
        Ok(())
    }
    fn cloudformation(&self, cf: &mut CloudFormation, _: &Ctx<'_>) -> Result<(), RenderError> {
        cf.resource(
            "AWS::EC2::RouteTable",
            &self.name,
            Json::obj([
                ("VpcId", cf.reference(self.vpc.key())?),
                ("Tags", Json::tags(&self.tags)),
            ]),
        );
        Ok(())
    }
}

/// kops names its route resources `route-<task name>`.
fn route_name(route: &Route) -> String {
    format!("route-{}", route.name)
}

impl AwsResource for Route {
    fn tf_type(&self) -> Option<&'static str> {
        Some("aws_route")
    }
    fn tf_name(&self) -> String {
        route_name(self)
    }
    fn terraform(&self, tf: &mut Terraform, _: &Ctx<'_>) -> Result<(), RenderError> {
        let mut b = Body::new();
        if self.destination.contains(':') {
            b.set("destination_ipv6_cidr_block", &self.destination);
        } else {
            b.set("destination_cidr_block", &self.destination);
        }
        b.set("route_table_id", id(tf, self.route_table.key())?);
        match &self.target {
            RouteTarget::InternetGateway(r) => b.set("gateway_id", id(tf, r.key())?),
            RouteTarget::NatGateway(r) => b.set("nat_gateway_id", id(tf, r.key())?),
            RouteTarget::EgressOnlyGateway(r) => b.set("egress_only_gateway_id", id(tf, r.key())?),
            RouteTarget::InternetGatewayId(x) => b.set("gateway_id", x),
            RouteTarget::NatGatewayId(x) => b.set("nat_gateway_id", x),
            RouteTarget::Instance(x) => b.set("instance_id", x),
            RouteTarget::TransitGateway(x) => b.set("transit_gateway_id", x),
            RouteTarget::PeeringConnection(x) => b.set("vpc_peering_connection_id", x),
            RouteTarget::EgressOnlyInternetGateway(x) => b.set("egress_only_gateway_id", x),
        };
        tf.resource("aws_route", &self.tf_name(), b);
        Ok(())
    }
    fn cloudformation(&self, cf: &mut CloudFormation, _: &Ctx<'_>) -> Result<(), RenderError> {
        let mut props = vec![("RouteTableId", cf.reference(self.route_table.key())?)];
        if self.destination.contains(':') {
            props.push(("DestinationIpv6CidrBlock", Json::str(&self.destination)));
        } else {
            props.push(("DestinationCidrBlock", Json::str(&self.destination)));
        }
        let mut depends = Vec::new();
        match &self.target {
            RouteTarget::InternetGateway(r) => {
                props.push(("GatewayId", cf.reference(r.key())?));
                // The route needs the gateway attached to the VPC first.
                depends.push(cf.logical_id_of_kind(r.key(), "AWS::EC2::VPCGatewayAttachment"));
            }
            RouteTarget::NatGateway(r) => props.push(("NatGatewayId", cf.reference(r.key())?)),
            RouteTarget::EgressOnlyGateway(r) => {
                props.push(("EgressOnlyInternetGatewayId", cf.reference(r.key())?))
            }
            RouteTarget::InternetGatewayId(x) => props.push(("GatewayId", Json::str(x))),
            RouteTarget::NatGatewayId(x) => props.push(("NatGatewayId", Json::str(x))),
            RouteTarget::Instance(x) => props.push(("InstanceId", Json::str(x))),
            RouteTarget::TransitGateway(x) => props.push(("TransitGatewayId", Json::str(x))),
            RouteTarget::PeeringConnection(x) => {
                props.push(("VpcPeeringConnectionId", Json::str(x)))
            }
            RouteTarget::EgressOnlyInternetGateway(x) => {
                props.push(("EgressOnlyInternetGatewayId", Json::str(x)))
            }
        }
        cf.resource_raw_deps(
            "AWS::EC2::Route",
            &self.tf_name(),
            Json::obj(props),
            depends,
        );
        Ok(())
    }
}

impl AwsResource for RouteTableAssociation {
    fn tf_type(&self) -> Option<&'static str> {
        Some("aws_route_table_association")
    }
    fn tf_name(&self) -> String {
        self.name.clone()
    }
    fn terraform(&self, tf: &mut Terraform, _: &Ctx<'_>) -> Result<(), RenderError> {
        let mut b = Body::new();
        b.set("route_table_id", id(tf, self.route_table.key())?)
            .set("subnet_id", id(tf, self.subnet.key())?);
        tf.resource("aws_route_table_association", &self.name, b);
        Ok(())
    }
    fn cloudformation(&self, cf: &mut CloudFormation, _: &Ctx<'_>) -> Result<(), RenderError> {
        cf.resource(
            "AWS::EC2::SubnetRouteTableAssociation",
            &self.name,
            Json::obj([
                ("RouteTableId", cf.reference(self.route_table.key())?),
                ("SubnetId", cf.reference(self.subnet.key())?),
            ]),
        );
        Ok(())
    }
}

impl AwsResource for ElasticIp {
    fn tf_type(&self) -> Option<&'static str> {
        Some("aws_eip")
    }
    fn tf_name(&self) -> String {
        self.name.clone()
    }
    fn existing_id(&self) -> Option<String> {
        match &self.existing {
            Some(ExistingAddress::AllocationId(id)) => Some(id.clone()),
            _ => None,
        }
    }
    fn terraform(&self, tf: &mut Terraform, _: &Ctx<'_>) -> Result<(), RenderError> {
        match &self.existing {
            Some(ExistingAddress::AllocationId(_)) => {}
            Some(ExistingAddress::PublicIp(ip)) => {
                let mut b = Body::new();
                b.set("public_ip", ip);
                tf.data_source("aws_eip", &self.name, b);
            }
            None => {
                let mut b = Body::new();
                b.set("domain", "vpc").set("tags", tags_expr(&self.tags));
                tf.resource("aws_eip", &self.name, b);
            }
        }
        Ok(())
    }
    fn cloudformation(&self, cf: &mut CloudFormation, _: &Ctx<'_>) -> Result<(), RenderError> {
        if self.existing.is_some() {
            return Ok(());
        }
        cf.resource(
            "AWS::EC2::EIP",
            &self.name,
            Json::obj([
                ("Domain", Json::str("vpc")),
                ("Tags", Json::tags(&self.tags)),
            ]),
        );
        Ok(())
    }
}

impl AwsResource for NatGateway {
    fn tf_type(&self) -> Option<&'static str> {
        Some("aws_nat_gateway")
    }
    fn tf_name(&self) -> String {
        self.name.clone()
    }
    fn existing_id(&self) -> Option<String> {
        self.shared_id.clone()
    }
    fn terraform(&self, tf: &mut Terraform, _: &Ctx<'_>) -> Result<(), RenderError> {
        if self.shared_id.is_some() {
            return Ok(());
        }
        let mut b = Body::new();
        if let Some(eip) = &self.elastic_ip {
            b.set("allocation_id", id(tf, eip.key())?);
        }
        if let Some(subnet) = &self.subnet {
            b.set("subnet_id", id(tf, subnet.key())?);
        }
        b.set("tags", tags_expr(&self.tags));
        tf.resource("aws_nat_gateway", &self.name, b);
        Ok(())
    }
    fn cloudformation(&self, cf: &mut CloudFormation, _: &Ctx<'_>) -> Result<(), RenderError> {
        if self.shared_id.is_some() {
            return Ok(());
        }
        let mut props = vec![("Tags", Json::tags(&self.tags))];
        if let Some(eip) = &self.elastic_ip {
            props.push(("AllocationId", cf.attribute(eip.key(), "AllocationId")?));
        }
        if let Some(subnet) = &self.subnet {
            props.push(("SubnetId", cf.reference(subnet.key())?));
        }
        cf.resource("AWS::EC2::NatGateway", &self.name, Json::obj(props));
        Ok(())
    }
}

// ---------------------------------------------------------------- security groups

impl AwsResource for SecurityGroup {
    fn tf_type(&self) -> Option<&'static str> {
        Some("aws_security_group")
    }
    fn tf_name(&self) -> String {
        self.name.clone()
    }
    fn terraform(&self, tf: &mut Terraform, _: &Ctx<'_>) -> Result<(), RenderError> {
        let mut b = Body::new();
        b.set("description", &self.description)
            .set("name", &self.name)
            .set("tags", tags_expr(&self.tags))
            .set("vpc_id", id(tf, self.vpc.key())?);
        tf.resource("aws_security_group", &self.name, b);
        Ok(())
    }
    fn cloudformation(&self, cf: &mut CloudFormation, _: &Ctx<'_>) -> Result<(), RenderError> {
        cf.resource(
            "AWS::EC2::SecurityGroup",
            &self.name,
            Json::obj([
                ("GroupName", Json::str(&self.name)),
                ("GroupDescription", Json::str(&self.description)),
                ("VpcId", cf.reference(self.vpc.key())?),
                ("Tags", Json::tags(&self.tags)),
            ]),
        );
        Ok(())
    }
}

/// The private zone's association with the cluster's VPC. A zone known by
/// name only is looked up by a data source, as for the records.
impl AwsResource for HostedZoneAssociation {
    fn tf_type(&self) -> Option<&'static str> {
        Some("aws_route53_zone_association")
    }
    fn tf_name(&self) -> String {
        self.name.clone()
    }
    fn terraform(&self, tf: &mut Terraform, ctx: &Ctx<'_>) -> Result<(), RenderError> {
        let zone = if self.zone.contains('.') {
            let mut z = Body::new();
            z.set("name", self.zone.as_str())
                .set("private_zone", ctx.private_zone);
            let address = tf.data_source("aws_route53_zone", &self.zone, z);
            Expr::raw(format!("{address}.zone_id"))
        } else {
            Expr::str(format!(
                "/hostedzone/{}",
                self.zone.trim_start_matches("/hostedzone/")
            ))
        };
        let mut b = Body::new();
        b.set("vpc_id", id(tf, self.vpc.key())?)
            .set("zone_id", zone);
        tf.resource("aws_route53_zone_association", &self.name, b);
        Ok(())
    }
    fn cloudformation(&self, _: &mut CloudFormation, _: &Ctx<'_>) -> Result<(), RenderError> {
        // CloudFormation has no resource that associates a VPC with an
        // existing zone (only a zone it creates lists its VPCs): the
        // association is left to `update cluster --yes` or the user.
        Ok(())
    }
}

/// An existing group named by `securityGroupOverride`: not rendered;
/// what refers to it gets its id.
impl AwsResource for SharedSecurityGroup {
    fn tf_type(&self) -> Option<&'static str> {
        None
    }
    fn tf_name(&self) -> String {
        self.name.clone()
    }
    fn existing_id(&self) -> Option<String> {
        Some(self.id.clone())
    }
    fn terraform(&self, _: &mut Terraform, _: &Ctx<'_>) -> Result<(), RenderError> {
        Ok(())
    }
    fn cloudformation(&self, _: &mut CloudFormation, _: &Ctx<'_>) -> Result<(), RenderError> {
        Ok(())
    }
}

impl AwsResource for SecurityGroupRule {
    fn tf_type(&self) -> Option<&'static str> {
        Some("aws_security_group_rule")
    }
    fn tf_name(&self) -> String {
        self.name.clone()
    }
    fn terraform(&self, tf: &mut Terraform, _: &Ctx<'_>) -> Result<(), RenderError> {
        let mut b = Body::new();
        b.set("from_port", self.from_port.unwrap_or(0))
            .set("to_port", self.to_port.unwrap_or(0))
            .set("protocol", self.aws_protocol())
            .set("security_group_id", id(tf, self.group.key())?)
            .set("type", if self.egress { "egress" } else { "ingress" });
        match &self.target {
            RuleTarget::Cidr(c) => b.set("cidr_blocks", Expr::List(vec![Expr::str(c)])),
            RuleTarget::Ipv6Cidr(c) => b.set("ipv6_cidr_blocks", Expr::List(vec![Expr::str(c)])),
            RuleTarget::PrefixList(p) => b.set("prefix_list_ids", Expr::List(vec![Expr::str(p)])),
            RuleTarget::Group(g) => b.set("source_security_group_id", id(tf, g.key())?),
        };
        tf.resource("aws_security_group_rule", &self.name, b);
        Ok(())
    }
    fn cloudformation(&self, cf: &mut CloudFormation, _: &Ctx<'_>) -> Result<(), RenderError> {
        let kind = if self.egress {
            "AWS::EC2::SecurityGroupEgress"
        } else {
            "AWS::EC2::SecurityGroupIngress"
        };
        let mut props = vec![
            ("GroupId", cf.reference(self.group.key())?),
            ("IpProtocol", Json::str(self.aws_protocol())),
        ];
        if self.protocol.is_some() {
            props.push(("FromPort", Json::Int(self.from_port.unwrap_or(0).into())));
            props.push(("ToPort", Json::Int(self.to_port.unwrap_or(0).into())));
        }
        match &self.target {
            RuleTarget::Cidr(c) => props.push(("CidrIp", Json::str(c))),
            RuleTarget::Ipv6Cidr(c) => props.push(("CidrIpv6", Json::str(c))),
            RuleTarget::PrefixList(p) => {
                let key = if self.egress {
                    "DestinationPrefixListId"
                } else {
                    "SourcePrefixListId"
                };
                props.push((key, Json::str(p)))
            }
            RuleTarget::Group(g) => {
                let key = if self.egress {
                    "DestinationSecurityGroupId"
                } else {
                    "SourceSecurityGroupId"
                };
                props.push((key, cf.reference(g.key())?))
            }
        }
        cf.resource(kind, &self.name, Json::obj(props));
        Ok(())
    }
}

impl AwsResource for SecurityGroupCleanup {
    fn tf_type(&self) -> Option<&'static str> {
        None // removes rules others added by hand: nothing to declare
    }
    fn tf_name(&self) -> String {
        self.name.clone()
    }
    fn terraform(&self, _: &mut Terraform, _: &Ctx<'_>) -> Result<(), RenderError> {
        Ok(())
    }
    fn cloudformation(&self, _: &mut CloudFormation, _: &Ctx<'_>) -> Result<(), RenderError> {
        Ok(())
    }
}

// ---------------------------------------------------------------- IAM

/// The trust policy as kops writes it: its EC2 trust policy in kops' own
/// layout, any other document as indented JSON.
fn trust_policy_text(document: &crate::tasks::policy_document::PolicyDocument) -> String {
    let ec2 = serde_json::json!({
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow",
            "Principal": {"Service": "ec2.amazonaws.com"},
            "Action": "sts:AssumeRole",
        }],
    });
    if *document.value() == ec2 {
        return concat!(
            "{\n",
            "  \"Version\": \"2012-10-17\",\n",
            "  \"Statement\": [\n",
            "    {\n",
            "      \"Effect\": \"Allow\",\n",
            "      \"Principal\": { \"Service\": \"ec2.amazonaws.com\"},\n",
            "      \"Action\": \"sts:AssumeRole\"\n",
            "    }\n",
            "  ]\n",
            "}\n",
        )
        .to_string();
    }
    document.to_json()
}

impl AwsResource for IamRole {
    fn tf_type(&self) -> Option<&'static str> {
        Some("aws_iam_role")
    }
    fn tf_name(&self) -> String {
        self.name.clone()
    }
    fn terraform(&self, tf: &mut Terraform, _: &Ctx<'_>) -> Result<(), RenderError> {
        let policy = tf.file(
            "aws_iam_role",
            &self.name,
            "policy",
            trust_policy_text(&self.assume_role_policy).into_bytes(),
            false,
        );
        let mut b = Body::new();
        b.set("assume_role_policy", policy)
            .set("name", &self.name)
            .set_opt("permissions_boundary", self.permissions_boundary.as_ref())
            .set("tags", tags_expr(&self.tags));
        tf.resource("aws_iam_role", &self.name, b);
        Ok(())
    }
    fn cloudformation(&self, cf: &mut CloudFormation, _: &Ctx<'_>) -> Result<(), RenderError> {
        let mut props = vec![
            ("RoleName", Json::str(&self.name)),
            (
                "AssumeRolePolicyDocument",
                Json::from_value(self.assume_role_policy.value()),
            ),
            ("Tags", Json::tags(&self.tags)),
        ];
        if let Some(boundary) = &self.permissions_boundary {
            props.push(("PermissionsBoundary", Json::str(boundary)));
        }
        cf.resource("AWS::IAM::Role", &self.name, Json::obj(props));
        Ok(())
    }
}

/// How a policy names a hosted zone: `arn:<partition>:route53:::hostedzone/`.
const HOSTED_ZONE_ARN: &str = ":route53:::hostedzone/";
/// The `templatefile` variable holding a zone's id.
const ZONE_ID_VARIABLE: &str = "hosted_zone_id";

/// The zone a policy names by domain name rather than id (the model's way
/// of saying "the id of this zone", known only to the cloud).
fn zone_by_name(json: &str) -> Option<String> {
    json.split(HOSTED_ZONE_ARN)
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .find(|zone| zone.contains('.'))
        .map(str::to_string)
}

/// Replaces, in a CloudFormation policy document, each resource ARN of the
/// zone `zone` with `Fn::Sub` of the stack parameter holding its id.
fn substitute_zone(value: &mut serde_json::Value, zone: &str, parameter: &Json) {
    use serde_json::Value;
    match value {
        Value::String(text) if text.ends_with(&format!("{HOSTED_ZONE_ARN}{zone}")) => {
            let prefix = text.trim_end_matches(zone).to_string();
            let id = parameter.to_value();
            *value =
                serde_json::json!({"Fn::Sub": [format!("{prefix}${{ZoneId}}"), {"ZoneId": id}]});
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|v| substitute_zone(v, zone, parameter)),
        Value::Object(map) => map
            .values_mut()
            .for_each(|v| substitute_zone(v, zone, parameter)),
        _ => {}
    }
}

impl AwsResource for IamRolePolicy {
    fn tf_type(&self) -> Option<&'static str> {
        // No document: a policy to remove, which Terraform expresses by
        // not declaring it.
        self.document.as_ref().map(|_| "aws_iam_role_policy")
    }
    fn tf_name(&self) -> String {
        self.name.clone()
    }
    fn terraform(&self, tf: &mut Terraform, ctx: &Ctx<'_>) -> Result<(), RenderError> {
        let Some(document) = &self.document else {
            return Ok(()); // a policy to remove: nothing to declare
        };
        let json = document.to_json();
        let policy = match zone_by_name(&json) {
            // The zone's id is looked up by Terraform and put into the
            // document: `templatefile`, with `$` and `%` escaped.
            Some(zone) => {
                let mut z = Body::new();
                z.set("name", zone.as_str())
                    .set("private_zone", ctx.private_zone);
                let address = tf.data_source("aws_route53_zone", &zone, z);
                let template = json.replace("${", "$${").replace("%{", "%%{").replace(
                    &format!("{HOSTED_ZONE_ARN}{zone}\""),
                    &format!("{HOSTED_ZONE_ARN}${{{ZONE_ID_VARIABLE}}}\""),
                );
                let file = tf.file(
                    "aws_iam_role_policy",
                    &self.name,
                    "policy",
                    template.into_bytes(),
                    false,
                );
                let Expr::Raw(read) = file else {
                    unreachable!("Terraform::file returns a file() call")
                };
                let path = read
                    .strip_prefix("file(")
                    .and_then(|r| r.strip_suffix(')'))
                    .unwrap_or_default()
                    .to_string();
                Expr::raw(format!(
                    "templatefile({path}, {{ {ZONE_ID_VARIABLE} = {address}.zone_id }})"
                ))
            }
            None => tf.file(
                "aws_iam_role_policy",
                &self.name,
                "policy",
                json.into_bytes(),
                false,
            ),
        };
        let mut b = Body::new();
        b.set("name", &self.name)
            .set("policy", policy)
            .set("role", tf.reference(self.role.key(), "name")?);
        tf.resource("aws_iam_role_policy", &self.name, b);
        Ok(())
    }
    fn cloudformation(&self, cf: &mut CloudFormation, _: &Ctx<'_>) -> Result<(), RenderError> {
        let Some(document) = &self.document else {
            return Ok(());
        };
        let mut value = document.value().clone();
        if let Some(zone) = zone_by_name(&document.to_json()) {
            // The zone's id is a stack parameter, as for the API records.
            let parameter = cf.parameter(
                &format!("HostedZone{zone}"),
                "AWS::Route53::HostedZone::Id",
                &format!("The id of the Route 53 hosted zone `{zone}`"),
            );
            substitute_zone(&mut value, &zone, &parameter);
        }
        cf.resource(
            "AWS::IAM::RolePolicy",
            &self.name,
            Json::obj([
                ("PolicyName", Json::str(&self.name)),
                ("PolicyDocument", Json::from_value(&value)),
                ("RoleName", cf.reference(self.role.key())?),
            ]),
        );
        Ok(())
    }
}

impl AwsResource for IamInstanceProfile {
    fn tf_type(&self) -> Option<&'static str> {
        Some("aws_iam_instance_profile")
    }
    fn tf_name(&self) -> String {
        self.name.clone()
    }
    fn terraform(&self, tf: &mut Terraform, ctx: &Ctx<'_>) -> Result<(), RenderError> {
        let mut b = Body::new();
        b.set("name", &self.name).set("tags", tags_expr(&self.tags));
        if let Some(link) = ctx
            .find::<IamInstanceProfileRole>()
            .find(|l| l.profile.key().name == self.name)
        {
            b.set("role", tf.reference(link.role.key(), "name")?);
        }
        tf.resource("aws_iam_instance_profile", &self.name, b);
        Ok(())
    }
    fn cloudformation(&self, cf: &mut CloudFormation, ctx: &Ctx<'_>) -> Result<(), RenderError> {
        let mut roles = Vec::new();
        for link in ctx
            .find::<IamInstanceProfileRole>()
            .filter(|l| l.profile.key().name == self.name)
        {
            roles.push(cf.reference(link.role.key())?);
        }
        cf.resource(
            "AWS::IAM::InstanceProfile",
            &self.name,
            Json::obj([
                ("InstanceProfileName", Json::str(&self.name)),
                ("Roles", Json::Array(roles)),
            ]),
        );
        Ok(())
    }
}

impl AwsResource for IamInstanceProfileRole {
    fn tf_type(&self) -> Option<&'static str> {
        None // the profile's `role`
    }
    fn tf_name(&self) -> String {
        self.profile.key().name.clone()
    }
    fn terraform(&self, _: &mut Terraform, _: &Ctx<'_>) -> Result<(), RenderError> {
        Ok(())
    }
    fn cloudformation(&self, _: &mut CloudFormation, _: &Ctx<'_>) -> Result<(), RenderError> {
        Ok(())
    }
}

/// An existing profile a group names in `spec.iam.profile`: no resource,
/// and its name written literally where it is used (the launch template's
/// `iam_instance_profile { name = "..." }`), as kops renders it; it is not
/// looked up with a data source either.
impl AwsResource for SharedInstanceProfile {
    fn tf_type(&self) -> Option<&'static str> {
        None
    }
    fn tf_name(&self) -> String {
        self.name.clone()
    }
    fn existing_id(&self) -> Option<String> {
        Some(self.name.clone())
    }
    fn terraform(&self, _: &mut Terraform, _: &Ctx<'_>) -> Result<(), RenderError> {
        Ok(())
    }
    fn cloudformation(&self, _: &mut CloudFormation, _: &Ctx<'_>) -> Result<(), RenderError> {
        Ok(())
    }
}

// ---------------------------------------------------------------- SSH key

/// kops names the key pair resource after the key name without the
/// fingerprint's colons.
fn ssh_key_resource_name(key: &SshKey) -> String {
    key.name.replace(':', "")
}

impl AwsResource for SshKey {
    fn tf_type(&self) -> Option<&'static str> {
        Some("aws_key_pair")
    }
    fn tf_name(&self) -> String {
        ssh_key_resource_name(self)
    }
    fn existing_id(&self) -> Option<String> {
        self.shared.then(|| self.name.clone())
    }
    fn terraform(&self, tf: &mut Terraform, ctx: &Ctx<'_>) -> Result<(), RenderError> {
        if self.shared {
            return Ok(());
        }
        let name = ssh_key_resource_name(self);
        let mut b = Body::new();
        b.set("key_name", &self.name)
            .set("tags", tags_expr(&self.tags));
        if let Some(public_key) = &self.public_key {
            let file = tf.file(
                "aws_key_pair",
                &name,
                "public_key",
                public_key.clone().into_bytes(),
                false,
            );
            b.set("public_key", file);
        }
        let _ = ctx;
        tf.resource("aws_key_pair", &name, b);
        Ok(())
    }
    fn cloudformation(&self, cf: &mut CloudFormation, _: &Ctx<'_>) -> Result<(), RenderError> {
        if self.shared {
            return Ok(());
        }
        let mut props = vec![
            ("KeyName", Json::str(&self.name)),
            ("Tags", Json::tags(&self.tags)),
        ];
        if let Some(public_key) = &self.public_key {
            props.push(("PublicKeyMaterial", Json::str(public_key.trim())));
        }
        cf.resource(
            "AWS::EC2::KeyPair",
            &ssh_key_resource_name(self),
            Json::obj(props),
        );
        Ok(())
    }
}

// ---------------------------------------------------------------- compute

impl AwsResource for EbsVolume {
    fn tf_type(&self) -> Option<&'static str> {
        Some("aws_ebs_volume")
    }
    fn tf_name(&self) -> String {
        self.name.clone()
    }
    fn terraform(&self, tf: &mut Terraform, _: &Ctx<'_>) -> Result<(), RenderError> {
        let mut b = Body::new();
        b.set("availability_zone", &self.availability_zone)
            .set("encrypted", self.encrypted)
            .set_opt("iops", self.iops)
            .set_opt("kms_key_id", self.kms_key_id.as_ref())
            .set("size", self.size)
            .set("tags", tags_expr(&self.tags))
            .set_opt("throughput", self.throughput)
            .set("type", &self.volume_type);
        tf.resource("aws_ebs_volume", &self.name, b);
        Ok(())
    }
    fn cloudformation(&self, cf: &mut CloudFormation, _: &Ctx<'_>) -> Result<(), RenderError> {
        let mut props = vec![
            ("AvailabilityZone", Json::str(&self.availability_zone)),
            ("Encrypted", Json::Bool(self.encrypted)),
            ("Size", Json::Int(self.size.into())),
            ("VolumeType", Json::str(&self.volume_type)),
            ("Tags", Json::tags(&self.tags)),
        ];
        if let Some(iops) = self.iops {
            props.push(("Iops", Json::Int(iops.into())));
        }
        if let Some(throughput) = self.throughput {
            props.push(("Throughput", Json::Int(throughput.into())));
        }
        if let Some(kms) = &self.kms_key_id {
            props.push(("KmsKeyId", Json::str(kms)));
        }
        cf.resource("AWS::EC2::Volume", &self.name, Json::obj(props));
        Ok(())
    }
}

/// The image id, or a Terraform `aws_ami` data source for an image given by
/// name (`owner/name` or a bare name): rendering makes no cloud call.
fn tf_image(tf: &mut Terraform, template: &LaunchTemplate) -> Expr {
    let image = template.image.as_str();
    if image.starts_with("ami-") {
        return Expr::str(image);
    }
    let (owner, name) = ami_owner_and_name(image);
    let mut b = Body::new();
    b.set("most_recent", true)
        .set("owners", Expr::List(vec![Expr::str(owner)]));
    let mut filter = Body::new();
    filter
        .set("name", "name")
        .set("values", Expr::List(vec![Expr::str(name)]));
    b.block("filter", filter);
    let address = tf.data_source("aws_ami", &template.name, b);
    Expr::raw(format!("{address}.id"))
}

/// kops' reading of an image name: `owner/name` where the owner is an
/// account id or an alias, or a bare name (the Ubuntu images' owner, as kops
/// assumes for `ubuntu/...`).
pub fn ami_owner_and_name(image: &str) -> (String, String) {
    const ALIASES: &[(&str, &str)] = &[
        ("amazon", "amazon"),
        ("ubuntu", "099720109477"),
        ("debian", "136693071363"),
        ("redhat.com", "309956199498"),
        ("centos", "125523088429"),
        ("flatcar", "075585003325"),
    ];
    if let Some((first, rest)) = image.split_once('/') {
        if first.chars().all(|c| c.is_ascii_digit()) {
            return (first.to_string(), rest.to_string());
        }
        if let Some((_, id)) = ALIASES.iter().find(|(alias, _)| *alias == first) {
            if first == "ubuntu" {
                return (id.to_string(), image.to_string());
            }
            return (id.to_string(), rest.to_string());
        }
    }
    ("self".to_string(), image.to_string())
}

impl AwsResource for LaunchTemplate {
    fn tf_type(&self) -> Option<&'static str> {
        Some("aws_launch_template")
    }
    fn tf_name(&self) -> String {
        self.name.clone()
    }
    fn terraform(&self, tf: &mut Terraform, _: &Ctx<'_>) -> Result<(), RenderError> {
        let image = tf_image(tf, self);
        let rv = &self.root_volume;
        let mut ebs = Body::new();
        ebs.set("delete_on_termination", true)
            .set("encrypted", rv.encrypted)
            .set_opt("iops", rv.iops)
            .set_opt("kms_key_id", rv.kms_key_id.as_ref())
            .set_opt("throughput", rv.throughput)
            .set("volume_size", rv.size)
            .set("volume_type", &rv.volume_type);
        let mut device = Body::new();
        device.set("device_name", "/dev/xvda").block("ebs", ebs);
        let ephemeral: Vec<Body> = ephemeral_devices(&self.instance_type)
            .into_iter()
            .map(|(device, virtual_name)| {
                let mut b = Body::new();
                b.set("device_name", device)
                    .set("virtual_name", virtual_name);
                b
            })
            .collect();

        let mut profile = Body::new();
        profile.set("name", id(tf, self.instance_profile.key())?);
        let mut lifecycle = Body::new();
        lifecycle.set("create_before_destroy", true);
        let mut metadata = Body::new();
        metadata
            .set("http_endpoint", "enabled")
            .set(
                "http_protocol_ipv6",
                if self.ipv6 { "enabled" } else { "disabled" },
            )
            .set(
                "http_put_response_hop_limit",
                self.http_put_response_hop_limit,
            )
            .set("http_tokens", &self.http_tokens);
        let mut monitoring = Body::new();
        monitoring.set("enabled", self.detailed_monitoring);

        let mut groups = Vec::new();
        for g in &self.security_groups {
            groups.push(id(tf, g.key())?);
        }
        groups.extend(self.additional_security_group_ids.iter().map(Expr::from));
        let mut nic = Body::new();
        nic.set("associate_public_ip_address", self.associate_public_ip)
            .set("delete_on_termination", true)
            .set("ipv6_address_count", i32::from(self.ipv6))
            .set("security_groups", Expr::List(groups));

        // A bastion has no user data (kops writes none).
        let user_data = (!self.user_data.is_empty()).then(|| {
            tf.file(
                "aws_launch_template",
                &self.name,
                "user_data",
                self.user_data.clone().into_bytes(),
                true,
            )
        });
        let mut b = Body::new();
        b.block("block_device_mappings", device);
        for e in ephemeral {
            b.block("block_device_mappings", e);
        }
        b.block("iam_instance_profile", profile)
            .set("image_id", image)
            .set("instance_type", &self.instance_type)
            .block("lifecycle", lifecycle)
            .block("metadata_options", metadata)
            .block("monitoring", monitoring)
            .set("name", &self.name)
            .block("network_interfaces", nic);
        if let Some(key) = &self.ssh_key {
            b.set("key_name", id(tf, key.key())?);
        }
        if let Some(spot) = &self.spot {
            // kops' shape: `instance_market_options { market_type = "spot"
            // spot_options { max_price = "..." } }`.
            let mut options = Body::new();
            options
                .set_opt("block_duration_minutes", spot.block_duration_minutes)
                .set_opt(
                    "instance_interruption_behavior",
                    spot.interruption_behavior.as_ref(),
                )
                .set("max_price", &spot.max_price);
            let mut market = Body::new();
            market
                .set("market_type", "spot")
                .block("spot_options", options);
            b.block("instance_market_options", market);
        }
        for kind in ["instance", "volume", "network-interface"] {
            let mut spec = Body::new();
            spec.set("resource_type", kind)
                .set("tags", tags_expr(&self.tags));
            b.block("tag_specifications", spec);
        }
        b.set("tags", tags_expr(&self.tags))
            .set_opt("user_data", user_data);
        tf.resource("aws_launch_template", &self.name, b);
        Ok(())
    }
    fn cloudformation(&self, cf: &mut CloudFormation, _: &Ctx<'_>) -> Result<(), RenderError> {
        // CloudFormation cannot look an image up by name: an image given by
        // name becomes a stack parameter (typed as an image id), one per
        // distinct name, whose value is given when the stack is created.
        let image = if self.image.starts_with("ami-") {
            Json::str(&self.image)
        } else {
            cf.parameter(
                &format!("Image{}", short_hash(&self.image)),
                "AWS::EC2::Image::Id",
                &format!("The id of image `{}` in this region", self.image),
            )
        };
        let rv = &self.root_volume;
        let mut ebs = vec![
            ("DeleteOnTermination", Json::Bool(true)),
            ("Encrypted", Json::Bool(rv.encrypted)),
            ("VolumeSize", Json::Int(rv.size.into())),
            ("VolumeType", Json::str(&rv.volume_type)),
        ];
        if let Some(iops) = rv.iops {
            ebs.push(("Iops", Json::Int(iops.into())));
        }
        if let Some(t) = rv.throughput {
            ebs.push(("Throughput", Json::Int(t.into())));
        }
        if let Some(k) = &rv.kms_key_id {
            ebs.push(("KmsKeyId", Json::str(k)));
        }
        let mut groups = Vec::new();
        for g in &self.security_groups {
            groups.push(cf.reference(g.key())?);
        }
        groups.extend(self.additional_security_group_ids.iter().map(Json::str));
        let tags = Json::tags(&self.tags);
        let mut data = vec![
            (
                "BlockDeviceMappings",
                Json::Array(vec![Json::obj([
                    ("DeviceName", Json::str("/dev/xvda")),
                    ("Ebs", Json::obj(ebs)),
                ])]),
            ),
            (
                "IamInstanceProfile",
                Json::obj([("Name", cf.reference(self.instance_profile.key())?)]),
            ),
            ("ImageId", image),
            ("InstanceType", Json::str(&self.instance_type)),
            (
                "MetadataOptions",
                Json::obj([
                    ("HttpEndpoint", Json::str("enabled")),
                    (
                        "HttpProtocolIpv6",
                        Json::str(if self.ipv6 { "enabled" } else { "disabled" }),
                    ),
                    (
                        "HttpPutResponseHopLimit",
                        Json::Int(self.http_put_response_hop_limit.into()),
                    ),
                    ("HttpTokens", Json::str(&self.http_tokens)),
                ]),
            ),
            (
                "Monitoring",
                Json::obj([("Enabled", Json::Bool(self.detailed_monitoring))]),
            ),
            (
                "NetworkInterfaces",
                Json::Array(vec![Json::obj([
                    (
                        "AssociatePublicIpAddress",
                        Json::Bool(self.associate_public_ip),
                    ),
                    ("DeleteOnTermination", Json::Bool(true)),
                    ("DeviceIndex", Json::Int(0)),
                    ("Ipv6AddressCount", Json::Int(i64::from(self.ipv6))),
                    ("Groups", Json::Array(groups)),
                ])]),
            ),
            (
                "TagSpecifications",
                Json::Array(
                    ["instance", "volume", "network-interface"]
                        .iter()
                        .map(|k| {
                            Json::obj([("ResourceType", Json::str(k)), ("Tags", tags.clone())])
                        })
                        .collect(),
                ),
            ),
        ];
        if !self.user_data.is_empty() {
            data.push((
                "UserData",
                Json::str(base64_encode(self.user_data.as_bytes())),
            ));
        }
        if let Some(key) = &self.ssh_key {
            data.push(("KeyName", cf.reference(key.key())?));
        }
        if let Some(spot) = &self.spot {
            let mut options = vec![("MaxPrice", Json::str(&spot.max_price))];
            if let Some(minutes) = spot.block_duration_minutes {
                options.push(("BlockDurationMinutes", Json::Int(minutes.into())));
            }
            if let Some(behavior) = &spot.interruption_behavior {
                options.push(("InstanceInterruptionBehavior", Json::str(behavior)));
            }
            data.push((
                "InstanceMarketOptions",
                Json::obj([
                    ("MarketType", Json::str("spot")),
                    ("SpotOptions", Json::obj(options)),
                ]),
            ));
        }
        cf.resource(
            "AWS::EC2::LaunchTemplate",
            &self.name,
            Json::obj([
                ("LaunchTemplateName", Json::str(&self.name)),
                ("LaunchTemplateData", Json::obj(data)),
                (
                    "TagSpecifications",
                    Json::Array(vec![Json::obj([
                        ("ResourceType", Json::str("launch-template")),
                        ("Tags", tags),
                    ])]),
                ),
            ]),
        );
        Ok(())
    }
}

/// The instance-store volumes a type exposes through block device mappings
/// (`/dev/sdc` → `ephemeral0`, ...): the older families whose instance
/// stores are not NVMe. Newer types (`m5d`, `i3`, ...) attach theirs
/// without mappings.
pub fn ephemeral_devices(instance_type: &str) -> Vec<(String, String)> {
    let count = match instance_type {
        "m3.medium" | "m3.large" | "r3.large" | "r3.xlarge" | "r3.2xlarge" | "r3.4xlarge"
        | "i2.xlarge" | "m1.small" | "m1.medium" | "c1.medium" => 1,
        "m3.xlarge" | "m3.2xlarge" | "c3.large" | "c3.xlarge" | "c3.2xlarge" | "c3.4xlarge"
        | "c3.8xlarge" | "r3.8xlarge" | "i2.2xlarge" | "m1.large" => 2,
        "d2.xlarge" => 3,
        "i2.4xlarge" | "m1.xlarge" | "c1.xlarge" => 4,
        "d2.2xlarge" => 6,
        "i2.8xlarge" => 8,
        "d2.4xlarge" => 12,
        "d2.8xlarge" => 24,
        _ => 0,
    };
    (0..count)
        .map(|i| {
            let letter = (b'c' + i as u8) as char;
            (format!("/dev/sd{letter}"), format!("ephemeral{i}"))
        })
        .collect()
}

/// A short stable tag for a string (FNV-1a, hex).
pub(crate) fn short_hash(s: &str) -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100000001b3);
    }
    format!("{:08x}", h as u32)
}

pub(crate) fn base64_encode(data: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(data)
}

/// The Classic ELBs a group registers with, ordered by name as kops
/// orders them: the cluster's own (`api.<cluster>`, referenced) and the
/// external ones (`externalLoadBalancers[].loadBalancerName`, by name).
fn classic_load_balancers<E>(
    group: &AutoscalingGroup,
    reference: impl Fn(&TaskKey) -> Result<E, RenderError>,
    literal: impl Fn(&str) -> E,
) -> Result<Vec<E>, RenderError> {
    let mut named: Vec<(String, E)> = Vec::new();
    for balancer in &group.classic_load_balancers {
        named.push((balancer.key().name.clone(), reference(balancer.key())?));
    }
    for name in &group.load_balancer_names {
        named.push((name.clone(), literal(name)));
    }
    named.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(named.into_iter().map(|(_, e)| e).collect())
}

/// The metrics kops enables on every group.
const ENABLED_METRICS: [&str; 8] = [
    "GroupDesiredCapacity",
    "GroupInServiceInstances",
    "GroupMaxSize",
    "GroupMinSize",
    "GroupPendingInstances",
    "GroupStandbyInstances",
    "GroupTerminatingInstances",
    "GroupTotalInstances",
];

impl AwsResource for AutoscalingGroup {
    fn tf_type(&self) -> Option<&'static str> {
        Some("aws_autoscaling_group")
    }
    fn tf_name(&self) -> String {
        self.name.clone()
    }
    fn terraform(&self, tf: &mut Terraform, _: &Ctx<'_>) -> Result<(), RenderError> {
        let mut lt = Body::new();
        lt.set("id", id(tf, self.launch_template.key())?).set(
            "version",
            tf.reference(self.launch_template.key(), "latest_version")?,
        );
        let mut subnets = Vec::new();
        for s in &self.subnets {
            subnets.push(id(tf, s.key())?);
        }
        let mut b = Body::new();
        b.set(
            "enabled_metrics",
            Expr::List(ENABLED_METRICS.iter().map(|m| Expr::str(*m)).collect()),
        )
        .block("launch_template", lt);
        let balancers = classic_load_balancers(self, |key| id(tf, key), |n| Expr::str(n))?;
        if !balancers.is_empty() {
            b.set("load_balancers", Expr::List(balancers));
        }
        b.set("max_instance_lifetime", self.max_instance_lifetime)
            .set("max_size", self.max_size)
            .set("metrics_granularity", "1Minute")
            .set("min_size", self.min_size)
            .set("name", &self.name)
            .set("protect_from_scale_in", false)
            .set("vpc_zone_identifier", Expr::List(subnets));
        if !self.suspended_processes.is_empty() {
            b.set(
                "suspended_processes",
                Expr::List(self.suspended_processes.iter().map(Expr::from).collect()),
            );
        }
        if !self.target_groups.is_empty() {
            let mut arns = Vec::new();
            for t in &self.target_groups {
                arns.push(id(tf, t.key())?);
            }
            b.set("target_group_arns", Expr::List(arns));
        }
        for (key, value) in &self.tags {
            let mut tag = Body::new();
            tag.set("key", key)
                .set("propagate_at_launch", true)
                .set("value", value);
            b.block("tag", tag);
        }
        tf.resource("aws_autoscaling_group", &self.name, b);
        Ok(())
    }
    fn cloudformation(&self, cf: &mut CloudFormation, _: &Ctx<'_>) -> Result<(), RenderError> {
        let mut subnets = Vec::new();
        for s in &self.subnets {
            subnets.push(cf.reference(s.key())?);
        }
        let mut props = vec![
            ("AutoScalingGroupName", Json::str(&self.name)),
            (
                "LaunchTemplate",
                Json::obj([
                    (
                        "LaunchTemplateId",
                        cf.reference(self.launch_template.key())?,
                    ),
                    (
                        "Version",
                        cf.attribute(self.launch_template.key(), "LatestVersionNumber")?,
                    ),
                ]),
            ),
            ("MaxSize", Json::str(self.max_size.to_string())),
            ("MinSize", Json::str(self.min_size.to_string())),
            ("VPCZoneIdentifier", Json::Array(subnets)),
            (
                "MetricsCollection",
                Json::Array(vec![Json::obj([
                    ("Granularity", Json::str("1Minute")),
                    ("Metrics", Json::strs(ENABLED_METRICS)),
                ])]),
            ),
            (
                "Tags",
                Json::Array(
                    self.tags
                        .iter()
                        .map(|(k, v)| {
                            Json::obj([
                                ("Key", Json::str(k)),
                                ("Value", Json::str(v)),
                                ("PropagateAtLaunch", Json::Bool(true)),
                            ])
                        })
                        .collect(),
                ),
            ),
        ];
        if self.max_instance_lifetime > 0 {
            props.push((
                "MaxInstanceLifetime",
                Json::Int(self.max_instance_lifetime.into()),
            ));
        }
        if !self.target_groups.is_empty() {
            let mut arns = Vec::new();
            for t in &self.target_groups {
                arns.push(cf.reference(t.key())?);
            }
            props.push(("TargetGroupARNs", Json::Array(arns)));
        }
        let balancers = classic_load_balancers(self, |key| cf.reference(key), |n| Json::str(n))?;
        if !balancers.is_empty() {
            props.push(("LoadBalancerNames", Json::Array(balancers)));
        }
        cf.resource(
            "AWS::AutoScaling::AutoScalingGroup",
            &self.name,
            Json::obj(props),
        );
        Ok(())
    }
}

// ---------------------------------------------------------------- load balancers

impl AwsResource for NetworkLoadBalancer {
    fn tf_type(&self) -> Option<&'static str> {
        Some("aws_lb")
    }
    fn tf_name(&self) -> String {
        self.name.clone()
    }
    fn terraform(&self, tf: &mut Terraform, _: &Ctx<'_>) -> Result<(), RenderError> {
        let mut groups: Vec<Expr> = self
            .additional_security_groups
            .iter()
            .map(Expr::from)
            .collect();
        for g in &self.security_groups {
            groups.push(id(tf, g.key())?);
        }
        let attr = |k: &str| self.attributes.get(k).map(String::as_str);
        let mut b = Body::new();
        if let Some(bucket) = attr("access_logs.s3.bucket") {
            let mut logs = Body::new();
            logs.set("bucket", bucket)
                .set("enabled", attr("access_logs.s3.enabled") == Some("true"))
                .set_opt("prefix", attr("access_logs.s3.prefix"));
            b.block("access_logs", logs);
        }
        b.set(
            "enable_cross_zone_load_balancing",
            attr("load_balancing.cross_zone.enabled") == Some("true"),
        )
        .set("internal", self.scheme == "internal")
        .set("load_balancer_type", "network")
        .set_opt("ip_address_type", self.dualstack.then_some("dualstack"))
        .set("name", &self.load_balancer_name)
        .set("security_groups", Expr::List(groups))
        .set("tags", tags_expr(&self.tags));
        for s in &self.subnets {
            let mut mapping = Body::new();
            mapping
                .set_opt("allocation_id", self.subnet_allocations.get(&s.key().name))
                .set_opt(
                    "private_ipv4_address",
                    self.subnet_private_addresses.get(&s.key().name),
                )
                .set("subnet_id", id(tf, s.key())?);
            b.block("subnet_mapping", mapping);
        }
        tf.resource("aws_lb", &self.name, b);
        Ok(())
    }
    fn cloudformation(&self, cf: &mut CloudFormation, _: &Ctx<'_>) -> Result<(), RenderError> {
        let mut groups = Vec::new();
        for g in &self.security_groups {
            groups.push(cf.reference(g.key())?);
        }
        let mut subnets = Vec::new();
        for s in &self.subnets {
            subnets.push(cf.reference(s.key())?);
        }
        cf.resource(
            "AWS::ElasticLoadBalancingV2::LoadBalancer",
            &self.name,
            Json::obj([
                ("Name", Json::str(&self.load_balancer_name)),
                ("Scheme", Json::str(&self.scheme)),
                ("Type", Json::str("network")),
                (
                    "IpAddressType",
                    Json::str(if self.dualstack { "dualstack" } else { "ipv4" }),
                ),
                ("SecurityGroups", Json::Array(groups)),
                ("Subnets", Json::Array(subnets)),
                ("Tags", Json::tags(&self.tags)),
            ]),
        );
        Ok(())
    }
}

impl AwsResource for TargetGroup {
    fn tf_type(&self) -> Option<&'static str> {
        Some("aws_lb_target_group")
    }
    fn tf_name(&self) -> String {
        self.name.clone()
    }
    fn terraform(&self, tf: &mut Terraform, _: &Ctx<'_>) -> Result<(), RenderError> {
        let mut health = Body::new();
        health
            .set("healthy_threshold", self.healthy_threshold)
            .set("interval", self.health_check_interval)
            .set_opt("path", self.health_check_path.as_ref())
            .set("protocol", &self.health_check_protocol)
            .set("unhealthy_threshold", self.unhealthy_threshold);
        let mut b = Body::new();
        b.set(
            "connection_termination",
            self.connection_termination.to_string(),
        )
        .set(
            "deregistration_delay",
            self.deregistration_delay.to_string(),
        )
        .block("health_check", health)
        .set("name", &self.name)
        .set("port", self.port)
        .set("protocol", &self.protocol)
        .set("tags", tags_expr(&self.tags))
        .set("vpc_id", id(tf, self.vpc.key())?);
        tf.resource("aws_lb_target_group", &self.name, b);
        Ok(())
    }
    fn cloudformation(&self, cf: &mut CloudFormation, _: &Ctx<'_>) -> Result<(), RenderError> {
        let props: Vec<(&str, Json)> = self
            .health_check_path
            .iter()
            .map(|p| ("HealthCheckPath", Json::str(p)))
            .collect();
        cf.resource(
            "AWS::ElasticLoadBalancingV2::TargetGroup",
            &self.name,
            Json::obj(props.into_iter().chain([
                ("Name", Json::str(&self.name)),
                ("Port", Json::Int(self.port.into())),
                ("Protocol", Json::str(&self.protocol)),
                ("VpcId", cf.reference(self.vpc.key())?),
                (
                    "HealthCheckProtocol",
                    Json::str(&self.health_check_protocol),
                ),
                (
                    "HealthCheckIntervalSeconds",
                    Json::Int(self.health_check_interval.into()),
                ),
                (
                    "HealthyThresholdCount",
                    Json::Int(self.healthy_threshold.into()),
                ),
                (
                    "UnhealthyThresholdCount",
                    Json::Int(self.unhealthy_threshold.into()),
                ),
                (
                    "TargetGroupAttributes",
                    Json::Array(vec![
                        Json::obj([
                            ("Key", Json::str("deregistration_delay.timeout_seconds")),
                            ("Value", Json::str(self.deregistration_delay.to_string())),
                        ]),
                        Json::obj([
                            (
                                "Key",
                                Json::str("deregistration_delay.connection_termination.enabled"),
                            ),
                            ("Value", Json::str(self.connection_termination.to_string())),
                        ]),
                    ]),
                ),
                ("Tags", Json::tags(&self.tags)),
            ])),
        );
        Ok(())
    }
}

impl AwsResource for Listener {
    fn tf_type(&self) -> Option<&'static str> {
        Some("aws_lb_listener")
    }
    fn tf_name(&self) -> String {
        self.name.clone()
    }
    fn terraform(&self, tf: &mut Terraform, _: &Ctx<'_>) -> Result<(), RenderError> {
        let mut action = Body::new();
        action
            .set("target_group_arn", id(tf, self.target_group.key())?)
            .set("type", "forward");
        let mut b = Body::new();
        b.block("default_action", action)
            .set_opt("certificate_arn", self.certificate_arn.as_ref())
            .set("load_balancer_arn", id(tf, self.load_balancer.key())?)
            .set("port", self.port)
            .set("protocol", &self.protocol)
            .set_opt("ssl_policy", self.ssl_policy.as_ref());
        tf.resource("aws_lb_listener", &self.name, b);
        Ok(())
    }
    fn cloudformation(&self, cf: &mut CloudFormation, _: &Ctx<'_>) -> Result<(), RenderError> {
        cf.resource(
            "AWS::ElasticLoadBalancingV2::Listener",
            &self.name,
            Json::obj([
                (
                    "DefaultActions",
                    Json::Array(vec![Json::obj([
                        ("Type", Json::str("forward")),
                        ("TargetGroupArn", cf.reference(self.target_group.key())?),
                    ])]),
                ),
                ("LoadBalancerArn", cf.reference(self.load_balancer.key())?),
                ("Port", Json::Int(self.port.into())),
                ("Protocol", Json::str(&self.protocol)),
                (
                    "Certificates",
                    Json::Array(
                        self.certificate_arn
                            .iter()
                            .map(|arn| Json::obj([("CertificateArn", Json::str(arn))]))
                            .collect(),
                    ),
                ),
                (
                    "SslPolicy",
                    self.ssl_policy.as_ref().map_or(Json::Null, Json::str),
                ),
            ]),
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zone_named_in_a_policy_is_found_and_substituted() {
        let json = r#"{"Statement":[{"Resource":["arn:aws:route53:::hostedzone/example.com"]},{"Resource":["arn:aws:route53:::hostedzone/Z123","arn:aws:route53:::change/*"]}]}"#;
        assert_eq!(zone_by_name(json).as_deref(), Some("example.com"));
        assert_eq!(
            zone_by_name(r#"{"Resource":"arn:aws:route53:::hostedzone/Z123"}"#),
            None
        );
        let mut value: serde_json::Value = serde_json::from_str(json).unwrap();
        let parameter = Json::obj([("Ref", Json::str("HostedZoneexamplecom"))]);
        substitute_zone(&mut value, "example.com", &parameter);
        assert_eq!(
            value["Statement"][0]["Resource"][0],
            serde_json::json!({"Fn::Sub": [
                "arn:aws:route53:::hostedzone/${ZoneId}",
                {"ZoneId": {"Ref": "HostedZoneexamplecom"}}
            ]})
        );
        assert_eq!(
            value["Statement"][1]["Resource"][0],
            "arn:aws:route53:::hostedzone/Z123"
        );
    }
}
