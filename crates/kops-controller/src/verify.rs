//! Who is asking: the AWS verifier of kops' bootstrap protocol.
//!
//! A node's token is a GetCallerIdentity request signed with its instance
//! role's credentials. The verifier checks what the token claims before
//! spending a call (the body hash it covers, the audience, its age, that it
//! was not seen before), replays it to STS, which answers with the caller
//! (`arn:aws:sts::<account>:assumed-role/<role>/<instance-id>`), requires
//! this account, one of the cluster's worker roles, and an instance of this
//! cluster (EC2 DescribeInstances) in an instance group, and returns the
//! node's identity.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;

use crate::protocol::{
    audience, body_sha, TokenHeaders, AUDIENCE_HEADER, REQUEST_SHA_HEADER, STS_BODY,
};

/// How old a token may be (STS accepts a signature for 15 minutes).
pub const MAX_TOKEN_AGE: Duration = Duration::from_secs(15 * 60);
/// How far in the future a token's date may be (clock skew).
const MAX_CLOCK_SKEW: Duration = Duration::from_secs(5 * 60);

/// The instance tag naming a machine's instance group.
pub const INSTANCE_GROUP_TAG: &str = "kops.k8s.io/instancegroup";

/// A node whose identity was proven.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeIdentity {
    /// The node's name: its instance id (kops' resource-based names) or
    /// its IP-based private DNS name.
    pub node_name: String,
    pub instance_id: String,
    pub instance_group: String,
    /// The names its kubelet serving certificate is valid for.
    pub certificate_names: Vec<String>,
}

/// Why a request was refused (logged by the server, one line; the node
/// gets only "failed to verify token").
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Refusal {
    #[error("malformed token: {0}")]
    Malformed(String),
    #[error("the token does not cover this request's body (X-Kops-Request-Sha differs)")]
    BodyMismatch,
    #[error("the token is for `{got}`, not this controller (`{want}`)")]
    WrongAudience { got: String, want: String },
    #[error("the token was signed at {signed}, outside the {window} minutes accepted")]
    Expired { signed: String, window: u64 },
    #[error("the token was already used (replay)")]
    Replay,
    #[error("STS refused the token: HTTP {status}: {message}")]
    Sts { status: u16, message: String },
    #[error("cannot reach STS at {url}: {reason}")]
    StsUnreachable { url: String, reason: String },
    #[error("the caller is in account {got}, not {want}")]
    WrongAccount { got: String, want: String },
    #[error("the caller `{arn}` is not an instance of a worker role ({roles})")]
    NotANodeRole { arn: String, roles: String },
    #[error("instance `{instance}` does not exist")]
    NoInstance { instance: String },
    #[error("instance `{instance}` is not part of cluster `{cluster}`")]
    NotInCluster { instance: String, cluster: String },
    #[error("instance `{instance}` has no `{INSTANCE_GROUP_TAG}` tag")]
    NoInstanceGroup { instance: String },
    #[error("EC2 DescribeInstances for `{instance}` failed: {reason}")]
    Ec2 { instance: String, reason: String },
}

type HttpClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// The verifier of one cluster's controller.
pub struct Verifier {
    cluster: String,
    account: String,
    partition: String,
    nodes_roles: Vec<String>,
    sts_url: String,
    region: String,
    use_ip_based_node_names: bool,
    ec2: aws_sdk_ec2::Client,
    http: HttpClient,
    /// Signatures already used, with when they stop being valid anyway.
    seen: Mutex<HashMap<String, SystemTime>>,
}

/// What the verifier needs to know.
pub struct VerifierParts {
    pub cluster: String,
    /// This controller's own account and partition (from its own
    /// GetCallerIdentity).
    pub account: String,
    pub partition: String,
    pub nodes_roles: Vec<String>,
    pub region: String,
    pub sts_url: String,
    pub use_ip_based_node_names: bool,
    pub ec2: aws_sdk_ec2::Client,
}

/// The HTTPS (and, for a local endpoint, HTTP) client used for STS.
pub(crate) fn http_client() -> Result<HttpClient, String> {
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_native_roots()
        .map_err(|e| format!("cannot load the system's CA certificates: {e}"))?
        .https_or_http()
        .enable_http1()
        .build();
    Ok(Client::builder(hyper_util::rt::TokioExecutor::new()).build(connector))
}

impl Verifier {
    pub fn new(parts: VerifierParts) -> Result<Verifier, String> {
        Ok(Verifier {
            cluster: parts.cluster,
            account: parts.account,
            partition: parts.partition,
            nodes_roles: parts.nodes_roles,
            sts_url: parts.sts_url,
            region: parts.region,
            use_ip_based_node_names: parts.use_ip_based_node_names,
            ec2: parts.ec2,
            http: http_client()?,
            seen: Mutex::new(HashMap::new()),
        })
    }

