//! vSphere's addons: the cloud controller manager
//! (`vsphere-cloud-controller.addons.k8s.io`, cloud-provider-vsphere) and
//! the CSI driver (`vsphere-csi-driver.addons.k8s.io`). Their configs name
//! the cluster's vCenter and datacenter and point at Secrets the operator
//! creates (`kube-system/vsphere-cloud-secret`,
//! `vmware-system-csi/vsphere-config-secret`): kops-rs never holds vCenter
//! credentials, so no manifest carries them.

use serde_json::{json, Value};

use super::{template, TemplateError};
use crate::Model;

/// The cloud controller manager's image.
const CPI_IMAGE: &str = "registry.k8s.io/cloud-pv-vsphere/cloud-provider-vsphere:v1.31.0";
/// The Secret holding the vCenter credentials for the cloud controller
/// manager (and kops-controller): `<server>.username`, `<server>.password`.
pub const CPI_SECRET: &str = "vsphere-cloud-secret";
/// The Secret holding the CSI driver's `csi-vsphere.conf`.
pub const CSI_SECRET: &str = "vsphere-config-secret";

/// The vCenter server and datacenter of the spec.
fn vcenter(model: &Model<'_>) -> (String, String) {
    let config = model.cluster.spec.cloud_config.clone().unwrap_or_default();
    (
        config.vsphere_server.unwrap_or_default(),
        config.vsphere_datacenter.unwrap_or_default(),
    )
}

/// The cloud controller manager's objects.
pub(super) fn cloud_controller(model: &Model<'_>) -> Result<Option<Vec<Value>>, TemplateError> {
    let (server, datacenter) = vcenter(model);
    let config = model.cluster.spec.cloud_config.clone().unwrap_or_default();
    let thumbprint = config
        .vsphere_thumbprint
        .filter(|t| !t.trim().is_empty())
        .unwrap_or_default();
    let ca = config
        .vsphere_ca_certificate
        .filter(|c| !c.trim().is_empty())
        .unwrap_or_default();
    let kops_api::new_cluster::VsphereServer {
        host,
        port,
        insecure,
    } = kops_api::new_cluster::VsphereServer::parse(&server);
    let context = json!({
        "image": CPI_IMAGE,
        "server": host,
        "port": port,
        "insecure": insecure,
        "datacenter": datacenter,
        "secret": CPI_SECRET,
        "thumbprint": thumbprint,
        "ca": ca,
    });
    template::render(
        "vsphere-cloud-controller.addons.k8s.io",
        include_str!("vsphere_cloud_controller/manifest.yaml"),
        &context,
    )
    .map(Some)
}

