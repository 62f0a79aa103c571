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

pub mod ipam;
pub mod labels;
pub mod nodes;

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use kops_bootstrap::config::{Options, CONFIG_PATH};
use kops_bootstrap::http::{http_client, HttpClient};
use kops_bootstrap::text::{error_chain, escape};

use crate::error::StartError;
use crate::identity::{NodeIdentity, INSTANCE_GROUP_TAG};
use crate::refusal::Refusal;
use crate::replay::{Denied, ReplayCache, StsLimiter};
use crate::verifier::{NodePass, Verifier};
use kops_bootstrap::protocol::{
    audience, body_sha, TokenHeaders, AUDIENCE_HEADER, REQUEST_SHA_HEADER, STS_BODY,
};
use nodes::{in_cluster, is_live, node_name, tag, Binding};

/// How old a token may be. STS accepts a signature for 15 minutes; a
/// node signs its token just before it sends it, so the controller takes
/// 5: the replay cache is per process, and a shorter window is a shorter
/// time in which a leaked token could be replayed to another replica.
pub const MAX_TOKEN_AGE: Duration = Duration::from_secs(5 * 60);
/// How far in the future a token's date may be (clock skew; instances
/// keep time with the hypervisor's clock service).
const MAX_CLOCK_SKEW: Duration = Duration::from_secs(2 * 60);

/// The verifier of an AWS cluster: the AWS clients for the options'
/// region, with the default credentials.
pub async fn verifier(options: &Options) -> Result<AwsVerifier, StartError> {
    let region = options.aws().map(|a| a.region.clone()).unwrap_or_default();
    let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new(region))
        .load()
        .await;
    verifier_with(options, &sdk).await
}

/// [`verifier`] with the AWS configuration given (credentials, endpoint):
/// this controller's own account and partition from STS
/// GetCallerIdentity.
pub async fn verifier_with(
    options: &Options,
    sdk: &aws_config::SdkConfig,
) -> Result<AwsVerifier, StartError> {
    let aws = options
        .aws()
        .ok_or_else(|| StartError::Invalid {
            path: CONFIG_PATH.to_string(),
            reason: "kops-rs' kops-controller runs on AWS only (server.provider.aws is missing)"
                .into(),
        })?
        .clone();
    let sts = aws_sdk_sts::Client::new(sdk);
    let me = sts
        .get_caller_identity()
        .send()
        .await
        .map_err(|e| StartError::Aws(format!("STS GetCallerIdentity: {}", sdk_message(&e))))?;
    let arn = me.arn().unwrap_or_default();
    let partition = arn.split(':').nth(1).unwrap_or("aws").to_string();
    AwsVerifier::new(VerifierParts {
        cluster: options.cluster_name.clone(),
        account: me.account().unwrap_or_default().to_string(),
        partition,
        nodes_roles: aws.nodes_roles.clone(),
        region: aws.region.clone(),
        sts_url: kops_aws_identity::sts_url(&aws.region),
        use_ip_based_node_names: aws.use_ip_based_node_names,
        accept_kops_node_tokens: options.accept_kops_node_tokens,
        ec2: aws_sdk_ec2::Client::new(sdk),
    })
    .map_err(StartError::Tls)
}

/// An SDK error as code and message, one line.
fn sdk_message<E, R>(error: &aws_smithy_runtime_api::client::result::SdkError<E, R>) -> String
where
    E: aws_sdk_sts::error::ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    match error.as_service_error() {
        Some(e) => format!(
            "{}: {}",
            e.code().unwrap_or("error"),
            e.message().unwrap_or_default()
        ),
        None => error_chain(error),
    }
}

/// The AWS verifier of one cluster's controller.
pub struct AwsVerifier {
    cluster: String,
    account: String,
    partition: String,
    nodes_roles: Vec<String>,
    sts_url: String,
    region: String,
    use_ip_based_node_names: bool,
    accept_kops_node_tokens: bool,
    ec2: aws_sdk_ec2::Client,
    http: HttpClient,
    /// Signatures being checked or accepted (see [`crate::replay`]).
    seen: ReplayCache,
    sts_limit: StsLimiter,
    /// How old a token may be, and how far ahead ([`MAX_TOKEN_AGE`],
    /// [`MAX_CLOCK_SKEW`]; tests shorten them).
    token_age: Duration,
    clock_skew: Duration,
    /// How nodes are bound to their instances: one for the labeller and
    /// the IPAM, which share their warnings.
    binding: Binding,
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
    /// Tokens without an audience (kops' nodes) are accepted too
    /// ([`Options::accept_kops_node_tokens`]).
    pub accept_kops_node_tokens: bool,
    pub ec2: aws_sdk_ec2::Client,
}

