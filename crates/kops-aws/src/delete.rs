//! `kops delete cluster`: find everything tagged for the cluster (and its
//! IAM roles by name), then delete it in dependency order. Resources tagged
//! `kubernetes.io/cluster/<name>: shared` are listed as kept and never
//! touched. Works on half-made clusters: discovery is by tag, not by spec.

pub mod dump;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use aws_sdk_ec2::types::{Filter, IpPermission, UserIdGroupPair};
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;

use crate::context::{elbv2_tags, name_tag, tag_map, TAG_CLUSTER, TAG_CLUSTER_PREFIX};
use crate::{AwsCloud, AwsError};

pub use kops_cloud::{DeleteReport, Resource};

fn ownership(cluster: &str, tags: &[aws_sdk_ec2::types::Tag]) -> Option<bool> {
    let tags = tag_map(tags);
    match tags
        .get(&format!("{TAG_CLUSTER_PREFIX}{cluster}"))
        .map(String::as_str)
    {
        Some("shared") => Some(true),
        Some(_) => Some(false),
        None if tags.get(TAG_CLUSTER).map(String::as_str) == Some(cluster) => Some(false),
        None => None,
    }
}

fn filters(cluster: &str) -> [Filter; 2] {
    [
        Filter::builder()
            .name(format!("tag:{TAG_CLUSTER}"))
            .values(cluster)
            .build(),
        Filter::builder()
            .name("tag-key")
            .values(format!("{TAG_CLUSTER_PREFIX}{cluster}"))
            .build(),
    ]
}

/// The IAM roles (and instance profiles) kops names after a cluster.
fn iam_names(cluster: &str) -> Vec<String> {
    ["masters", "nodes", "bastions", "apiservers"]
        .iter()
        .map(|r| format!("{r}.{cluster}"))
        .collect()
}

/// Runs `step` again while it fails with a retryable AWS error (see
/// [`crate::retrying`]).
async fn retrying<T, F, Fut>(what: &str, step: F) -> Result<T, AwsError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, AwsError>>,
{
    crate::retrying(what, AwsError::is_retryable, step).await
}

/// One read of the listing, sent again while AWS' answer is transient
/// (throttling, 5xx, no answer; each try after the SDK's own attempts): a
/// throttled call repeats itself, not the whole listing's dozens of calls.
async fn read<T, E, F, Fut>(
    what: &str,
    send: F,
) -> Result<T, SdkError<E, aws_smithy_runtime_api::client::orchestrator::HttpResponse>>
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    F: FnMut() -> Fut,
    Fut: std::future::Future<
        Output = Result<T, SdkError<E, aws_smithy_runtime_api::client::orchestrator::HttpResponse>>,
    >,
{
    crate::retrying(what, crate::context::is_transient, send).await
}

/// Lists every resource of the cluster: one tagged Describe per EC2 type
/// and filter (every page), and a GetRole / GetInstanceProfile per kops
/// role name. Retried as a whole while AWS' answers are retryable.
pub async fn list_cluster_resources(
    cloud: &AwsCloud,
    cluster: &str,
) -> Result<Vec<Resource>, AwsError> {
    retrying("listing the cluster's resources", || {
        list_cluster_resources_once(cloud, cluster)
    })
    .await
}

async fn list_cluster_resources_once(
    cloud: &AwsCloud,
    cluster: &str,
) -> Result<Vec<Resource>, AwsError> {
    let ec2 = cloud.ec2();
    let mut out: BTreeSet<Resource> = BTreeSet::new();
    let mut add = |phase: u8,
                   kind: &'static str,
                   id: Option<&str>,
                   tags: &[aws_sdk_ec2::types::Tag],
                   vpc: Option<&str>| {
        let (Some(id), Some(shared)) = (id, ownership(cluster, tags)) else {
            return;
        };
        out.insert(Resource {
            phase,
            kind,
            id: id.to_string(),
            name: name_tag(tags).unwrap_or_default().to_string(),
            shared,
            vpc: vpc.map(str::to_string),
        });
    };
    // Every listing at once (each boxed: together they are too big for a
    // test thread's stack); the results are then read in a fixed order.
    let ec2_describe = |filter: Filter| async move {
        macro_rules! paged {
            ($what:literal, $request:expr) => {
                read($what, || {
                    $request
                        .into_paginator()
                        .items()
                        .send()
                        .collect::<Result<Vec<_>, _>>()
                })
            };
        }
        // DescribeAddresses and DescribeKeyPairs have no pages in AWS' API.
        tokio::join!(
            paged!(
                "DescribeLaunchTemplates",
                // AWS' largest page (the default is 15 templates a page).
                ec2.describe_launch_templates()
                    .filters(filter.clone())
                    .max_results(200)
            ),
            paged!(
                "DescribeVolumes",
                ec2.describe_volumes().filters(filter.clone())
            ),
            paged!(
                "DescribeInstances",
                ec2.describe_instances().filters(filter.clone())
            ),
            paged!(
                "DescribeNatGateways",
                ec2.describe_nat_gateways().filter(filter.clone())
            ),
            read("DescribeAddresses", || ec2
                .describe_addresses()
                .filters(filter.clone())
                .send()),
            read("DescribeKeyPairs", || ec2
                .describe_key_pairs()
                .filters(filter.clone())
                .send()),
            paged!(
                "DescribeSecurityGroups",
                ec2.describe_security_groups().filters(filter.clone())
            ),
            paged!(
                "DescribeSubnets",
                ec2.describe_subnets().filters(filter.clone())
            ),
            paged!(
                "DescribeInternetGateways",
                ec2.describe_internet_gateways().filters(filter.clone())
            ),
            paged!(
                "DescribeEgressOnlyInternetGateways",
                ec2.describe_egress_only_internet_gateways()
                    .filters(filter.clone())
            ),
            paged!(
                "DescribeRouteTables",
                ec2.describe_route_tables().filters(filter.clone())
            ),
            paged!("DescribeVpcs", ec2.describe_vpcs().filters(filter.clone())),
            paged!(
                "DescribeDhcpOptions",
                ec2.describe_dhcp_options().filters(filter.clone())
            ),
        )
    };
    let [first, second] = filters(cluster);
    let (groups, elbv2_listed, classic, (by_name, by_key), messaging, records, named_iam, sa_iam) = tokio::join!(
        Box::pin(list_groups(cloud, cluster)),
        Box::pin(list_elbv2(cloud, cluster)),
        Box::pin(classic_load_balancers(cloud, cluster)),
        Box::pin(async {
            tokio::join!(
                Box::pin(ec2_describe(first)),
                Box::pin(ec2_describe(second))
            )
        }),
        Box::pin(list_messaging(cloud, cluster)),
        Box::pin(list_records(cloud, cluster)),
        Box::pin(list_named_iam(cloud, cluster)),
        Box::pin(list_service_account_iam(cloud, cluster)),
    );
    // Autoscaling groups first: deleting one (forced) terminates its
    // instances, which would otherwise be replaced as they are terminated.
    for g in &groups? {
        let tags: Vec<aws_sdk_ec2::types::Tag> = g
            .tags()
            .iter()
            .map(|t| {
                aws_sdk_ec2::types::Tag::builder()
                    .set_key(t.key().map(str::to_string))
                    .set_value(t.value().map(str::to_string))
                    .build()
            })
            .collect();
        add(
            0,
            "autoscaling-group",
            g.auto_scaling_group_name(),
            &tags,
            None,
        );
    }
    // ELBv2: load balancers (deleting one removes its listeners) before
    // their security groups and subnets; target groups once no listener
    // uses them.
    let (lbs, tgs, elb_tags) = elbv2_listed?;
    let as_ec2 = |arn: Option<&str>| -> Vec<aws_sdk_ec2::types::Tag> {
        arn.and_then(|a| elb_tags.get(a))
            .map(crate::context::ec2_tags)
            .unwrap_or_default()
    };
    for l in &lbs {
        let tags = as_ec2(l.load_balancer_arn());
        add(1, "load-balancer", l.load_balancer_arn(), &tags, None);
    }
    for g in &tgs {
        let tags = as_ec2(g.target_group_arn());
        add(2, "target-group", g.target_group_arn(), &tags, None);
    }
    // Classic ELBs (an API or bastion balancer of a cluster made by kops
    // 1.36 or earlier, which kops still deletes): with the ELBv2 ones,
    // before their security groups and subnets.
    for (name, tags) in classic? {
        add(1, "classic-load-balancer", Some(&name), &tags, None);
    }
    // One Describe per type and filter (every page of it), all at once.
    for (
        templates,
        volumes,
        instances,
        nats,
        addresses,
        keys,
        groups,
        subnets,
        gateways,
        egress_gateways,
        tables,
        vpcs,
        dhcp,
    ) in [by_name, by_key]
    {
        let r = templates.map_err(|e| AwsError::call("DescribeLaunchTemplates", cluster, e))?;
        for t in &r {
            add(1, "launch-template", t.launch_template_id(), t.tags(), None);
        }
        let r = volumes.map_err(|e| AwsError::call("DescribeVolumes", cluster, e))?;
        for v in &r {
            let state = v.state().map(|s| s.as_str().to_string());
            if state.as_deref() != Some("deleting") && state.as_deref() != Some("deleted") {
                add(2, "volume", v.volume_id(), v.tags(), None);
            }
        }
        let r = instances.map_err(|e| AwsError::call("DescribeInstances", cluster, e))?;
        for i in r.iter().flat_map(|r| r.instances()) {
            let state = i
                .state()
                .and_then(|s| s.name())
                .map(|n| n.as_str().to_string());
            // After the autoscaling groups (phase 0) are gone: a group
            // still running would replace an instance terminated under it.
            if state.as_deref() != Some("terminated") && state.as_deref() != Some("shutting-down") {
                add(1, "instance", i.instance_id(), i.tags(), None);
            }
        }
        let r = nats.map_err(|e| AwsError::call("DescribeNatGateways", cluster, e))?;
        for n in &r {
            let state = n.state().map(|s| s.as_str().to_string());
            if state.as_deref() != Some("deleted") && state.as_deref() != Some("deleting") {
                add(1, "nat-gateway", n.nat_gateway_id(), n.tags(), None);
            }
        }
        let r = addresses.map_err(|e| AwsError::call("DescribeAddresses", cluster, e))?;
        for a in r.addresses() {
            add(2, "elastic-ip", a.allocation_id(), a.tags(), None);
        }
        let r = keys.map_err(|e| AwsError::call("DescribeKeyPairs", cluster, e))?;
        for k in r.key_pairs() {
            add(2, "keypair", k.key_name(), k.tags(), None);
        }
        let r = groups.map_err(|e| AwsError::call("DescribeSecurityGroups", cluster, e))?;
        for g in &r {
            add(4, "security-group", g.group_id(), g.tags(), None);
        }
        let r = subnets.map_err(|e| AwsError::call("DescribeSubnets", cluster, e))?;
        for s in &r {
            add(3, "subnet", s.subnet_id(), s.tags(), None);
        }
        let r = gateways.map_err(|e| AwsError::call("DescribeInternetGateways", cluster, e))?;
        for g in &r {
            let vpc = g.attachments().first().and_then(|a| a.vpc_id());
            add(
                3,
                "internet-gateway",
                g.internet_gateway_id(),
                g.tags(),
                vpc,
            );
        }
        let r = egress_gateways
            .map_err(|e| AwsError::call("DescribeEgressOnlyInternetGateways", cluster, e))?;
        for g in &r {
            add(
                3,
                "egress-only-internet-gateway",
                g.egress_only_internet_gateway_id(),
                g.tags(),
                None,
            );
        }
        let r = tables.map_err(|e| AwsError::call("DescribeRouteTables", cluster, e))?;
        for t in &r {
            let main = t.associations().iter().any(|a| a.main() == Some(true));
            if !main {
                add(4, "route-table", t.route_table_id(), t.tags(), None);
            }
        }
        let r = vpcs.map_err(|e| AwsError::call("DescribeVpcs", cluster, e))?;
        for v in &r {
            add(5, "vpc", v.vpc_id(), v.tags(), None);
        }
        let r = dhcp.map_err(|e| AwsError::call("DescribeDhcpOptions", cluster, e))?;
        for d in &r {
            add(6, "dhcp-options", d.dhcp_options_id(), d.tags(), None);
        }
    }
    out.extend(messaging?);
    out.extend(records?);
    out.extend(named_iam?);
    out.extend(sa_iam?);
    Ok(out.into_iter().collect())
}

