//! kops-controller's HTTPS server: `/healthz` and `/bootstrap` on port
//! 3988, with a serving certificate from the cluster CA.
//!
//! `/bootstrap` verifies the caller ([`crate::verifier`]), then issues the
//! certificates it asks for (only the names the configuration enables,
//! each with its fixed subject: the node cannot choose what it is
//! certified as) with the CA keys nodeup gave this controller, and, when
//! asked, returns the node config of the caller's instance group from the
//! state store. A refusal is logged on one line and the node gets a 403
//! with nothing issued.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use kops_pki::{CertificateAuthority, IssueRequest};
use kops_state::ObjectStore;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::connections::{Connections, MAX_CONNECTIONS};
use crate::error::StartError;
use crate::identity::NodeIdentity;
use crate::refusal::Refusal;
use crate::verifier::{NodePass, Verifier};
use kops_bootstrap::config::Options;
use kops_bootstrap::config::MAX_BODY;
use kops_bootstrap::protocol::{
    BootstrapRequest, BootstrapResponse, NodeConfig, BOOTSTRAP_API_VERSION,
};
use kops_bootstrap::text::escape;

/// The most a request's head (request line and headers, the token
/// included) may take: hyper answers 431 beyond.
const MAX_HEAD: usize = 32 * 1024;
/// How long a connection is kept, whatever it does.
const MAX_CONNECTION_AGE: Duration = Duration::from_secs(120);

fn read(path: &str) -> Result<String, StartError> {
    std::fs::read_to_string(path).map_err(|e| StartError::Read {
        path: path.to_string(),
        reason: e.to_string(),
    })
}

/// The CA keys this controller signs with (`<ca>.crt`, `<ca>.key`) and
/// their keypair ids (`keypair-ids.yaml`), as nodeup writes them.
pub struct SigningKeys {
    cas: BTreeMap<String, CertificateAuthority>,
    keypair_ids: BTreeMap<String, String>,
}

impl SigningKeys {
    pub fn load(base: &str, names: &[String]) -> Result<SigningKeys, StartError> {
        let mut cas = BTreeMap::new();
        for name in names {
            let cert = read(&format!("{base}/{name}.crt"))?;
            let key = read(&format!("{base}/{name}.key"))?;
            let ca =
                CertificateAuthority::from_pem(&cert, &key).map_err(|e| StartError::Invalid {
                    path: format!("{base}/{name}.crt"),
                    reason: e.to_string(),
                })?;
            cas.insert(name.clone(), ca);
        }
        let ids_path = format!("{base}/keypair-ids.yaml");
        let keypair_ids = match std::fs::read_to_string(&ids_path) {
            Ok(text) => serde_yaml_ids(&text).map_err(|reason| StartError::Invalid {
                path: ids_path.clone(),
                reason,
            })?,
            Err(_) => BTreeMap::new(),
        };
        Ok(SigningKeys { cas, keypair_ids })
    }
}

/// `name: id` lines (kops writes this file as a YAML map).
fn serde_yaml_ids(text: &str) -> Result<BTreeMap<String, String>, String> {
    let mut map = BTreeMap::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line.starts_with('#') {
            continue;
        }
        let (k, v) = line
            .split_once(':')
            .ok_or_else(|| format!("`{line}` is not `name: id`"))?;
        map.insert(
            k.trim().to_string(),
            v.trim().trim_matches('"').trim_matches('\'').to_string(),
        );
    }
    Ok(map)
}

/// The bootstrap service of one cluster.
pub struct Controller {
    options: Options,
    verifier: Box<dyn Verifier>,
    /// Enrolled machines' verifier, beside the cloud's (`server.pki`).
    host_keys: Option<crate::hostkey::HostKeyVerifier>,
    keys: SigningKeys,
    config_store: Arc<dyn ObjectStore>,
    secret_store: Option<Arc<dyn ObjectStore>>,
    /// The cluster's nodes, once the controller has a Kubernetes client:
    /// a node already registered and Ready gets nothing more (see
    /// [`Controller::refuse_registered_nodes`]).
    registered: std::sync::OnceLock<kube::Api<k8s_openapi::api::core::v1::Node>>,
    connections: Arc<Connections>,
    /// Per-peer limits and the line before any verifier runs.
    gate: crate::fairness::Gate,
}

