//! A subnet of the cluster. Owned: created with its CIDR, zone and kops'
//! tags (`SubnetType`, the load-balancer role tags), and with resource-based
//! hostnames when the cluster runs the external cloud controller manager.
//! Shared (`spec.subnets[].id`): found by id and only tagged; its CIDR, zone
//! and attributes are the owner's.
//!
//! IPv6: a subnet with `ipv6CIDR` gets that block (written out, or
//! `/<size>#<hex index>` inside the VPC's Amazon-provided block, resolved
//! when the subnet is made) and hands an IPv6 address to every instance. A
//! subnet without an IPv4 CIDR is IPv6-native, with DNS64 on so its
//! instances reach IPv4 hosts through NAT64.

use aws_sdk_ec2::types::{AttributeBooleanValue, HostnameType, ResourceType};
use ipnet::Ipv6Net;
use kops_engine::{Changes, FieldValue, OutputRef, Outputs, Task, TaskError, TaskKey};

use crate::context::{classify, name_tag, tag_map, tag_spec, AwsContext, Tags};
use crate::tasks::ec2::{not_visible_yet, unless_not_found, write_missing_tags};
use crate::tasks::managed_tags;
use crate::tasks::vpc::VpcId;

/// A subnet id, what route-table associations, NAT gateways (and later load
/// balancers and autoscaling groups) read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubnetId(pub String);

impl FieldValue for SubnetId {
    fn render(&self) -> String {
        self.0.clone()
    }
}

/// What the subnet should be.
#[derive(Debug, Clone, PartialEq)]
pub struct Subnet {
    /// The task name and `Name` tag: `<spec name>.<cluster>`.
    pub name: String,
    pub vpc: OutputRef<VpcId>,
    /// Required for an owned subnet; not checked for a shared one.
    pub cidr: Option<String>,
    /// Required for an owned subnet; may be empty for a shared one.
    pub availability_zone: String,
    pub tags: Tags,
    /// `Some(true)`: instances are named after their id (hostname type
    /// `resource-name` with DNS A records); `Some(false)`: after their IP.
    /// `None`: left as it is.
    pub resource_based_naming: Option<bool>,
    /// An existing subnet (`spec.subnets[].id`): found by id, only tagged.
    pub shared_id: Option<String>,
    /// The extra VPC CIDR block (`VPCCIDRBlock` task) the CIDR lies in,
    /// which must be associated first.
    pub vpc_cidr_block: Option<TaskKey>,
    /// The IPv6 block: a CIDR, or `/<size>#<hex index>` of the VPC's block.
    pub ipv6_cidr: Option<String>,
    /// The task giving the VPC its Amazon-provided IPv6 block, which a
    /// relative `ipv6_cidr` is carved from (owned VPCs).
    pub vpc_ipv6_block: Option<TaskKey>,
}

/// A relative IPv6 block, `/<size>#<index in hex>` (kops' notation).
pub fn parse_relative_ipv6(spec: &str) -> Option<(u8, u128)> {
    let (size, index) = spec.strip_prefix('/')?.split_once('#')?;
    let size: u8 = size.parse().ok().filter(|s| *s <= 128)?;
    let index = u128::from_str_radix(index, 16).ok()?;
    Some((size, index))
}

/// The block `/<size>#<index>` of `vpc_block` (e.g. `/64#3` of a /56: its
/// fourth /64), as Terraform's `cidrsubnet` computes it.
pub fn resolve_ipv6_cidr(vpc_block: &str, spec: &str) -> Result<String, String> {
    let Some((size, index)) = parse_relative_ipv6(spec) else {
        return Ok(spec.to_string());
    };
    let block: Ipv6Net = vpc_block
        .parse()
        .map_err(|_| format!("the VPC's IPv6 block `{vpc_block}` is not an IPv6 CIDR"))?;
    let block = block.trunc();
    if size < block.prefix_len() {
        return Err(format!(
            "`{spec}` asks for a /{size}, larger than the VPC's IPv6 block `{block}`"
        ));
    }
    let bits = u32::from(size - block.prefix_len());
    if bits < 128 && index >> bits != 0 {
        return Err(format!(
            "`{spec}`: index {index:#x} does not fit in the {} /{size} blocks of `{block}`",
            1u128 << bits
        ));
    }
    let shift = 128 - u32::from(size);
    let offset = if shift >= 128 { 0 } else { index << shift };
    let network = u128::from(block.network()) | offset;
    let net = Ipv6Net::new(network.into(), size).map_err(|e| e.to_string())?;
    Ok(net.to_string())
}

