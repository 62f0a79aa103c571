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

mod common;

use std::time::Duration;

use common::{cloud, load, run, IMAGE, SSH_KEY};
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

/// The cluster as `update cluster` models it: the Route 53 zone resolved to
/// its id when the cluster publishes records.
async fn resolved(cloud: &AwsCloud, cluster: &Cluster) -> Cluster {
    let mut c = cluster.clone();
    let probe = Model {
        cluster,
        groups: &[],
        ssh_public_key: None,
        config_base: "",
    };
    if probe.publishes_dns_records() {
        let zone = kops_aws::dns::find_hosted_zone(
            cloud,
            cluster.name(),
            cluster.spec.dns_zone.as_deref(),
            probe.dns_type() == "Private",
        )
        .await
        .unwrap();
        c.spec.dns_zone = Some(zone.id);
    }
    c
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
        config_base: &format!("s3://state-bucket/{name}"),
    };
    let graph = kops_model::build(&model).unwrap_or_else(|e| panic!("{name}: {e}"));

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
    if modelled.spec.api.as_ref().is_some_and(|a| a.load_balancer.is_some())
        && model.publishes_dns_records()
    {
        assert!(count("dns-record") >= 2, "{name}: the API records");
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
    assert!(remaining.is_empty(), "{name}: left after delete: {remaining:#?}");
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

#[tokio::test]
async fn mixed_instances() {
    apply_shared_case("mixed_instances").await;
}

#[tokio::test]
async fn minimal_warmpool() {
    apply_shared_case("minimal-warmpool").await;
}
