//! A Network Load Balancer (the API's `api.<cluster>`): its AWS name (at
//! most 32 characters, `api-<cluster>-<hash>`), scheme, subnets, security
//! groups and tags. kops identifies it by its `Name` tag, not its AWS name.
//!
//! Found in one `DescribeLoadBalancers` (+ `DescribeTags` in batches of 20)
//! per run (see [`AwsContext::load_balancers`]). Scheme and AWS name are
//! fixed at creation; subnets and security groups are set in place.

use std::collections::BTreeMap;

use aws_sdk_elasticloadbalancingv2::types::{
    IpAddressType, LoadBalancerSchemeEnum, LoadBalancerTypeEnum, SubnetMapping,
};
use kops_engine::{Changes, FieldValue, OutputRef, Outputs, Task, TaskError, TaskKey};

use crate::context::{classify, elbv2_tag_list, AwsContext, Tags, TAG_NAME};
use crate::tasks::security_group::SecurityGroupId;
use crate::tasks::subnet::SubnetId;
use crate::tasks::{managed_tags, tags_to_write};

/// What listeners and DNS records read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadBalancerOutput {
    pub arn: String,
    pub dns_name: String,
    pub hosted_zone_id: String,
}

impl FieldValue for LoadBalancerOutput {
    fn render(&self) -> String {
        self.arn.clone()
    }
}

/// What the load balancer should be.
#[derive(Debug, Clone, PartialEq)]
pub struct NetworkLoadBalancer {
    /// The task name and the `Name` tag (`api.<cluster>`).
    pub name: String,
    /// The AWS name, at most 32 characters.
    pub load_balancer_name: String,
    /// `internal` or `internet-facing`.
    pub scheme: String,
    pub subnets: Vec<OutputRef<SubnetId>>,
    pub security_groups: Vec<OutputRef<SecurityGroupId>>,
    pub tags: Tags,
    /// Security groups made outside the cluster (`sg-...`), added to those above.
    pub additional_security_groups: Vec<String>,
    /// Elastic IPs (`eipalloc-...`) of a public balancer, by subnet task
    /// name; fixed at creation.
    pub subnet_allocations: BTreeMap<String, String>,
    /// Private addresses of an internal balancer, by subnet task name;
    /// fixed at creation.
    pub subnet_private_addresses: BTreeMap<String, String>,
    /// Load-balancer attributes kops sets (`load_balancing.cross_zone.enabled`,
    /// `access_logs.s3.*`); read and compared only when there are any.
    pub attributes: BTreeMap<String, String>,
    /// IPv4 and IPv6 (`dualstack`), when every subnet has an IPv6 block.
    pub dualstack: bool,
}

/// What exists.
#[derive(Debug, Clone)]
pub struct NetworkLoadBalancerActual {
    pub output: LoadBalancerOutput,
    pub load_balancer_name: String,
    pub scheme: String,
    /// Sorted.
    pub subnets: Vec<String>,
    /// Sorted.
    pub security_groups: Vec<String>,
    pub tags: Tags,
    /// Elastic IP allocation ids, sorted; `None` when AWS reports no
    /// addresses at all (moto does not), so nothing can be compared.
    pub allocations: Option<Vec<String>>,
    /// The attributes this task manages, when it manages any.
    pub attributes: BTreeMap<String, String>,
    /// `ipv4` or `dualstack`.
    pub ip_address_type: String,
}

impl NetworkLoadBalancer {
    pub const KIND: &'static str = "NetworkLoadBalancer";

    /// The handle listeners keep to read the ARN.
    pub fn output_ref(name: &str) -> OutputRef<LoadBalancerOutput> {
        OutputRef::new(TaskKey::new(Self::KIND, name))
    }

    fn subnet_ids(&self, deps: &Outputs) -> Result<Vec<String>, TaskError> {
        let mut ids = Vec::new();
        for subnet in &self.subnets {
            ids.push(match deps.try_get(subnet)? {
                Some(id) => id.0.clone(),
                None => format!("<{}>", subnet.key()),
            });
        }
        ids.sort();
        Ok(ids)
    }

