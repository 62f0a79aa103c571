//! The nodeup agent end to end, against a temp root: the state store is a
//! `file://` directory holding the node config (written as `update cluster`
//! writes it) and the cluster's keysets (made by kops-pki); assets are
//! test-made binaries and archives with known hashes, served by a small
//! HTTP server on 127.0.0.1 started by the test.
//!
//! Checked: the file tree of a control-plane node and of a worker (paths,
//! modes, key contents with certificates and keys redacted); a second run
//! changes nothing and downloads nothing; a tampered asset and a changed
//! node config are refused with a clear error before anything is written.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use kops_api::{Cluster, InstanceGroup, Object};
use kops_nodeup::agent::{self, ChangeKind, NodeupError, Options, PackageAction, ServiceAction};
use kops_nodeup::{bootstrap, config, Arch};
use sha2::{Digest, Sha256};

use kops_testkit::file_server::FileServer as Server;

const CLUSTER: &str = "nodeup.example.com";

fn serve(files: BTreeMap<String, Vec<u8>>) -> Server {
    Server::start(files)
}

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A deterministic .tar.gz of `(path, contents)`.
fn tar_gz(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(
        Vec::new(),
        flate2::Compression::default(),
    ));
    for (path, contents) in entries {
        let mut header = tar::Header::new_gnu();
        header.set_size(contents.len() as u64);
        header.set_mode(0o755);
        header.set_mtime(0);
        header.set_cksum();
        builder.append_data(&mut header, path, *contents).unwrap();
    }
    builder.into_inner().unwrap().finish().unwrap()
}

/// The test's assets: URL path → bytes.
fn assets() -> BTreeMap<String, Vec<u8>> {
    let mut m = BTreeMap::new();
    m.insert(
        "/k8s/v1.34.0/kubelet".into(),
        b"#!/bin/sh\necho kubelet\n".to_vec(),
    );
    m.insert(
        "/k8s/v1.34.0/kubectl".into(),
        b"#!/bin/sh\necho kubectl\n".to_vec(),
    );
    m.insert(
        "/aws/ecr-credential-provider-linux-amd64".into(),
        b"#!/bin/sh\necho ecr\n".to_vec(),
    );
    m.insert(
        "/cni/cni-plugins-linux-amd64-v1.7.1.tgz".into(),
        tar_gz(&[
            ("./bridge", b"bridge"),
            ("./host-local", b"host-local"),
            ("./loopback", b"loopback"),
        ]),
    );
    m.insert(
        "/containerd/containerd-2.3.4-linux-amd64.tar.gz".into(),
        tar_gz(&[
            ("bin/containerd", b"containerd"),
            ("bin/containerd-shim-runc-v2", b"shim"),
            ("bin/ctr", b"ctr"),
        ]),
    );
    m.insert("/runc/runc.amd64".into(), b"runc".to_vec());
    m
}

fn load(yaml: &str) -> (Cluster, Vec<InstanceGroup>) {
    let mut cluster = None;
    let mut groups = Vec::new();
    for object in kops_api::parse_objects("test.yaml", yaml).unwrap() {
        match object {
            Object::Cluster(c) => cluster = Some(*c),
            Object::InstanceGroup(g) => groups.push(*g),
            _ => {}
        }
    }
    (cluster.unwrap(), groups)
}

const SPEC: &str = r#"apiVersion: kops.k8s.io/v1alpha2
kind: Cluster
metadata: {name: nodeup.example.com}
spec:
  cloudProvider: aws
  kubernetesVersion: v1.34.0
  networkCIDR: 172.20.0.0/16
  etcdClusters:
  - {name: main, etcdMembers: [{name: a, instanceGroup: control-plane-us-test-1a}]}
  - {name: events, etcdMembers: [{name: a, instanceGroup: control-plane-us-test-1a}]}
  subnets:
  - {name: us-test-1a, zone: us-test-1a, cidr: 172.20.32.0/19, type: Public}
---
apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata: {name: control-plane-us-test-1a, labels: {kops.k8s.io/cluster: nodeup.example.com}}
spec: {role: Master, image: ami-1, machineType: m5.large, subnets: [us-test-1a]}
---
apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata: {name: nodes, labels: {kops.k8s.io/cluster: nodeup.example.com}}
spec: {role: Node, image: ami-1, machineType: m5.large, subnets: [us-test-1a], nodeLabels: {team: a}, taints: ["dedicated=a:NoSchedule"]}
"#;

struct Env {
    _dir: tempfile::TempDir,
    dir: PathBuf,
    server: Server,
    conf: PathBuf,
    state: Arc<dyn kops_state::ObjectStore>,
    key: String,
}