    /// The EC2 client (shared with the node labeller).
    pub fn ec2(&self) -> &aws_sdk_ec2::Client {
        &self.ec2
    }

    /// Checks `authorization` for a request with `body`.
    pub async fn verify(&self, authorization: &str, body: &[u8]) -> Result<NodeIdentity, Refusal> {
        let headers = TokenHeaders::decode(authorization).map_err(Refusal::Malformed)?;
        if headers.get(REQUEST_SHA_HEADER) != Some(body_sha(body).as_str()) {
            return Err(Refusal::BodyMismatch);
        }
        let want = audience(&self.cluster);
        match headers.get(AUDIENCE_HEADER) {
            Some(got) if got == want => {}
            got => {
                return Err(Refusal::WrongAudience {
                    got: got.unwrap_or("(none)").to_string(),
                    want,
                })
            }
        }
        let auth = headers
            .get("authorization")
            .ok_or_else(|| Refusal::Malformed("no signed Authorization header".into()))?;
        let signature = signed_parts(auth)?;
        let signed_at = headers
            .get("x-amz-date")
            .ok_or_else(|| Refusal::Malformed("no X-Amz-Date header".into()))?;
        let time = parse_amz_date(signed_at)
            .ok_or_else(|| Refusal::Malformed(format!("bad X-Amz-Date `{signed_at}`")))?;
        let now = SystemTime::now();
        let too_old = now
            .duration_since(time)
            .is_ok_and(|age| age > MAX_TOKEN_AGE);
        let too_new = time
            .duration_since(now)
            .is_ok_and(|ahead| ahead > MAX_CLOCK_SKEW);
        if too_old || too_new {
            return Err(Refusal::Expired {
                signed: signed_at.to_string(),
                window: MAX_TOKEN_AGE.as_secs() / 60,
            });
        }
        self.remember(&signature, time + MAX_TOKEN_AGE + MAX_CLOCK_SKEW, now)?;

        let (account, arn) = self.caller_identity(&headers).await?;
        if account != self.account {
            return Err(Refusal::WrongAccount {
                got: account,
                want: self.account.clone(),
            });
        }
        let instance = self.instance_of(&arn)?;
        self.describe(&instance).await
    }

    /// Records a signature; a second use while it could still be valid is
    /// a replay.
    fn remember(&self, signature: &str, until: SystemTime, now: SystemTime) -> Result<(), Refusal> {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.retain(|_, expires| *expires > now);
        if seen.contains_key(signature) {
            return Err(Refusal::Replay);
        }
        seen.insert(signature.to_string(), until);
        Ok(())
    }

