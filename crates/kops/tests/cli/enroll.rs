//! `kops toolbox enroll` through the binary, against a real OpenSSH
//! server on loopback (kops-testkit's `Sshd`: Debian's sshd in a mount
//! namespace whose /etc, /opt and /var are overlays, so the "machine" is
//! this one and what the enroll writes is read back from the overlays).
//! nodeup is a stand-in script served from a file:// URL with its sha256
//! (kops' NODEUP_URL_AMD64 / NODEUP_HASH_AMD64): the real bootstrap script
//! downloads it, checks it and runs it.

use std::path::Path;

use serde_json::json;

use crate::common::{command, file_url, Run};

const CLUSTER: &str = "metal.k8s.local";

/// A bare-metal cluster as `kops create cluster --cloud=metal` and
/// `--set spec.api.publicName=IP` make it: one control-plane group, one
/// node group.
fn metal_cluster() -> String {
    format!(
        r#"apiVersion: kops.k8s.io/v1alpha2
kind: Cluster
metadata:
  name: {CLUSTER}
spec:
  api:
    publicName: 127.0.0.1
  cloudProvider: metal
  etcdClusters:
  - etcdMembers: [{{instanceGroup: control-plane-main, name: a}}]
    name: main
  - etcdMembers: [{{instanceGroup: control-plane-main, name: a}}]
    name: events
  kubernetesVersion: v1.34.1
  networkCIDR: 10.0.0.0/16
  networking: {{cni: {{}}}}
  nonMasqueradeCIDR: 100.64.0.0/10
  subnets:
  - {{cidr: 10.0.0.0/16, name: main, type: Public, zone: main}}
  topology:
    dns:
      type: None
---
apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata:
  labels: {{kops.k8s.io/cluster: {CLUSTER}}}
  name: control-plane-main
spec: {{machineType: metal, maxSize: 1, minSize: 1, role: ControlPlane, subnets: [main]}}
---
apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata:
  labels: {{kops.k8s.io/cluster: {CLUSTER}}}
  name: nodes-main
spec: {{machineType: metal, maxSize: 1, minSize: 1, role: Node, subnets: [main]}}
"#
    )
}

/// A state store holding the metal cluster.
fn metal_store(dir: &Path) -> String {
    let state = file_url(&dir.join("state"));
    let manifest = dir.join("metal.yaml");
    std::fs::write(&manifest, metal_cluster()).unwrap();
    let r: Run = command(&[
        "create",
        "-f",
        manifest.to_str().unwrap(),
        "--state",
        &state,
    ])
    .output()
    .unwrap()
    .into();
    assert_eq!(r.code, 0, "create -f: {}", r.stderr);
    state
}

/// A stand-in nodeup (records its arguments and the boot config it was
/// given) published as kops publishes nodeup (`<url>.xz`), with the
/// variables that point the bootstrap script at it.
fn fake_nodeup(dir: &Path) -> Vec<(String, String)> {
    let script = "#!/bin/bash\nset -e\necho \"$@\" > /opt/kops/nodeup-ran\ncat /opt/kops/conf/kube_env.yaml >> /opt/kops/nodeup-ran\n";
    let plain = dir.join("nodeup");
    std::fs::write(&plain, script).unwrap();
    let status = std::process::Command::new("xz")
        .args(["-k", "-f"])
        .arg(&plain)
        .status()
        .expect("xz");
    assert!(status.success());
    use sha2::Digest;
    let sha = sha2::Sha256::digest(script.as_bytes());
    let hex: String = sha.iter().map(|b| format!("{b:02x}")).collect();
    vec![
        ("NODEUP_URL_AMD64".into(), file_url(&plain)),
        ("NODEUP_HASH_AMD64".into(), hex),
    ]
}

fn enroll(
    sshd: &kops_testkit::sshd::Sshd,
    state: &str,
    extra: &[&str],
    env: &[(String, String)],
) -> Run {
    let port = sshd.port().to_string();
    let mut args = vec![
        "toolbox",
        "enroll",
        "--state",
        state,
        "--cluster",
        CLUSTER,
        "--host",
        "127.0.0.1",
        "--ssh-port",
        &port,
    ];
    args.extend_from_slice(extra);
    let mut c = command(&args);
    c.env("KOPS_FEATURE_FLAGS", "Metal")
        .env("SSH_AUTH_SOCK", sshd.agent_socket());
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run kops").into()
}

