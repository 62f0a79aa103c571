//! The API load balancer of `update cluster` against moto: a private
//! cluster (private and utility subnet, NAT gateway) whose spec has
//! `api.loadBalancer` (Public, Network), in the full graph.
//!
//! A dry run writes nothing; apply creates the NLB `api.<cluster>` in the
//! utility subnet with the `api-elb` group, the `tcp-...` target group and
//! the 443 listener, and registers the control-plane autoscaling group in
//! the target group; a second run changes nothing and only reads (one
//! DescribeLoadBalancers, one DescribeTargetGroups, a DescribeTags for each,
//! one DescribeListeners); `delete cluster` leaves no load balancer or
//! target group of the cluster.

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{cloud, load, run, IMAGE, SSH_KEY};
use kops_aws::{AwsCloud, AwsContext};
use kops_engine::{Mode, TaskGraph};
use kops_model::Model;

fn manifests(name: &str) -> String {
    format!(
        r#"apiVersion: kops.k8s.io/v1alpha2
kind: Cluster
metadata: {{name: {name}}}
spec:
  cloudProvider: aws
  configBase: s3://state-bucket/{name}
  kubernetesApiAccess: [0.0.0.0/0]
  sshAccess: [203.0.113.0/24]
  networkCIDR: 172.20.0.0/16
  networking: {{cilium: {{}}}}
  api: {{loadBalancer: {{type: Public, class: Network}}}}
  topology: {{dns: {{type: Public}}}}
  etcdClusters:
  - {{name: main, etcdMembers: [{{name: a, instanceGroup: control-plane-us-east-1a, encryptedVolume: true}}]}}
  - {{name: events, etcdMembers: [{{name: a, instanceGroup: control-plane-us-east-1a, encryptedVolume: true}}]}}
  subnets:
  - {{name: us-east-1a, zone: us-east-1a, cidr: 172.20.32.0/19, type: Private}}
  - {{name: utility-us-east-1a, zone: us-east-1a, cidr: 172.20.4.0/22, type: Utility}}
---
apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata: {{name: control-plane-us-east-1a, labels: {{kops.k8s.io/cluster: {name}}}}}
spec: {{role: Master, image: "{IMAGE}", machineType: t3.medium, minSize: 1, maxSize: 1, subnets: [us-east-1a]}}
---
apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata: {{name: nodes, labels: {{kops.k8s.io/cluster: {name}}}}}
spec: {{role: Node, image: "{IMAGE}", machineType: t3.medium, minSize: 1, maxSize: 1, subnets: [us-east-1a]}}
"#
    )
}

fn graph(yaml: &str) -> TaskGraph<AwsContext> {
    let (cluster, groups) = load(yaml);
    let model = Model {
        cluster: &cluster,
        groups: &groups,
        ssh_public_key: Some(SSH_KEY),
        node_inputs: None,
        account_id: None,
        config_base: "s3://state-bucket/cluster",
    };
    kops_aws::model::build(&model).unwrap()
}

/// The cluster's load balancers and target groups by `Name` tag → ARN.
async fn elb_in_cloud(
    cloud: &AwsCloud,
    cluster: &str,
) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let elbv2 = cloud.elbv2();
    let lbs = elbv2.describe_load_balancers().send().await.unwrap();
    let tgs = elbv2.describe_target_groups().send().await.unwrap();
    let arns: Vec<String> = lbs
        .load_balancers()
        .iter()
        .filter_map(|l| l.load_balancer_arn())
        .chain(
            tgs.target_groups()
                .iter()
                .filter_map(|g| g.target_group_arn()),
        )
        .map(str::to_string)
        .collect();
    let tags = kops_aws::context::elbv2_tags(elbv2, &arns).await.unwrap();
    let ours = |arn: &str| {
        let t = tags.get(arn)?;
        (t.get("KubernetesCluster").map(String::as_str) == Some(cluster))
            .then(|| (t.get("Name").cloned().unwrap_or_default(), arn.to_string()))
    };
    (
        lbs.load_balancers()
            .iter()
            .filter_map(|l| ours(l.load_balancer_arn()?))
            .collect(),
        tgs.target_groups()
            .iter()
            .filter_map(|g| ours(g.target_group_arn()?))
            .collect(),
    )
}

