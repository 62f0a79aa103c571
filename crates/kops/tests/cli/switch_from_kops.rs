//! Switching from kops and keeping going (issue 28), through both binaries
//! on one moto: the real kops (`../shared/tools/gokops/build.sh` builds it
//! into `~/.cache/kops-go/kops-go`, or `KOPS_GO`) creates and applies a
//! cluster (private, bastion, Cilium, 3 zones, 3 control-plane nodes);
//! kops-rs changes a node group, bumps the Kubernetes minor, applies with
//! its own nodeup and rolls with `--cloudonly` (control plane first,
//! workers held at the control plane's kubelet version until it runs the
//! new one); then kops applies again, rolls back to its own nodeup, and
//! deletes the cluster.
//!
//! At each step, for every instance and for a node each group's current
//! launch template would start now: which nodeup it boots (its user
//! data), its labels (its node config, plus the label kops-rs' nodeup
//! gives its control-plane kubelets), and so which servers listen on 3988
//! there: kops' kops-controller pod (the bootstrap channel's DaemonSet,
//! when its node affinity matches the node) and kops-rs' host service
//! (kops-rs' nodeup on a control-plane node). The rule: exactly one on
//! each control-plane node, none on workers, so every control-plane node
//! answers bootstrap requests and no two servers want the port.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use aws_sdk_ec2::types::Filter;
use base64::Engine;
use serde_json::Value;

use crate::common::{Run, IMAGE};

const NAME: &str = "switch.k8s.local";
const BUCKET: &str = "kops-switch-state";
const FROM: &str = "1.33.4";
const TO: &str = "1.34.1";
const FAKE_NODEUP: &[u8] = b"#!/bin/sh\necho 'kops-rs nodeup, for the switch test'\n";

/// The real kops, when built.
fn kops_go() -> Option<PathBuf> {
    let path = std::env::var_os("KOPS_GO").map(PathBuf::from).or_else(|| {
        std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/kops-go/kops-go"))
    })?;
    path.is_file().then_some(path)
}

/// Which nodeup a launch template boots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Nodeup {
    Kops,
    KopsRs,
}

/// One node as its user data and node config make it.
#[derive(Debug)]
struct NodeView {
    /// Instance id, or `<group> (new)` for a node the group would launch now.
    name: String,
    group: String,
    control_plane: bool,
    nodeup: Nodeup,
    labels: BTreeMap<String, String>,
    kubernetes_version: String,
}

/// What listens on 3988 on a node.
fn servers(node: &NodeView, daemonset: Option<&Value>) -> Vec<&'static str> {
    let mut out = Vec::new();
    if daemonset.is_some_and(|ds| schedules_on(ds, &node.labels)) {
        out.push("kops' kops-controller pod");
    }
    if node.control_plane && node.nodeup == Nodeup::KopsRs {
        out.push("kops-rs' kops-controller host service");
    }
    out
}

