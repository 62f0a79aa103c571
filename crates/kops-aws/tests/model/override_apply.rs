//! Existing objects the spec names, applied to moto: kops' `existing_sg`
//! case (instance groups and the API load balancer with
//! `securityGroupOverride`) and its `privatedns1` case (a private hosted
//! zone the cluster's VPC is associated with). Each is applied, re-applied
//! with no change and no write, and deleted, leaving nothing of the cluster
//! and every object of the owner (the override groups, the zone).
//!
//! Also kops' `minimal-dns-none` case, whose API load balancer carries
//! kops-controller's listener and target group (HTTPS health check).
//!
//! kops' fake ids stand for objects made here first; the override groups
//! must live in the cluster's VPC, so the VPC is the owner's too
//! (`spec.networkID`).

use crate::common;

use std::time::Duration;

use common::{cloud, load, owners_vpc, resolved, run, IMAGE, SSH_KEY};
use kops_api::{Cluster, InstanceGroup};
use kops_aws::AwsCloud;
use kops_engine::Mode;
use kops_model::Model;

/// The case's manifests with the region moved and the images replaced.
fn case_yaml(case: &str) -> Option<String> {
    let shared = kops_testkit::shared_dir()?;
    let path = shared.join(format!(
        "conformance/kops/update_cluster/{case}/in-v1alpha2.yaml"
    ));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .replace("us-test-1", "us-east-1");
    Some(
        text.lines()
            .map(|l| match l.split_once("image: ") {
                Some((indent, _)) if indent.trim().is_empty() => {
                    format!("{indent}image: \"{IMAGE}\"")
                }
                _ => l.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n")
            + "\n",
    )
}

/// Applies, re-applies (no change, no write) and hands back the model's
/// cluster.
async fn apply_twice(cloud: &AwsCloud, cluster: &Cluster, groups: &[InstanceGroup]) -> Cluster {
    let name = cluster.name().to_string();
    let modelled = resolved(cloud, cluster).await;
    let model = Model {
        cluster: &modelled,
        groups,
        ssh_public_key: Some(SSH_KEY),
        node_inputs: None,
        account_id: None,
        config_base: &format!("s3://state-bucket/{name}"),
    };
    let graph = kops_aws::model::build(&model).unwrap_or_else(|e| panic!("{name}: {e}"));
    let dry = run(cloud, &name, &graph, Mode::DryRun).await.unwrap();
    assert_eq!(dry.writes, 0, "{name}: a dry run wrote: {:?}", dry.calls);
    let first = run(cloud, &name, &graph, Mode::Apply)
        .await
        .unwrap_or_else(|e| panic!("{name}: apply failed: {e}"));
    let failed: Vec<String> = first.report.failures().map(|t| format!("{t:?}")).collect();
    assert!(failed.is_empty(), "{name}: failures {failed:#?}");
    let again = run(cloud, &name, &graph, Mode::Apply).await.unwrap();
    assert!(
        !again.report.has_changes(),
        "{name}: second run changed:\n{:#?}",
        again
            .report
            .tasks
            .iter()
            .filter(|t| t.outcome.is_change())
            .collect::<Vec<_>>()
    );
    assert_eq!(
        again.writes, 0,
        "{name}: second run wrote: {:?}",
        again.calls
    );
    eprintln!(
        "{name}: {} tasks, first apply {} calls ({} writes), no-op update {} calls",
        graph.len(),
        first.total,
        first.writes,
        again.total
    );
    modelled
}

/// Deletes the cluster; asserts nothing of it is left.
async fn delete(cloud: &AwsCloud, name: &str) {
    let resources = kops_aws::delete::list_cluster_resources(cloud, name)
        .await
        .unwrap();
    kops_aws::delete::delete_resources(
        cloud,
        resources,
        30,
        Duration::from_millis(200),
        &|_, _| {},
    )
    .await
    .unwrap_or_else(|e| panic!("{name}: delete failed: {e}"));
    let left: Vec<String> = kops_aws::delete::list_cluster_resources(cloud, name)
        .await
        .unwrap()
        .into_iter()
        .filter(|r| !r.shared)
        .map(|r| format!("{} {}", r.kind, r.id))
        .collect();
    assert!(left.is_empty(), "{name}: left after delete: {left:#?}");
}

/// The security group `id`'s ingress permissions, as (protocol, from,
/// to, source group) with the source by id.
async fn ingress_from_groups(
    cloud: &AwsCloud,
    id: &str,
) -> Vec<(String, Option<i32>, Option<i32>, String)> {
    let out = cloud
        .ec2()
        .describe_security_groups()
        .group_ids(id)
        .send()
        .await
        .unwrap();
    let mut found = Vec::new();
    for g in out.security_groups() {
        for p in g.ip_permissions() {
            for pair in p.user_id_group_pairs() {
                found.push((
                    p.ip_protocol().unwrap_or_default().to_string(),
                    p.from_port(),
                    p.to_port(),
                    pair.group_id().unwrap_or_default().to_string(),
                ));
            }
        }
    }
    found
}

/// kops' existing_sg case: two control-plane groups and the nodes use the
/// owner's security groups, the third control-plane group kops' own, the
/// API load balancer the owner's `sg-elb`.
#[tokio::test]
async fn existing_security_groups() {
    let Some(yaml) = case_yaml("existing_sg") else {
        return;
    };
    let Some(cloud) = cloud().await else {
        return;
    };
    let moto = kops_testkit::require_moto().unwrap();
    moto.ensure_hosted_zone("example.com").unwrap();
    let ec2 = cloud.ec2();
    let vpc = owners_vpc(&cloud).await;
    let mut yaml = yaml.replace(
        "  networkCIDR: 172.20.0.0/16",
        &format!("  networkCIDR: 172.20.0.0/16\n  networkID: {vpc}"),
    );
    let mut owners = std::collections::BTreeMap::new();
    for fake in ["sg-master-1a", "sg-master-1b", "sg-nodes", "sg-elb"] {
        let id = ec2
            .create_security_group()
            .group_name(format!("owners-{fake}"))
            .description("the owner's")
            .vpc_id(&vpc)
            .send()
            .await
            .unwrap()
            .group_id()
            .unwrap()
            .to_string();
        // `sg-master-1a` is not a prefix of another fake id.
        yaml = yaml.replace(&format!("{fake}\n"), &format!("{id}\n"));
        yaml = yaml.replace(&format!("{fake} "), &format!("{id} "));
        owners.insert(fake, id);
    }
    let (cluster, groups) = load(&yaml);
    let name = cluster.name().to_string();
    apply_twice(&cloud, &cluster, &groups).await;

    // kops made only the third control plane group's own group.
    let made = kops_aws::delete::list_cluster_resources(&cloud, &name)
        .await
        .unwrap();
    let made_groups: Vec<&str> = made
        .iter()
        .filter(|r| r.kind == "security-group" && !r.shared)
        .map(|r| r.id.as_str())
        .collect();
    assert_eq!(made_groups.len(), 1, "{made:#?}");
    let masters = made_groups[0].to_string();
    // The owner's groups got the cluster's rules: the API load balancer
    // reaches the control plane on 443, nodes reach it around etcd.
    let on_1a = ingress_from_groups(&cloud, &owners["sg-master-1a"]).await;
    for wanted in [
        (
            "tcp".to_string(),
            Some(443),
            Some(443),
            owners["sg-elb"].clone(),
        ),
        (
            "tcp".to_string(),
            Some(1),
            Some(2379),
            owners["sg-nodes"].clone(),
        ),
        ("-1".to_string(), None, None, masters.clone()),
    ] {
        assert!(
            on_1a.iter().any(|r| {
                r.0 == wanted.0 && r.3 == wanted.3 && (wanted.1.is_none() || r.1 == wanted.1)
            }),
            "{wanted:?} not in {on_1a:#?}"
        );
    }
    let on_elb = ingress_from_groups(&cloud, &owners["sg-elb"]).await;
    assert!(
        on_elb
            .iter()
            .any(|r| r.0 == "icmp" && r.3 == owners["sg-master-1a"]),
        "{on_elb:#?}"
    );
    // The load balancer uses the owner's group.
    let lbs = cloud
        .elbv2()
        .describe_load_balancers()
        .send()
        .await
        .unwrap();
    let api = lbs
        .load_balancers()
        .iter()
        .find(|l| {
            l.load_balancer_name()
                .is_some_and(|n| n.starts_with("api-existingsg"))
        })
        .expect("the API load balancer");
    assert_eq!(api.security_groups(), [owners["sg-elb"].clone()]);

    delete(&cloud, &name).await;
    // The owner's groups are still there, without rules naming the
    // cluster's group.
    let ids: Vec<String> = owners.values().cloned().collect();
    let out = ec2
        .describe_security_groups()
        .set_group_ids(Some(ids))
        .send()
        .await
        .unwrap();
    assert_eq!(out.security_groups().len(), 4, "the owner's groups");
    let on_1a = ingress_from_groups(&cloud, &owners["sg-master-1a"]).await;
    assert!(
        on_1a.iter().all(|r| r.3 != masters),
        "rules naming the deleted group are left: {on_1a:#?}"
    );
}

/// kops' privatedns1 case: the private zone exists (made with another VPC,
/// as private zones must be); the cluster's VPC gets associated with it,
/// the API records land in it. kops' case names the zone
/// `internal.example.com`, which Route 53 would refuse the records
/// `api.privatedns1.example.com` in: here the zone is the cluster's name.
#[tokio::test]
async fn private_zone_association() {
    let Some(yaml) = case_yaml("privatedns1") else {
        return;
    };
    let Some(cloud) = cloud().await else {
        return;
    };
    let yaml = yaml.replace(
        "dnsZone: internal.example.com",
        "dnsZone: privatedns1.example.com",
    );
    let route53 = cloud.route53();
    let other_vpc = owners_vpc(&cloud).await;
    let zone = route53
        .create_hosted_zone()
        .name("privatedns1.example.com")
        .caller_reference("override-apply-privatedns1")
        .vpc(
            aws_sdk_route53::types::Vpc::builder()
                .vpc_id(&other_vpc)
                .vpc_region(aws_sdk_route53::types::VpcRegion::UsEast1)
                .build(),
        )
        .hosted_zone_config(
            aws_sdk_route53::types::HostedZoneConfig::builder()
                .private_zone(true)
                .build(),
        )
        .send()
        .await
        .unwrap();
    let zone_id = zone.hosted_zone().unwrap().id().to_string();
    let (cluster, groups) = load(&yaml);
    let name = cluster.name().to_string();
    apply_twice(&cloud, &cluster, &groups).await;

    let made = kops_aws::delete::list_cluster_resources(&cloud, &name)
        .await
        .unwrap();
    let vpc = made
        .iter()
        .find(|r| r.kind == "vpc")
        .map(|r| r.id.clone())
        .expect("the cluster's VPC");
    let got = route53.get_hosted_zone().id(&zone_id).send().await.unwrap();
    let vpcs: Vec<&str> = got.vpcs().iter().filter_map(|v| v.vpc_id()).collect();
    assert!(vpcs.contains(&vpc.as_str()), "{vpcs:?}");
    assert!(vpcs.contains(&other_vpc.as_str()), "{vpcs:?}");

    delete(&cloud, &name).await;
    let zones = route53.list_hosted_zones().send().await.unwrap();
    assert!(
        zones.hosted_zones().iter().any(|z| z.id() == zone_id),
        "the owner's zone was deleted"
    );
}

/// kops' minimal-dns-none case: nodes reach kops-controller through the API
/// load balancer (listener 3988, HTTPS `/healthz` health check), which
/// balances across zones.
#[tokio::test]
async fn dns_none_kops_controller_listener() {
    let Some(yaml) = case_yaml("minimal-dns-none") else {
        return;
    };
    let Some(cloud) = cloud().await else {
        return;
    };
    let (cluster, groups) = load(&yaml);
    let name = cluster.name().to_string();
    apply_twice(&cloud, &cluster, &groups).await;

    let elbv2 = cloud.elbv2();
    let groups_out = elbv2.describe_target_groups().send().await.unwrap();
    let kops_controller = groups_out
        .target_groups()
        .iter()
        .find(|g| {
            g.target_group_name()
                .is_some_and(|n| n.starts_with("kops-controller-minimal"))
        })
        .expect("the kops-controller target group");
    assert_eq!(kops_controller.port(), Some(3988));
    assert_eq!(
        kops_controller.health_check_protocol().map(|p| p.as_str()),
        Some("HTTPS")
    );
    assert_eq!(kops_controller.health_check_path(), Some("/healthz"));
    let lb_arn = kops_controller.load_balancer_arns().first().cloned();
    let lbs = elbv2.describe_load_balancers().send().await.unwrap();
    let api = lbs
        .load_balancers()
        .iter()
        .find(|l| {
            l.load_balancer_name()
                .is_some_and(|n| n.starts_with("api-minimal-example"))
        })
        .expect("the API load balancer");
    let listeners = elbv2
        .describe_listeners()
        .load_balancer_arn(api.load_balancer_arn().unwrap())
        .send()
        .await
        .unwrap();
    let mut ports: Vec<i32> = listeners
        .listeners()
        .iter()
        .filter_map(|l| l.port())
        .collect();
    ports.sort_unstable();
    assert_eq!(ports, [443, 3988]);
    if let Some(arn) = lb_arn {
        assert_eq!(Some(arn.as_str()), api.load_balancer_arn());
    }

    delete(&cloud, &name).await;
}
