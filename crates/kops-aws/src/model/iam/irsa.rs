//! IAM roles for service accounts (IRSA): the cluster's OIDC provider, one
//! role per service account that needs AWS permissions, and the managed
//! policies the spec attaches to roles.
//!
//! - the OIDC provider (named after the cluster) when
//!   `spec.serviceAccountIssuerDiscovery.enableAWSOIDCProvider`; when roles
//!   exist without it, the account's provider for the issuer is only looked
//!   up (the user manages it);
//! - with `spec.iam.useServiceAccountExternalPermissions`, the addons'
//!   service accounts get roles `<sa>.<namespace>.sa.<cluster>` with the
//!   permissions that otherwise sit in the control plane's policy (which
//!   then leaves them out): dns-controller or external-dns, the cloud
//!   controller, the EBS CSI driver, the node-termination-handler, the load
//!   balancer controller, cluster-autoscaler, kube-router and Karpenter, as
//!   far as the cluster runs them; cert-manager's role exists whenever it
//!   manages DNS-01 zones (`certManager.hostedZoneIDs`);
//! - `spec.iam.serviceAccountExternalPermissions`: a role per listed
//!   service account, with its inline policy and attached policy ARNs
//!   (`external-<role>`);
//! - `spec.externalPolicies.<role>`: managed policies attached to the
//!   instance roles (`<master|node|bastion|apiserver>-policyoverride`).

use crate::tasks::iam_oidc_provider::IamOidcProvider;
use crate::tasks::iam_role_policy::IamRolePolicy;
use crate::tasks::iam_role_policy_attachment::IamRolePolicyAttachment;
use crate::tasks::iam_service_account_role::IamServiceAccountRole;
use crate::tasks::policy_document::PolicyDocument;
use crate::AwsContext;
use kops_api::Role;
use kops_engine::TaskGraph;
use serde_json::{json, Value};

use super::{iam_name, Facts, PolicyBuilder, PolicyEnvironment};
pub use kops_model::iam::irsa::*;
use kops_model::{Model, ModelError};

/// Which permissions a service account's role carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Permissions {
    DnsController,
    ExternalDns,
    ClusterAutoscaler,
    CertManager,
    NodeTerminationHandler,
    LoadBalancerController,
    KubeRouter,
    CloudControllerManager,
    EbsCsiDriver,
    Karpenter,
}

fn enabled(flag: Option<bool>) -> bool {
    flag == Some(true)
}

/// The addons' service accounts that get roles, in kops' order.
fn addon_service_accounts(model: &Model<'_>) -> Vec<(ServiceAccount, Permissions)> {
    let spec = &model.cluster.spec;
    let irsa = uses_service_account_permissions(model);
    let mut out = Vec::new();
    let mut add = |name: &str, p: Permissions| out.push((ServiceAccount::kube_system(name), p));
    let provider = spec
        .external_dns
        .as_ref()
        .and_then(|e| e.provider.as_deref());
    if !model.uses_none_dns() && matches!(provider, None | Some("dns-controller")) {
        if irsa && model.publishes_dns_records() {
            add("dns-controller", Permissions::DnsController);
        }
    } else if !model.uses_none_dns() && provider == Some("external-dns") && irsa {
        add("external-dns", Permissions::ExternalDns);
    }
    if irsa && enabled(spec.cluster_autoscaler.as_ref().and_then(|c| c.enabled)) {
        add("cluster-autoscaler", Permissions::ClusterAutoscaler);
    }
    if let Some(cm) = &spec.cert_manager {
        let managed = cm.extra.get("managed").and_then(Value::as_bool) != Some(false);
        let zones = cm
            .extra
            .get("hostedZoneIDs")
            .and_then(Value::as_array)
            .is_some_and(|z| !z.is_empty());
        if enabled(cm.enabled) && managed && zones {
            add("cert-manager", Permissions::CertManager);
        }
    }
    let karpenter = enabled(spec.karpenter.as_ref().and_then(|k| k.enabled));
    let nth = spec
        .node_termination_handler
        .as_ref()
        .and_then(|n| n.enabled)
        .unwrap_or(!karpenter);
    if irsa && nth {
        add(
            "aws-node-termination-handler",
            Permissions::NodeTerminationHandler,
        );
    }
    if irsa
        && enabled(
            spec.aws_load_balancer_controller
                .as_ref()
                .and_then(|c| c.enabled),
        )
    {
        add(
            "aws-load-balancer-controller",
            Permissions::LoadBalancerController,
        );
    }
    if irsa
        && spec
            .networking
            .as_ref()
            .is_some_and(|n| n.kuberouter.is_some())
    {
        add("kube-router", Permissions::KubeRouter);
    }
    if irsa {
        add(
            "aws-cloud-controller-manager",
            Permissions::CloudControllerManager,
        );
        add("ebs-csi-controller-sa", Permissions::EbsCsiDriver);
    }
    if irsa && karpenter {
        add("karpenter", Permissions::Karpenter);
    }
    out
}

