//! The whole lifecycle through the binary against moto_server on 127.0.0.1:
//! create cluster → update (dry run, exit code 2) → update --yes → update
//! again (nothing to do, exit code 0) → delete (dry run lists) → delete --yes
//! → nothing tagged for the cluster is left.

use crate::common;

use aws_config::{BehaviorVersion, Region};
use aws_sdk_ec2::config::Credentials;
use aws_sdk_ec2::types::Filter;
use common::{command, file_url, kops_on};

/// An image moto has (moto ships a fixed set; kops' default Ubuntu image
/// is not among them), named as `owner/name` so the look-up is exercised.
use crate::common::IMAGE;

/// SDK configuration for this test process' moto.
async fn moto_config(endpoint: &str) -> aws_config::SdkConfig {
    aws_config::defaults(BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("testing", "testing", None, None, "moto"))
        .load()
        .await
}

pub(crate) async fn tagged_left(endpoint: &str, cluster: &str) -> Vec<String> {
    let config = moto_config(endpoint).await;
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
    for t in ec2
        .describe_launch_templates()
        .filters(filter.clone())
        .send()
        .await
        .unwrap()
        .launch_templates()
    {
        left.push(format!(
            "launch template {}",
            t.launch_template_name().unwrap()
        ));
    }
    for v in ec2
        .describe_volumes()
        .filters(filter.clone())
        .send()
        .await
        .unwrap()
        .volumes()
    {
        left.push(format!("volume {}", v.volume_id().unwrap()));
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
    // The clusters' names are under example.com: its zone holds the API
    // records of clusters with an API load balancer.
    moto.ensure_hosted_zone("example.com").unwrap();
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
        "--image",
        IMAGE,
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
    let r = kops_on(moto, &crate::common::delete_args(cluster, &state));
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

/// An apply killed half way is finished by the next update, without
/// duplicates.
#[test]
fn an_interrupted_apply_is_finished_by_the_next_update() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;

    let Some(moto) = kops_testkit::require_moto() else {
        return;
    };
    // The clusters' names are under example.com: its zone holds the API
    // records of clusters with an API load balancer.
    moto.ensure_hosted_zone("example.com").unwrap();
    let cluster = "killed.example.com";
    let tmp = tempfile::tempdir().unwrap();
    let state = file_url(&tmp.path().join("state"));
    let r = kops_on(
        moto,
        &[
            "create",
            "cluster",
            cluster,
            "--zones",
            "us-east-1a,us-east-1b",
            "--topology",
            "private",
            "--bastion",
            "--image",
            IMAGE,
            "--state",
            &state,
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);

    let mut cmd = command(&["update", "cluster", cluster, "--yes", "--state", &state]);
    for (k, v) in moto.env() {
        cmd.env(k, v);
    }
    let mut child = cmd
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let mut created = 0;
    for line in stderr.lines() {
        if line.unwrap().contains("created") {
            created += 1;
            if created == 3 {
                child.kill().unwrap();
                break;
            }
        }
    }
    let _ = child.wait();
    assert_eq!(
        created, 3,
        "the first apply should have created something before it was killed"
    );

    let r = kops_on(
        moto,
        &["update", "cluster", cluster, "--yes", "--state", &state],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = kops_on(
        moto,
        &[
            "update",
            "cluster",
            cluster,
            "--exit-code",
            "--state",
            &state,
        ],
    );
    assert_eq!(
        r.code, 0,
        "nothing left to do after the second apply:\n{}",
        r.stdout
    );

    // No duplicates: every Name tag appears once per resource type.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let config = moto_config(&moto.endpoint()).await;
        let ec2 = aws_sdk_ec2::Client::new(&config);
        let filter = Filter::builder()
            .name("tag:KubernetesCluster")
            .values(cluster)
            .build();
        let vpcs = ec2
            .describe_vpcs()
            .filters(filter.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(vpcs.vpcs().len(), 1);
        let subnets = ec2
            .describe_subnets()
            .filters(filter.clone())
            .send()
            .await
            .unwrap();
        let mut names: Vec<String> = subnets
            .subnets()
            .iter()
            .filter_map(|s| {
                s.tags()
                    .iter()
                    .find(|t| t.key() == Some("Name"))
                    .and_then(|t| t.value())
                    .map(str::to_string)
            })
            .collect();
        let n = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), n, "duplicate subnets: {names:?}");
        let groups = ec2
            .describe_security_groups()
            .filters(filter.clone())
            .send()
            .await
            .unwrap();
        let mut names: Vec<&str> = groups
            .security_groups()
            .iter()
            .filter_map(|g| g.group_name())
            .collect();
        let n = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), n, "duplicate security groups: {names:?}");
        let nats = ec2
            .describe_nat_gateways()
            .filter(filter.clone())
            .send()
            .await
            .unwrap();
        // moto ignores tag filters on DescribeNatGateways: count this
        // cluster's by their tag (other tests' clusters share the server).
        let live = nats
            .nat_gateways()
            .iter()
            .filter(|g| g.state().map(|s| s.as_str()) != Some("deleted"))
            .filter(|g| {
                g.tags()
                    .iter()
                    .any(|t| t.key() == Some("KubernetesCluster") && t.value() == Some(cluster))
            })
            .count();
        assert_eq!(live, 2, "one NAT gateway per private zone");

        // The kill can also land between CreateDhcpOptions and its tags
        // reaching the next run: two option sets carry the cluster's name.
        // Make that state on purpose (the newer one in use) and check the
        // next plan keeps the one the VPC uses.
        let vpc = vpcs.vpcs()[0].vpc_id().unwrap().to_string();
        let existing = ec2
            .describe_dhcp_options()
            .filters(filter.clone())
            .send()
            .await
            .unwrap();
        let original = &existing.dhcp_options()[0];
        let extra = ec2
            .create_dhcp_options()
            .set_dhcp_configurations(Some(
                original
                    .dhcp_configurations()
                    .iter()
                    .map(|c| {
                        aws_sdk_ec2::types::NewDhcpConfiguration::builder()
                            .set_key(c.key().map(str::to_string))
                            .set_values(Some(
                                c.values()
                                    .iter()
                                    .filter_map(|v| v.value().map(str::to_string))
                                    .collect(),
                            ))
                            .build()
                    })
                    .collect(),
            ))
            .send()
            .await
            .unwrap();
        let extra_id = extra.dhcp_options().unwrap().dhcp_options_id().unwrap();
        ec2.create_tags()
            .resources(extra_id)
            .set_tags(Some(original.tags().to_vec()))
            .send()
            .await
            .unwrap();
        ec2.associate_dhcp_options()
            .dhcp_options_id(extra_id)
            .vpc_id(&vpc)
            .send()
            .await
            .unwrap();
    });
    let r = kops_on(
        moto,
        &[
            "update",
            "cluster",
            cluster,
            "--exit-code",
            "--state",
            &state,
        ],
    );
    assert_eq!(
        r.code, 0,
        "a leftover option set with the cluster's name is not chosen over the one in use:\n{}",
        r.stdout
    );
    let r = kops_on(
        moto,
        &[
            "delete",
            "cluster",
            cluster,
            "--yes",
            "--interval",
            "100ms",
            "--state",
            &state,
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
}

/// A cluster in an existing VPC creates nothing in the owner's resources,
/// and delete leaves the VPC and its subnets in place.
#[test]
fn shared_vpc_is_left_in_place() {
    let Some(moto) = kops_testkit::require_moto() else {
        return;
    };
    // The clusters' names are under example.com: its zone holds the API
    // records of clusters with an API load balancer.
    moto.ensure_hosted_zone("example.com").unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let config = rt.block_on(moto_config(&moto.endpoint()));
    let ec2 = aws_sdk_ec2::Client::new(&config);
    let (vpc, subnet) = rt.block_on(async {
        let vpc = ec2
            .create_vpc()
            .cidr_block("10.30.0.0/16")
            .send()
            .await
            .unwrap();
        let vpc = vpc.vpc().unwrap().vpc_id().unwrap().to_string();
        let igw = ec2.create_internet_gateway().send().await.unwrap();
        let igw = igw
            .internet_gateway()
            .unwrap()
            .internet_gateway_id()
            .unwrap()
            .to_string();
        ec2.attach_internet_gateway()
            .vpc_id(&vpc)
            .internet_gateway_id(&igw)
            .send()
            .await
            .unwrap();
        let s = ec2
            .create_subnet()
            .vpc_id(&vpc)
            .cidr_block("10.30.1.0/24")
            .availability_zone("us-east-1a")
            .send()
            .await
            .unwrap();
        (vpc, s.subnet().unwrap().subnet_id().unwrap().to_string())
    });
    let cluster = "shared.example.com";
    let tmp = tempfile::tempdir().unwrap();
    let state = file_url(&tmp.path().join("state"));
    let r = kops_on(
        moto,
        &[
            "create",
            "cluster",
            cluster,
            "--zones",
            "us-east-1a",
            "--subnets",
            &subnet,
            "--image",
            IMAGE,
            "--state",
            &state,
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = kops_on(
        moto,
        &["update", "cluster", cluster, "--yes", "--state", &state],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        !r.stderr.contains("VPC/"),
        "the shared VPC must not be created or modified:\n{}",
        r.stderr
    );
    let r = kops_on(
        moto,
        &[
            "update",
            "cluster",
            cluster,
            "--exit-code",
            "--state",
            &state,
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stdout);
    let r = kops_on(
        moto,
        &[
            "delete",
            "cluster",
            cluster,
            "--yes",
            "--interval",
            "100ms",
            "--state",
            &state,
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    rt.block_on(async {
        let v = ec2.describe_vpcs().vpc_ids(&vpc).send().await.unwrap();
        assert_eq!(v.vpcs().len(), 1, "the shared VPC must survive delete");
        let s = ec2
            .describe_subnets()
            .subnet_ids(&subnet)
            .send()
            .await
            .unwrap();
        assert_eq!(
            s.subnets().len(),
            1,
            "the shared subnet must survive delete"
        );
    });
}
