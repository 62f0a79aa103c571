//! The cluster's VPC: created and tagged `owned`, or an existing one
//! (`spec.networkID`) used as it is and tagged `shared` by nothing here.

use aws_sdk_ec2::types::{AttributeBooleanValue, ResourceType, VpcAttributeName};
use kops_engine::{Changes, FieldValue, OutputRef, Outputs, Task, TaskError, TaskKey};

use crate::context::{
    classify, ec2_tags, name_tag, tag_map, tag_spec, vpc_attribute, AwsContext, Tags,
};
use crate::tasks::ec2::{not_visible_yet, unless_not_found};
use crate::tasks::{managed_tags, tags_to_write};

/// A VPC id, what dependants read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VpcId(pub String);

impl FieldValue for VpcId {
    fn render(&self) -> String {
        self.0.clone()
    }
}

/// What the VPC should be.
#[derive(Debug, Clone, PartialEq)]
pub struct Vpc {
    /// The task name and `Name` tag: the cluster's name.
    pub name: String,
    pub cidr: String,
    pub enable_dns_hostnames: bool,
    pub enable_dns_support: bool,
    pub tags: Tags,
    /// An existing VPC (`spec.networkID`): found by id, never changed.
    pub shared_id: Option<String>,
}

/// What exists.
#[derive(Debug, Clone)]
pub struct VpcActual {
    pub id: VpcId,
    pub cidr: String,
    pub enable_dns_hostnames: bool,
    pub enable_dns_support: bool,
    pub tags: Tags,
}

impl Vpc {
    pub const KIND: &'static str = "VPC";

    /// The handle dependants keep to read the VPC's id.
    pub fn id_ref(name: &str) -> OutputRef<VpcId> {
        OutputRef::new(TaskKey::new(Self::KIND, name))
    }
}

impl Task<AwsContext> for Vpc {
    type Actual = VpcActual;
    type Output = VpcId;

    fn key(&self) -> TaskKey {
        TaskKey::new(Self::KIND, &self.name)
    }

    async fn find(&self, ctx: &AwsContext, _: &Outputs) -> Result<Option<VpcActual>, TaskError> {
        let found = match &self.shared_id {
            Some(id) => {
                // Not there is an answer (refused by check_changes), not
                // something to retry.
                let out = unless_not_found(
                    "DescribeVpcs",
                    id,
                    ctx.ec2().describe_vpcs().vpc_ids(id).send().await,
                )?;
                out.and_then(|o| o.vpcs().first().cloned())
            }
            None => {
                let cached = ctx
                    .vpcs()
                    .await?
                    .iter()
                    .find(|v| name_tag(v.tags()) == Some(self.name.as_str()))
                    .cloned();
                match (cached, ctx.created_id(&self.key())) {
                    // Created by an earlier attempt of this run (the cache
                    // predates it): find it, do not create a second VPC.
                    (None, Some(id)) => {
                        let out = ctx
                            .ec2()
                            .describe_vpcs()
                            .vpc_ids(&id)
                            .send()
                            .await
                            .map_err(|e| classify("DescribeVpcs", &id, e))?;
                        let vpc = out.vpcs().first().cloned();
                        Some(vpc.ok_or_else(|| not_visible_yet("VPC", &id))?)
                    }
                    (cached, _) => cached,
                }
            }
        };
        let Some(vpc) = found else { return Ok(None) };
        let id = vpc.vpc_id().unwrap_or_default().to_string();
        // A shared VPC is not ours to change: its flags are not read.
        let (hostnames, support) = if self.shared_id.is_some() {
            (self.enable_dns_hostnames, self.enable_dns_support)
        } else if ctx.first_look(&self.key()) {
            ctx.vpc_dns_attributes(&id).await?
        } else {
            // A retry after a partial apply: its own change is not in the
            // run's snapshot.
            (
                vpc_attribute(ctx, &id, VpcAttributeName::EnableDnsHostnames).await?,
                vpc_attribute(ctx, &id, VpcAttributeName::EnableDnsSupport).await?,
            )
        };
        Ok(Some(VpcActual {
            id: VpcId(id),
            cidr: vpc.cidr_block().unwrap_or_default().to_string(),
            enable_dns_hostnames: hostnames,
            enable_dns_support: support,
            tags: tag_map(vpc.tags()),
        }))
    }

