//! The context every AWS task runs in: the clients, the cluster's identity,
//! and batched discovery. Each resource type is described once per run with
//! the cluster's tag filter and cached; tasks then look themselves up in the
//! cache by their `Name` tag. A run of N subnets makes one DescribeSubnets
//! call, not N.

use std::collections::BTreeMap;

use aws_sdk_ec2::types::{Filter, Tag};
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use kops_engine::{TaskError, TaskKey};
use tokio::sync::OnceCell;

use crate::AwsCloud;

pub use kops_model::tags::{owned_tags, Tags, TAG_CLUSTER, TAG_CLUSTER_PREFIX, TAG_NAME};

/// Defines a batched, cached discovery accessor: one paginated, filtered
/// Describe call per run for the resource type, kept in the field of the
/// same name. An optional last argument is the page size to ask for (the API's
/// largest), so that a cluster of 100 groups is one page, not seven.
macro_rules! discover {
    ($name:ident, $ty:ident, $call:ident, $filter_method:ident, $filter:ident, $operation:literal $(, $page:expr)?) => {
        pub async fn $name(&self) -> Result<&[aws_sdk_ec2::types::$ty], TaskError> {
            self.$name
                .get_or_try_init(|| async {
                    self.ec2()
                        .$call()
                        .$filter_method(self.$filter())
                        $(.max_results($page))?
                        .into_paginator()
                        .items()
                        .send()
                        .collect::<Result<Vec<_>, _>>()
                        .await
                        .map_err(|e| classify($operation, &self.cluster, e))
                })
                .await
                .map(Vec::as_slice)
        }
    };
}

/// Values computed once per key and run (an image per spec text, a zone's
/// records per zone id), however many tasks ask at the same time.
type PerKey<T> = std::sync::Mutex<BTreeMap<String, std::sync::Arc<OnceCell<T>>>>;

/// The cell of `key` in `map`, made on first use.
fn cell_of<T>(map: &PerKey<T>, key: &str) -> Result<std::sync::Arc<OnceCell<T>>, TaskError> {
    let mut map = map
        .lock()
        .map_err(|_| TaskError::fatal("a discovery cache lock was poisoned"))?;
    Ok(std::sync::Arc::clone(
        map.entry(key.to_string()).or_default(),
    ))
}

/// Every ELBv2 load balancer and target group of the account.
type Elbv2Listing = (
    Vec<aws_sdk_elasticloadbalancingv2::types::LoadBalancer>,
    Vec<aws_sdk_elasticloadbalancingv2::types::TargetGroup>,
);

/// The cluster's ELBv2 load balancers and target groups, each with its tags.
type Elbv2Resources = (
    Vec<(aws_sdk_elasticloadbalancingv2::types::LoadBalancer, Tags)>,
    Vec<(aws_sdk_elasticloadbalancingv2::types::TargetGroup, Tags)>,
);

