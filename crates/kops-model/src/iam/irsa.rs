//! IAM roles for service accounts (IRSA): the service accounts' role
//! names and the discovery documents, which the addons and the state files
//! need (the roles and the OIDC provider are `kops_aws::model::iam::irsa`'s).

use serde_json::json;

use super::{truncate_with_hash, MAX_ROLE_NAME};
use crate::Model;

/// SHA-1 fingerprints of the root CAs of S3's TLS certificates, which kops
/// gives the provider (IAM then trusts the discovery documents S3 serves).
pub const OIDC_THUMBPRINTS: [&str; 2] = [
    "9e99a48a9960b14926bb7f3b02e22da2b0ab7280",
    "a9d53002e97e00e043244f3d170d6f4c414104fd",
];
/// The audience the AWS SDKs ask tokens for.
pub const AWS_AUDIENCE: &str = "amazonaws.com";

/// A Kubernetes service account.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ServiceAccount {
    pub namespace: String,
    pub name: String,
}

impl ServiceAccount {
    pub fn kube_system(name: &str) -> Self {
        ServiceAccount {
            namespace: "kube-system".into(),
            name: name.into(),
        }
    }

    /// kops' export id of the role (`kube-system-dns-controller`).
    pub fn export_id(&self) -> String {
        format!("{}-{}", self.namespace, self.name)
            .replace('*', "wildcard")
            .to_lowercase()
    }
}

/// The IAM role name of a service account: `<name>.<namespace>.sa.<cluster>`
/// (`*` in the namespace spelled `wildcard`), shortened to IAM's limit.
pub fn role_name(model: &Model<'_>, sa: &ServiceAccount) -> String {
    let name = format!(
        "{}.{}.sa.{}",
        sa.name,
        sa.namespace.replace('*', "wildcard"),
        model.name()
    );
    truncate_with_hash(&name, MAX_ROLE_NAME)
}

/// Whether the addons' service accounts get their own roles.
pub fn uses_service_account_permissions(model: &Model<'_>) -> bool {
    model
        .cluster
        .spec
        .iam
        .as_ref()
        .and_then(|i| i.use_service_account_external_permissions)
        == Some(true)
}

pub fn discovery<'a>(
    model: &Model<'a>,
) -> Option<&'a kops_api::cluster::ServiceAccountIssuerDiscoveryConfig> {
    model.cluster.spec.service_account_issuer_discovery.as_ref()
}

/// `spec.serviceAccountIssuerDiscovery.discoveryStore`, when set.
pub fn discovery_store<'a>(model: &Model<'a>) -> Option<&'a str> {
    discovery(model)
        .and_then(|d| d.discovery_store.as_deref())
        .filter(|s| !s.is_empty())
}

/// Whether kops-rs creates the cluster's IAM OIDC provider.
pub fn manages_oidc_provider(model: &Model<'_>) -> bool {
    discovery(model).and_then(|d| d.enable_aws_oidc_provider) == Some(true)
}

/// The `https://` URL of a discovery store (see
/// [`kops_api::cluster::discovery_store_url`]).
pub fn discovery_store_url(store: &str, region: &str, dual_stack: bool) -> Option<String> {
    kops_api::cluster::discovery_store_url(store, region, dual_stack)
}

/// The issuer the API server signs service-account tokens with (see
/// [`kops_api::Cluster::service_account_issuer`]).
pub fn service_account_issuer(model: &Model<'_>, region: &str) -> String {
    model.cluster.service_account_issuer(region)
}

/// The OIDC discovery document published at
/// `<store>/.well-known/openid-configuration`, laid out as kops writes it.
pub fn discovery_document(issuer: &str) -> String {
    let lines = [
        format!("\"issuer\": {},", json!(issuer)),
        format!(
            "\"jwks_uri\": {},",
            json!(format!("{issuer}/openid/v1/jwks"))
        ),
        "\"authorization_endpoint\": \"urn:kubernetes:programmatic_authorization\",".into(),
        "\"response_types_supported\": [\n\"id_token\"\n],".into(),
        "\"subject_types_supported\": [\n\"public\"\n],".into(),
        "\"id_token_signing_alg_values_supported\": [\n\"RS256\"\n],".into(),
        "\"claims_supported\": [\n\"sub\",\n\"iss\"\n]".into(),
    ];
    format!("{{\n{}\n}}", lines.join("\n"))
}