/// The inline policy of an addon's service-account role.
fn addon_policy(
    model: &Model<'_>,
    permissions: Permissions,
    env: &PolicyEnvironment,
) -> Option<Value> {
    let facts = Facts::of(model);
    let spec = &model.cluster.spec;
    let mut p = PolicyBuilder::new(model.name(), env);
    match permissions {
        Permissions::DnsController | Permissions::ExternalDns => {
            if let Some(zone) = &env.hosted_zone_id {
                p.dns_controller(zone);
            }
        }
        Permissions::ClusterAutoscaler => {
            p.cluster_autoscaler(facts.autoscaler_static_instance_list)
        }
        Permissions::CertManager => {
            let zones: Vec<String> = spec
                .cert_manager
                .as_ref()
                .and_then(|c| c.extra.get("hostedZoneIDs"))
                .and_then(Value::as_array)
                .map(|z| {
                    z.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            p.cert_manager(&zones);
        }
        Permissions::NodeTerminationHandler => p.termination_handler_queue(),
        Permissions::LoadBalancerController => {
            let flag = |k: &str| {
                spec.aws_load_balancer_controller
                    .as_ref()
                    .and_then(|c| c.extra.get(k))
                    .and_then(Value::as_bool)
                    == Some(true)
            };
            p.load_balancer_controller();
            p.load_balancer_controller_extras(
                flag("enableWAF"),
                flag("enableWAFv2"),
                flag("enableShield"),
            );
        }
        Permissions::KubeRouter => p.cluster_tagged(&["ec2:ModifyInstanceAttribute"]),
        Permissions::CloudControllerManager => {
            p.cloud_controller_manager(facts.kubenet, facts.nlb_security_groups_managed)
        }
        Permissions::EbsCsiDriver => p.ebs_csi_driver(facts.snapshot_controller),
        Permissions::Karpenter => {
            let karpenter_groups = model
                .groups
                .iter()
                .filter(|g| g.spec.manager.as_deref() == Some("Karpenter"));
            let mut custom_profiles = false;
            let mut customer_keys = false;
            for g in karpenter_groups {
                if g.spec
                    .extra
                    .get("iam")
                    .and_then(|i| i.get("profile"))
                    .and_then(Value::as_str)
                    .is_some_and(|p| !p.is_empty())
                {
                    custom_profiles = true;
                }
                let root = g.spec.root_volume.as_ref();
                let encrypted = root
                    .and_then(|r| r.encryption)
                    .or(g.spec.root_volume_encryption)
                    == Some(true);
                let key = root
                    .and_then(|r| r.encryption_key.as_deref())
                    .or(g.spec.root_volume_encryption_key.as_deref())
                    .is_some_and(|k| !k.is_empty());
                if encrypted && key {
                    customer_keys = true;
                }
            }
            let node_role = iam_name(model, Role::Node);
            p.karpenter(&node_role, custom_profiles, customer_keys);
        }
    }
    p.finish()
}

/// `[statements]` (JSON) as a policy document; `None` for an empty list.
fn statements_document(path: &str, text: &str) -> Result<Option<PolicyDocument>, ModelError> {
    let statements: Value = serde_json::from_str(text).map_err(|e| ModelError::Spec {
        path: path.to_string(),
        message: format!("not a JSON list of IAM statements: {e}"),
        hint: r#"write a JSON list such as `[{"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": ["*"]}]`"#
            .into(),
    })?;
    match statements {
        Value::Array(items) if items.is_empty() => Ok(None),
        Value::Array(items) => Ok(Some(PolicyDocument::new(json!({
            "Statement": items,
            "Version": "2012-10-17",
        })))),
        _ => Err(ModelError::Spec {
            path: path.to_string(),
            message: "not a JSON list of IAM statements".into(),
            hint: "write a JSON list of statement objects".into(),
        }),
    }
}

/// kops' name of an instance role's managed-policy set (`master-policyoverride`...).
fn policy_override_name(role: Role) -> &'static str {
    match role {
        Role::ControlPlane => "master-policyoverride",
        Role::ApiServer => "apiserver-policyoverride",
        Role::Node => "node-policyoverride",
        Role::Bastion => "bastion-policyoverride",
    }
}

/// `spec.externalPolicies` for a role (`control-plane` also read as `master`).
fn external_policies(model: &Model<'_>, role: Role) -> Vec<String> {
    let Some(policies) = &model.cluster.spec.external_policies else {
        return Vec::new();
    };
    let keys: &[&str] = match role {
        Role::ControlPlane => &["control-plane", "master"],
        Role::ApiServer => &["apiserver"],
        Role::Node => &["node"],
        Role::Bastion => &["bastion"],
    };
    keys.iter()
        .find_map(|k| policies.get(*k))
        .cloned()
        .unwrap_or_default()
}

/// The managed-policy set of an instance role (always present: an empty
/// set detaches what an earlier spec attached).
pub fn instance_role_attachments(model: &Model<'_>, role: Role) -> IamRolePolicyAttachment {
    IamRolePolicyAttachment::new(
        policy_override_name(role),
        crate::tasks::iam_role::IamRole::output_ref(&iam_name(model, role)),
        &external_policies(model, role),
    )
}

/// Adds the OIDC provider, the service-account roles and their policies.
pub fn build(
    model: &Model<'_>,
    graph: &mut TaskGraph<AwsContext>,
    env: &PolicyEnvironment,
) -> Result<(), ModelError> {
    let issuer = service_account_issuer(model, &env.region);
    let mut roles: Vec<(ServiceAccount, Option<PolicyDocument>, Vec<String>)> = Vec::new();
    for (sa, permissions) in addon_service_accounts(model) {
        let policy = addon_policy(model, permissions, env).map(PolicyDocument::new);
        roles.push((sa, policy, Vec::new()));
    }
    let external = model
        .cluster
        .spec
        .iam
        .as_ref()
        .and_then(|i| i.service_account_external_permissions.clone())
        .unwrap_or_default();
    for (index, permission) in external.iter().enumerate() {
        let path = format!("spec.iam.serviceAccountExternalPermissions[{index}]");
        if permission.name.is_empty() || permission.name.contains('*') {
            return Err(ModelError::Spec {
                path: format!("{path}.name"),
                message: format!("`{}` is not a service account name", permission.name),
                hint: "name one service account (no wildcards; the namespace may have `*`)".into(),
            });
        }
        let aws = permission.aws.as_ref();
        let inline = aws
            .and_then(|a| a.inline_policy.as_deref())
            .filter(|p| !p.trim().is_empty());
        let policy = match inline {
            Some(text) => statements_document(&format!("{path}.aws.inlinePolicy"), text)?,
            None => None,
        };
        let arns = aws.and_then(|a| a.policy_arns.clone()).unwrap_or_default();
        let sa = ServiceAccount {
            namespace: permission.namespace.clone(),
            name: permission.name.clone(),
        };
        roles.push((sa, policy, arns));
    }

    let managed = manages_oidc_provider(model);
    if !managed && roles.is_empty() {
        return Ok(());
    }
    let provider_name = model.name().to_string();
    let mut client_ids = vec![AWS_AUDIENCE.to_string()];
    client_ids.extend(
        discovery(model)
            .and_then(|d| d.additional_audiences.clone())
            .unwrap_or_default(),
    );
    graph.add(IamOidcProvider {
        name: provider_name.clone(),
        url: issuer.clone(),
        client_ids,
        thumbprints: OIDC_THUMBPRINTS.iter().map(|t| t.to_string()).collect(),
        tags: model.tags(&provider_name, &[]),
        managed,
    })?;

    let boundary = model
        .cluster
        .spec
        .iam
        .as_ref()
        .and_then(|i| i.permissions_boundary.clone());
    for (sa, policy, arns) in roles {
        let name = role_name(model, &sa);
        let tags = model.tags(
            &name,
            &[
                ("service-account.kops.k8s.io/name", sa.name.as_str()),
                (
                    "service-account.kops.k8s.io/namespace",
                    sa.namespace.as_str(),
                ),
            ],
        );
        graph.add(IamServiceAccountRole {
            name: name.clone(),
            namespace: sa.namespace.clone(),
            service_account: sa.name.clone(),
            issuer: issuer.clone(),
            provider: IamOidcProvider::output_ref(&provider_name),
            permissions_boundary: boundary.clone(),
            tags,
        })?;
        graph.add(IamRolePolicy {
            name: name.clone(),
            role: IamServiceAccountRole::output_ref(&name),
            document: policy,
        })?;
        if !arns.is_empty() {
            graph.add(IamRolePolicyAttachment::new(
                format!("external-{name}"),
                IamServiceAccountRole::output_ref(&name),
                &arns,
            ))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::security::tests::{conformance_case, load, model, PUBLIC};

    /// kops' Terraform resource name of a task name.
    fn sanitize(name: &str) -> String {
        let prefix = if name.starts_with(|c: char| c.is_ascii_digit()) {
            "prefix_"
        } else {
            ""
        };
        format!("{prefix}{}", name.replace('.', "-"))
    }

    #[test]
    fn names_and_urls_follow_kops() {
        let (cluster, groups) = load(PUBLIC);
        let m = model(&cluster, &groups);
        let sa = ServiceAccount::kube_system("dns-controller");
        assert_eq!(
            role_name(&m, &sa),
            "dns-controller.kube-system.sa.pub.example.com"
        );
        assert_eq!(sa.export_id(), "kube-system-dns-controller");
        let wild = ServiceAccount {
            namespace: "team-*".into(),
            name: "app".into(),
        };
        assert_eq!(role_name(&m, &wild), "app.team-wildcard.sa.pub.example.com");
        assert_eq!(
            discovery_store_url("s3://oidc-bucket/a.example.com", "eu-west-1", false).as_deref(),
            Some("https://oidc-bucket.s3.eu-west-1.amazonaws.com/a.example.com")
        );
        assert_eq!(
            discovery_store_url("s3://my.bucket/x/", "cn-north-1", false).as_deref(),
            Some("https://s3.cn-north-1.amazonaws.com.cn/my.bucket/x")
        );
        assert_eq!(
            discovery_store_url("memfs://discovery.example.com/a", "us-test-1", false).as_deref(),
            Some("https://discovery.example.com/a")
        );
        assert_eq!(
            service_account_issuer(&m, "us-east-1"),
            "https://api.internal.pub.example.com"
        );
    }

    #[test]
    fn discovery_document_is_kops_bytes() {
        let Some(dir) = conformance_case("aws-lb-controller") else {
            return;
        };
        let golden =
            std::fs::read_to_string(dir.join("data/aws_s3_object_discovery.json_content")).unwrap();
        // kops' Terraform writer ends every data file with a newline.
        assert_eq!(
            discovery_document("https://discovery.example.com/minimal.example.com"),
            golden.trim_end()
        );
    }

    /// For every kops case with service-account roles: the same roles, and
    /// each role's trust and inline policy equal kops' golden documents.
    #[test]
    fn service_account_roles_match_kops_golden_files() {
        let cases = [
            "aws-lb-controller",
            "external_dns_irsa",
            "digit",
            "karpenter",
            "public-jwks-apiserver",
            "vfs-said",
        ];
        for case in cases {
            let Some(dir) = conformance_case(case) else {
                return;
            };
            let yaml = std::fs::read_to_string(dir.join("in-v1alpha2.yaml")).unwrap();
            let tf = std::fs::read_to_string(dir.join("kubernetes.tf")).unwrap();
            let (cluster, groups) = load(&yaml);
            let m = model(&cluster, &groups);
            let env = PolicyEnvironment {
                partition: "aws-test".into(),
                region: "us-test-1".into(),
                hosted_zone_id: Some("Z1AFAKE1ZON3YO".into()),
            };
            let mut graph = TaskGraph::new();
            build(&m, &mut graph, &env).unwrap();
            let provider_arn = format!(
                "arn:aws-test:iam::123456789012:oidc-provider/{}",
                IamOidcProvider::issuer_host_path(&service_account_issuer(&m, "us-test-1"))
            );
            let mut ours = Vec::new();
            for (_, task) in graph.iter() {
                let any = task.as_any();
                if let Some(role) = any.downcast_ref::<IamServiceAccountRole>() {
                    ours.push(format!("aws_iam_role\" \"{}\"", sanitize(&role.name)));
                    let trust = std::fs::read_to_string(
                        dir.join(format!("data/aws_iam_role_{}_policy", role.name)),
                    )
                    .unwrap();
                    assert_eq!(
                        role.trust_policy(&provider_arn),
                        PolicyDocument::parse(&trust).unwrap(),
                        "{case}: trust of {}",
                        role.name
                    );
                } else if let Some(policy) = any.downcast_ref::<IamRolePolicy>() {
                    let golden = std::fs::read_to_string(
                        dir.join(format!("data/aws_iam_role_policy_{}_policy", policy.name)),
                    )
                    .ok()
                    .map(|t| PolicyDocument::parse(&t).unwrap());
                    assert_eq!(policy.document, golden, "{case}: policy {}", policy.name);
                } else if let Some(p) = any.downcast_ref::<IamOidcProvider>() {
                    assert!(p.managed);
                    ours.push(format!(
                        "aws_iam_openid_connect_provider\" \"{}\"",
                        sanitize(&p.name)
                    ));
                    assert!(
                        tf.contains(&format!("url             = \"{}\"", p.url)),
                        "{case}"
                    );
                }
            }
            let golden_roles = tf
                .lines()
                .filter(|l| {
                    (l.starts_with("resource \"aws_iam_role\"") && l.contains("-sa-"))
                        || l.starts_with("resource \"aws_iam_openid_connect_provider\"")
                })
                .count();
            assert_eq!(ours.len(), golden_roles, "{case}: {ours:?}");
            for r in &ours {
                assert!(tf.contains(r.as_str()), "{case}: {r} not in kops' output");
            }
        }
    }
}