/// The context of one `update cluster` / `delete cluster` run.
#[derive(Debug)]
pub struct AwsContext {
    pub cloud: AwsCloud,
    pub cluster: String,
    /// The cluster's `cloudLabels`, added to every resource's tags.
    pub cloud_labels: Tags,
    vpcs: OnceCell<Vec<aws_sdk_ec2::types::Vpc>>,
    subnets: OnceCell<Vec<aws_sdk_ec2::types::Subnet>>,
    dhcp_options: OnceCell<Vec<aws_sdk_ec2::types::DhcpOptions>>,
    internet_gateways: OnceCell<Vec<aws_sdk_ec2::types::InternetGateway>>,
    route_tables: OnceCell<Vec<aws_sdk_ec2::types::RouteTable>>,
    nat_gateways: OnceCell<Vec<aws_sdk_ec2::types::NatGateway>>,
    addresses: OnceCell<Vec<aws_sdk_ec2::types::Address>>,
    security_groups: OnceCell<Vec<aws_sdk_ec2::types::SecurityGroup>>,
    key_pairs: OnceCell<Vec<aws_sdk_ec2::types::KeyPairInfo>>,
    launch_templates: OnceCell<Vec<aws_sdk_ec2::types::LaunchTemplate>>,
    volumes: OnceCell<Vec<aws_sdk_ec2::types::Volume>>,
    autoscaling_groups: OnceCell<Vec<aws_sdk_autoscaling::types::AutoScalingGroup>>,
    /// Every ELBv2 load balancer and target group of the account, before
    /// the tags say which are the cluster's.
    elbv2_listing: OnceCell<Elbv2Listing>,
    elbv2_resources: OnceCell<Elbv2Resources>,
    /// Load balancer attributes by ARN, read once per balancer and run.
    lb_attributes: PerKey<Vec<(String, String)>>,
    event_rules: OnceCell<Vec<aws_sdk_eventbridge::types::Rule>>,
    /// Every IAM role of the account with its inline and attached policies,
    /// by name: `None` when the account refuses GetAccountAuthorizationDetails
    /// (then each task reads its role itself).
    iam_roles: OnceCell<Option<BTreeMap<String, aws_sdk_iam::types::RoleDetail>>>,
    /// The default version of every launch template of the account, by
    /// template id (see `default_template_version`).
    default_template_versions:
        OnceCell<BTreeMap<String, aws_sdk_ec2::types::LaunchTemplateVersion>>,
    /// Tasks that have looked themselves up once in this run (see
    /// `first_look`).
    looked: std::sync::Mutex<std::collections::BTreeSet<TaskKey>>,
    /// Listeners by load balancer ARN: one paginated DescribeListeners per
    /// load balancer and run, however many listener tasks it has.
    listeners: PerKey<Vec<aws_sdk_elasticloadbalancingv2::types::Listener>>,
    /// Route 53 records by hosted zone id, listed once per zone and run.
    record_sets: PerKey<Vec<aws_sdk_route53::types::ResourceRecordSet>>,
    /// Machine images by the spec's text (`ami-...` or `owner/name`),
    /// resolved once per run however many groups share them.
    images: PerKey<Image>,
    /// Existing security groups named by id (`securityGroupOverride`):
    /// not the cluster's, so not in `security_groups`; described once per
    /// id and run.
    shared_security_groups: PerKey<Option<aws_sdk_ec2::types::SecurityGroup>>,
    /// A VPC's (`enableDnsHostnames`, `enableDnsSupport`) by VPC id: both
    /// read side by side, once per run (see `vpc_dns_attributes`).
    vpc_dns: PerKey<(bool, bool)>,
    /// The lifecycle hooks of an autoscaling group by its name: one
    /// DescribeLifecycleHooks per group and run, however many hooks it has.
    lifecycle_hooks: PerKey<Vec<aws_sdk_autoscaling::types::LifecycleHook>>,
    /// EventBridge rule tags by rule ARN, read once per run.
    rule_tags: PerKey<Tags>,
    /// EventBridge rule targets by rule name, read once per run; `None`
    /// when the rule does not exist.
    rule_targets: PerKey<Option<Vec<aws_sdk_eventbridge::types::Target>>>,
    /// The cluster's Classic ELBs with their tags, listed once per run for
    /// the tasks that retire an old one (see `classic_load_balancer`).
    pub(crate) classic_balancers: OnceCell<
        Vec<(
            aws_sdk_elasticloadbalancing::types::LoadBalancerDescription,
            Tags,
        )>,
    >,
    /// SQS queues by name, read once per run; `None` when there is none.
    queues: PerKey<Option<crate::tasks::sqs_queue::SqsQueueActual>>,
    /// Ids of objects created in this run, by task: the caches above were
    /// filled before they existed, so a task retried after its create (a
    /// later call of its apply failed, a NAT gateway still pending) finds
    /// its object here instead of creating a second one.
    created: std::sync::Mutex<BTreeMap<TaskKey, String>>,
}

impl AwsContext {
    pub fn new(cloud: AwsCloud, cluster: impl Into<String>, cloud_labels: Tags) -> Self {
        AwsContext {
            cloud,
            cluster: cluster.into(),
            cloud_labels,
            vpcs: OnceCell::new(),
            subnets: OnceCell::new(),
            dhcp_options: OnceCell::new(),
            internet_gateways: OnceCell::new(),
            route_tables: OnceCell::new(),
            nat_gateways: OnceCell::new(),
            addresses: OnceCell::new(),
            security_groups: OnceCell::new(),
            key_pairs: OnceCell::new(),
            launch_templates: OnceCell::new(),
            volumes: OnceCell::new(),
            autoscaling_groups: OnceCell::new(),
            elbv2_listing: OnceCell::new(),
            elbv2_resources: OnceCell::new(),
            lb_attributes: std::sync::Mutex::default(),
            event_rules: OnceCell::new(),
            iam_roles: OnceCell::new(),
            listeners: std::sync::Mutex::default(),
            default_template_versions: OnceCell::new(),
            looked: std::sync::Mutex::default(),
            record_sets: std::sync::Mutex::default(),
            images: std::sync::Mutex::default(),
            shared_security_groups: std::sync::Mutex::default(),
            vpc_dns: std::sync::Mutex::default(),
            lifecycle_hooks: std::sync::Mutex::default(),
            rule_tags: std::sync::Mutex::default(),
            rule_targets: std::sync::Mutex::default(),
            classic_balancers: OnceCell::new(),
            queues: std::sync::Mutex::default(),
            created: std::sync::Mutex::default(),
        }
    }

    pub fn ec2(&self) -> &aws_sdk_ec2::Client {
        self.cloud.ec2()
    }

    pub fn iam(&self) -> &aws_sdk_iam::Client {
        self.cloud.iam()
    }

    pub fn autoscaling(&self) -> &aws_sdk_autoscaling::Client {
        self.cloud.autoscaling()
    }

    pub fn elbv2(&self) -> &aws_sdk_elasticloadbalancingv2::Client {
        self.cloud.elbv2()
    }

    /// The cluster's ELBv2 load balancers with their tags (see `elbv2_resources`).
    pub async fn load_balancers(
        &self,
    ) -> Result<&[(aws_sdk_elasticloadbalancingv2::types::LoadBalancer, Tags)], TaskError> {
        Ok(&self.elbv2_resources().await?.0)
    }

    /// The cluster's target groups with their tags (see `elbv2_resources`).
    pub async fn target_groups(
        &self,
    ) -> Result<&[(aws_sdk_elasticloadbalancingv2::types::TargetGroup, Tags)], TaskError> {
        Ok(&self.elbv2_resources().await?.1)
    }

