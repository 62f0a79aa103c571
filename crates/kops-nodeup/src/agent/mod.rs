//! The nodeup agent: boot config → node config from the state store (hash
//! checked) → assets downloaded and checked → the node's files written under
//! a root directory.
//!
//! Everything is planned before anything is written: assets are downloaded
//! and checked into memory, certificates issued, file contents rendered.
//! Only then are files written, each atomically (a temporary file in the
//! same directory, then a rename), and only those whose content or mode
//! differ. A failure before the write phase (a bad hash, a missing keyset,
//! an unreachable mirror) leaves the root untouched; a second run with the
//! same inputs writes nothing.

pub mod apt;
mod command;
mod config_server;
mod fetch;
mod files;
pub mod gce;
mod pki;
mod render;
pub mod tpm;
pub mod vsphere;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use kops_api::Role;

use crate::assets::{Arch, Asset, AssetKind};
use crate::bootstrap::BootConfig;
use crate::config::{self, NodeupConfig};

pub use apt::PackageAction;
pub use command::{Ran, Runner, System};
pub use fetch::Fetcher;
pub use files::{Change, ChangeKind, PlannedFile};

/// How nodeup was asked to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// The boot config the user data wrote.
    pub conf: PathBuf,
    /// Where the node's file system is (`/` on a real node).
    pub root: PathBuf,
    /// Report what would change; write nothing.
    pub dry_run: bool,
    /// The node's name (kubelet's client certificate is issued for it);
    /// `None` reads the host name.
    pub node_name: Option<String>,
    /// The node's address (API server certificate, etcd); `None` omits it.
    pub node_ip: Option<String>,
    /// The architecture to install for; `None` is this machine's.
    pub arch: Option<Arch>,
    /// The cloud region (etcd-manager finds its volumes there); the user
    /// data exports it as `AWS_REGION`.
    pub region: Option<String>,
    /// Attempts per URL for transient download errors.
    pub attempts: u32,
    /// First delay between attempts (doubles each time).
    pub retry_delay: Duration,
    /// How long a worker keeps asking kops-controller while the control
    /// plane does not answer.
    pub bootstrap_timeout: Duration,
    /// On Google Cloud: a PEM RSA key standing in for the vTPM's
    /// attestation key (a host whose key is registered as its instance's
    /// identity key); without it the vTPM signs.
    pub gce_signing_key: Option<PathBuf>,
    /// On Google Cloud: the TPM holding the attestation key
    /// ([`tpm::DEFAULT_DEVICE`], or `unix:PATH` for a TPM on a socket).
    pub tpm: String,
    /// On vSphere: how the guest reads its VM's guestinfo and BIOS UUID;
    /// `None` is VMware Tools ([`vsphere::Tools`]).
    pub vsphere_guest: Option<std::sync::Arc<dyn vsphere::Guest>>,
    /// Where gVisor's apt signing key is downloaded from
    /// ([`apt::GVISOR_KEYRING_URL`]; tests serve their own).
    pub gvisor_keyring_url: String,
}

impl Options {
    pub fn new(conf: impl Into<PathBuf>, root: impl Into<PathBuf>) -> Self {
        Options {
            conf: conf.into(),
            root: root.into(),
            dry_run: false,
            node_name: None,
            node_ip: None,
            arch: None,
            region: None,
            attempts: 4,
            retry_delay: Duration::from_secs(2),
            bootstrap_timeout: Duration::from_secs(30 * 60),
            gce_signing_key: None,
            tpm: tpm::DEFAULT_DEVICE.to_string(),
            vsphere_guest: None,
            gvisor_keyring_url: apt::GVISOR_KEYRING_URL.to_string(),
        }
    }
}

/// What a run did (or, in a dry run, would do).
#[derive(Debug, Clone)]
pub struct Outcome {
    pub cluster: String,
    pub instance_group: String,
    pub role: Role,
    /// Every file nodeup manages, sorted by path, with what happened to it.
    pub changes: Vec<Change>,
    /// Assets downloaded (not already installed).
    pub downloaded: Vec<String>,
    pub services: ServiceAction,
    /// Packages from apt repositories (gVisor's `runsc`).
    pub packages: PackageAction,
}

impl Outcome {
    pub fn changed(&self) -> usize {
        self.changes
            .iter()
            .filter(|c| c.kind != ChangeKind::Unchanged)
            .count()
    }
}

