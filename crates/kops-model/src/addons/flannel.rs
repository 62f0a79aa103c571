//! flannel (`networking.flannel`): the `kube-flannel` DaemonSet giving every
//! node a pod subnet of `nonMasqueradeCIDR`, its RBAC and the
//! `kube-flannel-cfg` ConfigMap with the backend (`vxlan` or `udp`).
//!
//! The manifest is kops' own (`flannel/manifest.yaml`); kops defaults an
//! unset `backend` to `udp` and `iptablesResyncSeconds` to 5.

use serde_json::{json, Value};

use super::networking::{at, non_masquerade_cidr, selinux, spec, text};
use super::{template, TemplateError};
use crate::Model;

/// The addon's objects; `None` when the cluster does not run flannel.
pub(super) fn objects(model: &Model<'_>) -> Result<Option<Vec<Value>>, TemplateError> {
    let spec = spec(model);
    let Some(flannel) = at(&spec, &["networking", "flannel"]) else {
        return Ok(None);
    };
    let resync = match at(flannel, &["iptablesResyncSeconds"]) {
        Some(Value::Number(n)) if n.as_i64() != Some(0) => n.to_string(),
        _ => "5".to_string(),
    };
    let context = json!({
        "non_masquerade_cidr": non_masquerade_cidr(model),
        "backend": text(flannel, &["backend"]).unwrap_or("udp"),
        "iptables_resync_seconds": resync,
        "selinux": selinux(&spec),
    });
    template::render(
        "networking.flannel",
        include_str!("flannel/manifest.yaml"),
        &context,
    )
    .map(Some)
}

#[cfg(test)]
mod tests {
    use super::super::manifest;
    use crate::addons::tests::{cluster, compare_golden};
    use crate::security::tests::model;

    const KEY: &str = "networking.flannel";

    #[test]
    fn identical_to_kops_in_every_golden_case() {
        let (identical, placeholders) = compare_golden(KEY, |_, _| {});
        assert_eq!(placeholders, 0);
        if kops_testkit::shared_dir().is_some() {
            assert!(identical >= 1, "{identical} golden cases");
        }
    }

    #[test]
    fn backend_resync_and_selinux_come_from_the_spec() {
        let (mut cluster, groups) = cluster();
        let networking = cluster.spec.networking.get_or_insert_with(Default::default);
        networking.cni = None;
        networking.flannel = Some(
            serde_json::from_value(serde_json::json!({
                "iptablesResyncSeconds": 30
            }))
            .unwrap(),
        );
        cluster.spec.containerd = Some(
            serde_json::from_value(serde_json::json!({
                "seLinuxEnabled": true
            }))
            .unwrap(),
        );
        let text = manifest(&model(&cluster, &groups), KEY).unwrap().unwrap();
        assert!(text.contains("\"Type\": \"udp\""), "{text}");
        assert!(text.contains("- --iptables-resync=30\n"));
        assert!(text.contains("type: spc_t\n"));
        for document in text.split("\n---\n") {
            assert!(document.contains("    role.kubernetes.io/networking: \"1\"\n"));
        }
        cluster.spec.networking = None;
        assert!(manifest(&model(&cluster, &groups), KEY).unwrap().is_none());
    }
}
