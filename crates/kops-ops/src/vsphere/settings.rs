//! A vSphere cluster's vCenter and placement, read from its spec
//! (`spec.cloudConfig`), with one error per missing or refused field.

use kops_api::Cluster;
use kops_vsphere::cluster::Placement;

use crate::OpsError;

#[derive(Debug, Clone)]
pub struct Settings {
    pub server: String,
    /// Which certificate vCenter may present.
    pub trust: kops_vsphere::trust::Trust,
    pub placement: Placement,
}

/// The vSphere settings of `cluster`; an error naming the missing field,
/// or refusing credentials written in the spec (kops 1.17 kept them there).
pub fn settings(cluster: &Cluster) -> Result<Settings, OpsError> {
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
        OpsError::Flags(vec![kops_api::FieldError::new("spec.cloudConfig", message)
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

pub(crate) fn spec_error(field: &str, message: &str, hint: &str) -> OpsError {
    OpsError::Flags(vec![kops_api::FieldError::new(field, message).hint(hint)])
}
