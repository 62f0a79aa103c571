//! A worker's bootstrap through kops-controller (the boot config's
//! `ConfigServer`): the node config and the node's certificates come from
//! the control plane, never from the state store.
//!
//! Keys are made on the node and never leave it: kops-controller receives
//! the public keys and returns certificates. A certificate already on disk
//! that is still good (signed by the cluster CA, far from expiry) is kept
//! and not asked for again, so a second run only fetches the node config.
//! The control plane may not be up yet when a worker boots: transient
//! failures (no answer, 5xx) are retried until `Options::bootstrap_timeout`.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use kops_aws_identity::{default_credentials, AwsBootstrap};
use kops_bootstrap::client::{BootstrapClient, ClientError};
use kops_bootstrap::protocol::{BootstrapRequest, BOOTSTRAP_API_VERSION};
use kops_pki::IssueRequest;

use super::files::under;
use super::pki::still_good;
use super::NodeupError;
use crate::bootstrap::{BootConfig, ConfigServer};
use crate::config::NodeupConfig;

/// The certificates a worker asks kops-controller for: name, where the
/// certificate goes, where its key goes, and a request describing it (to
/// decide whether the one on disk is still good). kube-proxy's only when
/// the node runs kube-proxy.
pub fn wanted_certificates(
    node_name: &str,
    config: &NodeupConfig,
) -> Vec<(&'static str, &'static str, &'static str, IssueRequest)> {
    let mut wanted = vec![(
        "kubelet",
        "/var/lib/kubelet/pki/kubelet-client.crt",
        "/var/lib/kubelet/pki/kubelet-client.key",
        IssueRequest::client(&format!("system:node:{node_name}"), Some("system:nodes")),
    )];
    if config.kube_proxy.is_some() {
        wanted.push((
            "kube-proxy",
            "/var/lib/kube-proxy/client.crt",
            "/var/lib/kube-proxy/client.key",
            IssueRequest::client("system:kube-proxy", None),
        ));
    }
    wanted
}

/// What kops-controller gave the node.
pub struct Bootstrapped {
    /// The group's node config, checked against the boot config's hash.
    pub config: NodeupConfig,
    /// Certificate path → (certificate, key), PEM.
    pub issued: BTreeMap<String, (String, String)>,
    /// Secrets the node may have (`dockerconfig`).
    pub node_secrets: BTreeMap<String, Vec<u8>>,
}

/// Where a worker's bootstrap runs.
pub struct Target<'a> {
    pub boot: &'a BootConfig,
    pub server: &'a ConfigServer,
    pub root: &'a Path,
    pub node_name: &'a str,
    pub region: &'a str,
    pub timeout: Duration,
    pub retry_delay: Duration,
    pub identity: Identity,
}

/// How the node proves which instance it is.
pub enum Identity {
    /// A token signed with the instance role's credentials.
    Aws,
    /// A token signed by the instance's vTPM attestation key (or its stand-in).
    Gce {
        instance: kops_bootstrap::gce::token::InstanceRef,
        signer: std::sync::Arc<dyn kops_bootstrap::gce::token::Signer>,
    },
    /// The VM's BIOS UUID and an HMAC keyed with its one-time token
    /// ([`kops_vsphere::proof`]): one request only.
    Vsphere { bios_uuid: String, token: String },
    /// A machine enrolled with `kops toolbox enroll` (bare metal): a token
    /// signed with the machine key `toolbox enroll` made on it, naming its
    /// `Host` object (kops-controller's `hostkey`).
    HostKey {
        host: String,
        key: std::sync::Arc<kops_bootstrap::hostkey::MachineKey>,
    },
}

