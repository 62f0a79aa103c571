//! A machine enrolled with `kops toolbox enroll` joins a bare-metal
//! cluster through kops-controller: the controller runs with kops' metal
//! options (`server.pki`, no cloud) over TLS on loopback and reads `Host`
//! objects from kops-testkit's Kubernetes API server; nodeup on the machine
//! reads its boot config (`cloudProvider: metal`, kops-controller as its
//! config server) and signs its requests with the machine key enroll made
//! (`/etc/kubernetes/kops/pki/machine/private.pem` under its root). The
//! machine gets its certificates, named after its `Host`, and the node
//! config of the `Host`'s instance group.
//!
//! Refused, each with one log line and nothing issued: a machine whose key
//! is not its `Host`'s, a machine without a `Host`, a replayed token; and,
//! before any `Host` is read: a token for another audience, a stale one, an
//! oversized one.

mod common;

use kops_controller::test_support::{self, ServingPki};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use kops_bootstrap::client::{BootstrapClient, ClientError};
use kops_bootstrap::hostkey::{create_token, MachineKey, MACHINE_PRIVATE_KEY};
use kops_bootstrap::protocol::{self, BootstrapRequest, BOOTSTRAP_API_VERSION};
use kops_nodeup::agent::{self, NodeupError};
use kops_nodeup::bootstrap::{BootConfig, ConfigServer};
use kops_pki::CertificateAuthority;
use kops_testkit::kube_api::FakeApi;
use kops_testkit::logs::Logs;
use serde_json::json;

const CLUSTER: &str = "metal.k8s.local";
const GROUP: &str = "nodes-main";
const HOSTS: &str = "apis/kops.k8s.io/v1alpha2";

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// kops' `Host` CRD as the API serves it, and a `Host` for a machine.
fn serve_hosts(api: &FakeApi) {
    api.serve_crd(&json!({
        "spec": {
            "group": "kops.k8s.io",
            "names": {"plural": "hosts", "kind": "Host"},
            "scope": "Namespaced",
            "versions": [{"name": "v1alpha2", "served": true}],
        }
    }));
}

fn put_host(api: &FakeApi, name: &str, public_key: &str) {
    api.put(
        HOSTS,
        "hosts",
        "kops-system",
        name,
        json!({
            "apiVersion": "kops.k8s.io/v1alpha2",
            "kind": "Host",
            "metadata": {"name": name, "namespace": "kops-system"},
            "spec": {"instanceGroup": GROUP, "publicKey": public_key},
        }),
    );
}

/// A machine as enroll leaves it: its key under `root`, its boot config.
struct Machine {
    root: PathBuf,
    conf: PathBuf,
}

#[test]
fn an_enrolled_machine_joins_and_impostors_are_refused() {
    common::run_with_logs(joins);
}

/// Forged tokens that pass every cheap check (fresh, kops' audience, the
/// body's hash, a valid name) need a Host read each: the reads are limited
/// as STS calls are (8 at once, 10 a second, bursts of 40), and one
/// address gets its fair share first; beyond, the caller is told to retry
/// (429 from the per-address gate, 503 from the global limit). Nothing is
/// held in the replay cache afterwards.
#[test]
fn forged_tokens_cannot_flood_the_api() {
    common::run_with_logs(flood);
}

async fn flood(logs: Logs) {
    let tmp = tempfile::tempdir().unwrap();
    let plane = control_plane(tmp.path()).await;
    let (key, _) = MachineKey::generate().unwrap();
    let key = Arc::new(key);
    let body = Arc::new(serde_json::to_vec(&request()).unwrap());
    let client = Arc::new(plane.client());
    plane.api.take_requests();
    let started = std::time::Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for worker in 0..16 {
        let (client, key, body, url) =
            (client.clone(), key.clone(), body.clone(), plane.url.clone());
        tasks.spawn(async move {
            let mut statuses = Vec::new();
            for i in (worker..400).step_by(16) {
                let token =
                    create_token(&format!("h-{i}"), &key, &body, SystemTime::now()).unwrap();
                statuses.push(refusal(client.post(&url, &token, &body).await).0);
            }
            statuses
        });
    }
    let mut statuses = Vec::new();
    while let Some(done) = tasks.join_next().await {
        statuses.extend(done.unwrap());
    }
    let elapsed = started.elapsed().as_secs_f64();
    let reads = plane
        .api
        .take_requests()
        .iter()
        .filter(|r| r.contains("/hosts/"))
        .count();
    let unknown = statuses.iter().filter(|s| **s == 403).count();
    let busy = statuses.iter().filter(|s| **s == 503 || **s == 429).count();
    println!(
        "400 forged machine tokens in {elapsed:.1}s: {reads} Host reads, {unknown} refused (no Host), {busy} told to retry (429/503)"
    );
    assert_eq!(unknown + busy, 400);
    assert_eq!(reads, unknown, "each refusal is one read");
    assert!(
        (reads as f64) <= 40.0 + 10.0 * elapsed + 1.0,
        "{reads} reads in {elapsed:.1}s"
    );
    assert!(busy > 0, "the limit was reached");
    assert_eq!(
        plane.controller.host_keys().unwrap().replay_entries(),
        0,
        "refused tokens are not held"
    );
    assert_eq!(logs.count("no Host `kops-system/h-"), unknown);
}

