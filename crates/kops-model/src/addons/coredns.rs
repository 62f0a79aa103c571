//! CoreDNS, the cluster's DNS (`coredns.addons.k8s.io`): its service account
//! and RBAC, the Corefile, the deployment behind the `kube-dns` service at
//! the DNS address kubelets are given, a disruption budget, and the
//! proportional autoscaler that sizes it by nodes and cores.
//!
//! From `spec.kubeDNS`: `provider: KubeDNS` renders kube-dns instead (its module);
//! `externalCoreFile` replaces the Corefile; `upstreamNameservers` and
//! `stubDomains` change where it forwards; `cpuRequest`, `memoryRequest`,
//! `memoryLimit` its resources; `serverIP` its address (default: the 10th
//! address of `serviceClusterIPRange`); `tolerations`, `podAnnotations`,
//! `coreDNSImage`, `cpaImage`. `clusterDNSDomain` (default `cluster.local`)
//! is the zone it serves. A cluster that publishes no DNS records (gossip,
//! `dns: None`) also answers its own names from the nodes' `/etc/hosts`; an
//! IPv6-only cluster synthesises AAAA records (dns64); with Karpenter the
//! pods may run on control-plane nodes.

use std::net::IpAddr;

use serde_json::{json, Value};

use crate::Model;

/// The CoreDNS image kops deploys.
const IMAGE: &str = "registry.k8s.io/coredns/coredns:v1.14.2";
/// The cluster-proportional-autoscaler image kops deploys.
const AUTOSCALER_IMAGE: &str = "registry.k8s.io/cpa/cluster-proportional-autoscaler:v1.9.0";