/// What exists.
#[derive(Debug, Clone)]
pub struct SubnetActual {
    pub id: SubnetId,
    pub vpc_id: String,
    pub cidr: Option<String>,
    pub availability_zone: String,
    /// Hostname type `resource-name`.
    pub resource_name_hostnames: bool,
    /// DNS A / AAAA records for resource names enabled.
    pub a_records: bool,
    pub aaaa_records: bool,
    /// The associated IPv6 block.
    pub ipv6_cidr: Option<String>,
    pub assign_ipv6: bool,
    pub dns64: bool,
    pub tags: Tags,
}

impl Subnet {
    pub const KIND: &'static str = "Subnet";

    /// The handle dependants keep to read the subnet's id.
    pub fn id_ref(name: &str) -> OutputRef<SubnetId> {
        OutputRef::new(TaskKey::new(Self::KIND, name))
    }

    /// Whether `actual` names instances after their id, with DNS records
    /// for each address family this subnet has.
    fn resource_based_naming_of(&self, actual: &SubnetActual) -> bool {
        actual.resource_name_hostnames
            && (self.cidr.is_none() || actual.a_records)
            && (self.ipv6_cidr.is_none() || actual.aaaa_records)
    }
}

fn actual_of(subnet: &aws_sdk_ec2::types::Subnet) -> SubnetActual {
    let naming = subnet.private_dns_name_options_on_launch();
    SubnetActual {
        id: SubnetId(subnet.subnet_id().unwrap_or_default().to_string()),
        vpc_id: subnet.vpc_id().unwrap_or_default().to_string(),
        cidr: subnet.cidr_block().map(str::to_string),
        availability_zone: subnet.availability_zone().unwrap_or_default().to_string(),
        resource_name_hostnames: naming
            .is_some_and(|n| n.hostname_type() == Some(&HostnameType::ResourceName)),
        a_records: naming.is_some_and(|n| n.enable_resource_name_dns_a_record() == Some(true)),
        aaaa_records: naming
            .is_some_and(|n| n.enable_resource_name_dns_aaaa_record() == Some(true)),
        ipv6_cidr: subnet
            .ipv6_cidr_block_association_set()
            .iter()
            .find(|a| {
                a.ipv6_cidr_block_state()
                    .and_then(|s| s.state())
                    .is_some_and(|s| matches!(s.as_str(), "associated" | "associating"))
            })
            .and_then(|a| a.ipv6_cidr_block())
            .map(str::to_string),
        assign_ipv6: subnet.assign_ipv6_address_on_creation() == Some(true),
        dns64: subnet.enable_dns64() == Some(true),
        tags: tag_map(subnet.tags()),
    }
}

async fn describe_by_id(
    ctx: &AwsContext,
    id: &str,
) -> Result<Option<aws_sdk_ec2::types::Subnet>, TaskError> {
    let out = unless_not_found(
        "DescribeSubnets",
        id,
        ctx.ec2().describe_subnets().subnet_ids(id).send().await,
    )?;
    Ok(out.and_then(|o| o.subnets().first().cloned()))
}

/// The Amazon-provided IPv6 block of the VPC `vpc_id`; retried until AWS
/// has assigned it (it follows the association by seconds).
async fn vpc_ipv6_block(ctx: &AwsContext, vpc_id: &str) -> Result<String, TaskError> {
    let out = ctx
        .ec2()
        .describe_vpcs()
        .vpc_ids(vpc_id)
        .send()
        .await
        .map_err(|e| classify("DescribeVpcs", vpc_id, e))?;
    out.vpcs()
        .iter()
        .flat_map(|v| v.ipv6_cidr_block_association_set())
        .find(|a| {
            a.ipv6_cidr_block_state()
                .and_then(|s| s.state())
                .is_some_and(|s| s.as_str() == "associated")
        })
        .and_then(|a| a.ipv6_cidr_block())
        .map(str::to_string)
        .ok_or_else(|| {
            TaskError::retryable(format!(
                "the VPC `{vpc_id}` has no IPv6 block yet (a relative ipv6CIDR is carved from it)"
            ))
        })
}

