//! The AWS cloud controller manager (`aws-cloud-controller.addons.k8s.io`):
//! it initialises nodes (removes their `uninitialized` taint, sets provider
//! ids, addresses and zone labels) and runs the service and route
//! controllers. A DaemonSet on control-plane nodes with their IAM role, its
//! service account and RBAC.
//!
//! Its flags come from `spec.cloudControllerManager` over kops' defaults:
//! the cluster name, node CIDR allocation from the pod range (not for
//! IPv6-only clusters, whose addresses come from AWS prefixes), cloud routes
//! only with kubenet, leader election, `-v=2`. With IAM roles for service
//! accounts the pod runs with the web identity of the role
//! `aws-cloud-controller-manager.kube-system.sa.<cluster>` (see
//! [`service_account_role`]); its ARN names the account, so a render that
//! does not know the account leaves the addon a placeholder.

use serde_json::{json, Map, Value};

use super::service_account_role;
use crate::Model;

/// The manager's service account, which carries the IAM role with IRSA.
const SERVICE_ACCOUNT: &str = "aws-cloud-controller-manager";
/// The image kops deploys.
const IMAGE: &str = "registry.k8s.io/provider-aws/cloud-controller-manager:v1.36.1";

pub(super) fn objects(model: &Model<'_>) -> Option<Vec<Value>> {
    let spec = &model.cluster.spec;
    let user: Map<String, Value> = spec
        .cloud_controller_manager
        .as_ref()
        .and_then(|c| serde_json::to_value(c).ok())
        .and_then(|c| c.as_object().cloned())
        .unwrap_or_default();
    let args = flags(model, &user);
    let image = user
        .get("image")
        .and_then(Value::as_str)
        .unwrap_or(IMAGE)
        .to_string();
    let subject = json!([{
        "apiGroup": "",
        "kind": "ServiceAccount",
        "name": "aws-cloud-controller-manager",
        "namespace": "kube-system",
    }]);
    let rule = |resources: &[&str], verbs: &[&str]| json!({"apiGroups": [""], "resources": resources, "verbs": verbs});
    let watch = ["create", "get", "list", "watch", "update"];
    let mut objects = vec![
        json!({
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {
                "labels": {"k8s-app": "aws-cloud-controller-manager"},
                "name": "aws-cloud-controller-manager",
                "namespace": "kube-system",
            },
            "spec": {
                "selector": {"matchLabels": {"k8s-app": "aws-cloud-controller-manager"}},
                "template": {
                    "metadata": {"labels": {
                        "k8s-app": "aws-cloud-controller-manager",
                        "kops.k8s.io/managed-by": "kops",
                    }},
                    "spec": {
                        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [{"matchExpressions": [
                                {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"},
                            ]}],
                        }}},
                        "containers": [{
                            "args": args,
                            "env": [{"name": "KUBERNETES_SERVICE_HOST", "value": "127.0.0.1"}],
                            "image": image,
                            "imagePullPolicy": "IfNotPresent",
                            "name": "aws-cloud-controller-manager",
                            "resources": {"requests": {"cpu": "200m"}},
                            "volumeMounts": [{
                                "mountPath": "/etc/kubernetes/cloud.config",
                                "name": "cloudconfig",
                                "readOnly": true,
                            }],
                        }],
                        "hostNetwork": true,
                        "nodeSelector": null,
                        "priorityClassName": "system-cluster-critical",
                        "serviceAccountName": "aws-cloud-controller-manager",
                        "tolerations": [{"operator": "Exists"}],
                        "volumes": [{
                            "hostPath": {"path": "/etc/kubernetes/cloud.config", "type": ""},
                            "name": "cloudconfig",
                        }],
                    },
                },
                "updateStrategy": {"type": "RollingUpdate"},
            },
        }),
        json!({
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "aws-cloud-controller-manager", "namespace": "kube-system"},
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {
                "name": "cloud-controller-manager:apiserver-authentication-reader",
                "namespace": "kube-system",
            },
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "extension-apiserver-authentication-reader",
            },
            "subjects": subject,
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "system:cloud-controller-manager"},
            "rules": [
                rule(&["events"], &["create", "patch", "update"]),
                rule(&["nodes"], &["*"]),
                rule(&["nodes/status"], &["patch"]),
                rule(&["services"], &["list", "patch", "update", "watch"]),
                rule(&["services/status"], &["list", "patch", "update", "watch"]),
                rule(&["serviceaccounts"], &["create", "get"]),
                rule(&["persistentvolumes"], &["get", "list", "update", "watch"]),
                rule(&["endpoints"], &watch),
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": watch},
                rule(&["secrets"], &["list", "watch"]),
                {
                    "apiGroups": [""],
                    "resourceNames": ["node-controller", "service-controller", "route-controller"],
                    "resources": ["serviceaccounts/token"],
                    "verbs": ["create"],
                },
            ],
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "system:cloud-controller-manager"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "system:cloud-controller-manager",
            },
            "subjects": subject,
        }),
    ];
    service_account_role::add(model, &mut objects, &[SERVICE_ACCOUNT]).map(|()| objects)
}

