//! NodeLocal DNSCache (`nodelocaldns.addons.k8s.io`), on when
//! `spec.kubeDNS.nodeLocalDNS.enabled` is true with CoreDNS: a DaemonSet
//! answering DNS on every node at a link-local address (kubelets give it
//! to pods as their resolver), forwarding cluster names to CoreDNS.
//!
//! From `spec.kubeDNS.nodeLocalDNS`: `localIP` (default `169.254.20.10`,
//! `fd00:90de:d95::1` on IPv6-only clusters), `forwardToKubeDNS` (every
//! name to CoreDNS instead of reverse zones to CoreDNS and the rest to the
//! node's resolvers), `externalCoreFile` (the whole Corefile),
//! `additionalConfig` (appended server blocks), `podAnnotations`, `image`,
//! `cpuRequest`, `memoryRequest`. With kube-proxy in IPVS mode the cache
//! forwards to CoreDNS' service address itself (IPVS leaves no iptables
//! rule the cache could reuse), otherwise to the placeholder the cache
//! fills in from the `kube-dns-upstream` service.

use serde_json::{json, Map, Value};

use super::{coredns, pods, template, TemplateError};
use crate::Model;

const KEY: &str = "nodelocaldns.addons.k8s.io";
const TEMPLATE: &str = include_str!("nodelocaldns/manifest.yaml");
const IMAGE: &str = "registry.k8s.io/dns/k8s-dns-node-cache:1.26.0";
/// The port of the cache's health endpoint on the node.
const HEALTH_PORT: u16 = 3989;

/// Whether the cluster runs the cache (the channel lists it then).
pub(crate) fn enabled(model: &Model<'_>) -> bool {
    let kube_dns = model.cluster.spec.extra.get("kubeDNS");
    let provider = kube_dns
        .and_then(|d| d.get("provider"))
        .and_then(Value::as_str)
        .unwrap_or("CoreDNS");
    provider == "CoreDNS"
        && kube_dns
            .and_then(|d| d.get("nodeLocalDNS"))
            .and_then(|n| n.get("enabled"))
            .and_then(Value::as_bool)
            == Some(true)
}