    /// Every ELBv2 load balancer and target group of the account: one
    /// paginated DescribeLoadBalancers and one DescribeTargetGroups per run,
    /// side by side.
    pub async fn elbv2_listing(&self) -> Result<&Elbv2Listing, TaskError> {
        self.elbv2_listing
            .get_or_try_init(|| async {
                let (lbs, tgs) = tokio::join!(
                    self.elbv2()
                        .describe_load_balancers()
                        .into_paginator()
                        .items()
                        .send()
                        .collect::<Result<Vec<_>, _>>(),
                    self.elbv2()
                        .describe_target_groups()
                        .into_paginator()
                        .items()
                        .send()
                        .collect::<Result<Vec<_>, _>>(),
                );
                let lbs = lbs.map_err(|e| classify("DescribeLoadBalancers", &self.cluster, e))?;
                let tgs = tgs.map_err(|e| classify("DescribeTargetGroups", &self.cluster, e))?;
                Ok((lbs, tgs))
            })
            .await
    }

    /// The load balancer whose AWS name is `name`, from the run's listing
    /// (before its tags are read).
    pub async fn load_balancer_named(
        &self,
        name: &str,
    ) -> Result<Option<&aws_sdk_elasticloadbalancingv2::types::LoadBalancer>, TaskError> {
        Ok(self
            .elbv2_listing()
            .await?
            .0
            .iter()
            .find(|l| l.load_balancer_name() == Some(name)))
    }

    /// The attributes of the load balancer `arn`, as key and value: one
    /// DescribeLoadBalancerAttributes per balancer and run (`fresh`: read
    /// again).
    pub async fn load_balancer_attributes(
        &self,
        arn: &str,
        fresh: bool,
    ) -> Result<Vec<(String, String)>, TaskError> {
        let describe = || async {
            let out = self
                .elbv2()
                .describe_load_balancer_attributes()
                .load_balancer_arn(arn)
                .send()
                .await
                .map_err(|e| classify("DescribeLoadBalancerAttributes", arn, e))?;
            Ok(out
                .attributes()
                .iter()
                .filter_map(|a| Some((a.key()?.to_string(), a.value()?.to_string())))
                .collect())
        };
        if fresh {
            return describe().await;
        }
        cell_of(&self.lb_attributes, arn)?
            .get_or_try_init(describe)
            .await
            .cloned()
    }

    /// The cluster's ELBv2 load balancers and target groups with their
    /// tags: the run's listing, then one DescribeTags per 20 ARNs of both
    /// kinds together (the API takes any mix); kept when tagged
    /// `KubernetesCluster: <cluster>`.
    async fn elbv2_resources(&self) -> Result<&Elbv2Resources, TaskError> {
        self.elbv2_resources
            .get_or_try_init(|| async {
                let (lbs, tgs) = self.elbv2_listing().await?;
                let arns: Vec<String> = lbs
                    .iter()
                    .filter_map(|l| l.load_balancer_arn())
                    .chain(tgs.iter().filter_map(|g| g.target_group_arn()))
                    .map(str::to_string)
                    .collect();
                let tags = elbv2_tags(self.elbv2(), &arns)
                    .await
                    .map_err(|e| classify("DescribeTags", &self.cluster, e))?;
                Ok((
                    self.tagged_for_cluster(lbs.clone(), |l| l.load_balancer_arn(), &tags),
                    self.tagged_for_cluster(tgs.clone(), |g| g.target_group_arn(), &tags),
                ))
            })
            .await
    }

    /// Keeps the ELBv2 resources tagged `KubernetesCluster: <cluster>`, with
    /// their tags.
    fn tagged_for_cluster<T>(
        &self,
        all: Vec<T>,
        arn: impl Fn(&T) -> Option<&str>,
        tags: &BTreeMap<String, Tags>,
    ) -> Vec<(T, Tags)> {
        all.into_iter()
            .filter_map(|x| {
                let t = tags.get(arn(&x)?)?.clone();
                (t.get(TAG_CLUSTER) == Some(&self.cluster)).then_some((x, t))
            })
            .collect()
    }

    /// The tags kops puts on an owned resource named `name`: the cluster tags,
    /// `Name`, the cluster's cloud labels, then `extra`.
    pub fn owned_tags(&self, name: &str, extra: &[(&str, &str)]) -> Tags {
        owned_tags(&self.cluster, &self.cloud_labels, name, extra)
    }

    /// The filter that finds everything kops created for this cluster.
    pub fn cluster_filter(&self) -> Filter {
        Filter::builder()
            .name(format!("tag:{TAG_CLUSTER}"))
            .values(&self.cluster)
            .build()
    }

    /// The filter that finds everything tagged `kubernetes.io/cluster/<name>`,
    /// owned or shared (an existing subnet kops tagged `shared`).
    pub fn cluster_key_filter(&self) -> Filter {
        Filter::builder()
            .name("tag-key")
            .values(format!("{TAG_CLUSTER_PREFIX}{}", self.cluster))
            .build()
    }

    /// Records that the task `key` created the object `id` in this run.
    pub fn remember_created(&self, key: TaskKey, id: &str) {
        if let Ok(mut created) = self.created.lock() {
            created.insert(key, id.to_string());
        }
    }

    /// The id of the object the task `key` created earlier in this run.
    pub fn created_id(&self, key: &TaskKey) -> Option<String> {
        self.created.lock().ok()?.get(key).cloned()
    }

