//! The security and IAM half of `update cluster` against moto: security
//! groups and their rules, IAM roles, inline policies and instance profiles,
//! and the SSH key pair, built by the model for a public and a private
//! (bastion + API load balancer) cluster, in one graph with the VPC.
//!
//! Each test: a dry run writes nothing; apply creates everything with kops'
//! names; a second run changes nothing and only reads (a bounded number of
//! calls); a dry run after that writes nothing either; the rules in moto are
//! the ones the model asked for; drift (a revoked rule, an edited policy, a
//! role taken out of its profile) is repaired by the next run.
//!
//! moto notes: moto is strongly consistent, so IAM's "not visible yet"
//! retries are not exercised here. Like AWS, moto gives a new VPC security
//! group the all-traffic egress rule (and answers `InvalidPermission.Duplicate`
//! to authorizing it again), returns tags with `GetRole` and
//! `GetInstanceProfile`, accepts tags on `AuthorizeSecurityGroup*` and
//! `ImportKeyPair`, rejects a key that is not a real OpenSSH key
//! (`InvalidKeyPair.Format`, so the test key is a real one), and URL-encodes
//! the inline policy documents it returns.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_ec2::types::{Filter, IpPermission, UserIdGroupPair};
use kops_aws::context::owned_tags;
use kops_aws::tasks::policy_document::PolicyDocument;
use kops_aws::tasks::vpc::Vpc;
use kops_aws::{AwsCloud, AwsContext};
use kops_engine::{Mode, TaskGraph};
use kops_model::Model;

use common::{cloud, load, Run, SSH_KEY};

/// One run, which must succeed.
async fn run(cloud: &AwsCloud, cluster: &str, graph: &TaskGraph<AwsContext>, mode: Mode) -> Run {
    common::run(cloud, cluster, graph, mode)
        .await
        .unwrap_or_else(|e| panic!("run failed: {e}"))
}

fn manifests(name: &str, private: bool) -> String {
    let (subnets, extra, bastion) = if private {
        (
            "  - {name: us-east-1a, zone: us-east-1a, cidr: 172.20.32.0/19, type: Private}\n  - {name: utility-us-east-1a, zone: us-east-1a, cidr: 172.20.4.0/22, type: Utility}\n",
            "  api: {loadBalancer: {type: Public, class: Network}}\n",
            format!(
                "---\napiVersion: kops.k8s.io/v1alpha2\nkind: InstanceGroup\nmetadata: {{name: bastions, labels: {{kops.k8s.io/cluster: {name}}}}}\nspec: {{role: Bastion, subnets: [utility-us-east-1a]}}\n"
            ),
        )
    } else {
        (
            "  - {name: us-east-1a, zone: us-east-1a, cidr: 172.20.32.0/19, type: Public}\n",
            "",
            String::new(),
        )
    };
    format!(
        r#"apiVersion: kops.k8s.io/v1alpha2
kind: Cluster
metadata: {{name: {name}}}
spec:
  cloudProvider: aws
  configBase: s3://state-bucket/{name}
  kubernetesApiAccess: [0.0.0.0/0]
  sshAccess: [203.0.113.0/24]
  iam: {{allowContainerRegistry: true}}
{extra}  networkCIDR: 172.20.0.0/16
  networking: {{cilium: {{}}}}
  etcdClusters:
  - {{name: main, etcdMembers: [{{name: a, instanceGroup: control-plane}}]}}
  - {{name: events, etcdMembers: [{{name: a, instanceGroup: control-plane}}]}}
  subnets:
{subnets}---
apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata: {{name: control-plane, labels: {{kops.k8s.io/cluster: {name}}}}}
spec: {{role: Master, subnets: [us-east-1a]}}
---
apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata: {{name: nodes, labels: {{kops.k8s.io/cluster: {name}}}}}
spec: {{role: Node, subnets: [us-east-1a]}}
{bastion}"#
    )
}