/// The API load balancer's DNS name the control plane's config names
/// (`ApiserverAdditionalIPs`): one more name of its serving certificate.
const API_LB: &str = "api-nodeup-example-com-abcdef-1.elb.us-east-1.amazonaws.com";

/// Writes the keysets and the group's node config (its assets pointing at
/// the test server) to a file:// store, and the boot config beside it.
async fn setup(group_index: usize) -> Env {
    setup_spec(SPEC, group_index).await
}

/// [`setup`] for the cluster and groups of `spec`.
async fn setup_spec(spec: &str, group_index: usize) -> Env {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    let server = serve(assets());
    let state_url = format!("file://{}/state", path.display());
    let state = kops_state::open(&state_url).await.unwrap();
    let (cluster, groups) = load(spec);
    kops_pki::ensure_cluster_pki(&state, &cluster)
        .await
        .unwrap();
    let config_base = state.url_of(CLUSTER);
    let group = &groups[group_index];
    let mut cfg = config::nodeup_config(&cluster, group, &config_base).unwrap();
    let list: Vec<String> = [
        "/k8s/v1.34.0/kubelet",
        "/k8s/v1.34.0/kubectl",
        "/aws/ecr-credential-provider-linux-amd64",
        "/cni/cni-plugins-linux-amd64-v1.7.1.tgz",
        "/containerd/containerd-2.3.4-linux-amd64.tar.gz",
        "/runc/runc.amd64",
    ]
    .iter()
    .map(|p| {
        let bytes = server.files.lock().unwrap()[*p].clone();
        format!("{}@{}{p}", sha256(&bytes), server.base)
    })
    .collect();
    cfg.assets = BTreeMap::from([("amd64".to_string(), list)]);
    if cfg.api_server_config.is_some() {
        // What `update` reads from the cloud: the API load balancer's name.
        cfg.apiserver_additional_ips = vec![API_LB.to_string()];
    }
    let yaml = config::render_yaml(&cfg);
    let role = group.role().unwrap();
    let key = config::nodeup_config_key(CLUSTER, role, group.name());
    state
        .write(&key, yaml.as_bytes(), Default::default())
        .await
        .unwrap();
    let boot = bootstrap::boot_config(
        &cluster,
        group,
        role,
        &config_base,
        &config::config_hash(yaml.as_bytes()),
    );
    let conf = path.join("kube_env.yaml");
    std::fs::write(&conf, boot.to_yaml()).unwrap();
    Env {
        _dir: dir,
        dir: path,
        server,
        conf,
        state,
        key,
    }
}

fn options(env: &Env, root: &str) -> Options {
    let mut o = Options::new(&env.conf, env.dir.join(root));
    o.node_name = Some("i-0123456789abcdef0".into());
    o.node_ip = Some("172.20.32.10".into());
    o.arch = Some(Arch::Amd64);
    o.region = Some("us-test-1".into());
    o.attempts = 2;
    o.retry_delay = Duration::from_millis(10);
    o
}

/// Every file under `root`: path, mode, and for text files their content
/// with certificates and keys redacted; binaries by size.
fn tree(root: &Path) -> String {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(root, &mut files);
    files.sort();
    let mut listing = String::new();
    let mut contents = String::new();
    for f in files {
        use std::os::unix::fs::PermissionsExt;
        let rel = format!("/{}", f.strip_prefix(root).unwrap().display());
        let mode = std::fs::metadata(&f).unwrap().permissions().mode() & 0o7777;
        let bytes = std::fs::read(&f).unwrap();
        listing.push_str(&format!("{mode:04o} {rel}\n"));
        let shown = [
            "/etc/",
            "/var/lib/kubelet/kubeconfig",
            "/var/lib/kubelet/kubelet.conf",
            "/var/lib/kube-scheduler/config.yaml",
            "/var/lib/nodeup/",
        ];
        if shown.iter().any(|s| rel.starts_with(s)) {
            contents.push_str(&format!(
                "--- {rel}\n{}\n",
                redact(&String::from_utf8_lossy(&bytes))
            ));
        }
    }
    format!("{listing}\n{contents}")
}

fn redact(text: &str) -> String {
    let mut out = String::new();
    let mut inside = false;
    for line in text.lines() {
        if line.trim_start().starts_with("-----BEGIN") {
            inside = true;
            out.push_str("[pem redacted]\n");
        }
        if !inside {
            // Keypair ids are the test CA's serials: new every run.
            match line.split_once(": \"") {
                Some((name, id))
                    if name.ends_with("-ca")
                        && id.trim_end_matches('"').chars().all(|c| c.is_ascii_digit()) =>
                {
                    out.push_str(&format!("{name}: [keypair id]"));
                }
                _ => out.push_str(line),
            }
            out.push('\n');
        }
        if line.trim_start().starts_with("-----END") {
            inside = false;
        }
    }
    out
}

