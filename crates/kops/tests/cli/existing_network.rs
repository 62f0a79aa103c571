//! `create cluster --vpc / --subnets` reads the existing network from AWS
//! (moto_server on 127.0.0.1) and builds the same spec kops would.

use crate::common;

use aws_config::{BehaviorVersion, Region};
use aws_sdk_ec2::config::Credentials;
use common::kops_on;

struct Network {
    vpc: String,
    subnet_a: String,
    subnet_b: String,
}

async fn make_network(endpoint: &str) -> Network {
    let config = aws_config::defaults(BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("testing", "testing", None, None, "moto"))
        .load()
        .await;
    let ec2 = aws_sdk_ec2::Client::new(&config);
    let vpc = ec2
        .create_vpc()
        .cidr_block("10.20.0.0/16")
        .send()
        .await
        .unwrap();
    let vpc = vpc.vpc().unwrap().vpc_id().unwrap().to_string();
    let mut ids = Vec::new();
    for (cidr, zone) in [
        ("10.20.1.0/24", "us-east-1a"),
        ("10.20.2.0/24", "us-east-1b"),
    ] {
        let s = ec2
            .create_subnet()
            .vpc_id(&vpc)
            .cidr_block(cidr)
            .availability_zone(zone)
            .send()
            .await
            .unwrap();
        ids.push(s.subnet().unwrap().subnet_id().unwrap().to_string());
    }
    Network {
        vpc,
        subnet_b: ids.pop().unwrap(),
        subnet_a: ids.pop().unwrap(),
    }
}

fn cluster_doc(stdout: &str) -> serde_json::Value {
    let first = serde_yaml_ng::Deserializer::from_str(stdout)
        .next()
        .unwrap();
    serde::Deserialize::deserialize(first).unwrap()
}

#[tokio::test]
async fn existing_vpc_and_subnets_come_from_aws() {
    let Some(moto) = kops_testkit::require_moto() else {
        return;
    };
    let net = make_network(&moto.endpoint()).await;

    // --subnets alone: the VPC is the subnets' VPC.
    let subnets = format!("{},{}", net.subnet_a, net.subnet_b);
    let r = kops_on(
        moto,
        &[
            "create",
            "cluster",
            "shared.example.com",
            "--zones",
            "us-east-1a,us-east-1b",
            "--subnets",
            &subnets,
            "--networking",
            "cni",
            "--kubernetes-version",
            "v1.34.1",
            "--dry-run",
            "-o",
            "yaml",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let c = cluster_doc(&r.stdout);
    assert_eq!(c["spec"]["networkID"], net.vpc.as_str());
    assert_eq!(c["spec"]["networkCIDR"], "10.20.0.0/16");
    let s = &c["spec"]["subnets"];
    assert_eq!(s[0]["id"], net.subnet_a.as_str());
    assert_eq!(s[0]["cidr"], "10.20.1.0/24");
    assert_eq!(s[0]["zone"], "us-east-1a");
    assert_eq!(s[1]["id"], net.subnet_b.as_str());
    assert_eq!(s[1]["zone"], "us-east-1b");

    // --vpc alone: new subnets carved from the VPC's CIDR.
    let r = kops_on(
        moto,
        &[
            "create",
            "cluster",
            "vpc.example.com",
            "--zones",
            "us-east-1a",
            "--vpc",
            &net.vpc,
            "--networking",
            "cni",
            "--kubernetes-version",
            "v1.34.1",
            "--dry-run",
            "-o",
            "yaml",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let c = cluster_doc(&r.stdout);
    assert_eq!(c["spec"]["networkID"], net.vpc.as_str());
    assert_eq!(c["spec"]["networkCIDR"], "10.20.0.0/16");

    // A subnet that does not exist is a clear error, not a panic.
    let r = kops_on(
        moto,
        &[
            "create",
            "cluster",
            "x.example.com",
            "--zones",
            "us-east-1a",
            "--subnets",
            "subnet-00000000deadbeef",
            "--networking",
            "cni",
            "--dry-run",
            "-o",
            "yaml",
        ],
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("subnet-00000000deadbeef"), "{}", r.stderr);
    assert!(r.stderr.contains("hint:"), "{}", r.stderr);
}
