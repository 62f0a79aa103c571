//! IAM roles for service accounts and external policies against moto: the
//! IAM part of a cluster with `useServiceAccountExternalPermissions`, an
//! OIDC provider, a service account with its own inline policy and policy
//! ARNs, and `externalPolicies` is applied, applied again with no change
//! and no write, changed (a policy removed from the spec is detached), and
//! deleted the way `kops delete cluster` does, leaving no role, instance
//! profile or OIDC provider of the cluster.

use crate::common;

use std::time::Duration;

use common::{cloud, load, run};
use kops_aws::AwsContext;
use kops_engine::{Mode, TaskGraph};
use kops_model::Model;

const NAME: &str = "irsa.example.com";

fn manifest(external_policy: &str, detach_node_policy: bool) -> String {
    let node_policies = if detach_node_policy {
        "[]".to_string()
    } else {
        format!("[{external_policy}]")
    };
    format!(
        r#"apiVersion: kops.k8s.io/v1alpha2
kind: Cluster
metadata: {{name: {NAME}}}
spec:
  cloudProvider: aws
  kubernetesVersion: v1.32.0
  awsLoadBalancerController: {{enabled: true}}
  iam:
    useServiceAccountExternalPermissions: true
    serviceAccountExternalPermissions:
    - name: app
      namespace: team-a
      aws:
        policyARNs: [{external_policy}]
        inlinePolicy: '[{{"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": ["*"]}}]'
  externalPolicies:
    master: [{external_policy}]
    node: {node_policies}
  serviceAccountIssuerDiscovery:
    discoveryStore: s3://oidc-store/{NAME}
    enableAWSOIDCProvider: true
  networkCIDR: 172.20.0.0/16
  networking: {{cilium: {{}}}}
  etcdClusters:
  - name: main
    etcdMembers: [{{name: a, instanceGroup: control-plane}}]
  subnets:
  - {{name: us-east-1a, zone: us-east-1a, cidr: 172.20.32.0/19, type: Public}}
---
apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata: {{name: control-plane, labels: {{kops.k8s.io/cluster: {NAME}}}}}
spec: {{role: Master, subnets: [us-east-1a], machineType: t3.medium, minSize: 1, maxSize: 1}}
---
apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata: {{name: nodes, labels: {{kops.k8s.io/cluster: {NAME}}}}}
spec: {{role: Node, subnets: [us-east-1a], machineType: t3.medium, minSize: 1, maxSize: 1}}
"#
    )
}

/// The IAM part of the cluster's task graph.
fn iam_graph(yaml: &str) -> TaskGraph<AwsContext> {
    let (cluster, groups) = load(yaml);
    let model = Model {
        cluster: &cluster,
        groups: &groups,
        ssh_public_key: None,
        node_inputs: None,
        account_id: None,
        config_base: &format!("s3://state-bucket/{NAME}"),
    };
    let mut graph = TaskGraph::new();
    kops_aws::model::iam::build(&model, &mut graph).unwrap();
    graph.validate().unwrap();
    graph
}