impl Task<AwsContext> for Subnet {
    type Actual = SubnetActual;
    type Output = SubnetId;

    fn key(&self) -> TaskKey {
        TaskKey::new(Self::KIND, &self.name)
    }

    fn dependencies(&self) -> Vec<TaskKey> {
        let mut keys = vec![self.vpc.key().clone()];
        keys.extend(self.vpc_cidr_block.iter().cloned());
        keys.extend(self.vpc_ipv6_block.iter().cloned());
        keys
    }

    async fn find(&self, ctx: &AwsContext, _: &Outputs) -> Result<Option<SubnetActual>, TaskError> {
        let subnets = ctx.subnets().await?;
        if let Some(id) = &self.shared_id {
            // Tagged by an earlier run, it is in the batched discovery.
            if let Some(subnet) = subnets.iter().find(|s| s.subnet_id() == Some(id.as_str())) {
                return Ok(Some(actual_of(subnet)));
            }
            return Ok(describe_by_id(ctx, id).await?.as_ref().map(actual_of));
        }
        let cached = subnets
            .iter()
            .find(|s| name_tag(s.tags()) == Some(self.name.as_str()));
        if let Some(subnet) = cached {
            return Ok(Some(actual_of(subnet)));
        }
        let Some(id) = ctx.created_id(&self.key()) else {
            return Ok(None);
        };
        match describe_by_id(ctx, &id).await? {
            Some(subnet) => Ok(Some(actual_of(&subnet))),
            None => Err(not_visible_yet("subnet", &id)),
        }
    }

    fn diff(&self, actual: Option<&SubnetActual>, deps: &Outputs) -> Result<Changes, TaskError> {
        let mut changes = Changes::new();
        let vpc = deps.try_get(&self.vpc)?;
        let tags = actual.map(|a| managed_tags(&a.tags, &self.tags));
        if let Some(id) = &self.shared_id {
            let Some(actual) = actual else {
                changes.compare("id", None, id);
                return Ok(changes);
            };
            if let Some(vpc) = vpc.filter(|v| v.0 != actual.vpc_id) {
                return Err(TaskError::fatal(format!(
                    "the subnet `{id}` (`{}`) is in VPC `{}`, not in the cluster's VPC `{}`\n\
                     hint: use subnets of spec.networkID, or correct the subnet's id",
                    self.name, actual.vpc_id, vpc.0
                )));
            }
            if !self.availability_zone.is_empty()
                && actual.availability_zone != self.availability_zone
            {
                return Err(TaskError::fatal(format!(
                    "the subnet `{id}` (`{}`) is in zone `{}`, not `{}`\n\
                     hint: set the subnet's zone to `{}` in the cluster spec",
                    self.name,
                    actual.availability_zone,
                    self.availability_zone,
                    actual.availability_zone
                )));
            }
            changes.compare("tags", tags.as_ref(), &self.tags);
            return Ok(changes);
        }
        changes
            .compare_reference(
                "vpc",
                actual.map(|a| a.vpc_id.as_str()),
                vpc.map(|v| v.0.as_str()),
                self.vpc.key(),
            )
            .compare("cidr", actual.map(|a| &a.cidr), &self.cidr)
            .compare(
                "availabilityZone",
                actual.map(|a| &a.availability_zone),
                &self.availability_zone,
            );
        if let Some(spec) = &self.ipv6_cidr {
            // A relative block can only be checked to be there: the VPC's
            // block it is carved from is not known here.
            let expected = match (parse_relative_ipv6(spec), actual) {
                (Some(_), Some(a)) if a.ipv6_cidr.is_some() => a.ipv6_cidr.clone(),
                _ => Some(spec.clone()),
            };
            changes
                .compare("ipv6Cidr", actual.map(|a| &a.ipv6_cidr), &expected)
                .compare(
                    "assignIpv6AddressOnCreation",
                    actual.map(|a| &a.assign_ipv6),
                    &true,
                );
            // DNS64 goes with the hostname settings, as in kops: both are
            // managed when the cluster runs the external cloud controller
            // manager, which IPv6-only clusters do.
            if self.cidr.is_none() && self.resource_based_naming.is_some() {
                changes.compare("dns64", actual.map(|a| &a.dns64), &true);
            }
        }
        if let Some(naming) = &self.resource_based_naming {
            changes.compare(
                "resourceBasedNaming",
                actual.map(|a| self.resource_based_naming_of(a)).as_ref(),
                naming,
            );
        }
        changes.compare("tags", tags.as_ref(), &self.tags);
        Ok(changes)
    }

