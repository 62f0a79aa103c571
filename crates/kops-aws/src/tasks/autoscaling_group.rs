//! The autoscaling group of an instance group, named like its launch
//! template: sizes, subnets, the launch template version to run, the tags
//! propagated to instances (how kops, the cloud controller and the cluster
//! autoscaler find them), suspended processes and the maximum instance
//! lifetime.
//!
//! Found in one `DescribeAutoScalingGroups` per run, filtered by the
//! `KubernetesCluster` tag (see [`AwsContext::autoscaling_groups`]).

use std::collections::BTreeSet;

use aws_sdk_autoscaling::types::{LaunchTemplateSpecification, Tag};
use kops_engine::{Changes, OutputRef, Outputs, Task, TaskError, TaskKey};

use crate::context::{classify, AwsContext, Tags};
use crate::tasks::launch_template::LaunchTemplateOutput;
use crate::tasks::subnet::SubnetId;
use crate::tasks::target_group::TargetGroupArn;
use crate::tasks::{managed_tags, tags_to_write};

/// What the group should be.
#[derive(Debug, Clone, PartialEq)]
pub struct AutoscalingGroup {
    /// The task name and the group's name.
    pub name: String,
    pub launch_template: OutputRef<LaunchTemplateOutput>,
    pub min_size: i32,
    pub max_size: i32,
    pub subnets: Vec<OutputRef<SubnetId>>,
    /// Propagated at launch.
    pub tags: Tags,
    /// Sorted process names (`AZRebalance`, ...).
    pub suspended_processes: BTreeSet<String>,
    /// Seconds; 0 for none.
    pub max_instance_lifetime: i32,
    /// Target groups the group registers its instances in (the API's, for
    /// the control plane).
    pub target_groups: Vec<OutputRef<TargetGroupArn>>,
}

/// What exists.
#[derive(Debug, Clone)]
pub struct AutoscalingGroupActual {
    pub name: String,
    pub launch_template_id: Option<String>,
    pub launch_template_version: Option<String>,
    pub min_size: i32,
    pub max_size: i32,
    /// Sorted subnet ids.
    pub subnets: Vec<String>,
    pub tags: Tags,
    pub suspended_processes: BTreeSet<String>,
    pub max_instance_lifetime: i32,
    /// Sorted target group ARNs.
    pub target_groups: Vec<String>,
}

impl AutoscalingGroup {
    pub const KIND: &'static str = "AutoscalingGroup";

    fn tags_for_api(&self, tags: &Tags) -> Vec<Tag> {
        tags.iter()
            .map(|(k, v)| {
                Tag::builder()
                    .resource_id(&self.name)
                    .resource_type("auto-scaling-group")
                    .key(k)
                    .value(v)
                    .propagate_at_launch(true)
                    .build()
            })
            .collect()
    }

    /// Subnet ids, sorted; unknown ones (a dry run) as `<Subnet/name>`.
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

    /// Target group ARNs, sorted; unknown ones (a dry run) as `<TargetGroup/name>`.
    fn target_group_arns(&self, deps: &Outputs) -> Result<Vec<String>, TaskError> {
        let mut arns = Vec::new();
        for group in &self.target_groups {
            arns.push(match deps.try_get(group)? {
                Some(arn) => arn.0.clone(),
                None => format!("<{}>", group.key()),
            });
        }
        arns.sort();
        Ok(arns)
    }
}

fn actual_of(group: &aws_sdk_autoscaling::types::AutoScalingGroup) -> AutoscalingGroupActual {
    let template = group.launch_template();
    let mut subnets: Vec<String> = group
        .vpc_zone_identifier()
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    subnets.sort();
    AutoscalingGroupActual {
        name: group
            .auto_scaling_group_name()
            .unwrap_or_default()
            .to_string(),
        launch_template_id: template
            .and_then(|t| t.launch_template_id())
            .map(str::to_string),
        launch_template_version: template.and_then(|t| t.version()).map(str::to_string),
        min_size: group.min_size().unwrap_or_default(),
        max_size: group.max_size().unwrap_or_default(),
        subnets,
        tags: group
            .tags()
            .iter()
            .filter_map(|t| {
                Some((
                    t.key()?.to_string(),
                    t.value().unwrap_or_default().to_string(),
                ))
            })
            .collect(),
        suspended_processes: group
            .suspended_processes()
            .iter()
            .filter_map(|p| p.process_name().map(str::to_string))
            .collect(),
        max_instance_lifetime: group.max_instance_lifetime().unwrap_or_default(),
        target_groups: {
            let mut arns = group.target_group_arns().to_vec();
            arns.sort();
            arns
        },
    }
}

