//! kops' own integration cases, applied to moto: the spec of each case in
//! ../shared/conformance/kops/update_cluster (with its fake `us-test-1`
//! region moved to `us-east-1`, its images set to one moto ships, and its
//! fake VPC/subnet ids replaced by real ones made here) goes through the
//! whole model, is applied, re-applied with no change and no write, and
//! deleted, leaving nothing tagged for the cluster in EC2, Auto Scaling,
//! ELBv2, IAM, Route 53, SQS and EventBridge. Plus a three-zone HA cluster.
//!
//! The hosted zone `example.com` is made on moto first, and resolved the
//! way `update cluster` does, so the API records land in it.

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
            // moto never reports an autoscaling group's maximum instance
            // lifetime, so with one every run would see a change.
            .filter(|l| !l.trim_start().starts_with("maxInstanceLifetime:"))
            .map(|l| match l.split_once("image: ") {
                Some((indent, _)) if indent.trim().is_empty() => {
                    format!("{indent}image: \"{IMAGE}\"")
                }
                _ => l.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

/// Everything of the cluster left in the services this test checks.
async fn left(cloud: &AwsCloud, cluster: &str) -> Vec<String> {
    let resources = kops_aws::delete::list_cluster_resources(cloud, cluster)
        .await
        .unwrap();
    resources
        .into_iter()
        .filter(|r| !r.shared)
        .map(|r| format!("{} {}", r.kind, r.id))
        .collect()
}

async fn apply_case(cluster: Cluster, groups: Vec<InstanceGroup>) {
    let Some(cloud) = cloud().await else {
        return;
    };
    let moto = kops_testkit::require_moto().unwrap();
    moto.ensure_hosted_zone("example.com").unwrap();
    let name = cluster.name().to_string();
    let modelled = resolved(&cloud, &cluster).await;
    let model = Model {
        cluster: &modelled,
        groups: &groups,
        ssh_public_key: Some(SSH_KEY),
        node_inputs: None,
        account_id: None,
        config_base: &format!("s3://state-bucket/{name}"),
    };
    let graph = kops_aws::model::build(&model).unwrap_or_else(|e| panic!("{name}: {e}"));

    let dry = run(&cloud, &name, &graph, Mode::DryRun).await.unwrap();
    assert_eq!(dry.writes, 0, "{name}: a dry run wrote: {:?}", dry.calls);

    let first = run(&cloud, &name, &graph, Mode::Apply)
        .await
        .unwrap_or_else(|e| panic!("{name}: apply failed: {e}"));
    let failed: Vec<String> = first.report.failures().map(|t| format!("{t:?}")).collect();
    assert!(failed.is_empty(), "{name}: failures {failed:#?}");
    assert!(first.report.has_changes(), "{name}: nothing created");
    eprintln!(
        "{name}: {} tasks, first apply {} calls ({} writes)",
        graph.len(),
        first.total,
        first.writes
    );

    let made = kops_aws::delete::list_cluster_resources(&cloud, &name)
        .await
        .unwrap();
    let count = |kind: &str| made.iter().filter(|r| r.kind == kind).count();
    assert_eq!(count("sqs-queue"), 1, "{name}: the NTH queue");
    assert!(count("eventbridge-rule") >= 4, "{name}: the NTH rules");
    assert_eq!(
        count("autoscaling-group"),
        groups.len(),
        "{name}: one autoscaling group per instance group"
    );
    if modelled
        .spec
        .api
        .as_ref()
        .is_some_and(|a| a.load_balancer.is_some())
        && model.publishes_dns_records()
    {
        assert!(count("dns-record") >= 2, "{name}: the API records");
    }

    if model.ipv6_only() {
        check_ipv6(&cloud, &name).await;
        assert_eq!(
            count("egress-only-internet-gateway"),
            1,
            "{name}: the egress-only internet gateway"
        );
    }

    let again = run(&cloud, &name, &graph, Mode::Apply).await.unwrap();
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
    eprintln!("{name}: no-op update {} calls", again.total);

    let resources = kops_aws::delete::list_cluster_resources(&cloud, &name)
        .await
        .unwrap();
    kops_aws::delete::delete_resources(
        &cloud,
        resources,
        30,
        Duration::from_millis(200),
        &|_, _| {},
    )
    .await
    .unwrap_or_else(|e| panic!("{name}: delete failed: {e}"));
    let remaining = left(&cloud, &name).await;
    assert!(
        remaining.is_empty(),
        "{name}: left after delete: {remaining:#?}"
    );
}

/// An IPv6-only cluster's network as AWS has it: every subnet has a /64
/// of the VPC's block, the ones without IPv4 are IPv6-native, and each
/// private table sends `::/0` to the egress-only gateway and the NAT64
/// prefix to the zone's NAT gateway.
async fn check_ipv6(cloud: &AwsCloud, name: &str) {
    let ec2 = cloud.ec2();
    let tag = aws_sdk_ec2::types::Filter::builder()
        .name("tag-key")
        .values(format!("kubernetes.io/cluster/{name}"))
        .build();
    let vpcs = ec2
        .describe_vpcs()
        .filters(tag.clone())
        .send()
        .await
        .unwrap();
    let vpc_block: ipnet::Ipv6Net = vpcs.vpcs()[0].ipv6_cidr_block_association_set()[0]
        .ipv6_cidr_block()
        .unwrap()
        .parse()
        .unwrap();
    let subnets = ec2
        .describe_subnets()
        .filters(tag.clone())
        .send()
        .await
        .unwrap();
    assert!(!subnets.subnets().is_empty());
    for subnet in subnets.subnets() {
        let block: ipnet::Ipv6Net = subnet.ipv6_cidr_block_association_set()[0]
            .ipv6_cidr_block()
            .unwrap()
            .parse()
            .unwrap();
        assert!(vpc_block.contains(&block), "{block} outside {vpc_block}");
        assert_eq!(block.prefix_len(), 64);
        assert_eq!(subnet.assign_ipv6_address_on_creation(), Some(true));
        if subnet.cidr_block().is_none() {
            assert_eq!(subnet.ipv6_native(), Some(true), "{subnet:?}");
        }
    }
    let tables = ec2
        .describe_route_tables()
        .filters(tag)
        .send()
        .await
        .unwrap();
    let private: Vec<_> = tables
        .route_tables()
        .iter()
        .filter(|t| {
            t.tags()
                .iter()
                .any(|t| t.value().is_some_and(|v| v.starts_with("private-")))
        })
        .collect();
    assert!(!private.is_empty(), "{name}: no private route tables");
    for table in private {
        let to = |cidr: &str| {
            table
                .routes()
                .iter()
                .find(|r| r.destination_ipv6_cidr_block() == Some(cidr))
                .cloned()
        };
        let nat64 = to("64:ff9b::/96").expect("NAT64 route");
        assert!(nat64.nat_gateway_id().is_some(), "{nat64:?}");
        let default = to("::/0").expect("IPv6 default route");
        assert!(
            default
                .egress_only_internet_gateway_id()
                .is_some_and(|id| id.starts_with("eigw-")),
            "{default:?}"
        );
    }
}

async fn apply_shared_case(case: &str) {
    let Some(yaml) = case_yaml(case) else {
        return;
    };
    let (cluster, groups) = load(&yaml);
    apply_case(cluster, groups).await;
}

#[tokio::test]
async fn minimal_aws() {
    apply_shared_case("minimal-aws").await;
}

#[tokio::test]
async fn privatecilium_private_with_bastion() {
    apply_shared_case("privatecilium").await;
}

/// kops' IPv6-only case with subnet blocks relative to the VPC's
/// Amazon-provided one (`/64#1`...): IPv6-native private subnets,
/// dual-stack and utility ones, the egress-only gateway, NAT64. Without its
/// `cloudControllerManager`, whose resource-based hostnames moto does not
/// keep, and with a shorter cluster name.
#[tokio::test]
async fn minimal_ipv6() {
    let Some(yaml) = case_yaml("minimal-ipv6-no-subnet-prefix") else {
        return;
    };
    // A shorter name: kops' 32-character target group name for this one
    // has a `--`, which moto refuses.
    let yaml = yaml
        .replace("  cloudControllerManager: {}\n", "")
        .replace("minimal-ipv6.example.com", "ipv6.example.com");
    let (cluster, groups) = load(&yaml);
    apply_case(cluster, groups).await;
}

#[tokio::test]
async fn mixed_instances() {
    apply_shared_case("mixed_instances").await;
}

#[tokio::test]
async fn minimal_warmpool() {
    apply_shared_case("minimal-warmpool").await;
}

/// kops' shared_subnet case: the VPC and subnet are the owner's (made here,
/// standing in for kops' fake ids); the cluster only tags the subnet
/// `shared`, and its deletion leaves both.
#[tokio::test]
async fn shared_subnet() {
    let Some(yaml) = case_yaml("shared_subnet") else {
        return;
    };
    let Some(cloud) = cloud().await else {
        return;
    };
    let ec2 = cloud.ec2();
    // The owner's VPC reaches the internet (kops' harness has it so too).
    let vpc = owners_vpc(&cloud).await;
    let subnet = ec2
        .create_subnet()
        .vpc_id(&vpc)
        .cidr_block("172.20.32.0/19")
        .availability_zone("us-east-1a")
        .send()
        .await
        .unwrap()
        .subnet()
        .unwrap()
        .subnet_id()
        .unwrap()
        .to_string();
    let yaml = yaml
        .replace("vpc-12345678", &vpc)
        .replace("subnet-12345678", &subnet);
    let (cluster, groups) = load(&yaml);
    apply_case(cluster, groups).await;
    let vpcs = ec2.describe_vpcs().vpc_ids(&vpc).send().await.unwrap();
    assert_eq!(vpcs.vpcs().len(), 1, "the owner's VPC was deleted");
    let subnets = ec2
        .describe_subnets()
        .subnet_ids(&subnet)
        .send()
        .await
        .unwrap();
    assert_eq!(subnets.subnets().len(), 1, "the owner's subnet was deleted");
}

/// Three control-plane nodes in three zones behind a public API load
/// balancer, etcd members in each zone, nodes in all three.
#[tokio::test]
async fn ha_three_control_plane_zones() {
    let name = "ha.example.com";
    let zones = ["a", "b", "c"];
    let mut yaml = format!(
        r#"apiVersion: kops.k8s.io/v1alpha2
kind: Cluster
metadata: {{name: {name}}}
spec:
  cloudProvider: aws
  kubernetesVersion: v1.32.0
  api: {{loadBalancer: {{type: Public, class: Network}}}}
  kubernetesApiAccess: [0.0.0.0/0]
  sshAccess: [0.0.0.0/0]
  networkCIDR: 172.20.0.0/16
  networking: {{cilium: {{}}}}
  topology: {{dns: {{type: Public}}}}
  etcdClusters:
  - name: main
    etcdMembers: [{{name: a, instanceGroup: control-plane-us-east-1a}}, {{name: b, instanceGroup: control-plane-us-east-1b}}, {{name: c, instanceGroup: control-plane-us-east-1c}}]
  - name: events
    etcdMembers: [{{name: a, instanceGroup: control-plane-us-east-1a}}, {{name: b, instanceGroup: control-plane-us-east-1b}}, {{name: c, instanceGroup: control-plane-us-east-1c}}]
  subnets:
"#
    );
    for (i, z) in zones.iter().enumerate() {
        yaml += &format!(
            "  - {{name: us-east-1{z}, zone: us-east-1{z}, cidr: 172.20.{}.0/19, type: Public}}\n",
            32 * (i + 1)
        );
    }
    for z in zones {
        yaml += &format!(
            r#"---
apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata: {{name: control-plane-us-east-1{z}, labels: {{kops.k8s.io/cluster: {name}}}}}
spec: {{role: Master, image: "{IMAGE}", machineType: m6i.large, minSize: 1, maxSize: 1, subnets: [us-east-1{z}]}}
"#
        );
    }
    yaml += &format!(
        r#"---
apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata: {{name: nodes, labels: {{kops.k8s.io/cluster: {name}}}}}
spec: {{role: Node, image: "{IMAGE}", machineType: t3.large, minSize: 3, maxSize: 3, subnets: [us-east-1a, us-east-1b, us-east-1c]}}
"#
    );
    let (cluster, groups) = load(&yaml);
    apply_case(cluster, groups).await;
}

/// kops' complex case: TLS on the API load balancer with an elastic IP in
/// an explicit subnet, additional and prefix-list access, a transit
/// gateway for private egress, extra routes, additional security groups,
/// data volumes, CPU credits, external load balancers, cloud labels, a
/// permissions boundary. kops' fake ids stand for objects made here first
/// (security groups, prefix lists, a transit gateway, an elastic IP, the
/// external classic load balancer, the ACM certificate); `arn:aws-test`
/// becomes `arn:aws`.
#[tokio::test]
async fn complex() {
    let Some(yaml) = case_yaml("complex") else {
        return;
    };
    let Some(cloud) = cloud().await else {
        return;
    };
    let moto = kops_testkit::require_moto().unwrap();
    let ec2 = cloud.ec2();
    // moto keeps no subnet hostname type (ModifySubnetAttribute ignores
    // PrivateDnsHostnameTypeOnLaunch), which the external cloud controller
    // manager asks for: without it every run would see a change.
    let mut yaml = yaml.replace("arn:aws-test:", "arn:aws:").replace(
        "  cloudControllerManager:\n    concurrentNodeSyncs: 5\n",
        "",
    );
    for fake in [
        "sg-exampleid3",
        "sg-exampleid4",
        "sg-exampleid5",
        "sg-exampleid6",
    ] {
        let id = ec2
            .create_security_group()
            .group_name(format!("complex-{fake}"))
            .description("made outside the cluster")
            .send()
            .await
            .unwrap()
            .group_id()
            .unwrap()
            .to_string();
        yaml = yaml.replace(fake, &id);
    }
    for fake in ["pl-44444444", "pl-66666666"] {
        let id = ec2
            .create_managed_prefix_list()
            .prefix_list_name(format!("complex-{fake}"))
            .address_family("IPv4")
            .max_entries(5)
            .send()
            .await
            .unwrap()
            .prefix_list()
            .unwrap()
            .prefix_list_id()
            .unwrap()
            .to_string();
        yaml = yaml.replace(fake, &id);
    }
    let tgw = ec2
        .create_transit_gateway()
        .send()
        .await
        .unwrap()
        .transit_gateway()
        .unwrap()
        .transit_gateway_id()
        .unwrap()
        .to_string();
    yaml = yaml
        .replace("tgw-0123456", &tgw)
        .replace("tgw-123456", &tgw);
    let eip = ec2
        .allocate_address()
        .send()
        .await
        .unwrap()
        .allocation_id()
        .unwrap()
        .to_string();
    yaml = yaml.replace("eipalloc-012345a678b9cdefa", &eip);
    let (status, body) = moto
        .query_api(
            "elasticloadbalancing",
            "Action=CreateLoadBalancer&Version=2012-06-01&LoadBalancerName=my-external-lb-1\
             &Listeners.member.1.Protocol=TCP&Listeners.member.1.LoadBalancerPort=80\
             &Listeners.member.1.InstancePort=80&AvailabilityZones.member.1=us-east-1a",
        )
        .unwrap();
    assert!(status < 300, "classic ELB: {status} {body}");
    let (status, body) = moto
        .json_api(
            "acm",
            "CertificateManager.RequestCertificate",
            r#"{"DomainName": "api.complex.example.com"}"#,
        )
        .unwrap();
    assert!(status < 300, "ACM certificate: {status} {body}");
    let certificate: serde_json::Value = serde_json::from_str(&body).unwrap();
    let arn = certificate["CertificateArn"].as_str().unwrap();
    let fake = yaml
        .lines()
        .find_map(|l| l.trim().strip_prefix("sslCertificate: "))
        .unwrap()
        .to_string();
    yaml = yaml.replace(&fake, arn);
    let (cluster, groups) = load(&yaml);
    apply_case(cluster, groups).await;
}