fn hostname() -> String {
    let out = std::process::Command::new("hostname").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn enroll_asks_for_the_metal_flag_and_its_inputs_first() {
    let refused = |r: Run, text: &str| {
        assert_eq!(r.code, 1, "{}", r.stderr);
        assert!(r.stderr.contains(text), "{}", r.stderr);
        assert_eq!(
            r.stderr.lines().count(),
            2,
            "one line and a hint: {}",
            r.stderr
        );
    };
    let run = |args: &[&str], metal: bool| -> Run {
        let mut c = command(args);
        if metal {
            c.env("KOPS_FEATURE_FLAGS", "Metal");
        }
        c.output().unwrap().into()
    };
    refused(
        run(&["toolbox", "enroll", "--cluster", CLUSTER], false),
        "bare-metal support requires the Metal feature flag to be enabled",
    );
    refused(run(&["toolbox", "enroll"], true), "cluster is required");
    refused(
        run(&["toolbox", "enroll", "--cluster", CLUSTER], true),
        "instance-group is required",
    );
    refused(
        run(
            &[
                "toolbox",
                "enroll",
                "--cluster",
                CLUSTER,
                "--instance-group",
                "nodes",
            ],
            true,
        ),
        "host is required",
    );
}

#[test]
fn enroll_build_host_makes_the_machine_key_once_and_prints_the_host() {
    let Some(sshd) = kops_testkit::sshd::Sshd::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let state = metal_store(dir.path());
    let args = [
        "--instance-group",
        "nodes-main",
        "--pod-cidr",
        "10.1.0.0/24",
        "--build-host",
    ];
    let first = enroll(&sshd, &state, &args, &[]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let key = sshd
        .written("/etc/kubernetes/kops/pki/machine/public.pem")
        .expect("the machine's public key was made");
    let key = String::from_utf8(key).unwrap();
    assert!(key.starts_with("-----BEGIN PUBLIC KEY-----"), "{key}");
    assert!(sshd
        .written("/etc/kubernetes/kops/pki/machine/private.pem")
        .is_some());
    let host: serde_json::Value = serde_yaml_ng::from_str(&first.stdout).unwrap();
    assert_eq!(
        host,
        json!({
            "apiVersion": "kops.k8s.io/v1alpha2",
            "kind": "Host",
            "metadata": {"name": hostname(), "namespace": "kops-system"},
            "spec": {"instanceGroup": "nodes-main", "podCIDRs": ["10.1.0.0/24"], "publicKey": key.trim()},
        })
    );
    // Again: the key is kept, not made anew.
    let second = enroll(&sshd, &state, &args, &[]);
    assert_eq!(second.code, 0, "{}", second.stderr);
    assert_eq!(first.stdout, second.stdout);
    // Nothing but the key was written, and nodeup never ran.
    assert_eq!(
        sshd.written_under("/etc"),
        vec![
            "kubernetes/kops/pki/machine/private.pem",
            "kubernetes/kops/pki/machine/public.pem"
        ]
    );
    assert!(sshd.written("/opt/kops/nodeup-ran").is_none());
}

#[test]
fn enroll_control_plane_copies_its_config_and_runs_nodeup_over_ssh() {
    let Some(sshd) = kops_testkit::sshd::Sshd::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let state = metal_store(dir.path());
    let env = fake_nodeup(dir.path());
    let r = enroll(
        &sshd,
        &state,
        &["--instance-group", "control-plane-main"],
        &env,
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    // The script's progress is shown, as kops echoes it.
    assert!(
        r.stderr.contains("== nodeup node config starting =="),
        "{}",
        r.stderr
    );
    let ran = String::from_utf8(sshd.written("/opt/kops/nodeup-ran").expect("nodeup ran")).unwrap();
    assert!(ran.contains("--conf=/opt/kops/conf/kube_env.yaml"), "{ran}");
    assert!(
        ran.contains("ConfigBase: file:///etc/kubernetes/kops/config"),
        "{ran}"
    );
    assert!(
        ran.contains("InstanceGroupName: control-plane-main"),
        "{ran}"
    );
    assert!(ran.contains("InstanceGroupRole: ControlPlane"), "{ran}");
    // The machine reads its config from the copies, not the state store.
    let config = sshd
        .written("/etc/kubernetes/kops/config/igconfig/control-plane/control-plane-main/nodeupconfig.yaml")
        .expect("node config copied");
    let config = String::from_utf8(config).unwrap();
    // Written bare, as kops writes a local path (and as its enrolment
    // remaps the channels manifest).
    assert!(
        config.contains(
            "channelsManifest: /etc/kubernetes/kops/config/manifests/channels/kops-channels.yaml"
        ),
        "{config}"
    );
    assert!(
        !config.contains(&state),
        "no state-store path left: {config}"
    );
    let written = sshd.written_under("/etc");
    for expected in [
        "kubernetes/kops/config/pki/private/kubernetes-ca/keyset.yaml",
        "kubernetes/kops/config/pki/private/etcd-manager-ca-main/keyset.yaml",
    ] {
        assert!(
            written.iter().any(|w| w == expected),
            "{expected} not in {written:#?}"
        );
    }
    // The script's temporary directory is gone. /tmp is the host's, shared
    // with the other enroll tests running beside this one, whose scripts'
    // directories come and go within seconds: one that stays is a leak.
    let leftovers = || -> Vec<_> {
        std::fs::read_dir("/tmp")
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("kops-enroll."))
            .map(|e| e.path())
            .collect()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !leftovers().is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert!(leftovers().is_empty(), "{:?}", leftovers());
}

#[test]
fn enroll_worker_registers_its_host_then_runs_nodeup() {
    let Some(sshd) = kops_testkit::sshd::Sshd::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let state = metal_store(dir.path());
    let mut env = fake_nodeup(dir.path());
    let api = kops_testkit::kube_api::FakeApi::start();
    api.serve_crd(&json!({
        "spec": {
            "group": "kops.k8s.io",
            "names": {"plural": "hosts", "kind": "Host"},
            "scope": "Namespaced",
            "versions": [{"name": "v1alpha2", "served": true}],
        }
    }));
    let kubeconfig = api.write_kubeconfig(dir.path());
    env.push(("KUBECONFIG".into(), kubeconfig.display().to_string()));
    let r = enroll(&sshd, &state, &["--instance-group", "nodes-main"], &env);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let host = api
        .get(
            "apis/kops.k8s.io/v1alpha2",
            "hosts",
            "kops-system",
            &hostname(),
        )
        .expect("the Host object was created");
    let key = String::from_utf8(
        sshd.written("/etc/kubernetes/kops/pki/machine/public.pem")
            .unwrap(),
    )
    .unwrap();
    assert_eq!(host["spec"]["publicKey"], key.trim());
    assert_eq!(host["spec"]["instanceGroup"], "nodes-main");
    let ran = String::from_utf8(sshd.written("/opt/kops/nodeup-ran").expect("nodeup ran")).unwrap();
    assert!(ran.contains("InstanceGroupName: nodes-main"), "{ran}");
    // A worker gets no copy of the control plane's config.
    assert!(!sshd
        .written_under("/etc")
        .iter()
        .any(|w| w.starts_with("kubernetes/kops/config/")));
    // It signs its requests with its machine key (cloudProvider metal) and
    // asks kops-controller for its node config, which enroll wrote to the
    // state store as `update cluster` does: the config its boot config pins.
    assert!(ran.contains("CloudProvider: metal"), "{ran}");
    assert!(ran.contains("ConfigServer:"), "{ran}");
    let pinned = ran
        .lines()
        .find_map(|l| l.trim().strip_prefix("NodeupConfigHash: "))
        .expect("the boot config pins its node config")
        .trim()
        .to_string();
    let stored = std::fs::read(
        dir.path()
            .join("state")
            .join(CLUSTER)
            .join("igconfig/node/nodes-main/nodeupconfig.yaml"),
    )
    .expect("the worker's node config is in the state store");
    assert_eq!(kops_nodeup::config::config_hash(&stored), pinned);
    // The control plane enrolled next gets the same config, for its
    // kops-controller to hand out (it cannot read the state store).
    let r = enroll(
        &sshd,
        &state,
        &["--instance-group", "control-plane-main"],
        &env,
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let copy = sshd
        .written("/etc/kubernetes/kops/config/igconfig/node/nodes-main/nodeupconfig.yaml")
        .expect("the workers' node config is copied to the control plane");
    assert_eq!(kops_nodeup::config::config_hash(&copy), pinned);
}

#[test]
fn enroll_names_the_host_it_cannot_reach() {
    let Some(sshd) = kops_testkit::sshd::Sshd::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let state = metal_store(dir.path());
    // A port nothing listens on.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut c = command(&[
        "toolbox",
        "enroll",
        "--state",
        &state,
        "--cluster",
        CLUSTER,
        "--instance-group",
        "nodes-main",
        "--host",
        "127.0.0.1",
        "--ssh-port",
        &port.to_string(),
        "--build-host",
    ]);
    c.env("KOPS_FEATURE_FLAGS", "Metal")
        .env("SSH_AUTH_SOCK", sshd.agent_socket());
    let r: Run = c.output().unwrap().into();
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("failed to SSH to `127.0.0.1` (with user `root`)"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
}