    /// Sends the signed request to STS: the caller's account and ARN.
    async fn caller_identity(&self, headers: &TokenHeaders) -> Result<(String, String), Refusal> {
        let unreachable = |reason: String| Refusal::StsUnreachable {
            url: self.sts_url.clone(),
            reason,
        };
        let mut request = http::Request::builder().method("POST").uri(&self.sts_url);
        for (name, values) in &headers.0 {
            // Hop-by-hop and length headers are the client's to set.
            if matches!(
                name.as_str(),
                "Host" | "Content-Length" | "Connection" | "Transfer-Encoding"
            ) {
                continue;
            }
            for value in values {
                request = request.header(name.as_str(), value.as_str());
            }
        }
        let request = request
            .body(Full::new(Bytes::from_static(STS_BODY)))
            .map_err(|e| Refusal::Malformed(format!("bad header in token: {e}")))?;
        let response = tokio::time::timeout(Duration::from_secs(30), self.http.request(request))
            .await
            .map_err(|_| unreachable("no answer in 30s".into()))?
            .map_err(|e| unreachable(error_chain(&e)))?;
        let status = response.status().as_u16();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| unreachable(e.to_string()))?
            .to_bytes();
        let text = String::from_utf8_lossy(&body);
        if status != 200 {
            let message = xml_value(&text, "Message")
                .or_else(|| xml_value(&text, "Code"))
                .unwrap_or_else(|| text.chars().take(200).collect());
            return Err(Refusal::Sts { status, message });
        }
        match (xml_value(&text, "Account"), xml_value(&text, "Arn")) {
            (Some(account), Some(arn)) => Ok((account, arn)),
            _ => Err(Refusal::Sts {
                status,
                message: "the answer has no Account or Arn".into(),
            }),
        }
    }

    /// The instance id of an assumed worker role's session, after checking
    /// partition, type and role.
    fn instance_of(&self, arn: &str) -> Result<String, Refusal> {
        let refuse = || Refusal::NotANodeRole {
            arn: arn.to_string(),
            roles: self.nodes_roles.join(", "),
        };
        let parts: Vec<&str> = arn.split(':').collect();
        if parts.len() != 6
            || parts[0] != "arn"
            || parts[1] != self.partition
            || !matches!(parts[2], "sts" | "iam")
        {
            return Err(refuse());
        }
        let resource: Vec<&str> = parts[5].split('/').collect();
        if resource.len() < 3 || resource[0] != "assumed-role" {
            return Err(refuse());
        }
        if !self.nodes_roles.iter().any(|r| r == resource[1]) {
            return Err(refuse());
        }
        Ok(resource[2].to_string())
    }

    /// The instance behind a session: it must exist, belong to this
    /// cluster and name its instance group.
    async fn describe(&self, instance_id: &str) -> Result<NodeIdentity, Refusal> {
        let out = self
            .ec2
            .describe_instances()
            .instance_ids(instance_id)
            .send()
            .await;
        let out = match out {
            Ok(out) => out,
            Err(e) => {
                let code = aws_smithy_runtime_api::client::result::SdkError::as_service_error(&e)
                    .and_then(aws_sdk_ec2::error::ProvideErrorMetadata::code)
                    .map(str::to_string);
                if code.as_deref() == Some("InvalidInstanceID.NotFound")
                    || code.as_deref() == Some("InvalidInstanceID.Malformed")
                {
                    return Err(Refusal::NoInstance {
                        instance: instance_id.to_string(),
                    });
                }
                return Err(Refusal::Ec2 {
                    instance: instance_id.to_string(),
                    reason: code.unwrap_or_else(|| error_chain(&e)),
                });
            }
        };
        let instances: Vec<_> = out
            .reservations()
            .iter()
            .flat_map(|r| r.instances())
            .filter(|i| {
                !matches!(
                    i.state().and_then(|s| s.name()),
                    Some(aws_sdk_ec2::types::InstanceStateName::Terminated)
                )
            })
            .collect();
        let [instance] = instances.as_slice() else {
            return Err(Refusal::NoInstance {
                instance: instance_id.to_string(),
            });
        };
        let tag = |key: &str| {
            instance
                .tags()
                .iter()
                .find(|t| t.key() == Some(key))
                .and_then(|t| t.value())
        };
        let owned_key = format!("kubernetes.io/cluster/{}", self.cluster);
        let in_cluster = tag("KubernetesCluster") == Some(self.cluster.as_str())
            || tag(&owned_key).is_some_and(|v| v == "owned" || v == "shared");
        if !in_cluster {
            return Err(Refusal::NotInCluster {
                instance: instance_id.to_string(),
                cluster: self.cluster.clone(),
            });
        }
        let instance_group = tag(INSTANCE_GROUP_TAG)
            .filter(|g| !g.is_empty())
            .ok_or_else(|| Refusal::NoInstanceGroup {
                instance: instance_id.to_string(),
            })?
            .to_string();

        // The names the kubelet serves as: id, private DNS name, and the
        // primary interface's addresses.
        let mut names = vec![instance_id.to_string()];
        if let Some(dns) = instance.private_dns_name().filter(|d| !d.is_empty()) {
            names.push(dns.to_string());
        }
        for nic in instance.network_interfaces() {
            if nic.attachment().and_then(|a| a.device_index()) != Some(0) {
                continue;
            }
            if let Some(ip) = nic.private_ip_address() {
                names.push(ip.to_string());
            }
            if let Some(ip) = nic.ipv6_addresses().first().and_then(|a| a.ipv6_address()) {
                names.push(ip.to_string());
            }
            if let Some(ip) = nic.association().and_then(|a| a.public_ip()) {
                names.push(ip.to_string());
            }
        }
        if let Some(ip) = instance.private_ip_address() {
            if !names.iter().any(|n| n == ip) {
                names.push(ip.to_string());
            }
        }
        let mut node_name = instance_id.to_string();
        if self.use_ip_based_node_names {
            if let Some(ip) = instance.private_ip_address() {
                node_name = private_dns_name(ip, &self.region);
                if !names.contains(&node_name) {
                    names.push(node_name.clone());
                }
            }
        }
        Ok(NodeIdentity {
            node_name,
            instance_id: instance_id.to_string(),
            instance_group,
            certificate_names: names,
        })
    }
}

