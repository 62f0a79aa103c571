//! Application Default Credentials for the gs:// store, looked up in the
//! order Google's clients use:
//!
//! 1. the file `GOOGLE_APPLICATION_CREDENTIALS` names (a service-account
//!    key, or gcloud user credentials);
//! 2. gcloud's user credentials, `application_default_credentials.json` in
//!    `CLOUDSDK_CONFIG` or `~/.config/gcloud` (written by `gcloud auth
//!    application-default login`);
//! 3. the metadata server of a Google Compute Engine instance
//!    (`GCE_METADATA_HOST`, else `169.254.169.254`).
//!
//! A service-account key signs a JWT (RS256, with aws-lc-rs) that Google's
//! token endpoint exchanges for an access token; user credentials trade
//! their refresh token; the metadata server hands tokens out directly.
//! Tokens are cached until a minute before they expire.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine;
use hyper::Method;
use serde::Deserialize;
use tokio::sync::Mutex;

use crate::http::{Call, Http};
use crate::GoogleError;

/// The scope asked for: `cloud-platform`, which covers Cloud Storage and
/// every API direct apply calls (Compute, Cloud DNS, IAM, Resource
/// Manager); one token serves them all, as with kops' clients.
pub const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";
/// Google's OAuth token endpoint, for credentials that do not name one.
pub const TOKEN_URI: &str = "https://oauth2.googleapis.com/token";
/// The metadata server's address when `GCE_METADATA_HOST` is not set.
pub const METADATA_HOST: &str = "169.254.169.254";
/// How long the metadata server may take to answer the first probe.
const METADATA_PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// A token is renewed when it has less than this left.
const EXPIRY_MARGIN: Duration = Duration::from_secs(60);

/// The fields of a credentials file we use (service-account keys and
/// gcloud user credentials share the `type` field).
#[derive(Deserialize)]
struct CredentialsFile {
    #[serde(rename = "type", default)]
    kind: String,
    // service_account
    client_email: Option<String>,
    private_key: Option<String>,
    private_key_id: Option<String>,
    token_uri: Option<String>,
    // authorized_user
    client_id: Option<String>,
    client_secret: Option<String>,
    refresh_token: Option<String>,
}

/// Where tokens come from.
#[derive(Clone)]
enum Source {
    /// A service-account key: a signed JWT exchanged at `token_uri`.
    ServiceAccount {
        email: String,
        key_id: Option<String>,
        /// The PKCS#8 DER of the RSA key.
        key: Vec<u8>,
        token_uri: String,
        path: PathBuf,
    },
    /// gcloud user credentials: a refresh token exchanged at `token_uri`.
    User {
        client_id: String,
        client_secret: String,
        refresh_token: String,
        token_uri: String,
        path: PathBuf,
    },
    /// The instance's service account, from the metadata server.
    Metadata { host: String },
}

/// A cached access token.
struct Token {
    value: String,
    renew_at: Instant,
}

/// The credentials found, with their current token.
pub struct Credentials {
    source: Source,
    token: Mutex<Option<Token>>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key, the refresh token or the access token.
        f.write_str(&self.describe())
    }
}

/// The token endpoints' answer.
#[derive(Deserialize)]
struct TokenAnswer {
    access_token: Option<String>,
    expires_in: Option<u64>,
    error: Option<String>,
    error_description: Option<String>,
}

/// Finds credentials as described in the module documentation; `lookup`
/// reads the environment. The error says what was tried.
pub async fn find(
    lookup: &(dyn Fn(&str) -> Option<String> + Sync),
    http: &Http,
) -> Result<Credentials, GoogleError> {
    find_source(lookup, http)
        .await
        .map(Credentials::new)
        .map_err(GoogleError::Credentials)
}

