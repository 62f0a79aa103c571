//! gVisor against the real kops: both binaries create the same cluster on
//! one moto (a fresh S3 state store each), add a worker group with
//! `containerd.gvisor.enabled`, and render it with `update cluster
//! --target terraform`. The `gvisor` RuntimeClass manifest, its bootstrap
//! channel entry (id, hash, selector) and the group's node config must be
//! the same (the node config's keypair id aside: each store has its own
//! CA), and both tag the group's autoscaling group with the
//! cluster-autoscaler's `kops.k8s.io/gvisor` label. Both refuse gVisor on
//! the cluster and on a control-plane group.
//!
//! Skipped, with the reason, without moto or the real kops (built by
//! `../shared/tools/gokops/build.sh` into `~/.cache/kops-go/kops-go`, or
//! `KOPS_GO`) and the release and channel beside it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::common::{Run, IMAGE};

const NAME: &str = "gvisor.k8s.local";
const VERSION: &str = "1.34.10";

/// The real kops, its release (KOPS_BASE_URL) and its stable channel.
struct GoKops {
    binary: PathBuf,
    base: String,
    channel: String,
}

fn go_kops() -> Option<GoKops> {
    let binary = std::env::var_os("KOPS_GO").map(PathBuf::from).or_else(|| {
        std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/kops-go/kops-go"))
    });
    let Some(binary) = binary.filter(|b| b.is_file()) else {
        eprintln!(
            "skipped: the real kops is not built (../shared/tools/gokops/build.sh, or KOPS_GO)"
        );
        return None;
    };
    let version = Command::new(&binary)
        .args(["version", "--short"])
        .output()
        .ok()?;
    let version = String::from_utf8_lossy(&version.stdout).trim().to_string();
    let cache = binary.parent()?.to_path_buf();
    let channel = cache.join("kops-src/channels/stable");
    let base = cache.join("kops-base").join(&version);
    if !channel.is_file() || !base.is_dir() {
        eprintln!(
            "skipped: no kops release or channel beside {} ({} / {})",
            binary.display(),
            base.display(),
            channel.display()
        );
        return None;
    }
    Some(GoKops {
        binary,
        base: format!("file://{}/", base.display()),
        channel: format!("file://{}", channel.display()),
    })
}

/// Runs one binary on moto with a clean environment.
fn run(
    moto: &kops_testkit::Moto,
    binary: &Path,
    home: &Path,
    extra_env: &[(&str, &str)],
    args: &[&str],
) -> Run {
    let mut c = Command::new(binary);
    c.args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("NO_COLOR", "1")
        .envs(moto.env())
        // kops reads a custom S3 endpoint from these.
        .env("S3_ENDPOINT", moto.endpoint())
        .env("S3_REGION", "us-east-1")
        .env("S3_ACCESS_KEY_ID", "testing")
        .env("S3_SECRET_ACCESS_KEY", "testing")
        .envs(extra_env.iter().copied())
        .stdin(Stdio::null());
    c.output().expect("run kops").into()
}

/// What one binary rendered.
struct Rendered {
    manifest: String,
    channel_entry: Value,
    node_config: String,
    other_node_config: String,
    terraform: String,
}

const SANDBOXED: &str = "apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata:
  name: sandboxed
  labels:
    kops.k8s.io/cluster: gvisor.k8s.local
spec:
  role: Node
  image: IMAGE
  machineType: t3.medium
  minSize: 1
  maxSize: 1
  subnets: [us-east-1a]
  containerd:
    gvisor:
      enabled: true
";

