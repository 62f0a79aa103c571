//! One cluster's kops-controller on loopback: a CA and serving
//! certificate made here, node configs in a `file://` state store, moto
//! as STS and EC2, and instances of the cluster's groups.

use kops_controller::test_support::ServingPki;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::SystemTime;

use aws_config::{BehaviorVersion, Region};
use aws_sdk_ec2::config::Credentials;
use kops_bootstrap::client::BootstrapClient;
use kops_bootstrap::config::Timeouts;
use kops_bootstrap::protocol::{self, BootstrapRequest, BOOTSTRAP_API_VERSION};
use kops_controller::{Controller, Options};
pub use kops_testkit::logs::Logs;

pub const REGION: &str = "us-east-1";
pub const ACCOUNT: &str = "123456789012";
pub const WORKERS: &str = "nodes-us-east-1a";
pub const CONTROL_PLANE: &str = "control-plane-us-east-1a";

/// The controller's log lines, captured (one subscriber per process).
fn logs() -> Logs {
    static LOGS: OnceLock<Logs> = OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = Logs::default();
        let writer = logs.clone();
        let _ = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .with_env_filter("kops_controller=info")
            .try_init();
        logs
    })
    .clone()
}

/// Runs `test` against moto on a two-thread runtime (the controller and
/// its callers share this process); skipped without moto.
pub fn with_moto<F, Fut>(test: F)
where
    F: FnOnce(&'static kops_testkit::Moto) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let Some(moto) = kops_testkit::require_moto() else {
        return;
    };
    for (k, v) in moto.env() {
        std::env::set_var(k, v);
    }
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(test(moto));
}

/// Makes the AWS verifier of [`Cluster::start_with`].
pub type VerifierEdit =
    Box<dyn FnOnce(kops_controller::VerifierParts) -> kops_controller::AwsVerifier>;