    fn group_ids(&self, deps: &Outputs) -> Result<Vec<String>, TaskError> {
        let mut ids = Vec::new();
        for group in &self.security_groups {
            ids.push(match deps.try_get(group)? {
                Some(id) => id.0.clone(),
                None => format!("<{}>", group.key()),
            });
        }
        ids.extend(self.additional_security_groups.iter().cloned());
        ids.sort();
        Ok(ids)
    }

    fn ip_address_type(&self) -> IpAddressType {
        if self.dualstack {
            IpAddressType::Dualstack
        } else {
            IpAddressType::Ipv4
        }
    }

    /// The subnet mappings of a create.
    fn mappings(&self, deps: &Outputs) -> Result<Vec<SubnetMapping>, TaskError> {
        let mut mappings = Vec::new();
        for subnet in &self.subnets {
            let name = subnet.key().name.as_str();
            mappings.push(
                SubnetMapping::builder()
                    .subnet_id(&deps.get(subnet)?.0)
                    .set_allocation_id(self.subnet_allocations.get(name).cloned())
                    .set_private_ipv4_address(self.subnet_private_addresses.get(name).cloned())
                    .build(),
            );
        }
        Ok(mappings)
    }

    fn allocations(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.subnet_allocations.values().cloned().collect();
        ids.sort();
        ids
    }
}

fn actual_of(
    l: &aws_sdk_elasticloadbalancingv2::types::LoadBalancer,
    tags: &Tags,
) -> NetworkLoadBalancerActual {
    let mut subnets: Vec<String> = l
        .availability_zones()
        .iter()
        .filter_map(|z| z.subnet_id().map(str::to_string))
        .collect();
    subnets.sort();
    let mut security_groups: Vec<String> = l.security_groups().to_vec();
    security_groups.sort();
    let addresses: Vec<_> = l
        .availability_zones()
        .iter()
        .flat_map(|z| z.load_balancer_addresses())
        .collect();
    let allocations = (!addresses.is_empty()).then(|| {
        let mut ids: Vec<String> = addresses
            .iter()
            .filter_map(|a| a.allocation_id().map(str::to_string))
            .collect();
        ids.sort();
        ids
    });
    NetworkLoadBalancerActual {
        allocations,
        attributes: BTreeMap::new(),
        ip_address_type: l
            .ip_address_type()
            .map(|t| t.as_str().to_string())
            .unwrap_or_else(|| "ipv4".to_string()),
        output: LoadBalancerOutput {
            arn: l.load_balancer_arn().unwrap_or_default().to_string(),
            dns_name: l.dns_name().unwrap_or_default().to_string(),
            hosted_zone_id: l.canonical_hosted_zone_id().unwrap_or_default().to_string(),
        },
        load_balancer_name: l.load_balancer_name().unwrap_or_default().to_string(),
        scheme: l
            .scheme()
            .map(|s| s.as_str().to_string())
            .unwrap_or_default(),
        subnets,
        security_groups,
        tags: tags.clone(),
    }
}

impl Task<AwsContext> for NetworkLoadBalancer {
    type Actual = NetworkLoadBalancerActual;
    type Output = LoadBalancerOutput;

    fn key(&self) -> TaskKey {
        TaskKey::new(Self::KIND, &self.name)
    }

    fn dependencies(&self) -> Vec<TaskKey> {
        let mut keys: Vec<TaskKey> = self.subnets.iter().map(|s| s.key().clone()).collect();
        keys.extend(self.security_groups.iter().map(|g| g.key().clone()));
        keys
    }

