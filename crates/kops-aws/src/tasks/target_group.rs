//! An ELBv2 target group (`tcp-<cluster>-<hash>` for the API,
//! `kops-controller-...` for kops-controller with DNS `None`): TCP to the
//! control-plane instances, which their autoscaling groups register, with a
//! TCP (or HTTPS, with a path) health check and kops' deregistration settings (30 s delay,
//! connections closed on deregistration).
//!
//! Found in one `DescribeTargetGroups` (+ `DescribeTags`) per run (see
//! [`AwsContext::target_groups`]), by name. The deregistration attributes
//! are written on create only.

use aws_sdk_elasticloadbalancingv2::types::{ProtocolEnum, TargetGroupAttribute, TargetTypeEnum};
use kops_engine::{Changes, FieldValue, OutputRef, Outputs, Task, TaskError, TaskKey};

use crate::context::{classify, elbv2_tag_list, AwsContext, Tags};
use crate::tasks::vpc::VpcId;
use crate::tasks::{managed_tags, tags_to_write};

/// A target group's ARN, what listeners and autoscaling groups read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetGroupArn(pub String);

impl FieldValue for TargetGroupArn {
    fn render(&self) -> String {
        self.0.clone()
    }
}

/// What the target group should be.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetGroup {
    /// The task name and the group's name (at most 32 characters).
    pub name: String,
    pub vpc: OutputRef<VpcId>,
    /// `TCP`, `TLS`...
    pub protocol: String,
    pub port: i32,
    pub health_check_protocol: String,
    /// The path of an HTTP(S) health check (kops-controller's `/healthz`);
    /// `None` for TCP checks.
    pub health_check_path: Option<String>,
    /// Seconds.
    pub health_check_interval: i32,
    pub healthy_threshold: i32,
    pub unhealthy_threshold: i32,
    /// Seconds; written on create.
    pub deregistration_delay: i32,
    /// Written on create.
    pub connection_termination: bool,
    pub tags: Tags,
}

/// What exists.
#[derive(Debug, Clone)]
pub struct TargetGroupActual {
    pub arn: String,
    pub vpc_id: String,
    pub protocol: String,
    pub port: i32,
    pub health_check_protocol: String,
    pub health_check_path: Option<String>,
    pub health_check_interval: i32,
    pub healthy_threshold: i32,
    pub unhealthy_threshold: i32,
    pub tags: Tags,
}

impl TargetGroup {
    pub const KIND: &'static str = "TargetGroup";

    /// The handle listeners and autoscaling groups keep to read the ARN.
    pub fn arn_ref(name: &str) -> OutputRef<TargetGroupArn> {
        OutputRef::new(TaskKey::new(Self::KIND, name))
    }
}

fn actual_of(
    g: &aws_sdk_elasticloadbalancingv2::types::TargetGroup,
    tags: &Tags,
) -> TargetGroupActual {
    TargetGroupActual {
        arn: g.target_group_arn().unwrap_or_default().to_string(),
        vpc_id: g.vpc_id().unwrap_or_default().to_string(),
        protocol: g
            .protocol()
            .map(|p| p.as_str().to_string())
            .unwrap_or_default(),
        port: g.port().unwrap_or_default(),
        health_check_protocol: g
            .health_check_protocol()
            .map(|p| p.as_str().to_string())
            .unwrap_or_default(),
        health_check_path: g.health_check_path().map(str::to_string),
        health_check_interval: g.health_check_interval_seconds().unwrap_or_default(),
        healthy_threshold: g.healthy_threshold_count().unwrap_or_default(),
        unhealthy_threshold: g.unhealthy_threshold_count().unwrap_or_default(),
        tags: tags.clone(),
    }
}

impl Task<AwsContext> for TargetGroup {
    type Actual = TargetGroupActual;
    type Output = TargetGroupArn;

    fn key(&self) -> TaskKey {
        TaskKey::new(Self::KIND, &self.name)
    }

    fn dependencies(&self) -> Vec<TaskKey> {
        vec![self.vpc.key().clone()]
    }

    async fn find(
        &self,
        ctx: &AwsContext,
        _: &Outputs,
    ) -> Result<Option<TargetGroupActual>, TaskError> {
        if let Some((g, tags)) = ctx
            .target_groups()
            .await?
            .iter()
            .find(|(g, _)| g.target_group_name() == Some(self.name.as_str()))
        {
            return Ok(Some(actual_of(g, tags)));
        }
        let Some(arn) = ctx.created_id(&self.key()) else {
            return Ok(None);
        };
        // Created earlier in this run (a retried apply).
        let out = ctx
            .elbv2()
            .describe_target_groups()
            .target_group_arns(&arn)
            .send()
            .await
            .map_err(|e| classify("DescribeTargetGroups", &self.name, e))?;
        Ok(out
            .target_groups()
            .first()
            .map(|g| actual_of(g, &self.tags)))
    }