/// EC2's private DNS name of an address (`ip-10-0-0-1.ec2.internal`).
pub fn private_dns_name(ip: &str, region: &str) -> String {
    let domain = if region == "us-east-1" {
        "ec2.internal".to_string()
    } else {
        format!("{region}.compute.internal")
    };
    format!("ip-{}.{domain}", ip.replace('.', "-"))
}

/// Checks the SigV4 `Authorization` header signs the body hash and the
/// audience; returns the signature (the replay key).
fn signed_parts(auth: &str) -> Result<String, Refusal> {
    let rest = auth
        .strip_prefix("AWS4-HMAC-SHA256 ")
        .ok_or_else(|| Refusal::Malformed("not an AWS4-HMAC-SHA256 signature".into()))?;
    let mut signature = None;
    let mut signed = None;
    let mut credential = None;
    for part in rest.split(',').map(str::trim) {
        match part.split_once('=') {
            Some(("Signature", v)) => signature = Some(v),
            Some(("SignedHeaders", v)) => signed = Some(v),
            Some(("Credential", v)) => credential = Some(v),
            _ => return Err(Refusal::Malformed("bad Authorization format".into())),
        }
    }
    let signed: Vec<&str> = signed.unwrap_or_default().split(';').collect();
    for required in ["x-kops-request-sha", "x-kops-audience"] {
        if !signed.contains(&required) {
            return Err(Refusal::Malformed(format!(
                "the signature does not cover `{required}`"
            )));
        }
    }
    if credential.is_none_or(str::is_empty) {
        return Err(Refusal::Malformed("no credential in the signature".into()));
    }
    match signature {
        Some(s) if !s.is_empty() => Ok(s.to_string()),
        _ => Err(Refusal::Malformed("empty signature".into())),
    }
}

/// `20261125T010203Z` → time.
fn parse_amz_date(text: &str) -> Option<SystemTime> {
    let b = text.as_bytes();
    if b.len() != 16 || b[8] != b'T' || b[15] != b'Z' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| text.get(r)?.parse::<i64>().ok();
    let (y, m, d) = (num(0..4)?, num(4..6)?, num(6..8)?);
    let (hh, mm, ss) = (num(9..11)?, num(11..13)?, num(13..15)?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146097 + doe - 719468;
    let secs = days * 86400 + hh * 3600 + mm * 60 + ss;
    u64::try_from(secs)
        .ok()
        .map(|s| SystemTime::UNIX_EPOCH + Duration::from_secs(s))
}

/// The text of the first `<tag>` element.
fn xml_value(text: &str, tag: &str) -> Option<String> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let start = text.find(&open)? + open.len();
    let end = text[start..].find(&close)? + start;
    Some(text[start..end].trim().to_string())
}

/// An error and its sources on one line.
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(s) = source {
        let message = s.to_string();
        if !text.contains(&message) {
            text.push_str(": ");
            text.push_str(&message);
        }
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amz_dates_parse() {
        let t = parse_amz_date("20261125T010203Z").unwrap();
        let secs = t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs();
        assert_eq!(secs, 1795568523);
        assert!(parse_amz_date("2026-11-25").is_none());
    }

    #[test]
    fn authorization_must_sign_body_hash_and_audience() {
        let ok = "AWS4-HMAC-SHA256 Credential=AKID/20261125/us-east-1/sts/aws4_request, SignedHeaders=content-type;host;x-amz-date;x-kops-audience;x-kops-request-sha, Signature=abc";
        assert_eq!(signed_parts(ok).unwrap(), "abc");
        let no_audience = ok.replace("x-kops-audience;", "");
        assert!(matches!(
            signed_parts(&no_audience),
            Err(Refusal::Malformed(m)) if m.contains("x-kops-audience")
        ));
    }

    #[test]
    fn sts_answers_are_read() {
        let xml = "<GetCallerIdentityResponse><GetCallerIdentityResult><Arn>arn:aws:sts::123456789012:assumed-role/nodes.a/i-1</Arn><UserId>X</UserId><Account>123456789012</Account></GetCallerIdentityResult></GetCallerIdentityResponse>";
        assert_eq!(xml_value(xml, "Account").unwrap(), "123456789012");
        assert_eq!(
            xml_value(xml, "Arn").unwrap(),
            "arn:aws:sts::123456789012:assumed-role/nodes.a/i-1"
        );
    }

    #[test]
    fn private_dns_names_follow_ec2() {
        assert_eq!(
            private_dns_name("10.0.0.1", "us-east-1"),
            "ip-10-0-0-1.ec2.internal"
        );
        assert_eq!(
            private_dns_name("10.0.0.1", "eu-west-1"),
            "ip-10-0-0-1.eu-west-1.compute.internal"
        );
    }
}
