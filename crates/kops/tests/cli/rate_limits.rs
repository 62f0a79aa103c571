//! 300 instance groups under AWS' request-rate limits: moto behind
//! `kops_testkit::aws_limits` with the documented buckets at their default
//! sizes (reads 100 refilled at 20/s and writes 200 at 5/s per action,
//! Route 53 5/s). Apply, a no-op update and delete each end with exit 0,
//! no throttle reaches the user, and nothing of the cluster is left. Each
//! step's calls, time, time waited on limits and throttled answers are
//! printed (`--no-capture` shows them); a benchmark, `bench/rate_limits.py`,
//! compares them with the real kops.

use std::time::Instant;

use crate::common::{command, file_url, Run, IMAGE};
use kops_testkit::aws_limits::AwsLimits;

/// Groups besides the control plane, the three node groups and the bastion.
const EXTRA_GROUPS: usize = 295;
const ZONES: [&str; 3] = ["us-east-1a", "us-east-1b", "us-east-1c"];

fn kops_through(moto: &kops_testkit::Moto, proxy: &AwsLimits, args: &[&str]) -> Run {
    let mut c = command(args);
    for (k, v) in moto.env() {
        c.env(k, v);
    }
    c.env("AWS_ENDPOINT_URL", proxy.url());
    c.output().expect("run kops").into()
}

/// One step: runs it, prints its figures, checks it ended well.
fn step(moto: &kops_testkit::Moto, proxy: &AwsLimits, name: &str, args: &[&str]) -> (Run, String) {
    let (before, throttled_before) = proxy.totals();
    let started = Instant::now();
    let run = kops_through(moto, proxy, args);
    let seconds = started.elapsed().as_secs_f64();
    let (after, throttled_after) = proxy.totals();
    // kops-rs' own summary: "... N AWS calls, X s waiting on rate limits (...)".
    let waits = run
        .stderr
        .lines()
        .find_map(|l| {
            let at = l.find("waiting on rate limits")?;
            let start = l[..at].rfind(", ")? + 2;
            let end = l[at..].find(')')? + at + 1;
            Some(l[start..end].to_string())
        })
        .unwrap_or_else(|| "no call waited on rate limits".to_string());
    let line = format!(
        "{name:>7}: exit {}, {} calls ({} throttled by the limits), {seconds:.1}s; kops-rs: {waits}",
        run.code,
        after - before,
        throttled_after - throttled_before
    );
    eprintln!("{line}");
    for code in ["RequestLimitExceeded", "Throttling", "Rate exceeded"] {
        assert!(
            !run.stderr.contains(code) && !run.stdout.contains(code),
            "{name}: a throttle reached the user:\n{}",
            run.stderr
        );
    }
    (run, line)
}

#[test]
fn three_hundred_groups_apply_reapply_and_delete_under_the_documented_limits() {
    let Some(moto) = kops_testkit::require_moto() else {
        return;
    };
    let proxy = AwsLimits::start(&moto.endpoint()).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let state = file_url(&tmp.path().join("state"));
    let key = tmp.path().join("id.pub");
    std::fs::write(&key, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKF1D4tCJrnUwJ/ZQf8x0OY7yS4ALaMtuLZOd6Ymnb6b test@example\n").unwrap();
    let name = "limits300.k8s.local";
    let zones = ZONES.join(",");
    let create = [
        "create",
        "cluster",
        name,
        "--zones",
        &zones,
        "--topology",
        "private",
        "--bastion",
        "--networking",
        "cilium",
        "--node-size",
        "t3.medium",
        "--control-plane-size",
        "t3.medium",
        "--image",
        IMAGE,
        "--ssh-public-key",
        key.to_str().unwrap(),
        "--state",
        &state,
    ];
    let run = kops_through(moto, &proxy, &create);
    assert_eq!(run.code, 0, "create cluster: {}", run.stderr);
    let mut groups = String::new();
    for i in 1..=EXTRA_GROUPS {
        groups.push_str(&format!(
            "---\napiVersion: kops.k8s.io/v1alpha2\nkind: InstanceGroup\nmetadata:\n  name: extra-{i}\n  labels: {{kops.k8s.io/cluster: {name}}}\nspec: {{role: Node, image: \"{IMAGE}\", machineType: t3.medium, minSize: 0, maxSize: 2, subnets: [{}]}}\n",
            ZONES[(i - 1) % ZONES.len()]
        ));
    }
    let file = tmp.path().join("groups.yaml");
    std::fs::write(&file, groups).unwrap();
    let run = kops_through(
        moto,
        &proxy,
        &["create", "-f", file.to_str().unwrap(), "--state", &state],
    );
    assert_eq!(run.code, 0, "create -f: {}", run.stderr);
    let run = kops_through(
        moto,
        &proxy,
        &["get", "ig", "--name", name, "--state", &state],
    );
    let count = run
        .stdout
        .lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .count();
    assert_eq!(count, EXTRA_GROUPS + 5, "{}", run.stdout);

    let mut summary = vec![format!(
        "{count} instance groups, 3 zones, AWS' default buckets (kops_testkit::aws_limits)"
    )];
    let (run, line) = step(
        moto,
        &proxy,
        "apply",
        &["update", "cluster", name, "--state", &state, "--yes"],
    );
    assert_eq!(run.code, 0, "apply:\n{}", run.stderr);
    summary.push(line);
    let (run, line) = step(
        moto,
        &proxy,
        "no-op",
        &["update", "cluster", name, "--state", &state],
    );
    assert_eq!(
        run.code, 0,
        "the second update plans changes:\n{}",
        run.stdout
    );
    summary.push(line);
    let (run, line) = step(
        moto,
        &proxy,
        "delete",
        &[
            "delete",
            "cluster",
            name,
            "--state",
            &state,
            "--yes",
            "--interval",
            "1s",
        ],
    );
    assert_eq!(run.code, 0, "delete:\n{}", run.stderr);
    summary.push(line);

    let left = crate::common::with_moto_sdk(&moto.endpoint(), |config| async move {
        let mut left = crate::lifecycle::tagged_left(&moto.endpoint(), name).await;
        let asg = aws_sdk_autoscaling::Client::new(&config);
        let mut pages = asg.describe_auto_scaling_groups().into_paginator().send();
        while let Some(page) = pages.next().await {
            left.extend(
                page.unwrap()
                    .auto_scaling_groups()
                    .iter()
                    .filter_map(|g| g.auto_scaling_group_name())
                    .filter(|g| g.ends_with(name))
                    .map(|g| format!("group {g}")),
            );
        }
        let ec2 = aws_sdk_ec2::Client::new(&config);
        let mut pages = ec2.describe_launch_templates().into_paginator().send();
        while let Some(page) = pages.next().await {
            left.extend(
                page.unwrap()
                    .launch_templates()
                    .iter()
                    .filter_map(|t| t.launch_template_name())
                    .filter(|t| t.ends_with(name))
                    .map(|t| format!("launch template {t}")),
            );
        }
        left
    });
    assert!(left.is_empty(), "left after delete: {left:?}");
    eprintln!("{}", summary.join("\n"));
}
