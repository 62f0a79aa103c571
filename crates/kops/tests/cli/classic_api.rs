//! A cluster whose API is behind a Classic ELB (`class: Classic`, as kops
//! 1.36 and earlier made them), through the binary against moto: the
//! update warns once that the class is deprecated, builds the ELB as kops
//! 1.36 did (TCP 443, `SSL:443` health check, draining and idle timeout),
//! attaches the control plane's autoscaling group by name and finds nothing
//! to do the second time; moved to `class: Network`, the ELB is deleted once
//! the Network Load Balancer is up; `delete cluster` then leaves nothing.

use crate::common::{command, file_url, kops_on, IMAGE};

const CLUSTER: &str = "classic-api.example.com";

/// The text between `<tag>` and `</tag>`, each occurrence.
fn all_between<'a>(text: &'a str, tag: &str) -> Vec<&'a str> {
    let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(&open) {
        let after = &rest[start + open.len()..];
        let Some(end) = after.find(&close) else {
            break;
        };
        out.push(&after[..end]);
        rest = &after[end + close.len()..];
    }
    out
}

/// moto's DescribeLoadBalancers answer (Classic ELBs), when it lists the
/// cluster's (`api-classic-api-...`).
fn described_elb(moto: &kops_testkit::Moto) -> Option<String> {
    let (status, body) = moto
        .query_api(
            "elasticloadbalancing",
            "Action=DescribeLoadBalancers&Version=2012-06-01",
        )
        .unwrap();
    assert_eq!(status, 200, "{body}");
    body.contains("<LoadBalancerName>api-classic-api-example")
        .then_some(body)
}

#[test]
fn a_classic_api_load_balancer_is_built_kept_and_retired_on_the_move_to_network() {
    let Some(moto) = kops_testkit::require_moto() else {
        return;
    };
    moto.ensure_hosted_zone("example.com").unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let state = file_url(&tmp.path().join("state"));
    let key = tmp.path().join("id.pub");
    std::fs::write(&key, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKF1D4tCJrnUwJ/ZQf8x0OY7yS4ALaMtuLZOd6Ymnb6b test@example\n").unwrap();
    let r = kops_on(
        moto,
        &[
            "create",
            "cluster",
            CLUSTER,
            "--zones",
            "us-east-1a",
            "--networking",
            "cilium",
            "--topology",
            "private",
            "--dns",
            "public",
            "--dns-zone",
            "example.com",
            "--ssh-public-key",
            key.to_str().unwrap(),
            "--state",
            &state,
            "--image",
            IMAGE,
        ],
    );
    assert_eq!(r.code, 0, "create: {}", r.stderr);
    // The spec of a cluster kops 1.36 made with a Classic ELB.
    let r = kops_on(
        moto,
        &["get", "cluster", CLUSTER, "--state", &state, "-o", "yaml"],
    );
    assert_eq!(r.code, 0, "get: {}", r.stderr);
    assert!(r.stdout.contains("class: Network"), "{}", r.stdout);
    let spec = r.stdout.replace("class: Network", "class: Classic");
    let file = tmp.path().join("cluster.yaml");
    std::fs::write(&file, spec).unwrap();
    let r = command(&["replace", "-f", file.to_str().unwrap(), "--state", &state])
        .output()
        .expect("run kops");
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));

    let r = kops_on(
        moto,
        &["update", "cluster", CLUSTER, "--state", &state, "--yes"],
    );
    assert_eq!(r.code, 0, "apply: {}", r.stderr);
    let warnings: Vec<&str> = r
        .stderr
        .lines()
        .filter(|l| l.contains("`Classic` is deprecated"))
        .collect();
    assert_eq!(warnings.len(), 1, "{}", r.stderr);
    assert!(warnings[0].starts_with("warning: "), "{}", warnings[0]);
    assert!(warnings[0].contains("class: Network"), "{}", warnings[0]);

    let elb = described_elb(moto).expect("the API's Classic ELB");
    assert_eq!(all_between(&elb, "LoadBalancerPort"), ["443"], "{elb}");
    assert_eq!(all_between(&elb, "InstancePort"), ["443"], "{elb}");
    assert!(
        all_between(&elb, "Protocol").iter().all(|p| *p == "TCP"),
        "{elb}"
    );
    assert_eq!(all_between(&elb, "Target"), ["SSL:443"], "{elb}");
    assert_eq!(all_between(&elb, "Interval"), ["10"], "{elb}");
    assert_eq!(all_between(&elb, "Scheme"), ["internet-facing"], "{elb}");
    let name = all_between(&elb, "LoadBalancerName")[0].to_string();

    let (_, attributes) = moto
        .query_api(
            "elasticloadbalancing",
            &format!(
                "Action=DescribeLoadBalancerAttributes&Version=2012-06-01&LoadBalancerName={name}"
            ),
        )
        .unwrap();
    assert_eq!(
        all_between(&attributes, "IdleTimeout"),
        ["300"],
        "{attributes}"
    );
    assert_eq!(all_between(&attributes, "Timeout"), ["300"], "{attributes}");

    // The control plane's group is attached by name.
    let (_, groups) = moto
        .query_api(
            "autoscaling",
            "Action=DescribeAutoScalingGroups&Version=2011-01-01",
        )
        .unwrap();
    assert!(
        groups.contains(&format!("<member>{name}</member>")),
        "{groups}"
    );

    let r = kops_on(
        moto,
        &[
            "update",
            "cluster",
            CLUSTER,
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

    // Moved to a Network Load Balancer, as the warning asks: the ELB goes
    // once the new balancer and the records are in place.
    let file = tmp.path().join("cluster.yaml");
    let spec = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, spec.replace("class: Classic", "class: Network")).unwrap();
    let r = command(&["replace", "-f", file.to_str().unwrap(), "--state", &state])
        .output()
        .expect("run kops");
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let r = kops_on(
        moto,
        &["update", "cluster", CLUSTER, "--state", &state, "--yes"],
    );
    assert_eq!(r.code, 0, "apply: {}", r.stderr);
    assert!(!r.stderr.contains("is deprecated"), "{}", r.stderr);
    assert!(described_elb(moto).is_none(), "the Classic ELB is left");
    let (_, groups) = moto
        .query_api(
            "autoscaling",
            "Action=DescribeAutoScalingGroups&Version=2011-01-01",
        )
        .unwrap();
    assert!(
        !groups.contains(&format!("<member>{name}</member>")),
        "{groups}"
    );
    let r = kops_on(
        moto,
        &[
            "update",
            "cluster",
            CLUSTER,
            "--state",
            &state,
            "--exit-code",
        ],
    );
    assert_eq!(
        r.code, 0,
        "nothing to do after the move:\n{}\n{}",
        r.stdout, r.stderr
    );

    let r = kops_on(moto, &crate::common::delete_args(CLUSTER, &state));
    assert_eq!(r.code, 0, "delete: {}", r.stderr);
    let (_, vpcs) = moto
        .query_api(
            "ec2",
            &format!("Action=DescribeVpcs&Version=2016-11-15&Filter.1.Name=tag:KubernetesCluster&Filter.1.Value.1={CLUSTER}"),
        )
        .unwrap();
    assert!(all_between(&vpcs, "vpcId").is_empty(), "{vpcs}");
}