    discover!(
        vpcs,
        Vpc,
        describe_vpcs,
        filters,
        cluster_filter,
        "DescribeVpcs"
    );

    pub async fn subnets(&self) -> Result<&[aws_sdk_ec2::types::Subnet], TaskError> {
        self.subnets
            .get_or_try_init(|| async {
                // By tag key, so subnets kops tagged `shared` are found too.
                self.ec2()
                    .describe_subnets()
                    .filters(self.cluster_key_filter())
                    .into_paginator()
                    .items()
                    .send()
                    .collect::<Result<Vec<_>, _>>()
                    .await
                    .map_err(|e| classify("DescribeSubnets", &self.cluster, e))
            })
            .await
            .map(Vec::as_slice)
    }

    discover!(
        dhcp_options,
        DhcpOptions,
        describe_dhcp_options,
        filters,
        cluster_filter,
        "DescribeDhcpOptions"
    );

    pub async fn internet_gateways(
        &self,
    ) -> Result<&[aws_sdk_ec2::types::InternetGateway], TaskError> {
        self.internet_gateways
            .get_or_try_init(|| async {
                self.ec2()
                    .describe_internet_gateways()
                    .filters(self.cluster_filter())
                    .into_paginator()
                    .items()
                    .send()
                    .collect::<Result<Vec<_>, _>>()
                    .await
                    .map_err(|e| classify("DescribeInternetGateways", &self.cluster, e))
            })
            .await
            .map(Vec::as_slice)
    }

    discover!(
        route_tables,
        RouteTable,
        describe_route_tables,
        filters,
        cluster_filter,
        "DescribeRouteTables"
    );

    discover!(
        nat_gateways,
        NatGateway,
        describe_nat_gateways,
        filter,
        cluster_filter,
        "DescribeNatGateways"
    );

    pub async fn addresses(&self) -> Result<&[aws_sdk_ec2::types::Address], TaskError> {
        self.addresses
            .get_or_try_init(|| async {
                let out = self
                    .ec2()
                    .describe_addresses()
                    .filters(self.cluster_filter())
                    .send()
                    .await
                    .map_err(|e| classify("DescribeAddresses", &self.cluster, e))?;
                Ok(out.addresses().to_vec())
            })
            .await
            .map(Vec::as_slice)
    }

    discover!(
        security_groups,
        SecurityGroup,
        describe_security_groups,
        filters,
        cluster_filter,
        "DescribeSecurityGroups"
    );

    pub async fn key_pairs(&self) -> Result<&[aws_sdk_ec2::types::KeyPairInfo], TaskError> {
        self.key_pairs
            .get_or_try_init(|| async {
                let out = self
                    .ec2()
                    .describe_key_pairs()
                    .filters(self.cluster_filter())
                    .send()
                    .await
                    .map_err(|e| classify("DescribeKeyPairs", &self.cluster, e))?;
                Ok(out.key_pairs().to_vec())
            })
            .await
            .map(Vec::as_slice)
    }

    discover!(
        launch_templates,
        LaunchTemplate,
        describe_launch_templates,
        filters,
        cluster_filter,
        "DescribeLaunchTemplates",
        200
    );

    discover!(
        volumes,
        Volume,
        describe_volumes,
        filters,
        cluster_filter,
        "DescribeVolumes"
    );

    /// The cluster's autoscaling groups: one DescribeAutoScalingGroups
    /// filtered by the `KubernetesCluster` tag per run.
    pub async fn autoscaling_groups(
        &self,
    ) -> Result<&[aws_sdk_autoscaling::types::AutoScalingGroup], TaskError> {
        self.autoscaling_groups
            .get_or_try_init(|| async {
                self.autoscaling()
                    .describe_auto_scaling_groups()
                    .filters(
                        aws_sdk_autoscaling::types::Filter::builder()
                            .name(format!("tag:{TAG_CLUSTER}"))
                            .values(&self.cluster)
                            .build(),
                    )
                    .into_paginator()
                    .items()
                    .send()
                    .collect::<Result<Vec<_>, _>>()
                    .await
                    .map_err(|e| classify("DescribeAutoScalingGroups", &self.cluster, e))
            })
            .await
            .map(Vec::as_slice)
    }

    /// The cluster's EventBridge rules: one `ListRules` per run with the
    /// cluster name's first 33 characters as prefix (kops' rule names start
    /// with the cluster name, shortened to 40 with a hash suffix).
    pub async fn event_rules(&self) -> Result<&[aws_sdk_eventbridge::types::Rule], TaskError> {
        self.event_rules
            .get_or_try_init(|| list_event_rules(self.cloud.eventbridge(), &self.cluster))
            .await
            .map(Vec::as_slice)
    }

    /// The IAM role `name` with its trust policy, tags, inline policies and
    /// attached managed policies, from one paginated
    /// GetAccountAuthorizationDetails (filter `Role`) per run instead of
    /// GetRole, GetRolePolicy and ListAttachedRolePolicies per role.
    /// `None` when the role is not in that snapshot (it is new, or was
    /// created after the snapshot) or the account refused the call: callers
    /// then read the role themselves, so a missing role is always confirmed
    /// by a direct read before anything is created.
    pub async fn iam_role_detail(
        &self,
        name: &str,
    ) -> Result<Option<&aws_sdk_iam::types::RoleDetail>, TaskError> {
        Ok(self.iam_roles().await?.and_then(|r| r.get(name)))
    }

