//! Who is asking, on vSphere: the verifier of a VM's one-time bootstrap
//! token (see [`kops_vsphere::proof`]). The VM is found by the BIOS UUID
//! the node names, must carry this cluster's marker and a joining role,
//! and still hold its token; the MAC of the request body keyed with that
//! token must match. The token is removed from the VM once the node's
//! answer is made ([`VsphereVerifier::spend`]), by a compare-and-swap on
//! the VM's `config.changeVersion`: of two requests with one token, even
//! to two controllers (one per control-plane VM), one spends it and the
//! other is refused, and a failure before the answer leaves the token
//! for the node's retry.

use std::path::PathBuf;

use k8s_openapi::api::core::v1::Secret;
use kops_vsphere::client::MoRef;
use kops_vsphere::trust::Trust;
use kops_vsphere::vcenter::extra_config_xml;
use kops_vsphere::vcenter::{extra_config, Vcenter};
use kops_vsphere::{
    proof, Credentials, CLUSTER_KEY, GROUP_KEY, JOINING_ROLES, ROLE_KEY, TOKEN_KEY,
};

use crate::identity::{NodeIdentity, OneTimeToken};
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

/// How many times a spend is tried again when the VM's configuration
/// changed under it but still holds the token (the guest setting its
/// first-boot marker, an operator's edit).
const SPEND_ATTEMPTS: usize = 5;

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
    /// Held through a whole check or spend: one at a time per controller
    /// (replicas are kept apart by the compare-and-swap).
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

    /// This controller's vCenter session, held (logged in when there is
    /// none).
    async fn session(
        &self,
    ) -> Result<tokio::sync::MutexGuard<'_, Option<Session>>, VsphereRefusal> {
        let mut session = self.session.lock().await;
        if session.is_none() {
            *session = Some(self.login().await.map_err(VsphereRefusal::Vcenter)?);
        }
        Ok(session)
    }

    /// Checks `authorization` for a request with `body`. The token is not
    /// spent here: see [`VsphereVerifier::spend`].
    pub async fn verify(
        &self,
        authorization: &str,
        body: &[u8],
    ) -> Result<NodeIdentity, VsphereRefusal> {
        let (uuid, mac) = proof::parse(authorization).ok_or(VsphereRefusal::Malformed)?;
        let mut session = self.session().await?;
        let result = match session.as_ref() {
            Some(current) => self.check(current, uuid, mac, body).await,
            None => return Err(VsphereRefusal::Vcenter("not logged in".into())),
        };
        end_after_fault(&mut session, &result).await;
        result
    }

    /// Removes the token `identity` was proven with from its VM, unless
    /// someone did first: a reconfiguration bound to the configuration's
    /// version as read. When the configuration changed meanwhile but still
    /// holds that token, the removal is tried again on the new version.
    pub async fn spend(&self, identity: &NodeIdentity) -> Result<(), VsphereRefusal> {
        let Some(one_time) = &identity.one_time else {
            return Ok(());
        };
        let mut session = self.session().await?;
        let result = match session.as_ref() {
            Some(current) => self.spend_in(current, &identity.node_name, one_time).await,
            None => return Err(VsphereRefusal::Vcenter("not logged in".into())),
        };
        end_after_fault(&mut session, &result).await;
        result
    }

    async fn spend_in(
        &self,
        session: &Session,
        name: &str,
        one_time: &OneTimeToken,
    ) -> Result<(), VsphereRefusal> {
        let vcenter = &session.vcenter;
        let vm = MoRef::new("VirtualMachine", &one_time.object);
        let remove = extra_config_xml(&[(TOKEN_KEY, "")]);
        let mut version = one_time.version.clone();
        for _ in 0..SPEND_ATTEMPTS {
            match vcenter.reconfigure_if(&vm, &version, &remove).await {
                Ok(()) => return Ok(()),
                Err(e) if e.is_concurrent_access() => {
                    let (now, extra) = vm_config(vcenter, &vm).await?;
                    if extra.get(TOKEN_KEY) != Some(&one_time.token) {
                        return Err(VsphereRefusal::Used(name.to_string()));
                    }
                    version = now;
                }
                Err(e) => return Err(vcenter_error(e)),
            }
        }
        Err(VsphereRefusal::Vcenter(format!(
            "VM `{name}`'s configuration changed under each of {SPEND_ATTEMPTS} attempts to remove its token"
        )))
    }

    async fn check(
        &self,
        session: &Session,
        uuid: &str,
        mac: &str,
        body: &[u8],
    ) -> Result<NodeIdentity, VsphereRefusal> {
        let vcenter = &session.vcenter;
        let vm = vcenter
            .find_vm_by_uuid(&session.datacenter, uuid)
            .await
            .map_err(vcenter_error)?
            .ok_or_else(|| VsphereRefusal::NoVm(uuid.to_string()))?;
        let properties = vcenter
            .properties(&vm, &["name", "config.extraConfig", "config.changeVersion"])
            .await
            .map_err(vcenter_error)?;
        let name = properties
            .get("name")
            .map(|n| n.text.trim().to_string())
            .unwrap_or_default();
        let version = properties
            .get("config.changeVersion")
            .map(|v| v.text.trim().to_string())
            .unwrap_or_default();
        let extra = extra_config(properties.get("config.extraConfig"));
        if extra.get(CLUSTER_KEY) != Some(&self.cluster) {
            return Err(VsphereRefusal::NotInCluster {
                vm: name,
                cluster: self.cluster.clone(),
            });
        }
        // Control-plane VMs read the state store and get no token; one
        // that holds one anyway (cloned before roles were written, or
        // edited in) does not join through here.
        if let Some(role) = extra.get(ROLE_KEY) {
            if !JOINING_ROLES.contains(&role.as_str()) {
                return Err(VsphereRefusal::NotAWorker {
                    vm: name,
                    role: role.clone(),
                });
            }
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
        Ok(NodeIdentity {
            node_name: name.clone(),
            instance_id: format!("vsphere://{}", uuid.to_ascii_lowercase()),
            instance_group: extra.get(GROUP_KEY).cloned().unwrap_or_default(),
            certificate_names: vec![name],
            one_time: Some(OneTimeToken {
                object: vm.value.clone(),
                token: token.clone(),
                version,
            }),
        })
    }
}

