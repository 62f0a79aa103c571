//! VMware vSphere for kops-rs.
//!
//! A cluster on vSphere is a VM folder in a datacenter and, per instance
//! group, `minSize` VMs cloned from the group's template (its `image`),
//! linked clones when the template has a snapshot. Each VM carries its
//! boot data in `guestinfo.userdata`/`guestinfo.metadata` (base64, read by
//! cloud-init's VMware data source) and markers in its extraConfig naming
//! the cluster, the group and a hash of what it was made from. Nothing is
//! remembered elsewhere: every run lists the folder, so a second update
//! with nothing changed makes no change.
//!
//! The client is this crate's own: a SOAP envelope per call for the dozen
//! vCenter methods used ([`vcenter`]), over the hyper/rustls stack the
//! workspace already builds, read with `xmlparser` (already in the lock
//! file). See docs/vsphere.md for why not `vim_rs`.

pub mod client;
pub mod cluster;
pub mod disks;
mod kept;
pub mod network;
pub mod proof;
pub mod trust;
pub mod vcenter;
pub mod xml;

/// `spec.cloudProvider` of a vSphere cluster.
pub const CLOUD: &str = "vsphere";

/// The extraConfig key naming a VM's cluster.
pub const CLUSTER_KEY: &str = "kops.cluster";
/// The extraConfig key naming a VM's instance group.
pub const GROUP_KEY: &str = "kops.instancegroup";
/// The extraConfig key holding the hash of what the VM was made from.
pub const SPEC_HASH_KEY: &str = "kops.spec-hash";
/// The guestinfo key holding the VM's one-time bootstrap token (read by
/// nodeup inside the VM, checked by kops-controller and removed once the
/// node's certificates are issued). Only VMs of [`JOINING_ROLES`] get one.
pub const TOKEN_KEY: &str = "guestinfo.kops.bootstrap-token";
/// The extraConfig key naming a VM's instance-group role as kops writes
/// it (`Master`, `Node`, `APIServer`, `Bastion`): kops-controller answers
/// only VMs of [`JOINING_ROLES`]. Set from the first clone that carries it
/// on; `update` treats its presence as "this VM's nodeup sets
/// [`BOOTED_KEY`]".
pub const ROLE_KEY: &str = "kops.role";
/// The roles whose VMs join through kops-controller (a one-time token);
/// control-plane VMs read the state store instead and get none.
pub const JOINING_ROLES: [&str; 2] = ["Node", "APIServer"];
/// The guestinfo key nodeup sets from inside the VM on its first boot
/// (`vmware-rpctool "info-set guestinfo.kops.booted 1"`): a VM without it
/// never booted, so `update` may remake it; a VM with it is never
/// destroyed by `update` for being powered off.
pub const BOOTED_KEY: &str = "guestinfo.kops.booted";

/// The login user a template's name suggests (cloud images' default
/// users: `ubuntu`, `debian`, Flatcar's `core`, `rocky`); `None` when it
/// does not say.
pub fn guess_ssh_user(template: &str) -> Option<&'static str> {
    let name = template
        .rsplit('/')
        .next()
        .unwrap_or(template)
        .to_ascii_lowercase();
    [
        ("ubuntu", "ubuntu"),
        ("debian", "debian"),
        ("flatcar", "core"),
        ("rocky", "rocky"),
    ]
    .into_iter()
    .find(|(distribution, _)| name.contains(distribution))
    .map(|(_, user)| user)
}

/// The methods that change something in vCenter.
const CHANGING: &[&str] = &[
    "CreateFolder",
    "CloneVM_Task",
    "PowerOnVM_Task",
    "PowerOffVM_Task",
    "Destroy_Task",
    "ReconfigVM_Task",
    "MakeDirectory",
    "CreateDirectory",
    "CreateDisk_Task",
    "AttachDisk_Task",
    "DetachDisk_Task",
    "DeleteDatastoreFile_Task",
];

/// How many of `calls` (by method) changed something in vCenter.
pub fn changing_calls(calls: &std::collections::BTreeMap<String, u64>) -> u64 {
    calls
        .iter()
        .filter(|(method, _)| CHANGING.contains(&method.as_str()))
        .map(|(_, n)| n)
        .sum()
}

/// SOAP calls as one summary: the total, how many changed something, and
/// the count per method.
pub fn calls_summary(calls: &std::collections::BTreeMap<String, u64>) -> String {
    let total: u64 = calls.values().sum();
    let writes = changing_calls(calls);
    let each: Vec<String> = calls.iter().map(|(m, n)| format!("{m} {n}")).collect();
    format!(
        "{total} vSphere SOAP calls, {writes} changing: {}",
        each.join(", ")
    )
}