/// The manager's flags: the spec's settings over kops' defaults, sorted by
/// name, then the cloud provider (unless the spec names it), service-account
/// credentials and the cloud config.
fn flags(model: &Model<'_>, user: &Map<String, Value>) -> Vec<String> {
    let spec = &model.cluster.spec;
    let ipv6_only = model.ipv6_only();
    let mut settings: std::collections::BTreeMap<String, String> = Default::default();
    settings.insert("allocate-node-cidrs".into(), (!ipv6_only).to_string());
    if !ipv6_only {
        settings.insert("cluster-cidr".into(), pod_cidr(model));
    }
    settings.insert("cluster-name".into(), model.name().to_string());
    let kubenet = spec
        .networking
        .as_ref()
        .and_then(|n| serde_json::to_value(n).ok())
        .is_some_and(|n| n.get("kubenet").is_some());
    settings.insert("configure-cloud-routes".into(), kubenet.to_string());
    flag_list(settings, user, "aws")
}

/// A cloud controller manager's command line: kops' defaults (`--v=2`,
/// leader election) and `settings`, overridden by the spec's
/// `cloudControllerManager` (`user`), sorted by flag name; then the cloud
/// provider (unless the spec names it), service-account credentials and
/// the cloud config.
pub(super) fn flag_list(
    mut settings: std::collections::BTreeMap<String, String>,
    user: &Map<String, Value>,
    cloud: &str,
) -> Vec<String> {
    settings.insert("leader-elect".into(), "true".into());
    settings.insert("v".into(), "2".into());
    for (key, value) in user {
        let flag = match key.as_str() {
            "allocateNodeCIDRs" => "allocate-node-cidrs",
            "clusterCIDR" => "cluster-cidr",
            "clusterName" => "cluster-name",
            "cloudProvider" => "cloud-provider",
            "allowUntaggedCloud" => "allow-untagged-cloud",
            "configureCloudRoutes" => "configure-cloud-routes",
            "cidrAllocatorType" => "cidr-allocator-type",
            "enableLeaderMigration" => "enable-leader-migration",
            "nodeStatusUpdateFrequency" => "node-status-update-frequency",
            "concurrentNodeSyncs" => "concurrent-node-syncs",
            "logLevel" => "v",
            "master" => "master",
            "controllers" => {
                if let Some(list) = value.as_array() {
                    let list: Vec<&str> = list.iter().filter_map(Value::as_str).collect();
                    settings.insert("controllers".into(), list.join(","));
                }
                continue;
            }
            "featureGates" => {
                if let Some(gates) = value.as_object() {
                    let gates: Vec<String> = gates
                        .iter()
                        .map(|(k, v)| format!("{k}={}", scalar(v)))
                        .collect();
                    settings.insert("feature-gates".into(), gates.join(","));
                }
                continue;
            }
            _ => continue,
        };
        settings.insert(flag.into(), scalar(value));
    }
    let mut out: Vec<String> = settings
        .into_iter()
        .map(|(flag, value)| format!("--{flag}={value}"))
        .collect();
    if !user.contains_key("cloudProvider") {
        out.push(format!("--cloud-provider={cloud}"));
    }
    out.extend([
        "--use-service-account-credentials=true".to_string(),
        "--cloud-config=/etc/kubernetes/cloud.config".to_string(),
    ]);
    out
}