/// After vCenter failed, ends the session (briefly: vCenter keeps sessions
/// until they time out, and faults should not leave them piling up); the
/// next request logs in again (the session may have expired).
async fn end_after_fault<T>(session: &mut Option<Session>, result: &Result<T, VsphereRefusal>) {
    if matches!(result, Err(VsphereRefusal::Vcenter(_))) {
        if let Some(old) = session.take() {
            let _ = tokio::time::timeout(LOGOUT_WITHIN, old.vcenter.logout()).await;
        }
    }
}

/// A VM's `config.changeVersion` and extraConfig.
async fn vm_config(
    vcenter: &Vcenter,
    vm: &MoRef,
) -> Result<(String, std::collections::BTreeMap<String, String>), VsphereRefusal> {
    let found = vcenter
        .properties(vm, &["config.changeVersion", "config.extraConfig"])
        .await
        .map_err(vcenter_error)?;
    let version = found
        .get("config.changeVersion")
        .map(|v| v.text.trim().to_string())
        .unwrap_or_default();
    Ok((version, extra_config(found.get("config.extraConfig"))))
}

fn vcenter_error(e: kops_vsphere::VsphereError) -> VsphereRefusal {
    VsphereRefusal::Vcenter(first_line(&e.to_string()))
}

#[async_trait::async_trait]
impl Verifier for VsphereVerifier {
    async fn verify(&self, authorization: &str, body: &[u8]) -> Result<NodeIdentity, Refusal> {
        VsphereVerifier::verify(self, authorization, body)
            .await
            .map_err(Refusal::Vsphere)
    }

