//! kops' bootstrap protocol on the wire: the request a node POSTs to
//! kops-controller's `/bootstrap`, the answer, and the `Authorization`
//! token that proves the node's identity (a GetCallerIdentity request to
//! AWS STS, signed with the instance role's credentials, that the
//! controller replays to STS).
//!
//! The JSON field names and the token's form are kops' (`pkg/apis/nodeup`,
//! `x-aws-sts`). A kops-rs node's request is one kops' controller
//! understands: kops' controller replays the extra signed headers
//! ([`AUDIENCE_HEADER`], [`NONCE_HEADER`]) to STS without reading them.
//! The converse does not hold: kops' nodes do not sign an audience, and a
//! kops-rs controller refuses a token without one, so kops' nodes cannot
//! join through a kops-rs controller. (kops-rs' own nodeup does; a
//! cluster taken over from kops gets kops-rs' nodeup on the instances it
//! replaces.)

use std::collections::BTreeMap;

use base64::Engine;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The request's `apiVersion`.
pub const BOOTSTRAP_API_VERSION: &str = "bootstrap.kops.k8s.io/v1alpha1";

/// kops-controller's port (kops' `wellknownports.KopsControllerPort`).
pub const KOPS_CONTROLLER_PORT: u16 = 3988;

/// The prefix of a version-1 AWS token: base64 JSON of the signed
/// request's headers.
pub const AWS_TOKEN_PREFIX_V1: &str = "x-aws-sts ";

/// The body of every version-1 token's STS request (the signature covers it).
pub const STS_BODY: &[u8] = b"Action=GetCallerIdentity&Version=2011-06-15";

/// The longest `Authorization` header a controller reads (a node's token
/// is about 4 KiB, most of it the instance role's session token).
pub const MAX_TOKEN_LEN: usize = 16 * 1024;

/// The most headers a token may carry (a node's has seven).
pub const MAX_TOKEN_HEADERS: usize = 16;

/// The signed header binding a token to the bootstrap request's body.
pub const REQUEST_SHA_HEADER: &str = "X-Kops-Request-Sha";

/// A signed random value: two tokens for the same request in the same
/// second differ, so a controller's replay check never refuses a node's
/// honest retry.
pub const NONCE_HEADER: &str = "X-Kops-Nonce";

/// The signed header naming the kops-controller a token is meant for
/// (`kops-controller.internal.<cluster>`). kops-rs' controller refuses a
/// token for another audience, so a token given to one cluster's
/// controller cannot be used at another's. kops' controller ignores it.
pub const AUDIENCE_HEADER: &str = "X-Kops-Audience";

/// What a node asks for.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BootstrapRequest {
    #[serde(rename = "apiVersion")]
    pub api_version: String,
    /// Certificate name (`kubelet`, `kubelet-server`, `kube-proxy`, ...) →
    /// the node's public key for it, PEM.
    #[serde(default)]
    pub certs: BTreeMap<String, String>,
    /// CA name → the keypair id the node trusts as primary; the controller
    /// refuses to sign with another (a CA rotation in progress).
    #[serde(rename = "keypairIDs", default)]
    pub keypair_ids: BTreeMap<String, String>,
    /// Also send the node config of the node's instance group.
    #[serde(rename = "includeNodeConfig", default)]
    pub include_node_config: bool,
}

/// What kops-controller answers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BootstrapResponse {
    /// Certificate name → certificate PEM.
    #[serde(rename = "Certs", default, skip_serializing_if = "BTreeMap::is_empty")]
    pub certs: BTreeMap<String, String>,
    #[serde(
        rename = "nodeConfig",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub node_config: Option<NodeConfig>,
}

/// A worker's node config and the secrets it may have.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeConfig {
    /// The group's `nodeupconfig.yaml`, as stored.
    #[serde(rename = "nodeupConfig", default)]
    pub nodeup_config: String,
    /// Secret name → content (base64 in JSON, as Go encodes `[]byte`).
    #[serde(
        rename = "nodeSecrets",
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        with = "base64_map"
    )]
    pub node_secrets: BTreeMap<String, Vec<u8>>,
}

mod base64_map {
    use std::collections::BTreeMap;

    use base64::Engine;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(
        map: &BTreeMap<String, Vec<u8>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        map.iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    base64::engine::general_purpose::STANDARD.encode(v),
                )
            })
            .collect::<BTreeMap<_, _>>()
            .serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<String, Vec<u8>>, D::Error> {
        let encoded = BTreeMap::<String, String>::deserialize(d)?;
        encoded
            .into_iter()
            .map(|(k, v)| {
                base64::engine::general_purpose::STANDARD
                    .decode(v)
                    .map(|bytes| (k, bytes))
                    .map_err(serde::de::Error::custom)
            })
            .collect()
    }
}

/// The value of [`REQUEST_SHA_HEADER`] for a request body: unpadded base64
/// of its sha256, as kops computes it.
pub fn body_sha(body: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD_NO_PAD.encode(Sha256::digest(body))
}

/// The audience of a cluster's kops-controller.
pub fn audience(cluster: &str) -> String {
    format!("kops-controller.internal.{cluster}")
}