pub struct Cluster {
    pub name: String,
    pub sdk: aws_config::SdkConfig,
    pub ec2: aws_sdk_ec2::Client,
    pub controller: Arc<Controller>,
    pub url: String,
    pub ca_pem: String,
    pub logs: Logs,
    pub tmp: tempfile::TempDir,
    image: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// A node config giving kubelet `labels`.
fn node_config(labels: &[&str]) -> String {
    let mut text = String::from("KubeletConfig:\n  nodeLabels:\n");
    for label in labels {
        text.push_str(&format!("    {label}: \"\"\n"));
    }
    text
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

impl Cluster {
    /// Starts `name`'s controller on 127.0.0.1.
    pub async fn start(moto: &kops_testkit::Moto, name: &str, enable_cloud_ipam: bool) -> Cluster {
        Cluster::start_with(moto, name, enable_cloud_ipam, None).await
    }

    /// [`Cluster::start`] with the AWS verifier made by `verifier` from
    /// what the controller would give it (its STS endpoint changed, its
    /// replay cache smaller).
    pub async fn start_with(
        moto: &kops_testkit::Moto,
        name: &str,
        enable_cloud_ipam: bool,
        verifier: Option<VerifierEdit>,
    ) -> Cluster {
        Cluster::start_full(moto, name, enable_cloud_ipam, verifier, Timeouts::default()).await
    }

    /// [`Cluster::start`] with shorter `timeouts` for slow clients (so a
    /// test sees each fire in a second or two).
    pub async fn start_timed(moto: &kops_testkit::Moto, name: &str, timeouts: Timeouts) -> Cluster {
        Cluster::start_full(moto, name, false, None, timeouts).await
    }

    async fn start_full(
        moto: &kops_testkit::Moto,
        name: &str,
        enable_cloud_ipam: bool,
        verifier: Option<VerifierEdit>,
        timeouts: Timeouts,
    ) -> Cluster {
        let logs = logs();
        let sdk = aws_config::defaults(BehaviorVersion::latest())
            .endpoint_url(moto.endpoint())
            .region(Region::new(REGION))
            .credentials_provider(Credentials::new("testing", "testing", None, None, "moto"))
            .load()
            .await;
        let ec2 = aws_sdk_ec2::Client::new(&sdk);
        let image = ec2.describe_images().send().await.unwrap().images()[0]
            .image_id()
            .unwrap()
            .to_string();

        let tmp = tempfile::tempdir().unwrap();
        let pki = ServingPki::write(&tmp.path().join("pki"), name);
        let ca = &pki.ca;
        let state = tmp.path().join("state").join(name);
        write(
            &state.join(format!("igconfig/node/{WORKERS}/nodeupconfig.yaml")),
            &node_config(&["node-role.kubernetes.io/node"]),
        );
        write(
            &state.join(format!(
                "igconfig/control-plane/{CONTROL_PLANE}/nodeupconfig.yaml"
            )),
            &node_config(&[
                "node-role.kubernetes.io/control-plane",
                "node.kubernetes.io/exclude-from-external-load-balancers",
            ]),
        );

        let mut options = Options::for_aws(
            name,
            &format!("file://{}", state.display()),
            "",
            REGION,
            vec![format!("nodes.{name}")],
        );
        options.enable_cloud_ipam = enable_cloud_ipam;
        options.timeouts = timeouts;
        pki.configure(&mut options);
        let controller = match verifier {
            None => kops_controller::build_with(options, &sdk)
                .await
                .unwrap_or_else(|e| panic!("kops-controller: {e}")),
            Some(edit) => {
                let parts = kops_controller::VerifierParts {
                    cluster: name.to_string(),
                    account: ACCOUNT.to_string(),
                    partition: "aws".to_string(),
                    nodes_roles: vec![format!("nodes.{name}")],
                    region: REGION.to_string(),
                    sts_url: kops_aws_identity::sts_url(REGION),
                    use_ip_based_node_names: false,
                    accept_kops_node_tokens: false,
                    ec2: aws_sdk_ec2::Client::new(&sdk),
                };
                let verifier = edit(parts);
                let keys = kops_controller::SigningKeys::load(
                    &options.server.ca_base_path,
                    &options.server.signing_cas,
                )
                .unwrap();
                Controller::new(options, Box::new(verifier), keys)
                    .await
                    .unwrap_or_else(|e| panic!("kops-controller: {e}"))
            }
        };
        let controller = Arc::new(controller);
        let tls = controller.tls().unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("https://{}/", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(controller.clone().serve(listener, tls, async {
            let _ = stopped.await;
        }));
        Cluster {
            name: name.to_string(),
            sdk,
            ec2,
            controller,
            url,
            ca_pem: ca.certificate_pem().to_string(),
            logs,
            tmp,
            image,
            stop: Some(stop),
        }
    }

    /// A running instance of `group`, tagged as this cluster's unless
    /// `stranger`.
    pub async fn instance(&self, group: &str, stranger: bool) -> aws_sdk_ec2::types::Instance {
        use aws_sdk_ec2::types::{ResourceType, Tag, TagSpecification};
        let mut spec = TagSpecification::builder()
            .resource_type(ResourceType::Instance)
            .tags(
                Tag::builder()
                    .key("kops.k8s.io/instancegroup")
                    .value(group)
                    .build(),
            );
        if !stranger {
            spec = spec.tags(
                Tag::builder()
                    .key("KubernetesCluster")
                    .value(&self.name)
                    .build(),
            );
        }
        let out = self
            .ec2
            .run_instances()
            .image_id(&self.image)
            .min_count(1)
            .max_count(1)
            .tag_specifications(spec.build())
            .send()
            .await
            .unwrap();
        let id = out.instances()[0].instance_id().unwrap().to_string();
        self.describe(&id).await
    }

    /// The instance as EC2 reports it now.
    pub async fn describe(&self, id: &str) -> aws_sdk_ec2::types::Instance {
        let out = self
            .ec2
            .describe_instances()
            .instance_ids(id)
            .send()
            .await
            .unwrap();
        out.reservations()[0].instances()[0].clone()
    }

    /// Credentials of the worker role for `instance` (EC2 names an
    /// instance profile's session after the instance).
    pub async fn worker_credentials(&self, instance: &str) -> Credentials {
        let sts = aws_sdk_sts::Client::new(&self.sdk);
        let out = sts
            .assume_role()
            .role_arn(format!("arn:aws:iam::{ACCOUNT}:role/nodes.{}", self.name))
            .role_session_name(instance)
            .send()
            .await
            .unwrap();
        let c = out.credentials().unwrap();
        Credentials::new(
            c.access_key_id(),
            c.secret_access_key(),
            Some(c.session_token().to_string()),
            None,
            "assumed",
        )
    }

    /// A node's client of this controller, as nodeup makes it.
    pub fn client(&self) -> BootstrapClient {
        BootstrapClient::new(
            &self.name,
            REGION,
            std::slice::from_ref(&self.url),
            &self.ca_pem,
            &protocol::audience(&self.name),
        )
        .unwrap()
    }

    /// A node's token for `body`, signed with `credentials`.
    pub fn token(&self, credentials: &Credentials, body: &[u8]) -> String {
        kops_aws_identity::create_token_v1(
            &kops_aws_identity::sts_url(REGION),
            REGION,
            credentials,
            SystemTime::now(),
            body,
            &protocol::audience(&self.name),
        )
        .unwrap()
    }
}

/// What a worker asks for: its kubelet certificate and its node config.
pub fn request() -> BootstrapRequest {
    let (_, public_key) = kops_pki::new_private_key().unwrap();
    BootstrapRequest {
        api_version: BOOTSTRAP_API_VERSION.to_string(),
        certs: BTreeMap::from([(
            "kubelet".to_string(),
            kops_bootstrap::protocol::public_key_pem(&public_key),
        )]),
        include_node_config: true,
        ..Default::default()
    }
}

/// A token with its headers changed by `edit` (name → values), encoded
/// again as a node would send it.
pub fn edit_token(token: &str, edit: impl FnOnce(&mut BTreeMap<String, Vec<String>>)) -> String {
    use base64::Engine;
    let engine = base64::engine::general_purpose::STANDARD;
    let json = engine
        .decode(token.strip_prefix(protocol::AWS_TOKEN_PREFIX_V1).unwrap())
        .unwrap();
    let mut headers: BTreeMap<String, Vec<String>> = serde_json::from_slice(&json).unwrap();
    edit(&mut headers);
    format!(
        "{}{}",
        protocol::AWS_TOKEN_PREFIX_V1,
        engine.encode(serde_json::to_vec(&headers).unwrap())
    )
}

/// This process's resident memory, from /proc/self/status (KiB).
pub fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// A TLS connector trusting only the PEM certificates of `ca_pem` (the
/// cluster's CA), for attackers that speak raw HTTP over TLS.
pub fn tls_client(ca_pem: &str) -> tokio_rustls::TlsConnector {
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pki_types::CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
}