/// The control plane: kops-controller with kops' bare-metal options
/// (its PKI, the group's node config in its config store), serving over
/// TLS on loopback, reading Hosts from the test API server.
struct ControlPlane {
    controller: Arc<kops_controller::Controller>,
    api: FakeApi,
    url: String,
    ca: CertificateAuthority,
    node_config: String,
}

async fn control_plane(tmp: &Path) -> ControlPlane {
    let pki = ServingPki::write(&tmp.join("pki"), CLUSTER);
    let state = tmp.join("config");
    let node_config = format!(
        "ClusterName: {CLUSTER}\nKubeProxy:\n  enabled: true\nKubeletConfig:\n  nodeLabels:\n    node-role.kubernetes.io/node: \"\"\n"
    );
    write(
        &state.join(format!("igconfig/node/{GROUP}/nodeupconfig.yaml")),
        &node_config,
    );
    let mut options =
        kops_controller::Options::for_metal(CLUSTER, &format!("file://{}", state.display()), "");
    pki.configure(&mut options);
    let controller = Arc::new(
        kops_controller::build(options)
            .await
            .unwrap_or_else(|e| panic!("kops-controller: {e}")),
    );
    // Its Kubernetes client, as `run` makes it from its kubeconfig.
    let api = FakeApi::start();
    serve_hosts(&api);
    let kubeconfig = api.write_kubeconfig(tmp);
    let client = kops_controller::kube_client(&kubeconfig).await.unwrap();
    controller
        .host_keys()
        .expect("server.pki turns it on")
        .read_hosts_from(kops_controller::hostkey::hosts_api(client));
    let url = test_support::serve(controller.clone()).await;
    ControlPlane {
        controller,
        api,
        url,
        ca: pki.ca,
        node_config,
    }
}

impl ControlPlane {
    /// A node's client of this controller.
    fn client(&self) -> BootstrapClient {
        BootstrapClient::new(
            CLUSTER,
            "",
            std::slice::from_ref(&self.url),
            self.ca.certificate_pem(),
            &protocol::audience(CLUSTER),
        )
        .unwrap()
    }
}