    async fn spend(&self, identity: &NodeIdentity) -> Result<(), Refusal> {
        VsphereVerifier::spend(self, identity)
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
            role: "Node".into(),
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

        // The worker is verified; its token stays until its answer is
        // made (a failure before that leaves the node its retry).
        let identity = verifier.verify(&header, body).await.unwrap();
        assert_eq!(identity.node_name, "nodes-1.a.k8s.local");
        assert_eq!(identity.instance_group, "nodes");
        assert_eq!(
            identity.instance_id,
            format!("vsphere://{}", uuid.to_ascii_lowercase())
        );
        assert_eq!(
            node_view(&vc, "nodes-1.a.k8s.local").await.1,
            Some(token.clone())
        );
        let again = verifier.verify(&header, body).await.unwrap();
        // Spent: the token is gone from the VM; the same request again is
        // a replay, and so is a spend of the second verification.
        verifier.spend(&identity).await.unwrap();
        assert_eq!(node_view(&vc, "nodes-1.a.k8s.local").await.1, None);
        assert_eq!(
            verifier.spend(&again).await,
            Err(VsphereRefusal::Used("nodes-1.a.k8s.local".into()))
        );
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

    /// Two controllers (one per control-plane VM) verify one request with
    /// one token at the same time: both pass, and only one spends it. A
    /// control-plane VM is refused whatever token it holds.
    #[tokio::test]
    async fn one_token_is_spent_once_across_controllers_and_roles_are_checked() {
        if !vcsim::vcsim_available() {
            return;
        }
        let sim = Vcsim::start().unwrap();
        let vc = login(&sim).await;
        worker(&vc, "a.k8s.local").await;
        let controller = || {
            VsphereVerifier::new(
                "a.k8s.local",
                sim.url(),
                vcsim::DATACENTER,
                CredentialSource::Given(credentials()),
            )
        };
        let (first, second) = (controller(), controller());
        let body = br#"{"apiVersion":"bootstrap.kops.k8s.io/v1alpha1","kind":"BootstrapRequest"}"#;
        let (uuid, token) = node_view(&vc, "nodes-1.a.k8s.local").await;
        let header = proof::authorization(&uuid, &token.clone().unwrap(), body);
        let (one, two) = tokio::join!(first.verify(&header, body), second.verify(&header, body));
        let (one, two) = (one.unwrap(), two.unwrap());
        let (spent_one, spent_two) = tokio::join!(first.spend(&one), second.spend(&two));
        let outcomes = [spent_one, spent_two];
        assert_eq!(
            outcomes.iter().filter(|o| o.is_ok()).count(),
            1,
            "{outcomes:?}"
        );
        assert!(
            outcomes.contains(&Err(VsphereRefusal::Used("nodes-1.a.k8s.local".into()))),
            "{outcomes:?}"
        );
        assert_eq!(node_view(&vc, "nodes-1.a.k8s.local").await.1, None);

        // The guest (or anyone) changing the VM's configuration between
        // the check and the spend does not stop the spend while the token
        // is still there.
        let folder = vc.find_path("DC0/vm/joins").await.unwrap().unwrap();
        let vms = cluster::list(&vc, &folder, "a.k8s.local").await.unwrap();
        let vm = vms[0].reference.clone();
        let fresh = "f".repeat(64);
        vc.set_extra_config(&vm, &[(TOKEN_KEY, &fresh)])
            .await
            .unwrap();
        let header = proof::authorization(&uuid, &fresh, body);
        let identity = first.verify(&header, body).await.unwrap();
        vc.set_extra_config(&vm, &[(kops_vsphere::BOOTED_KEY, "1")])
            .await
            .unwrap();
        first.spend(&identity).await.unwrap();
        assert_eq!(node_view(&vc, "nodes-1.a.k8s.local").await.1, None);

        // A control-plane VM holding a token (cloned before roles were
        // written, or edited in) is refused, its token left alone.
        vc.set_extra_config(&vm, &[(ROLE_KEY, "Master"), (TOKEN_KEY, &fresh)])
            .await
            .unwrap();
        assert_eq!(
            first.verify(&header, body).await,
            Err(VsphereRefusal::NotAWorker {
                vm: "nodes-1.a.k8s.local".into(),
                role: "Master".into()
            })
        );
        assert_eq!(node_view(&vc, "nodes-1.a.k8s.local").await.1, Some(fresh));
    }
}