/// What nodeup did about systemd services.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServiceAction {
    /// Not a real node: `--root` is not `/`.
    SkippedNotRoot { root: String },
    /// A dry run.
    SkippedDryRun,
    /// `systemctl` ran: daemon-reload, enable --now, restart of the changed units.
    Started { units: Vec<String> },
    /// Nothing ran: kops-controller says the node has already joined (a
    /// worker's nodeup run again while its node is Ready).
    AlreadyRegistered,
}

/// Everything nodeup can fail at.
#[derive(Debug, thiserror::Error)]
pub enum NodeupError {
    #[error("cannot read the boot config `{path}`: {reason}\nhint: the instance's user data writes it; check that it ran")]
    BootConfig { path: String, reason: String },
    #[error("the boot config `{path}` has no ConfigBase\nhint: kops-rs nodes read their config from the state store; rewrite the user data with `kops update cluster --yes`")]
    NoConfigBase { path: String },
    #[error("the boot config's role `{role}` is not one nodeup sets up\nhint: InstanceGroupRole is ControlPlane, Node or APIServer")]
    BadRole { role: String },
    #[error(transparent)]
    Store(#[from] kops_state::StoreError),
    #[error("the node config `{url}` does not exist\nhint: run `kops update cluster --yes`, which writes it")]
    MissingConfig { url: String },
    #[error("the node config `{url}` has hash `{actual}`, but the boot config expects `{expected}`; nothing was installed\nhint: the config changed after this instance was launched: run `kops update cluster --yes` and replace the instance (`kops rolling-update cluster`)")]
    ConfigHashMismatch {
        url: String,
        expected: String,
        actual: String,
    },
    #[error(transparent)]
    Config(Box<config::ConfigError>),
    #[error(transparent)]
    Asset(Box<crate::assets::AssetError>),
    #[error("the node config lists no assets for `{arch}`\nhint: run `kops update cluster --yes` to rewrite it")]
    NoAssets { arch: String },
    #[error("cannot download {asset} from any of {urls:?}: {reason}; nothing was installed")]
    Download {
        asset: String,
        urls: Vec<String>,
        reason: String,
    },
    #[error("{asset} downloaded from `{url}` has sha256 `{actual}`, but the node config expects `{expected}`; nothing was installed\nhint: the mirror serves a different file; fix the mirror (`spec.assets.fileRepository`) or the asset's hash")]
    HashMismatch {
        asset: String,
        url: String,
        expected: String,
        actual: String,
    },
    #[error("cannot unpack {asset} (`{url}`): {reason}")]
    Unpack {
        asset: String,
        url: String,
        reason: String,
    },
    #[error("keyset `{name}` is not in `{url}`\nhint: `kops update cluster --yes` creates the cluster's keysets")]
    MissingKeyset { name: String, url: String },
    #[error("certificates: {0}")]
    Pki(Box<kops_pki::PkiError>),
    #[error("cannot {action} `{path}`: {source}")]
    Io {
        action: &'static str,
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("kops-controller issued no certificate for `{path}`")]
    NotIssued { path: String },
    #[error("bootstrap through kops-controller failed: {reason}")]
    Bootstrap { reason: String },
    /// kops-controller refused the node because it is already registered
    /// and Ready; [`run`] ends without changes, as kops' nodeup does.
    #[error("kops-controller: this node is already registered and Ready")]
    AlreadyRegistered,
    #[error("the boot config names kops-controller but no region is known\nhint: the user data exports AWS_REGION; pass it to nodeup")]
    NoRegion,
    #[error("Google Cloud: {reason}")]
    Gce { reason: String },
    #[error("vSphere: {reason}")]
    Vsphere { reason: String },
    #[error("cannot read this machine's key `{path}`: {reason}\nhint: `kops toolbox enroll` makes it (and registers its public half as the machine's Host object); enroll the machine again")]
    MachineKey { path: String, reason: String },
    #[error("cannot determine this node's name: {reason}\nhint: pass --node-name")]
    NodeName { reason: String },
    #[error("`{command}` failed: {reason}")]
    Service { command: String, reason: String },
    #[error("apt repository `{name}`: cannot use the signing key from `{url}`: {reason}\nhint: the node must reach it over HTTPS (a proxy or firewall may be in the way)")]
    AptSource {
        name: String,
        url: String,
        reason: String,
    },
}

impl From<config::ConfigError> for NodeupError {
    fn from(e: config::ConfigError) -> Self {
        NodeupError::Config(Box::new(e))
    }
}

impl From<crate::assets::AssetError> for NodeupError {
    fn from(e: crate::assets::AssetError) -> Self {
        NodeupError::Asset(Box::new(e))
    }
}

impl From<kops_pki::PkiError> for NodeupError {
    fn from(e: kops_pki::PkiError) -> Self {
        NodeupError::Pki(Box::new(e))
    }
}

/// The loaded boot config and node config.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub boot: BootConfig,
    pub role: Role,
    pub config: NodeupConfig,
    /// The state store (empty for workers that bootstrap through
    /// kops-controller: they have no access to it).
    pub config_base: String,
    /// What kops-controller issued (certificate path → certificate, key),
    /// for workers that bootstrap through it.
    pub issued: Option<BTreeMap<String, (String, String)>>,
    /// The registry credentials kops-controller handed a worker
    /// (`dockerconfig` secret).
    pub docker_config: Option<Vec<u8>>,
}

