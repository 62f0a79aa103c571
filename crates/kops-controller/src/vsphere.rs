//! Who is asking, on vSphere: the verifier of a VM's one-time bootstrap
//! token (see [`kops_vsphere::proof`]). The VM is found by the BIOS UUID
//! the node names, must carry this cluster's marker and still hold its
//! token; the MAC of the request body keyed with that token must match.
//! The token is then removed from the VM, so it proves one join only.
//! Checks run one at a time (a mutex), so two copies of one request cannot
//! both pass before the token is gone.

use kops_vsphere::client::MoRef;
use kops_vsphere::vcenter::{extra_config, Vcenter};
use kops_vsphere::{proof, CLUSTER_KEY, GROUP_KEY, TOKEN_KEY};

use crate::verify::NodeIdentity;

/// Why a vSphere node was refused (logged; the node learns nothing more).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum VsphereRefusal {
    #[error("malformed vSphere bootstrap header")]
    Malformed,
    #[error("no VM has BIOS UUID `{0}`")]
    NoVm(String),
    #[error("VM `{vm}` is not part of cluster `{cluster}`")]
    NotInCluster { vm: String, cluster: String },
    #[error("VM `{0}` holds no bootstrap token (already used: a replay)")]
    Used(String),
    #[error("the proof does not match VM `{0}`'s token (forged)")]
    Forged(String),
    #[error("vCenter: {0}")]
    Vcenter(String),
}

/// The verifier of one cluster's controller on vSphere.
pub struct VsphereVerifier {
    cluster: String,
    vcenter: Vcenter,
    datacenter: MoRef,
    lock: tokio::sync::Mutex<()>,
}

