//! What kops itself would change on a cluster kops-rs applied, and what
//! kops-rs would change on one kops applied (issue 17), against moto:
//!
//! - the API load balancer states its access log off
//!   (`access_logs.s3.enabled=false`) when the spec configures none;
//! - AWS' default all-egress-to-`0.0.0.0/0` rule of every group is tagged
//!   like the rules kops-rs authorizes (kops tags it);
//! - an autoscaling group pointed at its template's `$Latest` (as kops
//!   points them) is up to date when that is the version kops-rs would
//!   write;
//!
//! each followed by an update that plans and writes nothing. And, without
//! moto, the state-store files `update cluster` writes are at the keys of
//! kops' `aws_s3_object`s in its golden Terraform.

use crate::common;

use std::collections::BTreeSet;

use common::{cloud, load, run, IMAGE, SSH_KEY};
use kops_engine::Mode;
use kops_model::Model;

fn manifests(name: &str, zone: &str) -> String {
    format!(
        r#"apiVersion: kops.k8s.io/v1alpha2
kind: Cluster
metadata: {{name: {name}}}
spec:
  cloudProvider: aws
  dnsZone: {zone}
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

#[tokio::test]
async fn kops_sees_its_attributes_tags_and_template_versions() {
    let Some(cloud) = cloud().await else {
        return;
    };
    let cluster = "interop.example.com";
    let zone = kops_testkit::require_moto()
        .unwrap()
        .ensure_hosted_zone("example.com")
        .unwrap();
    let (spec, groups) = load(&manifests(cluster, &zone));
    let model = Model {
        cluster: &spec,
        groups: &groups,
        ssh_public_key: Some(SSH_KEY),
        node_inputs: None,
        account_id: None,
        config_base: "s3://state-bucket/cluster",
    };
    let graph = kops_aws::model::build(&model).unwrap();

    let apply = run(&cloud, cluster, &graph, Mode::Apply).await.unwrap();
    eprintln!("apply: {} calls: {:?}", apply.total, apply.calls);

    // The access log, stated off.
    let lbs = cloud
        .elbv2()
        .describe_load_balancers()
        .send()
        .await
        .unwrap();
    let lb = lbs
        .load_balancers()
        .iter()
        .find(|l| {
            l.load_balancer_name()
                == Some(kops_model::api_load_balancer::resource_name32(cluster, "api").as_str())
        })
        .expect("the API load balancer");
    let attributes = cloud
        .elbv2()
        .describe_load_balancer_attributes()
        .load_balancer_arn(lb.load_balancer_arn().unwrap())
        .send()
        .await
        .unwrap();
    let access_log = attributes
        .attributes()
        .iter()
        .find(|a| a.key() == Some("access_logs.s3.enabled"))
        .and_then(|a| a.value());
    assert_eq!(access_log, Some("false"));

    // Every group's all-egress rules (IPv4 and IPv6) carry the cluster's
    // tags and their own name, as kops tags them.
    let groups_out = cloud
        .ec2()
        .describe_security_groups()
        .filters(
            aws_sdk_ec2::types::Filter::builder()
                .name("tag:KubernetesCluster")
                .values(cluster)
                .build(),
        )
        .send()
        .await
        .unwrap();
    let ids: Vec<String> = groups_out
        .security_groups()
        .iter()
        .filter_map(|g| g.group_id().map(str::to_string))
        .collect();
    assert!(ids.len() >= 3, "masters, nodes, api-elb: {ids:?}");
    let rules = cloud
        .ec2()
        .describe_security_group_rules()
        .filters(
            aws_sdk_ec2::types::Filter::builder()
                .name("group-id")
                .set_values(Some(ids.clone()))
                .build(),
        )
        .send()
        .await
        .unwrap();
    let mut egress_everywhere = 0;
    for rule in rules.security_group_rules() {
        let everywhere = rule.cidr_ipv4() == Some("0.0.0.0/0") || rule.cidr_ipv6() == Some("::/0");
        if rule.is_egress() != Some(true) || !everywhere || rule.ip_protocol() != Some("-1") {
            continue;
        }
        egress_everywhere += 1;
        let tag = |k: &str| {
            rule.tags()
                .iter()
                .find(|t| t.key() == Some(k))
                .and_then(|t| t.value())
        };
        assert_eq!(tag("KubernetesCluster"), Some(cluster), "{rule:?}");
        assert!(
            tag("Name").is_some_and(|n| n.contains("-egress-all-0to0-")),
            "{rule:?}"
        );
    }
    assert_eq!(
        egress_everywhere,
        2 * ids.len(),
        "IPv4 and IPv6 egress of each group"
    );

    let again = run(&cloud, cluster, &graph, Mode::Apply).await.unwrap();
    assert!(!again.report.has_changes(), "{}", again.report.plan());
    assert_eq!(again.writes, 0, "{:?}", again.calls);

    // kops points each group at `$Latest`: the same version, no change.
    let asgs = cloud
        .autoscaling()
        .describe_auto_scaling_groups()
        .send()
        .await
        .unwrap();
    let mut pointed = 0;
    for group in asgs.auto_scaling_groups() {
        let name = group.auto_scaling_group_name().unwrap_or_default();
        if !name.ends_with(cluster) {
            continue;
        }
        let template = group.launch_template().expect("a launch template");
        cloud
            .autoscaling()
            .update_auto_scaling_group()
            .auto_scaling_group_name(name)
            .launch_template(
                aws_sdk_autoscaling::types::LaunchTemplateSpecification::builder()
                    .set_launch_template_id(template.launch_template_id().map(str::to_string))
                    .version("$Latest")
                    .build(),
            )
            .send()
            .await
            .unwrap();
        pointed += 1;
    }
    assert_eq!(pointed, 2, "control plane and nodes");
    let dry = run(&cloud, cluster, &graph, Mode::DryRun).await.unwrap();
    assert!(!dry.report.has_changes(), "{}", dry.report.plan());
    let again = run(&cloud, cluster, &graph, Mode::Apply).await.unwrap();
    assert!(!again.report.has_changes(), "{}", again.report.plan());
    assert_eq!(again.writes, 0, "{:?}", again.calls);
    eprintln!("no-op: {} calls: {:?}", again.total, again.calls);
}

/// The keys of kops' `aws_s3_object`s in a golden `kubernetes.tf` that are
/// state files below the config base (the node configs, which kops-nodeup
/// renders, and the discovery store's documents aside), relative to it.
fn golden_state_keys(tf: &str, prefix: &str) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    let mut in_object = false;
    for line in tf.lines() {
        if line.starts_with("resource ") {
            in_object = line.starts_with("resource \"aws_s3_object\"");
            continue;
        }
        let Some(value) = line.trim().strip_prefix("key ") else {
            continue;
        };
        if !in_object {
            continue;
        }
        let value = value
            .trim()
            .trim_start_matches('=')
            .trim()
            .trim_matches('"');
        if let Some(path) = value.strip_prefix(prefix) {
            if !path.starts_with("igconfig/") {
                keys.insert(path.to_string());
            }
        }
    }
    keys
}

#[test]
fn state_files_are_at_kops_keys() {
    let cases = common::kops_aws_cases();
    if cases.is_empty() {
        return;
    }
    let (mut compared, mut identical, mut differ) = (0, 0, Vec::new());
    for common::KopsCase {
        name: case,
        dir,
        cluster,
        groups,
    } in cases
    {
        let Ok(tf) = std::fs::read_to_string(dir.join("kubernetes.tf")) else {
            continue;
        };
        if !tf.contains("resource \"aws_s3_object\"") {
            continue;
        }
        let config_base = cluster.spec.config_base.clone().unwrap_or_default();
        // kops' test store (`memfs://a/b`) keys its objects `a/b/...`; an
        // S3 one (`s3://bucket/b`) `b/...`.
        let prefix = if let Some(path) = config_base.strip_prefix("memfs://") {
            format!("{path}/")
        } else if let Some(bucket_path) = config_base.strip_prefix("s3://") {
            match bucket_path.split_once('/') {
                Some((_, path)) => format!("{path}/"),
                None => String::new(),
            }
        } else {
            continue;
        };
        let model = Model {
            cluster: &cluster,
            groups: &groups,
            ssh_public_key: Some(SSH_KEY),
            node_inputs: None,
            account_id: Some("123456789012"),
            config_base: &config_base,
        };
        let Ok(files) = kops_model::files::state_files(&model, "", Vec::new()) else {
            continue;
        };
        let ours: BTreeSet<String> = files
            .iter()
            .filter(|f| f.base.is_none())
            .map(|f| f.path.clone())
            .collect();
        let golden = golden_state_keys(&tf, &prefix);
        compared += 1;
        if ours == golden {
            identical += 1;
        } else {
            differ.push(format!(
                "{case}: only kops {:?}, only kops-rs {:?}",
                golden.difference(&ours).collect::<Vec<_>>(),
                ours.difference(&golden).collect::<Vec<_>>()
            ));
        }
    }
    eprintln!("state-file keys identical to kops' in {identical}/{compared} cases");
    for d in &differ {
        eprintln!("  {d}");
    }
    assert!(compared >= 30, "only {compared} cases compared");
    assert!(differ.is_empty(), "{differ:#?}");
}