    fn diff(
        &self,
        actual: Option<&TargetGroupActual>,
        deps: &Outputs,
    ) -> Result<Changes, TaskError> {
        let vpc = deps.try_get(&self.vpc)?.map(|v| v.0.as_str());
        let tags = actual.map(|a| managed_tags(&a.tags, &self.tags));
        let mut changes = Changes::new();
        changes
            .compare_reference(
                "vpc",
                actual.map(|a| a.vpc_id.as_str()),
                vpc,
                self.vpc.key(),
            )
            .compare(
                "protocol",
                actual.map(|a| a.protocol.as_str()),
                self.protocol.as_str(),
            )
            .compare("port", actual.map(|a| &a.port), &self.port)
            .compare(
                "healthCheckProtocol",
                actual.map(|a| a.health_check_protocol.as_str()),
                self.health_check_protocol.as_str(),
            )
            .compare(
                "healthCheckInterval",
                actual.map(|a| &a.health_check_interval),
                &self.health_check_interval,
            )
            .compare(
                "healthyThreshold",
                actual.map(|a| &a.healthy_threshold),
                &self.healthy_threshold,
            )
            .compare(
                "unhealthyThreshold",
                actual.map(|a| &a.unhealthy_threshold),
                &self.unhealthy_threshold,
            )
            .compare("tags", tags.as_ref(), &self.tags);
        if let Some(path) = &self.health_check_path {
            changes.compare(
                "healthCheckPath",
                actual.map(|a| a.health_check_path.as_deref().unwrap_or_default()),
                path.as_str(),
            );
        }
        Ok(changes)
    }

    fn check_changes(
        &self,
        actual: Option<&TargetGroupActual>,
        _: &Changes,
    ) -> Result<(), TaskError> {
        match actual {
            Some(a) if a.protocol != self.protocol => Err(TaskError::immutable(
                "protocol",
                a.protocol.as_str(),
                self.protocol.as_str(),
            )),
            Some(a) if a.port != self.port => {
                Err(TaskError::immutable("port", &a.port, &self.port))
            }
            _ => Ok(()),
        }
    }

    fn output(&self, actual: &TargetGroupActual) -> TargetGroupArn {
        TargetGroupArn(actual.arn.clone())
    }

    async fn apply(
        &self,
        ctx: &AwsContext,
        deps: &Outputs,
        actual: Option<&TargetGroupActual>,
        changes: &Changes,
    ) -> Result<TargetGroupArn, TaskError> {
        let elbv2 = ctx.elbv2();
        let Some(actual) = actual else {
            let vpc = deps.get(&self.vpc)?;
            let out = elbv2
                .create_target_group()
                .name(&self.name)
                .protocol(ProtocolEnum::from(self.protocol.as_str()))
                .port(self.port)
                .vpc_id(&vpc.0)
                .target_type(TargetTypeEnum::Instance)
                .health_check_protocol(ProtocolEnum::from(self.health_check_protocol.as_str()))
                .set_health_check_path(self.health_check_path.clone())
                .health_check_interval_seconds(self.health_check_interval)
                .healthy_threshold_count(self.healthy_threshold)
                .unhealthy_threshold_count(self.unhealthy_threshold)
                .set_tags(Some(elbv2_tag_list(&self.tags)))
                .send()
                .await
                .map_err(|e| classify("CreateTargetGroup", &self.name, e))?;
            let arn = out
                .target_groups()
                .first()
                .and_then(|g| g.target_group_arn())
                .ok_or_else(|| {
                    TaskError::fatal(format!(
                        "CreateTargetGroup for `{}` returned no ARN",
                        self.name
                    ))
                })?
                .to_string();
            ctx.remember_created(self.key(), &arn);
            let attribute =
                |k: &str, v: String| TargetGroupAttribute::builder().key(k).value(v).build();
            elbv2
                .modify_target_group_attributes()
                .target_group_arn(&arn)
                .attributes(attribute(
                    "deregistration_delay.timeout_seconds",
                    self.deregistration_delay.to_string(),
                ))
                .attributes(attribute(
                    "deregistration_delay.connection_termination.enabled",
                    self.connection_termination.to_string(),
                ))
                .send()
                .await
                .map_err(|e| classify("ModifyTargetGroupAttributes", &self.name, e))?;
            return Ok(TargetGroupArn(arn));
        };
        let health = [
            "healthCheckProtocol",
            "healthCheckPath",
            "healthCheckInterval",
            "healthyThreshold",
            "unhealthyThreshold",
        ];
        if health.iter().any(|f| changes.has(f)) {
            elbv2
                .modify_target_group()
                .target_group_arn(&actual.arn)
                .health_check_protocol(ProtocolEnum::from(self.health_check_protocol.as_str()))
                .set_health_check_path(self.health_check_path.clone())
                .health_check_interval_seconds(self.health_check_interval)
                .healthy_threshold_count(self.healthy_threshold)
                .unhealthy_threshold_count(self.unhealthy_threshold)
                .send()
                .await
                .map_err(|e| classify("ModifyTargetGroup", &self.name, e))?;
        }
        let missing = tags_to_write(&actual.tags, &self.tags);
        if !missing.is_empty() {
            elbv2
                .add_tags()
                .resource_arns(&actual.arn)
                .set_tags(Some(elbv2_tag_list(&missing)))
                .send()
                .await
                .map_err(|e| classify("AddTags", &self.name, e))?;
        }
        Ok(TargetGroupArn(actual.arn.clone()))
    }
}
