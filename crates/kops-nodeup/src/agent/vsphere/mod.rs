//! nodeup on vSphere: what VMware Tools tells the guest.
//!
//! `update cluster` puts the VM's cloud-init user data (the bootstrap
//! script carrying the boot config), its metadata (the host name) and its
//! one-time bootstrap token in the VM's guestinfo; inside the VM, VMware
//! Tools reads them (`vmware-rpctool "info-get guestinfo.<key>"`). When
//! the file the user data writes is not there, nodeup reads the boot
//! config from `guestinfo.userdata`. The node is named after its VM (the
//! metadata's `local-hostname`), and a worker proves which VM it is to
//! kops-controller with its BIOS UUID (in vSphere's byte order, see
//! [`bios`]) and an HMAC keyed with the token ([`kops_vsphere::proof`]);
//! the token never leaves the VM.

pub mod bios;
pub mod etcd;

use std::io::Read;

use base64::Engine;

use super::{NodeupError, PlannedFile};
use crate::config::NodeupConfig;

pub use crate::config::KUBE_VIP_IMAGE;

/// Where the kubelet finds static pods.
pub const KUBE_VIP_MANIFEST: &str = "/etc/kubernetes/manifests/kube-vip.yaml";

/// What the guest can read about its VM.
pub trait Guest: std::fmt::Debug + Send + Sync {
    /// A guestinfo value (`guestinfo.` included in `key`); `None` when the
    /// VM has none.
    fn get(&self, key: &str) -> Result<Option<String>, String>;
    /// Sets a guestinfo value from inside the VM (`guestinfo.` included
    /// in `key`); vCenter then shows it in the VM's extraConfig.
    fn set(&self, key: &str, value: &str) -> Result<(), String>;
    /// A file in which Linux shows the VM's firmware tables (see
    /// [`bios`]); `None` when there is none.
    fn firmware(&self, path: &str) -> Result<Option<Vec<u8>>, String>;
}

/// The guest as VMware Tools (open-vm-tools) shows it.
#[derive(Debug, Clone, Copy)]
pub struct Tools;

/// The tool of open-vm-tools that reads guestinfo.
const RPCTOOL: &str = "vmware-rpctool";

impl Tools {
    /// Whether VMware Tools is installed (the node is a VMware VM).
    pub fn present() -> bool {
        std::env::var_os("PATH").is_some_and(|paths| {
            std::env::split_paths(&paths).any(|dir| dir.join(RPCTOOL).is_file())
        })
    }
}

impl Guest for Tools {
    fn get(&self, key: &str) -> Result<Option<String>, String> {
        let output = std::process::Command::new(RPCTOOL)
            .arg(format!("info-get {key}"))
            .output()
            .map_err(|e| format!("cannot run {RPCTOOL} (open-vm-tools): {e}"))?;
        // `info-get` fails with "No value found" for a key the VM lacks.
        if !output.status.success() {
            return Ok(None);
        }
        let value = String::from_utf8_lossy(&output.stdout).trim().to_string();
        Ok((!value.is_empty()).then_some(value))
    }

    fn set(&self, key: &str, value: &str) -> Result<(), String> {
        let output = std::process::Command::new(RPCTOOL)
            .arg(format!("info-set {key} {value}"))
            .output()
            .map_err(|e| format!("cannot run {RPCTOOL} (open-vm-tools): {e}"))?;
        if output.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{RPCTOOL} info-set {key}: {}",
                String::from_utf8_lossy(&output.stdout).trim()
            ))
        }
    }

    fn firmware(&self, path: &str) -> Result<Option<Vec<u8>>, String> {
        match std::fs::read(path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("cannot read {path}: {e}")),
        }
    }
}

/// A guestinfo value decoded as its `<key>.encoding` says (cloud-init's
/// `base64`/`b64`, `gzip+base64`/`gz+b64`, or none).
pub fn decoded(guest: &dyn Guest, key: &str) -> Result<Option<String>, String> {
    let Some(value) = guest.get(key)? else {
        return Ok(None);
    };
    let encoding = guest.get(&format!("{key}.encoding"))?.unwrap_or_default();
    let base64 = |v: &str| {
        base64::engine::general_purpose::STANDARD
            .decode(v.trim())
            .map_err(|e| format!("{key} is not base64: {e}"))
    };
    let text = match encoding.as_str() {
        "" => value,
        "base64" | "b64" => String::from_utf8_lossy(&base64(&value)?).into_owned(),
        "gzip+base64" | "gz+b64" => {
            let mut text = String::new();
            flate2::read::GzDecoder::new(base64(&value)?.as_slice())
                .read_to_string(&mut text)
                .map_err(|e| format!("{key} is not gzip: {e}"))?;
            text
        }
        other => return Err(format!("{key} has an unknown encoding `{other}`")),
    };
    Ok(Some(text))
}

