//! dns-controller (`dns-controller.addons.k8s.io`): keeps the cluster's
//! Route 53 (Google Cloud: Cloud DNS) records (`api.internal.<cluster>`, and `api.<cluster>` when no
//! load balancer fronts the API) pointing at the control-plane nodes. kops-rs
//! runs kops' published dns-controller image (it has none of its own) at the
//! kops release whose output it follows; it runs on control-plane nodes with
//! their IAM role.
//!
//! The zone: `spec.dnsZone` as an id (`--zone=*/<id>`) once `update cluster`
//! has resolved it, or by name (`--zone=<name>`) in an offline render, which
//! dns-controller resolves itself. `externalDns.watchIngress`,
//! `watchNamespace` and `priorityClassName` are honoured. With IAM roles for
//! service accounts the pod runs with the web identity of the role
//! `dns-controller.kube-system.sa.<cluster>` (see [`service_account_role`]);
//! its ARN names the account, so a render that does not know the account
//! leaves the addon a placeholder.

use serde_json::{json, Value};

use super::service_account_role;
use crate::Model;

use kops_api::KOPS_VERSION;

/// The controller's service account, which carries the IAM role with IRSA.
const SERVICE_ACCOUNT: &str = "dns-controller";

pub(super) fn objects(model: &Model<'_>) -> Option<Vec<Value>> {
    let spec = &model.cluster.spec;
    let external = spec.external_dns.as_ref();
    let external = external.map(|e| serde_json::to_value(e).unwrap_or(Value::Null));
    let setting = |key: &str| external.as_ref().and_then(|e| e.get(key)).cloned();

    let mut args = Vec::new();
    match &external {
        None => args.push("--watch-ingress=false".to_string()),
        Some(_) => {
            let watch = setting("watchIngress")
                .and_then(|v| v.as_bool())
                .unwrap_or(false);
            args.push(format!("--watch-ingress={watch}"));
            if let Some(ns) = setting("watchNamespace")
                .and_then(|v| v.as_str().map(str::to_string))
                .filter(|n| !n.is_empty())
            {
                args.push(format!("--watch-namespace={ns}"));
            }
        }
    }
    // The DNS provider of the cluster's cloud.
    args.push(
        if model.cluster.spec.cloud_provider.as_deref() == Some("gce") {
            "--dns=google-clouddns".into()
        } else {
            "--dns=aws-route53".into()
        },
    );
    let zone = crate::dns::zone(model);
    if !zone.is_empty() {
        args.push(if zone.contains('.') {
            format!("--zone={zone}")
        } else {
            format!("--zone=*/{zone}")
        });
    }
    args.push(if model.ipv6_only() {
        "--internal-ipv6".into()
    } else {
        "--internal-ipv4".into()
    });
    args.push("--zone=*/*".into());
    args.push("-v=2".into());
    let priority_class = setting("priorityClassName")
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| "system-cluster-critical".into());
    let version_label = format!("v{KOPS_VERSION}");
    let control_plane_terms = json!([
        {"matchExpressions": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}]},
        {"matchExpressions": [{"key": "node-role.kubernetes.io/master", "operator": "Exists"}]},
    ]);

    let mut objects = vec![
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "labels": {"k8s-app": "dns-controller", "version": version_label},
                "name": "dns-controller",
                "namespace": "kube-system",
            },
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"k8s-app": "dns-controller"}},
                "strategy": {"type": "Recreate"},
                "template": {
                    "metadata": {"labels": {
                        "k8s-addon": "dns-controller.addons.k8s.io",
                        "k8s-app": "dns-controller",
                        "kops.k8s.io/managed-by": "kops",
                        "version": version_label,
                    }},
                    "spec": {
                        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": control_plane_terms,
                        }}},
                        "containers": [{
                            "args": args,
                            "command": null,
                            "env": [{"name": "KUBERNETES_SERVICE_HOST", "value": "127.0.0.1"}],
                            "image": format!("registry.k8s.io/kops/dns-controller:{KOPS_VERSION}"),
                            "name": "dns-controller",
                            "resources": {"requests": {"cpu": "50m", "memory": "50Mi"}},
                            "securityContext": {"runAsNonRoot": true},
                        }],
                        "dnsPolicy": "Default",
                        "hostNetwork": true,
                        "nodeSelector": null,
                        "priorityClassName": priority_class,
                        "serviceAccount": "dns-controller",
                        "tolerations": [
                            {"key": "node.cloudprovider.kubernetes.io/uninitialized", "operator": "Exists"},
                            {"key": "node.kubernetes.io/not-ready", "operator": "Exists"},
                            {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"},
                            {"key": "node-role.kubernetes.io/master", "operator": "Exists"},
                        ],
                    },
                },
            },
        }),
        json!({
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "dns-controller", "namespace": "kube-system"},
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "kops:dns-controller"},
            "rules": [
                {"apiGroups": [""], "resources": ["endpoints", "services", "pods", "ingress", "nodes"], "verbs": ["get", "list", "watch"]},
                {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses"], "verbs": ["get", "list", "watch"]},
            ],
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "kops:dns-controller"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "kops:dns-controller"},
            "subjects": [{
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "User",
                "name": "system:serviceaccount:kube-system:dns-controller",
            }],
        }),
    ];
    service_account_role::add(model, &mut objects, &[SERVICE_ACCOUNT]).map(|()| objects)
}