fn sts_http(sts_url: &str) -> Result<HttpClient, String> {
    http_client(sts_url, "STS")
}

impl AwsVerifier {
    pub fn new(parts: VerifierParts) -> Result<AwsVerifier, String> {
        let binding = Binding {
            cluster: parts.cluster.clone(),
            region: parts.region.clone(),
            use_ip_based_node_names: parts.use_ip_based_node_names,
            warned: Default::default(),
        };
        Ok(AwsVerifier {
            cluster: parts.cluster,
            account: parts.account,
            partition: parts.partition,
            nodes_roles: parts.nodes_roles,
            region: parts.region,
            use_ip_based_node_names: parts.use_ip_based_node_names,
            accept_kops_node_tokens: parts.accept_kops_node_tokens,
            ec2: parts.ec2,
            http: sts_http(&parts.sts_url)?,
            sts_url: parts.sts_url,
            seen: ReplayCache::default(),
            sts_limit: StsLimiter::default(),
            token_age: MAX_TOKEN_AGE,
            clock_skew: MAX_CLOCK_SKEW,
            binding,
        })
    }

    /// The same verifier remembering at most `capacity` signatures (tests
    /// reach the bound with a few tokens).
    pub fn with_replay_capacity(mut self, capacity: usize) -> AwsVerifier {
        self.seen = ReplayCache::with_capacity(capacity);
        self
    }

    /// The same verifier taking tokens at most `age` old and `skew` ahead
    /// (tests see a replay entry's window close within seconds).
    pub fn with_token_window(mut self, age: Duration, skew: Duration) -> AwsVerifier {
        self.token_age = age;
        self.clock_skew = skew;
        self
    }

    /// The EC2 client (shared with the node labeller).
    pub fn ec2(&self) -> &aws_sdk_ec2::Client {
        &self.ec2
    }

    /// Which Kubernetes node an instance of this cluster must be: what
    /// the labeller and the IPAM bind a node's provider id to.
    pub fn binding(&self) -> Binding {
        self.binding.clone()
    }

    /// Signatures held by the replay cache now (tests: forged tokens
    /// leave none).
    pub fn replay_entries(&self) -> usize {
        self.seen.len()
    }

