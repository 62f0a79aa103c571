//! A worker joins, end to end on this machine: moto is AWS (STS, EC2, IAM,
//! S3 as the state store, through the real SDK), `kops update cluster --yes` writes the keysets,
//! node configs and launch templates, the control-plane nodeup (under a
//! temp root) writes kops-controller's configuration, certificate and
//! signing key, kops-controller serves on loopback from exactly those
//! files, and a worker's nodeup, holding only credentials of its instance
//! role, gets its node config and certificates from it. openssl checks the
//! certificates against kubernetes-ca.
//!
//! Refused, with a log line and nothing issued: a request signed by the
//! control-plane role, by another cluster's worker role, a replayed token,
//! a token for another cluster's controller, and an instance that is not
//! in the cluster.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use aws_config::{BehaviorVersion, Region};
use aws_sdk_ec2::config::Credentials;
use kops_bootstrap::client::{BootstrapClient, ClientError};
use kops_bootstrap::protocol::{self, BootstrapRequest, BOOTSTRAP_API_VERSION};
use kops_nodeup::agent::Options;
use kops_nodeup::bootstrap::{BootConfig, ConfigServer};
use kops_nodeup::{config, Arch};
use kops_testkit::logs::Logs;
use sha2::{Digest, Sha256};

const CLUSTER: &str = "join.example.com";
const WORKERS: &str = "nodes-us-east-1a";
const CONTROL_PLANE: &str = "control-plane-us-east-1a";
const ACCOUNT: &str = "123456789012";

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Test-made assets for the node configs (what nodeup downloads).
fn assets(server: &kops_testkit::file_server::FileServer) -> Vec<String> {
    let files = [
        ("/k8s/kubelet", b"kubelet".to_vec()),
        ("/k8s/kubectl", b"kubectl".to_vec()),
        ("/aws/ecr-credential-provider-linux-amd64", b"ecr".to_vec()),
        ("/runc/runc.amd64", b"runc".to_vec()),
    ];
    let mut list = Vec::new();
    for (path, bytes) in files {
        list.push(format!("{}@{}{path}", sha256(&bytes), server.base));
        server.files.lock().unwrap().insert(path.to_string(), bytes);
    }
    list
}

/// Points a stored node config's assets at the test server; its new hash.
async fn localize(store: &dyn kops_state::ObjectStore, key: &str, assets: &[String]) -> String {
    let bytes = store.read(key).await.unwrap().expect("node config");
    let mut cfg = config::parse_yaml("test", &String::from_utf8_lossy(&bytes)).unwrap();
    cfg.assets = BTreeMap::from([("amd64".to_string(), assets.to_vec())]);
    let yaml = config::render_yaml(&cfg);
    store
        .write(key, yaml.as_bytes(), Default::default())
        .await
        .unwrap();
    config::config_hash(yaml.as_bytes())
}

/// The boot config in a launch template's user data.
async fn boot_config_of(ec2: &aws_sdk_ec2::Client, template: &str) -> BootConfig {
    use base64::Engine;
    let out = ec2
        .describe_launch_template_versions()
        .launch_template_name(template)
        .versions("$Latest")
        .send()
        .await
        .unwrap();
    let data = out.launch_template_versions()[0]
        .launch_template_data()
        .and_then(|d| d.user_data())
        .unwrap_or_default();
    let script = String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(data)
            .unwrap(),
    )
    .unwrap();
    let boot = kops_nodeup::bootstrap::boot_config_text(&script)
        .unwrap_or_else(|| panic!("{template}: no boot config"));
    BootConfig::parse(boot).unwrap()
}