/// Whether a DaemonSet's required node affinity admits a node with `labels`.
fn schedules_on(ds: &Value, labels: &BTreeMap<String, String>) -> bool {
    let terms = ds.pointer(
        "/spec/template/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms",
    );
    let Some(terms) = terms.and_then(Value::as_array) else {
        return true;
    };
    terms.iter().any(|term| {
        term["matchExpressions"]
            .as_array()
            .into_iter()
            .flatten()
            .all(|e| {
                let key = e["key"].as_str().unwrap_or_default();
                let values: Vec<&str> = e["values"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                match e["operator"].as_str().unwrap_or_default() {
                    "Exists" => labels.contains_key(key),
                    "DoesNotExist" => !labels.contains_key(key),
                    "In" => labels
                        .get(key)
                        .is_some_and(|v| values.contains(&v.as_str())),
                    "NotIn" => !labels
                        .get(key)
                        .is_some_and(|v| values.contains(&v.as_str())),
                    other => panic!("operator {other}"),
                }
            })
    })
}

/// The DaemonSet of a kops-controller addon manifest, if it has one.
fn daemonset_of(manifest: &str) -> Option<Value> {
    serde_yaml_ng::Deserializer::from_str(manifest)
        .filter_map(|d| <Value as serde::Deserialize>::deserialize(d).ok())
        .find(|v| v["kind"] == "DaemonSet")
}

/// A running instance: id, group, launch template id and version.
type Instance = (String, String, String, String);

struct Switch {
    moto: kops_testkit::Moto,
    go: PathBuf,
    go_base: String,
    channel: String,
    tmp: tempfile::TempDir,
    /// `kops` (kops-rs) copied beside a nodeup of its own.
    rs: PathBuf,
    state: String,
    rt: tokio::runtime::Runtime,
}

impl Switch {
    fn start() -> Option<Switch> {
        kops_testkit::require_moto()?;
        let Some(go) = kops_go() else {
            eprintln!(
                "skipped: the real kops is not built (run ../shared/tools/gokops/build.sh, or set KOPS_GO)"
            );
            return None;
        };
        let version = Command::new(&go)
            .args(["version", "--short"])
            .output()
            .ok()?;
        let version = String::from_utf8_lossy(&version.stdout).trim().to_string();
        let cache = go.parent().unwrap().to_path_buf();
        let go_base = format!("file://{}/kops-base/{version}/", cache.display());
        let channel = format!("file://{}/kops-src/channels/stable", cache.display());
        if !cache.join("kops-src/channels/stable").is_file() {
            eprintln!("skipped: no kops channel beside {}", go.display());
            return None;
        }
        // A moto of its own: the test counts what is left after delete.
        let moto = kops_testkit::Moto::start().expect("moto");
        moto.create_bucket(BUCKET).unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("kops-rs");
        std::fs::create_dir_all(&dir).unwrap();
        let rs = dir.join("kops");
        std::fs::copy(env!("CARGO_BIN_EXE_kops"), &rs).unwrap();
        std::fs::write(dir.join("nodeup-linux-amd64"), FAKE_NODEUP).unwrap();
        std::fs::create_dir_all(tmp.path().join("home")).unwrap();
        let status = Command::new("ssh-keygen")
            .args(["-q", "-t", "rsa", "-N", ""])
            .arg("-f")
            .arg(tmp.path().join("id"))
            .status()
            .unwrap();
        assert!(status.success());
        // kops-state (the test's own reads) finds moto as the binaries do.
        for (k, v) in Self::env_of(&moto) {
            std::env::set_var(k, v);
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        Some(Switch {
            moto,
            go,
            go_base,
            channel,
            tmp,
            rs,
            state: format!("s3://{BUCKET}"),
            rt,
        })
    }

    /// moto, and the custom S3 endpoint both tools read the store through.
    fn env_of(moto: &kops_testkit::Moto) -> Vec<(String, String)> {
        let mut env = moto.env();
        for (k, v) in [
            ("S3_ENDPOINT", moto.endpoint()),
            ("S3_REGION", "us-east-1".into()),
            ("S3_ACCESS_KEY_ID", "testing".into()),
            ("S3_SECRET_ACCESS_KEY", "testing".into()),
        ] {
            env.push((k.to_string(), v));
        }
        env
    }

    fn command(&self, binary: &Path, args: &[&str]) -> Command {
        let mut c = Command::new(binary);
        c.args(args)
            .args(["--state", &self.state])
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.tmp.path().join("home"))
            .env("KUBECONFIG", self.tmp.path().join("kubeconfig"))
            .env("NO_COLOR", "1")
            .envs(Self::env_of(&self.moto))
            .stdin(Stdio::null());
        c
    }

    /// The real kops, with its own release as KOPS_BASE_URL.
    fn go(&self, args: &[&str]) -> Run {
        let mut c = self.command(&self.go, args);
        c.env("KOPS_BASE_URL", &self.go_base);
        c.output().expect("run kops").into()
    }

    /// kops-rs, with the nodeup beside it (no KOPS_BASE_URL: its own).
    fn rs(&self, args: &[&str]) -> Run {
        self.command(&self.rs, args)
            .output()
            .expect("run kops-rs")
            .into()
    }

    /// kops-rs with a kubeconfig whose context `NAME` is `api`.
    fn rs_with_api(&self, args: &[&str], api: &kops_testkit::kube_api::FakeApi) -> Run {
        let path = self.tmp.path().join("fake-kubeconfig");
        std::fs::write(
            &path,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    server: {}\n  name: {NAME}\n\
                 contexts:\n- context:\n    cluster: {NAME}\n    user: u\n  name: {NAME}\ncurrent-context: {NAME}\n\
                 users:\n- name: u\n  user:\n    token: t\n",
                api.url
            ),
        )
        .unwrap();
        self.command(&self.rs, args)
            .env("KUBECONFIG", &path)
            .output()
            .expect("run kops-rs")
            .into()
    }

    fn ok(&self, who: &str, r: Run) -> Run {
        assert_eq!(
            r.code, 0,
            "{who} failed:\nstdout:\n{}\nstderr:\n{}",
            r.stdout, r.stderr
        );
        r
    }

    fn read(&self, key: &str) -> Option<String> {
        self.rt.block_on(async {
            let store = kops_state::open(&self.state).await.unwrap();
            store
                .read(&format!("{NAME}/{key}"))
                .await
                .unwrap()
                .map(|b| String::from_utf8_lossy(&b).into_owned())
        })
    }

    async fn ec2(&self) -> aws_sdk_ec2::Client {
        let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .endpoint_url(self.moto.endpoint())
            .region(aws_config::Region::new("us-east-1"))
            .credentials_provider(aws_sdk_ec2::config::Credentials::new(
                "testing", "testing", None, None, "moto",
            ))
            .load()
            .await;
        aws_sdk_ec2::Client::new(&config)
    }

    /// The running instances as (id, group, template id, version), and
    /// each template's latest version, by template id and name.
    fn cloud(&self) -> (Vec<Instance>, BTreeMap<String, (String, String)>) {
        self.rt.block_on(async {
            let ec2 = self.ec2().await;
            let out = ec2
                .describe_instances()
                .filters(
                    Filter::builder()
                        .name("tag:KubernetesCluster")
                        .values(NAME)
                        .build(),
                )
                .filters(
                    Filter::builder()
                        .name("instance-state-name")
                        .values("running")
                        .build(),
                )
                .send()
                .await
                .unwrap();
            let mut instances = Vec::new();
            for i in out.reservations().iter().flat_map(|r| r.instances()) {
                let tag = |k: &str| {
                    i.tags()
                        .iter()
                        .find(|t| t.key() == Some(k))
                        .and_then(|t| t.value())
                        .unwrap_or_default()
                        .to_string()
                };
                instances.push((
                    i.instance_id().unwrap().to_string(),
                    tag("kops.k8s.io/instancegroup"),
                    tag("aws:ec2launchtemplate:id"),
                    tag("aws:ec2launchtemplate:version"),
                ));
            }
            instances.sort();
            let templates = ec2
                .describe_launch_templates()
                .send()
                .await
                .unwrap()
                .launch_templates()
                .iter()
                .filter(|t| t.launch_template_name().is_some_and(|n| n.ends_with(NAME)))
                .map(|t| {
                    (
                        t.launch_template_id().unwrap().to_string(),
                        (
                            t.launch_template_name().unwrap().to_string(),
                            t.latest_version_number().unwrap().to_string(),
                        ),
                    )
                })
                .collect();
            (instances, templates)
        })
    }

    /// A launch template version's user data, decoded.
    fn user_data(&self, template: &str, version: &str) -> String {
        self.rt.block_on(async {
            let ec2 = self.ec2().await;
            let out = ec2
                .describe_launch_template_versions()
                .launch_template_id(template)
                .versions(version)
                .send()
                .await
                .unwrap();
            let data = out.launch_template_versions()[0]
                .launch_template_data()
                .and_then(|d| d.user_data())
                .unwrap_or_default()
                .to_string();
            String::from_utf8(
                base64::engine::general_purpose::STANDARD
                    .decode(data)
                    .unwrap(),
            )
            .unwrap()
        })
    }

    /// A node booted from `user_data` (None: a bastion, no nodeup).
    fn node(&self, name: String, group: &str, user_data: &str) -> Option<NodeView> {
        if user_data.is_empty() {
            return None;
        }
        let boot = kops_nodeup::bootstrap::boot_config_text(user_data)
            .unwrap_or_else(|| panic!("{name}: no boot config in its user data"));
        let boot = kops_nodeup::bootstrap::BootConfig::parse(boot).unwrap();
        let url = user_data
            .lines()
            .find_map(|l| l.strip_prefix("NODEUP_URL_AMD64="))
            .unwrap_or_else(|| panic!("{name}: no nodeup URL"));
        let nodeup = if url.contains("/kops-rs/nodeup/") {
            Nodeup::KopsRs
        } else {
            assert!(url.contains("kops-base"), "{name}: nodeup from {url}");
            Nodeup::Kops
        };
        let control_plane = boot.instance_group_role == "ControlPlane";
        let dir = if control_plane {
            "control-plane"
        } else {
            "node"
        };
        let text = self
            .read(&format!("igconfig/{dir}/{group}/nodeupconfig.yaml"))
            .unwrap_or_else(|| panic!("{group}: no node config"));
        let config = kops_nodeup::config::parse_yaml(group, &text).unwrap();
        let mut labels: BTreeMap<String, String> = config
            .kubelet_config
            .get("nodeLabels")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
            .collect();
        if control_plane && nodeup == Nodeup::KopsRs {
            labels.insert(
                kops_api::switch::HOST_CONTROLLER_LABEL.into(),
                kops_api::switch::HOST_CONTROLLER_VALUE.into(),
            );
        }
        Some(NodeView {
            name,
            group: group.to_string(),
            control_plane,
            nodeup,
            labels,
            kubernetes_version: config.kubernetes_version,
        })
    }

    /// The kops-controller addon the bootstrap channel lists, checked
    /// against the channel's hash.
    fn controller_manifest(&self) -> String {
        let text = self.read("addons/bootstrap-channel.yaml").expect("channel");
        let channel = kops_channels::Channel::parse("bootstrap-channel.yaml", &text).unwrap();
        let addon = channel
            .spec
            .addons
            .iter()
            .find(|a| a.name == kops_api::switch::KOPS_CONTROLLER_ADDON)
            .expect("kops-controller in the channel");
        let manifest = self
            .read(&format!(
                "addons/{}",
                addon.manifest.trim_start_matches("./")
            ))
            .expect("its manifest");
        addon
            .verify(manifest.as_bytes())
            .unwrap_or_else(|e| panic!("the channel's hash of kops-controller: {e}"));
        manifest
    }

    /// Every running instance and a new node of each group, checked
    /// against the rule; `applied` is the DaemonSet as the cluster holds it
    /// for a node (`None`: the channel's). Returns the nodes.
    fn check(&self, step: &str, applied: &dyn Fn(&NodeView, &str) -> String) -> Vec<NodeView> {
        let manifest = self.controller_manifest();
        let (instances, templates) = self.cloud();
        let mut nodes = Vec::new();
        for (id, group, template, version) in &instances {
            let data = self.user_data(template, version);
            nodes.extend(self.node(id.clone(), group, &data));
        }
        for (id, (name, latest)) in &templates {
            let group = name.split('.').next().unwrap();
            let data = self.user_data(id, latest);
            nodes.extend(self.node(format!("{group} (new)"), group, &data));
        }
        eprintln!("\n== {step}");
        let mut answering = 0;
        for node in &nodes {
            let ds = daemonset_of(&applied(node, &manifest));
            let on = servers(node, ds.as_ref());
            eprintln!(
                "  {:<42} {:<10} {:?} k8s (store's config) {} 3988: {}",
                node.name,
                if node.control_plane {
                    "control"
                } else {
                    "worker"
                },
                node.nodeup,
                node.kubernetes_version,
                if on.is_empty() {
                    "-".to_string()
                } else {
                    on.join(" + ")
                }
            );
            if node.control_plane {
                assert_eq!(
                    on.len(),
                    1,
                    "{step}: {} must run exactly one kops-controller: {on:?}",
                    node.name
                );
                if !node.name.ends_with("(new)") {
                    answering += 1;
                }
            } else {
                assert!(on.is_empty(), "{step}: worker {} runs {on:?}", node.name);
            }
        }
        assert!(
            answering >= 1,
            "{step}: no control-plane node answers on 3988"
        );
        nodes
    }

    /// Nothing of the cluster left on moto.
    fn left(&self) -> Vec<String> {
        let (instances, templates) = self.cloud();
        let mut left: Vec<String> = instances
            .iter()
            .map(|i| format!("instance {}", i.0))
            .collect();
        left.extend(
            templates
                .values()
                .map(|t| format!("launch template {}", t.0)),
        );
        left.extend(
            self.rt
                .block_on(crate::lifecycle::tagged_left(&self.moto.endpoint(), NAME)),
        );
        left
    }
}

