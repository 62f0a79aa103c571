//! The AWS half of kops' node identity, apart from the cloud-neutral
//! bootstrap protocol (kops-bootstrap) so that only AWS code knows the AWS
//! SDK: the node's credentials from the SDK's default chain (the instance
//! profile through the instance metadata service), the `x-aws-sts` token
//! (a GetCallerIdentity request signed with SigV4 that kops-controller
//! replays to STS) and STS' regional endpoint by partition.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::SystemTime;

use base64::Engine;
use kops_bootstrap::client::{BootstrapClient, ClientError};
use kops_bootstrap::protocol::{
    audience, body_sha, canonical_header_name, BootstrapRequest, BootstrapResponse, SignError,
    AUDIENCE_HEADER, AWS_TOKEN_PREFIX_V1, NONCE_HEADER, REQUEST_SHA_HEADER, STS_BODY,
};

pub use aws_credential_types::Credentials;

/// The instance's credentials from the default chain (environment,
/// profile, instance metadata).
pub async fn default_credentials(region: &str) -> Result<Credentials, ClientError> {
    use aws_credential_types::provider::ProvideCredentials;

    let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new(region.to_string()))
        .load()
        .await;
    let provider = config
        .credentials_provider()
        .ok_or_else(|| ClientError::Credentials("no credentials provider".into()))?;
    provider
        .provide_credentials()
        .await
        .map_err(|e| ClientError::Credentials(kops_bootstrap::text::error_chain(&e)))
}

/// [`BootstrapClient`] on AWS: the token proves the instance role.
pub trait AwsBootstrap {
    /// One round over the servers (the first answer wins; the last error
    /// otherwise) with a fresh token signed by `credentials` per attempt.
    fn bootstrap(
        &self,
        request: &BootstrapRequest,
        credentials: &Credentials,
    ) -> impl Future<Output = Result<BootstrapResponse, ClientError>> + Send;
}

impl AwsBootstrap for BootstrapClient {
    async fn bootstrap(
        &self,
        request: &BootstrapRequest,
        credentials: &Credentials,
    ) -> Result<BootstrapResponse, ClientError> {
        let sts = sts_url(self.region());
        let audience = audience(self.cluster());
        let region = self.region().to_string();
        self.bootstrap_with(request, &|body| {
            create_token_v1(
                &sts,
                &region,
                credentials,
                SystemTime::now(),
                body,
                &audience,
            )
        })
        .await
    }
}

/// The STS endpoint of a region: `AWS_ENDPOINT_URL_STS` or
/// `AWS_ENDPOINT_URL` when set (a private endpoint, or a local AWS API in
/// tests), else the regional public one of the region's partition.
pub fn sts_url(region: &str) -> String {
    let from_env = std::env::var("AWS_ENDPOINT_URL_STS")
        .ok()
        .or_else(|| std::env::var("AWS_ENDPOINT_URL").ok())
        .filter(|u| !u.trim().is_empty());
    match from_env {
        Some(url) => format!("{}/", url.trim_end_matches('/')),
        None => format!("https://sts.{region}.{}/", dns_suffix(region)),
    }
}

/// The DNS suffix of a region's partition (the AWS SDKs' partition data:
/// China, the ISO partitions and the European Sovereign Cloud have their
/// own; GovCloud and the commercial regions share `amazonaws.com`).
pub fn dns_suffix(region: &str) -> &'static str {
    const SUFFIXES: &[(&str, &str)] = &[
        ("cn-", "amazonaws.com.cn"),
        ("us-iso-", "c2s.ic.gov"),
        ("us-isob-", "sc2s.sgov.gov"),
        ("us-isof-", "csp.hci.ic.gov"),
        ("eu-isoe-", "cloud.adc-e.uk"),
        ("eusc-", "amazonaws.eu"),
    ];
    SUFFIXES
        .iter()
        .find(|(prefix, _)| region.starts_with(prefix))
        .map_or("amazonaws.com", |(_, suffix)| suffix)
}

