//! kube-router (`networking.kuberouter`): the `kube-router` DaemonSet that
//! routes pod traffic over BGP, enforces network policies and proxies
//! services, with its ConfigMap (the CNI configuration and the kubeconfig
//! it reads) and RBAC.
//!
//! The manifest is kops' own (`kuberouter/manifest.yaml`); the context is
//! the service range, SELinux for containerd, and
//! `spec.networking.kuberouter.useNFTablesForNetpol` (off unless set).

use serde_json::{json, Value};

use super::networking::{at, label_pods, selinux, service_cluster_ip_range, spec};
use super::{template, TemplateError};
use crate::Model;

/// The addon's objects; `None` when the cluster does not run kube-router.
pub(super) fn objects(model: &Model<'_>) -> Result<Option<Vec<Value>>, TemplateError> {
    let spec = spec(model);
    let Some(kube_router) = at(&spec, &["networking", "kuberouter"]) else {
        return Ok(None);
    };
    let context = json!({
        "service_cluster_ip_range": service_cluster_ip_range(model),
        "selinux": selinux(&spec),
        "use_nftables_for_netpol": at(kube_router, &["useNFTablesForNetpol"])
            .and_then(Value::as_bool)
            .unwrap_or(false),
    });
    let mut objects = template::render(
        "networking.kuberouter",
        include_str!("kuberouter/manifest.yaml"),
        &context,
    )?;
    label_pods(&mut objects);
    Ok(Some(objects))
}

#[cfg(test)]
mod tests {
    use super::super::manifest;
    use crate::addons::tests::cluster;
    use crate::security::tests::model;

    const KEY: &str = "networking.kuberouter";

    #[test]
    fn service_range_nftables_and_selinux_come_from_the_spec() {
        let (mut cluster, groups) = cluster();
        let networking = cluster.spec.networking.get_or_insert_with(Default::default);
        networking.cni = None;
        networking.kuberouter = Some(
            serde_json::from_value(serde_json::json!({"useNFTablesForNetpol": true})).unwrap(),
        );
        let text = manifest(&model(&cluster, &groups), KEY).unwrap().unwrap();
        assert!(text.contains("name: kube-router\n"), "{text}");
        assert!(
            text.contains("- --service-cluster-ip-range=\"100.64.0.0/13\"\n"),
            "{text}"
        );
        assert!(
            text.contains("- --use-nftables-for-netpol=true\n"),
            "{text}"
        );
        assert!(!text.contains("spc_t"), "{text}");
        // kops' value: the CNI configuration without a final line break.
        assert!(text.contains("cni-conf.json: |-\n"), "{text}");
        assert!(text.contains("kops.k8s.io/managed-by: kops\n"), "{text}");
        for document in text.split("\n---\n") {
            assert!(document.contains("    role.kubernetes.io/networking: \"1\"\n"));
        }
        cluster.spec.networking = None;
        assert!(manifest(&model(&cluster, &groups), KEY).unwrap().is_none());
    }
}
