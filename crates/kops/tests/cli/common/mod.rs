//! Runs the built `kops` binary the way a user does.

#![allow(dead_code)]

pub mod kubelet;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// The result of one `kops` run.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// The run, after asserting it succeeded (`args` name it in the failure).
    pub fn expect_ok(self, args: &[&str]) -> Run {
        assert_eq!(
            self.code, 0,
            "kops {args:?}:\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }
}

impl From<Output> for Run {
    fn from(o: Output) -> Self {
        Run {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

/// An Ubuntu image moto ships (moto has none of kops' default images).
pub const IMAGE: &str =
    "099720109477/ubuntu/images/hvm-ssd/ubuntu-xenial-16.04-amd64-server-20170721";

/// `kops create cluster NAME` (one zone, Cilium, no DNS, moto's image) and
/// `kops update cluster --yes` on moto with the state store `state`.
pub fn create_and_apply(moto: &kops_testkit::Moto, name: &str, state: &str) {
    let r = kops_on(
        moto,
        &[
            "create",
            "cluster",
            name,
            "--zones",
            "us-east-1a",
            "--networking",
            "cilium",
            "--state",
            state,
            "--image",
            IMAGE,
            "--dns",
            "none",
        ],
    );
    assert_eq!(r.code, 0, "create: {}", r.stderr);
    let r = kops_on(
        moto,
        &["update", "cluster", name, "--state", state, "--yes"],
    );
    assert_eq!(r.code, 0, "apply: {}", r.stderr);
}

/// A `kops` command with a clean environment (no user state store, no editor).
/// `delete cluster NAME --state STATE --yes`, with passes 100 ms apart
/// (moto answers at once; the default interval would only slow the test).
pub fn delete_args<'a>(cluster: &'a str, state: &'a str) -> [&'a str; 8] {
    [
        "delete",
        "cluster",
        cluster,
        "--state",
        state,
        "--yes",
        "--interval",
        "100ms",
    ]
}

/// `update cluster NAME --state STATE --target terraform --out OUT`.
pub fn terraform_args<'a>(cluster: &'a str, state: &'a str, out: &'a str) -> [&'a str; 9] {
    [
        "update",
        "cluster",
        cluster,
        "--state",
        state,
        "--target",
        "terraform",
        "--out",
        out,
    ]
}

pub fn command(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kops"));
    c.args(args)
        .env_remove("KOPS_STATE_STORE")
        .env_remove("KOPS_CLUSTER_NAME")
        .env_remove("EDITOR")
        .env_remove("KUBE_EDITOR")
        .env("HOME", "/nonexistent-home")
        // `update cluster --yes` writes a kubeconfig, as kops does: one
        // file per test process, under cargo's scratch directory.
        .env("KUBECONFIG", scratch_kubeconfig())
        .env_remove("CLOUDSDK_CONFIG")
        .env_remove("CLOUDSDK_CORE_PROJECT")
        .env_remove("CLOUDSDK_ACTIVE_CONFIG_NAME")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null());
    c
}

/// The kubeconfig of this test process (see [`command`]).
pub fn scratch_kubeconfig() -> String {
    format!(
        "{}/kubeconfig-{}",
        env!("CARGO_TARGET_TMPDIR"),
        std::process::id()
    )
}

/// Runs `kops ARGS` against moto (its endpoint, region and credentials).
pub fn kops_on(moto: &kops_testkit::Moto, args: &[&str]) -> Run {
    let mut c = command(args);
    for (k, v) in moto.env() {
        c.env(k, v);
    }
    c.output().expect("run kops").into()
}

/// Runs `kops ARGS`.
pub fn kops(args: &[&str]) -> Run {
    command(args).output().expect("run kops").into()
}

/// Runs `kops ARGS` with `stdin` as its standard input.
pub fn kops_stdin(args: &[&str], stdin: &str) -> Run {
    let mut child = command(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn kops");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().expect("wait for kops").into()
}

/// `file://` URL of a directory.
pub fn file_url(dir: &Path) -> String {
    format!("file://{}", dir.display())
}

/// Every file under `dir`, relative, sorted.
pub fn tree(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(base, &p, out);
            } else {
                out.push(p.strip_prefix(base).unwrap().display().to_string());
            }
        }
    }
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// A one-zone cluster `name` (one control plane, one node group of two) as
/// a manifest for `kops create -f`.
pub fn one_zone_cluster(name: &str) -> String {
    format!(
        r#"apiVersion: kops.k8s.io/v1alpha2
kind: Cluster
metadata:
  name: {name}
spec:
  cloudProvider: aws
  etcdClusters:
  - etcdMembers: [{{instanceGroup: control-plane-us-east-1a, name: a}}]
    name: main
  - etcdMembers: [{{instanceGroup: control-plane-us-east-1a, name: a}}]
    name: events
  kubernetesVersion: v1.34.1
  networkCIDR: 172.20.0.0/16
  networking: {{cilium: {{}}}}
  subnets:
  - {{cidr: 172.20.32.0/19, name: us-east-1a, type: Public, zone: us-east-1a}}
---
apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata:
  labels: {{kops.k8s.io/cluster: {name}}}
  name: control-plane-us-east-1a
spec: {{machineType: t3.medium, maxSize: 1, minSize: 1, role: Master, subnets: [us-east-1a]}}
---
apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata:
  labels: {{kops.k8s.io/cluster: {name}}}
  name: nodes
spec: {{machineType: t3.medium, maxSize: 2, minSize: 2, role: Node, subnets: [us-east-1a]}}
"#
    )
}

/// Runs `f` on a runtime of its own with an AWS SDK configuration for the
/// moto at `endpoint` (us-east-1, moto's test credentials): how the tests
/// look at what the binary left in the cloud.
pub fn with_moto_sdk<T, F: std::future::Future<Output = T>>(
    endpoint: &str,
    f: impl FnOnce(aws_config::SdkConfig) -> F,
) -> T {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .endpoint_url(endpoint)
            .region(aws_config::Region::new("us-east-1"))
            .credentials_provider(aws_sdk_ec2::config::Credentials::new(
                "testing", "testing", None, None, "moto",
            ))
            .load()
            .await;
        f(config).await
    })
}