/// A version-1 token: the headers of a GetCallerIdentity request to
/// `sts_url`, signed (SigV4, service `sts`) with `credentials`, covering
/// the sha256 of `body` and the controller's `audience` (an empty
/// `audience`: kops' nodes' token, which signs no audience and no nonce).
pub fn create_token_v1(
    sts_url: &str,
    region: &str,
    credentials: &Credentials,
    time: SystemTime,
    body: &[u8],
    audience: &str,
) -> Result<String, SignError> {
    use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
    use aws_sigv4::sign::v4;

    let fail = |reason: String| SignError {
        url: sts_url.to_string(),
        reason,
    };
    let identity = credentials.clone().into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name("sts")
        .time(time)
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| fail(e.to_string()))?
        .into();
    let sha = body_sha(body);
    let mut headers: Vec<(String, String)> = vec![
        (
            "Content-Type".into(),
            "application/x-www-form-urlencoded; charset=utf-8".into(),
        ),
        (REQUEST_SHA_HEADER.into(), sha),
    ];
    // kops' nodes sign neither: an empty audience makes their token.
    if !audience.is_empty() {
        headers.push((AUDIENCE_HEADER.into(), audience.to_string()));
        headers.push((NONCE_HEADER.into(), nonce(time)));
    }
    let signable = SignableRequest::new(
        "POST",
        sts_url,
        headers.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        SignableBody::Bytes(STS_BODY),
    )
    .map_err(|e| fail(e.to_string()))?;
    let (instructions, _signature) = sign(signable, &params)
        .map_err(|e| fail(e.to_string()))?
        .into_parts();
    for (name, value) in instructions.headers() {
        headers.push((canonical_header_name(name), value.to_string()));
    }
    // Go's http.Header as JSON: canonical names → lists of values.
    let mut map: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, value) in headers {
        map.entry(canonical_header_name(&name))
            .or_default()
            .push(value);
    }
    let json = serde_json::to_vec(&map).map_err(|e| fail(e.to_string()))?;
    Ok(format!(
        "{AWS_TOKEN_PREFIX_V1}{}",
        base64::engine::general_purpose::STANDARD.encode(json)
    ))
}

/// 128 random bits, hex.
fn nonce(time: SystemTime) -> String {
    match kops_pki::random_bytes(16) {
        Ok(bytes) => bytes.iter().map(|b| format!("{b:02x}")).collect(),
        // Without randomness, the time in nanoseconds still separates
        // tokens made one after another.
        Err(_) => format!(
            "{}",
            time.duration_since(SystemTime::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kops_bootstrap::protocol::TokenHeaders;

    #[test]
    fn a_token_carries_signed_body_hash_and_audience() {
        let credentials = Credentials::new("AKID", "SECRET", None, None, "t");
        let body = br#"{"apiVersion":"bootstrap.kops.k8s.io/v1alpha1"}"#;
        let token = create_token_v1(
            "https://sts.us-east-1.amazonaws.com/",
            "us-east-1",
            &credentials,
            SystemTime::now(),
            body,
            "kops-controller.internal.a.example.com",
        )
        .unwrap();
        let headers = TokenHeaders::decode(&token).unwrap();
        assert_eq!(headers.get("x-kops-request-sha"), Some(&*body_sha(body)));
        let auth = headers.get("authorization").unwrap();
        assert!(
            auth.starts_with("AWS4-HMAC-SHA256 Credential=AKID/"),
            "{auth}"
        );
        assert!(auth.contains("x-kops-request-sha"), "{auth}");
        assert!(auth.contains("x-kops-audience"), "{auth}");
        assert!(headers.get("x-amz-date").is_some());
    }

    #[tokio::test]
    async fn sts_hosts_follow_the_sdk_partitions() {
        use aws_sdk_sts::config::endpoint::{DefaultResolver, Params, ResolveEndpoint};
        let resolver = DefaultResolver::new();
        for region in [
            "us-east-1",
            "eu-west-3",
            "cn-north-1",
            "cn-northwest-1",
            "us-gov-west-1",
            "us-iso-east-1",
            "us-isob-east-1",
            "us-isof-south-1",
            "eu-isoe-west-1",
            "eusc-de-east-1",
        ] {
            let params = Params::builder()
                .region(region)
                .use_fips(false)
                .use_dual_stack(false)
                .use_global_endpoint(false)
                .build()
                .unwrap();
            let sdk = resolver.resolve_endpoint(&params).await.unwrap();
            assert_eq!(
                format!("https://sts.{region}.{}", dns_suffix(region)),
                sdk.url(),
                "{region}"
            );
        }
    }
}