impl Loaded {
    /// gVisor's settings when this node runs it: a worker whose node
    /// config enables it (kops checks the boot config's role too).
    pub fn gvisor(&self) -> Option<&kops_api::components::GVisorConfig> {
        let gvisor = self.config.gvisor.as_ref()?;
        (self.role == Role::Node && gvisor.enabled == Some(true)).then_some(gvisor)
    }
}

/// Reads the boot config: the file the user data wrote or, when there is
/// none, the user data in the VM's guestinfo on vSphere (`guest`, or
/// VMware Tools when installed), else in the instance's metadata on
/// Compute Engine.
async fn read_boot_config(
    conf: &Path,
    guest: Option<&dyn vsphere::Guest>,
) -> Result<(BootConfig, Role), NodeupError> {
    let failed = |reason: String| NodeupError::BootConfig {
        path: conf.display().to_string(),
        reason,
    };
    let tools = vsphere::Tools;
    let guest =
        guest.or_else(|| vsphere::Tools::present().then_some(&tools as &dyn vsphere::Guest));
    let text = match std::fs::read_to_string(conf) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && guest.is_some() => {
            let guest = guest.expect("checked");
            vsphere::boot_config_from_guestinfo(guest)
                .map_err(|reason| failed(format!("{e}, and from guestinfo: {reason}")))?
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let metadata = gce::metadata().map_err(failed)?;
            gce::boot_config_from_metadata(&metadata)
                .await
                .map_err(|reason| failed(format!("{e}, and from the metadata server: {reason}")))?
        }
        Err(e) => return Err(failed(e.to_string())),
    };
    let boot = BootConfig::parse(&text).map_err(failed)?;
    let role = boot
        .role()
        .filter(|r| *r != Role::Bastion)
        .ok_or_else(|| NodeupError::BadRole {
            role: boot.instance_group_role.clone(),
        })?;
    Ok((boot, role))
}

/// Reads the boot config, then the node config from the state store, and
/// checks the node config's hash.
pub async fn load(conf: &Path) -> Result<Loaded, NodeupError> {
    let (boot, role) = read_boot_config(conf, None).await?;
    load_from_store(conf, boot, role).await
}

async fn load_from_store(conf: &Path, boot: BootConfig, role: Role) -> Result<Loaded, NodeupError> {
    let config_base = boot
        .config_base
        .clone()
        .filter(|b| !b.is_empty())
        .ok_or_else(|| NodeupError::NoConfigBase {
            path: conf.display().to_string(),
        })?;
    let store = kops_state::open(&config_base).await?;
    let key = config::nodeup_config_path(role, &boot.instance_group_name);
    let url = store.url_of(&key);
    let bytes = store
        .read(&key)
        .await?
        .ok_or_else(|| NodeupError::MissingConfig { url: url.clone() })?;
    let config = checked_config(&boot, &url, &bytes)?;
    Ok(Loaded {
        boot,
        role,
        config,
        config_base,
        issued: None,
        docker_config: None,
    })
}

/// Checks a node config against the hash the boot config pins, and parses it.
fn checked_config(boot: &BootConfig, url: &str, bytes: &[u8]) -> Result<NodeupConfig, NodeupError> {
    let actual = config::config_hash(bytes);
    if actual != boot.nodeup_config_hash {
        return Err(NodeupError::ConfigHashMismatch {
            url: url.to_string(),
            expected: boot.nodeup_config_hash.clone(),
            actual,
        });
    }
    Ok(config::parse_yaml(url, &String::from_utf8_lossy(bytes))?)
}