/// `create cluster`, the gVisor group, `update --target terraform`, with
/// `binary` on its own state store; then the refusals.
fn render(
    moto: &kops_testkit::Moto,
    dir: &Path,
    who: &str,
    binary: &Path,
    extra_env: &[(&str, &str)],
    extra_create: &[&str],
) -> Rendered {
    let bucket = format!("kops-gvisor-{who}");
    moto.create_bucket(&bucket).unwrap();
    let state = format!("s3://{bucket}");
    let home = dir.join(format!("home-{who}"));
    std::fs::create_dir_all(&home).unwrap();
    let key = dir.join("id.pub");
    let key = key.to_str().unwrap();
    let go = |args: &[&str]| {
        let r = run(moto, binary, &home, extra_env, args);
        assert_eq!(r.code, 0, "{who} {args:?}:\n{}\n{}", r.stdout, r.stderr);
    };
    let mut create = vec![
        "create",
        "cluster",
        NAME,
        "--cloud",
        "aws",
        "--zones",
        "us-east-1a",
        "--node-size",
        "t3.medium",
        "--control-plane-size",
        "t3.medium",
        "--kubernetes-version",
        VERSION,
        "--image",
        IMAGE,
        "--ssh-public-key",
        key,
        "--state",
        &state,
    ];
    create.extend_from_slice(extra_create);
    go(&create);
    let group = dir.join(format!("sandboxed-{who}.yaml"));
    std::fs::write(&group, SANDBOXED.replace("IMAGE", IMAGE)).unwrap();
    go(&["create", "-f", group.to_str().unwrap(), "--state", &state]);
    let out = dir.join(format!("out-{who}"));
    go(&[
        "update",
        "cluster",
        NAME,
        "--state",
        &state,
        "--target",
        "terraform",
        "--out",
        out.to_str().unwrap(),
    ]);

    // Both refuse gVisor on the control plane's group and on the cluster.
    for object in [
        &["ig", "control-plane-us-east-1a", "--name", NAME][..],
        &["cluster", NAME][..],
    ] {
        let kind = object[0];
        let mut args = vec!["edit"];
        args.extend_from_slice(object);
        args.extend_from_slice(&[
            "--state",
            &state,
            "--set",
            "spec.containerd.gvisor.enabled=true",
        ]);
        let refused = run(moto, binary, &home, extra_env, &args);
        assert_ne!(refused.code, 0, "{who} {kind}: {}", refused.stderr);
        assert!(
            refused.stderr.contains("spec.containerd.gvisor"),
            "{who} {kind}: {}",
            refused.stderr
        );
    }

    let data = |file: &str| {
        std::fs::read_to_string(out.join("data").join(file))
            .unwrap_or_else(|e| panic!("{who}: data/{file}: {e}"))
    };
    let channel: Value = serde_yaml_ng::from_str(&data(&format!(
        "aws_s3_object_{NAME}-addons-bootstrap_content"
    )))
    .unwrap();
    let channel_entry = channel["spec"]["addons"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "gvisor.addons.k8s.io")
        .unwrap_or_else(|| panic!("{who}: no gvisor addon in the channel"))
        .clone();
    Rendered {
        manifest: data(&format!(
            "aws_s3_object_{NAME}-addons-gvisor.addons.k8s.io-k8s-1.20_content"
        )),
        channel_entry,
        node_config: data("aws_s3_object_nodeupconfig-sandboxed_content"),
        other_node_config: data("aws_s3_object_nodeupconfig-nodes-us-east-1a_content"),
        terraform: std::fs::read_to_string(out.join("kubernetes.tf")).unwrap(),
    }
}

/// The node config without its keypair ids (each store's own CA).
fn without_keypair_ids(config: &str) -> String {
    config
        .lines()
        .filter(|l| !l.starts_with("  kubernetes-ca: "))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The autoscaling group's tag that tells the cluster autoscaler which
/// label a new node of the group will carry.
const GVISOR_TAG: &str =
    "\"k8s.io/cluster-autoscaler/node-template/label/kops.k8s.io/gvisor\" = \"1\"";

#[test]
fn gvisor_renders_as_the_real_kops_renders_it() {
    if kops_testkit::require_moto().is_none() {
        return;
    }
    let Some(go) = go_kops() else { return };
    let moto = kops_testkit::Moto::start().expect("moto");
    let dir = tempfile::tempdir().unwrap();
    let status = Command::new("ssh-keygen")
        .args(["-q", "-t", "rsa", "-N", ""])
        .arg("-f")
        .arg(dir.path().join("id"))
        .status()
        .unwrap();
    assert!(status.success());

    let kops = render(
        &moto,
        dir.path(),
        "go",
        &go.binary,
        &[("KOPS_BASE_URL", &go.base)],
        &["--channel", &go.channel],
    );
    let ours = render(
        &moto,
        dir.path(),
        "rs",
        Path::new(env!("CARGO_BIN_EXE_kops")),
        &[],
        &[],
    );

    // kops writes the manifest without its last line break; the channel's
    // hash is over the trimmed text, as kops hashes it.
    assert_eq!(ours.manifest.trim_end(), kops.manifest);
    assert_eq!(ours.channel_entry, kops.channel_entry);
    assert_eq!(
        without_keypair_ids(&ours.node_config),
        without_keypair_ids(&kops.node_config)
    );
    for rendered in [&ours, &kops] {
        assert!(rendered
            .node_config
            .contains("\nGVisor:\n  enabled: true\n  platform: systrap\n"));
        for absent in ["GVisor:", "  gvisor:", "kops.k8s.io/gvisor"] {
            assert!(!rendered.other_node_config.contains(absent), "{absent}");
        }
        let tagged = rendered
            .terraform
            .lines()
            .filter(|l| l.split_whitespace().collect::<Vec<_>>().join(" ") == GVISOR_TAG)
            .count();
        assert!(tagged > 0, "no {GVISOR_TAG} in kubernetes.tf");
    }
}
