//! The cluster's network on AWS, laid out as kops lays it out:
//!
//! - the VPC (`<cluster>`; or the existing `spec.networkID`, used as it is),
//!   kops' Amazon-provided IPv6 block and `spec.additionalNetworkCIDRs` on
//!   an owned VPC, and its DHCP options (`ec2.internal` in us-east-1,
//!   `<region>.compute.internal` elsewhere) with their association;
//! - the internet gateway (the shared VPC's own one when shared), the
//!   public route table (`<cluster>`, role `public`) with `0.0.0.0/0` and
//!   `::/0` to the gateway;
//! - one subnet per `spec.subnets` entry (`<name>.<cluster>`, tags
//!   `SubnetType` and the load-balancer roles; an entry with `id` is an
//!   existing subnet, only tagged: `kubernetes.io/cluster/<cluster>:
//!   shared` and, as kops does, the same type and load-balancer tags),
//!   owned public and utility subnets associated with the public table;
//! - per zone with private subnets: an elastic IP and a NAT gateway
//!   (`<zone>.<cluster>`) in the zone's utility subnet, unless the
//!   subnets' `egress` names one to use instead (`nat-`, `eipalloc-`, `i-`,
//!   `tgw-`, or `External` for egress managed elsewhere); a private route
//!   table (`private-<zone>.<cluster>`) with `0.0.0.0/0` to it and the
//!   subnets' `additionalRoutes`; the private subnets associated with it.
//!
//!
//! IPv6: a subnet's `ipv6CIDR` (written out, or `/64#<hex>` of the VPC's
//! Amazon-provided block) is given to it; a subnet without an IPv4 CIDR is
//! IPv6-native. DualStack subnets are private ones (same zone table).
//! An IPv6-only cluster (`nonMasqueradeCIDR` is IPv6) adds an egress-only
//! internet gateway and, in each private table, `::/0` to it and the NAT64
//! prefix `64:ff9b::/96` to the zone's NAT gateway; its public subnets with
//! IPv6 get a table per zone (`public-<zone>.<cluster>`) with NAT64 too.

use std::collections::BTreeMap;

use crate::context::{Tags, TAG_CLUSTER_PREFIX};
use crate::tasks::dhcp_options::DhcpOptions;
use crate::tasks::egress_only_internet_gateway::EgressOnlyInternetGateway;
use crate::tasks::elastic_ip::{ElasticIp, ExistingAddress};
use crate::tasks::internet_gateway::InternetGateway;
use crate::tasks::nat_gateway::NatGateway;
use crate::tasks::route::{Route, RouteTarget};
use crate::tasks::route_table::{RouteTable, TAG_KOPS_ROLE};
use crate::tasks::route_table_association::RouteTableAssociation;
use crate::tasks::subnet::{parse_relative_ipv6, Subnet, SubnetId};
use crate::tasks::vpc::{Vpc, VpcId};
use crate::tasks::vpc_amazon_ipv6_cidr_block::VpcAmazonIpv6CidrBlock;
use crate::tasks::vpc_cidr_block::VpcCidrBlock;
use crate::tasks::vpc_dhcp_options_association::VpcDhcpOptionsAssociation;
use crate::AwsContext;
use ipnet::Ipv4Net;
use kops_api::{ClusterSubnetSpec, SubnetType};
use kops_engine::{OutputRef, TaskGraph, TaskKey};

use kops_model::{Model, ModelError};

/// The tag telling load balancer controllers where public load balancers go.
pub const TAG_ROLE_ELB: &str = "kubernetes.io/role/elb";
/// The tag telling load balancer controllers where internal load balancers go.
pub const TAG_ROLE_INTERNAL_ELB: &str = "kubernetes.io/role/internal-elb";
/// The tag kops records a subnet's type in.
pub const TAG_SUBNET_TYPE: &str = "SubnetType";

/// The VPC's id, for every builder that places something in it.
pub fn vpc_ref(model: &Model<'_>) -> OutputRef<VpcId> {
    Vpc::id_ref(model.name())
}

/// The name of the subnet task (and owned subnet's `Name` tag) of the spec
/// subnet `subnet`: `<subnet>.<cluster>`.
pub fn subnet_name(model: &Model<'_>, subnet: &str) -> String {
    model.scoped(subnet)
}

/// The id of the spec subnet `subnet`, for load balancers and groups.
pub fn subnet_ref(model: &Model<'_>, subnet: &str) -> OutputRef<SubnetId> {
    Subnet::id_ref(&subnet_name(model, subnet))
}

/// How a zone's private subnets reach the internet (`spec.subnets[].egress`).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Egress {
    /// A NAT gateway kops creates, with a new elastic IP.
    Created,
    /// An existing NAT gateway.
    NatGateway(String),
    /// A NAT gateway kops creates with an existing elastic IP.
    ElasticIp(String),
    /// A NAT instance.
    Instance(String),
    /// A transit gateway.
    TransitGateway(String),
    /// Managed outside kops: no routes or associations for the subnet.
    External,
}

