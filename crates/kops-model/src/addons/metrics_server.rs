//! metrics-server (`metrics-server.addons.k8s.io`), which serves the
//! `metrics.k8s.io` API (`kubectl top`, horizontal pod autoscaling) from the
//! kubelets' resource metrics.
//!
//! From `spec.metricsServer`: `image`, and `insecure` (default true: the
//! API server skips verifying metrics-server's certificate and
//! metrics-server skips the kubelets'; false serves a cert-manager
//! certificate instead). Kubelets are reached by host name on AWS, by
//! internal address on IPv6-only clusters (whose host names resolve to
//! IPv4 addresses only).

use serde_json::{json, Value};

use super::{template, TemplateError};
use crate::Model;

const TEMPLATE: &str = include_str!("metrics_server/manifest.yaml");
/// The image kops deploys unless `spec.metricsServer.image` says.
const IMAGE: &str = "registry.k8s.io/metrics-server/metrics-server:v0.8.0";

pub(super) fn objects(model: &Model<'_>) -> Result<Option<Vec<Value>>, TemplateError> {
    let spec = model
        .cluster
        .spec
        .metrics_server
        .clone()
        .unwrap_or_default();
    let image = spec
        .extra
        .get("image")
        .and_then(Value::as_str)
        .filter(|i| !i.is_empty())
        .unwrap_or(IMAGE);
    let insecure = spec
        .extra
        .get("insecure")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    // Hostnames resolve only on AWS (its instance names).
    let on_aws = model.cluster.spec.cloud_provider.as_deref() != Some("gce");
    let address_type = if model.ipv6_only() || !on_aws {
        "InternalIP"
    } else {
        "Hostname"
    };
    let context = json!({
        "image": image,
        "insecure": insecure,
        "address_type": address_type,
    });
    template::render("metrics-server.addons.k8s.io", TEMPLATE, &context).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addons::tests::{cluster, compare_golden};
    use crate::security::tests::model;

    const KEY: &str = "metrics-server.addons.k8s.io";

    #[test]
    fn identical_to_kops_in_every_case() {
        let (identical, placeholders) = compare_golden(KEY, |_, _| {});
        assert_eq!(placeholders, 0);
        if kops_testkit::shared_dir().is_some() {
            assert!(identical > 0);
        }
    }

    #[test]
    fn secure_mode_serves_a_cert_manager_certificate() {
        let (mut cluster, groups) = cluster();
        cluster.spec.metrics_server =
            Some(serde_json::from_value(json!({"enabled": true, "insecure": false})).unwrap());
        let model = model(&cluster, &groups);
        let objects = objects(&model).unwrap().unwrap();
        let text = serde_json::to_string(&objects).unwrap();
        assert!(text.contains("\"kind\":\"Certificate\""));
        assert!(text.contains("--tls-cert-file=/srv/tls.crt"));
        assert!(!text.contains("--kubelet-insecure-tls"));
        assert!(!text.contains("insecureSkipTLSVerify"));
    }
}