fn settings() -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.add_filter(r"http://127\.0\.0\.1:\d+", "http://[server]");
    // The state store, as a URL or as the bare path kops writes.
    s.add_filter(r#"(file://)?/[^ \n"]*?/\.tmp\w*/state"#, "${1}[state]");
    s
}

async fn first_and_second_run(group_index: usize, name: &str) {
    let env = setup(group_index).await;
    let opts = options(&env, "root");

    // A dry run writes nothing and says what would change.
    let mut dry = opts.clone();
    dry.dry_run = true;
    let planned = agent::run(&dry).await.unwrap();
    assert!(planned
        .changes
        .iter()
        .all(|c| c.kind == ChangeKind::Created));
    assert_eq!(planned.services, ServiceAction::SkippedDryRun);
    assert!(!env.dir.join("root").exists(), "a dry run writes nothing");

    let first = agent::run(&opts).await.unwrap();
    assert_eq!(first.changed(), first.changes.len());
    assert_eq!(first.downloaded.len(), 6);
    assert!(matches!(
        first.services,
        ServiceAction::SkippedNotRoot { .. }
    ));
    let root = env.dir.join("root");
    let snapshot = tree(&root);
    settings().bind(|| insta::assert_snapshot!(name, snapshot));

    // Second run: nothing changes, nothing is downloaded, certificates are kept.
    let requests = env.server.request_count();
    let second = agent::run(&opts).await.unwrap();
    assert_eq!(second.changed(), 0, "{:#?}", second.changes);
    assert!(second.downloaded.is_empty());
    assert_eq!(env.server.request_count(), requests);
    assert_eq!(tree(&root), snapshot);
    assert!(second
        .changes
        .iter()
        .all(|c| c.kind == ChangeKind::Unchanged));

    // Certificates chain to the cluster CA.
    let ca = std::fs::read_to_string(root.join("srv/kubernetes/ca.crt")).unwrap();
    let cert =
        std::fs::read_to_string(root.join("var/lib/kubelet/pki/kubelet-client.crt")).unwrap();
    assert!(kops_pki::verify_signed_by(&cert, &ca).unwrap());
    let info = kops_pki::certificate_info(&cert).unwrap();
    assert!(
        info.subject.contains("CN=system:node:i-0123456789abcdef0"),
        "{}",
        info.subject
    );
    assert!(info.subject.contains("O=system:nodes"), "{}", info.subject);
    let mode = |p: &str| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(root.join(p))
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!(mode("var/lib/kubelet/pki/kubelet-client.key"), 0o600);
    assert_eq!(mode("usr/local/bin/kubelet"), 0o755);
}

#[tokio::test]
async fn control_plane_node() {
    first_and_second_run(0, "control_plane_tree").await;
    let env = setup(0).await;
    let outcome = agent::run(&options(&env, "root")).await.unwrap();
    let root = env.dir.join("root");
    let server =
        std::fs::read_to_string(root.join("srv/kubernetes/kube-apiserver/server.crt")).unwrap();
    let info = kops_pki::certificate_info(&server).unwrap();
    for name in [
        "api.internal.nodeup.example.com",
        "api.nodeup.example.com",
        API_LB,
        "100.64.0.1",
        "172.20.32.10",
        "kubernetes.default",
    ] {
        assert!(
            info.alternate_names.iter().any(|n| n == name),
            "{name} not in {:?}",
            info.alternate_names
        );
    }
    assert!(outcome
        .changes
        .iter()
        .any(|c| c.path == "/etc/kubernetes/manifests/etcd-manager-events.manifest"));
}

