//! kops' machine-key node token (`x-pki-tpm `, kops' `pkibootstrap`): a
//! machine enrolled with `kops toolbox enroll` signs a small JSON document
//! naming itself (its host name, the name of its `Host` object), its public
//! key, the sha256 of the request body, the time and the audience, with
//! the private key `toolbox enroll` made on it
//! (`/etc/kubernetes/kops/pki/machine/private.pem`, ECDSA P-256); the
//! controller checks the signature against the public key of the machine's
//! `Host` object (ECDSA with SHA-256, an ASN.1 DER signature, as Go's
//! `ecdsa.SignASN1` makes).
//!
//! On the wire: `x-pki-tpm <base64 of {"signature":…,"data":…}>`, the
//! same envelope as the GCE token ([`crate::signed_token`]);
//! `data` is the JSON of [`TokenData`] exactly as signed.

use std::time::SystemTime;

use aws_lc_rs::encoding::{AsDer, PublicKeyX509Der};
use aws_lc_rs::signature::{EcdsaKeyPair, KeyPair, ParsedPublicKey};
use base64::Engine;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::gce::token::AUDIENCE;
use crate::protocol::SignError;
use crate::signed_token::{self, bytes_b64, AuthToken};

/// The prefix of a machine-key token (kops' `AuthenticationTokenPrefix`).
pub const TOKEN_PREFIX: &str = "x-pki-tpm ";

/// Where `toolbox enroll` keeps a machine's key pair.
pub const MACHINE_KEY_DIR: &str = "/etc/kubernetes/kops/pki/machine";
/// The private half, read by nodeup to sign its requests.
pub const MACHINE_PRIVATE_KEY: &str = "/etc/kubernetes/kops/pki/machine/private.pem";

/// What the node claims (kops' `AuthTokenData`, its JSON names).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenData {
    /// The machine's name: its `Host` object's, and the node's.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub instance: String,
    /// The signing key's public half, PEM (kops sends it; its controller,
    /// as this one, trusts only the `Host` object's key).
    #[serde(rename = "keyID", default, skip_serializing_if = "String::is_empty")]
    pub key_id: String,
    /// sha256 of the request body.
    #[serde(
        rename = "requestHash",
        with = "bytes_b64",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub request_hash: Vec<u8>,
    /// Seconds since the epoch.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub timestamp: i64,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub audience: String,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// A machine's private key (ECDSA P-256, as `toolbox enroll` makes it).
pub struct MachineKey {
    pair: EcdsaKeyPair,
    /// The public half as a `PUBLIC KEY` PEM (the token's `keyID`).
    public_pem: String,
}

impl MachineKey {
    /// From a PEM private key: `EC PRIVATE KEY` (openssl's `ecparam
    /// -genkey`) or PKCS#8 `PRIVATE KEY`.
    pub fn from_pem(text: &str) -> Result<MachineKey, String> {
        let block = pem::parse(text.as_bytes()).map_err(|e| format!("not a PEM key: {e}"))?;
        if block.tag() != "EC PRIVATE KEY" && block.tag() != "PRIVATE KEY" {
            return Err(format!(
                "a `{}` PEM block is not an ECDSA P-256 private key",
                block.tag()
            ));
        }
        let pair = EcdsaKeyPair::from_private_key_der(
            &aws_lc_rs::signature::ECDSA_P256_SHA256_ASN1_SIGNING,
            block.contents(),
        )
        .map_err(|e| format!("not an ECDSA P-256 private key: {e}"))?;
        let der: PublicKeyX509Der<'static> = pair
            .public_key()
            .as_der()
            .map_err(|_| "cannot encode its public key".to_string())?;
        let public_pem = public_key_pem(der.as_ref());
        Ok(MachineKey { pair, public_pem })
    }

    /// A new key (tests; `toolbox enroll` makes machines' keys with
    /// openssl on the machine).
    pub fn generate() -> Result<(MachineKey, String), String> {
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(
            &aws_lc_rs::signature::ECDSA_P256_SHA256_ASN1_SIGNING,
            &aws_lc_rs::rand::SystemRandom::new(),
        )
        .map_err(|_| "cannot make an ECDSA key".to_string())?;
        let pem = pem_block("PRIVATE KEY", pkcs8.as_ref());
        Ok((MachineKey::from_pem(&pem)?, pem))
    }

    /// The public half, a `PUBLIC KEY` PEM (what `Host.spec.publicKey` holds).
    pub fn public_pem(&self) -> &str {
        &self.public_pem
    }

    /// An ECDSA signature (SHA-256, ASN.1 DER) over `data`.
    pub fn sign(&self, data: &[u8]) -> Result<Vec<u8>, String> {
        self.pair
            .sign(&aws_lc_rs::rand::SystemRandom::new(), data)
            .map(|s| s.as_ref().to_vec())
            .map_err(|_| "ECDSA signing failed".to_string())
    }
}

/// A PEM block with 64-character lines and `\n` endings, as Go's
/// `pem.Encode` writes it.
fn pem_block(tag: &str, der: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {tag}-----\n");
    for chunk in b64.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(chunk));
        out.push('\n');
    }
    out.push_str(&format!("-----END {tag}-----\n"));
    out
}

/// A DER SubjectPublicKeyInfo as a `PUBLIC KEY` PEM.
pub fn public_key_pem(der: &[u8]) -> String {
    pem_block("PUBLIC KEY", der)
}