/// The boot config and the node config: from kops-controller when the boot
/// config names it (workers), else from the state store.
async fn load_node(
    options: &Options,
    node_name: &str,
    boot: BootConfig,
    role: Role,
    gce_instance: Option<&gce::Instance>,
    vsphere_vm: Option<&vsphere::Vm>,
) -> Result<Loaded, NodeupError> {
    let Some(server) = boot.config_server.clone() else {
        return load_from_store(&options.conf, boot, role).await;
    };
    let region = options.region.clone().ok_or(NodeupError::NoRegion)?;
    let identity = match (gce_instance, vsphere_vm) {
        // A machine enrolled with `toolbox enroll`: its machine key.
        _ if boot.cloud_provider == kops_bootstrap::config::METAL => {
            config_server::Identity::HostKey {
                host: node_name.to_string(),
                key: std::sync::Arc::new(machine_key(&options.root)?),
            }
        }
        (_, Some(vm)) => config_server::Identity::Vsphere {
            bios_uuid: vm.bios_uuid.clone(),
            token: vm.token.clone().ok_or_else(|| NodeupError::Vsphere {
                reason: format!(
                    "this VM holds no {} (kops-controller used it for an earlier join; a VM joins once: replace it with `kops rolling-update cluster`)",
                    kops_vsphere::TOKEN_KEY
                ),
            })?,
        },
        (Some(instance), None) => {
            let key =
                match &options.gce_signing_key {
                    Some(path) => {
                        let text = std::fs::read_to_string(path).map_err(|e| NodeupError::Gce {
                            reason: format!("cannot read {}: {e}", path.display()),
                        })?;
                        let key = kops_bootstrap::gce::token::SoftwareKey::from_pem(&text)
                            .map_err(|e| NodeupError::Gce {
                                reason: format!("{}: {e}", path.display()),
                            })?;
                        Some(std::sync::Arc::new(key)
                            as std::sync::Arc<dyn kops_bootstrap::gce::token::Signer>)
                    }
                    None => None,
                };
            let signer = gce::signer(key.as_ref(), &options.tpm);
            config_server::Identity::Gce {
                instance: instance.reference(),
                signer,
            }
        }
        (None, None) => config_server::Identity::Aws,
    };
    let got = config_server::bootstrap(&config_server::Target {
        boot: &boot,
        server: &server,
        root: &options.root,
        node_name,
        region: &region,
        timeout: options.bootstrap_timeout,
        retry_delay: options.retry_delay,
        identity,
    })
    .await?;
    Ok(Loaded {
        boot,
        role,
        config: got.config,
        config_base: String::new(),
        issued: Some(got.issued),
        docker_config: got.node_secrets.get("dockerconfig").cloned(),
    })
}

/// The key `toolbox enroll` made on this machine.
fn machine_key(root: &Path) -> Result<kops_bootstrap::hostkey::MachineKey, NodeupError> {
    let path = files::under(root, kops_bootstrap::hostkey::MACHINE_PRIVATE_KEY);
    let failed = |reason: String| NodeupError::MachineKey {
        path: path.display().to_string(),
        reason,
    };
    let text = std::fs::read_to_string(&path).map_err(|e| failed(e.to_string()))?;
    kops_bootstrap::hostkey::MachineKey::from_pem(&text).map_err(failed)
}

/// A node that knows who it is and has its config (and, for a worker,
/// what kops-controller issued).
#[derive(Debug, Clone)]
pub struct Joined {
    /// The options with what the cloud told (node name, address, region).
    pub options: Options,
    pub node_name: String,
    pub loaded: Loaded,
}