#[tokio::test]
async fn private_cluster_api_load_balancer_lifecycle() {
    let Some(cloud) = cloud().await else {
        return;
    };
    let cluster = "apilb.example.com";
    // The API records go in the example.com zone, by id as `update cluster`
    // resolves it.
    let zone = kops_testkit::require_moto()
        .unwrap()
        .ensure_hosted_zone("example.com")
        .unwrap();
    let graph = graph(&manifests(cluster).replace(
        "  cloudProvider: aws\n",
        &format!("  cloudProvider: aws\n  dnsZone: {zone}\n"),
    ));

    let dry = run(&cloud, cluster, &graph, Mode::DryRun).await.unwrap();
    assert_eq!(dry.writes, 0, "a dry run writes nothing: {:?}", dry.calls);
    let plan = dry.report.plan().to_string();
    for expected in [
        "NetworkLoadBalancer/api.apilb.example.com",
        "TargetGroup/tcp-apilb-example-com-",
        "Listener/api.apilb.example.com-443",
        "<TargetGroup/tcp-apilb-example-com-",
    ] {
        assert!(plan.contains(expected), "{expected} missing from\n{plan}");
    }

    let apply = run(&cloud, cluster, &graph, Mode::Apply).await.unwrap();
    eprintln!(
        "first apply: {} calls, {} writes: {:?}",
        apply.total, apply.writes, apply.calls
    );
    for (call, count) in [
        ("Elastic Load Balancing v2:DescribeLoadBalancers", 1),
        ("Elastic Load Balancing v2:DescribeTargetGroups", 1),
        ("Elastic Load Balancing v2:CreateLoadBalancer", 1),
        ("Elastic Load Balancing v2:CreateTargetGroup", 1),
        ("Elastic Load Balancing v2:CreateListener", 1),
    ] {
        assert_eq!(
            apply.calls.get(call),
            Some(&count),
            "{call}: {:?}",
            apply.calls
        );
    }

    let (lbs, tgs) = elb_in_cloud(&cloud, cluster).await;
    assert_eq!(lbs.keys().collect::<Vec<_>>(), ["api.apilb.example.com"]);
    assert_eq!(tgs.len(), 1, "{tgs:?}");
    let tg_arn = tgs.values().next().unwrap().clone();
    let lb = cloud
        .elbv2()
        .describe_load_balancers()
        .load_balancer_arns(&lbs["api.apilb.example.com"])
        .send()
        .await
        .unwrap();
    let lb = &lb.load_balancers()[0];
    assert_eq!(
        lb.load_balancer_name(),
        Some(kops_model::api_load_balancer::resource_name32(cluster, "api").as_str())
    );
    assert_eq!(lb.scheme().map(|s| s.as_str()), Some("internet-facing"));
    let listeners = cloud
        .elbv2()
        .describe_listeners()
        .load_balancer_arn(lb.load_balancer_arn().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(listeners.listeners().len(), 1);
    assert_eq!(listeners.listeners()[0].port(), Some(443));
    let asg = cloud
        .autoscaling()
        .describe_auto_scaling_groups()
        .auto_scaling_group_names(format!("control-plane-us-east-1a.masters.{cluster}"))
        .send()
        .await
        .unwrap();
    assert_eq!(asg.auto_scaling_groups()[0].target_group_arns(), [tg_arn]);

    let again = run(&cloud, cluster, &graph, Mode::Apply).await.unwrap();
    eprintln!(
        "no-op update: {} calls, {} writes: {:?}",
        again.total, again.writes, again.calls
    );
    assert!(!again.report.has_changes(), "{}", again.report.plan());
    assert_eq!(again.writes, 0, "{:?}", again.calls);
    for (call, count) in [
        ("Elastic Load Balancing v2:DescribeLoadBalancers", 1),
        ("Elastic Load Balancing v2:DescribeTargetGroups", 1),
        // Load balancers and target groups together.
        ("Elastic Load Balancing v2:DescribeTags", 1),
        ("Elastic Load Balancing v2:DescribeListeners", 1),
    ] {
        assert_eq!(
            again.calls.get(call),
            Some(&count),
            "{call}: {:?}",
            again.calls
        );
    }

    let resources = kops_aws::delete::list_cluster_resources(&cloud, cluster)
        .await
        .unwrap();
    let kinds: Vec<&str> = resources.iter().map(|r| r.kind).collect();
    for kind in ["load-balancer", "target-group"] {
        assert!(kinds.contains(&kind), "{kind} not listed: {kinds:?}");
    }
    kops_aws::delete::delete_resources(
        &cloud,
        resources,
        30,
        Duration::from_millis(300),
        &|_, _| {},
    )
    .await
    .unwrap();
    let (lbs, tgs) = elb_in_cloud(&cloud, cluster).await;
    assert!(lbs.is_empty(), "{lbs:?}");
    assert!(tgs.is_empty(), "{tgs:?}");
}