pub(super) fn objects(model: &Model<'_>) -> Option<Vec<Value>> {
    let spec = &model.cluster.spec;
    let kube_dns = spec.extra.get("kubeDNS").cloned().unwrap_or(Value::Null);
    let setting = |key: &str| kube_dns.get(key).and_then(Value::as_str);
    if setting("provider").is_some_and(|p| p != "CoreDNS") {
        return None;
    }
    let domain = spec
        .cluster_dns_domain
        .as_deref()
        .unwrap_or("cluster.local");
    let server_ip = server_ip(model, &kube_dns)?;
    let publishes = model.publishes_dns_records();
    let corefile = match setting("externalCoreFile") {
        Some(file) => file.to_string(),
        None => corefile(
            domain,
            &upstream_defaulted(&kube_dns, model.ipv6_only()),
            (!publishes).then(|| model.name()),
            model.ipv6_only(),
        ),
    };
    let control_plane_mode = spec
        .karpenter
        .as_ref()
        .and_then(|k| k.enabled)
        .unwrap_or(false);
    let mut tolerations = match kube_dns.get("tolerations") {
        Some(Value::Array(t)) if !t.is_empty() => t.clone(),
        _ => vec![json!({"key": "CriticalAddonsOnly", "operator": "Exists"})],
    };
    let autoscaler_tolerations = tolerations.clone();
    if control_plane_mode {
        for key in [
            "node-role.kubernetes.io/master",
            "node-role.kubernetes.io/control-plane",
        ] {
            tolerations.push(json!({"key": key, "operator": "Exists"}));
        }
    }
    let image = setting("coreDNSImage").unwrap_or(IMAGE);
    let autoscaler_image = setting("cpaImage").unwrap_or(AUTOSCALER_IMAGE);
    let mut pod_metadata =
        json!({"labels": {"k8s-app": "kube-dns", "kops.k8s.io/managed-by": "kops"}});
    if let Some(annotations) = kube_dns.get("podAnnotations").filter(|a| a.is_object()) {
        pod_metadata["annotations"] = annotations.clone();
    }
    let mut mounts =
        vec![json!({"mountPath": "/etc/coredns", "name": "config-volume", "readOnly": true})];
    let mut volumes = vec![json!({"configMap": {"name": "coredns"}, "name": "config-volume"})];
    if !publishes {
        mounts
            .push(json!({"mountPath": "/rootfs/etc/hosts", "name": "etc-hosts", "readOnly": true}));
        volumes
            .push(json!({"hostPath": {"path": "/etc/hosts", "type": "File"}, "name": "etc-hosts"}));
    }
    let labels = |extra: &[(&str, &str)]| -> Value {
        extra
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    let mut requests = serde_json::Map::new();
    requests.insert("cpu".into(), json!(setting("cpuRequest").unwrap_or("100m")));
    requests.insert(
        "memory".into(),
        json!(setting("memoryRequest").unwrap_or("70Mi")),
    );
    let memory_limit = setting("memoryLimit").unwrap_or("170Mi");

    let mut objects = vec![
        json!({
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {
                "labels": labels(&[("kubernetes.io/cluster-service", "true")]),
                "name": "coredns",
                "namespace": "kube-system",
            },
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {
                "labels": labels(&[("kubernetes.io/bootstrapping", "rbac-defaults")]),
                "name": "system:coredns",
            },
            "rules": [
                {"apiGroups": [""], "resources": ["endpoints", "services", "pods", "namespaces"], "verbs": ["list", "watch"]},
                {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]},
            ],
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {
                "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
                "labels": labels(&[("kubernetes.io/bootstrapping", "rbac-defaults")]),
                "name": "system:coredns",
            },
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:coredns"},
            "subjects": [{"kind": "ServiceAccount", "name": "coredns", "namespace": "kube-system"}],
        }),
        json!({
            "apiVersion": "v1",
            "data": {"Corefile": corefile},
            "kind": "ConfigMap",
            "metadata": {
                "labels": labels(&[("addonmanager.kubernetes.io/mode", "EnsureExists")]),
                "name": "coredns",
                "namespace": "kube-system",
            },
        }),
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "labels": labels(&[
                    ("k8s-app", "kube-dns"),
                    ("kubernetes.io/cluster-service", "true"),
                    ("kubernetes.io/name", "CoreDNS"),
                ]),
                "name": "coredns",
                "namespace": "kube-system",
            },
            "spec": {
                "selector": {"matchLabels": {"k8s-app": "kube-dns"}},
                "strategy": {"rollingUpdate": {"maxSurge": "10%", "maxUnavailable": 1}, "type": "RollingUpdate"},
                "template": {
                    "metadata": pod_metadata,
                    "spec": {
                        "containers": [{
                            "args": ["-conf", "/etc/coredns/Corefile"],
                            "image": image,
                            "imagePullPolicy": "IfNotPresent",
                            "livenessProbe": {
                                "failureThreshold": 5,
                                "httpGet": {"path": "/health", "port": 8080, "scheme": "HTTP"},
                                "initialDelaySeconds": 60,
                                "successThreshold": 1,
                                "timeoutSeconds": 5,
                            },
                            "name": "coredns",
                            "ports": [
                                {"containerPort": 53, "name": "dns", "protocol": "UDP"},
                                {"containerPort": 53, "name": "dns-tcp", "protocol": "TCP"},
                                {"containerPort": 9153, "name": "metrics", "protocol": "TCP"},
                            ],
                            "readinessProbe": {
                                "failureThreshold": 1,
                                "httpGet": {"path": "/ready", "port": 8181, "scheme": "HTTP"},
                                "periodSeconds": 5,
                                "timeoutSeconds": 5,
                            },
                            "resources": {"limits": {"memory": memory_limit}, "requests": requests},
                            "securityContext": {
                                "allowPrivilegeEscalation": false,
                                "capabilities": {"add": ["NET_BIND_SERVICE"], "drop": ["all"]},
                                "readOnlyRootFilesystem": true,
                            },
                            "volumeMounts": mounts,
                        }],
                        "dnsPolicy": "Default",
                        "nodeSelector": {"kubernetes.io/os": "linux"},
                        "priorityClassName": "system-cluster-critical",
                        "serviceAccountName": "coredns",
                        "tolerations": tolerations,
                        "topologySpreadConstraints": [
                            {
                                "labelSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
                                "maxSkew": 1,
                                "topologyKey": "topology.kubernetes.io/zone",
                                "whenUnsatisfiable": "ScheduleAnyway",
                            },
                            {
                                "labelSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
                                "maxSkew": 1,
                                "nodeTaintsPolicy": "Honor",
                                "topologyKey": "kubernetes.io/hostname",
                                "whenUnsatisfiable": "DoNotSchedule",
                            },
                        ],
                        "volumes": volumes,
                    },
                },
            },
        }),
        json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "annotations": {"prometheus.io/port": "9153", "prometheus.io/scrape": "true"},
                "labels": labels(&[
                    ("k8s-app", "kube-dns"),
                    ("kubernetes.io/cluster-service", "true"),
                    ("kubernetes.io/name", "CoreDNS"),
                ]),
                "name": "kube-dns",
                "namespace": "kube-system",
                "resourceVersion": "0",
            },
            "spec": {
                "clusterIP": server_ip,
                "ports": [
                    {"name": "dns", "port": 53, "protocol": "UDP"},
                    {"name": "dns-tcp", "port": 53, "protocol": "TCP"},
                    {"name": "metrics", "port": 9153, "protocol": "TCP"},
                ],
                "selector": {"k8s-app": "kube-dns"},
            },
        }),
        json!({
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "kube-dns", "namespace": "kube-system"},
            "spec": {
                "maxUnavailable": "33%",
                "selector": {"matchLabels": {"k8s-app": "kube-dns"}},
                "unhealthyPodEvictionPolicy": "AlwaysAllow",
            },
        }),
        json!({
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "coredns-autoscaler", "namespace": "kube-system"},
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "coredns-autoscaler"},
            "rules": [
                {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "watch"]},
                {"apiGroups": [""], "resources": ["replicationcontrollers/scale"], "verbs": ["get", "update"]},
                {"apiGroups": ["extensions", "apps"], "resources": ["deployments/scale", "replicasets/scale"], "verbs": ["get", "update"]},
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "create"]},
            ],
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "coredns-autoscaler"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "coredns-autoscaler"},
            "subjects": [{"kind": "ServiceAccount", "name": "coredns-autoscaler", "namespace": "kube-system"}],
        }),
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "labels": labels(&[
                    ("k8s-app", "coredns-autoscaler"),
                    ("kubernetes.io/cluster-service", "true"),
                ]),
                "name": "coredns-autoscaler",
                "namespace": "kube-system",
            },
            "spec": {
                "selector": {"matchLabels": {"k8s-app": "coredns-autoscaler"}},
                "template": {
                    "metadata": {"labels": {"k8s-app": "coredns-autoscaler", "kops.k8s.io/managed-by": "kops"}},
                    "spec": {
                        "containers": [{
                            "command": [
                                "/cluster-proportional-autoscaler",
                                "--namespace=kube-system",
                                "--configmap=coredns-autoscaler",
                                "--target=Deployment/coredns",
                                "--default-params={\"linear\":{\"coresPerReplica\":256,\"nodesPerReplica\":16,\"preventSinglePointFailure\":true}}",
                                "--logtostderr=true",
                                "--v=2",
                            ],
                            "image": autoscaler_image,
                            "name": "autoscaler",
                            "resources": {"requests": {"cpu": "20m", "memory": "10Mi"}},
                        }],
                        "nodeSelector": {"kubernetes.io/os": "linux"},
                        "serviceAccountName": "coredns-autoscaler",
                        "tolerations": autoscaler_tolerations,
                    },
                },
            },
        }),
    ];
    if !control_plane_mode {
        let last = objects.len() - 1;
        objects[last]["spec"]["template"]["spec"]["priorityClassName"] =
            json!("system-cluster-critical");
    }
    Some(objects)
}

