//! The autoscaling group of an instance group, named like its launch
//! template: sizes, subnets, the launch template version to run, the tags
//! propagated to instances (how kops, the cloud controller and the cluster
//! autoscaler find them), suspended processes and the maximum instance
//! lifetime, a mixed-instances policy (several instance types, spot and
//! on-demand shares) and a warm pool.
//!
//! Found in one `DescribeAutoScalingGroups` per run, filtered by the
//! `KubernetesCluster` tag (see [`AwsContext::autoscaling_groups`]).

use std::collections::BTreeSet;

use aws_sdk_autoscaling::types::{
    InstancesDistribution, LaunchTemplate, LaunchTemplateOverrides, LaunchTemplateSpecification,
    MixedInstancesPolicy, Tag,
};
use kops_engine::{Changes, OutputRef, Outputs, Task, TaskError, TaskKey};

use crate::context::{classify, AwsContext, Tags};
use crate::tasks::launch_template::LaunchTemplateOutput;
use crate::tasks::network_load_balancer::LoadBalancerOutput;
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
    /// Several instance types and the spot/on-demand split
    /// (`spec.mixedInstancesPolicy`); `None`: the template's type only.
    pub mixed_instances: Option<MixedInstances>,
    /// Pre-initialised instances kept stopped (`spec.warmPool`).
    pub warm_pool: Option<WarmPool>,
    /// Group metrics collected every minute (kops enables the group sizes,
    /// and the warm pool's with one).
    pub enabled_metrics: BTreeSet<String>,
    /// Classic load balancers made outside the cluster the instances
    /// register with (`spec.externalLoadBalancers[].loadBalancerName`).
    pub load_balancer_names: BTreeSet<String>,
    /// The cluster's own Classic ELBs the instances register with (the
    /// API's, for a cluster kops 1.36 or earlier made with a Classic
    /// balancer); their output's `arn` is the balancer's name.
    pub classic_load_balancers: Vec<OutputRef<LoadBalancerOutput>>,
    /// Target groups made outside the cluster
    /// (`spec.externalLoadBalancers[].targetGroupArn`).
    pub external_target_group_arns: Vec<String>,
}

/// The granularity of the group metrics.
pub const METRICS_GRANULARITY: &str = "1Minute";

/// A mixed-instances policy: the launch template with instance-type
/// overrides, and how capacity splits between on-demand and spot.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MixedInstances {
    /// Instance types, in order of preference.
    pub instance_types: Vec<String>,
    pub on_demand_allocation_strategy: Option<String>,
    pub on_demand_base: Option<i32>,
    /// Percent of the capacity above the base that is on-demand.
    pub on_demand_above_base: Option<i32>,
    pub spot_allocation_strategy: Option<String>,
    pub spot_instance_pools: Option<i32>,
    /// Empty: the on-demand price.
    pub spot_max_price: Option<String>,
}

/// A warm pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WarmPool {
    pub min_size: i32,
    /// `None`: up to the group's maximum size.
    pub max_group_prepared_capacity: Option<i32>,
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
    pub mixed_instances: Option<MixedInstances>,
    pub warm_pool: Option<WarmPool>,
    pub enabled_metrics: BTreeSet<String>,
    pub load_balancer_names: BTreeSet<String>,
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
        let mut arns = self.external_target_group_arns.clone();
        for group in &self.target_groups {
            arns.push(match deps.try_get(group)? {
                Some(arn) => arn.0.clone(),
                None => format!("<{}>", group.key()),
            });
        }
        arns.sort();
        Ok(arns)
    }

    /// The Classic ELB names to register with: the external ones and the
    /// cluster's own; an own one not made yet (a dry run) as
    /// `<ClassicLoadBalancer/name>`.
    fn all_load_balancer_names(&self, deps: &Outputs) -> Result<BTreeSet<String>, TaskError> {
        let mut names = self.load_balancer_names.clone();
        for balancer in &self.classic_load_balancers {
            names.insert(match deps.try_get(balancer)? {
                Some(out) => out.arn.clone(),
                None => format!("<{}>", balancer.key()),
            });
        }
        Ok(names)
    }
}

/// The names in `a` that are not in `b`: what to attach, detach, suspend
/// or resume.
fn only_in<'a>(
    a: impl IntoIterator<Item = &'a String>,
    b: impl IntoIterator<Item = &'a String> + Clone,
) -> Vec<String> {
    a.into_iter()
        .filter(|x| !b.clone().into_iter().any(|y| y == *x))
        .cloned()
        .collect()
}