/// Where [`find`]'s credentials come from; the error says what was tried.
async fn find_source(
    lookup: &(dyn Fn(&str) -> Option<String> + Sync),
    http: &Http,
) -> Result<Source, String> {
    let var = |name: &str| lookup(name).filter(|v| !v.is_empty());
    if let Some(path) = var("GOOGLE_APPLICATION_CREDENTIALS") {
        let path = PathBuf::from(path);
        let text = std::fs::read_to_string(&path).map_err(|e| {
            format!(
                "GOOGLE_APPLICATION_CREDENTIALS names `{}`, which cannot be read: {e}",
                path.display()
            )
        })?;
        return from_file(&path, &text);
    }
    let well_known = gcloud_credentials_path(lookup);
    if let Some(path) = &well_known {
        if let Ok(text) = std::fs::read_to_string(path) {
            return from_file(path, &text);
        }
    }
    let host = var("GCE_METADATA_HOST").unwrap_or_else(|| METADATA_HOST.to_string());
    if metadata_server_answers(http, &host).await {
        return Ok(Source::Metadata { host });
    }
    Err(format!(
        "GOOGLE_APPLICATION_CREDENTIALS is not set, {} does not exist, and no metadata server answered at {host}",
        well_known
            .map(|p| format!("`{}`", p.display()))
            .unwrap_or_else(|| "gcloud's credentials file (no HOME)".to_string())
    ))
}

/// gcloud's `application_default_credentials.json`.
fn gcloud_credentials_path(lookup: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let var = |name: &str| lookup(name).filter(|v| !v.is_empty());
    let dir = match var("CLOUDSDK_CONFIG") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(var("HOME")?).join(".config/gcloud"),
    };
    Some(dir.join("application_default_credentials.json"))
}

/// Parses a credentials file of a supported type.
fn from_file(path: &Path, text: &str) -> Result<Source, String> {
    let shown = path.display();
    let file: CredentialsFile = serde_json::from_str(text)
        .map_err(|e| format!("`{shown}` is not a Google credentials file: {e}"))?;
    let missing = |field: &str| format!("`{shown}` has no `{field}`");
    match file.kind.as_str() {
        "service_account" => {
            let pem_text = file.private_key.ok_or_else(|| missing("private_key"))?;
            let block = pem::parse(pem_text.as_bytes())
                .map_err(|e| format!("the private_key in `{shown}` is not PEM: {e}"))?;
            // Checked here so a bad key fails before any request.
            aws_lc_rs::signature::RsaKeyPair::from_pkcs8(block.contents()).map_err(|_| {
                format!("the private_key in `{shown}` is not a PKCS#8 RSA key")
            })?;
            Ok(Source::ServiceAccount {
                email: file.client_email.ok_or_else(|| missing("client_email"))?,
                key_id: file.private_key_id,
                key: block.contents().to_vec(),
                token_uri: file.token_uri.unwrap_or_else(|| TOKEN_URI.to_string()),
                path: path.to_path_buf(),
            })
        }
        "authorized_user" => Ok(Source::User {
            client_id: file.client_id.ok_or_else(|| missing("client_id"))?,
            client_secret: file.client_secret.ok_or_else(|| missing("client_secret"))?,
            refresh_token: file.refresh_token.ok_or_else(|| missing("refresh_token"))?,
            token_uri: file.token_uri.unwrap_or_else(|| TOKEN_URI.to_string()),
            path: path.to_path_buf(),
        }),
        "" => Err(format!("`{shown}` has no `type`")),
        other => Err(format!(
            "`{shown}` holds credentials of type `{other}`, which kops-rs does not support (it reads `service_account` keys and `authorized_user` credentials)"
        )),
    }
}

/// True when a metadata server answers at `host` within the probe timeout.
async fn metadata_server_answers(http: &Http, host: &str) -> bool {
    let url = format!("http://{host}/computeMetadata/v1/");
    let call = Call::new(Method::GET, &url).header("metadata-flavor", "Google");
    match tokio::time::timeout(METADATA_PROBE_TIMEOUT, http.send_once(&call)).await {
        Ok(Ok(response)) => response.header("metadata-flavor") == Some("Google"),
        _ => false,
    }
}

fn base64url(data: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(data)
}