#[cfg(test)]
mod tests {
    use crate::addons::tests::compare_golden_in_account;
    use crate::security::tests::model;

    const KEY: &str = "dns-controller.addons.k8s.io";

    /// kops' golden manifests for the 44 AWS cases that use dns-controller,
    /// the IRSA ones (whose role ARN names kops' test account) included. The
    /// zone is the one line that differs: kops' tests resolve it to a fake
    /// id, an offline render names it, so the comparison puts the id in.
    #[test]
    fn matches_kops_golden_manifests() {
        let (identical, placeholders) = compare_golden_in_account(KEY, |cluster, theirs| {
            // The id kops' test cloud resolves the zone to.
            let id = theirs
                .lines()
                .find_map(|l| l.trim().strip_prefix("- --zone=*/").filter(|z| *z != "*"));
            if let Some(id) = id {
                cluster.spec.dns_zone = Some(id.to_string());
            }
        });
        assert_eq!(placeholders, 0);
        if kops_testkit::shared_dir().is_some() {
            assert_eq!(identical, 44);
        }
    }

    /// With service-account roles the controller gets its role's web
    /// identity; without the account it is not rendered.
    #[test]
    fn irsa_gives_the_controller_its_role() {
        let (mut cluster, groups) = crate::addons::tests::cluster();
        cluster.spec.iam = serde_json::from_value(
            serde_json::json!({"useServiceAccountExternalPermissions": true}),
        )
        .ok();
        let mut model = model(&cluster, &groups);
        assert!(crate::addons::manifest(&model, KEY).unwrap().is_none());
        model.account_id = Some("111122223333");
        let text = crate::addons::manifest(&model, KEY).unwrap().unwrap();
        assert!(
            text.contains(
                "value: arn:aws:iam::111122223333:role/dns-controller.kube-system.sa.addons.example.com\n"
            ),
            "{text}"
        );
        assert!(text.contains("fsGroup: 10001\n"), "{text}");
        assert!(!text.contains("command: null"), "{text}");
    }

    #[test]
    fn offline_render_names_the_zone() {
        let (cluster, groups) = crate::addons::tests::cluster();
        let model = model(&cluster, &groups);
        let text = crate::addons::manifest(&model, KEY).unwrap().unwrap();
        assert!(text.contains("- --zone=example.com\n"), "{text}");
        assert!(text.contains("- --internal-ipv4\n"), "{text}");
    }
}