/// The Corefile: the cluster zone from the API, everything else forwarded
/// (to `upstreamNameservers`, else the node's resolvers), plus a block per
/// `stubDomains` entry.
fn corefile(domain: &str, kube_dns: &Value, hosts_of: Option<&str>, dns64: bool) -> String {
    let upstream: Vec<&str> = kube_dns
        .get("upstreamNameservers")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let forward_to = if upstream.is_empty() {
        "/etc/resolv.conf".to_string()
    } else {
        upstream.join(" ")
    };
    let mut text = String::new();
    if let Some(stubs) = kube_dns.get("stubDomains").and_then(Value::as_object) {
        for (zone, servers) in stubs {
            let servers: Vec<&str> = servers
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            text.push_str(&format!(
                "{zone}:53 {{\n    errors\n    cache 30\n    loop\n    forward . {}\n}}\n",
                servers.join(" ")
            ));
        }
    }
    text.push_str(&format!(
        ".:53 {{\n    errors\n    health {{\n      lameduck 10s\n    }}\n    ready\n    \
         kubernetes {domain}. in-addr.arpa ip6.arpa {{\n      pods insecure\n      \
         fallthrough in-addr.arpa ip6.arpa\n      ttl 30\n    }}\n"
    ));
    if let Some(cluster) = hosts_of {
        text.push_str(&format!(
            "    hosts /rootfs/etc/hosts {cluster} {{\n      ttl 30\n      fallthrough\n    }}\n"
        ));
    }
    text.push_str(&format!(
        "    prometheus :9153\n    forward . {forward_to} {{\n      max_concurrent 1000\n    }}\n    \
         cache 30\n    loop\n    reload\n    loadbalance\n"
    ));
    if dns64 {
        text.push_str("    dns64\n");
    }
    text.push('}');
    text
}