/// A node's token for a request with `body`: `instance` is the machine's
/// name (its `Host` object's).
pub fn create_token(
    instance: &str,
    key: &MachineKey,
    body: &[u8],
    now: SystemTime,
) -> Result<String, SignError> {
    let fail = |reason: String| SignError {
        url: format!("{MACHINE_PRIVATE_KEY} (host {instance})"),
        reason,
    };
    let data = TokenData {
        instance: instance.to_string(),
        key_id: key.public_pem.clone(),
        request_hash: Sha256::digest(body).to_vec(),
        timestamp: signed_token::unix_seconds(now).map_err(fail)?,
        audience: AUDIENCE.to_string(),
    };
    signed_token::seal(TOKEN_PREFIX, &data, |bytes| key.sign(bytes)).map_err(fail)
}

/// Decodes a token (at most [`crate::protocol::MAX_TOKEN_LEN`] bytes)
/// into its signature, the signed bytes and what they claim.
pub fn decode(authorization: &str) -> Result<(AuthToken, TokenData), String> {
    signed_token::open(authorization, TOKEN_PREFIX, "PKI")
}

/// A `Host`'s public key, ready to check signatures: an ECDSA key on
/// P-256 or P-384 (kops' controller verifies ECDSA keys only).
pub struct HostKey(ParsedPublicKey);

impl HostKey {
    /// From `spec.publicKey`: a `PUBLIC KEY` PEM (a DER SubjectPublicKeyInfo).
    pub fn from_pem(text: &str) -> Result<HostKey, String> {
        let block = pem::parse(text.trim().as_bytes()).map_err(|e| format!("not PEM: {e}"))?;
        if block.tag() != "PUBLIC KEY" {
            return Err(format!("a `{}` PEM block, not a `PUBLIC KEY`", block.tag()));
        }
        for algorithm in [
            &aws_lc_rs::signature::ECDSA_P256_SHA256_ASN1,
            &aws_lc_rs::signature::ECDSA_P384_SHA256_ASN1,
        ] {
            if let Ok(key) = ParsedPublicKey::new(algorithm, block.contents()) {
                return Ok(HostKey(key));
            }
        }
        Err("not an ECDSA P-256 or P-384 public key".into())
    }

    /// Whether `signature` is this key's over `data`.
    pub fn verifies(&self, data: &[u8], signature: &[u8]) -> bool {
        self.0.verify_sig(data, signature).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_names_the_host_and_verifies_with_its_key() {
        let (key, _) = MachineKey::generate().unwrap();
        let token = create_token("m1", &key, b"{}", SystemTime::now()).unwrap();
        let (token, data) = decode(&token).unwrap();
        assert_eq!(data.instance, "m1");
        assert_eq!(data.audience, AUDIENCE);
        assert_eq!(data.key_id, key.public_pem());
        assert_eq!(data.request_hash, Sha256::digest(b"{}").to_vec());
        let host = HostKey::from_pem(key.public_pem()).unwrap();
        assert!(host.verifies(&token.data, &token.signature));
        // Another key, or other bytes, do not verify.
        let (other, _) = MachineKey::generate().unwrap();
        let other = HostKey::from_pem(other.public_pem()).unwrap();
        assert!(!other.verifies(&token.data, &token.signature));
        let mut changed = token.data.clone();
        changed[3] ^= 1;
        assert!(!host.verifies(&changed, &token.signature));
    }

    #[test]
    fn openssl_keys_are_read() {
        // What `openssl ecparam -name prime256v1 -genkey -noout` and
        // `openssl ec -pubout` write on an enrolled machine.
        let dir = tempfile::tempdir().unwrap();
        let private = dir.path().join("private.pem");
        let public = dir.path().join("public.pem");
        let made = std::process::Command::new("openssl")
            .args([
                "ecparam",
                "-name",
                "prime256v1",
                "-genkey",
                "-noout",
                "-out",
            ])
            .arg(&private)
            .status();
        if !made.is_ok_and(|s| s.success()) {
            eprintln!("skipped: no openssl");
            return;
        }
        let status = std::process::Command::new("openssl")
            .args(["ec", "-pubout", "-in"])
            .arg(&private)
            .arg("-out")
            .arg(&public)
            .status()
            .unwrap();
        assert!(status.success());
        let key = MachineKey::from_pem(&std::fs::read_to_string(&private).unwrap()).unwrap();
        let public = std::fs::read_to_string(&public).unwrap();
        assert_eq!(
            key.public_pem(),
            public,
            "the keyID is openssl's public PEM"
        );
        let host = HostKey::from_pem(&public).unwrap();
        let signature = key.sign(b"data").unwrap();
        assert!(host.verifies(b"data", &signature));
    }

    #[test]
    fn rsa_and_garbage_host_keys_are_unusable() {
        let (_, rsa_der) = kops_pki::new_private_key().unwrap();
        let rsa = public_key_pem(&rsa_der);
        assert!(HostKey::from_pem(&rsa)
            .err()
            .unwrap()
            .contains("not an ECDSA"));
        assert!(HostKey::from_pem("KEY").is_err());
        assert!(decode("x-gce-tpm abc").is_err());
        assert!(decode(&format!("x-pki-tpm {}", "A".repeat(20_000)))
            .unwrap_err()
            .contains("more than"));
    }

    #[test]
    fn the_json_is_kops() {
        let data = TokenData {
            instance: "m1".into(),
            key_id: "K".into(),
            request_hash: vec![1, 2, 3],
            timestamp: 1700000000,
            audience: AUDIENCE.into(),
        };
        assert_eq!(
            serde_json::to_string(&data).unwrap(),
            r#"{"instance":"m1","keyID":"K","requestHash":"AQID","timestamp":1700000000,"audience":"kops.k8s.io/node-bootstrap"}"#
        );
    }
}