/// With `spec.authentication`, the API server asks the authentication
/// service about bearer tokens as kops sets it up: the webhook kubeconfig
/// mounted into its pod and, for aws-iam-authenticator, the serving key
/// pair its DaemonSet reads, owned by the user its container runs as.
#[tokio::test]
async fn control_plane_with_a_token_webhook() {
    use std::os::unix::fs::MetadataExt;
    for (authentication, server, mode) in [
        ("aws: {}", "https://127.0.0.1:21362/authenticate", 0o600),
        ("kopeio: {}", "http://127.0.0.1:9001/hooks/authn", 0o644),
    ] {
        let spec = SPEC.replacen(
            "  cloudProvider: aws\n",
            &format!("  cloudProvider: aws\n  authentication: {{{authentication}}}\n"),
            1,
        );
        let env = setup_spec(&spec, 0).await;
        agent::run(&options(&env, "root")).await.unwrap();
        let root = env.dir.join("root");
        let config = root.join("etc/kubernetes/authn.config");
        let text = std::fs::read_to_string(&config).unwrap();
        assert!(text.contains(&format!("server: {server}")), "{text}");
        assert!(text.contains("current-context: webhook"), "{text}");
        let meta = std::fs::metadata(&config).unwrap();
        assert_eq!(meta.mode() & 0o777, mode, "{authentication}");
        let manifest =
            std::fs::read_to_string(root.join("etc/kubernetes/manifests/kube-apiserver.manifest"))
                .unwrap();
        assert!(
            manifest.contains(
                "--authentication-token-webhook-config-file=/etc/kubernetes/authn.config"
            ),
            "{authentication}: {manifest}"
        );
        assert!(
            manifest.contains("path: /etc/kubernetes/authn.config"),
            "{manifest}"
        );
        let key = root.join("srv/kubernetes/aws-iam-authenticator/key.pem");
        if authentication.starts_with("aws") {
            let cert =
                std::fs::read_to_string(root.join("srv/kubernetes/aws-iam-authenticator/cert.pem"))
                    .unwrap();
            let info = kops_pki::certificate_info(&cert).unwrap();
            assert!(
                info.alternate_names.iter().any(|n| n == "127.0.0.1"),
                "{info:?}"
            );
            assert!(text.contains("certificate-authority-data: "), "{text}");
            let meta = std::fs::metadata(&key).unwrap();
            assert_eq!(meta.mode() & 0o777, 0o600);
            // Only root may give a file away.
            if std::fs::metadata("/proc/self").unwrap().uid() == 0 {
                assert_eq!((meta.uid(), meta.gid()), (10000, 10000));
            }
            // The next run finds it all in place.
            let again = agent::run(&options(&env, "root")).await.unwrap();
            let changed: Vec<_> = again
                .changes
                .iter()
                .filter(|c| c.kind != ChangeKind::Unchanged)
                .map(|c| c.path.clone())
                .collect();
            assert!(changed.is_empty(), "{changed:?}");
        } else {
            assert!(!key.exists());
        }
    }
}

#[tokio::test]
async fn worker_node() {
    first_and_second_run(1, "worker_tree").await;
}

/// A worker group running gVisor (platform `kvm`).
fn gvisor_spec() -> String {
    format!(
        "{SPEC}---
apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata: {{name: sandboxed, labels: {{kops.k8s.io/cluster: nodeup.example.com}}}}
spec: {{role: Node, image: ami-1, machineType: m5.metal, subnets: [us-test-1a], containerd: {{gvisor: {{enabled: true, platform: kvm}}}}}}
"
    )
}

/// A stand-in for gVisor's armored signing key, served by the test.
const GVISOR_KEY: &str =
    "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmQINBF-test-key\n-----END PGP PUBLIC KEY BLOCK-----\n";

/// The gVisor worker's environment: the key served, the root an Ubuntu
/// (or, with `os`, another system's `/etc/os-release`).
async fn gvisor_worker(os: &str) -> (Env, Options) {
    let env = setup_spec(&gvisor_spec(), 2).await;
    env.server
        .files
        .lock()
        .unwrap()
        .insert("/gvisor/archive.key".into(), GVISOR_KEY.as_bytes().to_vec());
    let mut opts = options(&env, "root");
    opts.gvisor_keyring_url = format!("{}/gvisor/archive.key", env.server.base);
    std::fs::create_dir_all(env.dir.join("root/etc")).unwrap();
    std::fs::write(env.dir.join("root/etc/os-release"), os).unwrap();
    (env, opts)
}

/// On Ubuntu: gVisor's apt repository (its key, the list pinned to it and
/// to the node's architecture), containerd's `runsc` runtime pointing at
/// the shim's configuration, which sets the group's platform; `runsc`
/// itself is left to apt on the real node (`--root` is not `/` here).
#[tokio::test]
async fn gvisor_worker_gets_the_repository_and_the_runtime() {
    let (env, opts) = gvisor_worker("NAME=\"Ubuntu\"\nID=ubuntu\n").await;
    let outcome = agent::run(&opts).await.unwrap();
    assert_eq!(
        outcome.packages,
        PackageAction::Skipped {
            packages: vec!["runsc".into()]
        }
    );
    let root = env.dir.join("root");
    let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap();
    assert_eq!(read("etc/apt/keyrings/gvisor.asc"), GVISOR_KEY);
    assert_eq!(
        read("etc/apt/sources.list.d/gvisor.list"),
        "deb [arch=amd64 signed-by=/etc/apt/keyrings/gvisor.asc] https://storage.googleapis.com/gvisor/releases release main\n"
    );
    let containerd = read("etc/containerd/config.toml");
    assert!(
        containerd.ends_with(
            "\n[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.runsc]\n  runtime_type = \"io.containerd.runsc.v1\"\n\n\
             [plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.runsc.options]\n  TypeUrl = \"io.containerd.runsc.v1.options\"\n  ConfigPath = \"/etc/containerd/runsc.toml\"\n"
        ),
        "{containerd}"
    );
    assert_eq!(
        read("etc/containerd/runsc.toml"),
        "# Written by kops-rs nodeup.\n[runsc_config]\n  platform = \"kvm\"\n"
    );
    // A second run changes nothing (the key is fetched again to compare).
    let again = agent::run(&opts).await.unwrap();
    assert_eq!(again.changed(), 0, "{:#?}", again.changes);
}

