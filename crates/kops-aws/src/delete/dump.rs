//! `kops toolbox dump`: the cluster's cloud resources as kops' dump model
//! (resources, instances, load balancers, subnets, VPC).
//!
//! The resources are the ones `delete cluster` finds
//! ([`list_cluster_resources`]) and the instances' addresses and roles the
//! ones `get instances` shows ([`instance_details`]); nothing is listed
//! again. Three look-ups by id fill in what those listings do not keep:
//! the subnets' zones, the load balancers' DNS names and the images'
//! owners (from which kops guesses the SSH user).
//!
//! Each resource's `raw` is a reduced object of the fields kops-rs knows
//! of it, not the whole AWS object kops prints.

use std::collections::{BTreeMap, BTreeSet};

use super::{list_cluster_resources, Resource};
use crate::instances::{instance_details, InstanceDetails};
use crate::{AwsCloud, AwsError};

pub use kops_cloud::{
    Dump as ClusterDump, DumpedInstance, DumpedLoadBalancer, DumpedResource, DumpedSubnet,
};

/// The kops type name of a kops-rs resource kind, for the kinds kops puts
/// in a dump (it leaves out groups, templates, volumes, keys, records, IAM).
fn dumped_kind(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "instance" => "instance",
        "internet-gateway" => "internet-gateway",
        "egress-only-internet-gateway" => "egress-only-internet-gateway",
        "subnet" => "subnet",
        "vpc" => "vpc",
        "load-balancer" => "load-balancer",
        "target-group" => "target-group",
        "security-group" => "security-group",
        "route-table" => "route-table",
        "nat-gateway" => "nat-gateway",
        "sqs-queue" => "sqs",
        "eventbridge-rule" => "eventbridge-rule",
        _ => return None,
    })
}

/// kops' guess of the login user from an image's owner account (and, for
/// CentOS, its name); `None` when it cannot tell.
pub fn guess_ssh_user(owner: Option<&str>, name: Option<&str>) -> Option<&'static str> {
    match owner {
        // Amazon Linux 2023, Red Hat
        Some("137112412989") | Some("309956199498") => return Some("ec2-user"),
        Some("136693071363") => return Some("admin"),
        Some("099720109477") => return Some("ubuntu"),
        Some("075585003325") => return Some("core"),
        Some("792107900819") => return Some("rocky"),
        _ => {}
    }
    name.filter(|n| n.to_ascii_lowercase().starts_with("centos"))
        .map(|_| "centos")
}

/// A load balancer's name from its ARN (`.../loadbalancer/net/<name>/<id>`).
fn lb_name(arn: &str) -> String {
    let parts: Vec<&str> = arn.rsplit('/').collect();
    match parts.as_slice() {
        [_, name, ..] if arn.contains(":loadbalancer/") => name.to_string(),
        _ => arn.to_string(),
    }
}

/// Everything of the cluster kops' `toolbox dump` shows.
pub async fn dump_cluster(cloud: &AwsCloud, cluster: &str) -> Result<ClusterDump, AwsError> {
    let listed = list_cluster_resources(cloud, cluster).await?;
    let details = instance_details(cloud, cluster).await?;
    let ids = |kind: &str| -> Vec<String> {
        listed
            .iter()
            .filter(|r| r.kind == kind)
            .map(|r| r.id.clone())
            .collect()
    };
    let zones = subnet_zones(cloud, cluster, ids("subnet")).await?;
    let dns_names = lb_dns_names(cloud, cluster, ids("load-balancer")).await?;
    let images: BTreeSet<String> = details
        .values()
        .filter_map(|d| d.image_id.clone())
        .collect();
    let users = ssh_users(cloud, images).await;
    Ok(build(&listed, &details, &zones, &dns_names, &users))
}