async fn joins(logs: Logs) {
    let tmp = tempfile::tempdir().unwrap();
    let plane = control_plane(tmp.path()).await;
    let (api, url, ca) = (&plane.api, &plane.url, &plane.ca);
    let host_keys = plane.controller.host_keys().unwrap();

    // A machine as `toolbox enroll` leaves it: its key pair, its Host (for
    // a worker), its boot config naming kops-controller.
    let boot = BootConfig {
        cloud_provider: "metal".into(),
        cluster_name: CLUSTER.into(),
        config_server: Some(ConfigServer {
            ca_certificates: ca.certificate_pem().to_string(),
            servers: vec![url.clone()],
            tls_server_name: protocol::audience(CLUSTER),
        }),
        instance_group_name: GROUP.into(),
        instance_group_role: "Node".into(),
        nodeup_config_hash: kops_nodeup::config::config_hash(plane.node_config.as_bytes()),
        ..Default::default()
    };
    let machine = |name: &str, registered_key: Option<&str>| -> (Machine, Arc<MachineKey>) {
        let (key, private_pem) = MachineKey::generate().unwrap();
        let root = tmp.path().join(name);
        write(
            &root.join(MACHINE_PRIVATE_KEY.trim_start_matches('/')),
            &private_pem,
        );
        let conf = root.join("opt/kops/conf/kube_env.yaml");
        write(&conf, &boot.to_yaml());
        if let Some(public) = registered_key {
            put_host(api, name, public);
        }
        (Machine { root, conf }, Arc::new(key))
    };
    let nodeup = |m: &Machine, name: &str| {
        let mut options = agent::Options::new(&m.conf, &m.root);
        options.node_name = Some(name.to_string());
        options.bootstrap_timeout = Duration::from_secs(5);
        options.retry_delay = Duration::from_millis(100);
        options
    };
    let refused = |result: Result<agent::Joined, NodeupError>| match result {
        Err(NodeupError::Bootstrap { reason }) => reason,
        Err(e) => panic!("expected a refusal, got {e}\n{}", logs.text()),
        Ok(_) => panic!("was accepted\n{}", logs.text()),
    };

    // 1. An enrolled worker joins: certificates for its Host's name, the
    //    node config of its Host's group.
    let (m1, m1_key) = machine("m1", None);
    put_host(api, "m1", m1_key.public_pem());
    api.take_requests();
    let joined = agent::join(&nodeup(&m1, "m1"))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", logs.text()));
    assert_eq!(joined.node_name, "m1");
    let issued = joined.loaded.issued.expect("certificates");
    let paths: Vec<&str> = issued.keys().map(String::as_str).collect();
    assert_eq!(
        paths,
        [
            "/var/lib/kube-proxy/client.crt",
            "/var/lib/kubelet/pki/kubelet-client.crt"
        ]
    );
    let kubelet = &issued["/var/lib/kubelet/pki/kubelet-client.crt"].0;
    let subject = kops_pki::certificate_info(kubelet).unwrap().subject;
    assert!(subject.contains("system:node:m1"), "{subject}");
    assert_eq!(
        logs.count(&format!("node m1 (instance group {GROUP}): issued")),
        2,
        "one line per request (node config, then certificates): {}",
        logs.text()
    );
    // The controller read the Host by name, once per request.
    let reads: Vec<String> = api
        .take_requests()
        .into_iter()
        .filter(|r| r.contains("/hosts/"))
        .collect();
    assert_eq!(
        reads,
        [
            format!("GET /{HOSTS}/namespaces/kops-system/hosts/m1"),
            format!("GET /{HOSTS}/namespaces/kops-system/hosts/m1"),
        ]
    );
    let held = host_keys.replay_entries();
    assert_eq!(held, 2, "the two accepted tokens are held");

    // 2. A machine whose key is not its Host's (its Host holds another
    //    machine's key): refused.
    let (m2, _) = machine("m2", Some(m1_key.public_pem()));
    let reason = refused(agent::join(&nodeup(&m2, "m2")).await);
    assert!(reason.contains("403"), "{reason}");
    assert_eq!(
        logs.count(
            "refused: the token's signature does not verify with the public key of Host `kops-system/m2`"
        ),
        1,
        "{}",
        logs.text()
    );

    // 3. A machine without a Host (never enrolled into this cluster).
    let (m3, _) = machine("m3", None);
    refused(agent::join(&nodeup(&m3, "m3")).await);
    assert_eq!(
        logs.count("refused: no Host `kops-system/m3`: the machine was not enrolled"),
        1,
        "{}",
        logs.text()
    );
    assert_eq!(
        host_keys.replay_entries(),
        held,
        "refused tokens are not held"
    );

    // 4. A replay: the same token, sent again.
    let client = plane.client();
    let body = serde_json::to_vec(&request()).unwrap();
    let token = create_token("m1", &m1_key, &body, SystemTime::now()).unwrap();
    client
        .post(url, &token, &body)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", logs.text()));
    let (status, _) = refusal(client.post(url, &token, &body).await);
    assert_eq!(status, 403);
    assert_eq!(
        logs.count("refused: the token was already used (replay)"),
        1,
        "{}",
        logs.text()
    );

    // 5. Checked before any Host is read: another audience, a stale token,
    //    an oversized one; each one line, no API request.
    api.take_requests();
    let forged = |data: serde_json::Value| {
        use base64::Engine;
        let engine = base64::engine::general_purpose::STANDARD;
        let data = serde_json::to_vec(&data).unwrap();
        let signature = m1_key.sign(&data).unwrap();
        let token = json!({"signature": engine.encode(signature), "data": engine.encode(data)});
        format!("x-pki-tpm {}", engine.encode(token.to_string()))
    };
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let hash = {
        use base64::Engine;
        use sha2::Digest;
        base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(&body))
    };
    let cases = [
        (
            forged(
                json!({"instance": "m1", "requestHash": hash, "timestamp": now, "audience": "another"}),
            ),
            "refused: the token is for `another`",
        ),
        (
            forged(
                json!({"instance": "m1", "requestHash": hash, "timestamp": now - 3600, "audience": "kops.k8s.io/node-bootstrap"}),
            ),
            "outside the 5 minutes accepted",
        ),
        (
            format!("x-pki-tpm {}", "A".repeat(20_000)),
            "refused: malformed token: the token is 20010 bytes",
        ),
    ];
    for (token, line) in cases {
        let (status, _) = refusal(client.post(url, &token, &body).await);
        assert_eq!(status, 403, "{line}");
        assert_eq!(logs.count(line), 1, "{line}\n{}", logs.text());
    }
    assert!(
        api.take_requests().is_empty(),
        "no Host read for a token refused on its claims"
    );
    assert_eq!(
        logs.count("issued"),
        3,
        "nothing issued to the refused: {}",
        logs.text()
    );
}

fn request() -> BootstrapRequest {
    let (_, public_key) = kops_pki::new_private_key().unwrap();
    BootstrapRequest {
        api_version: BOOTSTRAP_API_VERSION.to_string(),
        certs: BTreeMap::from([(
            "kubelet".to_string(),
            kops_bootstrap::protocol::public_key_pem(&public_key),
        )]),
        ..Default::default()
    }
}

fn refusal(result: Result<protocol::BootstrapResponse, ClientError>) -> (u16, String) {
    match result {
        Err(ClientError::Refused {
            status, message, ..
        }) => (status, message),
        Err(e) => panic!("expected a refusal, got {e}"),
        Ok(_) => panic!("was accepted"),
    }
}
