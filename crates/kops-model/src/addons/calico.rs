//! Calico (`networking.projectcalico.org`): the `calico-node` DaemonSet
//! (BGP or VXLAN routing, network policy, optionally the eBPF dataplane and
//! WireGuard), `calico-kube-controllers`, optionally Typha, the
//! `calico-config` ConfigMap, RBAC and Calico's CRDs.
//!
//! The manifest is kops' own (`calico/manifest.yaml`); the context is
//! `spec.networking.calico` with kops' defaults. kops sets the
//! encapsulation itself: IP-in-IP, none on an IPv6-only cluster (the spec's
//! `encapsulationMode` is overwritten); the IPv4 pool then uses IP-in-IP
//! `CrossSubnet` unless `ipipMode` says otherwise, and on AWS Felix turns
//! off the instances' source/destination check (`awsSrcDstCheck`).
//!
//! kops' suite has no Calico case on AWS, so the output follows kops'
//! template and defaults without a golden comparison. The HTTP proxy
//! variables come from `spec.egressProxy` as given (kops-rs does not add
//! kops' default exclusions here).

use serde_json::{json, Map, Value};

use super::networking::{at, cloud_provider, label_pods, pod_cidr, spec, text};
use super::{template, TemplateError};
use crate::Model;

/// The Calico release kops deploys when `version` is not set.
const VERSION: &str = "v3.31.6";

/// The addon's objects; `None` when the cluster does not run Calico.
pub(super) fn objects(model: &Model<'_>) -> Result<Option<Vec<Value>>, TemplateError> {
    let spec = spec(model);
    let Some(calico) = at(&spec, &["networking", "calico"]) else {
        return Ok(None);
    };
    let mut objects = template::render(
        "networking.projectcalico.org",
        include_str!("calico/manifest.yaml"),
        &context(model, &spec, calico),
    )?;
    label_pods(&mut objects);
    Ok(Some(objects))
}

/// The template's context: every field it reads, defaulted as kops does.
fn context(model: &Model<'_>, spec: &Value, calico: &Value) -> Value {
    let get = |key: &str, default: &str| -> String {
        match at(calico, &[key]) {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            Some(Value::Number(n)) if n.as_f64() != Some(0.0) => n.to_string(),
            _ => default.to_string(),
        }
    };
    let flag = |key: &str| at(calico, &[key]).and_then(Value::as_bool).unwrap_or(false);
    let ipv6_only = model.ipv6_only();
    let provider = cloud_provider(spec);
    let encapsulation = if ipv6_only { "none" } else { "ipip" };
    let ipip_mode = match (encapsulation, text(calico, &["ipipMode"])) {
        ("ipip", Some(mode)) => mode.to_string(),
        ("ipip", None) if provider == Some("openstack") => "Always".to_string(),
        ("ipip", None) => "CrossSubnet".to_string(),
        _ => "Never".to_string(),
    };
    let typha_replicas = at(calico, &["typhaReplicas"])
        .and_then(Value::as_i64)
        .unwrap_or(0);
    // `mtu` is printed when set, even 0.
    let mtu = at(calico, &["mtu"]).and_then(Value::as_i64).unwrap_or(0);
    let cluster_cidr = text(spec, &["kubeControllerManager", "clusterCIDR"])
        .map(str::to_string)
        .or_else(|| pod_cidr(model))
        .unwrap_or_default();

    let mut context = json!({
        "allow_ip_forwarding": flag("allowIPForwarding"),
        "api_internal_name": format!("api.internal.{}", model.name()),
        "aws": provider == Some("aws"),
        "aws_src_dst_check": get("awsSrcDstCheck", "Disable"),
        "bpf_enabled": flag("bpfEnabled"),
        "bpf_external_service_mode": get("bpfExternalServiceMode", "Tunnel"),
        "bpf_kube_proxy_iptables_cleanup_enabled": flag("bpfKubeProxyIptablesCleanupEnabled"),
        "bpf_log_level": get("bpfLogLevel", "Off"),
        "chain_insert_mode": get("chainInsertMode", "insert"),
        "cluster_cidr": cluster_cidr,
        "cpu_request": get("cpuRequest", "250m"),
        "encapsulation_mode": encapsulation,
        "iptables_backend": get("iptablesBackend", "Auto"),
        "ipv4_auto_detection_method": get("ipv4AutoDetectionMethod", ""),
        "ipv6_auto_detection_method": get("ipv6AutoDetectionMethod", ""),
        "ipv4_pool_ipip_mode": ipip_mode,
        // kops' VXLAN modes: `Never` unless the encapsulation is VXLAN,
        // which it only is on Azure.
        "ipv4_pool_vxlan_mode": "Never",
        "ipv6_pool_vxlan_mode": "Never",
        "ipv6_only": ipv6_only,
        "log_severity_screen": get("logSeverityScreen", "info"),
        "mtu": mtu,
    });
    let rest = json!({
        "nftables_mode": get("nftablesMode", ""),
        "prometheus_go_metrics_enabled": flag("prometheusGoMetricsEnabled"),
        "prometheus_metrics_enabled": flag("prometheusMetricsEnabled"),
        "prometheus_metrics_port": get("prometheusMetricsPort", "9091"),
        "prometheus_process_metrics_enabled": flag("prometheusProcessMetricsEnabled"),
        "proxy_env": proxy_env(spec),
        "registry": get("registry", "docker.io"),
        "typha_prometheus_metrics_enabled": flag("typhaPrometheusMetricsEnabled"),
        "typha_prometheus_metrics_port": get("typhaPrometheusMetricsPort", "9093"),
        "typha_replicas": typha_replicas,
        "version": get("version", VERSION),
        "wireguard_enabled": flag("wireguardEnabled"),
    });
    if let (Some(context), Value::Object(rest)) = (context.as_object_mut(), rest) {
        context.extend(rest);
    }
    context
}