impl Controller {
    pub async fn new(
        options: Options,
        verifier: Box<dyn Verifier>,
        keys: SigningKeys,
    ) -> Result<Controller, StartError> {
        let config_store = kops_state::open(&options.config_base).await?;
        let secret_store = if options.secret_store.is_empty() {
            None
        } else {
            Some(kops_state::open(&options.secret_store).await?)
        };
        let host_keys = options.pki().map(crate::hostkey::HostKeyVerifier::new);
        Ok(Controller {
            options,
            connections: Connections::new(MAX_CONNECTIONS, crate::connections::GRACE),
            gate: crate::fairness::Gate::default(),
            host_keys,
            verifier,
            keys,
            config_store,
            secret_store,
            registered: std::sync::OnceLock::new(),
        })
    }

    /// From now on, a bootstrap for a node that is already registered and
    /// Ready is refused (409, "node already registered"), as kops'
    /// controller does: once a node has joined, a workload on it that got
    /// hold of the instance's credentials cannot obtain its certificates
    /// again. A node registered but not Ready (a reboot, a replaced
    /// certificate) may bootstrap.
    pub fn refuse_registered_nodes(&self, nodes: kube::Api<k8s_openapi::api::core::v1::Node>) {
        let _ = self.registered.set(nodes);
    }

    /// Whether `name` is a registered, Ready node; `Err` when the API
    /// cannot tell.
    async fn registered_and_ready(&self, name: &str) -> Result<bool, kube::Error> {
        let Some(nodes) = self.registered.get() else {
            return Ok(false);
        };
        let ready = nodes.get_opt(name).await?.is_some_and(|node| {
            node.status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        });
        Ok(ready)
    }

    /// The node labeller of this controller's cloud, sharing its clients
    /// and state store (`None` where the cloud has none).
    pub fn labeler(
        &self,
        nodes: kube::Api<k8s_openapi::api::core::v1::Node>,
    ) -> Option<Arc<dyn NodePass>> {
        self.verifier.labeller(nodes, self.config_store.clone())
    }

    /// The cloud IPAM of this controller's cloud, when its options enable
    /// it (`enableCloudIPAM`; `None` where the cloud has none).
    pub fn ipam(
        &self,
        nodes: kube::Api<k8s_openapi::api::core::v1::Node>,
    ) -> Option<Arc<dyn NodePass>> {
        if !self.options.enable_cloud_ipam {
            return None;
        }
        self.verifier.ipam(nodes)
    }

    /// The verifier (tests look at its replay cache).
    pub fn verifier(&self) -> &dyn Verifier {
        self.verifier.as_ref()
    }

    /// The verifier of enrolled machines, when the options turn it on.
    pub fn host_keys(&self) -> Option<&crate::hostkey::HostKeyVerifier> {
        self.host_keys.as_ref()
    }

    /// Who sent a request: an enrolled machine's token goes to the
    /// machine-key verifier, any other to the cloud's (kops' chain).
    async fn verify(&self, authorization: &str, body: &[u8]) -> Result<NodeIdentity, Refusal> {
        if !authorization.starts_with(kops_bootstrap::hostkey::TOKEN_PREFIX) {
            return self.verifier.verify(authorization, body).await;
        }
        match &self.host_keys {
            Some(host_keys) => host_keys.verify(authorization, body).await,
            None => Err(Refusal::NotAccepted(
                "`x-pki-tpm` tokens (enrolled machines) are not accepted: this controller's options have no server.pki".into(),
            )),
        }
    }

    /// How many connections are held now.
    pub fn connections(&self) -> usize {
        self.connections.len()
    }

    /// The TLS acceptor for the configured serving certificate.
    pub fn tls(&self) -> Result<TlsAcceptor, StartError> {
        tls_acceptor(
            &self.options.server.server_certificate_path,
            &self.options.server.server_key_path,
        )
    }

