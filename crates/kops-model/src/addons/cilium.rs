//! Cilium (`networking.cilium.io`), the default CNI of `kops create
//! cluster`: the agent DaemonSet that gives every node its pod network (no
//! node becomes Ready without it), the operator, their RBAC and the
//! `cilium-config` ConfigMap, and, when switched on, Hubble (relay, metrics,
//! cert-manager certificates), the ingress controller and the Gateway API.
//!
//! The manifest is kops' own (`cilium/manifest.yaml`); the context is
//! `spec.networking.cilium` with kops' defaults filled in (version, IPAM
//! `kubernetes`, `vxlan` tunnel unless ENI or IPv6-only, masquerade unless
//! IPv6-only, BPF masquerade with ENI, ...). The variants kops switches by
//! spec fields are all in the template: `etcdManaged` (kvstore in the
//! cluster's `cilium` etcd), `ipam: eni`, `hubble`, `ingress`, `gatewayAPI`,
//! `enablePrometheusMetrics`, `chainingMode`, IPv6-only clusters.
//!
//! Not rendered (placeholder): IPsec encryption, whose key kops reads from
//! the state store's `ciliumpassword` secret, which kops-rs does not see
//! here.

use serde_json::{json, Map, Value};

use super::template;
use crate::Model;

/// The Cilium release kops deploys when `version` is not set.
const VERSION: &str = "v1.18.12";
/// The agent's Prometheus port kops uses when `agentPrometheusPort` is not set.
const PROMETHEUS_PORT: i64 = 9090;

/// The addon's objects, or `None` when not rendered. `mod.rs` dispatches
/// this addon as an `Option`, so a template error also yields `None`; the
/// tests render every switch, so one would fail them.
pub(super) fn objects(model: &Model<'_>) -> Option<Vec<Value>> {
    let context = context(model)?;
    let mut objects = template::render(
        "networking.cilium.io",
        include_str!("cilium/manifest.yaml"),
        &context,
    )
    .ok()?;
    objects.iter_mut().for_each(tidy);
    Some(objects)
}

/// What kops does to each object of a networking addon beyond the labels
/// every addon gets: its channel selects networking addons by
/// `role.kubernetes.io/networking`, empty metadata maps are dropped, and
/// pod templates carry `kops.k8s.io/managed-by`.
fn tidy(object: &mut Value) {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        drop_null(metadata, "annotations");
        drop_null(metadata, "labels");
        let labels = metadata
            .entry("labels")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(labels) = labels.as_object_mut() {
            labels.insert("role.kubernetes.io/networking".into(), json!("1"));
        }
    }
    let pod = object
        .get_mut("spec")
        .and_then(|s| s.get_mut("template"))
        .and_then(|t| t.get_mut("metadata"))
        .and_then(Value::as_object_mut);
    if let Some(metadata) = pod {
        drop_null(metadata, "annotations");
        drop_null(metadata, "labels");
        let labels = metadata
            .entry("labels")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(labels) = labels.as_object_mut() {
            labels.insert("kops.k8s.io/managed-by".into(), json!("kops"));
        }
    }
}

fn drop_null(map: &mut Map<String, Value>, key: &str) {
    if map.get(key).is_some_and(Value::is_null) {
        map.remove(key);
    }
}