/// The first half of [`run`]: the boot config, who this node is (from the
/// metadata server on Google Cloud, VMware Tools on vSphere), then the
/// node config from the state store or kops-controller.
pub async fn join(options: &Options) -> Result<Joined, NodeupError> {
    let (boot, role) = read_boot_config(&options.conf, options.vsphere_guest.as_deref()).await?;
    // On Google Cloud, the metadata server says who this node is.
    let mut resolved = options.clone();
    let gce_instance = if boot.cloud_provider == "gce" {
        let metadata = gce::metadata().map_err(|reason| NodeupError::Gce { reason })?;
        let instance = gce::instance(&metadata)
            .await
            .map_err(|reason| NodeupError::Gce { reason })?;
        resolved
            .node_name
            .get_or_insert_with(|| instance.name.clone());
        resolved.region.get_or_insert_with(|| instance.region());
        if resolved.node_ip.is_none() {
            resolved.node_ip = instance.ip.clone();
        }
        Some(instance)
    } else {
        None
    };
    // An enrolled machine has no cloud region (the AWS client of a
    // worker is not used).
    if boot.cloud_provider == kops_bootstrap::config::METAL {
        resolved.region.get_or_insert_with(String::new);
    }
    // On vSphere, VMware Tools says which VM this is.
    let vsphere_vm = if boot.cloud_provider == kops_vsphere::CLOUD {
        let tools = vsphere::Tools;
        let guest: &dyn vsphere::Guest = options.vsphere_guest.as_deref().unwrap_or(&tools);
        vsphere::mark_booted(guest).map_err(|e| NodeupError::Vsphere {
            reason: format!(
                "cannot mark this VM as booted ({}: {e}); `kops update cluster` would take it for a clone that never started",
                kops_vsphere::BOOTED_KEY
            ),
        })?;
        let vm = vsphere_vm(options)?;
        if let Some(name) = &vm.name {
            resolved.node_name.get_or_insert_with(|| name.clone());
        }
        // No region on vSphere (the AWS client of a worker is not used).
        resolved.region.get_or_insert_with(String::new);
        Some(vm)
    } else {
        None
    };
    let node_name = match &resolved.node_name {
        Some(n) => n.clone(),
        None => host_name()?,
    };
    let loaded = load_node(
        &resolved,
        &node_name,
        boot,
        role,
        gce_instance.as_ref(),
        vsphere_vm.as_ref(),
    )
    .await?;
    Ok(Joined {
        options: resolved,
        node_name,
        loaded,
    })
}

