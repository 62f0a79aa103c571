//! Reading ahead: every listing a run's tasks will read, started together
//! at the start of the run instead of one round of calls per level of the
//! task graph. The tasks then find their objects in the context's caches
//! (see `AwsContext`). Only what the graph's task kinds read is listed, so
//! a run makes no call it would not have made anyway.

use std::collections::BTreeSet;

use std::sync::Arc;

use kops_engine::TaskGraph;
use tokio::task::JoinSet;

use crate::context::AwsContext;
use crate::tasks::{
    autoscaling_group::AutoscalingGroup,
    dhcp_options::DhcpOptions,
    ebs_volume::EbsVolume,
    elastic_ip::ElasticIp,
    eventbridge::{EventBridgeRule, EventBridgeTarget},
    iam_instance_profile::IamInstanceProfile,
    iam_role::IamRole,
    internet_gateway::InternetGateway,
    launch_template::LaunchTemplate,
    lifecycle_hook::LifecycleHook,
    listener::Listener,
    nat_gateway::NatGateway,
    network_load_balancer::NetworkLoadBalancer,
    route_table::RouteTable,
    security_group::SecurityGroup,
    sqs_queue::SqsQueue,
    ssh_key::SshKey,
    subnet::Subnet,
    target_group::TargetGroup,
    vpc::Vpc,
};

/// What a run reads ahead: the graph's task kinds, and the autoscaling
/// groups that have lifecycle hook tasks.
#[derive(Debug, Clone, Default)]
pub struct Prefetch {
    kinds: BTreeSet<&'static str>,
    hook_groups: BTreeSet<String>,
    /// SQS queues by name.
    queues: BTreeSet<String>,
    /// EventBridge rules by name.
    rules: BTreeSet<String>,
    /// The rules whose targets are tasks.
    target_rules: BTreeSet<String>,
    /// Machine images: (group, the spec's image text).
    images: BTreeSet<(String, String)>,
    /// The AWS names of the Network Load Balancers the graph manages, and
    /// whether their tasks read attributes.
    load_balancers: BTreeSet<(String, bool)>,
}

impl Prefetch {
    /// The plan of the graph `graph`.
    pub fn of_graph(graph: &TaskGraph<AwsContext>) -> Self {
        let mut plan = Prefetch::default();
        for (key, task) in graph.iter() {
            plan.kinds.insert(key.kind);
            let dependencies = |kind: &str| {
                task.dependencies()
                    .into_iter()
                    .filter(move |d| d.kind == kind)
                    .map(|d| d.name)
                    .collect::<Vec<_>>()
            };
            match key.kind {
                LifecycleHook::KIND => plan
                    .hook_groups
                    .extend(dependencies(AutoscalingGroup::KIND)),
                SqsQueue::KIND => {
                    plan.queues.insert(key.name.clone());
                }
                EventBridgeRule::KIND => {
                    plan.rules.insert(key.name.clone());
                }
                EventBridgeTarget::KIND => plan
                    .target_rules
                    .extend(dependencies(EventBridgeRule::KIND)),
                NetworkLoadBalancer::KIND => {
                    if let Some(lb) = task.as_any().downcast_ref::<NetworkLoadBalancer>() {
                        plan.load_balancers
                            .insert((lb.load_balancer_name.clone(), !lb.attributes.is_empty()));
                    }
                }
                _ => {}
            }
        }
        plan
    }

    fn has(&self, kinds: &[&str]) -> bool {
        kinds.iter().any(|k| self.kinds.contains(k))
    }
}

impl Prefetch {
    /// Adds the machine images of the launch templates (group name and
    /// the spec's image text), read with the listings.
    pub fn with_images(mut self, images: impl IntoIterator<Item = (String, String)>) -> Self {
        self.images.extend(images);
        self
    }
}

