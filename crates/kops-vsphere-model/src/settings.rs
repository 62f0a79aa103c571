//! A vSphere cluster's vCenter and placement, read from its spec
//! (`spec.cloudConfig`), with one error per missing or refused field.

use kops_api::Cluster;
use kops_vsphere::cluster::Placement;
use kops_vsphere::vcenter::Vcenter;
use kops_vsphere::Credentials;

use crate::ModelError;

#[derive(Debug, Clone)]
pub struct Settings {
    pub server: String,
    /// Which certificate vCenter may present.
    pub trust: kops_vsphere::trust::Trust,
    pub placement: Placement,
}

/// The vSphere settings of `cluster`; an error naming the missing field,
/// or refusing credentials written in the spec (kops 1.17 kept them there).
pub fn settings(cluster: &Cluster) -> Result<Settings, ModelError> {
    let config = cluster.spec.cloud_config.clone().unwrap_or_default();
    if config.vsphere_username.is_some() || config.vsphere_password.is_some() {
        return Err(spec_error(
            "spec.cloudConfig.vSphereUsername/vSpherePassword",
            "holds vCenter credentials, which kops-rs never reads from or writes to a spec",
            "remove them with `kops edit cluster` and export VSPHERE_USERNAME and VSPHERE_PASSWORD instead",
        ));
    }
    let need = |value: Option<String>, field: &str, flag: &str| {
        value.filter(|v| !v.trim().is_empty()).ok_or_else(|| {
            spec_error(
                &format!("spec.cloudConfig.{field}"),
                "is required for vSphere",
                &format!("set it with `kops edit cluster` (`create cluster` takes {flag})"),
            )
        })
    };
    let trust = kops_vsphere::trust::Trust::from_spec(
        config.vsphere_thumbprint.as_deref(),
        config.vsphere_ca_certificate.as_deref(),
    )
    .map_err(|message| {
        ModelError::Spec(vec![kops_api::FieldError::new("spec.cloudConfig", message)
            .hint("fix it with `kops edit cluster`")])
    })?;
    Ok(Settings {
        server: need(config.vsphere_server, "vSphereServer", "--vsphere-server")?,
        trust,
        placement: Placement {
            datacenter: need(
                config.vsphere_datacenter,
                "vSphereDatacenter",
                "--vsphere-datacenter",
            )?,
            resource_pool: need(
                config.vsphere_resource_pool,
                "vSphereResourcePool",
                "--vsphere-resource-pool",
            )?,
            datastore: need(
                config.vsphere_datastore,
                "vSphereDatastore",
                "--vsphere-datastore",
            )?,
            folder: config
                .vsphere_folder
                .filter(|f| !f.trim().is_empty())
                .unwrap_or_else(|| cluster.name().to_string()),
            network: config.vsphere_network.filter(|n| !n.trim().is_empty()),
        },
    })
}

/// One refused field of the spec, with its fix.
pub(crate) fn spec_error(field: &str, message: &str, hint: &str) -> ModelError {
    ModelError::Spec(vec![kops_api::FieldError::new(field, message).hint(hint)])
}

/// Without DNS, the control plane's virtual IP is the only API address
/// nodes can have: `update` requires it (`delete` and `get` do not).
pub fn require_api_address(cluster: &Cluster) -> Result<(), ModelError> {
    let config = cluster.spec.cloud_config.clone().unwrap_or_default();
    let no_dns = cluster
        .spec
        .topology
        .as_ref()
        .and_then(|t| t.dns.as_ref())
        .and_then(|d| d.kind.as_deref())
        .is_none_or(|kind| kind == "None");
    let vip = config
        .vsphere_control_plane_vip
        .as_deref()
        .is_some_and(|v| !v.trim().is_empty());
    if no_dns && !vip {
        return Err(spec_error(
            "spec.cloudConfig.vSphereControlPlaneVIP",
            "is required for a vSphere cluster without DNS (spec.networking.topology.dns: None): nodes would have no API address",
            "set a free address of the VMs' network with `kops edit cluster` (`create cluster` takes --vsphere-control-plane-vip); kube-vip holds it on a control-plane VM",
        ));
    }
    Ok(())
}

/// Logs in to the cluster's vCenter with the environment's credentials.
pub async fn connect(settings: &Settings) -> Result<Vcenter, ModelError> {
    let credentials = Credentials::from_env()?;
    Ok(Vcenter::login_with(&settings.server, &settings.trust, &credentials).await?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::cluster;

    #[test]
    fn settings_from_a_kops_1_17_spec() {
        let c = cluster(
            "    vSphereServer: vc.example.com\n    vSphereDatacenter: DC0\n    vSphereResourcePool: C0\n    vSphereDatastore: ds\n    vSphereCoreDNSServer: http://10.0.0.2:2379\n",
        );
        // Without DNS, the control plane's virtual IP is the API address.
        settings(&c).unwrap();
        let e = require_api_address(&c).unwrap_err().to_string();
        assert!(
            e.contains("spec.cloudConfig.vSphereControlPlaneVIP")
                && e.contains("--vsphere-control-plane-vip"),
            "{e}"
        );
        let c = cluster(
            "    vSphereServer: vc.example.com\n    vSphereDatacenter: DC0\n    vSphereResourcePool: C0\n    vSphereDatastore: ds\n    vSphereControlPlaneVIP: 10.0.0.100\n",
        );
        require_api_address(&c).unwrap();
        let s = settings(&c).unwrap();
        assert_eq!(s.server, "vc.example.com");
        assert_eq!(s.placement.folder, "c.k8s.local");
        assert_eq!(s.placement.network, None);
    }

    #[test]
    fn credentials_in_a_spec_and_missing_fields_are_refused() {
        let c = cluster(
            "    vSphereServer: vc\n    vSphereDatacenter: DC0\n    vSphereResourcePool: C0\n    vSphereDatastore: ds\n    vSphereUsername: admin\n    vSpherePassword: secret\n",
        );
        let e = settings(&c).unwrap_err().to_string();
        assert!(
            e.contains("VSPHERE_USERNAME") && !e.contains("secret"),
            "{e}"
        );
        let c = cluster("    vSphereServer: vc\n");
        let e = settings(&c).unwrap_err().to_string();
        assert!(e.contains("vSphereDatacenter"), "{e}");
    }
}
