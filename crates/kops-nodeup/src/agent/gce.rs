//! nodeup on Google Cloud: what the instance's metadata server tells it.
//!
//! The user data (the `user-data` or `startup-script` metadata item)
//! carries the boot config; when the file it writes is not there, nodeup
//! reads it from the metadata server instead. The instance's name is the
//! node's name (kops names GCE nodes after their instances), its first
//! interface's address the node's address, and its zone gives the region.
//! A worker proves which instance it is to kops-controller with a token
//! signed by the instance's vTPM attestation key ([`super::tpm`]).

use std::io::Read;
use std::sync::Arc;

use kops_bootstrap::gce::metadata::Metadata;
use kops_bootstrap::gce::token::{InstanceRef, Signer};

use crate::bootstrap::{boot_config_text, BootConfig};

/// The metadata items that may hold the user data, in the order looked at.
pub const USER_DATA_KEYS: [&str; 2] = ["user-data", "startup-script"];

/// Who this instance is, from the metadata server.
#[derive(Debug, Clone)]
pub struct Instance {
    pub project: String,
    pub zone: String,
    pub name: String,
    pub ip: Option<String>,
}

impl Instance {
    /// The region of its zone (`us-central1-a` → `us-central1`).
    pub fn region(&self) -> String {
        self.zone
            .rsplit_once('-')
            .map_or(self.zone.clone(), |(region, _)| region.to_string())
    }

    pub fn reference(&self) -> InstanceRef {
        InstanceRef {
            project: self.project.clone(),
            zone: self.zone.clone(),
            instance: self.name.clone(),
        }
    }
}

/// The metadata server (`GCE_METADATA_HOST`, else the link-local one).
pub fn metadata() -> Result<Metadata, String> {
    Metadata::from_env()
}

/// This instance, as its metadata server describes it.
pub async fn instance(metadata: &Metadata) -> Result<Instance, String> {
    Ok(Instance {
        project: metadata.project_id().await?,
        zone: metadata.zone().await?,
        name: metadata.instance_name().await?,
        ip: metadata
            .get_opt("instance/network-interfaces/0/ip")
            .await?
            .map(|ip| ip.trim().to_string())
            .filter(|ip| !ip.is_empty()),
    })
}

/// The boot config carried by the instance's user data.
pub async fn boot_config_from_metadata(metadata: &Metadata) -> Result<String, String> {
    for key in USER_DATA_KEYS {
        if let Some(user_data) = metadata.attribute(key).await? {
            return boot_config_in(&user_data).ok_or_else(|| {
                format!(
                    "the `{key}` metadata of this instance (metadata server {}) holds no kops boot config",
                    metadata.host()
                )
            });
        }
    }
    Err(format!(
        "this instance has neither `user-data` nor `startup-script` metadata (metadata server {})",
        metadata.host()
    ))
}

/// The boot config in a user-data script: the heredoc, or the gzipped
/// base64 of a cluster with `compressUserData`.
pub fn boot_config_in(user_data: &str) -> Option<String> {
    if let Some(text) = boot_config_text(user_data) {
        return Some(text.to_string());
    }
    let line = user_data
        .lines()
        .find(|l| l.ends_with("| base64 -d | gzip -d > conf/kube_env.yaml"))?;
    let encoded = line.strip_prefix("echo \"")?.split('"').next()?;
    use base64::Engine;
    let gzipped = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .ok()?;
    let mut text = String::new();
    flate2::read::GzDecoder::new(gzipped.as_slice())
        .read_to_string(&mut text)
        .ok()?;
    BootConfig::parse(&text).ok()?;
    Some(text)
}

/// What signs this node's tokens: the shielded VM's vTPM (its
/// attestation key, the one Compute reports as the instance's signing
/// key), or a key given in its place.
pub fn signer(key: Option<&Arc<dyn Signer>>, tpm: &str) -> Arc<dyn Signer> {
    match key {
        Some(key) => key.clone(),
        None => Arc::new(super::tpm::TpmSigner {
            device: tpm.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_boot_config_is_found_in_both_script_forms() {
        let boot = "CloudProvider: gce\nClusterName: a.example.com\nInstanceGroupName: nodes\nInstanceGroupRole: Node\nNodeupConfigHash: abc\n";
        let plain = format!("#!/bin/bash\ncat > conf/kube_env.yaml << '__EOF_KUBE_ENV'\n{boot}\n__EOF_KUBE_ENV\n\ndownload-release\n");
        assert_eq!(boot_config_in(&plain).unwrap(), boot);
        let compressed = format!(
            "#!/bin/bash\necho \"{}\" | base64 -d | gzip -d > conf/kube_env.yaml\n\ndownload-release\n",
            crate::bootstrap::gzip_base64(boot.as_bytes())
        );
        assert_eq!(boot_config_in(&compressed).unwrap(), boot);
        assert!(boot_config_in("#!/bin/bash\necho hi\n").is_none());
    }

    #[test]
    fn the_region_is_the_zone_without_its_letter() {
        let instance = Instance {
            project: "p".into(),
            zone: "us-central1-a".into(),
            name: "n".into(),
            ip: None,
        };
        assert_eq!(instance.region(), "us-central1");
    }
}