/// The cluster's autoscaling groups (by the `kubernetes.io/cluster/<name>`
/// tag key), every page.
async fn list_groups(
    cloud: &AwsCloud,
    cluster: &str,
) -> Result<Vec<aws_sdk_autoscaling::types::AutoScalingGroup>, AwsError> {
    read("DescribeAutoScalingGroups", || {
        cloud
            .autoscaling()
            .describe_auto_scaling_groups()
            .filters(
                aws_sdk_autoscaling::types::Filter::builder()
                    .name("tag-key")
                    .values(format!("{TAG_CLUSTER_PREFIX}{cluster}"))
                    .build(),
            )
            .into_paginator()
            .items()
            .send()
            .collect::<Result<Vec<_>, _>>()
    })
    .await
    .map_err(|e| AwsError::call("DescribeAutoScalingGroups", cluster, e))
}

/// The account's ELBv2 load balancers and target groups (listed side by
/// side), with the tags of both by ARN (one DescribeTags per 20 ARNs).
async fn list_elbv2(
    cloud: &AwsCloud,
    cluster: &str,
) -> Result<
    (
        Vec<aws_sdk_elasticloadbalancingv2::types::LoadBalancer>,
        Vec<aws_sdk_elasticloadbalancingv2::types::TargetGroup>,
        BTreeMap<String, crate::context::Tags>,
    ),
    AwsError,
> {
    let elbv2 = cloud.elbv2();
    let (lbs, tgs) = tokio::join!(
        read("DescribeLoadBalancers", || elbv2
            .describe_load_balancers()
            .into_paginator()
            .items()
            .send()
            .collect::<Result<Vec<_>, _>>()),
        read("DescribeTargetGroups", || elbv2
            .describe_target_groups()
            .into_paginator()
            .items()
            .send()
            .collect::<Result<Vec<_>, _>>()),
    );
    let lbs = lbs.map_err(|e| AwsError::call("DescribeLoadBalancers", cluster, e))?;
    let tgs = tgs.map_err(|e| AwsError::call("DescribeTargetGroups", cluster, e))?;
    let arns: Vec<String> = lbs
        .iter()
        .filter_map(|l| l.load_balancer_arn())
        .chain(tgs.iter().filter_map(|g| g.target_group_arn()))
        .map(str::to_string)
        .collect();
    let tags = read("DescribeTags", || elbv2_tags(elbv2, &arns))
        .await
        .map_err(|e| AwsError::call("DescribeTags", cluster, e))?;
    Ok((lbs, tgs, tags))
}