impl AwsContext {
    /// Fills the caches `plan` names: every listing side by side, each
    /// followed at once by the reads that need its ids (VPC attributes,
    /// listeners, lifecycle hooks, rule tags and targets). Errors are
    /// dropped: a failed read leaves its cache empty and the task that
    /// reads it asks again (and reports the error, with its retries).
    pub async fn prefetch(self: &Arc<Self>, plan: &Prefetch) {
        let plan = Arc::new(plan.clone());
        let mut reads = JoinSet::new();
        macro_rules! read {
            ($list:ident $(($arg:expr))?, $wanted:expr) => {
                if $wanted {
                    let ctx = Arc::clone(self);
                    reads.spawn(async move {
                        let _ = ctx.$list($($arg)?).await;
                    });
                }
            };
        }
        read!(subnets, plan.has(&[Subnet::KIND]));
        read!(dhcp_options, plan.has(&[DhcpOptions::KIND]));
        read!(internet_gateways, plan.has(&[InternetGateway::KIND]));
        read!(route_tables, plan.has(&[RouteTable::KIND]));
        read!(nat_gateways, plan.has(&[NatGateway::KIND]));
        read!(addresses, plan.has(&[ElasticIp::KIND]));
        read!(security_groups, plan.has(&[SecurityGroup::KIND]));
        read!(key_pairs, plan.has(&[SshKey::KIND]));
        read!(launch_templates, plan.has(&[LaunchTemplate::KIND]));
        // Every template's default version: one call that needs no id.
        read!(
            default_template_version(""),
            plan.has(&[LaunchTemplate::KIND])
        );
        read!(volumes, plan.has(&[EbsVolume::KIND]));
        read!(
            iam_role_detail(""),
            plan.has(&[IamRole::KIND, IamInstanceProfile::KIND])
        );
        for name in &plan.queues {
            let (ctx, name) = (Arc::clone(self), name.clone());
            reads.spawn(async move {
                let _ = ctx.queue(&name, false).await;
            });
        }
        if plan.has(&[LaunchTemplate::KIND]) {
            for (group, spec) in &plan.images {
                let (ctx, group, spec) = (Arc::clone(self), group.clone(), spec.clone());
                reads.spawn(async move {
                    let _ = ctx.image(&group, &spec).await;
                });
            }
        }
        if plan.has(&[Vpc::KIND, Subnet::KIND]) {
            let (ctx, plan) = (Arc::clone(self), Arc::clone(&plan));
            reads.spawn(async move {
                let Ok(vpcs) = ctx.vpcs().await else { return };
                if !plan.has(&[Vpc::KIND]) {
                    return;
                }
                let mut next = JoinSet::new();
                for id in vpcs.iter().filter_map(|v| v.vpc_id()) {
                    let (ctx, id) = (Arc::clone(&ctx), id.to_string());
                    next.spawn(async move {
                        let _ = ctx.vpc_dns_attributes(&id).await;
                    });
                }
                next.join_all().await;
            });
        }
        if plan.has(&[NetworkLoadBalancer::KIND, TargetGroup::KIND, Listener::KIND]) {
            // The graph's balancers are known by their AWS names: their
            // listeners and attributes are read beside the tags that tell
            // the cluster's resources, not after them.
            let (ctx, plan) = (Arc::clone(self), Arc::clone(&plan));
            reads.spawn(async move {
                let Ok((lbs, _)) = ctx.elbv2_listing().await else {
                    return;
                };
                let mut next = JoinSet::new();
                let tags = Arc::clone(&ctx);
                next.spawn(async move {
                    let _ = tags.load_balancers().await;
                });
                for lb in lbs {
                    let (Some(name), Some(arn)) = (lb.load_balancer_name(), lb.load_balancer_arn())
                    else {
                        continue;
                    };
                    let Some((_, attributes)) = plan.load_balancers.iter().find(|(n, _)| n == name)
                    else {
                        continue;
                    };
                    if plan.has(&[Listener::KIND]) {
                        let (ctx, arn) = (Arc::clone(&ctx), arn.to_string());
                        next.spawn(async move {
                            let _ = ctx.listeners(&arn, false).await;
                        });
                    }
                    if *attributes {
                        let (ctx, arn) = (Arc::clone(&ctx), arn.to_string());
                        next.spawn(async move {
                            let _ = ctx.load_balancer_attributes(&arn, false).await;
                        });
                    }
                }
                next.join_all().await;
            });
        }
        if plan.has(&[AutoscalingGroup::KIND]) {
            let (ctx, plan) = (Arc::clone(self), Arc::clone(&plan));
            reads.spawn(async move {
                let Ok(groups) = ctx.autoscaling_groups().await else {
                    return;
                };
                let mut next = JoinSet::new();
                for name in groups.iter().filter_map(|g| g.auto_scaling_group_name()) {
                    if plan.hook_groups.contains(name) {
                        let (ctx, name) = (Arc::clone(&ctx), name.to_string());
                        next.spawn(async move {
                            let _ = ctx.lifecycle_hooks(&name).await;
                        });
                    }
                }
                next.join_all().await;
            });
        }
        if plan.has(&[EventBridgeRule::KIND, EventBridgeTarget::KIND]) {
            let (ctx, plan) = (Arc::clone(self), Arc::clone(&plan));
            reads.spawn(async move {
                let Ok(rules) = ctx.event_rules().await else {
                    return;
                };
                let mut next = JoinSet::new();
                for rule in rules {
                    let (Some(name), Some(arn)) = (rule.name(), rule.arn()) else {
                        continue;
                    };
                    if plan.rules.contains(name) {
                        let (ctx, name, arn) =
                            (Arc::clone(&ctx), name.to_string(), arn.to_string());
                        next.spawn(async move {
                            let _ = ctx.rule_tags(&arn, &name, false).await;
                        });
                    }
                    if plan.target_rules.contains(name) {
                        let (ctx, name) = (Arc::clone(&ctx), name.to_string());
                        next.spawn(async move {
                            let _ = ctx.rule_targets(&name, &name, false).await;
                        });
                    }
                }
                next.join_all().await;
            });
        }
        reads.join_all().await;
    }
}