/// A JWT asserting `email` for `scope`, signed with the PKCS#8 RSA `key`
/// (RS256), valid for an hour from `now` (seconds since the epoch).
fn signed_assertion(
    email: &str,
    key_id: Option<&str>,
    key: &[u8],
    audience: &str,
    now: u64,
) -> Result<String, String> {
    let mut header = serde_json::json!({"alg": "RS256", "typ": "JWT"});
    if let Some(id) = key_id {
        header["kid"] = id.into();
    }
    let claims = serde_json::json!({
        "iss": email,
        "scope": SCOPE,
        "aud": audience,
        "iat": now,
        "exp": now + 3600,
    });
    let signing_input = format!(
        "{}.{}",
        base64url(header.to_string().as_bytes()),
        base64url(claims.to_string().as_bytes())
    );
    let pair = aws_lc_rs::signature::RsaKeyPair::from_pkcs8(key)
        .map_err(|_| "the service-account key is not a PKCS#8 RSA key".to_string())?;
    let mut signature = vec![0; pair.public_modulus_len()];
    pair.sign(
        &aws_lc_rs::signature::RSA_PKCS1_SHA256,
        &aws_lc_rs::rand::SystemRandom::new(),
        signing_input.as_bytes(),
        &mut signature,
    )
    .map_err(|_| "signing the token request failed".to_string())?;
    Ok(format!("{signing_input}.{}", base64url(&signature)))
}

/// `application/x-www-form-urlencoded` text of `pairs`.
fn form(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", crate::escape(k), crate::escape(v)))
        .collect::<Vec<_>>()
        .join("&")
}

impl Credentials {
    fn new(source: Source) -> Self {
        Credentials {
            source,
            token: Mutex::new(None),
        }
    }

    /// What these credentials are, for messages (no secrets).
    pub fn describe(&self) -> String {
        match &self.source {
            Source::ServiceAccount { email, path, .. } => {
                format!("service account {email} (key {})", path.display())
            }
            Source::User { path, .. } => format!("gcloud user credentials ({})", path.display()),
            Source::Metadata { host } => format!("the instance's service account ({host})"),
        }
    }

    /// A current access token, fetched or renewed as needed.
    pub async fn token(&self, http: &Http) -> Result<String, GoogleError> {
        let mut cached = self.token.lock().await;
        if let Some(token) = cached.as_ref().filter(|t| Instant::now() < t.renew_at) {
            return Ok(token.value.clone());
        }
        let (value, lifetime) = self.fetch(http).await.map_err(GoogleError::Token)?;
        *cached = Some(Token {
            value: value.clone(),
            renew_at: Instant::now() + lifetime.saturating_sub(EXPIRY_MARGIN),
        });
        Ok(value)
    }