    async fn find(
        &self,
        ctx: &AwsContext,
        _: &Outputs,
    ) -> Result<Option<NetworkLoadBalancerActual>, TaskError> {
        let fresh = !ctx.first_look(&self.key());
        if let Some((l, tags)) = ctx
            .load_balancers()
            .await?
            .iter()
            .find(|(_, tags)| tags.get(TAG_NAME) == Some(&self.name))
        {
            let mut actual = actual_of(l, tags);
            self.read_attributes(ctx, &mut actual, fresh).await?;
            return Ok(Some(actual));
        }
        let Some(arn) = ctx.created_id(&self.key()) else {
            return Ok(None);
        };
        // Created earlier in this run (a retried apply).
        let out = ctx
            .elbv2()
            .describe_load_balancers()
            .load_balancer_arns(&arn)
            .send()
            .await
            .map_err(|e| classify("DescribeLoadBalancers", &self.name, e))?;
        let Some(l) = out.load_balancers().first() else {
            return Ok(None);
        };
        let mut actual = actual_of(l, &self.tags);
        self.read_attributes(ctx, &mut actual, true).await?;
        Ok(Some(actual))
    }

    fn diff(
        &self,
        actual: Option<&NetworkLoadBalancerActual>,
        deps: &Outputs,
    ) -> Result<Changes, TaskError> {
        let tags = actual.map(|a| managed_tags(&a.tags, &self.tags));
        let mut changes = Changes::new();
        changes
            .compare(
                "loadBalancerName",
                actual.map(|a| a.load_balancer_name.as_str()),
                self.load_balancer_name.as_str(),
            )
            .compare(
                "scheme",
                actual.map(|a| a.scheme.as_str()),
                self.scheme.as_str(),
            )
            .compare(
                "subnets",
                actual.map(|a| &a.subnets),
                &self.subnet_ids(deps)?,
            )
            .compare(
                "securityGroups",
                actual.map(|a| &a.security_groups),
                &self.group_ids(deps)?,
            )
            .compare("tags", tags.as_ref(), &self.tags);
        // AWS cannot make an existing internal IPv4 balancer dual-stack:
        // such a one is left as it is.
        let fixed = actual.is_some_and(|a| a.scheme == "internal" && a.ip_address_type == "ipv4");
        if !fixed {
            changes.compare(
                "ipAddressType",
                actual.map(|a| a.ip_address_type.as_str()),
                self.ip_address_type().as_str(),
            );
        }
        match actual.map(|a| a.allocations.as_ref()) {
            // Unknown: nothing to compare.
            Some(None) => {}
            found
                if !self.subnet_allocations.is_empty()
                    || found.flatten().is_some_and(|a| !a.is_empty()) =>
            {
                changes.compare("allocations", found.flatten(), &self.allocations());
            }
            _ => {}
        }
        if !self.attributes.is_empty() {
            changes.compare(
                "attributes",
                actual.map(|a| &a.attributes),
                &self.attributes,
            );
        }
        Ok(changes)
    }

    fn check_changes(
        &self,
        actual: Option<&NetworkLoadBalancerActual>,
        _: &Changes,
    ) -> Result<(), TaskError> {
        match actual {
            Some(a) if a.scheme != self.scheme => Err(TaskError::immutable(
                "scheme",
                a.scheme.as_str(),
                self.scheme.as_str(),
            )),
            Some(NetworkLoadBalancerActual {
                allocations: Some(found),
                ..
            }) if *found != self.allocations() => Err(TaskError::immutable(
                "allocations",
                found,
                &self.allocations(),
            )),
            Some(a) if a.load_balancer_name != self.load_balancer_name => {
                Err(TaskError::immutable(
                    "loadBalancerName",
                    a.load_balancer_name.as_str(),
                    self.load_balancer_name.as_str(),
                ))
            }
            _ => Ok(()),
        }
    }

    fn output(&self, actual: &NetworkLoadBalancerActual) -> LoadBalancerOutput {
        actual.output.clone()
    }

