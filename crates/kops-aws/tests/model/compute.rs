//! The compute half of `update cluster` against moto: launch templates,
//! autoscaling groups and etcd volumes, built by the model for a public
//! cluster with a control-plane group and a node group, in the full graph
//! (network, security, IAM, SSH key).
//!
//! A dry run writes nothing; apply creates the templates, groups (moto
//! launches their instances) and volumes; a second run changes nothing and
//! only reads; changing one group's machine type makes exactly one new
//! template version and one group update; `delete cluster` leaves no group,
//! template or volume.
//!
//! moto notes: moto ships a fixed set of public images; the groups use the
//! Ubuntu one by `owner/name`, which exercises the image look-up. moto
//! ignores `MaxInstanceLifetime` (never returns it), so the groups here set
//! none: with one, every run would see a change moto cannot make.

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use aws_sdk_ec2::types::Filter;
use common::{cloud, load, run, IMAGE, SSH_KEY};
use kops_aws::{AwsCloud, AwsContext};
use kops_engine::{Mode, TaskGraph};
use kops_model::Model;

fn manifests(name: &str, image: &str, node_type: &str) -> String {
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
  etcdClusters:
  - {{name: main, etcdMembers: [{{name: a, instanceGroup: control-plane-us-east-1a, encryptedVolume: true}}]}}
  - {{name: events, etcdMembers: [{{name: a, instanceGroup: control-plane-us-east-1a, encryptedVolume: true}}]}}
  subnets:
  - {{name: us-east-1a, zone: us-east-1a, cidr: 172.20.32.0/19, type: Public}}
---
apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata: {{name: control-plane-us-east-1a, labels: {{kops.k8s.io/cluster: {name}}}}}
spec: {{role: Master, image: "{image}", machineType: t3.medium, minSize: 1, maxSize: 1, subnets: [us-east-1a]}}
---
apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata: {{name: nodes, labels: {{kops.k8s.io/cluster: {name}}}}}
spec: {{role: Node, image: "{image}", machineType: {node_type}, minSize: 1, maxSize: 2, subnets: [us-east-1a], nodeLabels: {{team: a}}, taints: ["dedicated=a:NoSchedule"]}}
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

fn cluster_filter(cluster: &str) -> Filter {
    Filter::builder()
        .name("tag:KubernetesCluster")
        .values(cluster)
        .build()
}

/// The cluster's autoscaling groups: name → (template id, version, instance type of the template's default version).
async fn groups_in_cloud(cloud: &AwsCloud, cluster: &str) -> BTreeMap<String, (String, String)> {
    let out = cloud
        .autoscaling()
        .describe_auto_scaling_groups()
        .filters(
            aws_sdk_autoscaling::types::Filter::builder()
                .name("tag:KubernetesCluster")
                .values(cluster)
                .build(),
        )
        .send()
        .await
        .unwrap();
    out.auto_scaling_groups()
        .iter()
        .map(|g| {
            let t = g.launch_template().unwrap();
            (
                g.auto_scaling_group_name().unwrap().to_string(),
                (
                    t.launch_template_id().unwrap().to_string(),
                    t.version().unwrap().to_string(),
                ),
            )
        })
        .collect()
}

async fn templates_in_cloud(cloud: &AwsCloud, cluster: &str) -> BTreeMap<String, i64> {
    let out = cloud
        .ec2()
        .describe_launch_templates()
        .filters(cluster_filter(cluster))
        .send()
        .await
        .unwrap();
    out.launch_templates()
        .iter()
        .map(|t| {
            (
                t.launch_template_name().unwrap().to_string(),
                t.latest_version_number().unwrap(),
            )
        })
        .collect()
}

async fn volumes_in_cloud(
    cloud: &AwsCloud,
    cluster: &str,
) -> BTreeMap<String, (String, i32, bool)> {
    let out = cloud
        .ec2()
        .describe_volumes()
        .filters(cluster_filter(cluster))
        .send()
        .await
        .unwrap();
    out.volumes()
        .iter()
        .filter(|v| v.state().map(|s| s.as_str()) != Some("deleted"))
        .map(|v| {
            let name = kops_aws::context::name_tag(v.tags()).unwrap_or_default();
            (
                name.to_string(),
                (
                    v.availability_zone().unwrap().to_string(),
                    v.size().unwrap(),
                    v.encrypted().unwrap(),
                ),
            )
        })
        .collect()
}

#[tokio::test]
async fn public_cluster_compute_lifecycle() {
    let Some(cloud) = cloud().await else {
        return;
    };
    let cluster = "compute.example.com";
    let first = graph(&manifests(cluster, IMAGE, "t3.medium"));

    let dry = run(&cloud, cluster, &first, Mode::DryRun).await.unwrap();
    assert_eq!(dry.writes, 0, "a dry run writes nothing: {:?}", dry.calls);
    let plan = dry.report.plan().to_string();
    for expected in [
        "LaunchTemplate/control-plane-us-east-1a.masters.compute.example.com",
        "LaunchTemplate/nodes.compute.example.com",
        "AutoscalingGroup/nodes.compute.example.com",
        "EBSVolume/a.etcd-main.compute.example.com",
        "EBSVolume/a.etcd-events.compute.example.com",
    ] {
        assert!(plan.contains(expected), "{expected} missing from\n{plan}");
    }

    let apply = run(&cloud, cluster, &first, Mode::Apply).await.unwrap();
    eprintln!(
        "first apply: {} calls, {} writes: {:?}",
        apply.total, apply.writes, apply.calls
    );
    // One image look-up for both groups, one tagged look-up per type.
    assert_eq!(apply.calls.get("EC2:DescribeImages"), Some(&1));
    assert_eq!(
        apply.calls.get("Auto Scaling:DescribeAutoScalingGroups"),
        Some(&1),
        "{:?}",
        apply.calls
    );
    assert_eq!(apply.calls.get("EC2:DescribeLaunchTemplates"), Some(&1));
    assert_eq!(apply.calls.get("EC2:DescribeVolumes"), Some(&1));
    assert_eq!(apply.calls.get("EC2:CreateLaunchTemplate"), Some(&2));
    assert_eq!(
        apply.calls.get("Auto Scaling:CreateAutoScalingGroup"),
        Some(&2)
    );
    assert_eq!(apply.calls.get("EC2:CreateVolume"), Some(&2));

    let groups = groups_in_cloud(&cloud, cluster).await;
    assert_eq!(
        groups.keys().cloned().collect::<Vec<_>>(),
        [
            "control-plane-us-east-1a.masters.compute.example.com",
            "nodes.compute.example.com"
        ]
    );
    let templates = templates_in_cloud(&cloud, cluster).await;
    assert_eq!(templates.len(), 2, "{templates:?}");
    assert!(templates.values().all(|v| *v == 1), "{templates:?}");
    let volumes = volumes_in_cloud(&cloud, cluster).await;
    assert_eq!(
        volumes.get("a.etcd-main.compute.example.com"),
        Some(&("us-east-1a".to_string(), 20, true))
    );
    assert!(volumes.contains_key("a.etcd-events.compute.example.com"));

    // The node group's tags, as kops writes them.
    let asg = cloud
        .autoscaling()
        .describe_auto_scaling_groups()
        .auto_scaling_group_names("nodes.compute.example.com")
        .send()
        .await
        .unwrap();
    let asg = &asg.auto_scaling_groups()[0];
    let tags: BTreeMap<&str, &str> = asg
        .tags()
        .iter()
        .map(|t| (t.key().unwrap(), t.value().unwrap_or_default()))
        .collect();
    assert_eq!(tags.get("kops.k8s.io/instancegroup"), Some(&"nodes"));
    assert_eq!(tags.get("k8s.io/role/node"), Some(&"1"));
    assert_eq!(
        tags.get("kubernetes.io/cluster/compute.example.com"),
        Some(&"owned")
    );
    assert_eq!(
        tags.get("k8s.io/cluster-autoscaler/node-template/label/team"),
        Some(&"a")
    );
    assert_eq!(
        tags.get("k8s.io/cluster-autoscaler/node-template/taint/dedicated"),
        Some(&"a:NoSchedule")
    );
    assert!(asg
        .tags()
        .iter()
        .all(|t| t.propagate_at_launch() == Some(true)));
    assert_eq!((asg.min_size(), asg.max_size()), (Some(1), Some(2)));

    let again = run(&cloud, cluster, &first, Mode::Apply).await.unwrap();
    eprintln!(
        "no-op update: {} calls, {} writes: {:?}",
        again.total, again.writes, again.calls
    );
    assert!(!again.report.has_changes(), "{}", again.report.plan());
    assert_eq!(again.writes, 0, "{:?}", again.calls);
    assert_eq!(again.calls.get("EC2:DescribeImages"), Some(&1));
    assert_eq!(
        again.calls.get("Auto Scaling:DescribeAutoScalingGroups"),
        Some(&1)
    );
    // Both templates' default versions in one call (no template id, `$Default`).
    assert_eq!(
        again.calls.get("EC2:DescribeLaunchTemplateVersions"),
        Some(&1)
    );

    // A new machine type for the nodes: one template version, one group update.
    let changed = graph(&manifests(cluster, IMAGE, "t3.large"));
    let dry = run(&cloud, cluster, &changed, Mode::DryRun).await.unwrap();
    assert_eq!(dry.writes, 0);
    let plan = dry.report.plan().to_string();
    assert!(plan.contains("instanceType"), "{plan}");
    let change = run(&cloud, cluster, &changed, Mode::Apply).await.unwrap();
    eprintln!("machine type change: {:?}", change.calls);
    let writes: BTreeMap<&str, u64> = change
        .calls
        .iter()
        .filter(|(k, _)| {
            let op = k.split_once(':').unwrap().1;
            !["Describe", "Get", "List"]
                .iter()
                .any(|p| op.starts_with(p))
        })
        .map(|(k, v)| (k.as_str(), *v))
        .collect();
    assert_eq!(
        writes,
        BTreeMap::from([
            ("EC2:CreateLaunchTemplateVersion", 1),
            ("EC2:ModifyLaunchTemplate", 1),
            ("Auto Scaling:UpdateAutoScalingGroup", 1),
        ])
    );
    let after = groups_in_cloud(&cloud, cluster).await;
    assert_eq!(after["nodes.compute.example.com"].1, "2");
    assert_eq!(
        after["control-plane-us-east-1a.masters.compute.example.com"],
        groups["control-plane-us-east-1a.masters.compute.example.com"]
    );
    let templates = templates_in_cloud(&cloud, cluster).await;
    assert_eq!(templates["nodes.compute.example.com"], 2);
    assert_eq!(
        templates["control-plane-us-east-1a.masters.compute.example.com"],
        1
    );
    let settled = run(&cloud, cluster, &changed, Mode::Apply).await.unwrap();
    assert!(!settled.report.has_changes(), "{}", settled.report.plan());
    assert_eq!(settled.writes, 0);

    // Delete: nothing of the compute half is left.
    let resources = kops_aws::delete::list_cluster_resources(&cloud, cluster)
        .await
        .unwrap();
    let kinds: Vec<&str> = resources.iter().map(|r| r.kind).collect();
    for kind in ["autoscaling-group", "launch-template", "volume"] {
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
    assert!(groups_in_cloud(&cloud, cluster).await.is_empty());
    assert!(templates_in_cloud(&cloud, cluster).await.is_empty());
    assert!(volumes_in_cloud(&cloud, cluster).await.is_empty());
}

#[tokio::test]
async fn an_unknown_image_is_reported_with_its_group() {
    let Some(cloud) = cloud().await else {
        return;
    };
    let cluster = "noimage.example.com";
    let graph = graph(&manifests(
        cluster,
        "099720109477/ubuntu/images/hvm-ssd-gp3/ubuntu-noble-24.04-amd64-server-20260714",
        "t3.medium",
    ));
    let err = match run(&cloud, cluster, &graph, Mode::DryRun).await {
        Ok(_) => panic!("the dry run should fail"),
        Err(e) => e,
    };
    assert!(err.contains("ubuntu-noble-24.04"), "{err}");
    assert!(
        err.contains("instance group `nodes`")
            || err.contains("instance group `control-plane-us-east-1a`"),
        "{err}"
    );
    assert!(err.contains("hint:"), "{err}");
}

/// API-server groups are named `<group>.apiservers.<cluster>` (kops'
/// autoscaling group name for the role), their lifecycle hook follows.
#[test]
fn api_server_groups_are_named_like_kops() {
    let name = "apiservers.example.com";
    let yaml = manifests(name, IMAGE, "t3.medium")
        + &format!(
            r#"---
apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata: {{name: apiserver, labels: {{kops.k8s.io/cluster: {name}}}}}
spec: {{role: APIServer, image: "{IMAGE}", machineType: t3.medium, minSize: 1, maxSize: 1, subnets: [us-east-1a]}}
"#
        );
    let graph = graph(&yaml);
    let wanted = format!("apiserver.apiservers.{name}");
    for kind in [
        kops_aws::tasks::launch_template::LaunchTemplate::KIND,
        kops_aws::tasks::autoscaling_group::AutoscalingGroup::KIND,
    ] {
        let key = kops_engine::TaskKey::new(kind, &wanted);
        assert!(graph.get(&key).is_some(), "no {key}");
        let old = kops_engine::TaskKey::new(kind, format!("apiserver.{name}"));
        assert!(graph.get(&old).is_none(), "{old}");
    }
}