/// Elsewhere (Amazon Linux here) nothing comes from apt, as in kops; the
/// runtime is registered all the same.
#[tokio::test]
async fn gvisor_worker_off_debian_gets_no_repository() {
    let (env, opts) = gvisor_worker("ID=\"amzn\"\nID_LIKE=\"centos rhel fedora\"\n").await;
    let outcome = agent::run(&opts).await.unwrap();
    assert_eq!(
        outcome.packages,
        PackageAction::NotDebian {
            packages: vec!["runsc".into()]
        }
    );
    let root = env.dir.join("root");
    assert!(!root.join("etc/apt").exists());
    assert!(root.join("etc/containerd/runsc.toml").is_file());
}

/// A worker without gVisor and the control plane get none of it.
#[tokio::test]
async fn nodes_without_gvisor_get_none_of_it() {
    for group in [0, 1] {
        let env = setup_spec(&gvisor_spec(), group).await;
        let opts = options(&env, "root");
        let outcome = agent::run(&opts).await.unwrap();
        assert_eq!(outcome.packages, PackageAction::None);
        let root = env.dir.join("root");
        assert!(!root.join("etc/containerd/runsc.toml").exists());
        let containerd = std::fs::read_to_string(root.join("etc/containerd/config.toml")).unwrap();
        assert!(!containerd.contains("runsc"), "{containerd}");
    }
}

/// A key URL that serves something else (an error page) is refused
/// before anything is written.
#[tokio::test]
async fn a_bad_gvisor_key_is_refused_before_anything_is_written() {
    let (env, opts) = gvisor_worker("ID=debian\n").await;
    env.server.files.lock().unwrap().insert(
        "/gvisor/archive.key".into(),
        b"<html>blocked</html>".to_vec(),
    );
    let err = agent::run(&opts).await.unwrap_err();
    let text = err.to_string();
    assert!(
        text.starts_with("apt repository `gvisor`: cannot use the signing key from `http://"),
        "{text}"
    );
    assert!(text.contains("not an OpenPGP public key"), "{text}");
    assert!(
        !env.dir.join("root/etc/containerd").exists(),
        "nothing written"
    );
}

#[tokio::test]
async fn tampered_asset_is_refused_and_nothing_is_written() {
    let env = setup(1).await;
    env.server
        .files
        .lock()
        .unwrap()
        .insert("/runc/runc.amd64".into(), b"not runc".to_vec());
    let err = agent::run(&options(&env, "root")).await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, NodeupError::HashMismatch { .. }), "{text}");
    assert!(
        text.contains("runc downloaded from `http://127.0.0.1:"),
        "{text}"
    );
    assert!(text.contains("nothing was installed"), "{text}");
    assert!(!env.dir.join("root").exists(), "the root is untouched");

    // On an installed node too: a changed asset is refused and the node's
    // files stay as they were.
    env.server
        .files
        .lock()
        .unwrap()
        .insert("/runc/runc.amd64".into(), b"runc".to_vec());
    agent::run(&options(&env, "root")).await.unwrap();
    let before = tree(&env.dir.join("root"));
    std::fs::remove_file(env.dir.join("root/var/lib/nodeup/assets/runc.amd64")).unwrap();
    let before_minus_stamp = tree(&env.dir.join("root"));
    assert_ne!(before, before_minus_stamp);
    env.server
        .files
        .lock()
        .unwrap()
        .insert("/runc/runc.amd64".into(), b"evil".to_vec());
    let err = agent::run(&options(&env, "root")).await.unwrap_err();
    assert!(matches!(err, NodeupError::HashMismatch { .. }), "{err}");
    assert_eq!(tree(&env.dir.join("root")), before_minus_stamp);
}

#[tokio::test]
async fn changed_node_config_is_refused() {
    let env = setup(1).await;
    let mut bytes = env.state.read(&env.key).await.unwrap().unwrap();
    bytes.extend_from_slice(b"# edited\n");
    env.state
        .write(&env.key, &bytes, Default::default())
        .await
        .unwrap();
    let err = agent::run(&options(&env, "root")).await.unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(err, NodeupError::ConfigHashMismatch { .. }),
        "{text}"
    );
    assert!(text.contains("nothing was installed"), "{text}");
    assert!(text.contains("hint:"), "{text}");
    assert!(!env.dir.join("root").exists());
}

