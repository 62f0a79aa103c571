//! Who is asking, on vSphere: the verifier of a VM's one-time bootstrap
//! token (see [`kops_vsphere::proof`]). The VM is found by the BIOS UUID
//! the node names, must carry this cluster's marker and still hold its
//! token; the MAC of the request body keyed with that token must match.
//! The token is then removed from the VM, so it proves one join only.
//! Checks run one at a time (a mutex), so two copies of one request cannot
//! both pass before the token is gone.

use std::path::PathBuf;

use k8s_openapi::api::core::v1::Secret;
use kops_vsphere::client::MoRef;
use kops_vsphere::trust::Trust;
use kops_vsphere::vcenter::{extra_config, Vcenter};
use kops_vsphere::{proof, Credentials, CLUSTER_KEY, GROUP_KEY, TOKEN_KEY};

use crate::identity::NodeIdentity;
use crate::refusal::Refusal;
pub use crate::refusal::VsphereRefusal;
use crate::verifier::Verifier;
use kops_bootstrap::config::VsphereOptions;

/// The Secret of `kube-system` holding the vCenter credentials in the
/// vSphere cloud provider's format (`<host>.username`,
/// `<host>.password`): the controller reads it when no credentials file
/// is mounted; the cloud controller manager reads the same Secret.
pub const CREDENTIALS_SECRET: &str = "vsphere-cloud-secret";

/// Where the controller's vCenter credentials come from.
pub enum CredentialSource {
    /// Given (tests).
    Given(Credentials),
    /// A file mounted on the control plane (two lines: user, password),
    /// else the [`CREDENTIALS_SECRET`] Secret once the controller has a
    /// Kubernetes client ([`VsphereVerifier::read_secrets_from`]).
    Mounted(PathBuf),
}

/// How long a logout after a fault may take (best effort).
const LOGOUT_WITHIN: std::time::Duration = std::time::Duration::from_secs(3);

/// A logged-in vCenter session and the cluster's datacenter in it.
struct Session {
    vcenter: Vcenter,
    datacenter: MoRef,
}

/// The verifier of one cluster's controller on vSphere. It logs in to
/// vCenter at the first request (so the controller starts before its
/// credentials are in place: nodes are told to retry meanwhile) and again
/// after vCenter failed (an expired session).
pub struct VsphereVerifier {
    cluster: String,
    server: String,
    datacenter: String,
    credentials: CredentialSource,
    /// Which certificate vCenter must present; an error (a spec field that
    /// does not parse) fails every login with its line.
    trust: Result<Trust, String>,
    secrets: std::sync::OnceLock<kube::Api<Secret>>,
    /// Held through a whole check: one check at a time.
    session: tokio::sync::Mutex<Option<Session>>,
}

impl VsphereVerifier {
    /// The verifier of `cluster` for the VMs of `datacenter` in the
    /// vCenter `server`.
    pub fn new(
        cluster: &str,
        server: &str,
        datacenter: &str,
        credentials: CredentialSource,
    ) -> VsphereVerifier {
        VsphereVerifier {
            cluster: cluster.to_string(),
            server: server.to_string(),
            datacenter: datacenter.to_string(),
            credentials,
            trust: Ok(Trust::System),
            secrets: std::sync::OnceLock::new(),
            session: tokio::sync::Mutex::new(None),
        }
    }

    /// The verifier a controller's options describe.
    pub fn from_options(cluster: &str, options: &VsphereOptions) -> VsphereVerifier {
        let file = if options.credentials_file.is_empty() {
            kops_bootstrap::config::VSPHERE_CREDENTIALS_FILE
        } else {
            options.credentials_file.as_str()
        };
        let mut verifier = Self::new(
            cluster,
            &options.server,
            &options.datacenter,
            CredentialSource::Mounted(PathBuf::from(file)),
        );
        verifier.trust = Trust::from_spec(
            options.thumbprint.as_deref(),
            options.ca_certificate.as_deref(),
        );
        verifier
    }

    /// Without a credentials file, read them from the
    /// [`CREDENTIALS_SECRET`] Secret through `secrets` (of `kube-system`).
    pub fn read_secrets_from(&self, secrets: kube::Api<Secret>) {
        let _ = self.secrets.set(secrets);
    }

    async fn credentials(&self) -> Result<Credentials, String> {
        let path = match &self.credentials {
            CredentialSource::Given(c) => return Ok(c.clone()),
            CredentialSource::Mounted(path) => path,
        };
        if path.exists() {
            let name = path.display().to_string();
            return Credentials::from_lookup(|key| {
                (key == "VSPHERE_CREDENTIALS_FILE").then(|| name.clone())
            })
            .map_err(|e| e.to_string());
        }
        let Some(secrets) = self.secrets.get() else {
            return Err(format!(
                "no vCenter credentials: mount them at {} (two lines: user, password) or create the Secret kube-system/{CREDENTIALS_SECRET}",
                path.display()
            ));
        };
        let secret = secrets
            .get_opt(CREDENTIALS_SECRET)
            .await
            .map_err(|e| format!("cannot read Secret kube-system/{CREDENTIALS_SECRET}: {e}"))?
            .ok_or_else(|| {
                format!(
                    "no vCenter credentials: neither {} nor the Secret kube-system/{CREDENTIALS_SECRET} exists",
                    path.display()
                )
            })?;
        let data = secret.data.unwrap_or_default();
        let field = |suffix: &str| {
            // Keyed by host, as the cloud controller manager reads it.
            let key = format!(
                "{}.{suffix}",
                kops_api::new_cluster::VsphereServer::parse(&self.server).host
            );
            data.get(&key)
                .map(|v| String::from_utf8_lossy(&v.0).trim().to_string())
                .filter(|v| !v.is_empty())
                .ok_or_else(|| format!("Secret kube-system/{CREDENTIALS_SECRET} has no `{key}`"))
        };
        Ok(Credentials {
            username: field("username")?,
            password: field("password")?,
        })
    }