/// vCenter user name and password: from `VSPHERE_USERNAME` and
/// `VSPHERE_PASSWORD`, or a file named by `VSPHERE_CREDENTIALS_FILE` (two
/// lines: user, password). Never written anywhere by kops-rs.
#[derive(Clone)]
pub struct Credentials {
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

impl Credentials {
    /// From the environment (see [`Credentials`]).
    pub fn from_env() -> Result<Credentials, VsphereError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// From a variable look-up (tests pass their own).
    pub fn from_lookup(
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Credentials, VsphereError> {
        let get = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        if let Some(found) = Self::from_file_named_by("VSPHERE_CREDENTIALS_FILE", &lookup)? {
            return Ok(found);
        }
        match (get("VSPHERE_USERNAME"), get("VSPHERE_PASSWORD")) {
            (Some(username), Some(password)) => Ok(Credentials { username, password }),
            _ => Err(VsphereError::Credentials(
                "no vCenter credentials: set VSPHERE_USERNAME and VSPHERE_PASSWORD (or VSPHERE_CREDENTIALS_FILE)".into(),
            )),
        }
    }
}

impl Credentials {
    /// The account in the file the variable `var` names (two lines: user,
    /// then password); `None` when `var` is not set. An in-cluster
    /// component's own account ([`CCM_CREDENTIALS_FILE`],
    /// [`CSI_CREDENTIALS_FILE`]) is read this way.
    pub fn from_file_named_by(
        var: &str,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<Credentials>, VsphereError> {
        let Some(path) = lookup(var).filter(|v| !v.trim().is_empty()) else {
            return Ok(None);
        };
        let path = path.trim();
        let text = std::fs::read_to_string(path)
            .map_err(|e| VsphereError::Credentials(format!("cannot read {var} `{path}`: {e}")))?;
        let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
        match (lines.next(), lines.next()) {
            (Some(user), Some(password)) => Ok(Some(Credentials {
                username: user.to_string(),
                password: password.to_string(),
            })),
            _ => Err(VsphereError::Credentials(format!(
                "{var} `{path}` must hold two lines: the user name, then the password"
            ))),
        }
    }
}

/// Names the file with the state-store key (two lines: access key id,
/// secret) control-plane VMs get in their user data instead of the
/// operator's `S3_ACCESS_KEY_ID`/`S3_SECRET_ACCESS_KEY` (a custom S3
/// endpoint's); meant to be limited to the cluster's prefix.
pub const STATE_STORE_CREDENTIALS_FILE: &str = "VSPHERE_STATE_STORE_CREDENTIALS_FILE";

/// Names the file with the vCenter account of the cloud controller manager
/// and kops-controller (the Secret `kube-system/vsphere-cloud-secret`).
pub const CCM_CREDENTIALS_FILE: &str = "VSPHERE_CCM_CREDENTIALS_FILE";
/// Names the file with the vCenter account of the CSI driver (the Secret
/// `vmware-system-csi/vsphere-config-secret`).
pub const CSI_CREDENTIALS_FILE: &str = "VSPHERE_CSI_CREDENTIALS_FILE";

#[cfg(test)]
mod tests {
    #[test]
    fn ssh_users_follow_the_template_name() {
        assert_eq!(
            super::guess_ssh_user("ubuntu-2404-template"),
            Some("ubuntu")
        );
        assert_eq!(
            super::guess_ssh_user("/DC0/vm/t/flatcar-stable"),
            Some("core")
        );
        assert_eq!(super::guess_ssh_user("kops-template"), None);
    }
}

#[derive(Debug, thiserror::Error)]
pub enum VsphereError {
    #[error("vCenter `{server}` is unreachable: {reason}\nhint: check spec.cloudConfig.vSphereServer (--vsphere-server) and that this machine can reach it")]
    Unreachable { server: String, reason: String },
    /// vCenter's certificate is not trusted (one line: what to pass).
    #[error("{}", untrusted_message(server, fingerprint, *pinned))]
    Untrusted {
        server: String,
        fingerprint: String,
        pinned: bool,
    },
    #[error("vCenter `{server}` refused the login of `{user}`\nhint: check VSPHERE_USERNAME and VSPHERE_PASSWORD")]
    Login { server: String, user: String },
    #[error("{0}\nhint: export the vCenter user and password in the environment; kops-rs never stores them")]
    Credentials(String),
    #[error("{what} `{name}` does not exist in vCenter\nhint: {fix}")]
    Missing {
        what: &'static str,
        name: String,
        fix: String,
    },
    /// What the spec asks cannot be made from what vCenter holds.
    #[error("{message}\nhint: {fix}")]
    Invalid { message: String, fix: String },
    #[error("vCenter refused {method}: {kind} {message}")]
    Fault {
        method: String,
        kind: String,
        message: String,
    },
    #[error("unexpected vCenter answer: {0}")]
    Protocol(String),
    /// A task that did not end within its deadline (it may still run).
    #[error("vCenter task {task} ({method}) did not end within {secs} s\nhint: it may still be running: see it in vCenter's Recent Tasks, then run the command again")]
    TaskDeadline {
        method: String,
        task: String,
        secs: u64,
    },
}

fn untrusted_message(server: &str, fingerprint: &str, pinned: bool) -> String {
    if pinned {
        format!("vCenter `{server}`'s certificate has SHA-1 fingerprint {fingerprint}, not the one in spec.cloudConfig.vSphereThumbprint: if the certificate was replaced, check it and set the new one with `kops edit cluster`")
    } else {
        format!("vCenter `{server}`'s certificate (SHA-1 fingerprint {fingerprint}) is not trusted: pin it with --vsphere-thumbprint {fingerprint} or trust its CA with --vsphere-ca-file <PEM> (spec.cloudConfig.vSphereThumbprint/vSphereCACertificate)")
    }
}

impl VsphereError {
    pub(crate) fn protocol(message: &str) -> VsphereError {
        VsphereError::Protocol(message.to_string())
    }

    /// A reconfiguration lost a compare-and-swap: the VM's configuration
    /// changed since its `changeVersion` was read.
    pub fn is_concurrent_access(&self) -> bool {
        matches!(self, VsphereError::Fault { kind, .. } if kind == "ConcurrentAccess")
    }
}