/// The HTTP proxy variables of `spec.egressProxy`, sorted by name, as
/// `[name, value]` pairs.
fn proxy_env(spec: &Value) -> Vec<(String, String)> {
    let mut env = Map::new();
    if let Some(host) = text(spec, &["egressProxy", "httpProxy", "host"]) {
        let url = match at(spec, &["egressProxy", "httpProxy", "port"]).and_then(Value::as_i64) {
            Some(port) if port != 0 => format!("http://{host}:{port}"),
            _ => format!("http://{host}"),
        };
        env.insert("http_proxy".into(), json!(url));
        env.insert("https_proxy".into(), json!(url));
    }
    if let Some(excludes) = text(spec, &["egressProxy", "excludes"]) {
        env.insert("no_proxy".into(), json!(excludes));
        env.insert("NO_PROXY".into(), json!(excludes));
    }
    let mut env: Vec<(String, String)> = env
        .into_iter()
        .map(|(k, v)| (k, v.as_str().unwrap_or_default().to_string()))
        .collect();
    env.sort();
    env
}

#[cfg(test)]
mod tests {
    use super::super::manifest;
    use crate::addons::tests::cluster;
    use crate::security::tests::model;

    const KEY: &str = "networking.projectcalico.org";

    /// The manifest for the small test cluster running Calico with
    /// `calico` (its spec block) and `nonMasqueradeCIDR` when given.
    fn render(calico: serde_json::Value, non_masquerade: Option<&str>) -> String {
        let (mut cluster, groups) = cluster();
        let networking = cluster.spec.networking.get_or_insert_with(Default::default);
        networking.cni = None;
        networking.calico = Some(serde_json::from_value(calico).unwrap());
        cluster.spec.non_masquerade_cidr = non_masquerade.map(str::to_string);
        manifest(&model(&cluster, &groups), KEY).unwrap().unwrap()
    }

