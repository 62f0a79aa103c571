//! What a kops cluster spec means on VMware vSphere, above kops-vsphere's
//! client floor (its SOAP client, the VMs and disks it reconciles): the
//! vCenter and placement a spec names (`settings`), the VMs and etcd disks
//! its instance groups ask for (`groups`), the Secrets of the components
//! that talk to vCenter (`secrets`), the state-store key control-plane VMs
//! carry (`store_key`), and the running cluster as kops-cloud's
//! [`kops_cloud::Provider`] (`instances`). kops-ops turns the state store
//! into these inputs (the keys, nodeup and the user data) and back; this
//! crate reads no store and prints nothing.

mod error;
pub mod groups;
pub mod instances;
pub mod secrets;
pub mod settings;
pub mod store_key;

pub use error::ModelError;

#[cfg(test)]
pub(crate) mod test_support {
    /// A vSphere cluster whose `spec.cloudConfig` is `yaml` (indented four
    /// spaces) and whatever spec follows it.
    pub(crate) fn cluster(yaml: &str) -> kops_api::Cluster {
        let text = format!(
            "apiVersion: kops.k8s.io/v1alpha2\nkind: Cluster\nmetadata:\n  name: c.k8s.local\nspec:\n  cloudProvider: vsphere\n  cloudConfig:\n{yaml}"
        );
        serde_yaml_ng::from_str(&text).unwrap()
    }
}