/// Runs nodeup: load, plan, then (unless a dry run) apply.
pub async fn run(options: &Options) -> Result<Outcome, NodeupError> {
    let Joined {
        options,
        node_name,
        loaded,
    } = match join(options).await {
        Err(NodeupError::AlreadyRegistered) => {
            let (boot, role) =
                read_boot_config(&options.conf, options.vsphere_guest.as_deref()).await?;
            tracing::info!("this node is already registered and Ready; nothing to do");
            return Ok(Outcome {
                cluster: boot.cluster_name,
                instance_group: boot.instance_group_name,
                role,
                changes: Vec::new(),
                downloaded: Vec::new(),
                services: ServiceAction::AlreadyRegistered,
                packages: PackageAction::None,
            });
        }
        joined => joined?,
    };
    let options = &options;
    let arch = options.arch.or_else(Arch::host).unwrap_or(Arch::Amd64);
    let fetcher = Fetcher::new(options.attempts, options.retry_delay);

    // 1. Assets: skip those already installed as recorded; download and
    //    check the rest, in memory.
    let list = loaded
        .config
        .assets
        .get(arch.as_str())
        .filter(|l| !l.is_empty())
        .ok_or_else(|| NodeupError::NoAssets {
            arch: arch.as_str().to_string(),
        })?;
    let mut planned: Vec<PlannedFile> = Vec::new();
    let mut downloaded = Vec::new();
    for text in list {
        let asset = Asset::parse(text)?;
        let Some(kind) = asset.kind() else {
            continue;
        };
        if let Some(files) = files::installed_asset(&options.root, &asset)? {
            planned.extend(files);
            continue;
        }
        let bytes = fetcher.fetch_verified(kind.as_str(), &asset).await?;
        downloaded.push(asset.urls[0].clone());
        let installed = render::install_asset(kind, &asset, &bytes)?;
        planned.push(files::asset_stamp(&asset, &installed));
        planned.extend(installed);
    }

    // 2. Certificates (kept when still valid), then configuration files.
    let keystore = match (&loaded.issued, &loaded.boot.config_server) {
        (Some(issued), Some(server)) => {
            pki::Keystore::remote(server.ca_certificates.clone(), issued.clone())
        }
        _ => pki::Keystore::open(&loaded).await?,
    };
    keystore.load(&render::keyset_names(&loaded)).await?;
    // A vSphere control-plane VM's etcd disks, as its guestinfo describes them.
    let etcd_disks =
        if loaded.boot.cloud_provider == kops_vsphere::CLOUD && loaded.role == Role::ControlPlane {
            let tools = vsphere::Tools;
            let guest: &dyn vsphere::Guest = options.vsphere_guest.as_deref().unwrap_or(&tools);
            vsphere::etcd::disks(guest)?
        } else {
            Vec::new()
        };
    let ctx = render::Context {
        loaded: &loaded,
        node_name: &node_name,
        node_ip: options.node_ip.as_deref(),
        region: options.region.as_deref(),
        root: &options.root,
        etcd_disks: &etcd_disks,
    };
    planned.extend(render::node_files(&ctx, &keystore)?);
    if matches!(loaded.role, Role::ControlPlane | Role::ApiServer) {
        planned.extend(render::control_plane_files(&ctx, &keystore)?);
    }
    if loaded.role == Role::ControlPlane {
        let controller =
            config_server::controller_options(&loaded, options.region.as_deref()).await?;
        keystore.load(&controller.server.signing_cas).await?;
        planned.extend(render::kops_controller_files(&ctx, &keystore, &controller)?);
    }
    // Packages from apt repositories (gVisor): their sources planned here,
    // the packages installed once the files are written.
    let wanted = apt::wanted(&loaded, &options.gvisor_keyring_url);
    let debian = apt::debian_family(&options.root);
    if !wanted.is_empty() && debian {
        planned.extend(apt::source_files(&fetcher, arch, &wanted).await?);
    }
    if let Some(secret) = &loaded.docker_config {
        planned.push(files::PlannedFile::secret(
            "/root/.docker/config.json",
            secret.clone(),
        ));
    }

    // 3. Write what differs, install packages, start services.
    let changes = files::apply(&options.root, planned, options.dry_run)?;
    let package_names = || wanted.packages.iter().map(|p| p.to_string()).collect();
    let packages = if wanted.is_empty() {
        PackageAction::None
    } else if !debian {
        tracing::warn!(
            "gVisor is enabled but this system is not Debian or Ubuntu: runsc is not installed, and pods of the `gvisor` RuntimeClass will not start here"
        );
        PackageAction::NotDebian {
            packages: package_names(),
        }
    } else if options.dry_run || options.root != Path::new("/") {
        PackageAction::Skipped {
            packages: package_names(),
        }
    } else {
        PackageAction::Installed {
            packages: apt::install(&System, &wanted)?,
        }
    };
    let services = if options.dry_run {
        ServiceAction::SkippedDryRun
    } else if options.root != Path::new("/") {
        ServiceAction::SkippedNotRoot {
            root: options.root.display().to_string(),
        }
    } else {
        // The etcd disks are formatted (once) and mounted before the
        // kubelet starts etcd-manager.
        for step in vsphere::etcd::prepare(
            &options.root,
            &loaded.config.cluster_name,
            &etcd_disks,
            &vsphere::etcd::System,
        )? {
            tracing::info!("{step}");
        }
        render::start_services(&changes)?
    };
    Ok(Outcome {
        cluster: loaded.config.cluster_name.clone(),
        instance_group: loaded.boot.instance_group_name.clone(),
        role: loaded.role,
        changes,
        downloaded,
        services,
        packages,
    })
}

/// This VM as its guest sees it (`options.vsphere_guest`, else VMware Tools).
fn vsphere_vm(options: &Options) -> Result<vsphere::Vm, NodeupError> {
    let tools = vsphere::Tools;
    let guest: &dyn vsphere::Guest = options.vsphere_guest.as_deref().unwrap_or(&tools);
    vsphere::vm(guest).map_err(|reason| NodeupError::Vsphere { reason })
}

fn host_name() -> Result<String, NodeupError> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| NodeupError::NodeName {
            reason: "/proc/sys/kernel/hostname is unreadable or empty".into(),
        })
}

impl AssetKind {
    /// Where a single-file asset is installed.
    pub fn install_path(self) -> Option<&'static str> {
        match self {
            AssetKind::Kubelet => Some("/usr/local/bin/kubelet"),
            AssetKind::Kubectl => Some("/usr/local/bin/kubectl"),
            AssetKind::EcrCredentialProvider => Some("/opt/kops/bin/ecr-credential-provider"),
            AssetKind::GcpAuthProvider => Some("/opt/kops/bin/auth-provider-gcp"),
            AssetKind::Runc => Some("/usr/local/sbin/runc"),
            AssetKind::Containerd | AssetKind::CniPlugins => None,
        }
    }
}