/// Asks kops-controller for the node config (checked against the hash the
/// boot config pins), then for the certificates not already on disk, as
/// kops' nodeup does (two requests: which certificates a node needs
/// depends on its config).
pub async fn bootstrap(target: &Target<'_>) -> Result<Bootstrapped, NodeupError> {
    let client = BootstrapClient::new(
        &target.boot.cluster_name,
        target.region,
        &target.server.servers,
        &target.server.ca_certificates,
        &target.server.tls_server_name,
    )
    .map_err(bootstrap_error)?;

    if matches!(target.identity, Identity::Vsphere { .. }) {
        return bootstrap_once(&client, target).await;
    }
    let config_request = BootstrapRequest {
        api_version: BOOTSTRAP_API_VERSION.to_string(),
        include_node_config: true,
        ..Default::default()
    };
    let response = ask(&client, target, &config_request).await?;
    let (config, node_config) = checked_node_config(target, response.node_config)?;

    let mut issued = BTreeMap::new();
    let mut keys = BTreeMap::new();
    let mut cert_request = BootstrapRequest {
        api_version: BOOTSTRAP_API_VERSION.to_string(),
        ..Default::default()
    };
    for (name, cert_path, key_path, wanted) in wanted_certificates(target.node_name, &config) {
        let cert = std::fs::read_to_string(under(target.root, cert_path)).ok();
        let key = std::fs::read_to_string(under(target.root, key_path)).ok();
        if let (Some(cert), Some(key)) = (cert, key) {
            if still_good(&cert, &target.server.ca_certificates, &wanted) {
                issued.insert(cert_path.to_string(), (cert, key));
                continue;
            }
        }
        ask_for(&mut cert_request, &mut keys, name, cert_path)?;
    }
    if !keys.is_empty() {
        if let Some(id) = config.keypair_ids.get(kops_pki::KUBERNETES_CA) {
            cert_request
                .keypair_ids
                .insert(kops_pki::KUBERNETES_CA.to_string(), id.clone());
        }
        let response = ask(&client, target, &cert_request).await?;
        take_issued(&response, keys, &mut issued)?;
    }
    Ok(Bootstrapped {
        config,
        issued,
        node_secrets: node_config.node_secrets,
    })
}

/// A new key for certificate `name`: its public half goes in `request`,
/// its private half in `keys` (with where the certificate goes).
fn ask_for(
    request: &mut BootstrapRequest,
    keys: &mut BTreeMap<&'static str, (&'static str, String)>,
    name: &'static str,
    cert_path: &'static str,
) -> Result<(), NodeupError> {
    let (private_key, public_der) = kops_pki::new_private_key()?;
    request.certs.insert(
        name.to_string(),
        kops_bootstrap::protocol::public_key_pem(&public_der),
    );
    keys.insert(name, (cert_path, private_key));
    Ok(())
}

/// The certificates of `response` for the keys asked with, by path.
fn take_issued(
    response: &kops_bootstrap::protocol::BootstrapResponse,
    keys: BTreeMap<&'static str, (&'static str, String)>,
    issued: &mut BTreeMap<String, (String, String)>,
) -> Result<(), NodeupError> {
    for (name, (cert_path, private_key)) in keys {
        let cert = response
            .certs
            .get(name)
            .ok_or_else(|| NodeupError::NotIssued {
                path: cert_path.to_string(),
            })?;
        issued.insert(cert_path.to_string(), (cert.clone(), private_key));
    }
    Ok(())
}

/// The node config kops-controller sent, checked against the hash the
/// boot config pins.
fn checked_node_config(
    target: &Target<'_>,
    node_config: Option<kops_bootstrap::protocol::NodeConfig>,
) -> Result<(NodeupConfig, kops_bootstrap::protocol::NodeConfig), NodeupError> {
    let node_config = node_config.ok_or_else(|| NodeupError::Bootstrap {
        reason: "kops-controller sent no node config".into(),
    })?;
    let url = format!(
        "{} (node config of {})",
        target
            .server
            .servers
            .first()
            .map(String::as_str)
            .unwrap_or("kops-controller"),
        target.boot.instance_group_name
    );
    let config = super::checked_config(target.boot, &url, node_config.nodeup_config.as_bytes())?;
    Ok((config, node_config))
}