    /// The instance profile `name` as the run's role snapshot shows it
    /// (every profile that holds a role is listed under that role): `None`
    /// when no role of the snapshot is in it.
    pub async fn iam_instance_profile_detail(
        &self,
        name: &str,
    ) -> Result<Option<&aws_sdk_iam::types::InstanceProfile>, TaskError> {
        Ok(self.iam_roles().await?.and_then(|roles| {
            roles
                .values()
                .flat_map(|r| r.instance_profile_list())
                .find(|p| p.instance_profile_name() == name)
        }))
    }

    /// Every IAM role of the account by name, read once per run (see
    /// `iam_role_detail`); `None` when the account refuses the read.
    async fn iam_roles(
        &self,
    ) -> Result<Option<&BTreeMap<String, aws_sdk_iam::types::RoleDetail>>, TaskError> {
        let roles = self
            .iam_roles
            .get_or_try_init(|| async {
                let mut roles = BTreeMap::new();
                let mut marker = None;
                loop {
                    let out = match self
                        .iam()
                        .get_account_authorization_details()
                        .filter(aws_sdk_iam::types::EntityType::Role)
                        .max_items(1000)
                        .set_marker(marker.take())
                        .send()
                        .await
                    {
                        Ok(out) => out,
                        // An account whose policy denies this read: fall
                        // back to the per-role reads, which kops' documented
                        // permissions allow.
                        Err(e)
                            if e.code().is_some_and(|c| {
                                c == "AccessDenied" || c == "AccessDeniedException"
                            }) =>
                        {
                            return Ok(None);
                        }
                        Err(e) => {
                            return Err(classify(
                                "GetAccountAuthorizationDetails",
                                &self.cluster,
                                e,
                            ))
                        }
                    };
                    for role in out.role_detail_list() {
                        if let Some(n) = role.role_name() {
                            roles.insert(n.to_string(), role.clone());
                        }
                    }
                    match out.marker() {
                        Some(next) if out.is_truncated() => marker = Some(next.to_string()),
                        _ => return Ok(Some(roles)),
                    }
                }
            })
            .await?;
        Ok(roles.as_ref())
    }

    /// The VPC `id`'s (`enableDnsHostnames`, `enableDnsSupport`): its two
    /// DescribeVpcAttribute calls side by side, once per run (a snapshot:
    /// a task that changed them reads afresh, see `first_look`).
    pub async fn vpc_dns_attributes(&self, id: &str) -> Result<(bool, bool), TaskError> {
        let cell = cell_of(&self.vpc_dns, id)?;
        cell.get_or_try_init(|| async {
            let (hostnames, support) = tokio::join!(
                vpc_attribute(
                    self,
                    id,
                    aws_sdk_ec2::types::VpcAttributeName::EnableDnsHostnames
                ),
                vpc_attribute(
                    self,
                    id,
                    aws_sdk_ec2::types::VpcAttributeName::EnableDnsSupport
                ),
            );
            Ok::<_, TaskError>((hostnames?, support?))
        })
        .await
        .copied()
    }

    /// The lifecycle hooks of the autoscaling group `group`: one
    /// DescribeLifecycleHooks per group and run (a snapshot, like
    /// `vpc_dns_attributes`).
    pub async fn lifecycle_hooks(
        &self,
        group: &str,
    ) -> Result<Vec<aws_sdk_autoscaling::types::LifecycleHook>, TaskError> {
        let cell = cell_of(&self.lifecycle_hooks, group)?;
        cell.get_or_try_init(|| async {
            let out = self
                .autoscaling()
                .describe_lifecycle_hooks()
                .auto_scaling_group_name(group)
                .send()
                .await
                .map_err(|e| classify("DescribeLifecycleHooks", group, e))?;
            Ok::<_, TaskError>(out.lifecycle_hooks().to_vec())
        })
        .await
        .cloned()
    }

    /// The tags of the EventBridge rule `arn` (`name` for errors): once per
    /// run, or afresh when `fresh`.
    pub async fn rule_tags(&self, arn: &str, name: &str, fresh: bool) -> Result<Tags, TaskError> {
        let read = || async {
            let out = self
                .cloud
                .eventbridge()
                .list_tags_for_resource()
                .resource_arn(arn)
                .send()
                .await
                .map_err(|e| classify("ListTagsForResource", name, e))?;
            Ok::<_, TaskError>(
                out.tags()
                    .iter()
                    .map(|t| (t.key().to_string(), t.value().to_string()))
                    .collect(),
            )
        };
        if fresh {
            return read().await;
        }
        cell_of(&self.rule_tags, arn)?
            .get_or_try_init(read)
            .await
            .cloned()
    }

    /// The targets of the EventBridge rule `rule` (`None`: no such rule),
    /// `task` naming errors: once per run, or afresh when `fresh`.
    pub async fn rule_targets(
        &self,
        rule: &str,
        task: &str,
        fresh: bool,
    ) -> Result<Option<Vec<aws_sdk_eventbridge::types::Target>>, TaskError> {
        let read = || async {
            match crate::tasks::eventbridge::list_targets(self.cloud.eventbridge(), rule).await {
                Ok(targets) => Ok(Some(targets)),
                Err(e) if e.code() == Some("ResourceNotFoundException") => Ok(None),
                Err(e) => Err(classify("ListTargetsByRule", task, e)),
            }
        };
        if fresh {
            return read().await;
        }
        cell_of(&self.rule_targets, rule)?
            .get_or_try_init(read)
            .await
            .cloned()
    }

