//! The node's side: ask kops-controller for certificates and the node
//! config, proving the node's identity with a token signed by its instance
//! role (kops' `kopscontrollerclient`).
//!
//! The controller is trusted only through the cluster CA the boot config
//! carries (`ConfigServer.CACertificates`): the system's CAs play no part,
//! so nothing else can impersonate it.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;

use crate::protocol::{BootstrapRequest, BootstrapResponse};
use crate::text::error_chain;

/// Why a bootstrap attempt failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("no AWS credentials for the node's identity: {0}\nhint: the instance needs its instance profile (the group's IAM role)")]
    Credentials(String),
    #[error(transparent)]
    Sign(#[from] crate::protocol::SignError),
    #[error("the boot config's CA certificates do not parse: {0}")]
    Ca(String),
    #[error("{url}: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("{url} refused the node: HTTP {status}: {message}")]
    Refused {
        url: String,
        status: u16,
        message: String,
    },
    #[error("{url} answered with something that is not a bootstrap response: {reason}")]
    BadResponse { url: String, reason: String },
}

impl ClientError {
    /// Worth trying again later: the control plane may not be up yet, or
    /// may be rolling.
    pub fn is_transient(&self) -> bool {
        match self {
            ClientError::Unreachable { .. } => true,
            ClientError::Refused { status, .. } => *status >= 500 || *status == 429,
            _ => false,
        }
    }

    /// kops-controller's answer for a node that is already registered and
    /// Ready (HTTP 409): it has joined; kops' nodeup then ends without
    /// doing anything.
    pub fn already_registered(&self) -> bool {
        matches!(self, ClientError::Refused { status: 409, .. })
    }
}

type HttpsClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// A client for one cluster's kops-controller.
pub struct BootstrapClient {
    cluster: String,
    region: String,
    servers: Vec<String>,
    http: HttpsClient,
}

impl BootstrapClient {
    /// `ca_pem`: the certificates to trust for the controller;
    /// `tls_server_name`: the name its certificate must carry when the
    /// servers are addresses (kops' `tlsServerName`; empty: each URL's host).
    pub fn new(
        cluster: &str,
        region: &str,
        servers: &[String],
        ca_pem: &str,
        tls_server_name: &str,
    ) -> Result<BootstrapClient, ClientError> {
        use rustls_pki_types::pem::PemObject;
        use rustls_pki_types::CertificateDer;

        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
            let cert = cert.map_err(|e| ClientError::Ca(e.to_string()))?;
            roots
                .add(cert)
                .map_err(|e| ClientError::Ca(e.to_string()))?;
        }
        if roots.is_empty() {
            return Err(ClientError::Ca("no certificate".into()));
        }
        let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::aws_lc_rs::default_provider(),
        ))
        .with_protocol_versions(&[&rustls::version::TLS12, &rustls::version::TLS13])
        .map_err(|e| ClientError::Ca(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
        let builder = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_only();
        let builder = if tls_server_name.is_empty() {
            builder
        } else {
            let name = rustls_pki_types::ServerName::try_from(tls_server_name.to_string())
                .map_err(|e| ClientError::Ca(format!("tlsServerName `{tls_server_name}`: {e}")))?;
            builder.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name))
        };
        let connector = builder.enable_http1().build();
        Ok(BootstrapClient {
            cluster: cluster.to_string(),
            region: region.to_string(),
            servers: servers.to_vec(),
            http: Client::builder(hyper_util::rt::TokioExecutor::new()).build(connector),
        })
    }

    /// The cluster this client asks for.
    pub fn cluster(&self) -> &str {
        &self.cluster
    }

    /// The cloud region the node is in (AWS: where its STS token is for).
    pub fn region(&self) -> &str {
        &self.region
    }

    /// A bootstrap on Google Cloud: the token is signed
    /// by the instance's vTPM attestation key (or its stand-in).
    pub async fn bootstrap_gce(
        &self,
        request: &BootstrapRequest,
        instance: &crate::gce::token::InstanceRef,
        signer: &dyn crate::gce::token::Signer,
    ) -> Result<BootstrapResponse, ClientError> {
        self.bootstrap_with(request, &|body| {
            crate::gce::token::create_token(instance, signer, body, SystemTime::now())
        })
        .await
    }

    /// One round over the servers with tokens from `token` (called with
    /// the body, once per attempt: a controller refuses a token it has seen).
    pub async fn bootstrap_with(
        &self,
        request: &BootstrapRequest,
        token: &(dyn Fn(&[u8]) -> Result<String, crate::protocol::SignError> + Sync),
    ) -> Result<BootstrapResponse, ClientError> {
        let body = serde_json::to_vec(request).map_err(|e| ClientError::BadResponse {
            url: String::new(),
            reason: e.to_string(),
        })?;
        let mut last = None;
        for server in &self.servers {
            let token = token(&body)?;
            match self.post(server, &token, &body).await {
                Ok(response) => return Ok(response),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| ClientError::Unreachable {
            url: String::new(),
            reason: "the boot config names no kops-controller".into(),
        }))
    }

    /// One POST of `body` with a given `token` to `server` (a replayed
    /// token must be refused: tests send one twice).
    pub async fn post(
        &self,
        server: &str,
        token: &str,
        body: &[u8],
    ) -> Result<BootstrapResponse, ClientError> {
        let url = format!("{}/bootstrap", server.trim_end_matches('/'));
        let unreachable = |reason: String| ClientError::Unreachable {
            url: url.clone(),
            reason,
        };
        let request = http::Request::builder()
            .method("POST")
            .uri(&url)
            .header("Authorization", token)
            .header("Content-Type", "application/json")
            .body(Full::new(Bytes::copy_from_slice(body)))
            .map_err(|e| unreachable(e.to_string()))?;
        let response = tokio::time::timeout(Duration::from_secs(60), self.http.request(request))
            .await
            .map_err(|_| unreachable("no answer in 60s".into()))?
            .map_err(|e| unreachable(error_chain(&e)))?;
        let status = response.status().as_u16();
        let bytes = response
            .into_body()
            .collect()
            .await
            .map_err(|e| unreachable(e.to_string()))?
            .to_bytes();
        if status != 200 {
            return Err(ClientError::Refused {
                url,
                status,
                message: String::from_utf8_lossy(&bytes).chars().take(300).collect(),
            });
        }
        serde_json::from_slice(&bytes).map_err(|e| ClientError::BadResponse {
            url,
            reason: e.to_string(),
        })
    }
}