pub(super) fn objects(model: &Model<'_>) -> Result<Option<Vec<Value>>, TemplateError> {
    if !enabled(model) {
        return Ok(None);
    }
    let spec = &model.cluster.spec;
    let kube_dns = spec.extra.get("kubeDNS").cloned().unwrap_or(Value::Null);
    let settings = kube_dns.get("nodeLocalDNS").cloned().unwrap_or(Value::Null);
    let text = |key: &str| -> Option<String> {
        match settings.get(key)? {
            Value::String(s) if s.is_empty() => None,
            Value::String(s) => Some(s.clone()),
            Value::Null => None,
            other => Some(other.to_string()),
        }
    };
    let ipv6_only = model.ipv6_only();
    let local_ip = text("localIP").unwrap_or_else(|| {
        if ipv6_only {
            "fd00:90de:d95::1".into()
        } else {
            "169.254.20.10".into()
        }
    });
    let ipvs = spec
        .kube_proxy
        .as_ref()
        .and_then(|p| p.extra.get("proxyMode"))
        .and_then(Value::as_str)
        == Some("ipvs");
    let cluster_dns = if ipvs {
        coredns::server_ip(model, &kube_dns).unwrap_or_default()
    } else {
        "__PILLAR__CLUSTER__DNS__".to_string()
    };
    let health = if local_ip.contains(':') {
        format!("[{local_ip}]:{HEALTH_PORT}")
    } else {
        format!("{local_ip}:{HEALTH_PORT}")
    };
    let mut annotations = Map::new();
    annotations.insert("prometheus.io/port".into(), json!("9253"));
    annotations.insert("prometheus.io/scrape".into(), json!("true"));
    if let Some(extra) = settings.get("podAnnotations").and_then(Value::as_object) {
        for (key, value) in extra {
            let value = match value {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            annotations.insert(key.clone(), json!(value));
        }
    }
    let selinux = spec
        .containerd
        .as_ref()
        .and_then(|c| c.extra.get("selinuxEnabled"))
        .and_then(Value::as_bool)
        == Some(true);
    let context = json!({
        "domain": spec.cluster_dns_domain.as_deref().unwrap_or("cluster.local"),
        "local_ip": local_ip,
        "cluster_dns": cluster_dns,
        "health": health,
        "health_port": HEALTH_PORT,
        "forward_to_kube_dns": settings.get("forwardToKubeDNS").and_then(Value::as_bool) == Some(true),
        "dns64": ipv6_only,
        "external_core_file": text("externalCoreFile").unwrap_or_default(),
        "additional_config": text("additionalConfig").unwrap_or_default(),
        "annotations": annotations,
        "image": text("image").unwrap_or_else(|| IMAGE.into()),
        "cpu_request": text("cpuRequest").unwrap_or_else(|| "25m".into()),
        "memory_request": text("memoryRequest").unwrap_or_else(|| "5Mi".into()),
        "selinux": selinux,
    });
    let mut objects = template::render(KEY, TEMPLATE, &context)?;
    pods::mark(&mut objects);
    Ok(Some(objects))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addons::tests::cluster;
    use crate::security::tests::model;

    /// The manifest and channel entry for the test cluster with
    /// `nodeLocalDNS` set to `settings` and `kubeProxy` to `proxy`.
    fn render(settings: Value, proxy: Value) -> (String, Vec<&'static str>) {
        let (mut cluster, groups) = cluster();
        cluster
            .spec
            .extra
            .insert("kubeDNS".into(), json!({"nodeLocalDNS": settings}));
        cluster.spec.kube_proxy = serde_json::from_value(proxy).unwrap();
        let model = model(&cluster, &groups);
        let text = crate::addons::manifest(&model, KEY)
            .unwrap()
            .unwrap_or_default();
        let keys = crate::files::addons(&model).iter().map(|a| a.key).collect();
        (text, keys)
    }

    fn corefile(text: &str) -> String {
        let objects: Vec<Value> = serde_yaml_ng::Deserializer::from_str(text)
            .map(|d| serde::Deserialize::deserialize(d).unwrap())
            .collect();
        let map = objects.iter().find(|o| o["kind"] == "ConfigMap").unwrap();
        map["data"]["Corefile"].as_str().unwrap().to_string()
    }

    #[test]
    fn off_unless_enabled() {
        let (text, keys) = render(json!({"enabled": false}), json!(null));
        assert!(text.is_empty());
        assert!(!keys.contains(&KEY));
    }

    #[test]
    fn enabled_cache_forwards_cluster_names_and_reverse_zones_to_coredns() {
        let (text, keys) = render(json!({"enabled": true}), json!(null));
        let position = |key: &str| keys.iter().position(|k| *k == key);
        assert!(position(KEY) > position("dns-controller.addons.k8s.io"));
        let corefile = corefile(&text);
        let blocks: Vec<&str> = corefile.lines().filter(|l| l.ends_with(":53 {")).collect();
        assert_eq!(
            blocks,
            [
                "cluster.local:53 {",
                "in-addr.arpa:53 {",
                "ip6.arpa:53 {",
                ".:53 {"
            ]
        );
        assert_eq!(
            corefile
                .matches("forward . __PILLAR__CLUSTER__DNS__ {")
                .count(),
            3
        );
        assert!(corefile.contains("forward . __PILLAR__UPSTREAM__SERVERS__\n"));
        assert!(corefile.contains("    health 169.254.20.10:3989\n"));
        assert!(corefile.ends_with("}\n") && !corefile.ends_with("\n\n"));
        assert!(text.contains("- -localip=169.254.20.10"));
        assert!(text.contains("host: 169.254.20.10"));
        assert!(text.contains("image: registry.k8s.io/dns/k8s-dns-node-cache:1.26.0"));
        assert!(text.contains("kops.k8s.io/managed-by: kops"));
        assert!(!text.contains("seLinuxOptions"));
    }

    #[test]
    fn ipvs_forwards_to_the_dns_service_address() {
        let (text, _) = render(json!({"enabled": true}), json!({"proxyMode": "ipvs"}));
        let corefile = corefile(&text);
        assert_eq!(corefile.matches("forward . 100.64.0.10 {").count(), 3);
        assert!(!corefile.contains("__PILLAR__CLUSTER__DNS__"));
    }

    #[test]
    fn forward_to_kube_dns_additional_config_and_annotations() {
        let (text, _) = render(
            json!({"enabled": true, "forwardToKubeDNS": true, "cpuRequest": "50m",
                   "podAnnotations": {"a": "b"},
                   "additionalConfig": "example.org:53 {\n  errors\n}\n"}),
            json!(null),
        );
        let corefile = corefile(&text);
        let blocks: Vec<&str> = corefile.lines().filter(|l| l.ends_with(":53 {")).collect();
        assert_eq!(blocks, ["cluster.local:53 {", ".:53 {", "example.org:53 {"]);
        assert!(corefile.ends_with("example.org:53 {\n  errors\n}\n"));
        assert!(!corefile.contains("__PILLAR__UPSTREAM__SERVERS__"));
        assert!(text.contains("cpu: 50m"));
        assert!(text.contains("a: b"));
    }

    #[test]
    fn an_external_corefile_replaces_ours() {
        let (text, _) = render(
            json!({"enabled": true, "externalCoreFile": ".:53 {\n  errors\n}\n"}),
            json!(null),
        );
        assert_eq!(corefile(&text), ".:53 {\n  errors\n}\n");
    }
}