    async fn apply(
        &self,
        ctx: &AwsContext,
        deps: &Outputs,
        actual: Option<&NetworkLoadBalancerActual>,
        changes: &Changes,
    ) -> Result<LoadBalancerOutput, TaskError> {
        let elbv2 = ctx.elbv2();
        let subnets = self.subnet_ids(deps)?;
        let groups = self.group_ids(deps)?;
        let Some(actual) = actual else {
            let out = elbv2
                .create_load_balancer()
                .name(&self.load_balancer_name)
                .r#type(LoadBalancerTypeEnum::Network)
                .scheme(LoadBalancerSchemeEnum::from(self.scheme.as_str()))
                .ip_address_type(self.ip_address_type())
                .set_subnet_mappings(Some(self.mappings(deps)?))
                .set_security_groups(Some(groups))
                .set_tags(Some(elbv2_tag_list(&self.tags)))
                .send()
                .await
                .map_err(|e| classify("CreateLoadBalancer", &self.name, e))?;
            let created = out.load_balancers().first().ok_or_else(|| {
                TaskError::fatal(format!(
                    "CreateLoadBalancer for `{}` returned no load balancer",
                    self.name
                ))
            })?;
            let actual = actual_of(created, &self.tags);
            ctx.remember_created(self.key(), &actual.output.arn);
            self.write_attributes(ctx, &actual.output.arn).await?;
            return Ok(actual.output);
        };
        let arn = &actual.output.arn;
        if changes.has("subnets") {
            elbv2
                .set_subnets()
                .load_balancer_arn(arn)
                .set_subnets(Some(subnets))
                .send()
                .await
                .map_err(|e| classify("SetSubnets", &self.name, e))?;
        }
        if changes.has("ipAddressType") {
            elbv2
                .set_ip_address_type()
                .load_balancer_arn(arn)
                .ip_address_type(self.ip_address_type())
                .send()
                .await
                .map_err(|e| classify("SetIpAddressType", &self.name, e))?;
        }
        if changes.has("securityGroups") {
            elbv2
                .set_security_groups()
                .load_balancer_arn(arn)
                .set_security_groups(Some(groups))
                .send()
                .await
                .map_err(|e| classify("SetSecurityGroups", &self.name, e))?;
        }
        if changes.has("attributes") {
            self.write_attributes(ctx, arn).await?;
        }
        let missing = tags_to_write(&actual.tags, &self.tags);
        if !missing.is_empty() {
            elbv2
                .add_tags()
                .resource_arns(arn)
                .set_tags(Some(elbv2_tag_list(&missing)))
                .send()
                .await
                .map_err(|e| classify("AddTags", &self.name, e))?;
        }
        Ok(actual.output.clone())
    }
}

impl NetworkLoadBalancer {
    /// Reads the managed attributes (one `DescribeLoadBalancerAttributes`,
    /// read ahead with the run's listing; afresh on the task's second
    /// look), only when the task manages some.
    async fn read_attributes(
        &self,
        ctx: &AwsContext,
        actual: &mut NetworkLoadBalancerActual,
        fresh: bool,
    ) -> Result<(), TaskError> {
        if self.attributes.is_empty() {
            return Ok(());
        }
        actual.attributes = ctx
            .load_balancer_attributes(&actual.output.arn, fresh)
            .await?
            .into_iter()
            .filter(|(k, _)| self.attributes.contains_key(k))
            .collect();
        Ok(())
    }

    async fn write_attributes(&self, ctx: &AwsContext, arn: &str) -> Result<(), TaskError> {
        if self.attributes.is_empty() {
            return Ok(());
        }
        ctx.elbv2()
            .modify_load_balancer_attributes()
            .load_balancer_arn(arn)
            .set_attributes(Some(
                self.attributes
                    .iter()
                    .map(|(k, v)| {
                        aws_sdk_elasticloadbalancingv2::types::LoadBalancerAttribute::builder()
                            .key(k)
                            .value(v)
                            .build()
                    })
                    .collect(),
            ))
            .send()
            .await
            .map_err(|e| classify("ModifyLoadBalancerAttributes", &self.name, e))?;
        Ok(())
    }
}