/// The VPC (as the network builder makes it) plus the security, IAM and SSH tasks.
fn graph(model: &Model<'_>) -> TaskGraph<AwsContext> {
    let mut graph = TaskGraph::new();
    graph
        .add(Vpc {
            name: model.name().to_string(),
            cidr: "172.20.0.0/16".into(),
            enable_dns_hostnames: true,
            enable_dns_support: true,
            tags: owned_tags(model.name(), &Default::default(), model.name(), &[]),
            shared_id: None,
        })
        .unwrap();
    kops_aws::model::security::build(model, &mut graph).unwrap();
    kops_aws::model::iam::build(model, &mut graph).unwrap();
    kops_aws::model::ssh::build(model, &mut graph).unwrap();
    graph.validate().unwrap();
    graph
}

/// A rule as moto reports it: (group, direction, protocol, from, to, source).
type Permission = (String, &'static str, String, i32, i32, String);

/// Every permission of the cluster's groups, with group ids named.
async fn permissions_in_cloud(cloud: &AwsCloud, cluster: &str) -> BTreeSet<Permission> {
    let groups = cloud
        .ec2()
        .describe_security_groups()
        .filters(
            Filter::builder()
                .name("tag:KubernetesCluster")
                .values(cluster)
                .build(),
        )
        .send()
        .await
        .unwrap();
    let groups = groups.security_groups();
    let name_of: BTreeMap<&str, &str> = groups
        .iter()
        .map(|g| (g.group_id().unwrap(), g.group_name().unwrap()))
        .collect();
    let mut out = BTreeSet::new();
    for g in groups {
        let group = g.group_name().unwrap().to_string();
        for (direction, perms) in [
            ("ingress", g.ip_permissions()),
            ("egress", g.ip_permissions_egress()),
        ] {
            for p in perms {
                let protocol = p.ip_protocol().unwrap_or("-1").to_string();
                let (from, to) = if protocol == "-1" {
                    (0, 0)
                } else {
                    (p.from_port().unwrap_or(0), p.to_port().unwrap_or(0))
                };
                let sources = p
                    .ip_ranges()
                    .iter()
                    .filter_map(|r| r.cidr_ip().map(str::to_string))
                    .chain(
                        p.ipv6_ranges()
                            .iter()
                            .filter_map(|r| r.cidr_ipv6().map(str::to_string)),
                    )
                    .chain(p.user_id_group_pairs().iter().filter_map(|u| {
                        u.group_id()
                            .map(|id| name_of.get(id).copied().unwrap_or(id).to_string())
                    }));
                for source in sources {
                    out.insert((group.clone(), direction, protocol.clone(), from, to, source));
                }
            }
        }
    }
    out
}

/// The permissions the model asks for, in the same form.
fn permissions_in_model(model: &Model<'_>) -> BTreeSet<Permission> {
    use kops_aws::tasks::security_group_rule::RuleTarget;
    kops_aws::model::security::rules(model)
        .unwrap()
        .into_iter()
        .map(|r| {
            let source = match &r.target {
                RuleTarget::Cidr(c) | RuleTarget::Ipv6Cidr(c) | RuleTarget::PrefixList(c) => {
                    c.clone()
                }
                RuleTarget::Group(g) => g.key().name.clone(),
            };
            let protocol = r.aws_protocol().to_string();
            let (from, to) = if protocol == "-1" {
                (0, 0)
            } else {
                (r.from_port.unwrap_or(0), r.to_port.unwrap_or(0))
            };
            (
                r.group.key().name.clone(),
                if r.egress { "egress" } else { "ingress" },
                protocol,
                from,
                to,
                source,
            )
        })
        .collect()
}

fn show_calls(label: &str, run: &Run) {
    eprintln!(
        "{label}: {} calls, {} writes: {:?}",
        run.total, run.writes, run.calls
    );
}

/// Create, check, re-run, dry-run; returns the no-op run for extra checks.
async fn lifecycle(cloud: &AwsCloud, name: &str, private: bool) -> Run {
    let (cluster, groups) = load(&manifests(name, private));
    let model = Model {
        cluster: &cluster,
        groups: &groups,
        ssh_public_key: Some(SSH_KEY),
        node_inputs: None,
        account_id: None,
        config_base: cluster.spec.config_base.as_deref().unwrap(),
    };
    let graph = graph(&model);

    let dry = run(cloud, name, &graph, Mode::DryRun).await;
    show_calls("dry run (nothing exists)", &dry);
    assert_eq!(dry.writes, 0, "a dry run must not write: {:?}", dry.calls);
    let plan = dry.report.plan().to_string();
    if std::env::var_os("SHOW_PLAN").is_some() {
        eprintln!("{plan}");
    }
    for expected in [
        format!("SecurityGroup/masters.{name}"),
        format!("SecurityGroupRule/from-nodes.{name}-ingress-tcp-1to2379-masters.{name}"),
        format!("IAMRole/masters.{name}"),
        format!("IAMInstanceProfile/nodes.{name}"),
        "SSHKey/kubernetes.".to_string(),
    ] {
        assert!(plan.contains(&expected), "{expected} not in plan:\n{plan}");
    }

    let first = run(cloud, name, &graph, Mode::Apply).await;
    show_calls("first apply", &first);
    assert!(first.report.has_changes());
    assert_eq!(first.report.failures().count(), 0);
    assert_eq!(
        first.calls.get("EC2:DescribeSecurityGroups").copied(),
        Some(1),
        "one batched DescribeSecurityGroups: {:?}",
        first.calls
    );

    // The rules in the cloud are exactly the model's.
    assert_eq!(
        permissions_in_cloud(cloud, name).await,
        permissions_in_model(&model)
    );

    // IAM as kops names and tags it.
    let iam = cloud.iam();
    for role in if private {
        vec!["masters", "nodes", "bastions"]
    } else {
        vec!["masters", "nodes"]
    } {
        let role_name = format!("{role}.{name}");
        let got = iam.get_role().role_name(&role_name).send().await.unwrap();
        let tags: BTreeMap<&str, &str> = got
            .role()
            .unwrap()
            .tags()
            .iter()
            .map(|t| (t.key(), t.value()))
            .collect();
        assert_eq!(
            tags.get(format!("kubernetes.io/cluster/{name}").as_str()),
            Some(&"owned")
        );
        assert_eq!(tags.get("KubernetesCluster"), Some(&name));
        let profile = iam
            .get_instance_profile()
            .instance_profile_name(&role_name)
            .send()
            .await
            .unwrap();
        let roles: Vec<&str> = profile
            .instance_profile()
            .unwrap()
            .roles()
            .iter()
            .map(|r| r.role_name())
            .collect();
        assert_eq!(roles, [role_name.as_str()]);
    }
    let policy = iam
        .get_role_policy()
        .role_name(format!("masters.{name}"))
        .policy_name(format!("masters.{name}"))
        .send()
        .await
        .unwrap();
    let document = PolicyDocument::parse(policy.policy_document()).unwrap();
    assert!(document
        .resources()
        .contains(&format!("arn:aws:s3:::state-bucket/{name}/*")));
    // Bastions get no inline policy at all.
    if private {
        let bastion = iam
            .get_role_policy()
            .role_name(format!("bastions.{name}"))
            .policy_name(format!("bastions.{name}"))
            .send()
            .await;
        assert!(bastion.is_err(), "bastions have no inline policy");
    }
    let keys = cloud
        .ec2()
        .describe_key_pairs()
        .filters(
            Filter::builder()
                .name("tag:KubernetesCluster")
                .values(name)
                .build(),
        )
        .send()
        .await
        .unwrap();
    let key_names: Vec<&str> = keys
        .key_pairs()
        .iter()
        .filter_map(|k| k.key_name())
        .collect();
    assert_eq!(key_names.len(), 1);
    assert!(key_names[0].starts_with(&format!("kubernetes.{name}-")));

    let again = run(cloud, name, &graph, Mode::Apply).await;
    show_calls("no-op update", &again);
    assert!(
        !again.report.has_changes(),
        "second run:\n{}",
        again.report.plan()
    );
    assert_eq!(again.writes, 0, "{:?}", again.calls);
    // One batched Describe per EC2 type; IAM by name, a fixed few per role.
    for (op, count) in &again.calls {
        if op.starts_with("EC2:") && op != "EC2:DescribeVpcAttribute" {
            assert_eq!(*count, 1, "{op} called {count} times: {:?}", again.calls);
        }
    }
    // Every role with its inline and attached policies (the role's
    // `externalPolicies`, authoritative as in kops) and its instance
    // profiles in one GetAccountAuthorizationDetails, however many roles.
    let iam_calls: u64 = again
        .calls
        .iter()
        .filter(|(k, _)| k.starts_with("IAM:"))
        .map(|(_, v)| v)
        .sum();
    assert_eq!(iam_calls, 1, "{:?}", again.calls);

    let dry = run(cloud, name, &graph, Mode::DryRun).await;
    assert_eq!(dry.writes, 0);
    assert!(!dry.report.has_changes(), "{}", dry.report.plan());
    again
}

#[tokio::test]
async fn security_iam_and_ssh_for_a_public_and_a_private_cluster() {
    let Some(cloud) = cloud().await else {
        return;
    };
    lifecycle(&cloud, "public.security.example.com", false).await;
    lifecycle(&cloud, "private.security.example.com", true).await;
}

#[tokio::test]
async fn drift_is_repaired_and_only_drift_is_touched() {
    let Some(cloud) = cloud().await else {
        return;
    };
    let name = "drift.security.example.com";
    lifecycle(&cloud, name, false).await;
    let (cluster, groups) = load(&manifests(name, false));
    let model = Model {
        cluster: &cluster,
        groups: &groups,
        ssh_public_key: Some(SSH_KEY),
        node_inputs: None,
        account_id: None,
        config_base: cluster.spec.config_base.as_deref().unwrap(),
    };
    let graph = graph(&model);

    // Someone revokes the node-to-master UDP rule, rewrites the masters'
    // policy, drops a tag from the nodes' role and empties a profile.
    let sgs = cloud
        .ec2()
        .describe_security_groups()
        .filters(
            Filter::builder()
                .name("tag:KubernetesCluster")
                .values(name)
                .build(),
        )
        .send()
        .await
        .unwrap();
    let id = |group: &str| {
        sgs.security_groups()
            .iter()
            .find(|g| g.group_name() == Some(group))
            .and_then(|g| g.group_id())
            .unwrap()
            .to_string()
    };
    cloud
        .ec2()
        .revoke_security_group_ingress()
        .group_id(id(&format!("masters.{name}")))
        .ip_permissions(
            IpPermission::builder()
                .ip_protocol("udp")
                .from_port(1)
                .to_port(65535)
                .user_id_group_pairs(
                    UserIdGroupPair::builder()
                        .group_id(id(&format!("nodes.{name}")))
                        .build(),
                )
                .build(),
        )
        .send()
        .await
        .unwrap();
    let iam = cloud.iam();
    iam.put_role_policy()
        .role_name(format!("masters.{name}"))
        .policy_name(format!("masters.{name}"))
        .policy_document(r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:*","Resource":"*"}]}"#)
        .send()
        .await
        .unwrap();
    iam.untag_role()
        .role_name(format!("nodes.{name}"))
        .tag_keys("KubernetesCluster")
        .send()
        .await
        .unwrap();
    iam.remove_role_from_instance_profile()
        .instance_profile_name(format!("nodes.{name}"))
        .role_name(format!("nodes.{name}"))
        .send()
        .await
        .unwrap();

    let dry = run(&cloud, name, &graph, Mode::DryRun).await;
    assert_eq!(dry.writes, 0);
    let plan = dry.report.plan();
    let changed: BTreeSet<String> = plan
        .create
        .iter()
        .chain(plan.modify.iter())
        .map(|t| t.key.to_string())
        .collect();
    assert_eq!(
        changed,
        [
            format!("IAMInstanceProfileRole/nodes.{name}"),
            format!("IAMRole/nodes.{name}"),
            format!("IAMRolePolicy/masters.{name}"),
            format!("SecurityGroupRule/from-nodes.{name}-ingress-udp-1to65535-masters.{name}"),
        ]
        .into(),
        "{plan}"
    );

    let repair = run(&cloud, name, &graph, Mode::Apply).await;
    show_calls("repair", &repair);
    // AuthorizeSecurityGroupIngress, PutRolePolicy, TagRole, AddRoleToInstanceProfile.
    assert_eq!(repair.writes, 4, "{:?}", repair.calls);
    assert_eq!(
        permissions_in_cloud(&cloud, name).await,
        permissions_in_model(&model)
    );
    let again = run(&cloud, name, &graph, Mode::Apply).await;
    assert!(!again.report.has_changes(), "{}", again.report.plan());
    assert_eq!(again.writes, 0);
}

#[tokio::test]
async fn access_taken_out_of_the_spec_is_revoked_and_other_ports_are_left_alone() {
    let Some(cloud) = cloud().await else {
        return;
    };
    let name = "access.security.example.com";
    lifecycle(&cloud, name, false).await;

    // Someone opens SSH to the nodes from elsewhere (a watched port) and a
    // web port from the office (not watched).
    let nodes_id = {
        let sgs = cloud
            .ec2()
            .describe_security_groups()
            .filters(
                Filter::builder()
                    .name("group-name")
                    .values(format!("nodes.{name}"))
                    .build(),
            )
            .send()
            .await
            .unwrap();
        sgs.security_groups()[0].group_id().unwrap().to_string()
    };
    for (port, cidr) in [(22, "192.0.2.9/32"), (8080, "10.0.0.0/8")] {
        cloud
            .ec2()
            .authorize_security_group_ingress()
            .group_id(&nodes_id)
            .ip_permissions(
                IpPermission::builder()
                    .ip_protocol("tcp")
                    .from_port(port)
                    .to_port(port)
                    .ip_ranges(aws_sdk_ec2::types::IpRange::builder().cidr_ip(cidr).build())
                    .build(),
            )
            .send()
            .await
            .unwrap();
    }

    // And the spec moves SSH access to another network.
    let yaml = manifests(name, false).replace("203.0.113.0/24", "198.51.100.0/24");
    let (cluster, groups) = load(&yaml);
    let model = Model {
        cluster: &cluster,
        groups: &groups,
        ssh_public_key: Some(SSH_KEY),
        node_inputs: None,
        account_id: None,
        config_base: cluster.spec.config_base.as_deref().unwrap(),
    };
    let graph = graph(&model);

    let dry = run(&cloud, name, &graph, Mode::DryRun).await;
    assert_eq!(dry.writes, 0);
    let plan = dry.report.plan();
    let modified: BTreeMap<String, String> = plan
        .modify
        .iter()
        .map(|t| {
            let changes: Vec<String> = t.changes.iter().map(|c| c.to_string()).collect();
            (t.key.to_string(), changes.join("; "))
        })
        .collect();
    assert_eq!(
        modified,
        [
            (
                format!("SecurityGroupCleanup/masters.{name}"),
                "revoke: [] -> [ingress tcp 22-22 from 203.0.113.0/24]".to_string()
            ),
            (
                format!("SecurityGroupCleanup/nodes.{name}"),
                "revoke: [] -> [ingress tcp 22-22 from 192.0.2.9/32, ingress tcp 22-22 from 203.0.113.0/24]"
                    .to_string()
            ),
        ]
        .into(),
        "{plan}"
    );
    let created: BTreeSet<String> = plan.create.iter().map(|t| t.key.to_string()).collect();
    assert_eq!(
        created,
        [
            format!("SecurityGroupRule/from-198.51.100.0/24-ingress-tcp-22to22-masters.{name}"),
            format!("SecurityGroupRule/from-198.51.100.0/24-ingress-tcp-22to22-nodes.{name}"),
        ]
        .into()
    );

    let apply = run(&cloud, name, &graph, Mode::Apply).await;
    show_calls("access change", &apply);
    assert_eq!(
        apply.writes, 5,
        "two authorizes, three revokes: {:?}",
        apply.calls
    );
    let mut expected = permissions_in_model(&model);
    expected.insert((
        format!("nodes.{name}"),
        "ingress",
        "tcp".into(),
        8080,
        8080,
        "10.0.0.0/8".into(),
    ));
    assert_eq!(permissions_in_cloud(&cloud, name).await, expected);

    let again = run(&cloud, name, &graph, Mode::Apply).await;
    assert!(!again.report.has_changes(), "{}", again.report.plan());
    assert_eq!(again.writes, 0);
}