impl Task<AwsContext> for AutoscalingGroup {
    type Actual = AutoscalingGroupActual;
    type Output = ();

    fn key(&self) -> TaskKey {
        TaskKey::new(Self::KIND, &self.name)
    }

    fn dependencies(&self) -> Vec<TaskKey> {
        let mut keys = vec![self.launch_template.key().clone()];
        keys.extend(self.subnets.iter().map(|s| s.key().clone()));
        keys.extend(self.target_groups.iter().map(|g| g.key().clone()));
        keys
    }

    async fn find(
        &self,
        ctx: &AwsContext,
        _: &Outputs,
    ) -> Result<Option<AutoscalingGroupActual>, TaskError> {
        if let Some(group) = ctx
            .autoscaling_groups()
            .await?
            .iter()
            .find(|g| g.auto_scaling_group_name() == Some(self.name.as_str()))
        {
            return Ok(Some(actual_of(group)));
        }
        if ctx.created_id(&self.key()).is_none() {
            return Ok(None);
        }
        // Created earlier in this run (a retried apply).
        let out = ctx
            .autoscaling()
            .describe_auto_scaling_groups()
            .auto_scaling_group_names(&self.name)
            .send()
            .await
            .map_err(|e| classify("DescribeAutoScalingGroups", &self.name, e))?;
        Ok(out.auto_scaling_groups().first().map(actual_of))
    }

    fn diff(
        &self,
        actual: Option<&AutoscalingGroupActual>,
        deps: &Outputs,
    ) -> Result<Changes, TaskError> {
        let template = deps.try_get(&self.launch_template)?;
        let tags = actual.map(|a| managed_tags(&a.tags, &self.tags));
        let mut changes = Changes::new();
        changes
            .compare_reference(
                "launchTemplate",
                actual
                    .map(|a| a.launch_template_id.clone().unwrap_or_default())
                    .as_ref(),
                template.map(|t| t.id.clone()).as_ref(),
                self.launch_template.key(),
            )
            .compare_reference(
                "launchTemplateVersion",
                actual
                    .map(|a| a.launch_template_version.clone().unwrap_or_default())
                    .as_ref(),
                template.map(|t| t.version.to_string()).as_ref(),
                self.launch_template.key(),
            )
            .compare("minSize", actual.map(|a| &a.min_size), &self.min_size)
            .compare("maxSize", actual.map(|a| &a.max_size), &self.max_size)
            .compare(
                "subnets",
                actual.map(|a| &a.subnets),
                &self.subnet_ids(deps)?,
            )
            .compare("tags", tags.as_ref(), &self.tags);
        // Left out of a create when there are none.
        if actual.is_some() || !self.suspended_processes.is_empty() {
            changes.compare(
                "suspendedProcesses",
                actual.map(|a| &a.suspended_processes),
                &self.suspended_processes,
            );
        }
        if actual.is_some() || !self.target_groups.is_empty() {
            changes.compare(
                "targetGroups",
                actual.map(|a| &a.target_groups),
                &self.target_group_arns(deps)?,
            );
        }
        if actual.is_some() || self.max_instance_lifetime != 0 {
            changes.compare(
                "maxInstanceLifetime",
                actual.map(|a| &a.max_instance_lifetime),
                &self.max_instance_lifetime,
            );
        }
        Ok(changes)
    }

    fn output(&self, _: &AutoscalingGroupActual) {}