    /// Checks `authorization` for a request with `body`. Everything the
    /// token claims is checked before it is remembered or sent to STS.
    pub async fn verify(&self, authorization: &str, body: &[u8]) -> Result<NodeIdentity, Refusal> {
        let headers = TokenHeaders::decode(authorization).map_err(Refusal::Malformed)?;
        if headers.get(REQUEST_SHA_HEADER) != Some(body_sha(body).as_str()) {
            return Err(Refusal::BodyMismatch);
        }
        let want = audience(&self.cluster);
        let audience = headers.get(AUDIENCE_HEADER);
        match audience {
            Some(got) if got == want => {}
            None if self.accept_kops_node_tokens => {}
            got => {
                return Err(Refusal::WrongAudience {
                    got: escape(got.unwrap_or("(none)")),
                    want,
                })
            }
        }
        let auth = headers
            .get("authorization")
            .ok_or_else(|| Refusal::Malformed("no signed Authorization header".into()))?;
        let signed = SignedAuthorization::parse(auth, audience.is_some())?;
        let signed_at = headers
            .get("x-amz-date")
            .ok_or_else(|| Refusal::Malformed("no X-Amz-Date header".into()))?;
        let time = parse_amz_date(signed_at)
            .ok_or_else(|| Refusal::Malformed(format!("bad X-Amz-Date `{}`", escape(signed_at))))?;
        let now = SystemTime::now();
        let too_old = now
            .duration_since(time)
            .is_ok_and(|age| age > self.token_age);
        let too_new = time
            .duration_since(now)
            .is_ok_and(|ahead| ahead > self.clock_skew);
        if too_old || too_new {
            return Err(Refusal::Expired {
                signed: escape(signed_at),
                window: self.token_age.as_secs() / 60,
            });
        }
        signed.check_scope(&signed_at[..8], &self.region)?;

        let denied = |d: Denied| match d {
            Denied::Replay => Refusal::Replay,
            Denied::Busy => Refusal::Busy,
        };
        let signature = signed.signature;
        self.seen
            .claim(signature, time + self.token_age + self.clock_skew, now)
            .map_err(denied)?;
        // Until STS accepts it, the signature is only held while checked.
        let answer = match self.sts_limit.acquire().await {
            Ok(_slot) => self.caller_identity(&headers).await,
            Err(d) => Err(denied(d)),
        };
        let (account, arn) = answer.inspect_err(|_| self.seen.release(&signature))?;
        if account != self.account {
            return Err(Refusal::WrongAccount {
                got: escape(&account),
                want: self.account.clone(),
            });
        }
        let instance = self.instance_of(&arn)?;
        self.describe(&instance).await
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
            return Err(Refusal::Sts {
                status,
                message: escape(&message),
            });
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
            arn: escape(arn),
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
            .collect();
        let [instance] = instances.as_slice() else {
            return Err(Refusal::NoInstance {
                instance: instance_id.to_string(),
            });
        };
        // A stopped instance's role credentials may still be in use
        // elsewhere; only a booting or running machine bootstraps (kops
        // checks the same for node identity).
        if !is_live(instance) {
            return Err(Refusal::NotRunning {
                instance: instance_id.to_string(),
                state: instance
                    .state()
                    .and_then(|s| s.name())
                    .map(|n| n.as_str().to_string())
                    .unwrap_or_else(|| "in no known state".into()),
            });
        }
        if !in_cluster(instance, &self.cluster) {
            return Err(Refusal::NotInCluster {
                instance: instance_id.to_string(),
                cluster: self.cluster.clone(),
            });
        }
        let instance_group = tag(instance, INSTANCE_GROUP_TAG)
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
        let node_name = node_name(instance, &self.region, self.use_ip_based_node_names);
        if !names.contains(&node_name) {
            names.push(node_name.clone());
        }
        Ok(NodeIdentity {
            node_name,
            instance_id: instance_id.to_string(),
            instance_group,
            certificate_names: names,
            one_time: None,
        })
    }
}

#[async_trait::async_trait]
impl Verifier for AwsVerifier {
    async fn verify(&self, authorization: &str, body: &[u8]) -> Result<NodeIdentity, Refusal> {
        AwsVerifier::verify(self, authorization, body).await
    }

    fn replay_entries(&self) -> usize {
        AwsVerifier::replay_entries(self)
    }

    fn labeller(
        &self,
        nodes: kube::Api<k8s_openapi::api::core::v1::Node>,
        config_store: std::sync::Arc<dyn kops_state::ObjectStore>,
    ) -> Option<std::sync::Arc<dyn NodePass>> {
        Some(std::sync::Arc::new(labels::Labeler {
            nodes,
            ec2: self.ec2.clone(),
            config_store,
            binding: self.binding(),
        }))
    }

    fn ipam(
        &self,
        nodes: kube::Api<k8s_openapi::api::core::v1::Node>,
    ) -> Option<std::sync::Arc<dyn NodePass>> {
        Some(std::sync::Arc::new(ipam::Ipam {
            nodes,
            ec2: self.ec2.clone(),
            binding: self.binding(),
        }))
    }
}

/// What the token's SigV4 `Authorization` header says.
#[derive(Debug, PartialEq, Eq)]
struct SignedAuthorization {
    /// The HMAC-SHA256 signature: the replay key.
    signature: [u8; 32],
    /// `<access key>/<yyyymmdd>/<region>/<service>/aws4_request`.
    scope: Vec<String>,
}

