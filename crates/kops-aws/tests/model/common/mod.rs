//! Shared set-up for the kops-model tests against moto: a cloud on this test
//! process' moto, a fast-retrying executor, runs that count their calls, and
//! manifests parsed into a cluster and its groups.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use aws_config::{BehaviorVersion, Region};
use aws_sdk_ec2::config::Credentials;
use kops_api::{Cluster, InstanceGroup, Object};
use kops_aws::{AwsCloud, AwsContext};
use kops_engine::{Executor, ExecutorOptions, Mode, Report, RetryPolicy, TaskGraph};
use kops_model::Model;

pub const REGION: &str = "us-east-1";
/// An image moto ships (kops' default Ubuntu 24.04 image is not among them).
pub const IMAGE: &str =
    "099720109477/ubuntu/images/hvm-ssd/ubuntu-xenial-16.04-amd64-server-20170721";
pub const SSH_KEY: &str = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAAAgQC69tGREgszkqbXuftnhguY/GNFyTjLQklgvGUzpBT9B4kZ3oPfceH04RjSFmMo31WErWoAAjbhackIaI2JgY9qo8hNlBvLTk8AhoPG/h4c0c6dyOC3UMTVEFlJV1Fcwh8rNwWBx3TEvHD/M2zKMOCxF+4c6l//B1wbxLL3fBJnQQ== test@example";

pub async fn cloud() -> Option<AwsCloud> {
    let moto = kops_testkit::require_moto()?;
    let config = aws_config::defaults(BehaviorVersion::latest())
        .endpoint_url(moto.endpoint())
        .region(Region::new(REGION))
        .credentials_provider(Credentials::new("testing", "testing", None, None, "moto"))
        .load()
        .await;
    Some(AwsCloud::from_config(REGION, config))
}

pub fn executor() -> Executor {
    Executor::new(ExecutorOptions {
        retry: RetryPolicy {
            base: Duration::from_millis(20),
            max: Duration::from_millis(500),
            seed: Some(1),
        },
        task_deadline: Duration::from_secs(60),
        ..ExecutorOptions::default()
    })
}

pub struct Run {
    pub report: Report,
    pub calls: BTreeMap<String, u64>,
    pub total: u64,
    pub writes: u64,
}

pub async fn run(
    cloud: &AwsCloud,
    cluster: &str,
    graph: &TaskGraph<AwsContext>,
    mode: Mode,
) -> Result<Run, String> {
    let before = cloud.calls().snapshot();
    let (t0, w0) = (cloud.calls().total(), cloud.calls().writes());
    let ctx = Arc::new(AwsContext::new(cloud.clone(), cluster, Default::default()));
    let report = executor()
        .run(graph, ctx, mode)
        .await
        .map_err(|e| e.to_string())?;
    let calls = cloud
        .calls()
        .snapshot()
        .into_iter()
        .map(|(k, v)| {
            let d = v - before.get(&k).copied().unwrap_or(0);
            (k, d)
        })
        .filter(|(_, v)| *v > 0)
        .collect();
    Ok(Run {
        report,
        calls,
        total: cloud.calls().total() - t0,
        writes: cloud.calls().writes() - w0,
    })
}

pub fn load(yaml: &str) -> (Cluster, Vec<InstanceGroup>) {
    let mut cluster = None;
    let mut groups = Vec::new();
    for object in kops_api::parse_objects("test.yaml", yaml).unwrap() {
        match object {
            Object::Cluster(c) => cluster = Some(*c),
            Object::InstanceGroup(g) => groups.push(*g),
            _ => {}
        }
    }
    (cluster.unwrap(), groups)
}

/// The cluster as `update cluster` models it: the Route 53 zone resolved to
/// its id when the cluster publishes records.
pub async fn resolved(cloud: &AwsCloud, cluster: &Cluster) -> Cluster {
    let mut c = cluster.clone();
    let probe = Model::of_cluster(cluster);
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

/// An owner's VPC with an internet gateway; its id.
pub async fn owners_vpc(cloud: &AwsCloud) -> String {
    let ec2 = cloud.ec2();
    let vpc = ec2
        .create_vpc()
        .cidr_block("172.20.0.0/16")
        .send()
        .await
        .unwrap()
        .vpc()
        .unwrap()
        .vpc_id()
        .unwrap()
        .to_string();
    let igw = ec2
        .create_internet_gateway()
        .send()
        .await
        .unwrap()
        .internet_gateway()
        .unwrap()
        .internet_gateway_id()
        .unwrap()
        .to_string();
    ec2.attach_internet_gateway()
        .internet_gateway_id(&igw)
        .vpc_id(&vpc)
        .send()
        .await
        .unwrap();
    vpc
}

/// One AWS case of kops' `update_cluster` suite in ../shared.
pub struct KopsCase {
    /// Its folder name (`minimal-aws`).
    pub name: String,
    pub dir: std::path::PathBuf,
    pub cluster: Cluster,
    pub groups: Vec<InstanceGroup>,
}

/// Every case of ../shared/conformance/kops/update_cluster whose input is an
/// AWS cluster, by name; empty (with the reason printed) when ../shared is
/// absent.
pub fn kops_aws_cases() -> Vec<KopsCase> {
    let Some(shared) = kops_testkit::shared_dir() else {
        eprintln!("skipped: ../shared (kops' conformance cases) is absent");
        return Vec::new();
    };
    let root = shared.join("conformance/kops/update_cluster");
    let mut dirs: Vec<_> = std::fs::read_dir(&root)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    dirs.sort();
    dirs.into_iter()
        .filter_map(|dir| {
            let yaml = std::fs::read_to_string(dir.join("in-v1alpha2.yaml")).ok()?;
            let objects = kops_api::parse_objects("in.yaml", &yaml).ok()?;
            let mut cluster = None;
            let mut groups = Vec::new();
            for object in objects {
                match object {
                    Object::Cluster(c) => cluster = Some(*c),
                    Object::InstanceGroup(g) => groups.push(*g),
                    _ => {}
                }
            }
            let cluster = cluster?;
            if cluster.spec.cloud_provider.as_deref() != Some("aws") {
                return None;
            }
            Some(KopsCase {
                name: dir.file_name()?.to_string_lossy().to_string(),
                dir,
                cluster,
                groups,
            })
        })
        .collect()
}