#[tokio::test]
async fn unreachable_mirror_is_a_clear_error() {
    let env = setup(1).await;
    env.server
        .files
        .lock()
        .unwrap()
        .remove("/k8s/v1.34.0/kubectl");
    let err = agent::run(&options(&env, "root")).await.unwrap_err();
    let text = err.to_string();
    assert!(text.contains("cannot download kubectl"), "{text}");
    assert!(text.contains("HTTP 404"), "{text}");
    assert!(!env.dir.join("root").exists());
}

#[test]
fn the_binary_runs_and_says_services_are_not_started() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let env = runtime.block_on(setup(1));
    let run = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_nodeup"))
            .arg("--conf")
            .arg(&env.conf)
            .arg("--root")
            .arg(env.dir.join("root"))
            .args(["--node-name", "i-1", "--arch", "amd64", "--attempts", "1"])
            .output()
            .unwrap()
    };
    // The server thread lives in this process; the runtime is only for setup.
    let out = run();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("services not started: --root is"),
        "{stderr}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("created      0755 /usr/local/bin/kubelet"),
        "{stdout}"
    );
    let out = run();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("nothing to change"), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout)
        .lines()
        .all(|l| l.starts_with("unchanged")));
}

/// [`SPEC`]'s cluster on vSphere (one control-plane VM).
const VSPHERE_SPEC: &str = r#"apiVersion: kops.k8s.io/v1alpha2
kind: Cluster
metadata: {name: nodeup.example.com}
spec:
  cloudProvider: vsphere
  cloudConfig: {vSphereServer: vc.example.com, vSphereDatacenter: DC0, vSphereResourcePool: C0, vSphereDatastore: ds, vSphereControlPlaneVIP: 10.0.0.100}
  kubernetesVersion: v1.34.0
  networkCIDR: 172.20.0.0/16
  etcdClusters:
  - {name: main, etcdMembers: [{name: a, instanceGroup: control-plane-a}]}
  - {name: events, etcdMembers: [{name: a, instanceGroup: control-plane-a}]}
  subnets:
  - {name: a, zone: a, cidr: 172.20.32.0/19, type: Public}
---
apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata: {name: control-plane-a, labels: {kops.k8s.io/cluster: nodeup.example.com}}
spec: {role: Master, image: ubuntu-template, machineType: 2cpu-4gb, minSize: 1, maxSize: 1, subnets: [a]}
"#;

/// A VM's guestinfo as VMware Tools shows it.
#[derive(Debug)]
struct Guestinfo(BTreeMap<String, String>);

impl kops_nodeup::agent::vsphere::Guest for Guestinfo {
    fn get(&self, key: &str) -> Result<Option<String>, String> {
        Ok(self.0.get(key).cloned())
    }
    fn set(&self, _: &str, _: &str) -> Result<(), String> {
        Ok(())
    }
    fn firmware(&self, path: &str) -> Result<Option<Vec<u8>>, String> {
        Ok((path == kops_nodeup::agent::vsphere::bios::PRODUCT_SERIAL)
            .then(|| b"VMware-42 12 ab cd 00 00 00 00-00 00 00 00 00 00 00 01".to_vec()))
    }
}