    async fn apply(
        &self,
        ctx: &AwsContext,
        deps: &Outputs,
        actual: Option<&AutoscalingGroupActual>,
        changes: &Changes,
    ) -> Result<(), TaskError> {
        let template = deps.get(&self.launch_template)?;
        let template_spec = LaunchTemplateSpecification::builder()
            .launch_template_id(&template.id)
            .version(template.version.to_string())
            .build();
        let mut subnets = Vec::new();
        for subnet in &self.subnets {
            subnets.push(deps.get(subnet)?.0.clone());
        }
        subnets.sort();
        let mut target_groups = Vec::new();
        for group in &self.target_groups {
            target_groups.push(deps.get(group)?.0.clone());
        }
        target_groups.sort();
        let lifetime = (self.max_instance_lifetime > 0).then_some(self.max_instance_lifetime);
        let autoscaling = ctx.autoscaling();
        let current_processes = match actual {
            None => {
                let created = autoscaling
                    .create_auto_scaling_group()
                    .auto_scaling_group_name(&self.name)
                    .launch_template(template_spec)
                    .min_size(self.min_size)
                    .max_size(self.max_size)
                    .vpc_zone_identifier(subnets.join(","))
                    .set_tags(Some(self.tags_for_api(&self.tags)))
                    .set_max_instance_lifetime(lifetime)
                    .set_target_group_arns(
                        (!target_groups.is_empty()).then(|| target_groups.clone()),
                    )
                    .send()
                    .await;
                match created {
                    Ok(_) => {}
                    // An earlier attempt created it and lost the answer.
                    Err(e)
                        if aws_smithy_types::error::metadata::ProvideErrorMetadata::code(&e)
                            == Some("AlreadyExists") => {}
                    Err(e) => return Err(classify("CreateAutoScalingGroup", &self.name, e)),
                }
                ctx.remember_created(self.key(), &self.name);
                BTreeSet::new()
            }
            Some(actual) => {
                let update = [
                    "launchTemplate",
                    "launchTemplateVersion",
                    "minSize",
                    "maxSize",
                    "subnets",
                    "maxInstanceLifetime",
                ]
                .iter()
                .any(|f| changes.has(f));
                if update {
                    autoscaling
                        .update_auto_scaling_group()
                        .auto_scaling_group_name(&self.name)
                        .launch_template(template_spec)
                        .min_size(self.min_size)
                        .max_size(self.max_size)
                        .vpc_zone_identifier(subnets.join(","))
                        .max_instance_lifetime(self.max_instance_lifetime)
                        .send()
                        .await
                        .map_err(|e| classify("UpdateAutoScalingGroup", &self.name, e))?;
                }
                let attach: Vec<String> = target_groups
                    .iter()
                    .filter(|a| !actual.target_groups.contains(a))
                    .cloned()
                    .collect();
                if !attach.is_empty() {
                    autoscaling
                        .attach_load_balancer_target_groups()
                        .auto_scaling_group_name(&self.name)
                        .set_target_group_arns(Some(attach))
                        .send()
                        .await
                        .map_err(|e| classify("AttachLoadBalancerTargetGroups", &self.name, e))?;
                }
                let detach: Vec<String> = actual
                    .target_groups
                    .iter()
                    .filter(|a| !target_groups.contains(a))
                    .cloned()
                    .collect();
                if !detach.is_empty() {
                    autoscaling
                        .detach_load_balancer_target_groups()
                        .auto_scaling_group_name(&self.name)
                        .set_target_group_arns(Some(detach))
                        .send()
                        .await
                        .map_err(|e| classify("DetachLoadBalancerTargetGroups", &self.name, e))?;
                }
                let missing = tags_to_write(&actual.tags, &self.tags);
                if !missing.is_empty() {
                    autoscaling
                        .create_or_update_tags()
                        .set_tags(Some(self.tags_for_api(&missing)))
                        .send()
                        .await
                        .map_err(|e| classify("CreateOrUpdateTags", &self.name, e))?;
                }
                actual.suspended_processes.clone()
            }
        };
        let suspend: Vec<String> = self
            .suspended_processes
            .difference(&current_processes)
            .cloned()
            .collect();
        if !suspend.is_empty() {
            autoscaling
                .suspend_processes()
                .auto_scaling_group_name(&self.name)
                .set_scaling_processes(Some(suspend))
                .send()
                .await
                .map_err(|e| classify("SuspendProcesses", &self.name, e))?;
        }
        let resume: Vec<String> = current_processes
            .difference(&self.suspended_processes)
            .cloned()
            .collect();
        if !resume.is_empty() {
            autoscaling
                .resume_processes()
                .auto_scaling_group_name(&self.name)
                .set_scaling_processes(Some(resume))
                .send()
                .await
                .map_err(|e| classify("ResumeProcesses", &self.name, e))?;
        }
        Ok(())
    }
}
