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

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use kops_bootstrap::http::{http_client, HttpClient};
use kops_bootstrap::text::error_chain;
pub use kops_bootstrap::text::escape;

use crate::replay::{Denied, ReplayCache, StsLimiter};
use kops_bootstrap::protocol::{
    audience, body_sha, TokenHeaders, AUDIENCE_HEADER, REQUEST_SHA_HEADER, STS_BODY,
};

/// How old a token may be. STS accepts a signature for 15 minutes; a
/// node signs its token just before it sends it, so the controller takes
/// 5: the replay cache is per process, and a shorter window is a shorter
/// time in which a leaked token could be replayed to another replica.
pub const MAX_TOKEN_AGE: Duration = Duration::from_secs(5 * 60);
/// How far in the future a token's date may be (clock skew; instances
/// keep time with the hypervisor's clock service).
const MAX_CLOCK_SKEW: Duration = Duration::from_secs(2 * 60);

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
    #[error("too many tokens being checked at once; the node is told to retry")]
    Busy,
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
    #[error("instance `{instance}` is {state}, not running or pending")]
    NotRunning { instance: String, state: String },
    #[error("instance `{instance}` is not part of cluster `{cluster}`")]
    NotInCluster { instance: String, cluster: String },
    #[error("instance `{instance}` has no `{INSTANCE_GROUP_TAG}` tag")]
    NoInstanceGroup { instance: String },
    #[error("EC2 DescribeInstances for `{instance}` failed: {reason}")]
    Ec2 { instance: String, reason: String },
    #[error("the token names project `{got}`, not this cluster's (`{want}`)")]
    WrongProject { got: String, want: String },
    #[error("instance `{instance}` is in zone `{zone}`, not in region {region}")]
    WrongRegion {
        instance: String,
        zone: String,
        region: String,
    },
    #[error("instance `{instance}` is not part of cluster `{want}` (its `cluster-name` metadata: {got})")]
    WrongClusterMetadata {
        instance: String,
        got: String,
        want: String,
    },
    #[error("instance `{instance}` has no `kops-k8s-io-instance-group-name` metadata")]
    NoInstanceGroupMetadata { instance: String },
    #[error("instance `{instance}` has no shielded-VM signing key (getShieldedInstanceIdentity)")]
    NoSigningKey { instance: String },
    #[error("the token's signature does not verify with the shielded-VM signing key of instance `{instance}`")]
    BadSignature { instance: String },
    #[error("Compute API for instance `{instance}`: {reason}")]
    Compute { instance: String, reason: String },
    #[error("{0}")]
    Vsphere(crate::vsphere::VsphereRefusal),
    #[error(
        "no Host `{host}`: the machine was not enrolled into this cluster (`kops toolbox enroll`)"
    )]
    UnknownHost { host: String },
    #[error("Host `{host}` has no spec.{field}")]
    HostIncomplete { host: String, field: &'static str },
    #[error("the spec.publicKey of Host `{host}` is not usable: {reason}")]
    HostKeyUnusable { host: String, reason: String },
    #[error("the token's signature does not verify with the public key of Host `{host}`")]
    HostKeyMismatch { host: String },
    #[error("cannot read Host `{host}`: {reason}")]
    HostLookup { host: String, reason: String },
    #[error("{0}")]
    NotAccepted(String),
}

impl Refusal {
    /// A refusal the node may retry (the controller or its cloud could not
    /// answer), rather than a verdict on the node.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Refusal::Busy
                | Refusal::StsUnreachable { .. }
                | Refusal::Ec2 { .. }
                | Refusal::Compute { .. }
                | Refusal::HostLookup { .. }
        ) || matches!(self, Refusal::Vsphere(v) if v.is_transient())
    }
}

/// The verifier of the controller's cloud.
pub enum Verifier {
    Aws(Box<AwsVerifier>),
    Gce(Box<crate::gce::GceVerifier>),
    Vsphere(Box<crate::vsphere::VsphereVerifier>),
    /// No cloud (`cloudProvider: metal`): only enrolled machines, by
    /// their machine key (see [`crate::hostkey`]).
    Metal,
}

impl Verifier {
    /// The AWS verifier (see [`AwsVerifier::new`]).
    pub fn new(parts: VerifierParts) -> Result<Verifier, String> {
        AwsVerifier::new(parts).map(|v| Verifier::Aws(Box::new(v)))
    }