/// The container command of a static pod manifest.
fn pod_command(path: &Path) -> (Vec<String>, serde_json::Value) {
    let pod: serde_json::Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let command = pod["spec"]["containers"][0]["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    (command, pod)
}

#[tokio::test]
async fn vsphere_control_plane_runs_etcd_manager_on_its_disks() {
    use kops_vsphere::disks::{EtcdDisk, EtcdVolume, ETCD_KEY};
    let env = setup_spec(VSPHERE_SPEC, 0).await;
    // kops-controller's vSphere settings come from the completed spec.
    let (cluster, _) = load(VSPHERE_SPEC);
    env.state
        .write(
            &format!("{CLUSTER}/cluster-completed.spec"),
            kops_api::to_yaml(&cluster).as_bytes(),
            Default::default(),
        )
        .await
        .unwrap();
    let disks: Vec<EtcdDisk> = [("main", 1), ("events", 2)]
        .into_iter()
        .map(|(etcd, unit)| EtcdDisk {
            volume: EtcdVolume {
                etcd: etcd.into(),
                member: "a".into(),
                members: vec!["a".into()],
                addresses: Vec::new(),
                size_gib: 20,
                version: "3.6.12".into(),
            },
            bus: 0,
            unit,
            id: Some(format!("disk-{etcd}")),
        })
        .collect();
    let mut opts = options(&env, "root");
    opts.region = None;
    opts.node_name = Some("control-plane-a-1.nodeup.example.com".into());
    opts.vsphere_guest = Some(Arc::new(Guestinfo(BTreeMap::from([(
        ETCD_KEY.to_string(),
        EtcdDisk::encode_all(&disks),
    )]))));
    let outcome = agent::run(&opts).await.unwrap();
    let root = env.dir.join("root");

    // etcd-manager finds its volume under /mnt/disks (external provider)
    // and its one peer in the static config; backups stay on the VM.
    let (command, pod) =
        pod_command(&root.join("etc/kubernetes/manifests/etcd-manager-main.manifest"));
    for flag in [
        "--volume-provider=external",
        "--volume-tag=nodeup.example.com--main--",
        "--backup-store=file:///mnt/disks/backups/main",
        "--static-config={\"etcdVersion\":\"3.6.12\",\"nodes\":[{\"id\":\"nodeup.example.com--main--a\",\"ip\":[\"172.20.32.10\"]}]}",
    ] {
        assert!(command.iter().any(|c| c == flag), "{flag} not in {command:?}");
    }
    assert!(!command.iter().any(|c| c.contains("aws")), "{command:?}");
    let (events, _) =
        pod_command(&root.join("etc/kubernetes/manifests/etcd-manager-events.manifest"));
    assert!(events
        .iter()
        .any(|c| c == "--volume-tag=nodeup.example.com--events--"));
    assert!(
        pod["spec"]["containers"][0].get("env").is_none(),
        "no AWS_REGION: {pod}"
    );
    let volumes = pod["spec"]["volumes"].as_array().unwrap();
    let host_paths: Vec<&str> = volumes
        .iter()
        .filter_map(|v| v["hostPath"]["path"].as_str())
        .collect();
    assert!(
        host_paths.contains(&"/") && host_paths.contains(&"/mnt/disks/backups/main"),
        "{host_paths:?}"
    );
    // The etcd binaries come from the etcd images (the slim image has none).
    assert!(volumes
        .iter()
        .any(|v| v["image"]["reference"] == "registry.k8s.io/etcd:v3.6.12"));
    let mounts = pod["spec"]["containers"][0]["volumeMounts"]
        .as_array()
        .unwrap();
    assert!(mounts.iter().any(|m| m["mountPath"] == "/opt/etcd-v3.6.12"));

    // The disks are mounted again at boot by label.
    let unit = "etc/systemd/system/mnt-disks-nodeup.example.com\\x2d\\x2dmain\\x2d\\x2da.mount";
    let text = std::fs::read_to_string(root.join(unit)).unwrap();
    assert!(
        text.contains("What=/dev/disk/by-label/kops-etcd-main"),
        "{text}"
    );
    assert!(
        text.contains("Where=/mnt/disks/nodeup.example.com--main--a"),
        "{text}"
    );
    assert!(outcome.changes.iter().any(|c| c.path.ends_with("a.mount")));

    // A control-plane VM cloned without etcd disks is told to be replaced,
    // and nothing is written.
    let mut bare = options(&env, "bare");
    bare.vsphere_guest = Some(Arc::new(Guestinfo(BTreeMap::new())));
    let e = agent::run(&bare).await.unwrap_err().to_string();
    assert!(
        e.contains("no disk for etcd `main`") && e.contains("rolling-update"),
        "{e}"
    );
    assert!(!env.dir.join("bare").exists());

    // HA: three members, each at its control-plane group's static
    // address; etcd-manager maps the peers' names to them.
    let ha = |addresses: Vec<String>| {
        let disks: Vec<EtcdDisk> = disks
            .iter()
            .map(|d| {
                let mut d = d.clone();
                d.volume.members = vec!["a".into(), "b".into(), "c".into()];
                d.volume.addresses = addresses.clone();
                d
            })
            .collect();
        Arc::new(Guestinfo(BTreeMap::from([(
            ETCD_KEY.to_string(),
            EtcdDisk::encode_all(&disks),
        )])))
    };
    let mut three = options(&env, "three");
    three.region = None;
    three.node_name = opts.node_name.clone();
    three.vsphere_guest = Some(ha(vec![
        "10.0.0.11".into(),
        "10.0.0.12".into(),
        "10.0.0.13".into(),
    ]));
    agent::run(&three).await.unwrap();
    let (command, _) = pod_command(
        &env.dir
            .join("three/etc/kubernetes/manifests/etcd-manager-main.manifest"),
    );
    let want = "--static-config={\"etcdVersion\":\"3.6.12\",\"nodes\":[\
        {\"id\":\"nodeup.example.com--main--a\",\"ip\":[\"10.0.0.11\"]},\
        {\"id\":\"nodeup.example.com--main--b\",\"ip\":[\"10.0.0.12\"]},\
        {\"id\":\"nodeup.example.com--main--c\",\"ip\":[\"10.0.0.13\"]}]}";
    assert!(
        command.iter().any(|c| c == want),
        "{want} not in {command:?}"
    );
    assert!(command
        .iter()
        .any(|c| c == "--dns-suffix=.internal.nodeup.example.com"));
    // Three members and no addresses (a VM cloned before they were
    // given): no member could reach another, so nodeup stops and says
    // what to do, writing nothing.
    let mut dhcp = options(&env, "dhcp");
    dhcp.region = None;
    dhcp.vsphere_guest = Some(ha(Vec::new()));
    let e = agent::run(&dhcp).await.unwrap_err().to_string();
    assert!(
        e.contains("has 3 members but guestinfo.kops.etcd gives 0 addresses")
            && e.contains("vSphereControlPlaneAddresses"),
        "{e}"
    );
    assert!(!env.dir.join("dhcp").exists());
}

/// With a custom S3 state store (MinIO on vSphere and bare metal), the
/// store's secret key reaches kops-controller and the addon applier, and
/// nothing else: every file nodeup writes on a control-plane node that
/// holds it, or a private key, is readable by root alone (0600), and the
/// units (world-readable, printed by `systemctl show`) name only the
/// environment file.
#[tokio::test]
async fn no_credential_outside_root_only_files() {
    const SECRET: &str = "s3-secret-Zq8x$w";
    // What a file holding it shows: the environment file quotes `$`.
    const MARK: &str = "s3-secret-Zq8x";
    // This test's process only (nextest runs each test in its own).
    std::env::set_var("S3_ENDPOINT", "http://127.0.0.1:9000");
    std::env::set_var("S3_ACCESS_KEY_ID", "minio-access");
    std::env::set_var("S3_SECRET_ACCESS_KEY", SECRET);
    let env = setup(0).await;
    agent::run(&options(&env, "root")).await.unwrap();
    let root = env.dir.join("root");
    let mut holding = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                stack.push(path);
                continue;
            }
            use std::os::unix::fs::PermissionsExt;
            let mode = meta.permissions().mode() & 0o7777;
            let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
            let rel = path.strip_prefix(&root).unwrap().display().to_string();
            let credential = text.contains(MARK) || text.contains("PRIVATE KEY");
            assert!(
                !credential || mode & 0o077 == 0,
                "/{rel} holds a credential at mode {mode:04o}"
            );
            if text.contains(MARK) {
                holding.push(format!("/{rel} {mode:04o}"));
            }
            if rel.ends_with(".service") {
                assert!(!text.contains("S3_"), "/{rel} names the store's variables");
            }
        }
    }
    holding.sort();
    assert_eq!(
        holding,
        [
            "/etc/sysconfig/kops-channels 0600",
            "/etc/sysconfig/kops-controller 0600"
        ]
    );
    for (unit, file) in [
        ("kops-controller.service", "kops-controller"),
        ("kops-channels.service", "kops-channels"),
    ] {
        let text = std::fs::read_to_string(root.join("etc/systemd/system").join(unit)).unwrap();
        assert!(
            text.contains(&format!("EnvironmentFile=/etc/sysconfig/{file}\n")),
            "{text}"
        );
    }
    // kops-controller runs as its own user in systemd's sandbox, with
    // room for its 1,024 connections, and owns the files it reads.
    let unit =
        std::fs::read_to_string(root.join("etc/systemd/system/kops-controller.service")).unwrap();
    for line in [
        "User=10011",
        "Group=10011",
        "NoNewPrivileges=yes",
        "CapabilityBoundingSet=",
        "ProtectSystem=strict",
        "PrivateTmp=yes",
        "LimitNOFILE=65536",
    ] {
        assert!(unit.lines().any(|l| l == line), "no `{line}` in\n{unit}");
    }
    for file in [
        "etc/kubernetes/kops-controller/config/config.yaml",
        "etc/kubernetes/kops-controller/pki/kops-controller.key",
        "etc/kubernetes/kops-controller/pki/kubernetes-ca.key",
        "etc/kubernetes/kops-controller/kubeconfig",
        "etc/kubernetes/kops-controller/client.key",
    ] {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(root.join(file)).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (10011, 10011), "/{file}");
    }
    let env_file = std::fs::read_to_string(root.join("etc/sysconfig/kops-controller")).unwrap();
    assert!(
        env_file.contains("S3_SECRET_ACCESS_KEY=\"s3-secret-Zq8x\\$w\"\n"),
        "{env_file}"
    );
}