    /// The SQS queue `name` (`None`: no such queue): once per run, or
    /// afresh when `fresh`.
    pub async fn queue(
        &self,
        name: &str,
        fresh: bool,
    ) -> Result<Option<crate::tasks::sqs_queue::SqsQueueActual>, TaskError> {
        if fresh {
            return crate::tasks::sqs_queue::read_queue(self, name).await;
        }
        cell_of(&self.queues, name)?
            .get_or_try_init(|| crate::tasks::sqs_queue::read_queue(self, name))
            .await
            .cloned()
    }

    /// True the first time the task `key` asks in this run, false after:
    /// a task's first look may use a run-wide snapshot, a later one (a
    /// retry after a partial apply) reads afresh, since its own changes are
    /// not in the snapshot.
    pub fn first_look(&self, key: &TaskKey) -> bool {
        self.looked
            .lock()
            .map(|mut looked| looked.insert(key.clone()))
            .unwrap_or(false)
    }

    /// The default version of the launch template `id` (its data included):
    /// one paginated DescribeLaunchTemplateVersions per run for the
    /// `$Default` version of every template of the account (the API's form
    /// without a template id), instead of one call per template. `None`
    /// when the template is not in that answer (created after it): the
    /// caller then reads it by id.
    pub async fn default_template_version(
        &self,
        id: &str,
    ) -> Result<Option<aws_sdk_ec2::types::LaunchTemplateVersion>, TaskError> {
        let all = self
            .default_template_versions
            .get_or_try_init(|| async {
                let mut out = BTreeMap::new();
                let mut next = None;
                loop {
                    let page = self
                        .ec2()
                        .describe_launch_template_versions()
                        .versions("$Default")
                        .max_results(200)
                        .set_next_token(next.take())
                        .send()
                        .await
                        .map_err(|e| {
                            classify("DescribeLaunchTemplateVersions", &self.cluster, e)
                        })?;
                    for v in page.launch_template_versions() {
                        if let Some(id) = v.launch_template_id() {
                            out.insert(id.to_string(), v.clone());
                        }
                    }
                    match page.next_token() {
                        Some(t) if !t.is_empty() => next = Some(t.to_string()),
                        _ => return Ok::<_, TaskError>(out),
                    }
                }
            })
            .await?;
        Ok(all.get(id).cloned())
    }

    /// The listeners of the load balancer `arn`: one paginated
    /// DescribeListeners per load balancer and run. A listener task that
    /// does not find its port here reads again (`fresh`) before creating.
    pub async fn listeners(
        &self,
        arn: &str,
        fresh: bool,
    ) -> Result<Vec<aws_sdk_elasticloadbalancingv2::types::Listener>, TaskError> {
        let describe = || async {
            self.elbv2()
                .describe_listeners()
                .load_balancer_arn(arn)
                .into_paginator()
                .items()
                .send()
                .collect::<Result<Vec<_>, _>>()
                .await
                .map_err(|e| classify("DescribeListeners", arn, e))
        };
        if fresh {
            return describe().await;
        }
        cell_of(&self.listeners, arn)?
            .get_or_try_init(describe)
            .await
            .cloned()
    }

    /// The existing security group `id` (not the cluster's), `None` when
    /// there is no such group: one `DescribeSecurityGroups` per id and run.
    pub async fn shared_security_group(
        &self,
        id: &str,
    ) -> Result<Option<aws_sdk_ec2::types::SecurityGroup>, TaskError> {
        cell_of(&self.shared_security_groups, id)?
            .get_or_try_init(|| async {
                let out = self
                    .ec2()
                    .describe_security_groups()
                    .group_ids(id)
                    .send()
                    .await;
                match out {
                    Ok(out) => Ok(out.security_groups().first().cloned()),
                    Err(e) if e.code().is_some_and(|c| c.ends_with("NotFound")) => Ok(None),
                    Err(e) => Err(classify("DescribeSecurityGroups", id, e)),
                }
            })
            .await
            .cloned()
    }

    /// The shared group `id` as this run described it, without a call:
    /// `None` when it is no shared group this run looked at.
    pub fn described_shared_security_group(
        &self,
        id: &str,
    ) -> Option<aws_sdk_ec2::types::SecurityGroup> {
        let map = self.shared_security_groups.lock().ok()?;
        map.get(id)?.get()?.clone()
    }

    /// The records of the hosted zone `zone_id`: one paginated
    /// `ListResourceRecordSets` per zone and run.
    pub async fn record_sets(
        &self,
        zone_id: &str,
    ) -> Result<Vec<aws_sdk_route53::types::ResourceRecordSet>, TaskError> {
        cell_of(&self.record_sets, zone_id)?
            .get_or_try_init(|| list_record_sets(self.cloud.route53(), zone_id))
            .await
            .cloned()
    }

