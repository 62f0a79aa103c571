//! kube-dns (`kube-dns.addons.k8s.io`), the cluster's DNS when
//! `spec.kubeDNS.provider` is `KubeDNS` (CoreDNS otherwise): kube-dns,
//! dnsmasq and the metrics sidecar in one deployment behind the
//! `kube-dns` service, and the proportional autoscaler sizing it.
//!
//! From `spec.kubeDNS`: `upstreamNameservers` and `stubDomains` (a
//! ConfigMap dnsmasq reads), `cacheMaxSize` and `cacheMaxConcurrent`
//! (dnsmasq's cache), `serverIP` (the service address, default the 10th of
//! the service range), `cpaImage`; `clusterDNSDomain` is the zone served.

use serde_json::{json, Value};

use super::{coredns, pods, template, TemplateError};
use crate::Model;

const KEY: &str = "kube-dns.addons.k8s.io";
const TEMPLATE: &str = include_str!("kube_dns/manifest.yaml");
/// The proportional autoscaler's image unless `cpaImage` says.
const CPA_IMAGE: &str = "registry.k8s.io/cpa/cluster-proportional-autoscaler:v1.8.8";

/// Whether the cluster's DNS is kube-dns rather than CoreDNS.
pub(crate) fn enabled(model: &Model<'_>) -> bool {
    model
        .cluster
        .spec
        .extra
        .get("kubeDNS")
        .and_then(|d| d.get("provider"))
        .and_then(Value::as_str)
        == Some("KubeDNS")
}

pub(super) fn objects(model: &Model<'_>) -> Result<Option<Vec<Value>>, TemplateError> {
    if !enabled(model) {
        return Ok(None);
    }
    let spec = &model.cluster.spec;
    let kube_dns = spec.extra.get("kubeDNS").cloned().unwrap_or(Value::Null);
    // dnsmasq's settings are JSON in the ConfigMap, compact and with
    // sorted keys, as Go writes them.
    let compact = |key: &str| match kube_dns.get(key) {
        Some(Value::Array(a)) if !a.is_empty() => serde_json::to_string(a).unwrap_or_default(),
        Some(Value::Object(m)) if !m.is_empty() => serde_json::to_string(m).unwrap_or_default(),
        _ => String::new(),
    };
    let number = |key: &str, default: i64| {
        kube_dns
            .get(key)
            .and_then(Value::as_i64)
            .filter(|n| *n != 0)
            .unwrap_or(default)
    };
    let context = json!({
        "upstream_nameservers": compact("upstreamNameservers"),
        "stub_domains": compact("stubDomains"),
        "cpa_image": kube_dns.get("cpaImage").and_then(Value::as_str).filter(|s| !s.is_empty()).unwrap_or(CPA_IMAGE),
        "domain": spec.cluster_dns_domain.as_deref().unwrap_or("cluster.local"),
        "cache_max_size": number("cacheMaxSize", 1000),
        "cache_max_concurrent": number("cacheMaxConcurrent", 150),
        "server_ip": coredns::server_ip(model, &kube_dns).unwrap_or_default(),
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

    fn render(kube_dns: Value) -> (String, Vec<&'static str>) {
        let (mut cluster, groups) = cluster();
        cluster.spec.extra.insert("kubeDNS".into(), kube_dns);
        let model = model(&cluster, &groups);
        let text = crate::addons::manifest(&model, KEY)
            .unwrap()
            .unwrap_or_default();
        let keys = crate::files::addons(&model).iter().map(|a| a.key).collect();
        (text, keys)
    }

    #[test]
    fn kube_dns_replaces_coredns_in_the_channel() {
        let (text, keys) = render(json!({"provider": "KubeDNS"}));
        assert!(keys.contains(&KEY));
        assert!(!keys.contains(&"coredns.addons.k8s.io"));
        assert!(text.contains("clusterIP: 100.64.0.10"), "{text}");
        assert!(text.contains("- --cache-size=1000"));
        assert!(text.contains("- --domain=cluster.local."));
        assert!(text.contains(CPA_IMAGE));
        assert!(!text.contains("kind: ConfigMap"), "no dnsmasq settings");

        let (text, keys) = render(json!({"provider": "CoreDNS"}));
        assert!(text.is_empty());
        assert!(!keys.contains(&KEY));
        assert!(keys.contains(&"coredns.addons.k8s.io"));
    }

    #[test]
    fn dnsmasq_settings_are_compact_json() {
        let (text, _) = render(json!({
            "provider": "KubeDNS",
            "upstreamNameservers": ["8.8.8.8", "1.1.1.1"],
            "stubDomains": {"z.local": ["1.2.3.4"], "a.local": ["5.6.7.8"]},
            "cacheMaxSize": 2000,
            "cpaImage": "example.com/cpa:v1",
        }));
        assert!(
            text.contains("upstreamNameservers: |\n    [\"8.8.8.8\",\"1.1.1.1\"]\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "stubDomains: |\n    {\"a.local\":[\"5.6.7.8\"],\"z.local\":[\"1.2.3.4\"]}\n"
            ),
            "{text}"
        );
        assert!(text.contains("- --cache-size=2000"));
        assert!(text.contains("image: example.com/cpa:v1"));
    }
}