/// The instance profiles and roles kops names after the cluster
/// (`masters.<cluster>`, ...): a GetInstanceProfile and a GetRole per name,
/// all at once.
async fn list_named_iam(cloud: &AwsCloud, cluster: &str) -> Result<Vec<Resource>, AwsError> {
    let mut running = tokio::task::JoinSet::new();
    for (i, name) in iam_names(cluster).into_iter().enumerate() {
        let iam = cloud.iam().clone();
        let owner = format!("{TAG_CLUSTER_PREFIX}{cluster}");
        running.spawn(async move {
            let (profile, role) = tokio::join!(
                read("GetInstanceProfile", || iam
                    .get_instance_profile()
                    .instance_profile_name(&name)
                    .send()),
                read("GetRole", || iam.get_role().role_name(&name).send()),
            );
            let mut found = Vec::new();
            match profile {
                // Nothing else waits for the profiles, nor they for
                // anything (kops deletes them in its first round too): in
                // the first phase, the roles in the next one.
                Ok(_) => found.push(Resource {
                    phase: 0,
                    kind: "iam-instance-profile",
                    id: name.clone(),
                    name: name.clone(),
                    shared: false,
                    vpc: None,
                }),
                Err(e) if is_not_found(&e) => {}
                Err(e) => return (i, Err(AwsError::call("GetInstanceProfile", name, e))),
            }
            match role {
                Ok(r) => {
                    let owned = r.role().is_some_and(|role| {
                        role.tags()
                            .iter()
                            .any(|t| t.key() == owner && t.value() == "owned")
                    });
                    found.push(Resource {
                        phase: 1,
                        kind: "iam-role",
                        id: name.clone(),
                        name: name.clone(),
                        shared: !owned,
                        vpc: None,
                    });
                }
                Err(e) if is_not_found(&e) => {}
                Err(e) => return (i, Err(AwsError::call("GetRole", name, e))),
            }
            (i, Ok(found))
        });
    }
    let mut results = Vec::new();
    while let Some(joined) = running.join_next().await {
        let (i, result) = joined.map_err(|e| AwsError::other("GetRole", cluster, e))?;
        results.push((i, result));
    }
    results.sort_by_key(|(i, _)| *i);
    let mut out = Vec::new();
    for (_, result) in results {
        out.extend(result?);
    }
    Ok(out)
}

/// The cluster's service-account (IRSA) roles and OIDC provider: roles
/// named `<sa>.<namespace>.sa.<cluster>` (or shortened to IAM's 64
/// characters) that are tagged as owned by the cluster, and providers
/// tagged so. One `ListRoles` (paged) and `ListOpenIDConnectProviders`, a
/// `GetRole` per candidate name and a `GetOpenIDConnectProvider` per provider.
async fn list_service_account_iam(
    cloud: &AwsCloud,
    cluster: &str,
) -> Result<Vec<Resource>, AwsError> {
    let iam = cloud.iam();
    let owner = format!("{TAG_CLUSTER_PREFIX}{cluster}");
    let resource = |kind: &'static str, id: &str| Resource {
        phase: 8,
        kind,
        id: id.to_string(),
        name: id.to_string(),
        shared: false,
        vpc: None,
    };
    let mut out = Vec::new();
    let (roles, providers) = tokio::join!(
        read("ListRoles", || iam
            .list_roles()
            .into_paginator()
            .items()
            .send()
            .collect::<Result<Vec<_>, _>>()),
        read("ListOpenIDConnectProviders", || iam
            .list_open_id_connect_providers()
            .send()),
    );
    let roles = roles.map_err(|e| AwsError::call("ListRoles", cluster, e))?;
    let suffix = format!(".sa.{cluster}");
    for role in roles {
        let name = role.role_name();
        let candidate = name.ends_with(&suffix) || (name.len() == 64 && name.contains(".sa."));
        if !candidate {
            continue;
        }
        match read("GetRole", || iam.get_role().role_name(name).send()).await {
            Ok(r) => {
                let owned = r.role().is_some_and(|role| {
                    role.tags()
                        .iter()
                        .any(|t| t.key() == owner && t.value() == "owned")
                });
                if owned {
                    out.push(resource("iam-role", name));
                }
            }
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(AwsError::call("GetRole", name, e)),
        }
    }
    let providers =
        providers.map_err(|e| AwsError::call("ListOpenIDConnectProviders", cluster, e))?;
    for arn in providers
        .open_id_connect_provider_list()
        .iter()
        .filter_map(|p| p.arn())
    {
        match read("GetOpenIDConnectProvider", || {
            iam.get_open_id_connect_provider()
                .open_id_connect_provider_arn(arn)
                .send()
        })
        .await
        {
            Ok(p) => {
                let owned = p.tags().iter().any(|t| {
                    (t.key() == owner && t.value() == "owned")
                        || (t.key() == TAG_CLUSTER && t.value() == cluster)
                });
                if owned {
                    out.push(resource("iam-oidc-provider", arn));
                }
            }
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(AwsError::call("GetOpenIDConnectProvider", arn, e)),
        }
    }
    Ok(out)
}

fn owned_by(cluster: &str, tags: &std::collections::HashMap<String, String>) -> Option<bool> {
    match tags
        .get(&format!("{TAG_CLUSTER_PREFIX}{cluster}"))
        .map(String::as_str)
    {
        Some("shared") => Some(true),
        Some(_) => Some(false),
        None if tags.get(TAG_CLUSTER).map(String::as_str) == Some(cluster) => Some(false),
        None => None,
    }
}

/// The node-termination-handler's queue and EventBridge rules: listed by
/// name prefix (one `ListQueues`, one `ListRules`), kept when tagged for
/// the cluster.
async fn list_messaging(cloud: &AwsCloud, cluster: &str) -> Result<Vec<Resource>, AwsError> {
    let mut out = Vec::new();
    let prefix: String = cluster.replace('.', "-").chars().take(60).collect();
    // The queues and the rules side by side, then the tags of each at once.
    let (queues, rules) = tokio::join!(
        read("ListQueues", || cloud
            .sqs()
            .list_queues()
            .queue_name_prefix(&prefix)
            .into_paginator()
            .items()
            .send()
            .collect::<Result<Vec<_>, _>>()),
        crate::retrying("ListRules", kops_engine::TaskError::is_retryable, || {
            crate::context::list_event_rules(cloud.eventbridge(), cluster)
        }),
    );
    let queues = queues.map_err(|e| AwsError::call("ListQueues", cluster, e))?;
    let rules = rules.map_err(|e| from_task("ListRules", cluster, e))?;
    let mut queue_tags = tokio::task::JoinSet::new();
    for (i, url) in queues.iter().enumerate() {
        let sqs = cloud.sqs().clone();
        let url = url.clone();
        queue_tags.spawn(async move {
            (
                i,
                read("ListQueueTags", || {
                    sqs.list_queue_tags().queue_url(&url).send()
                })
                .await,
            )
        });
    }
    let mut rule_tags = tokio::task::JoinSet::new();
    for (i, arn) in rules.iter().map(|r| r.arn()).enumerate() {
        let events = cloud.eventbridge().clone();
        let arn = arn.map(str::to_string);
        rule_tags.spawn(async move {
            match arn {
                Some(arn) => (
                    i,
                    Some(
                        read("ListTagsForResource", || {
                            events.list_tags_for_resource().resource_arn(&arn).send()
                        })
                        .await,
                    ),
                ),
                None => (i, None),
            }
        });
    }
    let mut queue_answers: Vec<Option<_>> = queues.iter().map(|_| None).collect();
    while let Some(joined) = queue_tags.join_next().await {
        let (i, answer) = joined.map_err(|e| AwsError::other("ListQueueTags", cluster, e))?;
        queue_answers[i] = Some(answer);
    }
    let mut rule_answers: Vec<Option<_>> = rules.iter().map(|_| None).collect();
    while let Some(joined) = rule_tags.join_next().await {
        let (i, answer) = joined.map_err(|e| AwsError::other("ListTagsForResource", cluster, e))?;
        rule_answers[i] = answer;
    }
    for (url, answer) in queues.iter().zip(queue_answers) {
        let Some(answer) = answer else { continue };
        let tags = answer.map_err(|e| AwsError::call("ListQueueTags", url.as_str(), e))?;
        if let Some(shared) = owned_by(cluster, tags.tags().unwrap_or(&Default::default())) {
            out.push(Resource {
                phase: 0,
                kind: "sqs-queue",
                id: url.clone(),
                name: url.rsplit('/').next().unwrap_or_default().to_string(),
                shared,
                vpc: None,
            });
        }
    }
    for (rule, answer) in rules.iter().zip(rule_answers) {
        let (Some(name), Some(answer)) = (rule.name(), answer) else {
            continue;
        };
        let tags = answer.map_err(|e| AwsError::call("ListTagsForResource", name, e))?;
        let tags = tags
            .tags()
            .iter()
            .map(|t| (t.key().to_string(), t.value().to_string()))
            .collect();
        if let Some(shared) = owned_by(cluster, &tags) {
            out.push(Resource {
                phase: 0,
                kind: "eventbridge-rule",
                id: name.to_string(),
                name: name.to_string(),
                shared,
                vpc: None,
            });
        }
    }
    Ok(out)
}

