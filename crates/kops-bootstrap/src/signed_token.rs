//! The envelope of kops' signed node tokens (the GCE vTPM's `x-gce-tpm`,
//! an enrolled machine's `x-pki-tpm`): `<prefix><base64 of
//! {"signature":…,"data":…}>`, both byte strings in JSON as Go encodes
//! `[]byte` (standard base64); `data` is the JSON of what the node claims,
//! exactly as signed.

use std::time::SystemTime;

use base64::Engine;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// Byte strings as Go's JSON encodes them: standard base64.
pub mod bytes_b64 {
    use base64::Engine;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = Option::<String>::deserialize(d)?.unwrap_or_default();
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(serde::de::Error::custom)
    }
}

/// The token: a signature and the exact bytes it covers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AuthToken {
    #[serde(with = "bytes_b64", default, skip_serializing_if = "Vec::is_empty")]
    pub signature: Vec<u8>,
    #[serde(with = "bytes_b64", default, skip_serializing_if = "Vec::is_empty")]
    pub data: Vec<u8>,
}

/// Seconds since the epoch, as the tokens' `timestamp`.
pub fn unix_seconds(now: SystemTime) -> Result<i64, String> {
    let seconds = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_err(|e| e.to_string())?
        .as_secs();
    i64::try_from(seconds).map_err(|e| e.to_string())
}

/// `claims` as JSON, signed by `sign`, in the envelope after `prefix`.
pub fn seal(
    prefix: &str,
    claims: &impl Serialize,
    sign: impl FnOnce(&[u8]) -> Result<Vec<u8>, String>,
) -> Result<String, String> {
    let data = serde_json::to_vec(claims).map_err(|e| e.to_string())?;
    let signature = sign(&data)?;
    let token = serde_json::to_vec(&AuthToken { signature, data }).map_err(|e| e.to_string())?;
    Ok(format!(
        "{prefix}{}",
        base64::engine::general_purpose::STANDARD.encode(token)
    ))
}

/// The envelope's signature, signed bytes and claims, from an
/// `Authorization` value of at most [`crate::protocol::MAX_TOKEN_LEN`]
/// bytes; `kind` names the token in errors (`GCE`, `PKI`).
pub fn open<T: DeserializeOwned>(
    authorization: &str,
    prefix: &str,
    kind: &str,
) -> Result<(AuthToken, T), String> {
    if authorization.len() > crate::protocol::MAX_TOKEN_LEN {
        return Err(format!(
            "the token is {} bytes, more than {}",
            authorization.len(),
            crate::protocol::MAX_TOKEN_LEN
        ));
    }
    let encoded = authorization.strip_prefix(prefix).ok_or_else(|| {
        format!(
            "the Authorization header is not an `{}` token",
            prefix.trim_end()
        )
    })?;
    let json = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .map_err(|e| format!("the token is not base64: {e}"))?;
    let token: AuthToken = serde_json::from_slice(&json)
        .map_err(|_| format!("the token is not kops' {kind} token JSON"))?;
    let claims: T = serde_json::from_slice(&token.data)
        .map_err(|_| format!("the token's data is not kops' {kind} token data"))?;
    Ok((token, claims))
}