/// On vSphere a VM's token proves one request: the node config and every
/// certificate a worker may need are asked for at once (kube-proxy's is
/// dropped when the config runs no kube-proxy).
async fn bootstrap_once(
    client: &BootstrapClient,
    target: &Target<'_>,
) -> Result<Bootstrapped, NodeupError> {
    let mut request = BootstrapRequest {
        api_version: BOOTSTRAP_API_VERSION.to_string(),
        include_node_config: true,
        ..Default::default()
    };
    let everything = NodeupConfig {
        kube_proxy: Some(Default::default()),
        ..Default::default()
    };
    let mut keys = BTreeMap::new();
    for (name, cert_path, _, _) in wanted_certificates(target.node_name, &everything) {
        ask_for(&mut request, &mut keys, name, cert_path)?;
    }
    let response = ask(client, target, &request).await?;
    let (config, node_config) = checked_node_config(target, response.node_config.clone())?;
    let needed: Vec<&str> = wanted_certificates(target.node_name, &config)
        .into_iter()
        .map(|(name, ..)| name)
        .collect();
    keys.retain(|name, _| needed.contains(name));
    let mut issued = BTreeMap::new();
    take_issued(&response, keys, &mut issued)?;
    Ok(Bootstrapped {
        config,
        issued,
        node_secrets: node_config.node_secrets,
    })
}

/// One request, retried while the control plane does not answer.
async fn ask(
    client: &BootstrapClient,
    target: &Target<'_>,
    request: &BootstrapRequest,
) -> Result<kops_bootstrap::protocol::BootstrapResponse, NodeupError> {
    let started = Instant::now();
    let mut delay = target.retry_delay;
    loop {
        let answer = match &target.identity {
            Identity::Aws => {
                let credentials = default_credentials(target.region)
                    .await
                    .map_err(bootstrap_error)?;
                client.bootstrap(request, &credentials).await
            }
            Identity::Gce { instance, signer } => {
                client
                    .bootstrap_gce(request, instance, signer.as_ref())
                    .await
            }
            Identity::HostKey { host, key } => {
                client
                    .bootstrap_with(request, &|body| {
                        kops_bootstrap::hostkey::create_token(
                            host,
                            key,
                            body,
                            std::time::SystemTime::now(),
                        )
                    })
                    .await
            }
            Identity::Vsphere { bios_uuid, token } => {
                client
                    .bootstrap_with(request, &|body| {
                        Ok(kops_vsphere::proof::authorization(bios_uuid, token, body))
                    })
                    .await
            }
        };
        match answer {
            Ok(response) => return Ok(response),
            Err(e) if e.is_transient() && started.elapsed() + delay < target.timeout => {
                tracing::warn!("kops-controller not ready ({e}); retrying in {delay:?}");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(30));
            }
            Err(e) if e.already_registered() => return Err(NodeupError::AlreadyRegistered),
            Err(e) => return Err(bootstrap_error(e)),
        }
    }
}

fn bootstrap_error(e: ClientError) -> NodeupError {
    NodeupError::Bootstrap {
        reason: e.to_string(),
    }
}

/// The channel addon holding kops-controller's configuration.
const KOPS_CONTROLLER_ADDON: &str = kops_api::switch::KOPS_CONTROLLER_ADDON;

/// kops-controller's options on a control-plane node: the `config.yaml` of
/// the `kops-controller` ConfigMap in the cluster's kops-controller addon
/// (as kops and kops-rs both write it, so the node worker roles and region
/// are the ones `update cluster` knew), or, when the state store has none,
/// the defaults for this cluster (workers of the role `nodes.<cluster>`).
pub async fn controller_options(
    loaded: &super::Loaded,
    region: Option<&str>,
) -> Result<kops_bootstrap::config::Options, NodeupError> {
    let base = loaded.config_base.trim_end_matches('/');
    let cluster = &loaded.config.cluster_name;
    if let Some(options) = controller_options_from_addon(base).await? {
        return Ok(options);
    }
    if loaded.boot.cloud_provider == kops_vsphere::CLOUD {
        return vsphere_controller_options(base, cluster).await;
    }
    if loaded.boot.cloud_provider == kops_bootstrap::config::METAL {
        // kops' options for a bare-metal cluster: enrolled machines only.
        return Ok(kops_bootstrap::config::Options::for_metal(
            cluster,
            base,
            &format!("{base}/secrets"),
        ));
    }
    tracing::warn!(
        "no kops-controller configuration in {base}/addons; using the defaults for {cluster}"
    );
    Ok(kops_bootstrap::config::Options::for_aws(
        cluster,
        base,
        &format!("{base}/secrets"),
        region.unwrap_or_default(),
        vec![format!("nodes.{cluster}")],
    ))
}