/// The cluster's Route 53 records: in every hosted zone whose name ends the
/// cluster name, the A, AAAA, CNAME and TXT records named `<x>.<cluster>`
/// (the API, internal API and bastion names, and those dns-controller
/// made). One `ListHostedZones`, one `ListResourceRecordSets` per zone.
/// The id is `zone|name|type`.
async fn list_records(cloud: &AwsCloud, cluster: &str) -> Result<Vec<Resource>, AwsError> {
    use crate::tasks::dns_name::normalise_dns_name;
    let zones = read("ListHostedZones", || {
        cloud
            .route53()
            .list_hosted_zones()
            .into_paginator()
            .items()
            .send()
            .collect::<Result<Vec<_>, _>>()
    })
    .await
    .map_err(|e| AwsError::call("ListHostedZones", cluster, e))?;
    let cluster = normalise_dns_name(cluster);
    let under = format!(".{cluster}");
    let mut out = Vec::new();
    for zone in zones {
        let zone_name = normalise_dns_name(zone.name());
        if cluster != zone_name && !cluster.ends_with(&format!(".{zone_name}")) {
            continue;
        }
        let zone_id = zone.id().trim_start_matches("/hostedzone/").to_string();
        let records = crate::retrying(
            "ListResourceRecordSets",
            kops_engine::TaskError::is_retryable,
            || crate::context::list_record_sets(cloud.route53(), &zone_id),
        )
        .await
        .map_err(|e| from_task("ListResourceRecordSets", &zone_id, e))?;
        for r in records {
            let name = normalise_dns_name(r.name());
            let kind = r.r#type().as_str();
            if name.ends_with(&under) && matches!(kind, "A" | "AAAA" | "CNAME" | "TXT") {
                out.push(Resource {
                    phase: 0,
                    kind: "dns-record",
                    id: format!("{zone_id}|{name}|{kind}"),
                    name: format!("{name} {kind}"),
                    shared: false,
                    vpc: None,
                });
            }
        }
    }
    Ok(out)
}

async fn delete_record(cloud: &AwsCloud, r: &Resource) -> Result<(), DeleteError> {
    use aws_sdk_route53::types::{Change, ChangeAction, ChangeBatch, RrType};
    let mut parts = r.id.splitn(3, '|');
    let (Some(zone), Some(name), Some(kind)) = (parts.next(), parts.next(), parts.next()) else {
        return Ok(());
    };
    let found = cloud
        .route53()
        .list_resource_record_sets()
        .hosted_zone_id(zone)
        .start_record_name(name)
        .start_record_type(RrType::from(kind))
        .max_items(1)
        .send()
        .await;
    let found = match found {
        Ok(f) => f,
        Err(e) => return sort_error("ListResourceRecordSets", r, e),
    };
    let Some(set) = found.resource_record_sets().first().filter(|s| {
        crate::tasks::dns_name::normalise_dns_name(s.name()) == name && s.r#type().as_str() == kind
    }) else {
        return Ok(()); // already gone
    };
    let change = Change::builder()
        .action(ChangeAction::Delete)
        .resource_record_set(set.clone())
        .build()
        .map_err(|e| Fatal(AwsError::other("ChangeResourceRecordSets", r.id.clone(), e)))?;
    let batch = ChangeBatch::builder()
        .changes(change)
        .build()
        .map_err(|e| Fatal(AwsError::other("ChangeResourceRecordSets", r.id.clone(), e)))?;
    match cloud
        .route53()
        .change_resource_record_sets()
        .hosted_zone_id(zone)
        .change_batch(batch)
        .send()
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if e.code() == Some("InvalidChangeBatch") => Ok(()), // gone meanwhile
        Err(e) => sort_error("ChangeResourceRecordSets", r, e),
    }
}

async fn delete_rule(cloud: &AwsCloud, r: &Resource) -> Result<(), DeleteError> {
    let events = cloud.eventbridge();
    let targets = match crate::tasks::eventbridge::list_targets(events, &r.id).await {
        Ok(t) => t,
        Err(e) => return sort_error("ListTargetsByRule", r, e),
    };
    let ids: Vec<String> = targets.iter().map(|t| t.id().to_string()).collect();
    if !ids.is_empty() {
        if let Err(e) = events
            .remove_targets()
            .rule(&r.id)
            .set_ids(Some(ids))
            .send()
            .await
        {
            return sort_error("RemoveTargets", r, e);
        }
    }
    match events.delete_rule().name(&r.id).send().await {
        Ok(_) => Ok(()),
        Err(e) => sort_error("DeleteRule", r, e),
    }
}

/// A discovery error of the engine's kind (retryable or not) as the
/// AwsError the listing returns, without repeating operation and resource.
fn from_task(operation: &'static str, resource: &str, e: kops_engine::TaskError) -> AwsError {
    let retryable = matches!(e, kops_engine::TaskError::Retryable { .. });
    let text = e.to_string();
    let prefix = format!("{operation} on `{resource}`: ");
    let message = text.strip_prefix(&prefix).unwrap_or(&text).to_string();
    AwsError::Call {
        operation,
        resource: resource.to_string(),
        message,
        hint: None,
        retryable,
    }
}

fn is_not_found<E: ProvideErrorMetadata>(e: &E) -> bool {
    e.code() == Some("NoSuchEntity")
}

/// A client of the Classic ELB API, counting its calls with the cloud's
/// other clients (the same one the `ClassicLoadBalancer` task uses).
fn classic_elb(cloud: &AwsCloud) -> aws_sdk_elasticloadbalancing::Client {
    crate::tasks::classic_load_balancer::classic_elb_client(cloud)
}

/// The Classic ELBs tagged for the cluster, by name, with their tags (as
/// EC2 tags, for [`ownership`]): DescribeLoadBalancers in pages of 20 and
/// one DescribeTags (at most 20 names) per page. A balancer deleted between
/// the two calls fails the batch; its names are then asked one by one and
/// the vanished one is skipped, as kops does.
async fn classic_load_balancers(
    cloud: &AwsCloud,
    cluster: &str,
) -> Result<Vec<(String, Vec<aws_sdk_ec2::types::Tag>)>, AwsError> {
    let elb = classic_elb(cloud);
    let pages = read("DescribeLoadBalancers", || {
        elb.describe_load_balancers()
            .page_size(20)
            .into_paginator()
            .send()
            .collect::<Result<Vec<_>, _>>()
    })
    .await
    .map_err(|e| AwsError::call("DescribeLoadBalancers", cluster, e))?;
    let mut out = Vec::new();
    for page in pages {
        let names: Vec<String> = page
            .load_balancer_descriptions()
            .iter()
            .filter_map(|l| l.load_balancer_name().map(str::to_string))
            .collect();
        if names.is_empty() {
            continue;
        }
        let described = match read("DescribeTags", || {
            elb.describe_tags()
                .set_load_balancer_names(Some(names.clone()))
                .send()
        })
        .await
        {
            Ok(out) => out.tag_descriptions().to_vec(),
            Err(e) if e.code() == Some("LoadBalancerNotFound") => {
                let mut one_by_one = Vec::new();
                for name in &names {
                    match read("DescribeTags", || {
                        elb.describe_tags().load_balancer_names(name).send()
                    })
                    .await
                    {
                        Ok(out) => one_by_one.extend(out.tag_descriptions().iter().cloned()),
                        Err(e) if e.code() == Some("LoadBalancerNotFound") => {}
                        Err(e) => return Err(AwsError::call("DescribeTags", cluster, e)),
                    }
                }
                one_by_one
            }
            Err(e) => return Err(AwsError::call("DescribeTags", cluster, e)),
        };
        for d in described {
            let Some(name) = d.load_balancer_name() else {
                continue;
            };
            let tags: Vec<aws_sdk_ec2::types::Tag> = d
                .tags()
                .iter()
                .map(|t| {
                    aws_sdk_ec2::types::Tag::builder()
                        .key(t.key())
                        .set_value(t.value().map(str::to_string))
                        .build()
                })
                .collect();
            out.push((name.to_string(), tags));
        }
    }
    Ok(out)
}