    /// Asks the source for a new token; returns it with its lifetime.
    async fn fetch(&self, http: &Http) -> Result<(String, Duration), String> {
        let (url, call_body, metadata) = match &self.source {
            Source::ServiceAccount {
                email,
                key_id,
                key,
                token_uri,
                ..
            } => {
                let now = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                let assertion = signed_assertion(email, key_id.as_deref(), key, token_uri, now)?;
                let body = form(&[
                    ("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"),
                    ("assertion", &assertion),
                ]);
                (token_uri.clone(), Some(body), false)
            }
            Source::User {
                client_id,
                client_secret,
                refresh_token,
                token_uri,
                ..
            } => {
                let body = form(&[
                    ("grant_type", "refresh_token"),
                    ("client_id", client_id),
                    ("client_secret", client_secret),
                    ("refresh_token", refresh_token),
                    ("scope", SCOPE),
                ]);
                (token_uri.clone(), Some(body), false)
            }
            Source::Metadata { host } => (
                format!("http://{host}/computeMetadata/v1/instance/service-accounts/default/token"),
                None,
                true,
            ),
        };
        let call = match call_body {
            Some(body) => Call::new(Method::POST, &url)
                .header("content-type", "application/x-www-form-urlencoded")
                .body(body),
            None => Call::new(Method::GET, &url),
        };
        let call = if metadata {
            call.header("metadata-flavor", "Google")
        } else {
            call
        };
        let who = self.describe();
        let response = http
            .send(&call)
            .await
            .map_err(|e| format!("getting a token for {who} from {url} failed: {e}"))?;
        let answer: TokenAnswer = serde_json::from_slice(&response.body).map_err(|_| {
            format!(
                "{url} answered HTTP {} with no token for {who}",
                response.status
            )
        })?;
        match answer.access_token {
            Some(token) if response.status == 200 => Ok((
                token,
                Duration::from_secs(answer.expires_in.unwrap_or(3600)),
            )),
            _ => Err(format!(
                "{url} refused {who}: {}",
                answer
                    .error_description
                    .or(answer.error)
                    .unwrap_or_else(|| format!("HTTP {}", response.status))
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A throwaway PKCS#8 RSA key made for this test.
    fn test_key() -> (Vec<u8>, Vec<u8>) {
        use aws_lc_rs::encoding::AsDer;
        use aws_lc_rs::signature::KeyPair;
        let pair = aws_lc_rs::rsa::KeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048).unwrap();
        let der = pair.as_der().unwrap().as_ref().to_vec();
        let public = pair.public_key().as_ref().to_vec();
        (der, public)
    }

    #[test]
    fn assertion_is_an_rs256_jwt_google_can_verify() {
        let (der, public) = test_key();
        let jwt = signed_assertion(
            "kops@p.iam.gserviceaccount.com",
            Some("k1"),
            &der,
            TOKEN_URI,
            1_700_000_000,
        )
        .unwrap();
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3);
        let decode = |p: &str| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(p)
                .unwrap()
        };
        let header: serde_json::Value = serde_json::from_slice(&decode(parts[0])).unwrap();
        assert_eq!(header["alg"], "RS256");
        assert_eq!(header["kid"], "k1");
        let claims: serde_json::Value = serde_json::from_slice(&decode(parts[1])).unwrap();
        assert_eq!(claims["iss"], "kops@p.iam.gserviceaccount.com");
        assert_eq!(claims["aud"], TOKEN_URI);
        assert_eq!(claims["scope"], SCOPE);
        assert_eq!(claims["exp"], 1_700_003_600u64);
        let key = aws_lc_rs::signature::UnparsedPublicKey::new(
            &aws_lc_rs::signature::RSA_PKCS1_2048_8192_SHA256,
            public,
        );
        key.verify(
            format!("{}.{}", parts[0], parts[1]).as_bytes(),
            &decode(parts[2]),
        )
        .expect("the signature verifies with the key's public half");
    }

    #[test]
    fn credential_files_by_type() {
        let (der, _) = test_key();
        let pem_key = pem::encode(&pem::Pem::new("PRIVATE KEY", der));
        let sa = serde_json::json!({
            "type": "service_account",
            "client_email": "a@p.iam.gserviceaccount.com",
            "private_key": pem_key,
            "private_key_id": "id",
        });
        let path = Path::new("/k.json");
        let Source::ServiceAccount {
            email, token_uri, ..
        } = from_file(path, &sa.to_string()).unwrap()
        else {
            panic!("not a service account")
        };
        assert_eq!(email, "a@p.iam.gserviceaccount.com");
        assert_eq!(token_uri, TOKEN_URI);
        let user =
            r#"{"type":"authorized_user","client_id":"c","client_secret":"s","refresh_token":"r"}"#;
        assert!(matches!(
            from_file(path, user).unwrap(),
            Source::User { .. }
        ));
        let err = from_file(path, r#"{"type":"external_account"}"#)
            .err()
            .unwrap();
        assert!(err.contains("external_account"), "{err}");
        let err = from_file(path, r#"{"type":"service_account","private_key":"x"}"#)
            .err()
            .unwrap();
        assert!(err.contains("not PEM"), "{err}");
        assert!(from_file(path, "not json").is_err());
    }

    #[test]
    fn gcloud_file_location() {
        let lookup = |vars: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                vars.iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(
            gcloud_credentials_path(&lookup(&[("HOME", "/home/u")])),
            Some(PathBuf::from(
                "/home/u/.config/gcloud/application_default_credentials.json"
            ))
        );
        assert_eq!(
            gcloud_credentials_path(&lookup(&[("HOME", "/home/u"), ("CLOUDSDK_CONFIG", "/g")])),
            Some(PathBuf::from("/g/application_default_credentials.json"))
        );
        assert_eq!(gcloud_credentials_path(&lookup(&[])), None);
    }

    #[test]
    fn forms_are_escaped() {
        assert_eq!(form(&[("a", "x y"), ("b", "1:2")]), "a=x%20y&b=1%3A2");
    }
}