/// The CSI driver's objects.
pub(super) fn csi_driver() -> Result<Option<Vec<Value>>, TemplateError> {
    let context = json!({
        "secret": CSI_SECRET,
        "images": {
            "driver": "registry.k8s.io/csi-vsphere/driver:v3.3.1",
            "syncer": "registry.k8s.io/csi-vsphere/syncer:v3.3.1",
            "attacher": "registry.k8s.io/sig-storage/csi-attacher:v4.5.1",
            "resizer": "registry.k8s.io/sig-storage/csi-resizer:v1.10.1",
            "provisioner": "registry.k8s.io/sig-storage/csi-provisioner:v4.0.1",
            "livenessprobe": "registry.k8s.io/sig-storage/livenessprobe:v2.12.0",
            "registrar": "registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.10.1",
        },
    });
    template::render(
        "vsphere-csi-driver.addons.k8s.io",
        include_str!("vsphere_csi_driver/manifest.yaml"),
        &context,
    )
    .map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vsphere_model_cluster() -> (kops_api::Cluster, Vec<kops_api::InstanceGroup>) {
        let cluster: kops_api::Cluster = serde_yaml_ng::from_str(
            "apiVersion: kops.k8s.io/v1alpha2\nkind: Cluster\nmetadata:\n  name: c1.k8s.local\nspec:\n  cloudProvider: vsphere\n  kubernetesVersion: 1.33.0\n  cloudConfig:\n    vSphereServer: vcenter.example.com\n    vSphereDatacenter: DC0\n    vSphereResourcePool: C0\n    vSphereDatastore: ds\n    vSphereControlPlaneVIP: 10.0.0.100\n",
        )
        .unwrap();
        (cluster, Vec::new())
    }

    #[test]
    fn vsphere_addons_render_and_point_at_secrets() {
        let (cluster, groups) = vsphere_model_cluster();
        let model = Model {
            cluster: &cluster,
            groups: &groups,
            ssh_public_key: None,
            node_inputs: None,
            account_id: None,
            config_base: "memfs://s/c1.k8s.local",
        };
        for key in [
            "vsphere-cloud-controller.addons.k8s.io",
            "vsphere-csi-driver.addons.k8s.io",
        ] {
            let text = super::super::manifest(&model, key).unwrap().unwrap();
            assert!(!text.contains("{{"), "{key}: unrendered\n{text}");
            let lower = text.to_ascii_lowercase();
            assert!(
                !lower.contains("password:") && !lower.contains("username:"),
                "{key} carries credentials"
            );
        }
        let cpi = super::super::manifest(&model, "vsphere-cloud-controller.addons.k8s.io")
            .unwrap()
            .unwrap();
        assert!(cpi.contains("secretName: vsphere-cloud-secret"), "{cpi}");
        assert!(cpi.contains("vcenter.example.com:"), "{cpi}");
        assert!(cpi.contains("- DC0"), "{cpi}");
        assert!(
            cpi.contains("--cloud-config=/etc/cloud/vsphere.conf"),
            "{cpi}"
        );
        let csi = super::super::manifest(&model, "vsphere-csi-driver.addons.k8s.io")
            .unwrap()
            .unwrap();
        assert!(csi.contains("secretName: vsphere-config-secret"), "{csi}");
        assert!(csi.contains("name: csi.vsphere.vmware.com"), "{csi}");

        // vCenter's certificate: pinned, or checked against the spec's CA.
        let mut pinned = cluster.clone();
        pinned
            .spec
            .cloud_config
            .as_mut()
            .unwrap()
            .vsphere_thumbprint =
            Some("0A:1B:2C:3D:4E:5F:60:71:82:93:A4:B5:C6:D7:E8:F9:00:11:22:33".into());
        let model_pinned = Model {
            cluster: &pinned,
            ..model.clone()
        };
        let cpi = super::super::manifest(&model_pinned, "vsphere-cloud-controller.addons.k8s.io")
            .unwrap()
            .unwrap();
        assert!(
            cpi.contains(
                r#"thumbprint: "0A:1B:2C:3D:4E:5F:60:71:82:93:A4:B5:C6:D7:E8:F9:00:11:22:33""#
            ),
            "{cpi}"
        );
        let mut with_ca = cluster.clone();
        with_ca
            .spec
            .cloud_config
            .as_mut()
            .unwrap()
            .vsphere_ca_certificate =
            Some("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".into());
        let model_ca = Model {
            cluster: &with_ca,
            ..model.clone()
        };
        let cpi = super::super::manifest(&model_ca, "vsphere-cloud-controller.addons.k8s.io")
            .unwrap()
            .unwrap();
        assert!(cpi.contains("caFile: /etc/cloud/vcenter-ca.pem"), "{cpi}");
        assert!(cpi.contains("vcenter-ca.pem: |"), "{cpi}");

        // Both are in a vSphere cluster's bootstrap channel.
        let keys: Vec<&str> = crate::files::addons(&model).iter().map(|a| a.key).collect();
        assert!(
            keys.contains(&"vsphere-cloud-controller.addons.k8s.io"),
            "{keys:?}"
        );
        assert!(
            keys.contains(&"vsphere-csi-driver.addons.k8s.io"),
            "{keys:?}"
        );
    }
}
