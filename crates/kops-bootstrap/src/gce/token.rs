//! kops' GCE node token (`x-gce-tpm `): the node signs a small JSON
//! document naming its project, zone and instance, the sha256 of the
//! request body, the time and the audience, with the attestation key of
//! its shielded VM's vTPM (RSA, PKCS#1 v1.5 over SHA-256); the controller
//! checks the signature against the key Compute reports for that
//! instance (`getShieldedInstanceIdentity`).
//!
//! On the wire: `x-gce-tpm <base64 of {"signature":…,"data":…}>`, where
//! both are byte strings in JSON (base64, as Go encodes `[]byte`) and
//! `data` is the JSON of [`TokenData`] exactly as signed.

use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::protocol::SignError;

/// The prefix of a GCE token.
pub const TOKEN_PREFIX: &str = "x-gce-tpm ";
/// The audience kops' nodes sign for node bootstrap.
pub const AUDIENCE: &str = "kops.k8s.io/node-bootstrap";

pub use crate::signed_token::AuthToken;
use crate::signed_token::{self, bytes_b64};

/// What the node claims (kops' `AuthTokenData`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenData {
    #[serde(
        rename = "gcpProjectID",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub project: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub zone: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub instance: String,
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

/// The instance a node is (from its metadata server).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceRef {
    pub project: String,
    pub zone: String,
    pub instance: String,
}

/// What signs a node's token: the vTPM's attestation key on a shielded
/// VM.
pub trait Signer: Send + Sync {
    /// An RSASSA-PKCS1-v1_5 signature with SHA-256 over `data`.
    fn sign(&self, data: &[u8]) -> Result<Vec<u8>, String>;
}

/// An RSA key in memory signing as the vTPM's attestation key would: the
/// stand-in for the vTPM where there is none (tests; a host whose key is
/// registered as its instance's identity key).
pub struct SoftwareKey {
    pair: aws_lc_rs::signature::RsaKeyPair,
}

impl SoftwareKey {
    /// From a PEM RSA private key (PKCS#1 `RSA PRIVATE KEY` or PKCS#8
    /// `PRIVATE KEY`).
    pub fn from_pem(text: &str) -> Result<SoftwareKey, String> {
        let block = pem::parse(text.as_bytes()).map_err(|e| format!("not a PEM key: {e}"))?;
        let pair = match block.tag() {
            "RSA PRIVATE KEY" => aws_lc_rs::signature::RsaKeyPair::from_der(block.contents()),
            "PRIVATE KEY" => aws_lc_rs::signature::RsaKeyPair::from_pkcs8(block.contents()),
            other => return Err(format!("a `{other}` PEM block is not an RSA private key")),
        }
        .map_err(|e| format!("not an RSA private key: {e}"))?;
        Ok(SoftwareKey { pair })
    }
}

impl Signer for SoftwareKey {
    fn sign(&self, data: &[u8]) -> Result<Vec<u8>, String> {
        let mut signature = vec![0; self.pair.public_modulus_len()];
        self.pair
            .sign(
                &aws_lc_rs::signature::RSA_PKCS1_SHA256,
                &aws_lc_rs::rand::SystemRandom::new(),
                data,
                &mut signature,
            )
            .map_err(|_| "RSA signing failed".to_string())?;
        Ok(signature)
    }
}

/// A node's token for a request with `body`, signed by `signer`.
pub fn create_token(
    instance: &InstanceRef,
    signer: &dyn Signer,
    body: &[u8],
    now: SystemTime,
) -> Result<String, SignError> {
    let fail = |reason: String| SignError {
        url: format!(
            "gce://{}/{}/{}",
            instance.project, instance.zone, instance.instance
        ),
        reason,
    };
    let data = TokenData {
        project: instance.project.clone(),
        zone: instance.zone.clone(),
        instance: instance.instance.clone(),
        request_hash: Sha256::digest(body).to_vec(),
        timestamp: signed_token::unix_seconds(now).map_err(fail)?,
        audience: AUDIENCE.to_string(),
    };
    signed_token::seal(TOKEN_PREFIX, &data, |bytes| signer.sign(bytes)).map_err(fail)
}

/// Decodes a token into its signature, the signed bytes and what they
/// claim.
pub fn decode(authorization: &str) -> Result<(AuthToken, TokenData), String> {
    signed_token::open(authorization, TOKEN_PREFIX, "GCE")
}

/// Whether `signature` is `public_key_pem`'s (a `PUBLIC KEY` PEM, as
/// Compute reports a shielded VM's keys) over `data`.
pub fn signature_matches(
    public_key_pem: &str,
    data: &[u8],
    signature: &[u8],
) -> Result<bool, String> {
    let block = pem::parse(public_key_pem.as_bytes())
        .map_err(|e| format!("the signing key is not PEM: {e}"))?;
    if block.tag() != "PUBLIC KEY" && block.tag() != "RSA PUBLIC KEY" {
        return Err(format!("the signing key is a `{}` PEM block", block.tag()));
    }
    let key = aws_lc_rs::signature::UnparsedPublicKey::new(
        &aws_lc_rs::signature::RSA_PKCS1_2048_8192_SHA256,
        block.contents(),
    );
    Ok(key.verify(data, signature).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> (SoftwareKey, String) {
        let (private, public_der) = kops_pki::new_private_key().unwrap();
        let public = pem::encode(&pem::Pem::new("PUBLIC KEY", public_der));
        (SoftwareKey::from_pem(&private).unwrap(), public)
    }

    #[test]
    fn a_token_names_the_instance_and_verifies_with_its_key() {
        let (signer, public) = key();
        let me = InstanceRef {
            project: "p".into(),
            zone: "us-test1-a".into(),
            instance: "nodes-abcd".into(),
        };
        let token = create_token(&me, &signer, b"{}", SystemTime::now()).unwrap();
        let (token, data) = decode(&token).unwrap();
        assert_eq!(data.project, "p");
        assert_eq!(data.zone, "us-test1-a");
        assert_eq!(data.instance, "nodes-abcd");
        assert_eq!(data.audience, AUDIENCE);
        assert_eq!(data.request_hash, Sha256::digest(b"{}").to_vec());
        assert!(signature_matches(&public, &token.data, &token.signature).unwrap());
        // Another key, or other bytes, do not verify.
        let (_, other) = key();
        assert!(!signature_matches(&other, &token.data, &token.signature).unwrap());
        let mut changed = token.data.clone();
        changed[3] ^= 1;
        assert!(!signature_matches(&public, &changed, &token.signature).unwrap());
    }

    #[test]
    fn the_json_is_kops() {
        let data = TokenData {
            project: "p".into(),
            zone: "z".into(),
            instance: "i".into(),
            request_hash: vec![1, 2, 3],
            timestamp: 1700000000,
            audience: AUDIENCE.into(),
        };
        assert_eq!(
            serde_json::to_string(&data).unwrap(),
            r#"{"gcpProjectID":"p","zone":"z","instance":"i","requestHash":"AQID","timestamp":1700000000,"audience":"kops.k8s.io/node-bootstrap"}"#
        );
        let token = AuthToken {
            signature: vec![0xff],
            data: b"{}".to_vec(),
        };
        assert_eq!(
            serde_json::to_string(&token).unwrap(),
            r#"{"signature":"/w==","data":"e30="}"#
        );
        assert!(decode("x-aws-sts abc").is_err());
        assert!(decode("x-gce-tpm !!!").is_err());
    }
}