impl SignedAuthorization {
    /// Requires one `Credential=`, one `SignedHeaders=` covering the body
    /// hash and the audience, and one `Signature=` of 64 hex digits: a
    /// parameter given twice is refused (STS might read another one than
    /// this check did).
    fn parse(auth: &str, with_audience: bool) -> Result<SignedAuthorization, Refusal> {
        let malformed = |m: &str| Refusal::Malformed(m.to_string());
        let rest = auth
            .strip_prefix("AWS4-HMAC-SHA256 ")
            .ok_or_else(|| malformed("not an AWS4-HMAC-SHA256 signature"))?;
        let mut signature = None;
        let mut signed = None;
        let mut credential = None;
        for part in rest.split(',').map(str::trim) {
            let (slot, value) = match part.split_once('=') {
                Some(("Signature", v)) => (&mut signature, v),
                Some(("SignedHeaders", v)) => (&mut signed, v),
                Some(("Credential", v)) => (&mut credential, v),
                _ => return Err(malformed("bad Authorization format")),
            };
            if slot.replace(value).is_some() {
                return Err(malformed(
                    "a parameter of the Authorization header is given twice",
                ));
            }
        }
        let signed: Vec<&str> = signed.unwrap_or_default().split(';').collect();
        let required: &[&str] = if with_audience {
            &["x-kops-request-sha", "x-kops-audience"]
        } else {
            &["x-kops-request-sha"]
        };
        for &required in required {
            if !signed.contains(&required) {
                return Err(Refusal::Malformed(format!(
                    "the signature does not cover `{required}`"
                )));
            }
        }
        let scope: Vec<String> = credential
            .unwrap_or_default()
            .split('/')
            .map(str::to_string)
            .collect();
        let well_formed = scope.len() == 5
            && !scope[0].is_empty()
            && scope[0].len() <= 128
            && scope[0].bytes().all(|b| b.is_ascii_alphanumeric());
        if !well_formed {
            return Err(malformed("no valid credential in the signature"));
        }
        let hex = signature.unwrap_or_default().as_bytes();
        let digit = |b: u8| match b {
            b'0'..=b'9' => Some(b - b'0'),
            b'a'..=b'f' => Some(b - b'a' + 10),
            _ => None,
        };
        let mut bytes = [0u8; 32];
        if hex.len() != 64 {
            return Err(malformed("the signature is not 64 hex digits"));
        }
        for (i, pair) in hex.chunks(2).enumerate() {
            match (digit(pair[0]), digit(pair[1])) {
                (Some(hi), Some(lo)) => bytes[i] = hi << 4 | lo,
                _ => return Err(malformed("the signature is not 64 hex digits")),
            }
        }
        Ok(SignedAuthorization {
            signature: bytes,
            scope,
        })
    }

    /// The credential scope must be STS's, of the day the token was
    /// signed, in this controller's region (where its STS endpoint is).
    fn check_scope(&self, day: &str, region: &str) -> Result<(), Refusal> {
        let ok = self.scope[1] == day
            && (region.is_empty() || self.scope[2] == region)
            && self.scope[3] == "sts"
            && self.scope[4] == "aws4_request";
        if ok {
            Ok(())
        } else {
            Err(Refusal::Malformed(format!(
                "the credential scope `{}` is not STS's in {region} on {day}",
                escape(&self.scope[1..].join("/"))
            )))
        }
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
        let sig = "0f".repeat(32);
        let ok = format!("AWS4-HMAC-SHA256 Credential=AKID/20261125/us-east-1/sts/aws4_request, SignedHeaders=content-type;host;x-amz-date;x-kops-audience;x-kops-request-sha, Signature={sig}");
        let parsed = SignedAuthorization::parse(&ok, true).unwrap();
        assert_eq!(parsed.signature, [0x0f; 32]);
        assert!(parsed.check_scope("20261125", "us-east-1").is_ok());
        assert!(parsed.check_scope("20261126", "us-east-1").is_err());
        assert!(parsed.check_scope("20261125", "eu-west-1").is_err());
        let malformed = |auth: &str| match SignedAuthorization::parse(auth, true) {
            Err(Refusal::Malformed(m)) => m,
            other => panic!("{auth}: {other:?}"),
        };
        assert!(malformed(&ok.replace("x-kops-audience;", "")).contains("x-kops-audience"));
        // Twice the same parameter: refused, whichever it is.
        for twice in [
            format!("{ok}, Signature={sig}"),
            format!("{ok}, SignedHeaders=host"),
            format!("{ok}, Credential=OTHER/20261125/us-east-1/sts/aws4_request"),
        ] {
            assert!(malformed(&twice).contains("given twice"), "{twice}");
        }
        // Signatures are 64 lowercase hex digits, nothing larger.
        for bad in [
            "abc".to_string(),
            "0".repeat(65),
            "0F".repeat(32),
            "x".repeat(10_000),
        ] {
            let auth = ok.replace(&sig, &bad);
            assert!(malformed(&auth).contains("64 hex digits"), "{bad}");
        }
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
}