/// kops-controller's options on vSphere: the vCenter and datacenter of the
/// cluster's completed spec (credentials are never there: the controller
/// reads them from a file mounted on the node or from a Secret).
async fn vsphere_controller_options(
    base: &str,
    cluster: &str,
) -> Result<kops_bootstrap::config::Options, NodeupError> {
    let store = kops_state::open(base).await?;
    let key = "cluster-completed.spec";
    let bytes = store
        .read(key)
        .await?
        .ok_or_else(|| NodeupError::MissingConfig {
            url: store.url_of(key),
        })?;
    let spec: kops_api::Cluster =
        serde_yaml_ng::from_slice(&bytes).map_err(|e| NodeupError::Bootstrap {
            reason: format!("{}: {e}", store.url_of(key)),
        })?;
    let cloud = spec.spec.cloud_config.unwrap_or_default();
    let mut options = kops_bootstrap::config::Options::for_vsphere(
        cluster,
        base,
        &format!("{base}/secrets"),
        &cloud.vsphere_server.unwrap_or_default(),
        &cloud.vsphere_datacenter.unwrap_or_default(),
    );
    // vCenter's certificate is trusted as the CLI trusts it.
    if let Some(vsphere) = options.server.provider.vsphere.as_mut() {
        vsphere.thumbprint = cloud.vsphere_thumbprint;
        vsphere.ca_certificate = cloud.vsphere_ca_certificate;
    }
    Ok(options)
}

async fn controller_options_from_addon(
    base: &str,
) -> Result<Option<kops_bootstrap::config::Options>, NodeupError> {
    let store = kops_state::open(base).await?;
    let Some(channel) = store.read("addons/bootstrap-channel.yaml").await? else {
        return Ok(None);
    };
    let channel = String::from_utf8_lossy(&channel);
    let Ok(channel) = kops_channels::Channel::parse("bootstrap-channel.yaml", &channel) else {
        return Ok(None);
    };
    let Some(addon) = channel
        .spec
        .addons
        .iter()
        .find(|a| a.name == KOPS_CONTROLLER_ADDON)
    else {
        return Ok(None);
    };
    let key = format!("addons/{}", addon.manifest.trim_start_matches("./"));
    let Some(manifest) = store.read(&key).await? else {
        return Ok(None);
    };
    let text = String::from_utf8_lossy(&manifest);
    for document in serde_yaml_ng::Deserializer::from_str(&text) {
        let Ok(value) = <serde_json::Value as serde::Deserialize>::deserialize(document) else {
            continue;
        };
        let is_config = value.get("kind").and_then(|k| k.as_str()) == Some("ConfigMap")
            && value.pointer("/metadata/name").and_then(|n| n.as_str()) == Some("kops-controller");
        if let Some(config) = value
            .pointer("/data/config.yaml")
            .and_then(|c| c.as_str())
            .filter(|_| is_config)
        {
            let mut options = kops_bootstrap::config::Options::parse(config).map_err(|reason| {
                NodeupError::Bootstrap {
                    reason: format!(
                        "{}: kops-controller's config.yaml: {reason}",
                        store.url_of(&key)
                    ),
                }
            })?;
            // kops' addon (its DaemonSet) is in the channel: the control
            // plane is kops', or between kops and kops-rs, and workers
            // booted by kops' nodeup (no audience in their tokens) may ask
            // this controller.
            options.accept_kops_node_tokens = kops_api::switch::runs_in_a_pod(&text);
            return Ok(Some(options));
        }
    }
    Ok(None)
}