/// Marks this VM as booted ([`kops_vsphere::BOOTED_KEY`]) unless it is:
/// from then on `update` never takes it for a clone that did not start,
/// and leaves it alone when it is powered off. Set first thing on every
/// boot of a vSphere VM, before anything can fail.
pub fn mark_booted(guest: &dyn Guest) -> Result<(), String> {
    if guest.get(kops_vsphere::BOOTED_KEY)?.is_some() {
        return Ok(());
    }
    guest.set(kops_vsphere::BOOTED_KEY, "1")
}

/// The boot config carried by the VM's `guestinfo.userdata`.
pub fn boot_config_from_guestinfo(guest: &dyn Guest) -> Result<String, String> {
    let user_data = decoded(guest, "guestinfo.userdata")?
        .ok_or("this VM has no guestinfo.userdata (VMware Tools)")?;
    super::gce::boot_config_in(&user_data)
        .ok_or_else(|| "this VM's guestinfo.userdata holds no kops boot config".to_string())
}

/// Who this VM is.
#[derive(Debug, Clone)]
pub struct Vm {
    /// The node's name: the VM's (cloud-init's `local-hostname`).
    pub name: Option<String>,
    /// The BIOS UUID in vSphere's order (`config.uuid`).
    pub bios_uuid: String,
    /// The one-time bootstrap token, while kops-controller has not used it.
    pub token: Option<String>,
}

/// This VM, as VMware Tools shows it.
pub fn vm(guest: &dyn Guest) -> Result<Vm, String> {
    let name = decoded(guest, "guestinfo.metadata")?.and_then(|json| {
        serde_json::from_str::<serde_json::Value>(&json)
            .ok()?
            .get("local-hostname")?
            .as_str()
            .map(str::to_string)
    });
    Ok(Vm {
        name,
        bios_uuid: bios::bios_uuid(guest)?,
        token: guest.get(kops_vsphere::TOKEN_KEY)?,
    })
}

/// kube-vip's static pod for a control-plane node: the control plane's
/// virtual IP is the API server's additional address (`update cluster`
/// puts `spec.cloudConfig.vSphereControlPlaneVIP` there); none without one.
/// `kubeconfig` and the `files` it names are mounted read-only.
pub fn kube_vip(
    config: &NodeupConfig,
    kubeconfig: &str,
    files: &[&str],
) -> Result<Option<PlannedFile>, NodeupError> {
    let Some(vip) = config.apiserver_additional_ips.first() else {
        return Ok(None);
    };
    let port = config
        .api_server_config
        .as_ref()
        .and_then(|a| a.kube_api_server.get("securePort"))
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(443);
    let image = config.kube_vip_image.as_deref().unwrap_or(KUBE_VIP_IMAGE);
    let manifest = kube_vip_manifest(vip, port, image, kubeconfig, files).map_err(|e| {
        NodeupError::Vsphere {
            reason: format!("kube-vip manifest: {e}"),
        }
    })?;
    Ok(Some(PlannedFile::new(KUBE_VIP_MANIFEST, 0o644, manifest)))
}