    /// The value of the environment variable `name` in the manifest.
    fn env<'t>(text: &'t str, name: &str) -> &'t str {
        let start = text
            .find(&format!("- name: {name}\n"))
            .unwrap_or_else(|| panic!("{name} missing"));
        let rest = &text[start..];
        let line = rest.lines().nth(1).unwrap();
        line.trim().trim_start_matches("value: ").trim_matches('"')
    }

    #[test]
    fn defaults_parse_and_carry_kops_labels() {
        let text = render(serde_json::json!({}), None);
        let documents: Vec<&str> = text.split("\n---\n").collect();
        for document in &documents {
            let object: serde_json::Value = serde_yaml_ng::from_str(document).unwrap();
            let labels = &object["metadata"]["labels"];
            assert_eq!(labels["role.kubernetes.io/networking"], "1", "{document}");
            assert_eq!(labels["addon.kops.k8s.io/name"], KEY);
            assert!(labels.get("k8s-addon").is_none());
            if object["kind"] == "DaemonSet" || object["kind"] == "Deployment" {
                let pod = &object["spec"]["template"]["metadata"]["labels"];
                assert_eq!(pod["kops.k8s.io/managed-by"], "kops");
            }
        }
        assert!(documents.len() > 30, "{} objects", documents.len());
        assert!(text.contains("image: docker.io/calico/node:v3.31.6\n"));
        assert!(!text.contains("calico-typha"), "no Typha by default");
        assert!(!text.contains("KUBERNETES_SERVICE_HOST"));
        assert_eq!(env(&text, "CALICO_IPV4POOL_IPIP"), "CrossSubnet");
        assert_eq!(env(&text, "CALICO_IPV4POOL_VXLAN"), "Never");
        assert_eq!(env(&text, "CALICO_IPV4POOL_CIDR"), "100.96.0.0/11");
        assert_eq!(env(&text, "FELIX_AWSSRCDSTCHECK"), "Disable");
        assert_eq!(env(&text, "FELIX_BPFENABLED"), "false");
        assert_eq!(env(&text, "FELIX_IPV6SUPPORT"), "false");
        assert_eq!(env(&text, "IP_AUTODETECTION_METHOD"), "first-found");
        assert!(text.contains("  calico_backend: bird\n"));
        assert!(text.contains("  typha_service_name: none\n"));
        assert!(text.contains("  veth_mtu: \"0\"\n"));
        assert!(text.contains("\"assign_ipv4\": \"true\""));
        assert!(text.contains("- -bird-ready\n"));
        assert!(text.contains("cpu: 250m\n"));
        assert!(text.contains("name: upgrade-ipam\n"));
    }

    #[test]
    fn the_specs_settings_reach_the_manifest() {
        let text = render(
            serde_json::json!({
                "registry": "registry.example.com",
                "version": "v3.30.0",
                "typhaReplicas": 3,
                "typhaPrometheusMetricsEnabled": true,
                "bpfEnabled": true,
                "mtu": 8981,
                "ipipMode": "Always",
                "awsSrcDstCheck": "DoNothing",
                "wireguardEnabled": true,
                "prometheusMetricsEnabled": true,
                "prometheusMetricsPort": 9000,
                "nftablesMode": "Enabled",
                "allowIPForwarding": true,
                "cpuRequest": "100m",
                "logSeverityScreen": "debug",
            }),
            None,
        );
        assert!(text.contains("image: registry.example.com/calico/typha:v3.30.0\n"));
        assert!(text.contains("  replicas: 3\n"));
        assert!(text.contains("  typha_service_name: calico-typha\n"));
        assert!(text.contains("  veth_mtu: \"8981\"\n"));
        assert!(text.contains("KUBERNETES_SERVICE_HOST: api.internal.addons.example.com\n"));
        assert!(text.contains("\"allow_ip_forwarding\": true"));
        assert!(text.contains("- containerPort: 9000\n"));
        assert!(text.contains("- containerPort: 9093\n"));
        assert!(text.contains("cpu: 100m\n"));
        assert_eq!(env(&text, "CALICO_IPV4POOL_IPIP"), "Always");
        assert_eq!(env(&text, "FELIX_AWSSRCDSTCHECK"), "DoNothing");
        assert_eq!(env(&text, "FELIX_BPFENABLED"), "true");
        assert_eq!(env(&text, "FELIX_WIREGUARDENABLED"), "true");
        assert_eq!(env(&text, "FELIX_NFTABLESMODE"), "Enabled");
        assert_eq!(env(&text, "FELIX_LOGSEVERITYSCREEN"), "debug");
        assert_eq!(env(&text, "TYPHA_PROMETHEUSMETRICSENABLED"), "true");
        assert!(text.contains("- name: FELIX_TYPHAK8SSERVICENAME\n"));
    }

    #[test]
    fn ipv6_only_clusters_use_host_local_ipam_without_encapsulation() {
        let text = render(serde_json::json!({}), Some("::/0"));
        assert!(text.contains("  calico_backend: none\n"));
        assert_eq!(env(&text, "CALICO_IPV4POOL_IPIP"), "Never");
        assert_eq!(env(&text, "FELIX_AWSSRCDSTCHECK"), "DoNothing");
        assert_eq!(env(&text, "FELIX_IPV6SUPPORT"), "true");
        assert_eq!(env(&text, "IP6_AUTODETECTION_METHOD"), "first-found");
        assert_eq!(env(&text, "NO_DEFAULT_POOLS"), "true");
        assert!(!text.contains("CALICO_IPV4POOL_CIDR"));
        assert!(!text.contains("name: upgrade-ipam\n"));
        assert!(!text.contains("-bird"));
        assert!(text.contains("usePodCidrIPv6"));
    }
}