    async fn login(&self) -> Result<Session, String> {
        let credentials = self.credentials().await?;
        let trust = self.trust.clone()?;
        let vcenter = Vcenter::login_with(&self.server, &trust, &credentials)
            .await
            .map_err(|e| first_line(&e.to_string()))?;
        let datacenter = vcenter
            .find_path(&self.datacenter)
            .await
            .map_err(|e| first_line(&e.to_string()))?
            .ok_or_else(|| format!("datacenter `{}` does not exist", self.datacenter))?;
        Ok(Session {
            vcenter,
            datacenter,
        })
    }

    /// Checks `authorization` for a request with `body`.
    pub async fn verify(
        &self,
        authorization: &str,
        body: &[u8],
    ) -> Result<NodeIdentity, VsphereRefusal> {
        let (uuid, mac) = proof::parse(authorization).ok_or(VsphereRefusal::Malformed)?;
        let mut session = self.session.lock().await;
        if session.is_none() {
            *session = Some(self.login().await.map_err(VsphereRefusal::Vcenter)?);
        }
        let current = session.as_ref().expect("logged in above");
        let result = self.check(current, uuid, mac, body).await;
        if matches!(result, Err(VsphereRefusal::Vcenter(_))) {
            // Log in again next time (the session may have expired). End
            // this one first, briefly: vCenter keeps sessions until they
            // time out, and a fault should not leave them piling up.
            if let Some(old) = session.take() {
                let _ = tokio::time::timeout(LOGOUT_WITHIN, old.vcenter.logout()).await;
            }
        }
        result
    }

    async fn check(
        &self,
        session: &Session,
        uuid: &str,
        mac: &str,
        body: &[u8],
    ) -> Result<NodeIdentity, VsphereRefusal> {
        let vcenter_error =
            |e: kops_vsphere::VsphereError| VsphereRefusal::Vcenter(first_line(&e.to_string()));
        let vcenter = &session.vcenter;
        let vm = vcenter
            .find_vm_by_uuid(&session.datacenter, uuid)
            .await
            .map_err(vcenter_error)?
            .ok_or_else(|| VsphereRefusal::NoVm(uuid.to_string()))?;
        let properties = vcenter
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
            .filter(|t| !t.is_empty())
            .ok_or_else(|| VsphereRefusal::Used(name.clone()))?;
        if !proof::matches(token, body, mac) {
            // A wrong proof leaves the token: guessing cannot stop the VM
            // from joining.
            return Err(VsphereRefusal::Forged(name));
        }
        vcenter
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

#[async_trait::async_trait]
impl Verifier for VsphereVerifier {
    async fn verify(&self, authorization: &str, body: &[u8]) -> Result<NodeIdentity, Refusal> {
        VsphereVerifier::verify(self, authorization, body)
            .await
            .map_err(Refusal::Vsphere)
    }

    // One-time tokens live in vCenter, not in a replay cache.

    fn connect(&self, client: &kube::Client) {
        self.read_secrets_from(kube::Api::namespaced(client.clone(), "kube-system"));
    }
}

/// The first line of an error (vCenter errors carry a hint line for the
/// operator of `kops`; the controller logs one line per refusal).
fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kops_testkit::vcsim::{self, Vcsim};
    use kops_vsphere::cluster::{self, GroupSpec, Placement};

    fn credentials() -> Credentials {
        Credentials {
            username: vcsim::USER.into(),
            password: vcsim::PASSWORD.into(),
        }
    }

    async fn login(sim: &Vcsim) -> Vcenter {
        Vcenter::login(sim.url(), &credentials()).await.unwrap()
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
            root_disk_gib: None,
            etcd: Vec::new(),
            network: None,
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

    /// On a vCenter serving its own CA's certificate the controller logs in
    /// only when its options trust that CA or pin the certificate; else one
    /// line that names the fingerprint.
    #[tokio::test]
    async fn vcenter_is_trusted_as_the_options_say() {
        if !vcsim::vcsim_available() {
            return;
        }
        let sim = Vcsim::start_tls().unwrap();
        let tls = sim.tls().unwrap();
        let base = VsphereOptions {
            server: sim.url().into(),
            datacenter: vcsim::DATACENTER.into(),
            credentials_file: "/nonexistent".into(),
            ..VsphereOptions::default()
        };
        let verifier = |options: &VsphereOptions| {
            let mut v = VsphereVerifier::from_options("c.k8s.local", options);
            v.credentials = CredentialSource::Given(credentials());
            v
        };
        let refused = verifier(&base).login().await.err().unwrap();
        assert!(refused.contains("is not trusted"), "{refused}");
        assert!(refused.contains(&tls.thumbprint()), "{refused}");
        let with_ca = VsphereOptions {
            ca_certificate: Some(std::fs::read_to_string(tls.ca_file()).unwrap()),
            ..base.clone()
        };
        assert!(verifier(&with_ca).login().await.is_ok());
        let pinned = VsphereOptions {
            thumbprint: Some(tls.thumbprint()),
            ..base.clone()
        };
        assert!(verifier(&pinned).login().await.is_ok());
        let garbled = VsphereOptions {
            thumbprint: Some("not-hex".into()),
            ..base
        };
        let refused = verifier(&garbled).login().await.err().unwrap();
        assert!(refused.contains("vSphereThumbprint"), "{refused}");
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
        let verifier = VsphereVerifier::new(
            "a.k8s.local",
            sim.url(),
            vcsim::DATACENTER,
            CredentialSource::Given(credentials()),
        );
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
