//! The whole lifecycle through the binary against moto_server on 127.0.0.1:
//! create cluster → update (dry run, exit code 2) → update --yes → update
//! again (nothing to do, exit code 0) → delete (dry run lists) → delete --yes
//! → nothing tagged for the cluster is left.

mod common;

use aws_config::{BehaviorVersion, Region};
use aws_sdk_ec2::config::Credentials;
use aws_sdk_ec2::types::Filter;
use common::{command, file_url, Run};

fn kops_on(moto: &kops_testkit::Moto, args: &[&str]) -> Run {
    let mut c = command(args);
    for (k, v) in moto.env() {
        c.env(k, v);
    }
    c.output().unwrap().into()
}

async fn tagged_left(endpoint: &str, cluster: &str) -> Vec<String> {
    let config = aws_config::defaults(BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("testing", "testing", None, None, "moto"))
        .load()
        .await;
    let ec2 = aws_sdk_ec2::Client::new(&config);
    let filter = Filter::builder()
        .name("tag:KubernetesCluster")
        .values(cluster)
        .build();
    let mut left = Vec::new();
    for v in ec2
        .describe_vpcs()
        .filters(filter.clone())
        .send()
        .await
        .unwrap()
        .vpcs()
    {
        left.push(format!("vpc {}", v.vpc_id().unwrap()));
    }
    for s in ec2
        .describe_subnets()
        .filters(filter.clone())
        .send()
        .await
        .unwrap()
        .subnets()
    {
        left.push(format!("subnet {}", s.subnet_id().unwrap()));
    }
    for g in ec2
        .describe_security_groups()
        .filters(filter.clone())
        .send()
        .await
        .unwrap()
        .security_groups()
    {
        left.push(format!("security group {}", g.group_id().unwrap()));
    }
    for r in ec2
        .describe_route_tables()
        .filters(filter.clone())
        .send()
        .await
        .unwrap()
        .route_tables()
    {
        left.push(format!("route table {}", r.route_table_id().unwrap()));
    }
    for g in ec2
        .describe_internet_gateways()
        .filters(filter.clone())
        .send()
        .await
        .unwrap()
        .internet_gateways()
    {
        left.push(format!("igw {}", g.internet_gateway_id().unwrap()));
    }
    for d in ec2
        .describe_dhcp_options()
        .filters(filter.clone())
        .send()
        .await
        .unwrap()
        .dhcp_options()
    {
        left.push(format!("dhcp {}", d.dhcp_options_id().unwrap()));
    }
    let iam = aws_sdk_iam::Client::new(&config);
    for r in iam.list_roles().send().await.unwrap().roles() {
        if r.role_name().ends_with(cluster) {
            left.push(format!("role {}", r.role_name()));
        }
    }
    left
}

fn lifecycle(topology: &str, cluster: &str) {
    let Some(moto) = kops_testkit::require_moto() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let state = file_url(&tmp.path().join("state"));
    let key = tmp.path().join("id.pub");
    std::fs::write(&key, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKF1D4tCJrnUwJ/ZQf8x0OY7yS4ALaMtuLZOd6Ymnb6b test@example\n").unwrap();
    let mut args = vec![
        "create",
        "cluster",
        cluster,
        "--zones",
        "us-east-1a,us-east-1b",
        "--networking",
        "cilium",
        "--ssh-public-key",
        key.to_str().unwrap(),
        "--state",
        &state,
        "--topology",
        topology,
    ];
    if topology == "private" {
        args.push("--bastion");
    }
    let r = kops_on(moto, &args);
    assert_eq!(r.code, 0, "create: {}", r.stderr);

    let r = kops_on(
        moto,
        &[
            "update",
            "cluster",
            cluster,
            "--state",
            &state,
            "--exit-code",
        ],
    );
    assert_eq!(r.code, 2, "dry run with changes exits 2: {}", r.stderr);
    assert!(r.stdout.contains("Will create resources:"), "{}", r.stdout);
    let r = kops_on(
        moto,
        &[
            "update", "cluster", cluster, "--state", &state, "-o", "json",
        ],
    );
    let plan: serde_json::Value =
        serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{e}: {}", r.stdout));
    assert!(
        plan["create"].as_array().is_some_and(|c| !c.is_empty()),
        "{plan}"
    );

    let r = kops_on(
        moto,
        &["update", "cluster", cluster, "--state", &state, "--yes"],
    );
    assert_eq!(r.code, 0, "apply: {}", r.stderr);
    assert!(r.stderr.contains("created"), "{}", r.stderr);
    assert!(tmp
        .path()
        .join("state")
        .join(cluster)
        .join("cluster-completed.spec")
        .exists());

    let r = kops_on(
        moto,
        &[
            "update",
            "cluster",
            cluster,
            "--state",
            &state,
            "--exit-code",
        ],
    );
    assert_eq!(
        r.code, 0,
        "second run must find nothing to do:\n{}\n{}",
        r.stdout, r.stderr
    );
    assert!(
        r.stderr.contains("No changes need to be applied"),
        "{}",
        r.stderr
    );

    let r = kops_on(moto, &["delete", "cluster", cluster, "--state", &state]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("vpc"), "{}", r.stdout);
    let r = kops_on(
        moto,
        &[
            "delete",
            "cluster",
            cluster,
            "--state",
            &state,
            "--yes",
            "--interval",
            "100ms",
        ],
    );
    assert_eq!(r.code, 0, "delete: {}", r.stderr);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let left = rt.block_on(tagged_left(&moto.endpoint(), cluster));
    assert!(left.is_empty(), "left after delete: {left:?}");
    assert!(!tmp.path().join("state").join(cluster).exists());
}

#[test]
fn public_cluster_lifecycle() {
    lifecycle("public", "pub.example.com");
}

#[test]
fn private_cluster_lifecycle() {
    lifecycle("private", "priv.example.com");
}