/// kube-vip's static pod manifest, from its template (`kube-vip.yaml`).
pub fn kube_vip_manifest(
    vip: &str,
    port: u64,
    image: &str,
    kubeconfig: &str,
    files: &[&str],
) -> Result<String, kops_template::Error> {
    let mut engine = kops_template::Engine::new();
    engine.fail_on_missing(true);
    engine.add_template_as("kube-vip", "kube-vip.yaml", include_str!("kube-vip.yaml"))?;
    let files: Vec<serde_json::Value> = files
        .iter()
        .enumerate()
        .map(|(i, path)| serde_json::json!({"name": format!("file-{i}"), "path": path}))
        .collect();
    let cidr = if vip.contains(':') { "128" } else { "32" };
    engine.execute(
        "kube-vip",
        &serde_json::json!({
            "address": vip,
            "port": port.to_string(),
            "cidr": cidr,
            "image": image,
            "kubeconfig": kubeconfig,
            "files": files,
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[derive(Debug)]
    struct Values(BTreeMap<String, String>);

    impl Guest for Values {
        fn get(&self, key: &str) -> Result<Option<String>, String> {
            Ok(self.0.get(key).cloned())
        }
        fn set(&self, key: &str, _: &str) -> Result<(), String> {
            Err(format!("read-only: {key}"))
        }
        fn firmware(&self, path: &str) -> Result<Option<Vec<u8>>, String> {
            Ok((path == bios::PRODUCT_SERIAL)
                .then(|| b"VMware-42 12 ab 00 00 00 00 00-00 00 00 00 00 00 00 01".to_vec()))
        }
    }

    #[test]
    fn guestinfo_in_each_encoding() {
        let boot = "CloudProvider: vsphere\nClusterName: a.k8s.local\nInstanceGroupName: nodes\nInstanceGroupRole: Node\nNodeupConfigHash: abc\n";
        let script = format!(
            "#!/bin/bash\ncat > conf/kube_env.yaml << '__EOF_KUBE_ENV'\n{boot}\n__EOF_KUBE_ENV\n"
        );
        let b64 = |s: &[u8]| base64::engine::general_purpose::STANDARD.encode(s);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(&mut gz, script.as_bytes()).unwrap();
        let gzipped = b64(&gz.finish().unwrap());
        for (value, encoding) in [
            (script.clone(), None),
            (b64(script.as_bytes()), Some("base64")),
            (gzipped, Some("gzip+base64")),
        ] {
            let mut values = BTreeMap::from([("guestinfo.userdata".to_string(), value)]);
            if let Some(e) = encoding {
                values.insert("guestinfo.userdata.encoding".into(), e.into());
            }
            assert_eq!(boot_config_from_guestinfo(&Values(values)).unwrap(), boot);
        }
        let bad = Values(BTreeMap::from([
            ("guestinfo.userdata".to_string(), "x".to_string()),
            (
                "guestinfo.userdata.encoding".to_string(),
                "rot13".to_string(),
            ),
        ]));
        assert!(boot_config_from_guestinfo(&bad)
            .unwrap_err()
            .contains("unknown encoding `rot13`"));
        let none = Values(BTreeMap::new());
        assert!(boot_config_from_guestinfo(&none)
            .unwrap_err()
            .contains("no guestinfo.userdata"));
    }

    #[test]
    fn kube_vip_holds_the_vip_in_arp_mode() {
        let text = kube_vip_manifest(
            "10.0.0.100",
            443,
            KUBE_VIP_IMAGE,
            "/var/lib/kops/kubeconfig",
            &["/a.crt"],
        )
        .unwrap();
        let pod: serde_json::Value = serde_yaml_ng::from_str(&text).unwrap();
        assert_eq!(pod["kind"], "Pod");
        assert_eq!(pod["spec"]["hostNetwork"], true);
        let container = &pod["spec"]["containers"][0];
        assert_eq!(container["image"], KUBE_VIP_IMAGE);
        let env: BTreeMap<String, String> = container["env"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|e| {
                Some((
                    e["name"].as_str()?.to_string(),
                    e["value"].as_str()?.to_string(),
                ))
            })
            .collect();
        assert_eq!(env["address"], "10.0.0.100");
        assert_eq!(env["port"], "443");
        assert_eq!(env["vip_arp"], "true");
        assert_eq!(env["cp_enable"], "true");
        assert_eq!(env["vip_cidr"], "32");
        let volumes = pod["spec"]["volumes"].as_array().unwrap();
        assert_eq!(volumes[0]["hostPath"]["path"], "/var/lib/kops/kubeconfig");
        assert_eq!(volumes[1]["hostPath"]["path"], "/a.crt");
        assert_eq!(container["volumeMounts"][1]["mountPath"], "/a.crt");

        // A config without a virtual IP gets no kube-vip.
        let none = kube_vip(&NodeupConfig::default(), "/k", &[]).unwrap();
        assert!(none.is_none());
        let config = NodeupConfig {
            apiserver_additional_ips: vec!["10.0.0.100".into()],
            ..Default::default()
        };
        let file = kube_vip(&config, "/k", &[]).unwrap().unwrap();
        assert_eq!(file.path, KUBE_VIP_MANIFEST);
    }

    #[test]
    fn the_first_boot_marker_is_set_once() {
        let marked = Values(BTreeMap::from([(
            kops_vsphere::BOOTED_KEY.to_string(),
            "1".to_string(),
        )]));
        // Already set: nothing written (this guest refuses writes).
        mark_booted(&marked).unwrap();
        let unmarked = Values(BTreeMap::new());
        assert!(mark_booted(&unmarked)
            .unwrap_err()
            .contains(kops_vsphere::BOOTED_KEY));
    }

    #[test]
    fn the_vm_is_named_by_its_metadata() {
        let metadata = kops_vsphere::cluster::metadata("nodes-1.a.k8s.local", None);
        let guest = Values(BTreeMap::from([
            (
                "guestinfo.metadata".to_string(),
                base64::engine::general_purpose::STANDARD.encode(metadata),
            ),
            ("guestinfo.metadata.encoding".to_string(), "base64".into()),
            (kops_vsphere::TOKEN_KEY.to_string(), "t".into()),
        ]));
        let vm = vm(&guest).unwrap();
        assert_eq!(vm.name.as_deref(), Some("nodes-1.a.k8s.local"));
        assert_eq!(vm.bios_uuid, "4212ab00-0000-0000-0000-000000000001");
        assert_eq!(vm.token.as_deref(), Some("t"));
    }
}