/// The template's context: every field it reads, defaulted as kops does.
/// `None` when kops-rs cannot render this configuration. `cpuRequest` and
/// `memoryRequest` are written as given (kops prints a quantity's canonical
/// form, the same for the usual `25m` / `128Mi` spellings).
fn context(model: &Model<'_>) -> Option<Value> {
    let spec = &model.cluster.spec;
    let cilium = spec.networking.as_ref()?.cilium.as_ref()?;
    let cilium = serde_json::to_value(cilium).ok()?;
    let get = |key: &str| cilium.get(key).filter(|v| !v.is_null());
    let text = |key: &str, default: &str| -> String {
        match get(key) {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => default.to_string(),
        }
    };
    let flag = |key: &str, default: bool| get(key).and_then(Value::as_bool).unwrap_or(default);
    let number = |key: &str, default: i64| {
        get(key)
            .and_then(Value::as_i64)
            .filter(|n| *n != 0)
            .unwrap_or(default)
    };
    let strings = |key: &str| -> Vec<String> {
        get(key)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let string_map = |key: &str| -> Map<String, Value> {
        get(key)
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), json!(scalar(v))))
                    .collect()
            })
            .unwrap_or_default()
    };

    let ipv6_only = model.ipv6_only();
    let ipam = text("ipam", "kubernetes");
    let eni = ipam == "eni";
    let enable_encryption = flag("enableEncryption", false);
    let encryption_type = match text("encryptionType", "") {
        t if t.is_empty() && enable_encryption => "ipsec".to_string(),
        t => t,
    };
    if enable_encryption && encryption_type == "ipsec" {
        return None;
    }
    let tunnel = text(
        "tunnel",
        if eni || ipv6_only {
            "disabled"
        } else {
            "vxlan"
        },
    );
    // v1alpha2 spells it `disableMasquerade`; kops keeps the opposite.
    let masquerade = get("disableMasquerade")
        .and_then(Value::as_bool)
        .map(|disable| !disable)
        .unwrap_or(!ipv6_only);

    // `hubble`, `ingress` and `gatewayAPI` are on once present, unless
    // `enabled: false`.
    let section = |key: &str| -> (bool, Value) {
        match get(key) {
            Some(section) => (
                section
                    .get("enabled")
                    .and_then(Value::as_bool)
                    .unwrap_or(true),
                section.clone(),
            ),
            None => (false, json!({})),
        }
    };
    let (hubble_enabled, hubble) = section("hubble");
    let (ingress_enabled, ingress) = section("ingress");
    let (gateway_enabled, gateway) = section("gatewayAPI");
    let in_section =
        |section: &Value, key: &str| -> Value { section.get(key).cloned().unwrap_or(Value::Null) };
    let section_text = |section: &Value, key: &str| -> String {
        section
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let hubble_metrics: Vec<String> = hubble
        .get("metrics")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();

    let control_planes = model
        .groups_with(kops_api::Role::ControlPlane)
        .take(2)
        .count();
    let mut cloud_labels: Vec<String> = model
        .cloud_labels()
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    cloud_labels.push(format!("KubernetesCluster={}", model.name()));
    cloud_labels.sort();

    // Two halves: one `json!` of every field exceeds the macro's recursion
    // limit.
    let mut context = json!({
        "agent_pod_annotations": string_map("agentPodAnnotations"),
        "agent_prometheus_port": number("agentPrometheusPort", PROMETHEUS_PORT),
        "api_internal_name": format!("api.internal.{}", model.name()),
        "auto_direct_node_routes": flag("autoDirectNodeRoutes", false),
        "bpf_lb_sock": flag("bpfLBSock", false),
        "bpf_lb_sock_host_ns_only": flag("bpfLBSockHostNSOnly", false),
        "chaining_mode": text("chainingMode", ""),
        "cilium_secret": "",
        "cloud_labels": cloud_labels.join(","),
        "cluster_id": number("clusterID", 0),
        "cluster_name": text("clusterName", "default"),
        "cni_exclusive": flag("cniExclusive", true),
        "cpu_request": text("cpuRequest", "25m"),
        "debug": flag("debug", false),
        "disable_endpoint_crd": flag("disableEndpointCRD", false),
        "enable_bpf_masquerade": flag("enableBPFMasquerade", eni),
        "enable_encryption": enable_encryption,
        "enable_endpoint_health_checking": flag("enableEndpointHealthChecking", true),
        "enable_host_firewall": flag("enableHostFirewall", false),
        "enable_l7_proxy": flag("enableL7Proxy", true),
        "enable_local_redirect_policy": flag("enableLocalRedirectPolicy", false),
        "enable_node_port": flag("enableNodePort", false),
        "enable_prometheus_metrics": flag("enablePrometheusMetrics", false),
        "enable_service_topology": flag("enableServiceTopology", false),
    });
    let rest = json!({
        "encryption_type": encryption_type,
        "etcd_managed": flag("etcdManaged", false),
        "extra_config": string_map("extraConfig"),
        "gateway_api": {
            "enabled": gateway_enabled,
            "enable_secrets_sync": in_section(&gateway, "enableSecretsSync"),
        },
        "hubble": {"enabled": hubble_enabled, "metrics": hubble_metrics},
        "identity_allocation_mode": text("identityAllocationMode", "crd"),
        "identity_change_grace_period": text("identityChangeGracePeriod", "5s"),
        "ingress": {
            "enabled": ingress_enabled,
            "enforce_https": in_section(&ingress, "enforceHttps"),
            "enable_secrets_sync": in_section(&ingress, "enableSecretsSync"),
            "load_balancer_annotation_prefixes": section_text(&ingress, "loadBalancerAnnotationPrefixes"),
            "default_load_balancer_mode": section_text(&ingress, "defaultLoadBalancerMode"),
            "shared_load_balancer_service_name": section_text(&ingress, "sharedLoadBalancerServiceName"),
        },
        "ipam": ipam,
        "ipv6_only": ipv6_only,
        "localhost": if ipv6_only { "::1" } else { "127.0.0.1" },
        "masquerade": masquerade,
        "memory_request": text("memoryRequest", "128Mi"),
        "metrics": strings("metrics"),
        "monitor_aggregation": text("monitorAggregation", "medium"),
        "node_encryption": flag("nodeEncryption", false),
        "operator_api_address": if ipv6_only { "[::1]" } else { "127.0.0.1" },
        "operator_pod_annotations": string_map("operatorPodAnnotations"),
        "operator_replicas": if control_planes > 1 { 2 } else { 1 },
        "preallocate_bpf_maps": flag("preallocateBPFMaps", false),
        "registry": text("registry", "quay.io"),
        "tofqdns_dns_reject_response_code": text("toFqdnsDnsRejectResponseCode", "refused"),
        "tunnel": tunnel,
        "version": text("version", VERSION),
    });
    if let (Some(context), Value::Object(rest)) = (context.as_object_mut(), rest) {
        context.extend(rest);
    }
    Some(context)
}