/// `spec.podCIDR`, else kops' default: the upper half of
/// `nonMasqueradeCIDR` (`100.96.0.0/11` of the default `100.64.0.0/10`).
fn pod_cidr(model: &Model<'_>) -> String {
    let spec = &model.cluster.spec;
    if let Some(cidr) = &spec.pod_cidr {
        return cidr.clone();
    }
    spec.non_masquerade_cidr
        .as_deref()
        .and_then(|c| c.parse::<ipnet::Ipv4Net>().ok())
        .and_then(|net| net.subnets(net.prefix_len() + 1).ok()?.nth(1))
        .map_or_else(|| "100.96.0.0/11".to_string(), |half| half.to_string())
}

fn scalar(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use crate::addons::tests::compare_golden_in_account;
    use crate::security::tests::model;

    const KEY: &str = "aws-cloud-controller.addons.k8s.io";

    /// Identical in every case, the IRSA ones (whose role ARN names kops'
    /// test account) included.
    #[test]
    fn matches_kops_golden_manifests() {
        let (identical, placeholders) = compare_golden_in_account(KEY, |_, _| {});
        assert_eq!(placeholders, 0);
        if kops_testkit::shared_dir().is_some() {
            assert!(identical >= 47, "{identical}");
        }
    }

    /// With service-account roles the pod gets its role's web identity and
    /// a group owning the projected token; without the account it is not
    /// rendered.
    #[test]
    fn irsa_gives_the_pod_its_role() {
        let (mut cluster, groups) = crate::addons::tests::cluster();
        cluster.spec.iam = serde_json::from_value(
            serde_json::json!({"useServiceAccountExternalPermissions": true}),
        )
        .ok();
        cluster.spec.service_account_issuer_discovery = serde_json::from_value(
            serde_json::json!({"discoveryStore": "s3://bucket/discovery", "enableAWSOIDCProvider": true}),
        )
        .ok();
        let mut model = model(&cluster, &groups);
        assert!(crate::addons::manifest(&model, KEY).unwrap().is_none());
        model.account_id = Some("111122223333");
        let text = crate::addons::manifest(&model, KEY).unwrap().unwrap();
        assert!(
            text.contains(
                "value: arn:aws:iam::111122223333:role/aws-cloud-controller-manager.kube-system.sa.addons.example.com\n"
            ),
            "{text}"
        );
        assert!(text.contains("- name: token-amazonaws-com\n"), "{text}");
        assert!(text.contains("fsGroup: 10001\n"), "{text}");
        assert!(!text.contains("nodeSelector:"), "{text}");
    }

    #[test]
    fn kubenet_routes_and_user_flags() {
        let (mut cluster, groups) = crate::addons::tests::cluster();
        cluster.spec.networking = serde_json::from_value(serde_json::json!({"kubenet": {}})).ok();
        cluster.spec.cloud_controller_manager =
            serde_json::from_value(serde_json::json!({"concurrentNodeSyncs": 3})).ok();
        let model = model(&cluster, &groups);
        let text = crate::addons::manifest(&model, KEY).unwrap().unwrap();
        assert!(text.contains("- --configure-cloud-routes=true\n"), "{text}");
        assert!(text.contains("- --concurrent-node-syncs=3\n"), "{text}");
        assert!(
            text.contains("- --cluster-name=addons.example.com\n"),
            "{text}"
        );
    }
}