/// A node's servers as the channel's manifest schedules them.
fn as_stored(_: &NodeView, manifest: &str) -> String {
    manifest.to_string()
}

/// The DaemonSet as each node's addon applier leaves it: kops-rs' applier
/// (on nodes kops-rs' nodeup set up) applies kops' addon bridged, kops'
/// applier as stored.
fn as_each_applier_applies(node: &NodeView, manifest: &str) -> String {
    if node.nodeup == Nodeup::KopsRs {
        kops_api::switch::bridge_manifest(manifest)
            .unwrap()
            .into_owned()
    } else {
        manifest.to_string()
    }
}

/// The task lines of a plan (`  LaunchTemplate/...`, kops' and kops-rs').
fn planned(stdout: &str) -> BTreeSet<String> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("  "))
        .filter(|l| {
            l.split_once('/').is_some_and(|(kind, _)| {
                !kind.is_empty() && kind.chars().all(|c| c.is_ascii_alphanumeric())
            })
        })
        .map(|l| l.trim().to_string())
        .collect()
}

/// Control-plane nodes at `version` as the Kubernetes API reports them.
fn control_plane_api(nodes: &[NodeView], version: &str) -> kops_testkit::kube_api::FakeApi {
    let api = kops_testkit::kube_api::FakeApi::start();
    for node in nodes
        .iter()
        .filter(|n| n.control_plane && !n.name.ends_with("(new)"))
    {
        api.put(
            "api/v1",
            "nodes",
            "",
            &node.name,
            serde_json::json!({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": node.name, "labels": {"node-role.kubernetes.io/control-plane": ""}},
                "status": {"nodeInfo": {"kubeletVersion": format!("v{version}")}},
            }),
        );
    }
    api
}