    /// Checks `authorization` for a request with `body`.
    pub async fn verify(&self, authorization: &str, body: &[u8]) -> Result<NodeIdentity, Refusal> {
        match self {
            Verifier::Aws(v) => v.verify(authorization, body).await,
            Verifier::Gce(v) => v.verify(authorization, body).await,
            Verifier::Vsphere(v) => v
                .verify(authorization, body)
                .await
                .map_err(Refusal::Vsphere),
            Verifier::Metal => Err(Refusal::NotAccepted(format!(
                "`{}` tokens are not accepted on a bare-metal cluster (only enrolled machines' `x-pki-tpm`)",
                token_kind(authorization)
            ))),
        }
    }

    /// Tokens held by the replay cache now.
    pub fn replay_entries(&self) -> usize {
        match self {
            Verifier::Aws(v) => v.replay_entries(),
            Verifier::Gce(v) => v.replay_entries(),
            // One-time tokens live in vCenter, not in a cache.
            Verifier::Vsphere(_) | Verifier::Metal => 0,
        }
    }

    /// The EC2 client, on AWS (node labels and the IPv6 IPAM use it).
    pub fn ec2(&self) -> Option<&aws_sdk_ec2::Client> {
        match self {
            Verifier::Aws(v) => Some(v.ec2()),
            Verifier::Gce(_) | Verifier::Vsphere(_) | Verifier::Metal => None,
        }
    }

    /// How nodes are bound to AWS instances, on AWS.
    pub fn binding(&self) -> Option<crate::nodes::Binding> {
        match self {
            Verifier::Aws(v) => Some(v.binding()),
            Verifier::Gce(_) | Verifier::Vsphere(_) | Verifier::Metal => None,
        }
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
    /// ([`crate::Options::accept_kops_node_tokens`]).
    pub accept_kops_node_tokens: bool,
    pub ec2: aws_sdk_ec2::Client,
}

fn sts_http(sts_url: &str) -> Result<HttpClient, String> {
    http_client(sts_url, "STS")
}

impl AwsVerifier {
    pub fn new(parts: VerifierParts) -> Result<AwsVerifier, String> {
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
    pub fn binding(&self) -> crate::nodes::Binding {
        crate::nodes::Binding {
            cluster: self.cluster.clone(),
            region: self.region.clone(),
            use_ip_based_node_names: self.use_ip_based_node_names,
            warned: Default::default(),
        }
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
        })
    }
}

/// An instance's tag.
pub fn tag<'a>(instance: &'a aws_sdk_ec2::types::Instance, key: &str) -> Option<&'a str> {
    instance
        .tags()
        .iter()
        .find(|t| t.key() == Some(key))
        .and_then(|t| t.value())
}

/// Whether an instance is tagged as one of `cluster`'s (kops' two tags).
pub fn in_cluster(instance: &aws_sdk_ec2::types::Instance, cluster: &str) -> bool {
    let owned = format!("kubernetes.io/cluster/{cluster}");
    tag(instance, "KubernetesCluster") == Some(cluster)
        || tag(instance, &owned).is_some_and(|v| v == "owned" || v == "shared")
}

/// The node name the controller certifies an instance's kubelet as: its
/// instance id, or with IP-based names its private DNS name (nodeup gives
/// kubelet the same name, `--hostname-override`).
pub fn node_name(
    instance: &aws_sdk_ec2::types::Instance,
    region: &str,
    use_ip_based_node_names: bool,
) -> String {
    let id = instance.instance_id().unwrap_or_default().to_string();
    match instance.private_ip_address() {
        Some(ip) if use_ip_based_node_names => private_dns_name(ip, region),
        _ => id,
    }
}

/// Whether an instance is pending or running.
pub fn is_live(instance: &aws_sdk_ec2::types::Instance) -> bool {
    use aws_sdk_ec2::types::InstanceStateName;
    matches!(
        instance.state().and_then(|s| s.name()),
        Some(InstanceStateName::Running | InstanceStateName::Pending)
    )
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

/// The scheme word of an `Authorization` header (`x-aws-sts`, ...), fit
/// for a log line.
pub fn token_kind(authorization: &str) -> String {
    let word = authorization.split_whitespace().next().unwrap_or("(none)");
    escape(&word.chars().take(32).collect::<String>())
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