    fn check_changes(
        &self,
        actual: Option<&SubnetActual>,
        changes: &Changes,
    ) -> Result<(), TaskError> {
        match (actual, &self.shared_id) {
            (None, Some(id)) => Err(TaskError::fatal(format!(
                "the subnet `{id}` (`{}`, spec.subnets[].id) does not exist in this region\n\
                 hint: check the subnet's id and that its zone is in the cluster's region",
                self.name
            ))),
            (None, None) if self.cidr.is_none() && self.ipv6_cidr.is_none() => {
                Err(TaskError::fatal(format!(
                    "the subnet `{}` has no CIDR\nhint: set spec.subnets[].cidr (or ipv6CIDR)",
                    self.name
                )))
            }
            (Some(actual), None) => {
                if changes.has("cidr") {
                    return Err(TaskError::immutable("cidr", &actual.cidr, &self.cidr));
                }
                if changes.has("availabilityZone") {
                    return Err(TaskError::immutable(
                        "availabilityZone",
                        &actual.availability_zone,
                        &self.availability_zone,
                    ));
                }
                if changes.has("ipv6Cidr") && actual.ipv6_cidr.is_some() {
                    return Err(TaskError::immutable(
                        "ipv6Cidr",
                        &actual.ipv6_cidr,
                        &self.ipv6_cidr,
                    ));
                }
                if let Some(change) = changes.get("vpc") {
                    return Err(TaskError::ImmutableField {
                        field: "vpc",
                        from: change.from.clone().unwrap_or_default(),
                        to: change.to.clone(),
                    });
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn output(&self, actual: &SubnetActual) -> SubnetId {
        actual.id.clone()
    }

    async fn apply(
        &self,
        ctx: &AwsContext,
        deps: &Outputs,
        actual: Option<&SubnetActual>,
        changes: &Changes,
    ) -> Result<SubnetId, TaskError> {
        let id = match actual {
            Some(actual) => {
                write_missing_tags(ctx, &actual.id.0, &actual.tags, &self.tags).await?;
                actual.id.0.clone()
            }
            None => {
                let vpc = deps.get(&self.vpc)?;
                let ipv6 = match &self.ipv6_cidr {
                    Some(spec) if parse_relative_ipv6(spec).is_some() => {
                        let block = vpc_ipv6_block(ctx, &vpc.0).await?;
                        Some(resolve_ipv6_cidr(&block, spec).map_err(|e| {
                            TaskError::fatal(format!(
                                "subnet `{}`: {e}\nhint: pick an ipv6CIDR inside the VPC's block",
                                self.name
                            ))
                        })?)
                    }
                    other => other.clone(),
                };
                let out = ctx
                    .ec2()
                    .create_subnet()
                    .vpc_id(&vpc.0)
                    .set_cidr_block(self.cidr.clone())
                    .set_ipv6_cidr_block(ipv6)
                    .set_ipv6_native(self.cidr.is_none().then_some(true))
                    .availability_zone(&self.availability_zone)
                    .tag_specifications(tag_spec(ResourceType::Subnet, &self.tags))
                    .send()
                    .await
                    .map_err(|e| classify("CreateSubnet", &self.name, e))?;
                let id = out
                    .subnet()
                    .and_then(|s| s.subnet_id())
                    .ok_or_else(|| {
                        TaskError::fatal(format!("CreateSubnet for `{}` returned no id", self.name))
                    })?
                    .to_string();
                ctx.remember_created(self.key(), &id);
                id
            }
        };
        if let (Some(spec), Some(actual)) = (&self.ipv6_cidr, actual) {
            if actual.ipv6_cidr.is_none() {
                let block = match parse_relative_ipv6(spec) {
                    Some(_) => {
                        let block = vpc_ipv6_block(ctx, &actual.vpc_id).await?;
                        resolve_ipv6_cidr(&block, spec)
                            .map_err(|e| TaskError::fatal(format!("subnet `{}`: {e}", self.name)))?
                    }
                    None => spec.clone(),
                };
                ctx.ec2()
                    .associate_subnet_cidr_block()
                    .subnet_id(&id)
                    .ipv6_cidr_block(block)
                    .send()
                    .await
                    .map_err(|e| classify("AssociateSubnetCidrBlock", &id, e))?;
            }
        }
        let on = || AttributeBooleanValue::builder().value(true).build();
        if changes.has("assignIpv6AddressOnCreation") {
            ctx.ec2()
                .modify_subnet_attribute()
                .subnet_id(&id)
                .assign_ipv6_address_on_creation(on())
                .send()
                .await
                .map_err(|e| classify("ModifySubnetAttribute", &id, e))?;
        }
        if changes.has("dns64") {
            ctx.ec2()
                .modify_subnet_attribute()
                .subnet_id(&id)
                .enable_dns64(on())
                .send()
                .await
                .map_err(|e| classify("ModifySubnetAttribute", &id, e))?;
        }
        // A new subnet already has IP-based names: only resource-based
        // naming needs calls then.
        let naming = self
            .resource_based_naming
            .filter(|on| changes.has("resourceBasedNaming") && (actual.is_some() || *on));
        if let Some(on) = naming {
            let hostname_type = if on {
                HostnameType::ResourceName
            } else {
                HostnameType::IpName
            };
            let flag = || AttributeBooleanValue::builder().value(on).build();
            let mut requests = vec![ctx
                .ec2()
                .modify_subnet_attribute()
                .subnet_id(&id)
                .private_dns_hostname_type_on_launch(hostname_type)];
            if self.cidr.is_some() {
                requests.push(
                    ctx.ec2()
                        .modify_subnet_attribute()
                        .subnet_id(&id)
                        .enable_resource_name_dns_a_record_on_launch(flag()),
                );
            }
            if self.ipv6_cidr.is_some() {
                requests.push(
                    ctx.ec2()
                        .modify_subnet_attribute()
                        .subnet_id(&id)
                        .enable_resource_name_dns_aaaa_record_on_launch(flag()),
                );
            }
            // Each call sets one attribute: all of them side by side.
            let mut calls = tokio::task::JoinSet::new();
            for request in requests {
                calls.spawn(request.send());
            }
            while let Some(result) = calls.join_next().await {
                result
                    .map_err(|e| TaskError::retryable(format!("ModifySubnetAttribute: {e}")))?
                    .map_err(|e| classify("ModifySubnetAttribute", &id, e))?;
            }
        }
        Ok(SubnetId(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subnet(naming: Option<bool>) -> Subnet {
        Subnet {
            name: "us-east-1a.example.com".into(),
            vpc: crate::tasks::vpc::Vpc::id_ref("example.com"),
            cidr: Some("172.20.32.0/19".into()),
            availability_zone: "us-east-1a".into(),
            tags: Tags::from([("Name".into(), "us-east-1a.example.com".into())]),
            resource_based_naming: naming,
            shared_id: None,
            vpc_cidr_block: None,
            ipv6_cidr: None,
            vpc_ipv6_block: None,
        }
    }

    fn actual(naming: bool) -> SubnetActual {
        SubnetActual {
            id: SubnetId("subnet-1".into()),
            vpc_id: "vpc-1".into(),
            cidr: Some("172.20.32.0/19".into()),
            availability_zone: "us-east-1a".into(),
            resource_name_hostnames: naming,
            a_records: naming,
            aaaa_records: false,
            ipv6_cidr: None,
            assign_ipv6: false,
            dns64: false,
            tags: Tags::from([
                ("Name".into(), "us-east-1a.example.com".into()),
                ("Owner".into(), "someone else".into()),
            ]),
        }
    }

    fn deps(task: &Subnet) -> Outputs {
        Outputs::empty(task.key()).with(&task.vpc, VpcId("vpc-1".into()))
    }

    #[test]
    fn naming_is_compared_only_when_managed() {
        let unmanaged = subnet(None);
        let changes = unmanaged
            .diff(Some(&actual(false)), &deps(&unmanaged))
            .unwrap();
        assert!(changes.is_empty(), "{changes:?}");

        let managed = subnet(Some(true));
        let changes = managed.diff(Some(&actual(false)), &deps(&managed)).unwrap();
        let rendered: Vec<String> = changes.iter().map(ToString::to_string).collect();
        assert_eq!(rendered, ["resourceBasedNaming: false -> true"]);
        assert!(managed
            .diff(Some(&actual(true)), &deps(&managed))
            .unwrap()
            .is_empty());
    }

    #[test]
    fn a_new_cidr_is_refused() {
        let mut moved = subnet(None);
        moved.cidr = Some("172.20.0.0/19".into());
        let changes = moved.diff(Some(&actual(false)), &deps(&moved)).unwrap();
        let error = moved
            .check_changes(Some(&actual(false)), &changes)
            .unwrap_err();
        assert_eq!(
            error.to_string().lines().next(),
            Some("field `cidr` cannot be changed from `172.20.32.0/19` to `172.20.0.0/19`")
        );
    }

    #[test]
    fn a_shared_subnet_in_another_vpc_is_refused() {
        let mut shared = subnet(None);
        shared.shared_id = Some("subnet-1".into());
        let deps = Outputs::empty(shared.key()).with(&shared.vpc, VpcId("vpc-2".into()));
        let error = shared.diff(Some(&actual(false)), &deps).unwrap_err();
        assert!(error
            .to_string()
            .contains("is in VPC `vpc-1`, not in the cluster's VPC `vpc-2`"));
    }

    #[test]
    fn relative_ipv6_blocks_are_carved_from_the_vpc_block() {
        let vpc = "2600:1f18:abcd:ef00::/56";
        assert_eq!(parse_relative_ipv6("/64#a"), Some((64, 10)));
        assert_eq!(parse_relative_ipv6("2001:db8::/64"), None);
        assert_eq!(
            resolve_ipv6_cidr(vpc, "/64#0").unwrap(),
            "2600:1f18:abcd:ef00::/64"
        );
        assert_eq!(
            resolve_ipv6_cidr(vpc, "/64#3").unwrap(),
            "2600:1f18:abcd:ef03::/64"
        );
        assert_eq!(
            resolve_ipv6_cidr(vpc, "/64#ff").unwrap(),
            "2600:1f18:abcd:efff::/64"
        );
        assert!(resolve_ipv6_cidr(vpc, "/64#100")
            .unwrap_err()
            .contains("does not fit"));
        assert!(resolve_ipv6_cidr(vpc, "/48#0")
            .unwrap_err()
            .contains("larger than"));
        assert_eq!(
            resolve_ipv6_cidr(vpc, "2001:db8:0:111::/64").unwrap(),
            "2001:db8:0:111::/64"
        );
    }

    #[test]
    fn an_ipv6_only_subnet_needs_dns64_and_aaaa_names() {
        let mut v6 = subnet(Some(true));
        v6.cidr = None;
        v6.ipv6_cidr = Some("/64#1".into());
        let mut found = actual(true);
        found.cidr = None;
        found.a_records = false;
        found.ipv6_cidr = Some("2600:1f18:abcd:ef01::/64".into());
        found.assign_ipv6 = true;
        let changes = v6.diff(Some(&found), &deps(&v6)).unwrap();
        let rendered: Vec<String> = changes.iter().map(ToString::to_string).collect();
        assert_eq!(
            rendered,
            ["dns64: false -> true", "resourceBasedNaming: false -> true"]
        );
        found.dns64 = true;
        found.aaaa_records = true;
        assert!(v6.diff(Some(&found), &deps(&v6)).unwrap().is_empty());
    }
}