fn mixed_of(policy: &MixedInstancesPolicy) -> MixedInstances {
    let distribution = policy.instances_distribution();
    MixedInstances {
        instance_types: policy
            .launch_template()
            .map(|t| {
                t.overrides()
                    .iter()
                    .filter_map(|o| o.instance_type().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default(),
        on_demand_allocation_strategy: distribution
            .and_then(|d| d.on_demand_allocation_strategy())
            .map(str::to_string),
        on_demand_base: distribution.and_then(|d| d.on_demand_base_capacity()),
        on_demand_above_base: distribution
            .and_then(|d| d.on_demand_percentage_above_base_capacity()),
        spot_allocation_strategy: distribution
            .and_then(|d| d.spot_allocation_strategy())
            .map(str::to_string),
        spot_instance_pools: distribution.and_then(|d| d.spot_instance_pools()),
        spot_max_price: distribution
            .and_then(|d| d.spot_max_price())
            .map(str::to_string),
    }
}

impl MixedInstances {
    /// The policy for the API, running `template`.
    fn to_api(&self, template: LaunchTemplateSpecification) -> MixedInstancesPolicy {
        let overrides = self
            .instance_types
            .iter()
            .map(|t| LaunchTemplateOverrides::builder().instance_type(t).build())
            .collect();
        MixedInstancesPolicy::builder()
            .launch_template(
                LaunchTemplate::builder()
                    .launch_template_specification(template)
                    .set_overrides(Some(overrides))
                    .build(),
            )
            .instances_distribution(
                InstancesDistribution::builder()
                    .set_on_demand_allocation_strategy(self.on_demand_allocation_strategy.clone())
                    .set_on_demand_base_capacity(self.on_demand_base)
                    .set_on_demand_percentage_above_base_capacity(self.on_demand_above_base)
                    .set_spot_allocation_strategy(self.spot_allocation_strategy.clone())
                    .set_spot_instance_pools(self.spot_instance_pools)
                    .set_spot_max_price(self.spot_max_price.clone())
                    .build(),
            )
            .build()
    }

    /// The fields AWS defaults when they are not given, compared only
    /// when the spec sets them.
    fn compare(&self, actual: Option<&MixedInstances>, changes: &mut Changes) {
        changes.compare(
            "mixedInstances.instanceTypes",
            actual.map(|a| &a.instance_types),
            &self.instance_types,
        );
        let mut optional = |field: &'static str, a: Option<Option<&i32>>, e: &Option<i32>| {
            if let Some(e) = e {
                changes.compare(field, a.map(|a| a.unwrap_or(&-1)), e);
            }
        };
        optional(
            "mixedInstances.onDemandBase",
            actual.map(|a| a.on_demand_base.as_ref()),
            &self.on_demand_base,
        );
        optional(
            "mixedInstances.onDemandAboveBase",
            actual.map(|a| a.on_demand_above_base.as_ref()),
            &self.on_demand_above_base,
        );
        optional(
            "mixedInstances.spotInstancePools",
            actual.map(|a| a.spot_instance_pools.as_ref()),
            &self.spot_instance_pools,
        );
        for (field, a, e) in [
            (
                "mixedInstances.onDemandAllocationStrategy",
                actual.map(|a| a.on_demand_allocation_strategy.clone().unwrap_or_default()),
                &self.on_demand_allocation_strategy,
            ),
            (
                "mixedInstances.spotAllocationStrategy",
                actual.map(|a| a.spot_allocation_strategy.clone().unwrap_or_default()),
                &self.spot_allocation_strategy,
            ),
        ] {
            if let Some(e) = e {
                changes.compare(field, a.as_ref(), e);
            }
        }
    }
}

/// The version a group runs, as a number when it can be known: kops points
/// its groups at `$Latest` (and `$Default` is the template's default), which
/// is the version kops-rs would write when the template's latest (or
/// default) version is that one; then the group needs no change for its
/// version alone.
fn running_version(version: Option<&str>, template: Option<&LaunchTemplateOutput>) -> String {
    match (version, template) {
        (Some("$Latest"), Some(t)) if t.latest_version == t.version => t.version.to_string(),
        (Some("$Default"), Some(t)) => t.version.to_string(),
        (v, _) => v.unwrap_or_default().to_string(),
    }
}

fn actual_of(group: &aws_sdk_autoscaling::types::AutoScalingGroup) -> AutoscalingGroupActual {
    let mixed = group.mixed_instances_policy();
    let template = group.launch_template().or_else(|| {
        mixed
            .and_then(|m| m.launch_template())
            .and_then(|t| t.launch_template_specification())
    });
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
        mixed_instances: mixed.map(mixed_of),
        load_balancer_names: group.load_balancer_names().iter().cloned().collect(),
        enabled_metrics: group
            .enabled_metrics()
            .iter()
            .filter_map(|m| m.metric().map(str::to_string))
            .collect(),
        warm_pool: group.warm_pool_configuration().map(|w| WarmPool {
            min_size: w.min_size().unwrap_or_default(),
            max_group_prepared_capacity: w.max_group_prepared_capacity().filter(|c| *c >= 0),
        }),
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
        keys.extend(self.classic_load_balancers.iter().map(|l| l.key().clone()));
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
                    .map(|a| running_version(a.launch_template_version.as_deref(), template))
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
        match (
            &self.mixed_instances,
            actual.and_then(|a| a.mixed_instances.as_ref()),
        ) {
            (Some(expected), found) => expected.compare(found, &mut changes),
            (None, Some(found)) => {
                changes.compare(
                    "mixedInstances.instanceTypes",
                    Some(&found.instance_types),
                    &Vec::new(),
                );
            }
            (None, None) => {}
        }
        let load_balancer_names = self.all_load_balancer_names(deps)?;
        if actual.is_some() || !load_balancer_names.is_empty() {
            changes.compare(
                "loadBalancerNames",
                actual.map(|a| &a.load_balancer_names),
                &load_balancer_names,
            );
        }
        if actual.is_some() || !self.enabled_metrics.is_empty() {
            changes.compare(
                "enabledMetrics",
                actual.map(|a| &a.enabled_metrics),
                &self.enabled_metrics,
            );
        }
        if actual.is_some() || self.warm_pool.is_some() {
            changes.compare(
                "warmPool.minSize",
                actual
                    .map(|a| a.warm_pool.as_ref().map(|w| w.min_size))
                    .as_ref(),
                &self.warm_pool.as_ref().map(|w| w.min_size),
            );
            changes.compare(
                "warmPool.maxGroupPreparedCapacity",
                actual
                    .map(|a| {
                        a.warm_pool
                            .as_ref()
                            .and_then(|w| w.max_group_prepared_capacity)
                    })
                    .as_ref(),
                &self
                    .warm_pool
                    .as_ref()
                    .and_then(|w| w.max_group_prepared_capacity),
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
        let mut target_groups = self.external_target_group_arns.clone();
        for group in &self.target_groups {
            target_groups.push(deps.get(group)?.0.clone());
        }
        target_groups.sort();
        let load_balancer_names = self.all_load_balancer_names(deps)?;
        let lifetime = (self.max_instance_lifetime > 0).then_some(self.max_instance_lifetime);
        let autoscaling = ctx.autoscaling();
        let current_processes = match actual {
            None => {
                let (plain, mixed) = match &self.mixed_instances {
                    Some(m) => (None, Some(m.to_api(template_spec))),
                    None => (Some(template_spec), None),
                };
                let created = autoscaling
                    .create_auto_scaling_group()
                    .auto_scaling_group_name(&self.name)
                    .set_launch_template(plain)
                    .set_mixed_instances_policy(mixed)
                    .min_size(self.min_size)
                    .max_size(self.max_size)
                    .vpc_zone_identifier(subnets.join(","))
                    .set_tags(Some(self.tags_for_api(&self.tags)))
                    .set_max_instance_lifetime(lifetime)
                    .set_target_group_arns(
                        (!target_groups.is_empty()).then(|| target_groups.clone()),
                    )
                    .set_load_balancer_names(
                        (!load_balancer_names.is_empty())
                            .then(|| load_balancer_names.iter().cloned().collect()),
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
                .any(|f| changes.has(f))
                    || changes
                        .iter()
                        .any(|c| c.field.starts_with("mixedInstances."));
                if update {
                    let (plain, mixed) = match &self.mixed_instances {
                        Some(m) => (None, Some(m.to_api(template_spec))),
                        None => (Some(template_spec), None),
                    };
                    autoscaling
                        .update_auto_scaling_group()
                        .auto_scaling_group_name(&self.name)
                        .set_launch_template(plain)
                        .set_mixed_instances_policy(mixed)
                        .min_size(self.min_size)
                        .max_size(self.max_size)
                        .vpc_zone_identifier(subnets.join(","))
                        .max_instance_lifetime(self.max_instance_lifetime)
                        .send()
                        .await
                        .map_err(|e| classify("UpdateAutoScalingGroup", &self.name, e))?;
                }
                let attach = only_in(&target_groups, &actual.target_groups);
                if !attach.is_empty() {
                    autoscaling
                        .attach_load_balancer_target_groups()
                        .auto_scaling_group_name(&self.name)
                        .set_target_group_arns(Some(attach))
                        .send()
                        .await
                        .map_err(|e| classify("AttachLoadBalancerTargetGroups", &self.name, e))?;
                }
                let detach = only_in(&actual.target_groups, &target_groups);
                if !detach.is_empty() {
                    autoscaling
                        .detach_load_balancer_target_groups()
                        .auto_scaling_group_name(&self.name)
                        .set_target_group_arns(Some(detach))
                        .send()
                        .await
                        .map_err(|e| classify("DetachLoadBalancerTargetGroups", &self.name, e))?;
                }
                let attach = only_in(&load_balancer_names, &actual.load_balancer_names);
                if !attach.is_empty() {
                    autoscaling
                        .attach_load_balancers()
                        .auto_scaling_group_name(&self.name)
                        .set_load_balancer_names(Some(attach))
                        .send()
                        .await
                        .map_err(|e| classify("AttachLoadBalancers", &self.name, e))?;
                }
                let detach = only_in(&actual.load_balancer_names, &load_balancer_names);
                if !detach.is_empty() {
                    autoscaling
                        .detach_load_balancers()
                        .auto_scaling_group_name(&self.name)
                        .set_load_balancer_names(Some(detach))
                        .send()
                        .await
                        .map_err(|e| classify("DetachLoadBalancers", &self.name, e))?;
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
        if changes.has("enabledMetrics") {
            let current = actual
                .map(|a| a.enabled_metrics.clone())
                .unwrap_or_default();
            let disable: Vec<String> = current.difference(&self.enabled_metrics).cloned().collect();
            if !disable.is_empty() {
                autoscaling
                    .disable_metrics_collection()
                    .auto_scaling_group_name(&self.name)
                    .set_metrics(Some(disable))
                    .send()
                    .await
                    .map_err(|e| classify("DisableMetricsCollection", &self.name, e))?;
            }
            if !self.enabled_metrics.is_empty() {
                autoscaling
                    .enable_metrics_collection()
                    .auto_scaling_group_name(&self.name)
                    .granularity(METRICS_GRANULARITY)
                    .set_metrics(Some(self.enabled_metrics.iter().cloned().collect()))
                    .send()
                    .await
                    .map_err(|e| classify("EnableMetricsCollection", &self.name, e))?;
            }
        }
        if changes.has("warmPool.minSize") || changes.has("warmPool.maxGroupPreparedCapacity") {
            match &self.warm_pool {
                Some(pool) => {
                    autoscaling
                        .put_warm_pool()
                        .auto_scaling_group_name(&self.name)
                        .min_size(pool.min_size)
                        .max_group_prepared_capacity(pool.max_group_prepared_capacity.unwrap_or(-1))
                        .send()
                        .await
                        .map_err(|e| classify("PutWarmPool", &self.name, e))?;
                }
                None => {
                    autoscaling
                        .delete_warm_pool()
                        .auto_scaling_group_name(&self.name)
                        .force_delete(true)
                        .send()
                        .await
                        .map_err(|e| classify("DeleteWarmPool", &self.name, e))?;
                }
            }
        }
        let suspend = only_in(&self.suspended_processes, &current_processes);
        if !suspend.is_empty() {
            autoscaling
                .suspend_processes()
                .auto_scaling_group_name(&self.name)
                .set_scaling_processes(Some(suspend))
                .send()
                .await
                .map_err(|e| classify("SuspendProcesses", &self.name, e))?;
        }
        let resume = only_in(&current_processes, &self.suspended_processes);
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
