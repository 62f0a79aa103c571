//! A Network Load Balancer (the API's `api.<cluster>`): its AWS name (at
//! most 32 characters, `api-<cluster>-<hash>`), scheme, subnets, security
//! groups and tags. kops identifies it by its `Name` tag, not its AWS name.
//!
//! Found in one `DescribeLoadBalancers` (+ `DescribeTags` in batches of 20)
//! per run (see [`AwsContext::load_balancers`]). Scheme and AWS name are
//! fixed at creation; subnets and security groups are set in place.

use aws_sdk_elasticloadbalancingv2::types::{
    LoadBalancerSchemeEnum, LoadBalancerTypeEnum, SubnetMapping,
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
        ids.sort();
        Ok(ids)
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
    NetworkLoadBalancerActual {
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
        if let Some((l, tags)) = ctx
            .load_balancers()
            .await?
            .iter()
            .find(|(_, tags)| tags.get(TAG_NAME) == Some(&self.name))
        {
            return Ok(Some(actual_of(l, tags)));
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
        Ok(out
            .load_balancers()
            .first()
            .map(|l| actual_of(l, &self.tags)))
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
                .set_subnet_mappings(Some(
                    subnets
                        .iter()
                        .map(|s| SubnetMapping::builder().subnet_id(s).build())
                        .collect(),
                ))
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
        if changes.has("securityGroups") {
            elbv2
                .set_security_groups()
                .load_balancer_arn(arn)
                .set_security_groups(Some(groups))
                .send()
                .await
                .map_err(|e| classify("SetSecurityGroups", &self.name, e))?;
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