impl VsphereVerifier {
    /// `vcenter` is a logged-in session (credentials from the Secret the
    /// controller is given, never from a node); `datacenter` the cluster's.
    pub async fn new(
        cluster: &str,
        vcenter: Vcenter,
        datacenter: &str,
    ) -> Result<VsphereVerifier, String> {
        let datacenter = vcenter
            .find_path(datacenter)
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("datacenter `{datacenter}` does not exist"))?;
        Ok(VsphereVerifier {
            cluster: cluster.to_string(),
            vcenter,
            datacenter,
            lock: tokio::sync::Mutex::new(()),
        })
    }

    /// Checks `authorization` for a request with `body`.
    pub async fn verify(
        &self,
        authorization: &str,
        body: &[u8],
    ) -> Result<NodeIdentity, VsphereRefusal> {
        let (uuid, mac) = proof::parse(authorization).ok_or(VsphereRefusal::Malformed)?;
        let vcenter_error = |e: kops_vsphere::VsphereError| VsphereRefusal::Vcenter(e.to_string());
        let _one_at_a_time = self.lock.lock().await;
        let vm = self
            .vcenter
            .find_vm_by_uuid(&self.datacenter, uuid)
            .await
            .map_err(vcenter_error)?
            .ok_or_else(|| VsphereRefusal::NoVm(uuid.to_string()))?;
        let properties = self
            .vcenter
            .properties(&vm, &["name", "config.extraConfig"])
            .await
            .map_err(vcenter_error)?;
        let name = properties
            .get("name")
            .map(|n| n.text.trim().to_string())
            .unwrap_or_default();
        let extra = extra_config(properties.get("config.extraConfig"));
        if extra.get(CLUSTER_KEY) != Some(&self.cluster) {
            return Err(VsphereRefusal::NotInCluster {
                vm: name,
                cluster: self.cluster.clone(),
            });
        }
        let token = extra
            .get(TOKEN_KEY)
            .ok_or_else(|| VsphereRefusal::Used(name.clone()))?;
        if !proof::matches(token, body, mac) {
            // A wrong proof leaves the token: guessing cannot stop the VM
            // from joining.
            return Err(VsphereRefusal::Forged(name));
        }
        self.vcenter
            .set_extra_config(&vm, &[(TOKEN_KEY, "")])
            .await
            .map_err(vcenter_error)?;
        Ok(NodeIdentity {
            node_name: name.clone(),
            instance_id: format!("vsphere://{}", uuid.to_ascii_lowercase()),
            instance_group: extra.get(GROUP_KEY).cloned().unwrap_or_default(),
            certificate_names: vec![name],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kops_testkit::vcsim::{self, Vcsim};
    use kops_vsphere::cluster::{self, GroupSpec, Placement};
    use kops_vsphere::Credentials;

    async fn login(sim: &Vcsim) -> Vcenter {
        let credentials = Credentials {
            username: vcsim::USER.into(),
            password: vcsim::PASSWORD.into(),
        };
        Vcenter::login(sim.url(), &credentials).await.unwrap()
    }

    /// Clones one worker VM of `cluster` into the folder `joins`.
    async fn worker(vc: &Vcenter, cluster: &str) {
        let placement = Placement {
            datacenter: vcsim::DATACENTER.into(),
            folder: "joins".into(),
            resource_pool: vcsim::CLUSTER.into(),
            datastore: vcsim::DATASTORE.into(),
            network: None,
        };
        let groups = [GroupSpec {
            name: "nodes".into(),
            template: vcsim::TEMPLATE.into(),
            count: 1,
            cpus: 2,
            memory_mb: 4096,
            user_data: "#!/bin/bash\n".into(),
        }];
        let resolved = cluster::resolve(vc, &placement, &groups).await.unwrap();
        cluster::update(vc, cluster, &placement, resolved, &groups, true)
            .await
            .unwrap();
    }

    /// What the node reads inside the VM: its BIOS UUID and its token.
    async fn node_view(vc: &Vcenter, vm: &str) -> (String, Option<String>) {
        let folder = vc.find_path("DC0/vm/joins").await.unwrap().unwrap();
        let found = vc
            .children(
                &folder,
                "VirtualMachine",
                &["name", "config.uuid", "config.extraConfig"],
            )
            .await
            .unwrap();
        let (_, p) = found
            .into_iter()
            .find(|(_, p)| p["name"].text == vm)
            .unwrap();
        let extra = extra_config(p.get("config.extraConfig"));
        (p["config.uuid"].text.clone(), extra.get(TOKEN_KEY).cloned())
    }

    #[tokio::test]
    async fn a_worker_joins_once_and_others_are_refused() {
        if !vcsim::vcsim_available() {
            return;
        }
        let sim = Vcsim::start().unwrap();
        let vc = login(&sim).await;
        worker(&vc, "a.k8s.local").await;
        worker(&vc, "b.k8s.local").await;
        let verifier = VsphereVerifier::new("a.k8s.local", login(&sim).await, vcsim::DATACENTER)
            .await
            .unwrap();
        let body = br#"{"apiVersion":"bootstrap.kops.k8s.io/v1alpha1","kind":"BootstrapRequest"}"#;

        // A VM of another cluster, with its own valid token: refused, and
        // its token stays.
        let (other_uuid, other_token) = node_view(&vc, "nodes-1.b.k8s.local").await;
        let other_token = other_token.unwrap();
        let refused = verifier
            .verify(&proof::authorization(&other_uuid, &other_token, body), body)
            .await;
        assert!(
            matches!(refused, Err(VsphereRefusal::NotInCluster { .. })),
            "{refused:?}"
        );

        // A forged proof for this cluster's VM: refused, the token stays.
        let (uuid, token) = node_view(&vc, "nodes-1.a.k8s.local").await;
        let token = token.unwrap();
        let forged = verifier
            .verify(&proof::authorization(&uuid, &"0".repeat(64), body), body)
            .await;
        assert_eq!(
            forged,
            Err(VsphereRefusal::Forged("nodes-1.a.k8s.local".into()))
        );
        // The right token over another body is forged too.
        let header = proof::authorization(&uuid, &token, body);
        assert!(matches!(
            verifier.verify(&header, b"{}").await,
            Err(VsphereRefusal::Forged(_))
        ));
        assert_eq!(
            node_view(&vc, "nodes-1.a.k8s.local").await.1,
            Some(token.clone())
        );

        // The worker joins.
        let identity = verifier.verify(&header, body).await.unwrap();
        assert_eq!(identity.node_name, "nodes-1.a.k8s.local");
        assert_eq!(identity.instance_group, "nodes");
        assert_eq!(
            identity.instance_id,
            format!("vsphere://{}", uuid.to_ascii_lowercase())
        );
        // Its token is gone from the VM: the same request again is a replay.
        assert_eq!(node_view(&vc, "nodes-1.a.k8s.local").await.1, None);
        let replayed = verifier.verify(&header, body).await;
        assert_eq!(
            replayed,
            Err(VsphereRefusal::Used("nodes-1.a.k8s.local".into()))
        );

        // No such VM, and a malformed header.
        let unknown = verifier
            .verify(&proof::authorization("0000-1111", &token, body), body)
            .await;
        assert!(
            matches!(unknown, Err(VsphereRefusal::NoVm(_))),
            "{unknown:?}"
        );
        assert_eq!(
            verifier.verify("Bearer x", body).await,
            Err(VsphereRefusal::Malformed)
        );
    }
}