    /// Serves on `listener` until `shutdown` completes.
    pub async fn serve(
        self: Arc<Self>,
        listener: TcpListener,
        tls: TlsAcceptor,
        shutdown: impl std::future::Future<Output = ()>,
    ) {
        tokio::pin!(shutdown);
        loop {
            let (stream, peer) = tokio::select! {
                _ = &mut shutdown => return,
                accepted = listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        tracing::warn!("accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
            };
            // IPv4 callers of the dual-stack socket as a.b.c.d in logs.
            let peer = SocketAddr::new(peer.ip().to_canonical(), peer.port());
            // Past the cap, a new connection is closed at once unless an
            // idle one gives way (see crate::connections).
            let Some(slot) = self.connections.admit(peer.ip()) else {
                drop(stream);
                continue;
            };
            let tls = tls.clone();
            let this = self.clone();
            tokio::spawn(async move {
                let slot = Arc::new(slot);
                let serve = async {
                    let stream = match tokio::time::timeout(
                        this.options.timeouts.tls_handshake,
                        tls.accept(stream),
                    )
                    .await
                    {
                        Ok(Ok(s)) => s,
                        Ok(Err(e)) => {
                            tracing::debug!("TLS handshake with {peer} failed: {e}");
                            return;
                        }
                        Err(_) => return,
                    };
                    let header_read = this.options.timeouts.header_read;
                    let in_service = slot.clone();
                    let service = hyper::service::service_fn(move |req| {
                        let this = this.clone();
                        let slot = in_service.clone();
                        async move {
                            slot.set_busy(true);
                            let response = this.handle(req, peer, &slot).await;
                            slot.set_busy(false);
                            Ok::<_, std::convert::Infallible>(response)
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .timer(hyper_util::rt::TokioTimer::new())
                        .header_read_timeout(header_read)
                        .max_buf_size(MAX_HEAD)
                        .max_headers(32)
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                };
                tokio::select! {
                    _ = serve => {}
                    _ = slot.closed() => {}
                    _ = tokio::time::sleep(MAX_CONNECTION_AGE) => {}
                }
            });
        }
    }

    async fn handle(
        &self,
        req: Request<Incoming>,
        peer: SocketAddr,
        slot: &crate::connections::Slot,
    ) -> Response<Full<Bytes>> {
        match (req.method().as_str(), req.uri().path()) {
            (_, "/healthz") => reply(StatusCode::OK, "ok"),
            ("POST", "/bootstrap") => self.bootstrap(req, peer, slot).await,
            _ => reply(StatusCode::NOT_FOUND, "not found"),
        }
    }

    async fn bootstrap(
        &self,
        req: Request<Incoming>,
        peer: SocketAddr,
        slot: &crate::connections::Slot,
    ) -> Response<Full<Bytes>> {
        // Cheap checks first: the size of what is claimed, then the body,
        // read with a limit and a deadline, then its form; only then STS.
        let declared = req
            .headers()
            .get(hyper::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > MAX_BODY as u64) {
            tracing::info!("bootstrap from {peer}: body larger than {MAX_BODY} bytes");
            return reply(StatusCode::PAYLOAD_TOO_LARGE, "request too large");
        }
        let authorization = req
            .headers()
            .get(hyper::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let reading = Limited::new(req.into_body(), MAX_BODY).collect();
        let body = match tokio::time::timeout(
            self.options.timeouts.body_deadline(declared),
            reading,
        )
        .await
        {
            Ok(Ok(b)) => b.to_bytes(),
            Ok(Err(e)) => {
                tracing::info!("bootstrap from {peer}: cannot read the body: {e}");
                return reply(StatusCode::BAD_REQUEST, "cannot read the body");
            }
            Err(_) => {
                tracing::info!("bootstrap from {peer}: the body did not arrive in time");
                return reply(
                    StatusCode::REQUEST_TIMEOUT,
                    "the body did not arrive in time",
                );
            }
        };
        let request: BootstrapRequest = match serde_json::from_slice(&body) {
            Ok(r) => r,
            Err(e) => {
                tracing::info!(
                    "bootstrap from {peer}: bad request: {}",
                    escape(&e.to_string())
                );
                return reply(StatusCode::BAD_REQUEST, "cannot decode the request");
            }
        };
        if request.api_version != BOOTSTRAP_API_VERSION {
            tracing::info!(
                "bootstrap from {peer}: unexpected apiVersion `{}`",
                escape(&request.api_version)
            );
            return reply(StatusCode::BAD_REQUEST, "unexpected apiVersion");
        }
        // Each peer (and each claimed identity) gets its share of the
        // verifications before any cloud call (see crate::fairness).
        let claim = claimed_identity(&authorization);
        let mut pass = match self.gate.admit(peer.ip(), claim.as_deref()) {
            Ok(pass) => pass,
            Err(turned) => {
                tracing::info!("bootstrap from {peer} turned away: {turned}");
                return reply(StatusCode::TOO_MANY_REQUESTS, "try again later");
            }
        };
        let verifying = async {
            pass.turn().await;
            self.verify(&authorization, &body).await
        };
        let verified = tokio::time::timeout(crate::fairness::VERIFY_DEADLINE, verifying).await;
        drop(pass);
        let Ok(verified) = verified else {
            tracing::warn!(
                "bootstrap from {peer}: not verified within {} s; the node is told to retry",
                crate::fairness::VERIFY_DEADLINE.as_secs()
            );
            return reply(StatusCode::SERVICE_UNAVAILABLE, "try again later");
        };
        let identity = match verified {
            Ok(id) => {
                slot.set_verified();
                id
            }
            Err(refusal) => {
                tracing::warn!("bootstrap from {peer} refused: {refusal}");
                return if refusal.is_transient() {
                    reply(StatusCode::SERVICE_UNAVAILABLE, "try again later")
                } else {
                    reply(StatusCode::FORBIDDEN, "failed to verify token")
                };
            }
        };
        match self.registered_and_ready(&identity.node_name).await {
            Ok(false) => {}
            Ok(true) => {
                tracing::warn!(
                    "bootstrap from {peer} refused: node `{}` is already registered and Ready",
                    identity.node_name
                );
                return reply(StatusCode::CONFLICT, "node already registered");
            }
            Err(e) => {
                tracing::warn!(
                    "bootstrap from {peer}: cannot read node `{}`: {e}",
                    identity.node_name
                );
                return reply(StatusCode::INTERNAL_SERVER_ERROR, "internal error");
            }
        }
        let answer = self.answer(&request, &identity).await;
        if answer.is_ok() {
            // The token is spent only now, with the answer made: of two
            // requests with one token (two replicas), only the one that
            // spends it is answered; a failure before leaves the node its
            // retry.
            if let Err(refusal) = self.verifier.spend(&identity).await {
                tracing::warn!(
                    "bootstrap from {peer} (node {}) refused: {refusal}",
                    identity.node_name
                );
                return if refusal.is_transient() {
                    reply(StatusCode::SERVICE_UNAVAILABLE, "try again later")
                } else {
                    reply(StatusCode::FORBIDDEN, "failed to verify token")
                };
            }
        }
        match answer {
            Ok(response) => {
                let mut issued: Vec<String> = response.certs.keys().map(|k| escape(k)).collect();
                if response.node_config.is_some() {
                    issued.push("its node config".into());
                }
                let issued = match issued.split_last() {
                    Some((last, rest)) if !rest.is_empty() => {
                        format!("{} and {last}", rest.join(", "))
                    }
                    _ => issued.concat(),
                };
                tracing::info!(
                    "bootstrap from {peer}: node {} (instance group {}): issued {issued}",
                    identity.node_name,
                    identity.instance_group,
                );
                let json = serde_json::to_vec(&response).unwrap_or_default();
                Response::builder()
                    .status(StatusCode::OK)
                    .header(hyper::header::CONTENT_TYPE, "application/json")
                    .body(Full::new(Bytes::from(json)))
                    .unwrap_or_else(|_| reply(StatusCode::INTERNAL_SERVER_ERROR, "internal error"))
            }
            Err(Failure::Request(reason)) => {
                let reason = escape(&reason);
                tracing::warn!(
                    "bootstrap from {peer} (node {}): {reason}",
                    identity.node_name
                );
                reply(StatusCode::BAD_REQUEST, &reason)
            }
            // The detail (store URLs, store errors) is the operator's, in
            // the log once; the node learns only that it is not its fault.
            Err(Failure::Internal(detail)) => {
                tracing::error!(
                    "bootstrap from {peer} (node {}): internal error: {}",
                    identity.node_name,
                    escape(&detail)
                );
                reply(StatusCode::INTERNAL_SERVER_ERROR, "internal error")
            }
        }
    }

    /// Certificates and node config for a verified node; nothing is
    /// returned unless everything could be made.
    async fn answer(
        &self,
        request: &BootstrapRequest,
        identity: &NodeIdentity,
    ) -> Result<BootstrapResponse, Failure> {
        let mut response = BootstrapResponse::default();
        if request.include_node_config {
            response.node_config = Some(self.node_config(identity).await?);
        }
        let hours = validity_hours(&identity.node_name);
        for (name, public_key) in &request.certs {
            let cert = self.issue(name, public_key, identity, hours, &request.keypair_ids)?;

            response.certs.insert(name.clone(), cert);
        }
        Ok(response)
    }

    fn issue(
        &self,
        name: &str,
        public_key: &str,
        identity: &NodeIdentity,
        hours: u64,
        keypair_ids: &BTreeMap<String, String>,
    ) -> Result<String, Failure> {
        if !self.options.server.cert_names.iter().any(|n| n == name) {
            return Err(Failure::Request(format!(
                "certificate `{name}` is not one this controller issues"
            )));
        }
        let mut signer = kops_pki::KUBERNETES_CA;
        let mut issue = match name {
            "etcd-client-cilium" => {
                signer = "etcd-clients-ca-cilium";
                IssueRequest::client("cilium", None)
            }
            "kubelet" => IssueRequest::client(
                &format!("system:node:{}", identity.node_name),
                Some("system:nodes"),
            ),
            "kubelet-server" => {
                IssueRequest::server(&identity.node_name, &identity.certificate_names)
            }
            "kube-proxy" => IssueRequest::client("system:kube-proxy", None),
            "kube-router" => IssueRequest::client("system:kube-router", None),
            other => {
                return Err(Failure::Request(format!(
                    "unexpected certificate name `{other}`"
                )))
            }
        };
        issue.validity = Some(Duration::from_secs(hours * 3600));
        if !keypair_ids.is_empty() {
            let wanted = keypair_ids.get(signer).map(String::as_str).unwrap_or("");
            let have = self
                .keys
                .keypair_ids
                .get(signer)
                .map(String::as_str)
                .unwrap_or("");
            if wanted != have {
                return Err(Failure::Request(format!(
                    "the node trusts keypair `{wanted}` of {signer}, this controller signs with `{have}`"
                )));
            }
        }
        let ca =
            self.keys.cas.get(signer).ok_or_else(|| {
                Failure::Internal(format!("this controller has no key for {signer}"))
            })?;
        let der = public_key_der(public_key).map_err(Failure::Request)?;
        ca.issue_for_public_key(&issue, &der).map_err(|e| match e {
            kops_pki::PkiError::BadRequest { .. } => {
                Failure::Request(format!("cannot issue `{name}`: {e}"))
            }
            e => Failure::Internal(format!("cannot issue `{name}`: {e}")),
        })
    }

    async fn node_config(&self, identity: &NodeIdentity) -> Result<NodeConfig, Failure> {
        let group = &identity.instance_group;
        let valid = !group.is_empty()
            && group.len() <= 253
            && group
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
            && !group.contains("..");
        if !valid {
            return Err(Failure::Internal(format!(
                "instance `{}` names `{group}`, not a valid instance group",
                identity.instance_id
            )));
        }
        let key = format!("igconfig/node/{group}/nodeupconfig.yaml");
        let bytes = self
            .config_store
            .read(&key)
            .await
            .map_err(|e| Failure::Internal(format!("cannot read the node config: {e}")))?
            .ok_or_else(|| {
                Failure::Internal(format!(
                    "no node config at `{}`",
                    self.config_store.url_of(&key)
                ))
            })?;
        let mut node_secrets = BTreeMap::new();
        if let Some(store) = &self.secret_store {
            if let Ok(Some(bytes)) = store.read("dockerconfig").await {
                let url = store.url_of("dockerconfig");
                let secret = kops_pki::Secret::parse(&url, &bytes).map_err(|e| {
                    Failure::Internal(format!("cannot read secret dockerconfig: {e}"))
                })?;
                node_secrets.insert("dockerconfig".to_string(), secret.data);
            }
        }
        Ok(NodeConfig {
            nodeup_config: String::from_utf8_lossy(&bytes).into_owned(),
            node_secrets,
        })
    }
}

/// The identity an AWS token claims before STS says whose it is: the
/// access key of its signature's credential (one instance's role session).
fn claimed_identity(authorization: &str) -> Option<String> {
    if !authorization.starts_with(kops_bootstrap::protocol::AWS_TOKEN_PREFIX_V1) {
        return None;
    }
    let headers = kops_bootstrap::protocol::TokenHeaders::decode(authorization).ok()?;
    let signed = headers.get("authorization")?;
    let credential = signed.split("Credential=").nth(1)?;
    let key = credential.split('/').next()?;
    (!key.is_empty() && key.len() <= 128).then(|| format!("aws:{key}"))
}

/// Why a verified node's request was not answered.
enum Failure {
    /// The request asks for something this controller does not give: the
    /// node is told why (400).
    Request(String),
    /// Something on the controller's side (its store, its keys): logged,
    /// the node gets "internal error" (500) and tries again.
    Internal(String),
}

/// How long a node's certificates are valid: 455 days plus up to 30 days
/// spread by node name (so a fleet's certificates don't expire together),
/// as kops does (FNV-1 32-bit of the name).
pub fn validity_hours(node_name: &str) -> u64 {
    let mut hash: u32 = 0x811c9dc5;
    for byte in node_name.bytes() {
        hash = hash.wrapping_mul(0x01000193);
        hash ^= u32::from(byte);
    }
    455 * 24 + u64::from(hash % (30 * 24))
}

/// A public key PEM (kops labels it `RSA PUBLIC KEY` around a DER
/// SubjectPublicKeyInfo; `PUBLIC KEY` is accepted too) → DER.
fn public_key_der(text: &str) -> Result<Vec<u8>, String> {
    let block = text.trim();
    let body: String = block
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect::<Vec<_>>()
        .concat();
    let first = block.lines().next().unwrap_or_default();
    if first != "-----BEGIN RSA PUBLIC KEY-----" && first != "-----BEGIN PUBLIC KEY-----" {
        return Err(format!("unexpected public key type `{first}`"));
    }
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(body)
        .map_err(|e| format!("the public key is not PEM: {e}"))
}

fn reply(status: StatusCode, text: &str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(text.to_string())));
    *response.status_mut() = status;
    response
}

/// A TLS acceptor for a certificate chain and key in PEM files.
pub fn tls_acceptor(cert_path: &str, key_path: &str) -> Result<TlsAcceptor, StartError> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};

    let cert_pem = read(cert_path)?;
    let key_pem = read(key_path)?;
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| StartError::Invalid {
            path: cert_path.to_string(),
            reason: e.to_string(),
        })?;
    let key =
        PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| StartError::Invalid {
            path: key_path.to_string(),
            reason: e.to_string(),
        })?;
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS12, &rustls::version::TLS13])
    .map_err(|e| StartError::Tls(e.to_string()))?
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .map_err(|e| StartError::Tls(e.to_string()))?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Binds the configured address. `[::]:<port>` is one socket for IPv6
/// and IPv4 (IPv4 peers appear as `::ffff:a.b.c.d`); on a host without
/// IPv6 it falls back to `0.0.0.0:<port>`.
pub async fn listen(addr: &str) -> Result<TcpListener, StartError> {
    let failed = |e: std::io::Error| StartError::Listen {
        addr: addr.to_string(),
        reason: e.to_string(),
    };
    let Some(port) = addr.strip_prefix("[::]:") else {
        return TcpListener::bind(addr).await.map_err(failed);
    };
    let port: u16 = port.parse().map_err(|_| StartError::Listen {
        addr: addr.to_string(),
        reason: "the port is not a number".into(),
    })?;
    match dual_stack(port) {
        Ok(listener) => Ok(listener),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => Err(failed(e)),
        Err(e) => {
            tracing::info!("no IPv6 here ({e}); listening on IPv4 only");
            TcpListener::bind(("0.0.0.0", port)).await.map_err(failed)
        }
    }
}

fn dual_stack(port: u16) -> std::io::Result<TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::IPV6, Type::STREAM, Some(Protocol::TCP))?;
    socket.set_only_v6(false)?;
    socket.set_reuse_address(true)?;
    socket.set_nonblocking(true)?;
    let addr = SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, port));
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    TcpListener::from_std(socket.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validity_is_455_days_plus_a_spread() {
        let h = validity_hours("i-0123456789abcdef0");
        assert!((455 * 24..485 * 24).contains(&h));
        assert_eq!(h, validity_hours("i-0123456789abcdef0"));
    }

    #[tokio::test]
    async fn every_interface_means_ipv6_and_ipv4() {
        let listener = listen("[::]:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        for peer in ["127.0.0.1", "::1"] {
            let connect = tokio::net::TcpStream::connect((peer, port));
            let (connected, accepted) = tokio::join!(connect, listener.accept());
            connected.unwrap_or_else(|e| panic!("{peer}: {e}"));
            accepted.unwrap();
        }
    }

    #[test]
    fn keypair_ids_file_reads() {
        let ids = serde_yaml_ids("kubernetes-ca: \"6982820025135291416230495506\"\n").unwrap();
        assert_eq!(ids["kubernetes-ca"], "6982820025135291416230495506");
    }
}