    /// The machine image `spec` names (`ami-...`, or `owner/name` for the
    /// newest image of that name) for the instance group `group`: one
    /// DescribeImages per distinct image and run.
    pub async fn image(&self, group: &str, spec: &str) -> Result<Image, TaskError> {
        cell_of(&self.images, spec)?
            .get_or_try_init(|| self.describe_image(group, spec))
            .await
            .cloned()
    }

    async fn describe_image(&self, group: &str, spec: &str) -> Result<Image, TaskError> {
        let request = self.ec2().describe_images();
        let request = if spec.starts_with("ami-") {
            request.image_ids(spec)
        } else {
            let (owner, name) = match spec.split_once('/') {
                Some((owner, name)) if !owner.is_empty() => (Some(owner_alias(owner)), name),
                _ => (None, spec),
            };
            request
                .set_owners(owner.map(|o| vec![o.to_string()]))
                .filters(Filter::builder().name("name").values(name).build())
        };
        let out = match request.send().await {
            Ok(out) => out,
            Err(e) if e.code().is_some_and(|c| c.starts_with("InvalidAMIID")) => {
                return Err(image_not_found(group, spec))
            }
            Err(e) => return Err(classify("DescribeImages", spec, e)),
        };
        // Newest first: AWS' creation dates are ISO 8601, so they sort as text.
        let newest = out
            .images()
            .iter()
            .filter(|i| i.image_id().is_some())
            .max_by(|a, b| a.creation_date().cmp(&b.creation_date()))
            .ok_or_else(|| image_not_found(group, spec))?;
        Ok(Image {
            id: newest.image_id().unwrap_or_default().to_string(),
            root_device_name: newest.root_device_name().unwrap_or("/dev/xvda").to_string(),
        })
    }
}

/// The EventBridge rules whose names start like the cluster's.
/// One VPC attribute of the VPC `id` (DescribeVpcAttribute).
pub async fn vpc_attribute(
    ctx: &AwsContext,
    id: &str,
    name: aws_sdk_ec2::types::VpcAttributeName,
) -> Result<bool, TaskError> {
    use aws_sdk_ec2::types::{AttributeBooleanValue, VpcAttributeName};
    let out = ctx
        .ec2()
        .describe_vpc_attribute()
        .vpc_id(id)
        .attribute(name.clone())
        .send()
        .await
        .map_err(|e| classify("DescribeVpcAttribute", id, e))?;
    let value = match name {
        VpcAttributeName::EnableDnsHostnames => out.enable_dns_hostnames(),
        _ => out.enable_dns_support(),
    };
    Ok(value
        .and_then(AttributeBooleanValue::value)
        .unwrap_or(false))
}

pub async fn list_event_rules(
    client: &aws_sdk_eventbridge::Client,
    cluster: &str,
) -> Result<Vec<aws_sdk_eventbridge::types::Rule>, TaskError> {
    let prefix: String = cluster.chars().take(33).collect();
    let mut rules = Vec::new();
    let mut next = None;
    loop {
        let out = client
            .list_rules()
            .name_prefix(&prefix)
            .set_next_token(next)
            .send()
            .await
            .map_err(|e| classify("ListRules", cluster, e))?;
        rules.extend(out.rules().iter().cloned());
        next = out.next_token().map(str::to_string);
        if next.is_none() {
            return Ok(rules);
        }
    }
}

/// Every record of a hosted zone.
pub async fn list_record_sets(
    client: &aws_sdk_route53::Client,
    zone_id: &str,
) -> Result<Vec<aws_sdk_route53::types::ResourceRecordSet>, TaskError> {
    let mut records = Vec::new();
    let mut start: Option<(String, aws_sdk_route53::types::RrType)> = None;
    loop {
        let mut request = client.list_resource_record_sets().hosted_zone_id(zone_id);
        if let Some((name, kind)) = start.take() {
            request = request.start_record_name(name).start_record_type(kind);
        }
        let out = request
            .send()
            .await
            .map_err(|e| classify("ListResourceRecordSets", zone_id, e))?;
        records.extend(out.resource_record_sets().iter().cloned());
        match (
            out.is_truncated(),
            out.next_record_name(),
            out.next_record_type(),
        ) {
            (true, Some(name), Some(kind)) => start = Some((name.to_string(), kind.clone())),
            _ => return Ok(records),
        }
    }
}

/// The tags of ELBv2 resources by ARN: DescribeTags in batches of 20 (the
/// API's limit), none for no ARNs.
pub async fn elbv2_tags(
    client: &aws_sdk_elasticloadbalancingv2::Client,
    arns: &[String],
) -> Result<
    BTreeMap<String, Tags>,
    SdkError<
        aws_sdk_elasticloadbalancingv2::operation::describe_tags::DescribeTagsError,
        HttpResponse,
    >,
> {
    let mut out = BTreeMap::new();
    for chunk in arns.chunks(20) {
        let described = client
            .describe_tags()
            .set_resource_arns(Some(chunk.to_vec()))
            .send()
            .await?;
        for d in described.tag_descriptions() {
            let Some(arn) = d.resource_arn() else {
                continue;
            };
            let tags = d
                .tags()
                .iter()
                .filter_map(|t| {
                    Some((
                        t.key()?.to_string(),
                        t.value().unwrap_or_default().to_string(),
                    ))
                })
                .collect();
            out.insert(arn.to_string(), tags);
        }
    }
    Ok(out)
}