#[tokio::test]
async fn service_account_roles_and_external_policies() {
    let Some(cloud) = cloud().await else {
        return;
    };
    let iam = cloud.iam();
    let policy = iam
        .create_policy()
        .policy_name("irsa-test-policy")
        .policy_document(
            r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:ListAllMyBuckets","Resource":"*"}]}"#,
        )
        .send()
        .await
        .unwrap()
        .policy()
        .unwrap()
        .arn()
        .unwrap()
        .to_string();

    let graph = iam_graph(&manifest(&policy, false));
    let dry = run(&cloud, NAME, &graph, Mode::DryRun).await.unwrap();
    assert_eq!(dry.writes, 0, "a dry run wrote: {:?}", dry.calls);

    let first = run(&cloud, NAME, &graph, Mode::Apply).await.unwrap();
    let failed: Vec<String> = first.report.failures().map(|t| format!("{t:?}")).collect();
    assert!(failed.is_empty(), "failures {failed:#?}");

    // The provider, for the discovery store's URL.
    let providers = iam.list_open_id_connect_providers().send().await.unwrap();
    let arns: Vec<&str> = providers
        .open_id_connect_provider_list()
        .iter()
        .filter_map(|p| p.arn())
        .collect();
    let issuer = format!("oidc-store.s3.us-east-1.amazonaws.com/{NAME}");
    let provider_arn = arns
        .iter()
        .find(|a| a.ends_with(&format!("oidc-provider/{issuer}")))
        .unwrap_or_else(|| panic!("no provider for {issuer} in {arns:?}"))
        .to_string();
    let provider = iam
        .get_open_id_connect_provider()
        .open_id_connect_provider_arn(&provider_arn)
        .send()
        .await
        .unwrap();
    assert_eq!(provider.client_id_list(), ["amazonaws.com"]);
    assert_eq!(provider.thumbprint_list().len(), 2);

    // The service-account roles trust the provider for their account only.
    for (role, subject) in [
        (
            format!("aws-load-balancer-controller.kube-system.sa.{NAME}"),
            "system:serviceaccount:kube-system:aws-load-balancer-controller",
        ),
        (
            format!("ebs-csi-controller-sa.kube-system.sa.{NAME}"),
            "system:serviceaccount:kube-system:ebs-csi-controller-sa",
        ),
        (
            format!("app.team-a.sa.{NAME}"),
            "system:serviceaccount:team-a:app",
        ),
    ] {
        let got = iam.get_role().role_name(&role).send().await.unwrap();
        let trust = kops_aws::tasks::policy_document::PolicyDocument::parse(
            got.role().unwrap().assume_role_policy_document().unwrap(),
        )
        .unwrap();
        let text = trust.value().to_string();
        assert!(text.contains(&provider_arn), "{role}: {text}");
        assert!(text.contains(&format!("{issuer}:sub")), "{role}: {text}");
        assert!(text.contains(subject), "{role}: {text}");
        let policies = iam
            .list_role_policies()
            .role_name(&role)
            .send()
            .await
            .unwrap();
        assert_eq!(policies.policy_names(), [role.as_str()], "{role}");
    }
    // Managed policies: the service account's and the instance roles'.
    let attached = |role: String| {
        let iam = iam.clone();
        async move {
            iam.list_attached_role_policies()
                .role_name(role)
                .send()
                .await
                .unwrap()
                .attached_policies()
                .iter()
                .filter_map(|p| p.policy_arn().map(str::to_string))
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        attached(format!("app.team-a.sa.{NAME}")).await,
        [policy.as_str()]
    );
    assert_eq!(attached(format!("masters.{NAME}")).await, [policy.as_str()]);
    assert_eq!(attached(format!("nodes.{NAME}")).await, [policy.as_str()]);

    let again = run(&cloud, NAME, &graph, Mode::Apply).await.unwrap();
    assert!(
        !again.report.has_changes(),
        "second run changed:\n{:#?}",
        again
            .report
            .tasks
            .iter()
            .filter(|t| t.outcome.is_change())
            .collect::<Vec<_>>()
    );
    assert_eq!(again.writes, 0, "second run wrote: {:?}", again.calls);
    eprintln!(
        "{} tasks; first apply {} calls ({} writes); no-op run {} calls",
        graph.len(),
        first.total,
        first.writes,
        again.total
    );

    // The node policy leaves the spec: it is detached.
    let changed = iam_graph(&manifest(&policy, true));
    let third = run(&cloud, NAME, &changed, Mode::Apply).await.unwrap();
    assert!(third.report.has_changes());
    assert!(attached(format!("nodes.{NAME}")).await.is_empty());
    assert_eq!(attached(format!("masters.{NAME}")).await, [policy.as_str()]);

    // `kops delete cluster` finds and removes all of it.
    let resources = kops_aws::delete::list_cluster_resources(&cloud, NAME)
        .await
        .unwrap();
    let kinds: Vec<(&str, &str)> = resources.iter().map(|r| (r.kind, r.id.as_str())).collect();
    assert!(
        kinds.contains(&("iam-oidc-provider", provider_arn.as_str())),
        "{kinds:?}"
    );
    assert!(
        kinds.contains(&("iam-role", format!("app.team-a.sa.{NAME}").as_str())),
        "{kinds:?}"
    );
    kops_aws::delete::delete_resources(
        &cloud,
        resources,
        30,
        Duration::from_millis(200),
        &|_, _| {},
    )
    .await
    .unwrap();
    let left = kops_aws::delete::list_cluster_resources(&cloud, NAME)
        .await
        .unwrap();
    assert!(left.is_empty(), "left after delete: {left:#?}");
    let providers = iam.list_open_id_connect_providers().send().await.unwrap();
    assert!(providers
        .open_id_connect_provider_list()
        .iter()
        .all(|p| p.arn() != Some(provider_arn.as_str())));
    // The user's policy itself is not the cluster's.
    iam.get_policy().policy_arn(&policy).send().await.unwrap();
}
