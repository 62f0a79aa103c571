//! Why a node was refused: one line for the log (the node gets only
//! "failed to verify token", or "try again later" when the refusal is
//! transient).

use kops_bootstrap::text::escape;

use crate::identity::INSTANCE_GROUP_TAG;

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
    Vsphere(VsphereRefusal),
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

/// Why a vSphere node was refused (logged; the node learns nothing more).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum VsphereRefusal {
    #[error("malformed vSphere bootstrap header")]
    Malformed,
    #[error("no VM has BIOS UUID `{0}`")]
    NoVm(String),
    #[error("VM `{vm}` is not part of cluster `{cluster}`")]
    NotInCluster { vm: String, cluster: String },
    #[error("VM `{0}` holds no bootstrap token (already used: a replay)")]
    Used(String),
    #[error("the proof does not match VM `{0}`'s token (forged)")]
    Forged(String),
    #[error("VM `{vm}` is of role `{role}`, which does not join through kops-controller")]
    NotAWorker { vm: String, role: String },
    #[error("vCenter: {0}")]
    Vcenter(String),
}

impl VsphereRefusal {
    /// vCenter could not answer (or the controller has no credentials
    /// yet): the node may retry.
    pub fn is_transient(&self) -> bool {
        matches!(self, VsphereRefusal::Vcenter(_))
    }
}

/// The scheme word of an `Authorization` header (`x-aws-sts`, ...), fit
/// for a log line.
pub fn token_kind(authorization: &str) -> String {
    let word = authorization.split_whitespace().next().unwrap_or("(none)");
    escape(&word.chars().take(32).collect::<String>())
}
