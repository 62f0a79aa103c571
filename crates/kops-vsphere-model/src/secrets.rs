//! The Secrets the cluster's vSphere components read their vCenter
//! accounts from (the cloud controller manager, kops-controller and the
//! CSI driver), each with an account of its own.

use std::collections::BTreeMap;

use kops_api::Cluster;
use kops_vsphere::Credentials;

use crate::settings::settings;
use crate::ModelError;

/// The key of vCenter's CA in the CSI driver's Secret, and where the
/// driver (which mounts that Secret at /etc/cloud) reads it.
const CA_KEY: &str = "vcenter-ca.pem";
const CSI_CA_PATH: &str = "/etc/cloud/vcenter-ca.pem";

/// A Secret an in-cluster component reads its vCenter credentials from.
#[derive(Clone)]
pub struct ComponentSecret {
    pub namespace: &'static str,
    pub name: &'static str,
    /// Key → value (written as the Secret's `stringData`).
    pub data: BTreeMap<String, String>,
}

impl std::fmt::Debug for ComponentSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ComponentSecret")
            .field("namespace", &self.namespace)
            .field("name", &self.name)
            .field("keys", &self.data.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// Each in-cluster component's own vCenter account: from the file its
/// variable names, else (`copy_operator`) the operator's own, said in a
/// warning; else none, and the warning says how to give one.
fn component_account(
    var: &str,
    secret: &str,
    component: &str,
    copy_operator: bool,
    warnings: &mut Vec<String>,
) -> Result<Option<Credentials>, ModelError> {
    let lookup = |name: &str| std::env::var(name).ok();
    if let Some(own) = Credentials::from_file_named_by(var, &lookup)? {
        return Ok(Some(own));
    }
    if copy_operator {
        let operator = Credentials::from_env()?;
        warnings.push(format!(
            "copied your own vCenter account `{}` into the Secret {secret} (--vsphere-copy-operator-credentials): it can clone and destroy VMs and read every VM's guestinfo; give the {component} an account of its own in {var} (privileges: docs/vsphere.md)",
            operator.username
        ));
        return Ok(Some(operator));
    }
    warnings.push(format!(
        "the Secret {secret} was not written: the {component} needs a vCenter account of its own\nhint: name a file holding its user and password (two lines) in {var} (privileges: docs/vsphere.md), or pass --vsphere-copy-operator-credentials to copy yours"
    ));
    Ok(None)
}

/// The Secrets the cloud controller manager (and kops-controller) and the
/// CSI driver read, each with the component's own vCenter account
/// ([`component_account`]): `kube-system/vsphere-cloud-secret`
/// (`<host>.username`, `<host>.password`) and
/// `vmware-system-csi/vsphere-config-secret` (`csi-vsphere.conf`). They
/// go to the cluster's API only; never to the state store or a node. A
/// component without an account gets no Secret, and a warning.
pub fn component_secrets(
    cluster: &Cluster,
    copy_operator: bool,
    warnings: &mut Vec<String>,
) -> Result<Vec<ComponentSecret>, ModelError> {
    let settings = settings(cluster)?;
    let cpi_secret = format!("kube-system/{}", kops_model::addons::VSPHERE_CPI_SECRET);
    let csi_secret = format!(
        "vmware-system-csi/{}",
        kops_model::addons::VSPHERE_CSI_SECRET
    );
    let cpi = component_account(
        kops_vsphere::CCM_CREDENTIALS_FILE,
        &cpi_secret,
        "cloud controller manager (and kops-controller)",
        copy_operator,
        warnings,
    )?;
    let csi = component_account(
        kops_vsphere::CSI_CREDENTIALS_FILE,
        &csi_secret,
        "CSI driver",
        copy_operator,
        warnings,
    )?;
    let server = kops_api::new_cluster::VsphereServer::parse(&settings.server);
    let quoted = |v: &str| format!("\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\""));
    let mut secrets = Vec::new();
    if let Some(account) = cpi {
        secrets.push(ComponentSecret {
            namespace: "kube-system",
            name: kops_model::addons::VSPHERE_CPI_SECRET,
            data: BTreeMap::from([
                (format!("{}.username", server.host), account.username),
                (format!("{}.password", server.host), account.password),
            ]),
        });
    }
    let Some(account) = csi else {
        return Ok(secrets);
    };
    let mut conf = format!(
        "[Global]\ncluster-id = {}\n\n[VirtualCenter {}]\ninsecure-flag = \"{}\"\nuser = {}\npassword = {}\nport = \"{}\"\ndatacenters = {}\n",
        quoted(cluster.name()),
        quoted(&server.host),
        server.insecure,
        quoted(&account.username),
        quoted(&account.password),
        server.port,
        quoted(&settings.placement.datacenter),
    );
    // The CSI driver checks vCenter's certificate as kops-rs does: pinned
    // by its thumbprint, or against the spec's CA (a file next to the
    // config in the same Secret).
    let mut data = BTreeMap::new();
    match &settings.trust {
        kops_vsphere::trust::Trust::Thumbprint(pin) => {
            conf.push_str(&format!(
                "thumbprint = {}\n",
                quoted(&kops_vsphere::trust::format_thumbprint(pin))
            ));
        }
        kops_vsphere::trust::Trust::Ca(pem) => {
            conf.push_str(&format!("ca-file = {}\n", quoted(CSI_CA_PATH)));
            data.insert(CA_KEY.to_string(), pem.clone());
        }
        kops_vsphere::trust::Trust::System => {}
    }
    data.insert("csi-vsphere.conf".to_string(), conf);
    secrets.push(ComponentSecret {
        namespace: "vmware-system-csi",
        name: kops_model::addons::VSPHERE_CSI_SECRET,
        data,
    });
    Ok(secrets)
}