/// Assembles the dump from what was read (no AWS calls).
fn build(
    listed: &[Resource],
    details: &BTreeMap<String, InstanceDetails>,
    zones: &BTreeMap<String, String>,
    dns_names: &BTreeMap<String, String>,
    users: &BTreeMap<String, &'static str>,
) -> ClusterDump {
    let mut dump = ClusterDump::default();
    for r in listed {
        let Some(kind) = dumped_kind(r.kind) else {
            continue;
        };
        let mut raw: Vec<(&'static str, String)> = Vec::new();
        if !r.name.is_empty() {
            raw.push(("name", r.name.clone()));
        }
        raw.push(("shared", r.shared.to_string()));
        match kind {
            "instance" => {
                let d = details.get(&r.id).cloned().unwrap_or_default();
                let optional = [
                    ("instanceType", d.instance_type.clone()),
                    ("imageId", d.image_id.clone()),
                    ("privateIpAddress", d.private_ip.clone()),
                    ("publicIpAddress", d.public_ip.clone()),
                ];
                raw.extend(optional.into_iter().filter_map(|(k, v)| Some((k, v?))));
                let mut instance = DumpedInstance {
                    name: r.id.clone(),
                    roles: d.roles.clone(),
                    ssh_user: d
                        .image_id
                        .as_ref()
                        .and_then(|i| users.get(i))
                        .map(|u| u.to_string()),
                    ..Default::default()
                };
                match (d.public_ip, d.private_ip) {
                    (Some(public), _) => instance.public_addresses.push(public),
                    (None, Some(private)) => instance.private_addresses.push(private),
                    (None, None) => {}
                }
                dump.instances.push(instance);
            }
            "subnet" => {
                let zone = zones.get(&r.id).cloned();
                if let Some(z) = &zone {
                    raw.push(("availabilityZone", z.clone()));
                }
                dump.subnets.push(DumpedSubnet {
                    id: r.id.clone(),
                    zone,
                });
            }
            "vpc" => dump.vpc = Some(r.id.clone()),
            "load-balancer" => {
                let dns_name = dns_names.get(&r.id).cloned();
                if let Some(d) = &dns_name {
                    raw.push(("dnsName", d.clone()));
                }
                dump.load_balancers.push(DumpedLoadBalancer {
                    name: lb_name(&r.id),
                    dns_name,
                });
            }
            _ => {}
        }
        dump.resources.push(DumpedResource {
            id: r.id.clone(),
            kind,
            raw,
        });
    }
    dump.instances.sort_by(|a, b| a.name.cmp(&b.name));
    dump
}

/// Each subnet's availability zone (one `DescribeSubnets` by id).
async fn subnet_zones(
    cloud: &AwsCloud,
    cluster: &str,
    ids: Vec<String>,
) -> Result<BTreeMap<String, String>, AwsError> {
    if ids.is_empty() {
        return Ok(BTreeMap::new());
    }
    let subnets = cloud
        .ec2()
        .describe_subnets()
        .set_subnet_ids(Some(ids))
        .into_paginator()
        .items()
        .send()
        .collect::<Result<Vec<_>, _>>()
        .await
        .map_err(|e| AwsError::call("DescribeSubnets", cluster, e))?;
    Ok(subnets
        .iter()
        .filter_map(|s| {
            Some((
                s.subnet_id()?.to_string(),
                s.availability_zone()?.to_string(),
            ))
        })
        .collect())
}

/// Each load balancer's DNS name, by ARN (`DescribeLoadBalancers` by ARN,
/// twenty at a time: the API's limit).
async fn lb_dns_names(
    cloud: &AwsCloud,
    cluster: &str,
    arns: Vec<String>,
) -> Result<BTreeMap<String, String>, AwsError> {
    let mut out = BTreeMap::new();
    for chunk in arns.chunks(20) {
        let r = cloud
            .elbv2()
            .describe_load_balancers()
            .set_load_balancer_arns(Some(chunk.to_vec()))
            .send()
            .await
            .map_err(|e| AwsError::call("DescribeLoadBalancers", cluster, e))?;
        for lb in r.load_balancers() {
            if let (Some(arn), Some(dns)) = (lb.load_balancer_arn(), lb.dns_name()) {
                out.insert(arn.to_string(), dns.to_string());
            }
        }
    }
    Ok(out)
}

/// The SSH user of each image that kops can guess one for (one
/// `DescribeImages` by id). A failed look-up only loses the users, as in
/// kops, which warns and dumps the rest.
async fn ssh_users(cloud: &AwsCloud, images: BTreeSet<String>) -> BTreeMap<String, &'static str> {
    if images.is_empty() {
        return BTreeMap::new();
    }
    match cloud
        .ec2()
        .describe_images()
        .set_image_ids(Some(images.into_iter().collect()))
        .send()
        .await
    {
        Ok(r) => r
            .images()
            .iter()
            .filter_map(|i| {
                let user = guess_ssh_user(i.owner_id(), i.name())?;
                Some((i.image_id()?.to_string(), user))
            })
            .collect(),
        Err(e) => {
            tracing::warn!(
                "unable to read the instances' images: {}",
                crate::error_text::error_text(&e).text
            );
            BTreeMap::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(kind: &'static str, id: &str) -> Resource {
        Resource {
            phase: 0,
            kind,
            id: id.to_string(),
            name: String::new(),
            shared: false,
            vpc: None,
        }
    }

    #[test]
    fn ssh_user_follows_the_image_owner() {
        assert_eq!(guess_ssh_user(Some("099720109477"), None), Some("ubuntu"));
        assert_eq!(guess_ssh_user(Some("136693071363"), None), Some("admin"));
        assert_eq!(guess_ssh_user(Some("137112412989"), None), Some("ec2-user"));
        assert_eq!(
            guess_ssh_user(Some("1"), Some("CentOS-7-x86_64")),
            Some("centos")
        );
        assert_eq!(guess_ssh_user(Some("1"), Some("my-image")), None);
    }

    #[test]
    fn load_balancer_name_comes_from_its_arn() {
        assert_eq!(
            lb_name("arn:aws:elasticloadbalancing:us-east-1:1:loadbalancer/net/api-a-b/0123"),
            "api-a-b"
        );
        assert_eq!(lb_name("odd"), "odd");
    }

    #[test]
    fn instances_are_sorted_and_public_addresses_win() {
        let listed = vec![
            res("instance", "i-b"),
            res("instance", "i-a"),
            res("subnet", "subnet-1"),
            res("vpc", "vpc-1"),
            res("autoscaling-group", "nodes.example.com"),
        ];
        let mut details = BTreeMap::new();
        details.insert(
            "i-a".to_string(),
            InstanceDetails {
                private_ip: Some("10.0.0.1".into()),
                public_ip: Some("1.2.3.4".into()),
                roles: vec!["control-plane".into()],
                image_id: Some("ami-1".into()),
                ..Default::default()
            },
        );
        details.insert(
            "i-b".to_string(),
            InstanceDetails {
                private_ip: Some("10.0.0.2".into()),
                roles: vec!["node".into()],
                ..Default::default()
            },
        );
        let zones = BTreeMap::from([("subnet-1".to_string(), "us-east-1a".to_string())]);
        let users = BTreeMap::from([("ami-1".to_string(), "ubuntu")]);
        let d = build(&listed, &details, &zones, &BTreeMap::new(), &users);
        assert_eq!(d.instances[0].name, "i-a");
        assert_eq!(d.instances[0].public_addresses, vec!["1.2.3.4"]);
        assert!(d.instances[0].private_addresses.is_empty());
        assert_eq!(d.instances[0].ssh_user.as_deref(), Some("ubuntu"));
        assert_eq!(d.instances[1].private_addresses, vec!["10.0.0.2"]);
        assert_eq!(d.subnets[0].zone.as_deref(), Some("us-east-1a"));
        assert_eq!(d.vpc.as_deref(), Some("vpc-1"));
        // The group is not part of kops' dump.
        assert_eq!(d.resources.len(), 4);
    }
}