/// One `spec.subnets` entry, checked.
struct SubnetPlan<'a> {
    spec: &'a ClusterSubnetSpec,
    path: String,
    kind: SubnetType,
    zone: &'a str,
    egress: Egress,
    shared: bool,
}

impl SubnetPlan<'_> {
    fn unmanaged(&self) -> bool {
        self.egress == Egress::External
    }

    /// Private and DualStack subnets: behind the zone's NAT.
    fn is_private(&self) -> bool {
        matches!(self.kind, SubnetType::Private | SubnetType::DualStack)
    }

    fn ipv6_cidr(&self) -> Option<&str> {
        self.spec.ipv6_cidr.as_deref().filter(|c| !c.is_empty())
    }

    /// A public subnet with IPv6 in an IPv6-only cluster: its zone's own
    /// public table sends the NAT64 prefix to the zone's NAT gateway.
    fn nat64_public(&self, ipv6_only: bool) -> bool {
        ipv6_only && self.kind == SubnetType::Public && self.ipv6_cidr().is_some()
    }
}

fn spec_error(
    path: impl Into<String>,
    message: impl Into<String>,
    hint: impl Into<String>,
) -> ModelError {
    ModelError::Spec {
        path: path.into(),
        message: message.into(),
        hint: hint.into(),
    }
}

fn parse_egress(path: &str, egress: Option<&str>) -> Result<Egress, ModelError> {
    let Some(egress) = egress.filter(|e| !e.is_empty()) else {
        return Ok(Egress::Created);
    };
    let id = egress.to_string();
    Ok(match egress.split_once('-').map(|(prefix, _)| prefix) {
        _ if egress == "External" => Egress::External,
        Some("nat") => Egress::NatGateway(id),
        Some("eipalloc") => Egress::ElasticIp(id),
        Some("i") => Egress::Instance(id),
        Some("tgw") => Egress::TransitGateway(id),
        _ => {
            return Err(spec_error(
                format!("{path}.egress"),
                format!("egress `{egress}` is not supported"),
                "use a NAT gateway (`nat-...`), an elastic IP (`eipalloc-...`), a NAT instance (`i-...`), a transit gateway (`tgw-...`) or `External`",
            ))
        }
    })
}

fn plan_subnets<'a>(model: &Model<'a>) -> Result<Vec<SubnetPlan<'a>>, ModelError> {
    let subnets = model.cluster.spec.subnets.as_deref().unwrap_or_default();
    if subnets.is_empty() {
        return Err(spec_error(
            "spec.subnets",
            "the cluster has no subnets",
            "add at least one subnet with a name, type, zone and CIDR",
        ));
    }
    subnets
        .iter()
        .enumerate()
        .map(|(i, spec)| {
            let path = format!("spec.subnets[{i}]");
            let kind = spec.subnet_type().ok_or_else(|| {
                spec_error(
                    format!("{path}.type"),
                    format!("subnet `{}` has type `{}`", spec.name, spec.kind.as_deref().unwrap_or("")),
                    "use `Public`, `Private` or `Utility`",
                )
            })?;
            let shared = spec.id.as_deref().is_some_and(|id| !id.is_empty());
            // An existing subnet's zone is its own: it may be left out.
            let zone = spec.zone.as_deref().unwrap_or_default();
            if zone.is_empty() && !shared {
                return Err(spec_error(
                    format!("{path}.zone"),
                    format!("subnet `{}` has no zone", spec.name),
                    "set the availability zone, e.g. `us-east-1a`",
                ));
            }
            let ipv6 = spec.ipv6_cidr.as_deref().filter(|c| !c.is_empty());
            if let Some(ipv6) = ipv6 {
                let absolute = ipv6.parse::<ipnet::Ipv6Net>().is_ok();
                if !absolute && parse_relative_ipv6(ipv6).is_none() {
                    return Err(spec_error(
                        format!("{path}.ipv6CIDR"),
                        format!("`{ipv6}` is neither an IPv6 CIDR nor `/<size>#<index>`"),
                        "write it like `2001:db8:0:111::/64`, or `/64#1` for the second /64 of the VPC's IPv6 block",
                    ));
                }
            }
            if kind == SubnetType::DualStack && !shared && (ipv6.is_none() || spec.cidr.as_deref().is_none_or(str::is_empty)) {
                return Err(spec_error(
                    path,
                    format!("the DualStack subnet `{}` needs both cidr and ipv6CIDR", spec.name),
                    "set an IPv4 cidr and an ipv6CIDR (e.g. `/64#3`), or use type Private",
                ));
            }
            if !shared && spec.cidr.as_deref().is_none_or(str::is_empty) && ipv6.is_none() {
                return Err(spec_error(
                    format!("{path}.cidr"),
                    format!("subnet `{}` has no CIDR", spec.name),
                    "set a CIDR inside spec.networkCIDR (or an ipv6CIDR), or the `id` of an existing subnet",
                ));
            }
            let egress = parse_egress(&path, spec.egress.as_deref())?;
            Ok(SubnetPlan {
                spec,
                path,
                kind,
                zone,
                egress,
                shared,
            })
        })
        .collect()
}

