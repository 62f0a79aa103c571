//! kindnet (`networking.kindnet`): the `kindnet` DaemonSet giving every
//! node its pod routes (and, when asked, network policies, admin network
//! policies with their CRDs, DNS caching, NAT64), and its RBAC.
//!
//! The manifest is kops' own (`kindnet/manifest.yaml`); the context is
//! `spec.networking.kindnet` with kops' defaults: version `v1.0.1`, log
//! level 2, fast-path threshold 0, and, without a `masquerade` block,
//! masquerading on except for the cluster's own ranges (network, pods,
//! services), or off on an IPv6-only cluster.

use serde_json::{json, Value};

use super::networking::{at, cloud_provider, pod_cidr, service_cluster_ip_range, spec, text};
use super::{template, TemplateError};
use crate::Model;

/// The kindnet release kops deploys when `version` is not set.
const VERSION: &str = "v1.0.1";

/// The addon's objects; `None` when the cluster does not run kindnet.
pub(super) fn objects(model: &Model<'_>) -> Result<Option<Vec<Value>>, TemplateError> {
    let spec = spec(model);
    let Some(kindnet) = at(&spec, &["networking", "kindnet"]) else {
        return Ok(None);
    };
    let flag = |key: &str| at(kindnet, &[key]).and_then(Value::as_bool);
    let number = |key: &str, default: i64| {
        at(kindnet, &[key])
            .and_then(Value::as_i64)
            .unwrap_or(default)
    };
    let ipv6_only = model.ipv6_only();
    let aws = cloud_provider(&spec) == Some("aws");
    let (masquerading, cidrs, nat64_default) = match at(kindnet, &["masquerade"]) {
        Some(masquerade) => (
            at(masquerade, &["enabled"])
                .and_then(Value::as_bool)
                .unwrap_or(true),
            at(masquerade, &["nonMasqueradeCIDRs"])
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|c| c.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default(),
            false,
        ),
        None if ipv6_only => (false, Vec::new(), !aws),
        None => {
            let cidrs: Vec<String> = [
                text(&spec, &["networkCIDR"]).map(str::to_string),
                pod_cidr(model),
                Some(service_cluster_ip_range(model)),
            ]
            .into_iter()
            .flatten()
            .collect();
            (true, cidrs, false)
        }
    };
    let context = json!({
        "version": text(kindnet, &["version"]).unwrap_or(VERSION),
        "log_level": number("logLevel", 2),
        "network_policies": flag("networkPolicies"),
        "admin_network_policies": flag("adminNetworkPolicies"),
        "baseline_admin_network_policies": flag("baselineAdminNetworkPolicies"),
        "dns_caching": flag("dnsCaching").unwrap_or(false),
        "nat64": flag("nat64").unwrap_or(nat64_default),
        "fast_path_threshold": number("fastPathThreshold", 0),
        "masquerading": masquerading,
        "non_masquerade_cidrs": cidrs,
    });
    template::render(
        "networking.kindnet",
        include_str!("kindnet/manifest.yaml"),
        &context,
    )
    .map(Some)
}

#[cfg(test)]
mod tests {
    use super::super::manifest;
    use crate::addons::tests::{cluster, compare_golden};
    use crate::security::tests::model;

    const KEY: &str = "networking.kindnet";

    #[test]
    fn identical_to_kops_in_every_golden_case() {
        let (identical, placeholders) = compare_golden(KEY, |_, _| {});
        assert_eq!(placeholders, 0);
        if kops_testkit::shared_dir().is_some() {
            assert!(identical >= 1, "{identical} golden cases");
        }
    }

    fn render(kindnet: serde_json::Value) -> String {
        let (mut cluster, groups) = cluster();
        let networking = cluster.spec.networking.get_or_insert_with(Default::default);
        networking.cni = None;
        networking.kindnet = Some(serde_json::from_value(kindnet).unwrap());
        manifest(&model(&cluster, &groups), KEY).unwrap().unwrap()
    }

    #[test]
    fn policies_and_masquerade_come_from_the_spec() {
        let text = render(serde_json::json!({}));
        assert!(text.contains("- --no-masquerade-cidr=172.20.0.0/16,100.96.0.0/11,100.64.0.0/13\n"));
        assert!(!text.contains("CustomResourceDefinition"));
        assert!(!text.contains("--network-policy"));
        let text = render(serde_json::json!({
            "version": "v1.1.0",
            "networkPolicies": true,
            "adminNetworkPolicies": false,
            "baselineAdminNetworkPolicies": true,
            "masquerade": {"enabled": false},
            "logLevel": 4,
        }));
        assert!(text.contains("- --network-policy=true\n"));
        assert!(text.contains("- --admin-network-policy=false\n"));
        assert!(text.contains("- --masquerading=false\n"));
        assert!(!text.contains("--no-masquerade-cidr"));
        assert!(text.contains("- --v=4\n"));
        assert!(text.contains("kindnet:v1.1.0\n"));
        assert!(text.contains("  name: adminnetworkpolicies.policy.networking.k8s.io\n"));
        assert!(text.contains("  name: baselineadminnetworkpolicies.policy.networking.k8s.io\n"));
        assert!(text.contains("  - baselineadminnetworkpolicies\n"));
        for document in text.split("\n---\n") {
            assert!(document.contains("    role.kubernetes.io/networking: \"1\"\n"));
        }
    }
}
