//! The cluster's SSH key pair.
//!
//! - `spec.sshKeyName: NAME`: an existing EC2 key pair, used as it is.
//! - `spec.sshKeyName: ""`: no key at all.
//! - otherwise the admin key from the state store, imported as
//!   `kubernetes.<cluster>-<fingerprint>`, the fingerprint being the MD5 of
//!   the key's OpenSSH encoding written as colon-separated hex (the name
//!   kops gives it, so a key kops imported is found).

use crate::tasks::ssh_key::SshKey;
use crate::AwsContext;
use base64::Engine;
use kops_engine::TaskGraph;
use md5::{Digest, Md5};

use kops_model::{Model, ModelError};

/// Adds the key pair task, when the cluster uses one.
pub fn build(model: &Model<'_>, graph: &mut TaskGraph<AwsContext>) -> Result<(), ModelError> {
    if let Some(key) = ssh_key(model)? {
        graph.add(key)?;
    }
    Ok(())
}

/// The key pair task, or `None` when the cluster has no key.
pub fn ssh_key(model: &Model<'_>) -> Result<Option<SshKey>, ModelError> {
    let tags = model.tags(model.name(), &[]);
    match model.cluster.spec.ssh_key_name.as_deref() {
        Some("") => Ok(None),
        Some(name) => Ok(Some(SshKey {
            name: name.to_string(),
            public_key: None,
            tags,
            shared: true,
        })),
        None => {
            let Some(public_key) = model.ssh_public_key else {
                return Ok(None);
            };
            Ok(Some(SshKey {
                name: key_name(model.name(), public_key)?,
                public_key: Some(public_key.trim().to_string()),
                tags,
                shared: false,
            }))
        }
    }
}

/// `kubernetes.<cluster>-<fingerprint>`.
pub fn key_name(cluster: &str, public_key: &str) -> Result<String, ModelError> {
    Ok(format!(
        "kubernetes.{cluster}-{}",
        openssh_fingerprint(public_key)?
    ))
}

/// The MD5 fingerprint of an OpenSSH public key (`ssh-rsa AAAA... comment`),
/// as `c4:a6:...`: the hash of the decoded key blob.
pub fn openssh_fingerprint(public_key: &str) -> Result<String, ModelError> {
    let invalid = |message: String| ModelError::Spec {
        path: "sshpublickey admin".into(),
        message,
        hint: "replace it with `kops create sshpublickey -i ~/.ssh/id_rsa.pub`".into(),
    };
    let mut fields = public_key.split_whitespace();
    let (Some(_kind), Some(blob)) = (fields.next(), fields.next()) else {
        return Err(invalid(
            "the SSH public key is not in OpenSSH format (`TYPE BASE64 [COMMENT]`)".into(),
        ));
    };
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(blob)
        .map_err(|e| invalid(format!("the SSH public key's data is not base64: {e}")))?;
    let digest = Md5::digest(&decoded);
    Ok(digest
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":"))
}

#[cfg(test)]
mod tests {
    use crate::model::security::tests::{conformance_case, load, model, PUBLIC};

    use super::*;

    #[test]
    fn key_names_match_kops() {
        let Some(dir) = conformance_case("minimal-aws") else {
            return;
        };
        let key = std::fs::read_to_string(dir.join("id_rsa.pub")).unwrap();
        assert_eq!(
            key_name("minimal-aws.example.com", &key).unwrap(),
            "kubernetes.minimal-aws.example.com-c4:a6:ed:9a:a8:89:b9:e2:c3:9c:d6:63:eb:9c:71:57"
        );
    }

    #[test]
    fn the_key_comes_from_the_store_or_the_spec() {
        let key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHUhbPQTeXkBsr1Wn1Q/Xx+hhXVEo4Z1BRhaB5pOFnNc admin@example";
        let (cluster, groups) = load(PUBLIC);
        let mut m = model(&cluster, &groups);
        assert!(ssh_key(&m).unwrap().is_none(), "no key, no key pair");

        m.ssh_public_key = Some(key);
        let task = ssh_key(&m).unwrap().unwrap();
        assert!(task.name.starts_with("kubernetes.pub.example.com-"));
        assert_eq!(task.name.matches(':').count(), 15);
        assert!(!task.shared);
        assert_eq!(
            task.tags.get("Name").map(String::as_str),
            Some("pub.example.com")
        );

        let (named, groups) =
            load(&PUBLIC.replace("  networkCIDR:", "  sshKeyName: my-key\n  networkCIDR:"));
        let mut m = model(&named, &groups);
        m.ssh_public_key = Some(key);
        let task = ssh_key(&m).unwrap().unwrap();
        assert_eq!(
            (task.name.as_str(), task.shared, task.public_key),
            ("my-key", true, None)
        );

        let (none, groups) =
            load(&PUBLIC.replace("  networkCIDR:", "  sshKeyName: \"\"\n  networkCIDR:"));
        let mut m = model(&none, &groups);
        m.ssh_public_key = Some(key);
        assert!(
            ssh_key(&m).unwrap().is_none(),
            "an empty sshKeyName means no key"
        );
    }

    #[test]
    fn a_malformed_key_is_a_spec_error() {
        let err = openssh_fingerprint("ssh-rsa not*base64")
            .unwrap_err()
            .to_string();
        assert!(err.contains("base64") && err.contains("hint:"), "{err}");
        assert!(openssh_fingerprint("garbage").is_err());
    }
}