/// Credentials of `role` for the session `session` (an instance id, as
/// EC2 names instance-profile sessions).
async fn assume(sts: &aws_sdk_sts::Client, role: &str, session: &str) -> Credentials {
    let out = sts
        .assume_role()
        .role_arn(format!("arn:aws:iam::{ACCOUNT}:role/{role}"))
        .role_session_name(session)
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

/// A running instance of the moto image, with `tags`.
async fn instance(ec2: &aws_sdk_ec2::Client, image: &str, tags: &[(&str, &str)]) -> String {
    use aws_sdk_ec2::types::{ResourceType, Tag, TagSpecification};
    let mut spec = TagSpecification::builder().resource_type(ResourceType::Instance);
    for (k, v) in tags {
        spec = spec.tags(Tag::builder().key(*k).value(*v).build());
    }
    let out = ec2
        .run_instances()
        .image_id(image)
        .min_count(1)
        .max_count(1)
        .tag_specifications(spec.build())
        .send()
        .await
        .unwrap();
    out.instances()[0].instance_id().unwrap().to_string()
}

fn openssl(args: &[&str]) -> (bool, String) {
    let out = std::process::Command::new("openssl")
        .args(args)
        .output()
        .expect("openssl runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

#[test]
fn workers_join_through_kops_controller() {
    let Some(moto) = kops_testkit::require_moto() else {
        return;
    };
    let logs = Logs::default();
    let writer = logs.clone();
    let _ = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_env_filter("kops_controller=info")
        .try_init();

    let tmp = tempfile::tempdir().unwrap();
    // The state store in moto's S3, as on AWS.
    moto.create_bucket("kops-join-state").unwrap();
    let state = "s3://kops-join-state/clusters".to_string();
    crate::common::create_and_apply(moto, CLUSTER, &state);

    // S3, workers' STS tokens and kops-controller's replay go to moto.
    for (k, v) in moto.env() {
        std::env::set_var(k, v);
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(join(moto, tmp.path(), &state, &logs));
}

async fn join(moto: &kops_testkit::Moto, tmp: &Path, state: &str, logs: &Logs) {
    let sdk = aws_config::defaults(BehaviorVersion::latest())
        .endpoint_url(moto.endpoint())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("testing", "testing", None, None, "moto"))
        .load()
        .await;
    let ec2 = aws_sdk_ec2::Client::new(&sdk);
    let sts = aws_sdk_sts::Client::new(&sdk);
    let store = kops_state::open(state).await.unwrap();
    let config_base = format!("{state}/{CLUSTER}");

    // What update wrote for the worker: kops-controller and the cluster CA,
    // no state store.
    let worker_boot = boot_config_of(&ec2, &format!("{WORKERS}.{CLUSTER}")).await;
    assert_eq!(
        worker_boot.config_base, None,
        "workers must not read the state store"
    );
    let server = worker_boot.config_server.clone().expect("ConfigServer");
    assert_eq!(
        server.servers,
        vec![format!("https://kops-controller.internal.{CLUSTER}:3988/")]
    );
    let keyset = store
        .read(&format!("{CLUSTER}/pki/private/kubernetes-ca/keyset.yaml"))
        .await
        .unwrap()
        .expect("kubernetes-ca keyset");
    let keyset =
        kops_pki::Keyset::parse("kubernetes-ca", &String::from_utf8_lossy(&keyset)).unwrap();
    assert_eq!(server.ca_certificates, keyset.trusted_certificates_pem());
    let cp_boot = boot_config_of(&ec2, &format!("{CONTROL_PLANE}.masters.{CLUSTER}")).await;
    assert_eq!(cp_boot.config_base.as_deref(), Some(config_base.as_str()));

    // Node configs with the test's assets (hashes as the boot configs pin).
    let files = kops_testkit::file_server::FileServer::start(BTreeMap::new());
    let list = assets(&files);
    let cp_hash = localize(
        store.as_ref(),
        &format!("{CLUSTER}/igconfig/control-plane/{CONTROL_PLANE}/nodeupconfig.yaml"),
        &list,
    )
    .await;
    let worker_hash = localize(
        store.as_ref(),
        &format!("{CLUSTER}/igconfig/node/{WORKERS}/nodeupconfig.yaml"),
        &list,
    )
    .await;

    // 1. The control plane's nodeup: kops-controller's files.
    let cp_root = tmp.join("control-plane");
    let cp_conf = tmp.join("cp-kube_env.yaml");
    let cp_boot = BootConfig {
        nodeup_config_hash: cp_hash,
        ..cp_boot
    };
    std::fs::write(&cp_conf, cp_boot.to_yaml()).unwrap();
    let mut options = Options::new(&cp_conf, &cp_root);
    options.node_name = Some("i-0controlplane".into());
    options.node_ip = Some("127.0.0.1".into());
    options.arch = Some(Arch::Amd64);
    options.region = Some("us-east-1".into());
    options.attempts = 2;
    options.retry_delay = Duration::from_millis(10);
    kops_nodeup::agent::run(&options)
        .await
        .unwrap_or_else(|e| panic!("control-plane nodeup: {e}"));
    let under = |root: &Path, p: &str| root.join(p.trim_start_matches('/'));
    let conf_path = under(&cp_root, kops_bootstrap::config::CONFIG_PATH);
    let mut controller_options =
        kops_controller::Options::parse(&std::fs::read_to_string(&conf_path).unwrap()).unwrap();
    let aws = controller_options.aws().unwrap();
    assert_eq!(aws.nodes_roles, vec![format!("nodes.{CLUSTER}")]);
    assert_eq!(aws.region, "us-east-1");
    // Only the key of the CA it signs with.
    let pki_dir = under(&cp_root, kops_bootstrap::config::PKI_DIR);
    let mut held: Vec<String> = std::fs::read_dir(&pki_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    held.sort();
    assert_eq!(
        held,
        [
            "keypair-ids.yaml",
            "kops-controller.crt",
            "kops-controller.key",
            "kubernetes-ca.crt",
            "kubernetes-ca.key"
        ]
    );

    // 2. kops-controller on loopback, from those files (with the cloud
    // IPAM of IPv6-only clusters on, for step 6).
    controller_options.enable_cloud_ipam = true;
    let s = &mut controller_options.server;
    for path in [
        &mut s.server_key_path,
        &mut s.server_certificate_path,
        &mut s.ca_base_path,
    ] {
        *path = under(&cp_root, path).display().to_string();
    }
    let controller = Arc::new(
        kops_controller::build_with(controller_options, &sdk)
            .await
            .unwrap_or_else(|e| panic!("kops-controller: {e}")),
    );
    let tls = controller.tls().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!(
        "https://127.0.0.1:{}/",
        listener.local_addr().unwrap().port()
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(controller.clone().serve(listener, tls, async {
        let _ = stopped.await;
    }));

    // 3. A worker of the cluster, with only its instance role's credentials.
    let image = ec2
        .describe_launch_template_versions()
        .launch_template_name(format!("{WORKERS}.{CLUSTER}"))
        .versions("$Latest")
        .send()
        .await
        .unwrap()
        .launch_template_versions()[0]
        .launch_template_data()
        .and_then(|d| d.image_id())
        .unwrap()
        .to_string();
    let worker = instance(
        &ec2,
        &image,
        &[
            ("KubernetesCluster", CLUSTER),
            ("kops.k8s.io/instancegroup", WORKERS),
        ],
    )
    .await;
    let stranger = instance(&ec2, &image, &[("kops.k8s.io/instancegroup", WORKERS)]).await;
    let worker_creds = assume(&sts, &format!("nodes.{CLUSTER}"), &worker).await;
    std::env::set_var("AWS_ACCESS_KEY_ID", worker_creds.access_key_id());
    std::env::set_var("AWS_SECRET_ACCESS_KEY", worker_creds.secret_access_key());
    std::env::set_var("AWS_SESSION_TOKEN", worker_creds.session_token().unwrap());

    let worker_root = tmp.join("worker");
    let worker_conf = tmp.join("worker-kube_env.yaml");
    let boot = BootConfig {
        nodeup_config_hash: worker_hash,
        // As a worker of a cluster without DNS names: kops-controller asked
        // at an address, its certificate checked against its name.
        config_server: Some(ConfigServer {
            servers: vec![url.clone()],
            tls_server_name: format!("kops-controller.internal.{CLUSTER}"),
            ..server.clone()
        }),
        api_server_ips: vec!["127.0.0.1".into()],
        ..worker_boot.clone()
    };
    std::fs::write(&worker_conf, boot.to_yaml()).unwrap();
    let options = worker_options(&worker_conf, &worker_root, &worker);
    let outcome = kops_nodeup::agent::run(&options)
        .await
        .unwrap_or_else(|e| panic!("worker nodeup: {e}\nlogs:\n{}", logs.text()));
    assert!(outcome.changed() > 0);

    // Its certificates: signed by kubernetes-ca, for this node.
    let ca_file = tmp.join("ca.crt");
    std::fs::write(&ca_file, &server.ca_certificates).unwrap();
    let kubelet_cert = under(&worker_root, "/var/lib/kubelet/pki/kubelet-client.crt");
    let (ok, out) = openssl(&[
        "verify",
        "-CAfile",
        ca_file.to_str().unwrap(),
        kubelet_cert.to_str().unwrap(),
    ]);
    assert!(ok, "openssl verify: {out}");
    let (_, subject) = openssl(&[
        "x509",
        "-noout",
        "-subject",
        "-in",
        kubelet_cert.to_str().unwrap(),
    ]);
    assert!(
        subject.contains(&format!("system:node:{worker}")),
        "{subject}"
    );
    assert!(subject.contains("system:nodes"), "{subject}");
    let kubeconfig =
        std::fs::read_to_string(under(&worker_root, "/var/lib/kubelet/kubeconfig")).unwrap();
    assert!(
        kubeconfig.contains("/var/lib/kubelet/pki/kubelet-client.crt"),
        "{kubeconfig}"
    );
    let proxy_cert = under(&worker_root, "/var/lib/kube-proxy/client.crt");
    if proxy_cert.exists() {
        let (ok, out) = openssl(&[
            "verify",
            "-CAfile",
            ca_file.to_str().unwrap(),
            proxy_cert.to_str().unwrap(),
        ]);
        assert!(ok, "kube-proxy: {out}");
    }
    // Nothing of the state store's PKI on the worker.
    assert!(!under(&worker_root, "/etc/kubernetes/kops-controller").exists());
    let hosts = std::fs::read_to_string(under(&worker_root, "/etc/hosts")).unwrap();
    assert!(
        hosts.contains(&format!(
            "127.0.0.1\tapi.internal.{CLUSTER} kops-controller.internal.{CLUSTER}\n"
        )),
        "{hosts}"
    );
    // A second run keeps its certificates and changes nothing.
    let again = kops_nodeup::agent::run(&options).await.unwrap();
    assert_eq!(again.changed(), 0, "{:?}", again.changes);

    // Once the node is registered and Ready, kops-controller refuses it
    // (409, as kops') and its nodeup ends without doing anything; a node
    // registered but not Ready may bootstrap again.
    let api = kops_testkit::kube_api::FakeApi::start();
    let kube = kops_channels::client_from_kubeconfig(&api.write_kubeconfig(tmp))
        .await
        .unwrap();
    controller.refuse_registered_nodes(kube::Api::all(kube));
    let node = |ready: &str| {
        serde_json::json!({
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": worker},
            "status": {"conditions": [{"type": "Ready", "status": ready}]},
        })
    };
    api.put("api/v1", "nodes", "", &worker, node("False"));
    let not_ready = kops_nodeup::agent::run(&options).await.unwrap();
    assert_eq!(not_ready.changed(), 0, "{:?}", not_ready.changes);
    assert_ne!(
        not_ready.services,
        kops_nodeup::agent::ServiceAction::AlreadyRegistered
    );
    api.put("api/v1", "nodes", "", &worker, node("True"));
    let joined = kops_nodeup::agent::run(&options).await.unwrap();
    assert_eq!(
        joined.services,
        kops_nodeup::agent::ServiceAction::AlreadyRegistered
    );
    assert_eq!(joined.changed(), 0, "{:?}", joined.changes);
    assert!(logs
        .text()
        .contains(&format!("node `{worker}` is already registered and Ready")));
    api.delete("api/v1", "nodes", "", &worker);

    // 4. Refusals: 403, a log line each, nothing issued.
    let client = BootstrapClient::new(
        CLUSTER,
        "us-east-1",
        std::slice::from_ref(&url),
        &server.ca_certificates,
        "",
    )
    .unwrap();
    let (_, public_key) = kops_pki::new_private_key().unwrap();
    let request = BootstrapRequest {
        api_version: BOOTSTRAP_API_VERSION.to_string(),
        certs: BTreeMap::from([(
            "kubelet".to_string(),
            kops_bootstrap::protocol::public_key_pem(&public_key),
        )]),
        include_node_config: true,
        ..Default::default()
    };
    let body = serde_json::to_vec(&request).unwrap();
    let token = |creds: &Credentials, audience: &str| {
        kops_aws_identity::create_token_v1(
            &kops_aws_identity::sts_url("us-east-1"),
            "us-east-1",
            creds,
            SystemTime::now(),
            &body,
            audience,
        )
        .unwrap()
    };
    let ours = protocol::audience(CLUSTER);
    let refused = |result: Result<_, ClientError>, what: &str| match result {
        Err(ClientError::Refused { status: 403, .. }) => {}
        Err(e) => panic!("{what}: expected 403, got {e}"),
        Ok(_) => panic!("{what}: was accepted"),
    };

    let masters = assume(&sts, &format!("masters.{CLUSTER}"), &worker).await;
    refused(
        client.post(&url, &token(&masters, &ours), &body).await,
        "control-plane role",
    );
    let foreign = assume(&sts, "nodes.other.example.com", &worker).await;
    refused(
        client.post(&url, &token(&foreign, &ours), &body).await,
        "another cluster's role",
    );
    let outsider = assume(&sts, &format!("nodes.{CLUSTER}"), &stranger).await;
    refused(
        client.post(&url, &token(&outsider, &ours), &body).await,
        "instance outside the cluster",
    );
    refused(
        client
            .post(
                &url,
                &token(&worker_creds, &protocol::audience("other.example.com")),
                &body,
            )
            .await,
        "another controller's token",
    );
    let once = token(&worker_creds, &ours);
    let first = client.post(&url, &once, &body).await.unwrap();
    assert!(first.certs.contains_key("kubelet"));
    refused(client.post(&url, &once, &body).await, "replayed token");

    let text = logs.text();
    for expected in [
        format!("assumed-role/masters.{CLUSTER}/{worker}` is not an instance of a worker role"),
        format!(
            "assumed-role/nodes.other.example.com/{worker}` is not an instance of a worker role"
        ),
        format!("instance `{stranger}` is not part of cluster `{CLUSTER}`"),
        "the token is for `kops-controller.internal.other.example.com`".to_string(),
        "the token was already used (replay)".to_string(),
    ] {
        assert!(
            text.contains(&expected),
            "no log line `{expected}` in:\n{text}"
        );
    }
    // The five above and the registered, Ready node's.
    let refusals = text.lines().filter(|l| l.contains("refused:")).count();
    assert_eq!(refusals, 6, "{text}");
    assert!(
        text.lines().all(|l| l.len() < 400),
        "log lines are one short line each:\n{text}"
    );

    // 5. Node labels: the node the worker registered gets its group's role
    // labels and group name (a kubelet may not set role labels itself).
    let api = kops_testkit::kube_api::FakeApi::start();
    api.put(
        "api/v1",
        "nodes",
        "",
        &worker,
        serde_json::json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": worker, "labels": {"kubernetes.io/hostname": worker}},
            "spec": {"providerID": format!("aws:///us-east-1a/{worker}")},
        }),
    );
    let kubeconfig = api.write_kubeconfig(tmp);
    let kube = kops_channels::client_from_kubeconfig(&kubeconfig)
        .await
        .unwrap();
    let labeler = controller
        .labeler(kube::Api::all(kube.clone()))
        .expect("AWS");
    assert_eq!(labeler.run_once().await.unwrap(), 1);
    let node = api.get("api/v1", "nodes", "", &worker).unwrap();
    let labels = &node["metadata"]["labels"];
    assert_eq!(labels["kops.k8s.io/instancegroup"], WORKERS, "{node}");
    assert_eq!(labels["node-role.kubernetes.io/node"], "", "{node}");
    assert_eq!(labels["kubernetes.io/hostname"], worker.as_str(), "{node}");
    assert_eq!(labeler.run_once().await.unwrap(), 0, "second pass");

    // 6. Cloud IPAM (IPv6-only clusters): the node's instance is found by
    // its interface; moto gives interfaces no IPv6 prefixes, so the node is
    // named in a warning and left without a range (the prefix → range rule
    // is a unit test of kops_controller::aws::ipam). A node that has its range
    // is not looked up.
    let ipam = controller
        .ipam(kube::Api::all(kube))
        .expect("enableCloudIPAM");
    api.put(
        "api/v1",
        "nodes",
        "",
        "ranged",
        serde_json::json!({
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": "ranged"},
            "spec": {"providerID": "aws:///us-east-1a/i-0000000000000dead",
                     "podCIDR": "2001:db8::/80", "podCIDRs": ["2001:db8::/80"]},
        }),
    );
    assert_eq!(ipam.run_once().await.unwrap(), 0);
    let node = api.get("api/v1", "nodes", "", &worker).unwrap();
    assert!(node["spec"].get("podCIDRs").is_none(), "{node}");
    let text = logs.text();
    assert!(
        text.contains(&format!("node {worker}: no pod range: interface eni-"))
            && text.contains(&format!(
                "of instance {worker} has 0 IPv6 prefixes, expected 1"
            )),
        "{text}"
    );
    assert!(!text.contains("node ranged"), "{text}");

    let _ = stop.send(());
    let _ = serving.await;
}

/// A control plane half switched from kops to kops-rs (issue 28): the
/// state store holds kops' kops-controller addon (a DaemonSet), one
/// control-plane node runs kops-rs' nodeup (host service, configured by
/// nodeup from that addon: kops' workers' tokens accepted, its kubelet
/// labelled so kops' pod stays off it), the other kops-controller with
/// kops' own configuration (the addon's ConfigMap as kops' pod reads it).
/// A kops-rs worker joins through either, and still when the first server
/// it knows is down (the node being replaced); a token as kops' nodes sign
/// it (no audience) is accepted by the kops-rs host service.
#[test]
fn workers_join_a_mixed_control_plane() {
    let Some(moto) = kops_testkit::require_moto() else {
        return;
    };
    let cluster = "mixed.example.com";
    let tmp = tempfile::tempdir().unwrap();
    moto.create_bucket("kops-mixed-state").unwrap();
    let state = "s3://kops-mixed-state/clusters".to_string();
    crate::common::create_and_apply(moto, cluster, &state);
    for (k, v) in moto.env() {
        std::env::set_var(k, v);
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(mixed_join(moto, tmp.path(), &state, cluster));
}

async fn serve(
    options: kops_controller::Options,
    sdk: &aws_config::SdkConfig,
) -> (String, tokio::sync::oneshot::Sender<()>) {
    let controller = Arc::new(kops_controller::build_with(options, sdk).await.unwrap());
    let tls = controller.tls().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!(
        "https://127.0.0.1:{}/",
        listener.local_addr().unwrap().port()
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(controller.serve(listener, tls, async {
        let _ = stopped.await;
    }));
    (url, stop)
}

async fn mixed_join(moto: &kops_testkit::Moto, tmp: &Path, state: &str, cluster: &str) {
    let sdk = aws_config::defaults(BehaviorVersion::latest())
        .endpoint_url(moto.endpoint())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("testing", "testing", None, None, "moto"))
        .load()
        .await;
    let ec2 = aws_sdk_ec2::Client::new(&sdk);
    let sts = aws_sdk_sts::Client::new(&sdk);
    let store = kops_state::open(state).await.unwrap();
    let workers = "nodes-us-east-1a";
    let control_plane = "control-plane-us-east-1a";

    // kops' addon in the store: its ConfigMap (the same configuration)
    // and its DaemonSet, as on a cluster kops made.
    let channel = store
        .read(&format!("{cluster}/addons/bootstrap-channel.yaml"))
        .await
        .unwrap()
        .unwrap();
    let channel =
        kops_channels::Channel::parse("channel", &String::from_utf8_lossy(&channel)).unwrap();
    let addon = channel
        .spec
        .addons
        .iter()
        .find(|a| a.name == kops_api::switch::KOPS_CONTROLLER_ADDON)
        .unwrap();
    let key = format!(
        "{cluster}/addons/{}",
        addon.manifest.trim_start_matches("./")
    );
    let ours = String::from_utf8(store.read(&key).await.unwrap().unwrap()).unwrap();
    let config_map = ours
        .split("\n---\n")
        .find(|d| d.contains("kind: ConfigMap"))
        .unwrap();
    let kops_addon = format!(
        "{config_map}\n---\napiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: kops-controller\n  namespace: kube-system\n\
         spec:\n  template:\n    spec:\n      affinity:\n        nodeAffinity:\n          requiredDuringSchedulingIgnoredDuringExecution:\n\
         \x20           nodeSelectorTerms:\n            - matchExpressions:\n              - key: node-role.kubernetes.io/control-plane\n\
         \x20               operator: Exists\n              - key: kops.k8s.io/kops-controller-pki\n                operator: Exists\n"
    );
    store
        .write(&key, kops_addon.as_bytes(), Default::default())
        .await
        .unwrap();

    let files = kops_testkit::file_server::FileServer::start(BTreeMap::new());
    let list = assets(&files);
    let cp_hash = localize(
        store.as_ref(),
        &format!("{cluster}/igconfig/control-plane/{control_plane}/nodeupconfig.yaml"),
        &list,
    )
    .await;
    let worker_hash = localize(
        store.as_ref(),
        &format!("{cluster}/igconfig/node/{workers}/nodeupconfig.yaml"),
        &list,
    )
    .await;

    // The kops-rs control-plane node.
    let cp_boot = boot_config_of(&ec2, &format!("{control_plane}.masters.{cluster}")).await;
    let cp_root = tmp.join("kops-rs-control-plane");
    let cp_conf = tmp.join("cp-kube_env.yaml");
    std::fs::write(
        &cp_conf,
        BootConfig {
            nodeup_config_hash: cp_hash,
            ..cp_boot
        }
        .to_yaml(),
    )
    .unwrap();
    let mut options = Options::new(&cp_conf, &cp_root);
    options.node_name = Some("i-0kopsrscontrol".into());
    options.node_ip = Some("127.0.0.1".into());
    options.arch = Some(Arch::Amd64);
    options.region = Some("us-east-1".into());
    options.attempts = 2;
    options.retry_delay = Duration::from_millis(10);
    kops_nodeup::agent::run(&options)
        .await
        .unwrap_or_else(|e| panic!("control-plane nodeup: {e}"));
    let under = |root: &Path, p: &str| root.join(p.trim_start_matches('/'));
    let kubelet = std::fs::read_to_string(under(&cp_root, "/etc/sysconfig/kubelet")).unwrap();
    let labels = kubelet
        .split_whitespace()
        .find_map(|f| f.strip_prefix("--node-labels="))
        .unwrap_or_else(|| panic!("no --node-labels: {kubelet}"));
    assert!(
        labels
            .split(',')
            .any(|l| l == "kops-rs.io/kops-controller=host"),
        "{labels}"
    );
    assert!(
        !labels.contains("node-role.kubernetes.io/") && !labels.contains("kops.k8s.io/"),
        "kubelet refuses labels it may not set itself: {labels}"
    );
    let conf_path = under(&cp_root, kops_bootstrap::config::CONFIG_PATH);
    let mut host =
        kops_controller::Options::parse(&std::fs::read_to_string(&conf_path).unwrap()).unwrap();
    assert!(
        host.accept_kops_node_tokens,
        "kops' addon: kops' workers accepted"
    );
    let localize_paths = |o: &mut kops_controller::Options| {
        let s = &mut o.server;
        for path in [
            &mut s.server_key_path,
            &mut s.server_certificate_path,
            &mut s.ca_base_path,
        ] {
            *path = under(&cp_root, path).display().to_string();
        }
    };
    localize_paths(&mut host);
    // kops' pod on the other node: the ConfigMap's configuration as it is
    // (kops' nodeup writes the same certificate and CA files there).
    let config_yaml: serde_json::Value = serde_yaml_ng::from_str(config_map).unwrap();
    let mut kops_pod =
        kops_controller::Options::parse(config_yaml["data"]["config.yaml"].as_str().unwrap())
            .unwrap();
    assert!(!kops_pod.accept_kops_node_tokens);
    localize_paths(&mut kops_pod);
    let (host_url, _stop_host) = serve(host, &sdk).await;
    let (pod_url, stop_pod) = serve(kops_pod, &sdk).await;

    // Workers of the cluster, with their instance role's credentials only.
    let worker_boot = boot_config_of(&ec2, &format!("{workers}.{cluster}")).await;
    let server = worker_boot.config_server.clone().expect("ConfigServer");
    let image = ec2
        .describe_launch_template_versions()
        .launch_template_name(format!("{workers}.{cluster}"))
        .versions("$Latest")
        .send()
        .await
        .unwrap()
        .launch_template_versions()[0]
        .launch_template_data()
        .and_then(|d| d.image_id())
        .unwrap()
        .to_string();
    let image = image.as_str();
    let join = |servers: Vec<String>, n: usize| {
        let (ec2, sts, worker_boot, server, worker_hash) =
            (&ec2, &sts, &worker_boot, &server, &worker_hash);
        async move {
            let worker = instance(
                ec2,
                image,
                &[
                    ("KubernetesCluster", cluster),
                    ("kops.k8s.io/instancegroup", workers),
                ],
            )
            .await;
            let creds = assume(sts, &format!("nodes.{cluster}"), &worker).await;
            std::env::set_var("AWS_ACCESS_KEY_ID", creds.access_key_id());
            std::env::set_var("AWS_SECRET_ACCESS_KEY", creds.secret_access_key());
            std::env::set_var("AWS_SESSION_TOKEN", creds.session_token().unwrap());
            let root = tmp.join(format!("worker-{n}"));
            let conf = tmp.join(format!("worker-{n}-kube_env.yaml"));
            let boot = BootConfig {
                nodeup_config_hash: worker_hash.clone(),
                config_server: Some(ConfigServer {
                    servers,
                    tls_server_name: format!("kops-controller.internal.{cluster}"),
                    ..server.clone()
                }),
                api_server_ips: vec!["127.0.0.1".into()],
                ..worker_boot.clone()
            };
            std::fs::write(&conf, boot.to_yaml()).unwrap();
            let options = worker_options(&conf, &root, &worker);
            let outcome = kops_nodeup::agent::run(&options)
                .await
                .unwrap_or_else(|e| panic!("worker {n} nodeup: {e}"));
            assert!(outcome.changed() > 0);
            assert!(root.join("var/lib/kubelet/pki/kubelet-client.crt").exists());
            (worker, creds)
        }
    };
    // Through kops' pod, then through the host service alone, then with
    // the pod's node gone (the first server no longer answers).
    join(vec![pod_url.clone()], 1).await;
    let (worker, creds) = join(vec![host_url.clone()], 2).await;
    let _ = stop_pod.send(());
    tokio::time::sleep(Duration::from_millis(100)).await;
    join(vec![pod_url.clone(), host_url.clone()], 3).await;

    // kops' nodes sign no audience: the host service accepts their token.
    let client = BootstrapClient::new(
        cluster,
        "us-east-1",
        std::slice::from_ref(&host_url),
        &server.ca_certificates,
        &format!("kops-controller.internal.{cluster}"),
    )
    .unwrap();
    let (_, public_key) = kops_pki::new_private_key().unwrap();
    let request = BootstrapRequest {
        api_version: BOOTSTRAP_API_VERSION.to_string(),
        certs: BTreeMap::from([(
            "kubelet".to_string(),
            kops_bootstrap::protocol::public_key_pem(&public_key),
        )]),
        ..Default::default()
    };
    let body = serde_json::to_vec(&request).unwrap();
    let token = kops_aws_identity::create_token_v1(
        &kops_aws_identity::sts_url("us-east-1"),
        "us-east-1",
        &creds,
        SystemTime::now(),
        &body,
        "",
    )
    .unwrap();
    let issued = client
        .post(&host_url, &token, &body)
        .await
        .unwrap_or_else(|e| panic!("kops' worker token ({worker}): {e}"));
    assert!(issued.certs.contains_key("kubelet"));
}

/// nodeup's options for a worker in us-east-1 that asks kops-controller
/// twice at most, quickly, as the join tests want.
fn worker_options(conf: &std::path::Path, root: &std::path::Path, worker: &str) -> Options {
    let mut options = Options::new(conf, root);
    options.node_name = Some(worker.to_string());
    options.arch = Some(Arch::Amd64);
    options.region = Some("us-east-1".into());
    options.attempts = 2;
    options.retry_delay = Duration::from_millis(50);
    options.bootstrap_timeout = Duration::from_secs(20);
    options
}