    fn diff(&self, actual: Option<&VpcActual>, _: &Outputs) -> Result<Changes, TaskError> {
        let mut changes = Changes::new();
        if self.shared_id.is_some() {
            // Existing VPCs are used as they are.
            if actual.is_none() {
                changes.compare(
                    "id",
                    None,
                    self.shared_id.as_ref().unwrap_or(&String::new()),
                );
            }
            return Ok(changes);
        }
        let tags = actual.map(|a| managed_tags(&a.tags, &self.tags));
        changes
            .compare("cidr", actual.map(|a| &a.cidr), &self.cidr)
            .compare(
                "enableDnsHostnames",
                actual.map(|a| &a.enable_dns_hostnames),
                &self.enable_dns_hostnames,
            )
            .compare(
                "enableDnsSupport",
                actual.map(|a| &a.enable_dns_support),
                &self.enable_dns_support,
            )
            .compare("tags", tags.as_ref(), &self.tags);
        Ok(changes)
    }

    fn check_changes(&self, actual: Option<&VpcActual>, _: &Changes) -> Result<(), TaskError> {
        match (actual, &self.shared_id) {
            (None, Some(id)) => Err(TaskError::fatal(format!(
                "the VPC `{id}` (spec.networkID) does not exist in the cluster's region\nhint: check spec.networkID and the cluster's zones"
            ))),
            (Some(a), None) if a.cidr != self.cidr => Err(TaskError::immutable("cidr", &a.cidr, &self.cidr)),
            _ => Ok(()),
        }
    }

    fn output(&self, actual: &VpcActual) -> VpcId {
        actual.id.clone()
    }

    async fn apply(
        &self,
        ctx: &AwsContext,
        _: &Outputs,
        actual: Option<&VpcActual>,
        changes: &Changes,
    ) -> Result<VpcId, TaskError> {
        let id = match actual {
            Some(a) => a.id.0.clone(),
            None => {
                let out = ctx
                    .ec2()
                    .create_vpc()
                    .cidr_block(&self.cidr)
                    .tag_specifications(tag_spec(ResourceType::Vpc, &self.tags))
                    .send()
                    .await
                    .map_err(|e| classify("CreateVpc", &self.name, e))?;
                let id = out
                    .vpc()
                    .and_then(|v| v.vpc_id())
                    .ok_or_else(|| {
                        TaskError::fatal(format!("CreateVpc for `{}` returned no id", self.name))
                    })?
                    .to_string();
                ctx.remember_created(self.key(), &id);
                id
            }
        };
        let flag = |on: bool| AttributeBooleanValue::builder().value(on).build();
        // One call per flag. A new VPC has DNS support on (AWS' default),
        // so both go side by side; on an existing one support goes first,
        // as AWS takes hostnames only with support on.
        let vpc = id.as_str();
        let modify = |support: Option<bool>, hostnames: Option<bool>| async move {
            if support.is_none() && hostnames.is_none() {
                return Ok(());
            }
            ctx.ec2()
                .modify_vpc_attribute()
                .vpc_id(vpc)
                .set_enable_dns_support(support.map(flag))
                .set_enable_dns_hostnames(hostnames.map(flag))
                .send()
                .await
                .map(|_| ())
                .map_err(|e| classify("ModifyVpcAttribute", vpc, e))
        };
        let support = changes
            .has("enableDnsSupport")
            .then_some(self.enable_dns_support);
        let hostnames = changes
            .has("enableDnsHostnames")
            .then_some(self.enable_dns_hostnames);
        if actual.is_none() {
            let (a, b) = tokio::join!(modify(support, None), modify(None, hostnames));
            a?;
            b?;
        } else {
            modify(support, None).await?;
            modify(None, hostnames).await?;
        }
        if let Some(a) = actual {
            let missing = tags_to_write(&a.tags, &self.tags);
            if !missing.is_empty() {
                ctx.ec2()
                    .create_tags()
                    .resources(&id)
                    .set_tags(Some(ec2_tags(&missing)))
                    .send()
                    .await
                    .map_err(|e| classify("CreateTags", &id, e))?;
            }
        }
        Ok(VpcId(id))
    }
}
