//! The state-store key control-plane VMs carry. With a custom S3 endpoint
//! (MinIO and the like, usual on-premises), kops writes the operator's
//! `S3_ACCESS_KEY_ID` and `S3_SECRET_ACCESS_KEY` into the control plane's
//! user data. On vSphere that user data lives in the VM's
//! `guestinfo.userdata`, which anyone who can read the VM's configuration
//! in vCenter can read, and with it the cluster's CA keys in the store.
//! kops-rs puts a key of the operator's choosing there instead, named by
//! [`kops_vsphere::STATE_STORE_CREDENTIALS_FILE`] (meant to be limited to
//! the cluster's prefix, read-only), and copies the operator's own only
//! when asked.

use kops_api::env::{custom_s3_endpoint, process_env};
use kops_vsphere::{Credentials, VsphereError, STATE_STORE_CREDENTIALS_FILE};

use crate::ModelError;

/// The variables of the key kops forwards.
const ACCESS_KEY: &str = "S3_ACCESS_KEY_ID";
const SECRET_KEY: &str = "S3_SECRET_ACCESS_KEY";

/// What the operator said about copying their own key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consent {
    /// `update cluster`: without a key of the cluster's own, refuse unless
    /// asked to copy.
    Ask,
    /// `--vsphere-copy-operator-credentials`: copy it, with a warning.
    Copy,
    /// Rolling updates and `delete instance`: VMs are remade with what
    /// `update` gave them (no flag there; `update` decided).
    Keep,
}

/// The key control-plane VMs get instead of the operator's (`None`: this
/// process' variables, as kops; nothing secret when no custom S3 endpoint
/// or no key is set). `store` is the cluster's state-store URL, for the
/// message.
pub fn control_plane_store_key(
    consent: Consent,
    store: &str,
    warnings: &mut Vec<String>,
) -> Result<Option<Credentials>, ModelError> {
    control_plane_store_key_from(consent, store, warnings, &process_env)
}

fn control_plane_store_key_from(
    consent: Consent,
    store: &str,
    warnings: &mut Vec<String>,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<Credentials>, ModelError> {
    let set = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
    if custom_s3_endpoint(lookup).is_none()
        || (set(ACCESS_KEY).is_none() && set(SECRET_KEY).is_none())
    {
        return Ok(None);
    }
    if let Some(own) = Credentials::from_file_named_by(STATE_STORE_CREDENTIALS_FILE, lookup)? {
        return Ok(Some(own));
    }
    let operator = set(ACCESS_KEY).unwrap_or_default();
    let prefix = format!("{}/", store.trim_end_matches('/'));
    match consent {
        Consent::Keep => Ok(None),
        Consent::Copy => {
            warnings.push(format!(
                "the control-plane VMs' guestinfo carries your own state-store key {ACCESS_KEY} `{operator}` (--vsphere-copy-operator-credentials): whoever can read their configuration in vCenter can use it; give them a key limited to {prefix} in {STATE_STORE_CREDENTIALS_FILE} (docs/vsphere.md)"
            ));
            Ok(None)
        }
        Consent::Ask => Err(VsphereError::Invalid {
            message: format!(
                "the control-plane VMs would carry your state-store key {ACCESS_KEY} `{operator}` in their guestinfo, readable by whoever can read their configuration in vCenter"
            ),
            fix: format!(
                "name a file holding a key limited to {prefix} (two lines: access key id, secret) in {STATE_STORE_CREDENTIALS_FILE} (docs/vsphere.md), or pass --vsphere-copy-operator-credentials to copy yours"
            ),
        }
        .into()),
    }
}

/// `lookup` with the key replaced by `key` (when given): what a
/// control-plane group's script exports.
pub fn with_store_key<'a>(key: Option<&'a Credentials>) -> impl Fn(&str) -> Option<String> + 'a {
    move |name: &str| match (key, name) {
        (Some(key), ACCESS_KEY) => Some(key.username.clone()),
        (Some(key), SECRET_KEY) => Some(key.password.clone()),
        _ => process_env(name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn the_operators_key_goes_to_the_control_plane_only_when_asked() {
        let store = "s3://state/c.k8s.local";
        let minio = [
            ("S3_ENDPOINT", "https://minio.example.com"),
            ("S3_ACCESS_KEY_ID", "operator-key"),
            ("S3_SECRET_ACCESS_KEY", "operator-secret"),
        ];
        let mut warnings = Vec::new();
        let refused =
            control_plane_store_key_from(Consent::Ask, store, &mut warnings, &env(&minio))
                .unwrap_err()
                .to_string();
        assert!(
            refused.contains("`operator-key`")
                && refused.contains("s3://state/c.k8s.local/")
                && refused.contains(STATE_STORE_CREDENTIALS_FILE)
                && refused.contains("--vsphere-copy-operator-credentials")
                && !refused.contains("operator-secret"),
            "{refused}"
        );
        assert!(
            control_plane_store_key_from(Consent::Copy, store, &mut warnings, &env(&minio))
                .unwrap()
                .is_none()
        );
        assert!(
            warnings.len() == 1 && warnings[0].contains("`operator-key`"),
            "{warnings:?}"
        );
        assert!(
            control_plane_store_key_from(Consent::Keep, store, &mut warnings, &env(&minio))
                .unwrap()
                .is_none()
        );

        // A key of the cluster's own, from the file the variable names.
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("store-key");
        std::fs::write(&file, "cluster-key\ncluster-secret\n").unwrap();
        let path = file.display().to_string();
        let mut with_file = minio.to_vec();
        with_file.push((STATE_STORE_CREDENTIALS_FILE, path.as_str()));
        let own =
            control_plane_store_key_from(Consent::Ask, store, &mut warnings, &env(&with_file))
                .unwrap()
                .unwrap();
        assert_eq!(
            (own.username.as_str(), own.password.as_str()),
            ("cluster-key", "cluster-secret")
        );

        // Nothing secret forwarded: no endpoint (kops forwards nothing),
        // or no key (an anonymous store).
        for pairs in [&minio[1..], &minio[..1]] {
            assert!(
                control_plane_store_key_from(Consent::Ask, store, &mut warnings, &env(pairs))
                    .unwrap()
                    .is_none()
            );
        }
    }
}