/// The tags kops puts on a resource it uses but does not own.
fn shared_tags(model: &Model<'_>) -> Tags {
    Tags::from([(
        format!("{TAG_CLUSTER_PREFIX}{}", model.name()),
        "shared".to_string(),
    )])
}

fn flag(extra: &kops_api::meta::Extra, key: &str) -> Option<bool> {
    extra.get(key).and_then(serde_json::Value::as_bool)
}

/// The region of the cluster: that of its subnets' zones.
fn region(model: &Model<'_>, subnets: &[SubnetPlan<'_>]) -> Result<String, ModelError> {
    subnets
        .iter()
        .find_map(|s| kops_api::zones::aws_region(s.zone))
        .ok_or_else(|| {
            spec_error(
                "spec.subnets[].zone",
                format!("the zones of `{}` name no AWS region", model.name()),
                "use AWS availability zones, e.g. `us-east-1a`",
            )
        })
}

/// The extra VPC CIDR block (a `VPCCIDRBlock` task) holding `cidr`, if any.
fn cidr_block_of(
    path: &str,
    cidr: &str,
    blocks: &[(String, Ipv4Net)],
) -> Result<Option<String>, ModelError> {
    let subnet: Ipv4Net = cidr.parse().map_err(|_| {
        spec_error(
            format!("{path}.cidr"),
            format!("`{cidr}` is not an IPv4 CIDR"),
            "write it like `172.20.32.0/19`",
        )
    })?;
    Ok(blocks
        .iter()
        .find(|(_, block)| block.contains(&subnet.network()))
        .map(|(text, _)| text.clone()))
}