/// Why a token could not be made.
#[derive(Debug, thiserror::Error)]
#[error("cannot sign the node's identity token for {url}: {reason}")]
pub struct SignError {
    pub url: String,
    pub reason: String,
}

/// Go's canonical header spelling (`x-amz-date` → `X-Amz-Date`), which
/// kops' JSON token uses.
pub fn canonical_header_name(name: &str) -> String {
    name.split('-')
        .map(|part| {
            let mut chars = part.chars();
            match chars.next() {
                Some(first) => {
                    first.to_ascii_uppercase().to_string() + &chars.as_str().to_ascii_lowercase()
                }
                None => String::new(),
            }
        })
        .collect::<Vec<_>>()
        .join("-")
}

/// A decoded version-1 token: header name (canonical) → values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenHeaders(pub BTreeMap<String, Vec<String>>);

impl TokenHeaders {
    /// Decodes `Authorization` (`x-aws-sts <base64 JSON>`): at most
    /// [`MAX_TOKEN_LEN`] bytes, [`MAX_TOKEN_HEADERS`] headers of one value
    /// each, every name and value one HTTP allows (they are replayed to STS).
    pub fn decode(token: &str) -> Result<TokenHeaders, String> {
        if token.len() > MAX_TOKEN_LEN {
            return Err(format!(
                "the token is {} bytes, more than {MAX_TOKEN_LEN}",
                token.len()
            ));
        }
        let encoded = token
            .strip_prefix(AWS_TOKEN_PREFIX_V1)
            .ok_or("the Authorization header is not an `x-aws-sts` token")?;
        let json = base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .map_err(|e| format!("the token is not base64: {e}"))?;
        let raw: BTreeMap<String, Vec<String>> =
            serde_json::from_slice(&json).map_err(|_| "the token is not JSON headers")?;
        if raw.len() > MAX_TOKEN_HEADERS {
            return Err(format!(
                "the token has more than {MAX_TOKEN_HEADERS} headers"
            ));
        }
        let mut map: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (name, values) in raw {
            let valid = http::HeaderName::from_bytes(name.as_bytes()).is_ok()
                && values
                    .iter()
                    .all(|v| http::HeaderValue::from_str(v).is_ok());
            if !valid {
                return Err("the token has a header name or value HTTP does not allow".into());
            }
            let entry = map.entry(canonical_header_name(&name)).or_default();
            entry.extend(values);
            if entry.len() != 1 {
                return Err("the token has a header with other than one value".into());
            }
        }
        Ok(TokenHeaders(map))
    }

    /// The first value of a header (any spelling).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .get(&canonical_header_name(name))
            .and_then(|v| v.first())
            .map(String::as_str)
    }
}

/// The PEM a node sends for its public key (kops' label).
pub fn public_key_pem(der: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = String::from("-----BEGIN RSA PUBLIC KEY-----\n");
    for chunk in b64.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(chunk));
        out.push('\n');
    }
    out.push_str("-----END RSA PUBLIC KEY-----\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_names_are_spelled_as_go_does() {
        assert_eq!(canonical_header_name("x-amz-date"), "X-Amz-Date");
        assert_eq!(
            canonical_header_name("X-KOPS-REQUEST-SHA"),
            "X-Kops-Request-Sha"
        );
        assert_eq!(canonical_header_name("authorization"), "Authorization");
    }

    #[test]
    fn tokens_are_bounded() {
        use base64::Engine;
        let encode = |json: &str| {
            format!(
                "{AWS_TOKEN_PREFIX_V1}{}",
                base64::engine::general_purpose::STANDARD.encode(json)
            )
        };
        let big = encode(&format!(r#"{{"X-A":["{}"]}}"#, "a".repeat(MAX_TOKEN_LEN)));
        assert!(TokenHeaders::decode(&big)
            .unwrap_err()
            .contains("more than"));
        let many: Vec<String> = (0..20).map(|i| format!(r#""X-{i}":["v"]"#)).collect();
        let many = encode(&format!("{{{}}}", many.join(",")));
        assert!(TokenHeaders::decode(&many).unwrap_err().contains("headers"));
        let twice = encode(r#"{"X-Amz-Date":["a","b"]}"#);
        assert!(TokenHeaders::decode(&twice)
            .unwrap_err()
            .contains("one value"));
        let newline = encode(r#"{"X-Amz-Date":["a\nb"]}"#);
        assert!(TokenHeaders::decode(&newline)
            .unwrap_err()
            .contains("HTTP does not allow"));
    }

    #[test]
    fn responses_use_kops_field_names() {
        let response = BootstrapResponse {
            certs: BTreeMap::from([("kubelet".into(), "PEM".into())]),
            node_config: Some(NodeConfig {
                nodeup_config: "a: b\n".into(),
                node_secrets: BTreeMap::from([("dockerconfig".into(), b"{}".to_vec())]),
            }),
        };
        let json = serde_json::to_string(&response).unwrap();
        assert_eq!(
            json,
            r#"{"Certs":{"kubelet":"PEM"},"nodeConfig":{"nodeupConfig":"a: b\n","nodeSecrets":{"dockerconfig":"e30="}}}"#
        );
        assert_eq!(
            serde_json::from_str::<BootstrapResponse>(&json).unwrap(),
            response
        );
    }
}