/// ELBv2 tags from a map.
pub fn elbv2_tag_list(tags: &Tags) -> Vec<aws_sdk_elasticloadbalancingv2::types::Tag> {
    tags.iter()
        .map(|(k, v)| {
            aws_sdk_elasticloadbalancingv2::types::Tag::builder()
                .key(k)
                .value(v)
                .build()
        })
        .collect()
}

/// A resolved machine image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    pub id: String,
    /// Where the root volume is attached (`/dev/xvda`, `/dev/sda1`).
    pub root_device_name: String,
}

/// kops' owner aliases for well-known image publishers.
fn owner_alias(owner: &str) -> &str {
    match owner {
        "amazon" => "amazon",
        "ubuntu" | "canonical" => "099720109477",
        "debian" => "136693071363",
        "redhat" | "redhat.com" => "309956199498",
        "flatcar" => "075585003325",
        other => other,
    }
}

fn image_not_found(group: &str, spec: &str) -> TaskError {
    TaskError::fatal(format!(
        "the image `{spec}` of instance group `{group}` was not found in this region\nhint: set `spec.image` of the group to an image that exists here (an `ami-...` id, or `owner/name`), e.g. with `kops edit instancegroup {group}`"
    ))
}

/// EC2 tags as a map.
pub fn tag_map(tags: &[Tag]) -> Tags {
    tags.iter()
        .filter_map(|t| {
            Some((
                t.key()?.to_string(),
                t.value().unwrap_or_default().to_string(),
            ))
        })
        .collect()
}

/// The value of the `Name` tag.
pub fn name_tag(tags: &[Tag]) -> Option<&str> {
    tags.iter()
        .find(|t| t.key() == Some(TAG_NAME))
        .and_then(|t| t.value())
}

/// EC2 tags from a map.
pub fn ec2_tags(tags: &Tags) -> Vec<Tag> {
    tags.iter()
        .map(|(k, v)| Tag::builder().key(k).value(v).build())
        .collect()
}

/// A tag specification for a create call.
pub fn tag_spec(
    resource: aws_sdk_ec2::types::ResourceType,
    tags: &Tags,
) -> aws_sdk_ec2::types::TagSpecification {
    aws_sdk_ec2::types::TagSpecification::builder()
        .resource_type(resource)
        .set_tags(Some(ec2_tags(tags)))
        .build()
}

/// Error codes with which AWS asks to be asked again: throttling and its
/// own failures.
const TRANSIENT_CODES: &[&str] = &[
    "Throttling",
    "ThrottlingException",
    "RequestLimitExceeded",
    "RequestThrottled",
    "TooManyRequestsException",
    "SlowDown",
    "ServiceUnavailable",
    "InternalError",
    "InternalFailure",
    "Unavailable",
];

/// The eventual-consistency codes seen right after a create (a new role
/// not yet usable, a new id not yet visible) and while something else
/// lets go of an object.
const SETTLING_CODES: &[&str] = &[
    "DependencyViolation",
    "IncorrectState",
    "InvalidVpcID.NotFound",
    "InvalidSubnetID.NotFound",
    "InvalidRouteTableID.NotFound",
    "InvalidGroup.NotFound",
    "InvalidInternetGatewayID.NotFound",
    "InvalidDhcpOptionID.NotFound",
    "InvalidAllocationID.NotFound",
    "InvalidNatGatewayID.NotFound",
    "NoSuchEntity",
    "MalformedPolicyDocument.NotReady",
    "ResourceInUse",
];

/// True when AWS asks to be asked again (throttling, a 5xx answer), the
/// request never got an answer (a dropped connection, a timeout), or the
/// object is not visible yet. Missing credentials are not: asking again
/// finds none either.
pub fn is_retryable<E>(err: &SdkError<E, HttpResponse>) -> bool
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    is_transient(err) || err.code().is_some_and(|c| SETTLING_CODES.contains(&c))
}

/// True when the same request may well succeed at once if sent again:
/// throttling, a 5xx answer, no answer (a dropped connection, a timeout),
/// but not an answer about the object (not found, in use), which a
/// repeat would only confirm. Reads outside the task graph and deletions
/// are repeated in place on these.
pub fn is_transient<E>(err: &SdkError<E, HttpResponse>) -> bool
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    if crate::error_text::error_text(err).text == crate::error_text::NO_CREDENTIALS {
        return false;
    }
    let status_5xx = err
        .raw_response()
        .is_some_and(|r| r.status().as_u16() >= 500);
    let transport = matches!(
        err,
        SdkError::DispatchFailure(_) | SdkError::TimeoutError(_) | SdkError::ResponseError(_)
    );
    status_5xx || transport || err.code().is_some_and(|c| TRANSIENT_CODES.contains(&c))
}

/// Turns an SDK error into a task error: retryable when AWS says so (or the
/// object is not visible yet), fatal otherwise, always with the operation,
/// the resource and AWS' own message.
pub fn classify<E>(
    operation: &'static str,
    resource: &str,
    err: SdkError<E, HttpResponse>,
) -> TaskError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let message = crate::error_text::error_text(&err).text;
    let text = format!("{operation} on `{resource}`: {message}");
    if is_retryable(&err) {
        TaskError::retryable(text)
    } else {
        TaskError::fatal(text)
    }
}