/// Adds the network tasks.
pub fn build(model: &Model<'_>, graph: &mut TaskGraph<AwsContext>) -> Result<(), ModelError> {
    let spec = &model.cluster.spec;
    let cluster = model.name();
    let ipv6_only = model.ipv6_only();
    let subnets = plan_subnets(model)?;
    let shared_vpc = spec.network_id.as_deref().is_some_and(|id| !id.is_empty());
    let vpc = vpc_ref(model);

    // The VPC, its extra blocks and DHCP options.
    let network_cidr = spec.network_cidr.clone().unwrap_or_default();
    if !shared_vpc && network_cidr.is_empty() {
        return Err(spec_error(
            "spec.networkCIDR",
            "the cluster's VPC has no CIDR",
            "set networkCIDR (e.g. 172.20.0.0/16), or networkID to use an existing VPC",
        ));
    }
    graph.add(Vpc {
        name: cluster.to_string(),
        cidr: network_cidr,
        enable_dns_hostnames: true,
        enable_dns_support: true,
        // kops does not tag a shared VPC: it is known by its id.
        tags: if shared_vpc {
            Tags::new()
        } else {
            model.tags(cluster, &[])
        },
        shared_id: spec.network_id.clone().filter(|_| shared_vpc),
    })?;
    let mut blocks = Vec::new();
    if !shared_vpc {
        graph.add(VpcAmazonIpv6CidrBlock {
            name: VpcAmazonIpv6CidrBlock::NAME.to_string(),
            vpc: vpc.clone(),
        })?;
        for (i, cidr) in spec.additional_network_cidrs.iter().flatten().enumerate() {
            let block: Ipv4Net = cidr.parse().map_err(|_| {
                spec_error(
                    format!("spec.additionalNetworkCIDRs[{i}]"),
                    format!("`{cidr}` is not an IPv4 CIDR"),
                    "write it like `10.1.0.0/16`",
                )
            })?;
            graph.add(VpcCidrBlock {
                vpc: vpc.clone(),
                cidr: cidr.clone(),
            })?;
            blocks.push((cidr.clone(), block));
        }
        let region = region(model, &subnets)?;
        graph.add(DhcpOptions {
            name: cluster.to_string(),
            domain_name: DhcpOptions::domain_name_for(&region),
            domain_name_servers: vec!["AmazonProvidedDNS".to_string()],
            tags: model.tags(cluster, &[]),
        })?;
        graph.add(VpcDhcpOptionsAssociation {
            name: cluster.to_string(),
            vpc: vpc.clone(),
            dhcp_options: DhcpOptions::id_ref(cluster),
        })?;
    }

    // The internet gateway and the public route table.
    let all_unmanaged = subnets.iter().all(SubnetPlan::unmanaged);
    let all_shared = subnets.iter().all(|s| s.shared);
    let public_table = RouteTable::id_ref(cluster);
    let gateway = InternetGateway::id_ref(cluster);
    if !all_unmanaged {
        graph.add(InternetGateway {
            name: cluster.to_string(),
            vpc: vpc.clone(),
            shared: shared_vpc,
            tags: if shared_vpc {
                shared_tags(model)
            } else {
                model.tags(cluster, &[])
            },
        })?;
        if !all_shared {
            graph.add(RouteTable {
                name: cluster.to_string(),
                vpc: vpc.clone(),
                tags: model.tags(cluster, &[(TAG_KOPS_ROLE, "public")]),
            })?;
            for destination in ["0.0.0.0/0", "::/0"] {
                graph.add(Route {
                    name: destination.to_string(),
                    route_table: public_table.clone(),
                    destination: destination.to_string(),
                    target: RouteTarget::InternetGateway(gateway.clone()),
                })?;
            }
        }
    }

    // The subnets.
    let tag_subnets = !flag(&spec.extra, "DisableSubnetTags").unwrap_or(false);
    let any_private = subnets.iter().any(SubnetPlan::is_private);
    let dual_stack_zones: std::collections::BTreeSet<&str> = subnets
        .iter()
        .filter(|s| s.kind == SubnetType::DualStack)
        .map(|s| s.zone)
        .collect();
    // Subnets name their instances' hostnames after the instance (resource
    // names) whenever the external cloud controller runs, unless the cluster
    // asks for IP-based node names. kops runs the external controller on
    // every AWS cluster (its options builder fills in
    // `cloudControllerManager` for AWS whatever the spec says), so writing
    // the field is not what turns it on.
    let external_ccm = spec.cloud_controller_manager.is_some()
        || matches!(spec.cloud_provider.as_deref(), None | Some("" | "aws"));
    let resource_based_naming = external_ccm.then(|| {
        let ip_based = spec
            .cloud_config
            .as_ref()
            .and_then(|c| flag(&c.extra, "useIPBasedNodeNames"))
            .unwrap_or(false);
        !ip_based
    });
    for subnet in &subnets {
        let name = subnet_name(model, &subnet.spec.name);
        if !tag_subnets && !subnet.shared {
            return Err(spec_error(
                "spec.DisableSubnetTags",
                format!("subnet `{}` would be created without tags", subnet.spec.name),
                "kops finds the subnets it creates by their tags: disable subnet tags only with existing subnets (`id`)",
            ));
        }
        let mut tags = Tags::new();
        if tag_subnets {
            tags = if subnet.shared {
                shared_tags(model)
            } else {
                model.tags(&name, &[])
            };
            tags.insert(
                TAG_SUBNET_TYPE.to_string(),
                subnet.kind.as_str().to_string(),
            );
            match subnet.kind {
                SubnetType::Public | SubnetType::Utility => {
                    tags.insert(TAG_ROLE_ELB.to_string(), "1".to_string());
                    // Without private subnets, internal load balancers go
                    // here too; not in IPv6-only clusters, whose public
                    // subnets route ::/0 to the internet gateway, which
                    // AWS refuses for internal load balancers.
                    if !any_private && !ipv6_only {
                        tags.insert(TAG_ROLE_INTERNAL_ELB.to_string(), "1".to_string());
                    }
                }
                SubnetType::DualStack => {
                    tags.insert(TAG_ROLE_INTERNAL_ELB.to_string(), "1".to_string());
                }
                // DualStack subnets of the zone take the internal ones.
                SubnetType::Private => {
                    if !dual_stack_zones.contains(subnet.zone) {
                        tags.insert(TAG_ROLE_INTERNAL_ELB.to_string(), "1".to_string());
                    }
                }
            }
            for group in model.groups {
                let karpenter = group.spec.manager.as_deref() == Some("Karpenter");
                let uses = group
                    .spec
                    .subnets
                    .iter()
                    .flatten()
                    .any(|s| *s == subnet.spec.name);
                if karpenter && uses {
                    tags.insert(
                        format!("kops.k8s.io/instance-group/{}", group.name()),
                        "true".to_string(),
                    );
                }
            }
        }
        let cidr = subnet.spec.cidr.clone().filter(|c| !c.is_empty());
        let vpc_cidr_block = match (&cidr, shared_vpc) {
            (Some(cidr), false) => {
                cidr_block_of(&subnet.path, cidr, &blocks)?.map(|b| VpcCidrBlock::key_for(&b))
            }
            _ => None,
        };
        graph.add(Subnet {
            name: name.clone(),
            vpc: vpc.clone(),
            cidr,
            availability_zone: subnet.zone.to_string(),
            tags,
            resource_based_naming: resource_based_naming.filter(|_| !subnet.shared),
            shared_id: subnet.spec.id.clone().filter(|_| subnet.shared),
            vpc_cidr_block,
            ipv6_cidr: subnet.ipv6_cidr().map(str::to_string),
            vpc_ipv6_block: (subnet.ipv6_cidr().is_some() && !shared_vpc)
                .then(|| TaskKey::new(VpcAmazonIpv6CidrBlock::KIND, VpcAmazonIpv6CidrBlock::NAME)),
        })?;
        if subnet.shared || subnet.unmanaged() {
            continue;
        }
        match subnet.kind {
            _ if subnet.nat64_public(ipv6_only) => graph.add(RouteTableAssociation {
                name: model.scoped(&format!("public-{}", subnet.spec.name)),
                route_table: RouteTable::id_ref(&model.scoped(&format!("public-{}", subnet.zone))),
                subnet: Subnet::id_ref(&name),
            })?,
            SubnetType::Public | SubnetType::Utility => graph.add(RouteTableAssociation {
                name: name.clone(),
                route_table: public_table.clone(),
                subnet: Subnet::id_ref(&name),
            })?,
            SubnetType::Private | SubnetType::DualStack => graph.add(RouteTableAssociation {
                name: model.scoped(&format!("private-{}", subnet.spec.name)),
                route_table: RouteTable::id_ref(&model.scoped(&format!("private-{}", subnet.zone))),
                subnet: Subnet::id_ref(&name),
            })?,
        }
    }

    // The IPv6 egress of an IPv6-only cluster's private subnets.
    let managed_private = subnets.iter().any(|s| s.is_private() && !s.unmanaged());
    if ipv6_only && managed_private {
        graph.add(EgressOnlyInternetGateway {
            name: cluster.to_string(),
            vpc: vpc.clone(),
            shared: shared_vpc,
            tags: if shared_vpc {
                shared_tags(model)
            } else {
                model.tags(cluster, &[])
            },
        })?;
    }

    // Egress of the private subnets (and NAT64 of IPv6 public ones), per zone.
    let mut zones: BTreeMap<&str, Vec<&SubnetPlan<'_>>> = BTreeMap::new();
    for subnet in &subnets {
        let nat = subnet.is_private() || subnet.nat64_public(ipv6_only);
        if nat && !subnet.shared && !subnet.unmanaged() {
            zones.entry(subnet.zone).or_default().push(subnet);
        }
    }
    for (zone, nat_subnets) in zones {
        build_zone_egress(model, graph, &subnets, zone, &nat_subnets)?;
    }
    Ok(())
}