/// `spec.kubeDNS` with kops' default upstream for IPv6-only clusters on
/// AWS: the VPC resolver's IPv6 address.
fn upstream_defaulted(kube_dns: &Value, ipv6_only: bool) -> Value {
    let mut out = kube_dns.clone();
    if ipv6_only && kube_dns.get("upstreamNameservers").is_none() {
        if !out.is_object() {
            out = json!({});
        }
        out["upstreamNameservers"] = json!(["fd00:ec2::253"]);
    }
    out
}

/// The cluster DNS service's address: `kubeDNS.serverIP`, else the 10th
/// address of the service range.
pub(super) fn server_ip(model: &Model<'_>, kube_dns: &Value) -> Option<String> {
    if let Some(ip) = kube_dns.get("serverIP").and_then(Value::as_str) {
        return Some(ip.to_string());
    }
    let spec = &model.cluster.spec;
    tenth_address(
        spec.service_cluster_ip_range
            .as_deref()
            .unwrap_or(if model.ipv6_only() {
                "fd00:5e4f:ce::/108"
            } else {
                "100.64.0.0/13"
            }),
    )
}

/// The 10th address of a service range, IPv4 or IPv6.
fn tenth_address(range: &str) -> Option<String> {
    let (address, _) = range.split_once('/')?;
    Some(match address.parse::<IpAddr>().ok()? {
        IpAddr::V4(ip) => std::net::Ipv4Addr::from(u32::from(ip).wrapping_add(10)).to_string(),
        IpAddr::V6(ip) => std::net::Ipv6Addr::from(u128::from(ip).wrapping_add(10)).to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addons::tests::{assert_same, golden_cases};
    use crate::security::tests::model;

    const KEY: &str = "coredns.addons.k8s.io";

    /// Every AWS case of kops' suite with this addon: the manifest equals
    /// kops' byte for byte.
    #[test]
    fn matches_kops_golden_manifests() {
        let cases = golden_cases(KEY);
        for (case, cluster, groups, theirs) in &cases {
            let model = model(cluster, groups);
            let ours = crate::addons::manifest(&model, KEY)
                .unwrap()
                .expect("rendered");
            assert_same(case, &ours, theirs);
        }
        eprintln!("{} cases byte-identical", cases.len());
        assert!(
            cases.is_empty() || cases.len() >= 40,
            "only {}",
            cases.len()
        );
    }

    #[test]
    fn spec_fields_change_the_manifest() {
        let (mut cluster, groups) = crate::addons::tests::cluster();
        cluster.spec.service_cluster_ip_range = Some("10.96.0.0/12".into());
        cluster.spec.cluster_dns_domain = Some("corp.internal".into());
        cluster.spec.extra.insert(
            "kubeDNS".into(),
            json!({"upstreamNameservers": ["10.0.0.2"], "stubDomains": {"example.org": ["10.1.0.2"]}, "memoryLimit": "300Mi"}),
        );
        let model = model(&cluster, &groups);
        let text = crate::addons::manifest(&model, KEY).unwrap().unwrap();
        assert!(text.contains("clusterIP: 10.96.0.10"), "{text}");
        assert!(
            text.contains("kubernetes corp.internal. in-addr.arpa"),
            "{text}"
        );
        assert!(text.contains("forward . 10.0.0.2 {"), "{text}");
        assert!(text.contains("example.org:53 {"), "{text}");
        assert!(text.contains("memory: 300Mi"), "{text}");
        assert_eq!(
            tenth_address("fd00:5e4f:ce::/108").as_deref(),
            Some("fd00:5e4f:ce::a")
        );

        cluster
            .spec
            .extra
            .insert("kubeDNS".into(), json!({"provider": "KubeDNS"}));
        let model = crate::security::tests::model(&cluster, &groups);
        assert!(crate::addons::manifest(&model, KEY).unwrap().is_none());
    }
}