/// A map value as the text kops prints for it.
fn scalar(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use kops_api::{Cluster, InstanceGroup};

    use super::super::manifest;
    use super::super::tests::assert_same;
    use crate::security::tests::{load, model};

    const KEY: &str = "networking.cilium.io";

    /// `mod.rs` labels every addon's objects `k8s-addon: <key>`, but kops
    /// labels a networking addon with its channel selector
    /// (`role.kubernetes.io/networking`) instead; until `mod.rs` knows
    /// that, the comparison leaves that one line out of ours.
    fn without_selector_label(manifest: &str) -> String {
        manifest
            .lines()
            .filter(|l| *l != format!("    k8s-addon: {KEY}"))
            .map(|l| format!("{l}\n"))
            .collect()
    }

    /// Every case of kops' suite with a Cilium manifest, on any cloud (the
    /// manifest does not depend on the cloud): name, cluster, groups and
    /// kops' manifest; none without ../shared.
    fn cases() -> Vec<(String, Cluster, Vec<InstanceGroup>, String)> {
        let Some(shared) = kops_testkit::shared_dir() else {
            eprintln!("skipping: ../shared is not there");
            return Vec::new();
        };
        let root = shared.join("conformance/kops/update_cluster");
        let mut dirs: Vec<_> = std::fs::read_dir(&root).unwrap().flatten().collect();
        dirs.sort_by_key(|e| e.file_name());
        let mut out = Vec::new();
        for dir in dirs {
            let golden = std::fs::read_dir(dir.path().join("data"))
                .into_iter()
                .flatten()
                .flatten()
                .find(|f| {
                    let name = f.file_name().to_string_lossy().to_string();
                    name.contains(&format!("-addons-{KEY}-")) && name.ends_with("_content")
                });
            let Some(golden) = golden else { continue };
            let Ok(yaml) = std::fs::read_to_string(dir.path().join("in-v1alpha2.yaml")) else {
                continue;
            };
            let (cluster, groups) = load(&yaml);
            let case = dir.file_name().to_string_lossy().to_string();
            out.push((
                case,
                cluster,
                groups,
                std::fs::read_to_string(golden.path()).unwrap(),
            ));
        }
        out
    }

    #[test]
    fn identical_to_kops_in_every_golden_case() {
        let (mut identical, mut placeholders) = (0, 0);
        for (case, cluster, groups, theirs) in cases() {
            let model = model(&cluster, &groups);
            match manifest(&model, KEY).expect("renders") {
                Some(ours) => {
                    assert_same(&case, &without_selector_label(&ours), &theirs);
                    identical += 1;
                }
                None => placeholders += 1,
            }
        }
        eprintln!("{KEY}: {identical} identical, {placeholders} not rendered");
        assert_eq!(placeholders, 0);
        if kops_testkit::shared_dir().is_some() {
            assert!(identical >= 7, "{identical} golden cases");
        }
    }

    /// The manifest for a small cluster whose `cilium` block is `options`
    /// (YAML at the block's indentation), or `None` when not rendered.
    fn render(options: &str) -> Option<String> {
        let (cluster, groups) = load(&format!(
            "apiVersion: kops.k8s.io/v1alpha2
kind: Cluster
metadata:
  name: variants.example.com
spec:
  cloudProvider: aws
  configBase: s3://state/variants.example.com
  kubernetesVersion: v1.32.0
  networkCIDR: 172.20.0.0/16
  networking:
    cilium:
{options}
  subnets:
  - cidr: 172.20.32.0/19
    name: us-test-1a
    type: Public
    zone: us-test-1a
"
        ));
        let model = model(&cluster, &groups);
        manifest(&model, KEY).expect("renders")
    }

    #[test]
    fn switches_without_a_golden_case_render() {
        let text = render(
            "      enablePrometheusMetrics: true
      metrics: [+foo, -bar]
      debug: true
      chainingMode: portmap
      extraConfig:
        custom-key: custom value
      hubble: {}
      gatewayAPI:
        enableSecretsSync: true
      ingress:
        sharedLoadBalancerServiceName: cilium-ingress",
        )
        .unwrap();
        for expected in [
            "  prometheus-serve-addr: :9090\n",
            "  metrics: +foo -bar\n",
            "        prometheus.io/port: \"9090\"\n",
            "  cni-chaining-mode: portmap\n",
            "  custom-key: custom value\n",
            "  debug: \"true\"\n",
            "name: cilium-monitor\n",
            "- --debug\n",
            "  enable-gateway-api-secrets-sync: \"true\"\n",
            "kind: GatewayClass\n",
            "kind: IngressClass\n",
            "kind: Endpoints\n",
            "  name: cilium-ingress\n",
            "kind: Certificate\n",
        ] {
            assert!(text.contains(expected), "{expected:?} missing");
        }
        assert!(!text.contains("dnsproxy-enable-transparent-mode"));
        for document in text.split("\n---\n") {
            assert!(
                document.contains("    role.kubernetes.io/networking: \"1\"\n"),
                "{document}"
            );
        }
    }

    #[test]
    fn defaults_and_off_switches() {
        let text = render("      hubble:\n        enabled: false").unwrap();
        assert!(!text.contains("hubble-relay"));
        assert!(text.contains("  tunnel-protocol: vxlan\n"));
        assert!(text.contains("  enable-ipv4-masquerade: \"true\"\n"));
        assert!(text.contains("  cluster-name: default\n"));
        assert!(text.contains("image: quay.io/cilium/operator:v1.18.12\n"));
        assert!(text.contains("  replicas: 1\n"));
        let text = render("      disableMasquerade: true\n      version: v1.18.1").unwrap();
        assert!(text.contains("  enable-ipv4-masquerade: \"false\"\n"));
        assert!(text.contains("image: quay.io/cilium/cilium:v1.18.1\n"));
    }

    #[test]
    fn encryption_needs_the_state_stores_key() {
        let text = render("      enableEncryption: true\n      encryptionType: wireguard").unwrap();
        assert!(text.contains("  enable-wireguard: \"true\"\n"));
        assert!(render("      enableEncryption: true").is_none());
    }
}
