//! A subnet of the cluster. Owned: created with its CIDR, zone and kops'
//! tags (`SubnetType`, the load-balancer role tags), and with resource-based
//! hostnames when the cluster runs the external cloud controller manager.
//! Shared (`spec.subnets[].id`): found by id and only tagged; its CIDR, zone
//! and attributes are the owner's.

use aws_sdk_ec2::types::{AttributeBooleanValue, HostnameType, ResourceType};
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
}

/// What exists.
#[derive(Debug, Clone)]
pub struct SubnetActual {
    pub id: SubnetId,
    pub vpc_id: String,
    pub cidr: Option<String>,
    pub availability_zone: String,
    /// Hostname type `resource-name` with DNS A records enabled.
    pub resource_based_naming: bool,
    pub tags: Tags,
}

impl Subnet {
    pub const KIND: &'static str = "Subnet";

    /// The handle dependants keep to read the subnet's id.
    pub fn id_ref(name: &str) -> OutputRef<SubnetId> {
        OutputRef::new(TaskKey::new(Self::KIND, name))
    }
}

fn actual_of(subnet: &aws_sdk_ec2::types::Subnet) -> SubnetActual {
    let naming = subnet.private_dns_name_options_on_launch();
    SubnetActual {
        id: SubnetId(subnet.subnet_id().unwrap_or_default().to_string()),
        vpc_id: subnet.vpc_id().unwrap_or_default().to_string(),
        cidr: subnet.cidr_block().map(str::to_string),
        availability_zone: subnet.availability_zone().unwrap_or_default().to_string(),
        resource_based_naming: naming.is_some_and(|n| {
            n.hostname_type() == Some(&HostnameType::ResourceName)
                && n.enable_resource_name_dns_a_record() == Some(true)
        }),
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

impl Task<AwsContext> for Subnet {
    type Actual = SubnetActual;
    type Output = SubnetId;

    fn key(&self) -> TaskKey {
        TaskKey::new(Self::KIND, &self.name)
    }

    fn dependencies(&self) -> Vec<TaskKey> {
        let mut keys = vec![self.vpc.key().clone()];
        keys.extend(self.vpc_cidr_block.iter().cloned());
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
        if let Some(naming) = &self.resource_based_naming {
            changes.compare(
                "resourceBasedNaming",
                actual.map(|a| &a.resource_based_naming),
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
            (None, None) if self.cidr.is_none() => Err(TaskError::fatal(format!(
                "the subnet `{}` has no CIDR\nhint: set spec.subnets[].cidr",
                self.name
            ))),
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
                let out = ctx
                    .ec2()
                    .create_subnet()
                    .vpc_id(&vpc.0)
                    .set_cidr_block(self.cidr.clone())
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
            ctx.ec2()
                .modify_subnet_attribute()
                .subnet_id(&id)
                .private_dns_hostname_type_on_launch(hostname_type)
                .send()
                .await
                .map_err(|e| classify("ModifySubnetAttribute", &id, e))?;
            ctx.ec2()
                .modify_subnet_attribute()
                .subnet_id(&id)
                .enable_resource_name_dns_a_record_on_launch(
                    AttributeBooleanValue::builder().value(on).build(),
                )
                .send()
                .await
                .map_err(|e| classify("ModifySubnetAttribute", &id, e))?;
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
        }
    }

    fn actual(naming: bool) -> SubnetActual {
        SubnetActual {
            id: SubnetId("subnet-1".into()),
            vpc_id: "vpc-1".into(),
            cidr: Some("172.20.32.0/19".into()),
            availability_zone: "us-east-1a".into(),
            resource_based_naming: naming,
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
}