/// The NAT gateway (or the egress named in the spec), private route table
/// and routes of `zone`, whose owned subnets behind NAT are `nat_subnets`
/// (private and DualStack ones; IPv6 public ones of IPv6-only clusters).
fn build_zone_egress(
    model: &Model<'_>,
    graph: &mut TaskGraph<AwsContext>,
    subnets: &[SubnetPlan<'_>],
    zone: &str,
    nat_subnets: &[&SubnetPlan<'_>],
) -> Result<(), ModelError> {
    let first = nat_subnets[0];
    for other in &nat_subnets[1..] {
        if other.egress != first.egress {
            return Err(spec_error(
                format!("{}.egress", other.path),
                format!("the private subnets of zone `{zone}` have different egress"),
                "give every private subnet of a zone the same egress",
            ));
        }
        if other.spec.public_ip != first.spec.public_ip {
            return Err(spec_error(
                format!("{}.publicIP", other.path),
                format!("the private subnets of zone `{zone}` have different publicIP"),
                "give every private subnet of a zone the same publicIP",
            ));
        }
    }
    let ipv6_only = model.ipv6_only();
    let have_private = nat_subnets.iter().any(|s| s.is_private());
    let have_public_ipv6 = nat_subnets.iter().any(|s| s.nat64_public(ipv6_only));
    // The NAT gateway sits in the zone's utility subnet, or in its public
    // one when the zone has only public subnets (NAT64 of IPv6-only ones).
    let nat_home_kind = if have_private {
        SubnetType::Utility
    } else {
        SubnetType::Public
    };
    let nat_home: Vec<&SubnetPlan<'_>> = subnets
        .iter()
        .filter(|s| s.zone == zone && s.kind == nat_home_kind)
        .collect();
    let scoped_zone = model.scoped(zone);
    let nat = NatGateway::id_ref(&scoped_zone);
    let nat_in_home = |graph: &mut TaskGraph<AwsContext>,
                       address: OutputRef<_>|
     -> Result<RouteTarget, ModelError> {
        let [home] = nat_home.as_slice() else {
            let kind = nat_home_kind.as_str();
            return Err(spec_error(
                format!("{}.zone", first.path),
                format!(
                    "zone `{zone}` has {} {} subnets, its NAT gateway needs one",
                    nat_home.len(),
                    kind.to_lowercase()
                ),
                format!("add one subnet of type {kind} in `{zone}` (e.g. `utility-{zone}`), or set the private subnets' egress"),
            ));
        };
        graph.add(NatGateway {
            name: scoped_zone.clone(),
            subnet: Some(subnet_ref(model, &home.spec.name)),
            elastic_ip: Some(address),
            shared_id: None,
            tags: model.tags(&scoped_zone, &[]),
        })?;
        Ok(RouteTarget::NatGateway(nat.clone()))
    };
    let target = match &first.egress {
        Egress::Created => {
            let existing = first.spec.public_ip.clone().filter(|ip| !ip.is_empty());
            graph.add(ElasticIp {
                name: scoped_zone.clone(),
                tags: if existing.is_some() {
                    shared_tags(model)
                } else {
                    model.tags(&scoped_zone, &[])
                },
                existing: existing.map(ExistingAddress::PublicIp),
            })?;
            nat_in_home(graph, ElasticIp::id_ref(&scoped_zone))?
        }
        Egress::ElasticIp(id) => {
            graph.add(ElasticIp {
                name: scoped_zone.clone(),
                tags: shared_tags(model),
                existing: Some(ExistingAddress::AllocationId(id.clone())),
            })?;
            nat_in_home(graph, ElasticIp::id_ref(&scoped_zone))?
        }
        Egress::NatGateway(id) => {
            graph.add(NatGateway {
                name: scoped_zone.clone(),
                subnet: None,
                elastic_ip: None,
                shared_id: Some(id.clone()),
                tags: shared_tags(model),
            })?;
            RouteTarget::NatGateway(nat)
        }
        Egress::Instance(id) => RouteTarget::Instance(id.clone()),
        Egress::TransitGateway(id) => RouteTarget::TransitGateway(id.clone()),
        Egress::External => return Ok(()),
    };
    // NAT64 (IPv6-only clusters) goes where IPv4 goes, but a NAT instance
    // does not translate it.
    let nat64 = if ipv6_only {
        if matches!(target, RouteTarget::Instance(_)) {
            return Err(spec_error(
                format!("{}.egress", first.path),
                format!("zone `{zone}` of an IPv6-only cluster egresses through a NAT instance, which does not do NAT64"),
                "use a NAT gateway (leave egress empty, or `nat-...`/`eipalloc-...`) or a transit gateway",
            ));
        }
        Some(target.clone())
    } else {
        None
    };

    if have_private {
        let table_name = model.scoped(&format!("private-{zone}"));
        let role = format!("private-{zone}");
        graph.add(RouteTable {
            name: table_name.clone(),
            vpc: vpc_ref(model),
            tags: model.tags(&table_name, &[(TAG_KOPS_ROLE, &role)]),
        })?;
        let table = RouteTable::id_ref(&table_name);
        graph.add(Route {
            name: format!("private-{zone}-0.0.0.0/0"),
            route_table: table.clone(),
            destination: "0.0.0.0/0".to_string(),
            target,
        })?;
        if let Some(nat64) = &nat64 {
            graph.add(Route {
                name: format!("private-{zone}-{NAT64_PREFIX}"),
                route_table: table.clone(),
                destination: NAT64_PREFIX.to_string(),
                target: nat64.clone(),
            })?;
            graph.add(Route {
                name: format!("private-{zone}-::/0"),
                route_table: table.clone(),
                destination: "::/0".to_string(),
                target: RouteTarget::EgressOnlyGateway(EgressOnlyInternetGateway::id_ref(
                    model.name(),
                )),
            })?;
        }
        // Extra routes of the zone's private subnets (shared ones included, as kops does).
        let with_routes = subnets.iter().filter(|s| s.zone == zone && s.is_private());
        for subnet in with_routes {
            for (i, route) in subnet.spec.additional_routes.iter().flatten().enumerate() {
                let target = RouteTarget::from_id(&route.target).ok_or_else(|| {
                    spec_error(
                        format!("{}.additionalRoutes[{i}].target", subnet.path),
                        format!("route target `{}` is not supported", route.target),
                        "use a peering connection (`pcx-`), instance (`i-`), NAT gateway (`nat-`), transit gateway (`tgw-`), internet gateway (`igw-`) or egress-only internet gateway (`eigw-`)",
                    )
                })?;
                graph.add(Route {
                    name: format!("{}.{}", subnet.spec.name, route.cidr),
                    route_table: table.clone(),
                    destination: route.cidr.clone(),
                    target,
                })?;
            }
        }
    }

    if let (true, Some(nat64)) = (have_public_ipv6, nat64) {
        let table_name = model.scoped(&format!("public-{zone}"));
        let role = format!("public-{zone}");
        graph.add(RouteTable {
            name: table_name.clone(),
            vpc: vpc_ref(model),
            tags: model.tags(&table_name, &[(TAG_KOPS_ROLE, &role)]),
        })?;
        let table = RouteTable::id_ref(&table_name);
        let gateway = InternetGateway::id_ref(model.name());
        for destination in ["0.0.0.0/0", "::/0"] {
            graph.add(Route {
                name: format!("public-{zone}-{destination}"),
                route_table: table.clone(),
                destination: destination.to_string(),
                target: RouteTarget::InternetGateway(gateway.clone()),
            })?;
        }
        graph.add(Route {
            name: format!("public-{zone}-{NAT64_PREFIX}"),
            route_table: table,
            destination: NAT64_PREFIX.to_string(),
            target: nat64,
        })?;
    }
    Ok(())
}

/// The well-known NAT64 prefix (RFC 6052) that DNS64 answers map IPv4
/// addresses into.
const NAT64_PREFIX: &str = "64:ff9b::/96";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tasks::subnet::Subnet;
    use kops_api::Cluster;

    fn cluster(subnets: &str, extra: &str) -> Cluster {
        let yaml = format!(
            "apiVersion: kops.k8s.io/v1alpha2\nkind: Cluster\nmetadata:\n  name: example.com\n\
             spec:\n  networkCIDR: 172.20.0.0/16\n{extra}  subnets:\n{subnets}"
        );
        match kops_api::parse_objects("test", &yaml).unwrap().remove(0) {
            kops_api::Object::Cluster(c) => *c,
            other => panic!("{other:?}"),
        }
    }

    fn build_for(cluster: &Cluster) -> Result<TaskGraph<AwsContext>, ModelError> {
        let model = Model {
            config_base: "memfs://example",
            ..Model::of_cluster(cluster)
        };
        let mut graph = TaskGraph::new();
        build(&model, &mut graph)?;
        graph.validate()?;
        Ok(graph)
    }

    const PRIVATE_A: &str =
        "  - {name: us-east-1a, type: Private, zone: us-east-1a, cidr: 172.20.32.0/19}\n";
    const UTILITY_A: &str =
        "  - {name: utility-us-east-1a, type: Utility, zone: us-east-1a, cidr: 172.20.4.0/22}\n";

    #[test]
    fn a_private_zone_without_a_utility_subnet_is_refused() {
        let error = build_for(&cluster(PRIVATE_A, "")).unwrap_err().to_string();
        assert!(
            error.starts_with("spec.subnets[0].zone: zone `us-east-1a` has 0 utility subnets"),
            "{error}"
        );
    }

    #[test]
    fn egress_replaces_the_nat_gateway() {
        let with = |egress: &str| {
            let private = PRIVATE_A.replace('}', &format!(", egress: {egress}}}"));
            build_for(&cluster(&format!("{private}{UTILITY_A}"), ""))
        };
        let keys = |graph: &TaskGraph<AwsContext>| -> Vec<String> {
            graph
                .iter()
                .map(|(k, _)| k.to_string())
                .filter(|k| k.starts_with("NatGateway") || k.starts_with("ElasticIP"))
                .collect()
        };
        assert!(keys(&with("i-0123").unwrap()).is_empty());
        assert!(keys(&with("tgw-0123").unwrap()).is_empty());
        assert_eq!(
            keys(&with("nat-0123").unwrap()),
            ["NatGateway/us-east-1a.example.com"]
        );
        let external = with("External").unwrap();
        assert!(keys(&external).is_empty());
        assert!(!external.contains(&kops_engine::TaskKey::new(
            "RouteTable",
            "private-us-east-1a.example.com"
        )));
        let error = with("vgw-0123").unwrap_err().to_string();
        assert!(
            error.starts_with("spec.subnets[0].egress: egress `vgw-0123` is not supported"),
            "{error}"
        );
    }

    fn keys_of(graph: &TaskGraph<AwsContext>, kind: &str) -> Vec<String> {
        graph
            .iter()
            .filter(|(k, _)| k.kind == kind)
            .map(|(k, _)| k.name.clone())
            .collect()
    }

    const IPV6_ONLY: &str = "  nonMasqueradeCIDR: ::/0\n";

    #[test]
    fn an_ipv6_only_cluster_gets_egress_only_gateway_and_nat64() {
        let subnets = "  - {name: a, type: Private, zone: us-east-1a, ipv6CIDR: /64#1}\n\
                       \x20 - {name: d, type: DualStack, zone: us-east-1a, cidr: 172.20.32.0/19, ipv6CIDR: /64#2}\n\
                       \x20 - {name: u, type: Utility, zone: us-east-1a, cidr: 172.20.0.0/22, ipv6CIDR: /64#3}\n";
        let graph = build_for(&cluster(subnets, IPV6_ONLY)).unwrap();
        assert_eq!(
            keys_of(&graph, "EgressOnlyInternetGateway"),
            ["example.com"]
        );
        assert_eq!(
            keys_of(&graph, "Route"),
            [
                "0.0.0.0/0",
                "::/0",
                "private-us-east-1a-0.0.0.0/0",
                "private-us-east-1a-64:ff9b::/96",
                "private-us-east-1a-::/0",
            ]
        );
        assert_eq!(
            keys_of(&graph, "RouteTableAssociation"),
            [
                "private-a.example.com",
                "private-d.example.com",
                "u.example.com"
            ]
        );
        let subnet = |name: &str| {
            graph
                .get(&kops_engine::TaskKey::new("Subnet", name))
                .unwrap()
                .as_any()
                .downcast_ref::<Subnet>()
                .unwrap()
                .clone()
        };
        let native = subnet("a.example.com");
        assert_eq!(native.cidr, None);
        assert_eq!(native.ipv6_cidr.as_deref(), Some("/64#1"));
        assert!(native.vpc_ipv6_block.is_some());
        // The zone's DualStack subnet takes the internal load balancers.
        assert!(!native.tags.contains_key(TAG_ROLE_INTERNAL_ELB));
        assert!(subnet("d.example.com")
            .tags
            .contains_key(TAG_ROLE_INTERNAL_ELB));
    }

    #[test]
    fn ipv6_public_subnets_get_a_zone_table_with_nat64() {
        let subnets = "  - {name: p, type: Public, zone: us-east-1a, cidr: 172.20.32.0/19, ipv6CIDR: 2001:db8::/64}\n";
        let graph = build_for(&cluster(subnets, IPV6_ONLY)).unwrap();
        assert_eq!(
            keys_of(&graph, "RouteTable"),
            ["example.com", "public-us-east-1a.example.com"]
        );
        assert_eq!(
            keys_of(&graph, "RouteTableAssociation"),
            ["public-p.example.com"]
        );
        assert!(keys_of(&graph, "Route").contains(&"public-us-east-1a-64:ff9b::/96".to_string()));
        assert_eq!(keys_of(&graph, "NatGateway"), ["us-east-1a.example.com"]);
        // No private subnets: no egress-only gateway.
        assert!(keys_of(&graph, "EgressOnlyInternetGateway").is_empty());
        // A dual-stack cluster (IPv4 pods) keeps one public table.
        let graph = build_for(&cluster(subnets, "")).unwrap();
        assert_eq!(keys_of(&graph, "RouteTable"), ["example.com"]);
        assert!(keys_of(&graph, "NatGateway").is_empty());
    }

    #[test]
    fn bad_ipv6_subnets_are_refused_with_the_field() {
        let error = |subnets: &str, extra: &str| {
            build_for(&cluster(subnets, extra)).unwrap_err().to_string()
        };
        let e = error(
            "  - {name: a, type: Public, zone: us-east-1a, cidr: 172.20.32.0/19, ipv6CIDR: /64}\n",
            "",
        );
        assert!(
            e.starts_with("spec.subnets[0].ipv6CIDR: `/64` is neither"),
            "{e}"
        );
        let e = error(
            "  - {name: a, type: DualStack, zone: us-east-1a, ipv6CIDR: /64#1}\n",
            "",
        );
        assert!(e.contains("needs both cidr and ipv6CIDR"), "{e}");
        let e = error(
            "  - {name: a, type: Private, zone: us-east-1a, ipv6CIDR: /64#1, egress: i-0123}\n",
            IPV6_ONLY,
        );
        assert!(e.contains("does not do NAT64"), "{e}");
    }

    #[test]
    fn resource_based_naming_follows_kops_default_cloud_controller() {
        let public = "  - {name: a, type: Public, zone: us-east-1a, cidr: 172.20.32.0/19}\n";
        let naming = |extra: &str| {
            let graph = build_for(&cluster(public, extra)).unwrap();
            let task = graph
                .get(&kops_engine::TaskKey::new("Subnet", "a.example.com"))
                .unwrap();
            task.as_any()
                .downcast_ref::<Subnet>()
                .unwrap()
                .resource_based_naming
        };
        // kops turns the external cloud controller on for every AWS
        // cluster: resource names whether or not the spec writes it.
        assert_eq!(naming(""), Some(true));
        assert_eq!(naming("  cloudProvider: aws\n"), Some(true));
        assert_eq!(
            naming("  cloudProvider: aws\n  cloudConfig:\n    useIPBasedNodeNames: true\n"),
            Some(false)
        );
        assert_eq!(naming("  cloudControllerManager: {}\n"), Some(true));
        assert_eq!(
            naming("  cloudControllerManager: {}\n  cloudConfig:\n    useIPBasedNodeNames: true\n"),
            Some(false)
        );
    }

    #[test]
    fn dhcp_domain_follows_the_region() {
        assert_eq!(DhcpOptions::domain_name_for("us-east-1"), "ec2.internal");
        assert_eq!(
            DhcpOptions::domain_name_for("eu-west-1"),
            "eu-west-1.compute.internal"
        );
    }
}
