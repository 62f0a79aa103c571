//! cloud-init, as a VM of kops-rs reads its guestinfo on first boot:
//! Debian's cloud-init package, unpacked by `scripts/setup-cloud-init`
//! into `<workspace>/.cloud-init`, run on the guestinfo values a VM
//! carries (its VMware data source's environment transport takes the same
//! keys and encodings), with its network renderers.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use crate::workspace_root;

const SCRIPT: &str = include_str!("cloud_init.py");

/// What cloud-init made of a VM's guestinfo.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct GuestView {
    pub instance_id: Option<String>,
    pub hostname: Option<String>,
    pub user_data: Option<String>,
    /// The rendered network config, when the metadata has one.
    pub network: Option<RenderedNetwork>,
}

/// A network config as cloud-init writes it.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct RenderedNetwork {
    /// `/etc/netplan/50-cloud-init.yaml` (Ubuntu).
    pub netplan: String,
    /// systemd-networkd's `.network` files, by interface.
    pub networkd: BTreeMap<String, String>,
}

/// The unpacked package's Python path, when it is there.
fn python_path() -> Option<PathBuf> {
    let dir = std::env::var_os("KOPS_CLOUD_INIT")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(".cloud-init"))
        .join("usr/lib/python3/dist-packages");
    dir.join("cloudinit").is_dir().then_some(dir)
}

/// Whether cloud-init is there; prints why not (and panics under CI,
/// which must not skip).
pub fn cloud_init_available() -> bool {
    if python_path().is_some() {
        return true;
    }
    crate::skip(
        "cloud-init",
        "cloud-init not unpacked (run scripts/setup-cloud-init, or set KOPS_CLOUD_INIT)",
    );
    false
}

/// Runs cloud-init's VMware data source on `guestinfo` (a VM's
/// extraConfig: `guestinfo.metadata`, `guestinfo.userdata` and their
/// `.encoding`s) and renders its network config.
pub fn read_guestinfo(guestinfo: &BTreeMap<String, String>) -> Result<GuestView, String> {
    let path = python_path().ok_or("cloud-init is not unpacked")?;
    let venv = workspace_root().join(".venv/bin/python");
    let python = if venv.is_file() {
        venv
    } else {
        PathBuf::from("python3")
    };
    let mut command = Command::new(python);
    command
        .arg("-c")
        .arg(SCRIPT)
        .env("PYTHONPATH", path)
        .env("VMX_GUESTINFO", "1");
    for (key, value) in guestinfo {
        if let Some(name) = key.strip_prefix("guestinfo.") {
            // The transport's variable names: `vmx.guestinfo.<key>`,
            // upper case, dots as underscores.
            let var = format!("VMX_GUESTINFO_{}", name.to_uppercase().replace('.', "_"));
            command.env(var, value);
        }
    }
    let output = command
        .output()
        .map_err(|e| format!("cannot run python: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "cloud-init failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    serde_json::from_slice(&output.stdout).map_err(|e| {
        format!(
            "cloud-init printed no view ({e}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}
