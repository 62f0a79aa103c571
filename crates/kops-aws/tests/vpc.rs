//! The VPC task against moto: dry run writes nothing, apply creates, a second
//! run changes nothing and only reads, a tag change is applied in place.

mod common;

use kops_aws::tasks::vpc::Vpc;
use kops_engine::{Mode, TaskGraph};

fn vpc(cluster: &str, owner: &str) -> Vpc {
    let ctx = common_tags(cluster, owner);
    Vpc {
        name: cluster.to_string(),
        cidr: "172.20.0.0/16".into(),
        enable_dns_hostnames: true,
        enable_dns_support: true,
        tags: ctx,
        shared_id: None,
    }
}

fn common_tags(cluster: &str, owner: &str) -> kops_aws::context::Tags {
    let mut t = kops_aws::context::Tags::new();
    t.insert("KubernetesCluster".into(), cluster.into());
    t.insert(format!("kubernetes.io/cluster/{cluster}"), "owned".into());
    t.insert("Name".into(), cluster.into());
    t.insert("Owner".into(), owner.into());
    t
}

#[tokio::test]
async fn vpc_lifecycle() {
    let Some(cloud) = common::cloud().await else {
        return;
    };
    let cluster = "vpc.example.com";
    let mut graph = TaskGraph::new();
    graph.add(vpc(cluster, "a")).unwrap();

    let (report, _, writes) = common::run(&cloud, cluster, &graph, Mode::DryRun).await;
    assert!(report.has_changes());
    assert_eq!(writes, 0, "a dry run must not write");
    let plan = report.plan().to_string();
    assert!(
        plan.contains("Will create resources:") && plan.contains("VPC/vpc.example.com"),
        "{plan}"
    );

    let (report, _, writes) = common::run(&cloud, cluster, &graph, Mode::Apply).await;
    assert!(report.has_changes());
    assert!(writes >= 1);

    let (report, calls, writes) = common::run(&cloud, cluster, &graph, Mode::Apply).await;
    assert!(!report.has_changes(), "second run: {}", report.plan());
    assert_eq!(writes, 0);
    assert!(
        calls <= 3,
        "one DescribeVpcs and two attribute reads, got {calls}"
    );

    let mut changed = TaskGraph::new();
    changed.add(vpc(cluster, "b")).unwrap();
    let (report, _, _) = common::run(&cloud, cluster, &changed, Mode::DryRun).await;
    let plan = report.plan().to_string();
    assert!(
        plan.contains("Will modify resources:") && plan.contains("tags"),
        "{plan}"
    );
    common::run(&cloud, cluster, &changed, Mode::Apply).await;
    let (report, _, _) = common::run(&cloud, cluster, &changed, Mode::Apply).await;
    assert!(!report.has_changes());
}