/// Deletes the resources (skipping shared ones) in phases, retrying what AWS
/// says still has dependencies, for at most `passes` rounds `interval` apart.
pub async fn delete_resources(
    cloud: &AwsCloud,
    resources: Vec<Resource>,
    passes: u32,
    interval: Duration,
    progress: &(dyn Fn(&Resource, Option<&str>) + Sync),
) -> Result<DeleteReport, AwsError> {
    let mut report = DeleteReport::default();
    let (kept, mut todo): (Vec<_>, Vec<_>) = resources.into_iter().partition(|r| r.shared);
    report.kept = kept;
    // Rules that point at other groups make cycles between groups: revoke
    // them first.
    let groups: Vec<String> = todo
        .iter()
        .filter(|r| r.kind == "security-group")
        .map(|r| r.id.clone())
        .collect();
    // Needed only before the groups' own phase: under way while the first
    // phase deletes.
    let mut revoking = Some(Box::pin(retrying(
        "revoking rules between security groups",
        || revoke_group_rules(cloud, &groups),
    )));

    let mut last_error = String::new();
    while !todo.is_empty() {
        report.passes += 1;
        let mut remaining = Vec::new();
        let mut progress_made = false;
        let mut blocked = false;
        // Phase by phase; the resources of one phase are deleted at once
        // (a few at a time). A phase with a failure holds back the later ones.
        let mut phases: BTreeMap<u8, Vec<Resource>> = BTreeMap::new();
        for r in std::mem::take(&mut todo) {
            phases.entry(r.phase).or_default().push(r);
        }
        let phases = with_followers(phases);
        for (_, batch) in phases {
            if blocked {
                remaining.extend(
                    batch
                        .into_iter()
                        .flat_map(|(r, followers)| std::iter::once(r).chain(followers)),
                );
                continue;
            }
            let results = match revoking.take() {
                Some(revoke) => {
                    let (results, revoked) = tokio::join!(delete_batch(cloud, batch), revoke);
                    revoked?;
                    results
                }
                None => delete_batch(cloud, batch).await,
            };
            for (r, result) in results {
                match result {
                    Ok(()) => {
                        progress(&r, None);
                        report.deleted.push(r);
                        progress_made = true;
                    }
                    Err(Again(msg) | Retry(msg)) => {
                        progress(&r, Some(&msg));
                        last_error = format!("{} `{}`: {msg}", r.kind, r.id);
                        blocked = true;
                        remaining.push(r);
                    }
                    Err(Fatal(e)) => return Err(e),
                }
            }
        }
        remaining.sort();
        todo = remaining;
        if todo.is_empty() {
            break;
        }
        if report.passes >= passes {
            return Err(AwsError::DeleteIncomplete {
                remaining: todo
                    .iter()
                    .map(|r| format!("{} {}", r.kind, r.id))
                    .collect(),
                passes: report.passes,
                last_error,
            });
        }
        // Give AWS time to settle (a NAT gateway deleting, an ENI detaching);
        // after a pass that deleted something the next one may start sooner.
        tokio::time::sleep(if progress_made {
            interval / 2
        } else {
            interval
        })
        .await;
    }
    Ok(report)
}

/// The phases' resources, each with those deleted right after it: a
/// group's launch template (the same `Name`) follows its autoscaling group
/// instead of waiting for every group to go. Under AWS' rate limits each
/// kind of deletion is paced on its own bucket (200, then 5 a second), so
/// 300 groups then 300 templates take twice as long as both side by side.
fn with_followers(
    phases: BTreeMap<u8, Vec<Resource>>,
) -> BTreeMap<u8, Vec<(Resource, Vec<Resource>)>> {
    let groups: BTreeSet<String> = phases
        .values()
        .flatten()
        .filter(|r| r.kind == "autoscaling-group" && !r.name.is_empty())
        .map(|r| r.name.clone())
        .collect();
    let (followers, others): (Vec<Resource>, Vec<Resource>) = phases
        .into_values()
        .flatten()
        .partition(|r| r.kind == "launch-template" && groups.contains(&r.name));
    let mut by_group: BTreeMap<String, Vec<Resource>> = BTreeMap::new();
    for r in followers {
        by_group.entry(r.name.clone()).or_default().push(r);
    }
    let mut out: BTreeMap<u8, Vec<(Resource, Vec<Resource>)>> = BTreeMap::new();
    for r in others {
        let follow = if r.kind == "autoscaling-group" {
            by_group.remove(&r.name).unwrap_or_default()
        } else {
            Vec::new()
        };
        out.entry(r.phase).or_default().push((r, follow));
    }
    out
}

/// How many deletions of one phase run at once: enough to hide the
/// latency of one call behind another, few enough not to be throttled.
const PARALLEL_DELETES: usize = 16;