#[test]
fn a_kops_cluster_switches_upgrades_rolls_and_goes_back() {
    let Some(s) = Switch::start() else {
        return;
    };
    let pubkey = s.tmp.path().join("id.pub").display().to_string();

    // 1. kops creates and applies.
    s.ok(
        "kops create",
        s.go(&[
            "create",
            "cluster",
            NAME,
            "--cloud",
            "aws",
            "--channel",
            &s.channel,
            "--image",
            IMAGE,
            "--node-size",
            "t3.medium",
            "--control-plane-size",
            "t3.medium",
            "--zones",
            "us-east-1a,us-east-1b,us-east-1c",
            "--control-plane-zones",
            "us-east-1a,us-east-1b,us-east-1c",
            "--topology",
            "private",
            "--bastion",
            "--networking",
            "cilium",
            "--kubernetes-version",
            FROM,
            "--ssh-public-key",
            &pubkey,
        ]),
    );
    s.ok("kops update", s.go(&["update", "cluster", NAME, "--yes"]));
    let nodes = s.check("kops applied", &as_stored);
    assert!(nodes.iter().all(|n| n.nodeup == Nodeup::Kops));
    assert_eq!(
        nodes.iter().filter(|n| n.control_plane).count(),
        6,
        "3 instances, 3 templates"
    );
    let kops_manifest = s.controller_manifest();
    assert!(!kops_manifest.contains(kops_api::switch::HOST_CONTROLLER_LABEL));

    // 2. kops-rs changes a node group and bumps the minor.
    s.ok(
        "kops-rs edit",
        s.rs(&[
            "edit",
            "instancegroup",
            "nodes-us-east-1a",
            "--name",
            NAME,
            "--set",
            "spec.machineType=t3.large",
        ]),
    );
    let r = s.ok(
        "kops-rs upgrade",
        s.rs(&[
            "upgrade",
            "cluster",
            NAME,
            "--kubernetes-version",
            TO,
            "--yes",
        ]),
    );
    eprintln!("upgrade:\n{}", r.stdout);
    // moto has only its own images: keep the groups on it.
    if r.stdout.contains("Image") {
        for zone in ["a", "b", "c"] {
            for group in [
                format!("control-plane-us-east-1{zone}"),
                format!("nodes-us-east-1{zone}"),
            ] {
                s.ok(
                    "kops-rs edit image",
                    s.rs(&[
                        "edit",
                        "instancegroup",
                        &group,
                        "--name",
                        NAME,
                        "--set",
                        &format!("spec.image={IMAGE}"),
                    ]),
                );
            }
        }
        s.ok(
            "kops-rs edit image",
            s.rs(&[
                "edit",
                "instancegroup",
                "bastions",
                "--name",
                NAME,
                "--set",
                &format!("spec.image={IMAGE}"),
            ]),
        );
    }

    // 3. kops-rs applies, its own nodeup in the new templates; the
    // control plane still runs FROM, so workers keep it.
    let api = control_plane_api(&nodes, FROM);
    let r = s.ok(
        "kops-rs update",
        s.rs_with_api(&["update", "cluster", NAME, "--yes"], &api),
    );
    assert!(
        r.stderr
            .contains(&format!("The control plane runs Kubernetes {FROM}")),
        "{}",
        r.stderr
    );
    let bridged = s.controller_manifest();
    assert_eq!(
        bridged,
        kops_api::switch::bridge_manifest(&kops_manifest).unwrap(),
        "kops' addon, bridged"
    );
    let nodes = s.check("kops-rs applied, nothing rolled", &as_stored);
    for node in nodes.iter().filter(|n| n.name.ends_with("(new)")) {
        assert_eq!(node.nodeup, Nodeup::KopsRs, "{}", node.name);
        let want = if node.control_plane { TO } else { FROM };
        assert_eq!(node.kubernetes_version, want, "{}: kubelet skew", node.name);
    }
    for node in nodes.iter().filter(|n| !n.name.ends_with("(new)")) {
        assert_eq!(node.nodeup, Nodeup::Kops, "{} is not rolled yet", node.name);
    }

    // 4. One control-plane node rolled: a mixed control plane.
    let roll = |groups: &str| {
        let r = s.ok(
            "kops-rs rolling-update",
            s.rs(&[
                "rolling-update",
                "cluster",
                NAME,
                "--cloudonly",
                "--yes",
                "--interval",
                "0s",
                "--instance-group",
                groups,
            ]),
        );
        eprintln!("{}", r.stderr);
        r
    };
    roll("control-plane-us-east-1a");
    let nodes = s.check("one control-plane node rolled", &as_stored);
    let rolled: Vec<_> = nodes
        .iter()
        .filter(|n| n.control_plane && !n.name.ends_with("(new)"))
        .map(|n| (n.group.as_str(), n.nodeup))
        .collect();
    assert!(
        rolled.contains(&("control-plane-us-east-1a", Nodeup::KopsRs)),
        "{rolled:?}"
    );
    assert!(
        rolled.contains(&("control-plane-us-east-1b", Nodeup::Kops)),
        "{rolled:?}"
    );

    // 5. The rest, control plane before workers (kops' order).
    let r = s.ok(
        "kops-rs rolling-update",
        s.rs(&[
            "rolling-update",
            "cluster",
            NAME,
            "--cloudonly",
            "--yes",
            "--interval",
            "0s",
        ]),
    );
    let order: Vec<usize> = [
        "control-plane-us-east-1b",
        "control-plane-us-east-1c",
        "nodes-us-east-1a",
    ]
    .iter()
    .map(|g| {
        r.stderr
            .find(g)
            .unwrap_or_else(|| panic!("{g} not rolled:\n{}", r.stderr))
    })
    .collect();
    assert!(
        order[0] < order[2] && order[1] < order[2],
        "control plane first:\n{}",
        r.stderr
    );
    let nodes = s.check("control plane rolled to kops-rs", &as_stored);
    assert!(
        nodes.iter().all(|n| n.nodeup == Nodeup::KopsRs),
        "all on kops-rs' nodeup"
    );

    // 6. The control plane runs TO: the workers follow, and roll.
    let api = control_plane_api(&nodes, TO);
    let r = s.ok(
        "kops-rs update",
        s.rs_with_api(&["update", "cluster", NAME, "--yes"], &api),
    );
    assert!(!r.stderr.contains("The control plane runs"), "{}", r.stderr);
    s.ok(
        "kops-rs rolling-update",
        s.rs(&[
            "rolling-update",
            "cluster",
            NAME,
            "--cloudonly",
            "--yes",
            "--interval",
            "0s",
        ]),
    );
    let nodes = s.check("workers on the new version", &as_stored);
    assert!(
        nodes.iter().all(|n| n.kubernetes_version == TO),
        "all at {TO}"
    );
    let r = s.ok(
        "kops-rs plan",
        s.rs_with_api(&["update", "cluster", NAME], &api),
    );
    assert!(
        r.stderr.contains("No changes") || r.stdout.contains("No changes"),
        "kops-rs: {}\n{}",
        r.stdout,
        r.stderr
    );

    // 7. Back to kops: it plans its own nodeup, its addon and channel.
    let r = s.ok("kops plan", s.go(&["update", "cluster", NAME]));
    let plan = planned(&r.stdout);
    eprintln!("kops plans on the switched cluster:\n{}", r.stdout);
    // What docs/switching-from-kops.md says kops plans: its nodeup in every group's launch
    // template (bastions have none), the control-plane node configs (its
    // images), its own kops-controller addon and the channel's hash of it,
    // and the workers' policy without kops-rs' nodeup grant.
    for line in &plan {
        let documented = line.starts_with("LaunchTemplate/") && !line.contains("bastion")
            || line.starts_with("ManagedFile/nodeupconfig-control-plane-")
            || line.starts_with("AddonManifest/") && line.contains("kops-controller.addons.k8s.io")
            || line.starts_with("BootstrapChannel/")
            || line == &format!("IAMRolePolicy/nodes.{NAME}");
        assert!(
            documented,
            "kops plans an undocumented change: {line}\n{}",
            r.stdout
        );
    }
    eprintln!("kops plans {} changes: {plan:?}", plan.len());
    s.ok("kops update", s.go(&["update", "cluster", NAME, "--yes"]));
    assert_eq!(
        s.controller_manifest(),
        kops_manifest,
        "kops' own addon again"
    );
    // kops-rs' nodes apply kops' addon bridged (their applier); kops' own
    // nodes as stored.
    let nodes = s.check(
        "kops applied, kops-rs' nodes still running",
        &as_each_applier_applies,
    );
    assert!(nodes
        .iter()
        .any(|n| n.nodeup == Nodeup::Kops && n.name.ends_with("(new)")));
    let r = s.go(&[
        "rolling-update",
        "cluster",
        NAME,
        "--cloudonly",
        "--yes",
        "--control-plane-interval",
        "0s",
        "--node-interval",
        "0s",
        "--bastion-interval",
        "0s",
    ]);
    eprintln!(
        "kops rolling-update: rc {}\n{}\n{}",
        r.code, r.stdout, r.stderr
    );
    let nodes = s.check("after kops' rolling-update", &as_each_applier_applies);
    let running = |kind: Nodeup| {
        nodes
            .iter()
            .filter(|n| n.nodeup == kind && !n.name.ends_with("(new)"))
            .count()
    };
    eprintln!(
        "after kops' --cloudonly roll on moto: {} instances boot kops' nodeup, {} kops-rs'",
        running(Nodeup::Kops),
        running(Nodeup::KopsRs)
    );

    // 8. kops deletes it. kops refuses to remove a cluster whose store
    // folder holds files it does not know: kops-rs' uploaded nodeup goes
    // first (docs/switching-from-kops.md says so).
    let r = s.go(&["delete", "cluster", NAME, "--yes"]);
    if r.code != 0 {
        assert!(
            r.stderr.contains("unknown file found") && r.stderr.contains("/kops-rs/nodeup/"),
            "kops delete: {}",
            r.stderr
        );
        s.rt.block_on(async {
            let store = kops_state::open(&s.state).await.unwrap();
            let prefix = format!("{NAME}/kops-rs/");
            for key in store.list(&prefix).await.unwrap() {
                let key = if key.starts_with(&prefix) {
                    key
                } else {
                    format!("{prefix}{key}")
                };
                store.delete(&key).await.unwrap();
            }
        });
        s.ok("kops delete", s.go(&["delete", "cluster", NAME, "--yes"]));
    }
    let left = s.left();
    assert!(left.is_empty(), "left after kops' delete: {left:?}");
}