/// Deletes `batch` (resources of one phase, each with its followers) with
/// at most `PARALLEL_DELETES` under way (the next starts as soon as one
/// ends, not when a whole group of them has), and returns each with its
/// result, in the batch's order, a resource's followers after it. A
/// follower is deleted once its leader is; otherwise it waits for the next
/// pass.
async fn delete_batch(
    cloud: &AwsCloud,
    batch: Vec<(Resource, Vec<Resource>)>,
) -> Vec<(Resource, Result<(), DeleteError>)> {
    type Outcome = Vec<Result<(), DeleteError>>;
    let mut done: Vec<Option<Outcome>> = batch.iter().map(|_| None).collect();
    let mut running = tokio::task::JoinSet::new();
    let mut waiting = batch.iter().cloned().enumerate();
    loop {
        while running.len() < PARALLEL_DELETES {
            let Some((i, (r, followers))) = waiting.next() else {
                break;
            };
            let cloud = cloud.clone();
            running.spawn(async move {
                let mut results = vec![delete_in_place(&cloud, &r).await];
                for f in &followers {
                    results.push(if results[0].is_ok() {
                        delete_in_place(&cloud, f).await
                    } else {
                        Err(Retry(format!("waits for {} `{}` to go", r.kind, r.id)))
                    });
                }
                (i, results)
            });
        }
        let Some(joined) = running.join_next().await else {
            break;
        };
        // A deletion that panicked is left for the next pass.
        if let Ok((i, results)) = joined {
            done[i] = Some(results);
        }
    }
    batch
        .into_iter()
        .zip(done)
        .flat_map(|((r, followers), results)| {
            let mut results = results.unwrap_or_default().into_iter();
            std::iter::once(r)
                .chain(followers)
                .map(|r| {
                    let result = results
                        .next()
                        .unwrap_or_else(|| Err(Retry("the deletion stopped unexpectedly".into())));
                    (r, result)
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

enum DeleteError {
    /// AWS' answer was transient (throttling, 5xx, none): the deletion is
    /// tried again at once (see [`delete_in_place`]).
    Again(String),
    /// The resource is not ready to go (a dependency, a conflict): the
    /// next pass tries again.
    Retry(String),
    Fatal(AwsError),
}
use DeleteError::{Again, Fatal, Retry};

fn sort_error<E>(
    operation: &'static str,
    r: &Resource,
    e: aws_smithy_runtime_api::client::result::SdkError<
        E,
        aws_smithy_runtime_api::client::orchestrator::HttpResponse,
    >,
) -> Result<(), DeleteError>
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let code = e.code().unwrap_or_default().to_string();
    // Already gone: EC2's `*.NotFound`, ELBv2's `*NotFound`, EventBridge's
    // `ResourceNotFoundException`, IAM's `NoSuchEntity`, SQS' queue codes.
    let gone = code.ends_with("NotFound")
        || code == "ResourceNotFoundException"
        || code == "NoSuchEntity"
        || code.contains("NonExistentQueue")
        || code.contains("QueueDoesNotExist");
    if gone {
        return Ok(());
    }
    // IAM's answer while a role is still in an instance profile or has
    // policies (a prerequisite step failed or raced): the next pass runs
    // the prerequisites again, then the delete.
    let conflict = code == "DeleteConflict";
    let transient = crate::context::is_transient(&e);
    match AwsError::call(operation, r.id.clone(), e) {
        AwsError::Call { message, .. } if transient => {
            Err(Again(format!("{operation}: {message}")))
        }
        // The progress line names the resource already; a transient
        // failure needs no hint.
        AwsError::Call {
            message, retryable, ..
        } if retryable || conflict => Err(Retry(format!("{operation}: {message}"))),
        e => Err(Fatal(e)),
    }
}

/// How often a deletion is tried in place while AWS' answers are
/// transient, before it waits for the next pass.
const IN_PLACE_ATTEMPTS: u32 = 4;

/// Deletes `r`, again after a short wait (0.2 s, doubled) while AWS'
/// answer is transient: a throttled or dropped call costs a moment, not a
/// pass of the whole deletion (and the interval before it).
async fn delete_in_place(cloud: &AwsCloud, r: &Resource) -> Result<(), DeleteError> {
    let mut wait = Duration::from_millis(200);
    let mut attempt = 1;
    loop {
        match delete_one(cloud, r).await {
            Err(Again(message)) if attempt < IN_PLACE_ATTEMPTS => {
                tracing::info!("{} {}: {message}; trying again", r.kind, r.id);
                tokio::time::sleep(wait).await;
                wait *= 2;
                attempt += 1;
            }
            Err(Again(message)) => return Err(Retry(message)),
            other => return other,
        }
    }
}

async fn delete_one(cloud: &AwsCloud, r: &Resource) -> Result<(), DeleteError> {
    let ec2 = cloud.ec2();
    let iam = cloud.iam();
    match r.kind {
        "dns-record" => delete_record(cloud, r).await,
        "eventbridge-rule" => delete_rule(cloud, r).await,
        "sqs-queue" => match cloud.sqs().delete_queue().queue_url(&r.id).send().await {
            Ok(_) => Ok(()),
            Err(e) => sort_error("DeleteQueue", r, e),
        },
        "autoscaling-group" => cloud
            .autoscaling()
            .delete_auto_scaling_group()
            .auto_scaling_group_name(&r.id)
            .force_delete(true)
            .send()
            .await
            .map(|_| ())
            .or_else(|e| {
                // Gone already, or its deletion under way.
                let message = e.message().unwrap_or_default().to_string();
                if message.contains("not found") || message.contains("does not exist") {
                    Ok(())
                } else if e.code() == Some("ScalingActivityInProgress")
                    || e.code() == Some("ResourceInUse")
                {
                    Err(Retry(message))
                } else {
                    sort_error("DeleteAutoScalingGroup", r, e)
                }
            }),
        "load-balancer" => cloud
            .elbv2()
            .delete_load_balancer()
            .load_balancer_arn(&r.id)
            .send()
            .await
            .map(|_| ())
            .or_else(|e| sort_error("DeleteLoadBalancer", r, e)),
        "classic-load-balancer" => classic_elb(cloud)
            .delete_load_balancer()
            .load_balancer_name(&r.id)
            .send()
            .await
            .map(|_| ())
            .or_else(|e| sort_error("DeleteLoadBalancer", r, e)),
        "target-group" => cloud
            .elbv2()
            .delete_target_group()
            .target_group_arn(&r.id)
            .send()
            .await
            .map(|_| ())
            .or_else(|e| sort_error("DeleteTargetGroup", r, e)),
        "launch-template" => ec2
            .delete_launch_template()
            .launch_template_id(&r.id)
            .send()
            .await
            .map(|_| ())
            .or_else(|e| sort_error("DeleteLaunchTemplate", r, e)),
        "volume" => ec2
            .delete_volume()
            .volume_id(&r.id)
            .send()
            .await
            .map(|_| ())
            .or_else(|e| {
                // Still attached to an instance that is terminating.
                if e.code() == Some("VolumeInUse") {
                    Err(Retry(e.message().unwrap_or("in use").to_string()))
                } else {
                    sort_error("DeleteVolume", r, e)
                }
            }),
        "instance" => ec2
            .terminate_instances()
            .instance_ids(&r.id)
            .send()
            .await
            .map(|_| ())
            .or_else(|e| sort_error("TerminateInstances", r, e)),
        "nat-gateway" => ec2
            .delete_nat_gateway()
            .nat_gateway_id(&r.id)
            .send()
            .await
            .map(|_| ())
            .or_else(|e| sort_error("DeleteNatGateway", r, e)),
        "elastic-ip" => ec2
            .release_address()
            .allocation_id(&r.id)
            .send()
            .await
            .map(|_| ())
            .or_else(|e| sort_error("ReleaseAddress", r, e)),
        "keypair" => ec2
            .delete_key_pair()
            .key_name(&r.id)
            .send()
            .await
            .map(|_| ())
            .or_else(|e| sort_error("DeleteKeyPair", r, e)),
        "subnet" => ec2
            .delete_subnet()
            .subnet_id(&r.id)
            .send()
            .await
            .map(|_| ())
            .or_else(|e| sort_error("DeleteSubnet", r, e)),
        "internet-gateway" => {
            // Detached already when an earlier try's delete failed after
            // its detach: EC2 then answers Gateway.NotAttached.
            if let Some(vpc) = &r.vpc {
                ec2.detach_internet_gateway()
                    .internet_gateway_id(&r.id)
                    .vpc_id(vpc)
                    .send()
                    .await
                    .map(|_| ())
                    .or_else(|e| match e.code() {
                        Some("Gateway.NotAttached") => Ok(()),
                        _ => sort_error("DetachInternetGateway", r, e),
                    })?;
            }
            ec2.delete_internet_gateway()
                .internet_gateway_id(&r.id)
                .send()
                .await
                .map(|_| ())
                .or_else(|e| sort_error("DeleteInternetGateway", r, e))
        }
        "egress-only-internet-gateway" => ec2
            .delete_egress_only_internet_gateway()
            .egress_only_internet_gateway_id(&r.id)
            .send()
            .await
            .map(|_| ())
            .or_else(|e| sort_error("DeleteEgressOnlyInternetGateway", r, e)),
        "route-table" => {
            // Deleting a subnet does not always drop its association (moto
            // keeps it); disassociate what is left first. A transient
            // failure to look is tried again; any other leaves it to the
            // delete's own answer.
            let described = ec2
                .describe_route_tables()
                .route_table_ids(&r.id)
                .send()
                .await;
            if let Err(e) = &described {
                if crate::context::is_transient(e) {
                    return Err(Again(format!(
                        "DescribeRouteTables: {}",
                        crate::error_text::error_text(e).text
                    )));
                }
            }
            if let Ok(out) = described {
                for a in out.route_tables().iter().flat_map(|t| t.associations()) {
                    if a.main() == Some(true) {
                        continue;
                    }
                    if let Some(id) = a.route_table_association_id() {
                        ec2.disassociate_route_table()
                            .association_id(id)
                            .send()
                            .await
                            .map(|_| ())
                            .or_else(|e| sort_error("DisassociateRouteTable", r, e))?;
                    }
                }
            }
            ec2.delete_route_table()
                .route_table_id(&r.id)
                .send()
                .await
                .map(|_| ())
                .or_else(|e| sort_error("DeleteRouteTable", r, e))
        }
        "security-group" => ec2
            .delete_security_group()
            .group_id(&r.id)
            .send()
            .await
            .map(|_| ())
            .or_else(|e| sort_error("DeleteSecurityGroup", r, e)),
        "vpc" => ec2
            .delete_vpc()
            .vpc_id(&r.id)
            .send()
            .await
            .map(|_| ())
            .or_else(|e| sort_error("DeleteVpc", r, e)),
        "dhcp-options" => ec2
            .delete_dhcp_options()
            .dhcp_options_id(&r.id)
            .send()
            .await
            .map(|_| ())
            .or_else(|e| sort_error("DeleteDhcpOptions", r, e)),
        "iam-instance-profile" => {
            // Its roles out first; a failure of any step is sorted like
            // the delete's own (retried next pass when AWS may answer
            // differently), never skipped.
            let roles = match iam
                .get_instance_profile()
                .instance_profile_name(&r.id)
                .send()
                .await
            {
                Ok(p) => p
                    .instance_profile()
                    .map(|p| p.roles().to_vec())
                    .unwrap_or_default(),
                Err(e) => return sort_error("GetInstanceProfile", r, e),
            };
            for role in roles {
                iam.remove_role_from_instance_profile()
                    .instance_profile_name(&r.id)
                    .role_name(role.role_name())
                    .send()
                    .await
                    .map(|_| ())
                    .or_else(|e| sort_error("RemoveRoleFromInstanceProfile", r, e))?;
            }
            iam.delete_instance_profile()
                .instance_profile_name(&r.id)
                .send()
                .await
                .map(|_| ())
                .or_else(|e| sort_error("DeleteInstanceProfile", r, e))
        }
        "iam-role" => delete_role(cloud, r).await,
        "iam-oidc-provider" => iam
            .delete_open_id_connect_provider()
            .open_id_connect_provider_arn(&r.id)
            .send()
            .await
            .map(|_| ())
            .or_else(|e| sort_error("DeleteOpenIDConnectProvider", r, e)),
        other => Err(Fatal(AwsError::other(
            "delete",
            r.id.clone(),
            format!("kops-rs does not know how to delete a `{other}`"),
        ))),
    }
}

/// Deletes the role `r` after its prerequisites, which IAM refuses the
/// delete without (`DeleteConflict`): the role out of every instance
/// profile, managed policies detached, inline policies deleted. Every
/// listing is paged. A failed step (or a conflict from a policy or profile
/// added meanwhile) is retried next pass, prerequisites first.
async fn delete_role(cloud: &AwsCloud, r: &Resource) -> Result<(), DeleteError> {
    let iam = cloud.iam();
    let (profiles, inline, attached) = tokio::join!(
        iam.list_instance_profiles_for_role()
            .role_name(&r.id)
            .into_paginator()
            .items()
            .send()
            .collect::<Result<Vec<_>, _>>(),
        iam.list_role_policies()
            .role_name(&r.id)
            .into_paginator()
            .items()
            .send()
            .collect::<Result<Vec<_>, _>>(),
        iam.list_attached_role_policies()
            .role_name(&r.id)
            .into_paginator()
            .items()
            .send()
            .collect::<Result<Vec<_>, _>>(),
    );
    let profiles = match profiles {
        Ok(p) => p,
        Err(e) => return sort_error("ListInstanceProfilesForRole", r, e),
    };
    let inline = match inline {
        Ok(p) => p,
        Err(e) => return sort_error("ListRolePolicies", r, e),
    };
    let attached = match attached {
        Ok(a) => a,
        Err(e) => return sort_error("ListAttachedRolePolicies", r, e),
    };
    // The prerequisites are independent of each other: all at once, each
    // failure sorted like the delete's own.
    let mut steps = tokio::task::JoinSet::new();
    for profile in profiles {
        let (iam, role, r) = (iam.clone(), r.id.clone(), r.clone());
        steps.spawn(async move {
            iam.remove_role_from_instance_profile()
                .instance_profile_name(profile.instance_profile_name())
                .role_name(&role)
                .send()
                .await
                .map(|_| ())
                .or_else(|e| sort_error("RemoveRoleFromInstanceProfile", &r, e))
        });
    }
    for name in inline {
        let (iam, role, r) = (iam.clone(), r.id.clone(), r.clone());
        steps.spawn(async move {
            iam.delete_role_policy()
                .role_name(&role)
                .policy_name(name)
                .send()
                .await
                .map(|_| ())
                .or_else(|e| sort_error("DeleteRolePolicy", &r, e))
        });
    }
    for p in attached {
        let (iam, role, r) = (iam.clone(), r.id.clone(), r.clone());
        steps.spawn(async move {
            iam.detach_role_policy()
                .role_name(&role)
                .set_policy_arn(p.policy_arn().map(str::to_string))
                .send()
                .await
                .map(|_| ())
                .or_else(|e| sort_error("DetachRolePolicy", &r, e))
        });
    }
    let mut first_error = None;
    while let Some(joined) = steps.join_next().await {
        let result = joined
            .unwrap_or_else(|_| Err(Retry("a step of the deletion stopped unexpectedly".into())));
        if let Err(e) = result {
            // A fatal answer wins over one to retry.
            if first_error.is_none() || matches!(e, Fatal(_)) {
                first_error = Some(e);
            }
        }
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    iam.delete_role()
        .role_name(&r.id)
        .send()
        .await
        .map(|_| ())
        .or_else(|e| sort_error("DeleteRole", r, e))
}

/// Revokes the rules of `groups` that reference security groups, and the
/// rules of other groups that reference `groups`, so groups that reference
/// each other can be deleted.
async fn revoke_group_rules(cloud: &AwsCloud, groups: &[String]) -> Result<(), AwsError> {
    if groups.is_empty() {
        return Ok(());
    }
    let ec2 = cloud.ec2();
    // Named by count: the ids of a large cluster would fill the line.
    let label = format!("{} security groups of the cluster", groups.len());
    let referring = |filter: &'static str| {
        read("DescribeSecurityGroups", move || {
            ec2.describe_security_groups()
                .filters(
                    Filter::builder()
                        .name(filter)
                        .set_values(Some(groups.to_vec()))
                        .build(),
                )
                .into_paginator()
                .items()
                .send()
                .collect::<Result<Vec<_>, _>>()
        })
    };
    // The cluster's groups and the groups whose rules name them, side by side.
    let (described, by_ingress, by_egress) = tokio::join!(
        read("DescribeSecurityGroups", || ec2
            .describe_security_groups()
            .set_group_ids(Some(groups.to_vec()))
            .into_paginator()
            .items()
            .send()
            .collect::<Result<Vec<_>, _>>()),
        referring("ip-permission.group-id"),
        referring("egress.ip-permission.group-id"),
    );
    let described =
        described.map_err(|e| AwsError::call("DescribeSecurityGroups", label.clone(), e))?;
    let referencing = |perms: &[IpPermission]| -> Vec<IpPermission> {
        perms
            .iter()
            .filter(|p| !p.user_id_group_pairs().is_empty())
            .map(|p| {
                let pairs: Vec<UserIdGroupPair> = p
                    .user_id_group_pairs()
                    .iter()
                    .map(|g| {
                        UserIdGroupPair::builder()
                            .set_group_id(g.group_id().map(str::to_string))
                            .build()
                    })
                    .collect();
                IpPermission::builder()
                    .set_ip_protocol(p.ip_protocol().map(str::to_string))
                    .set_from_port(p.from_port())
                    .set_to_port(p.to_port())
                    .set_user_id_group_pairs(Some(pairs))
                    .build()
            })
            .collect()
    };
    // Groups that are not the cluster's (a `securityGroupOverride`, the
    // user's own) may hold rules naming the cluster's groups, which would
    // keep those from being deleted: revoke just those permissions there.
    let mut outside: Vec<aws_sdk_ec2::types::SecurityGroup> = Vec::new();
    for found in [by_ingress, by_egress] {
        let found =
            found.map_err(|e| AwsError::call("DescribeSecurityGroups", label.clone(), e))?;
        for g in &found {
            let id = g.group_id().unwrap_or_default();
            if !groups.iter().any(|c| c == id) && !outside.iter().any(|o| o.group_id() == Some(id))
            {
                outside.push(g.clone());
            }
        }
    }
    let naming_ours = |perms: &[IpPermission]| -> Vec<IpPermission> {
        perms
            .iter()
            .filter_map(|p| {
                let pairs: Vec<UserIdGroupPair> = p
                    .user_id_group_pairs()
                    .iter()
                    .filter(|g| {
                        g.group_id()
                            .is_some_and(|id| groups.iter().any(|c| c == id))
                    })
                    .map(|g| {
                        UserIdGroupPair::builder()
                            .set_group_id(g.group_id().map(str::to_string))
                            .build()
                    })
                    .collect();
                (!pairs.is_empty()).then(|| {
                    IpPermission::builder()
                        .set_ip_protocol(p.ip_protocol().map(str::to_string))
                        .set_from_port(p.from_port())
                        .set_to_port(p.to_port())
                        .set_user_id_group_pairs(Some(pairs))
                        .build()
                })
            })
            .collect()
    };
    // Every group's revocations at once.
    let mut running = tokio::task::JoinSet::new();
    let outside = outside.iter().map(|g| {
        (
            g,
            naming_ours(g.ip_permissions()),
            naming_ours(g.ip_permissions_egress()),
        )
    });
    let ours = described.iter().map(|g| {
        (
            g,
            referencing(g.ip_permissions()),
            referencing(g.ip_permissions_egress()),
        )
    });
    for (g, ingress, egress) in outside.chain(ours) {
        let ec2 = ec2.clone();
        let id = g.group_id().unwrap_or_default().to_string();
        running.spawn(async move { revoke(&ec2, &id, ingress, egress).await });
    }
    while let Some(joined) = running.join_next().await {
        joined.map_err(|e| AwsError::other("RevokeSecurityGroupIngress", label.clone(), e))??;
    }
    Ok(())
}

/// EC2's answer to revoking a rule the group does not have.
const RULE_GONE: &str = "InvalidPermission.NotFound";

/// Revokes the `ingress` and `egress` permissions of the group `id` (the
/// calls are skipped for empty lists), each call again while AWS' answer
/// is transient; a rule already gone (an earlier try got through but its
/// answer was lost) is what was wanted.
async fn revoke(
    ec2: &aws_sdk_ec2::Client,
    id: &str,
    ingress: Vec<aws_sdk_ec2::types::IpPermission>,
    egress: Vec<aws_sdk_ec2::types::IpPermission>,
) -> Result<(), AwsError> {
    if !ingress.is_empty() {
        let sent = read("RevokeSecurityGroupIngress", || {
            ec2.revoke_security_group_ingress()
                .group_id(id)
                .set_ip_permissions(Some(ingress.clone()))
                .send()
        })
        .await;
        match sent {
            Err(e) if e.code() != Some(RULE_GONE) => {
                return Err(AwsError::call("RevokeSecurityGroupIngress", id, e))
            }
            _ => {}
        }
    }
    if !egress.is_empty() {
        let sent = read("RevokeSecurityGroupEgress", || {
            ec2.revoke_security_group_egress()
                .group_id(id)
                .set_ip_permissions(Some(egress.clone()))
                .send()
        })
        .await;
        match sent {
            Err(e) if e.code() != Some(RULE_GONE) => {
                return Err(AwsError::call("RevokeSecurityGroupEgress", id, e))
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
    use aws_smithy_runtime_api::client::result::{ConnectorError, SdkError};
    use aws_smithy_types::body::SdkBody;
    use aws_smithy_types::error::ErrorMetadata;

    type DeleteRoleError = aws_sdk_iam::operation::delete_role::DeleteRoleError;

    fn answer(status: u16, code: &str, message: &str) -> SdkError<DeleteRoleError, HttpResponse> {
        SdkError::service_error(
            DeleteRoleError::generic(ErrorMetadata::builder().code(code).message(message).build()),
            HttpResponse::new(status.try_into().expect("a status"), SdkBody::empty()),
        )
    }

    fn role() -> Resource {
        Resource {
            phase: 8,
            kind: "iam-role",
            id: "nodes.example.com".into(),
            name: "nodes.example.com".into(),
            shared: false,
            vpc: None,
        }
    }

    fn sorted(e: SdkError<DeleteRoleError, HttpResponse>) -> &'static str {
        match sort_error("DeleteRole", &role(), e) {
            Ok(()) => "gone",
            Err(Again(_)) => "again",
            Err(Retry(_)) => "retry",
            Err(Fatal(_)) => "fatal",
        }
    }

    #[test]
    fn a_groups_launch_template_follows_the_group() {
        let r = |phase, kind, id: &str, name: &str| Resource {
            phase,
            kind,
            id: id.into(),
            name: name.into(),
            shared: false,
            vpc: None,
        };
        let mut phases = BTreeMap::new();
        phases.insert(
            0,
            vec![
                r(0, "autoscaling-group", "a.c", "a.c"),
                r(0, "autoscaling-group", "b.c", "b.c"),
            ],
        );
        phases.insert(
            1,
            vec![
                r(1, "launch-template", "lt-1", "a.c"),
                r(1, "launch-template", "lt-2", "other.c"),
                r(1, "instance", "i-1", "a.c"),
            ],
        );
        let out = with_followers(phases);
        let summary: Vec<(u8, &str, Vec<&str>)> = out
            .iter()
            .flat_map(|(phase, items)| {
                items.iter().map(move |(r, f)| {
                    (
                        *phase,
                        r.id.as_str(),
                        f.iter().map(|f| f.id.as_str()).collect(),
                    )
                })
            })
            .collect();
        assert_eq!(
            summary,
            [
                (0, "a.c", vec!["lt-1"]),
                (0, "b.c", vec![]),
                (1, "lt-2", vec![]),
                (1, "i-1", vec![]),
            ]
        );
    }

    #[test]
    fn delete_conflicts_and_transient_answers_are_retried() {
        let conflict = answer(
            409,
            "DeleteConflict",
            "Cannot delete entity, must remove roles from instance profile first.",
        );
        assert_eq!(sorted(conflict), "retry");
        assert_eq!(sorted(answer(400, "Throttling", "Rate exceeded")), "again");
        assert_eq!(sorted(answer(500, "InternalFailure", "oops")), "again");
        assert_eq!(sorted(answer(503, "ServiceUnavailable", "later")), "again");
        assert_eq!(
            sorted(answer(400, "DependencyViolation", "in use")),
            "retry",
            "the next pass, not at once"
        );
        let reset = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset by peer");
        assert_eq!(
            sorted(SdkError::dispatch_failure(ConnectorError::io(Box::new(
                reset
            )))),
            "again"
        );
        assert_eq!(sorted(answer(404, "NoSuchEntity", "no role")), "gone");
        assert_eq!(sorted(answer(403, "AccessDenied", "not allowed")), "fatal");
        let Err(Again(text)) = sort_error("DeleteRole", &role(), answer(500, "InternalError", "x"))
        else {
            panic!("again expected");
        };
        assert_eq!(text, "DeleteRole: InternalError: x", "one line, no hint");
    }

    #[test]
    fn a_fatal_delete_error_is_one_line_without_debug_structures() {
        let Err(Fatal(e)) = sort_error("DeleteRole", &role(), answer(403, "AccessDenied", "no"))
        else {
            panic!("fatal expected");
        };
        let text = e.to_string();
        assert_eq!(
            text,
            "AWS DeleteRole on `nodes.example.com` failed: AccessDenied: no\n\
             hint: the AWS identity in use lacks this permission"
        );
    }

    #[tokio::test]
    async fn a_step_is_repeated_while_aws_answers_are_retryable() {
        let tries = std::sync::atomic::AtomicU32::new(0);
        let result = retrying("test", || {
            let n = tries.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async move {
                if n < 2 {
                    Err(AwsError::call(
                        "ListRoles",
                        "c",
                        answer(500, "InternalFailure", "x"),
                    ))
                } else {
                    Ok(n)
                }
            }
        })
        .await;
        assert_eq!(result.expect("third try succeeds"), 2);

        let tries = std::sync::atomic::AtomicU32::new(0);
        let result: Result<(), AwsError> = retrying("test", || {
            tries.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async {
                Err(AwsError::call(
                    "ListRoles",
                    "c",
                    answer(403, "AccessDenied", "x"),
                ))
            }
        })
        .await;
        assert!(result.is_err());
        assert_eq!(
            tries.load(std::sync::atomic::Ordering::SeqCst),
            1,
            "fatal: no retry"
        );
    }
}
