//! `validate cluster` and `rolling-update cluster` through the binary,
//! against moto_server (whose autoscaling groups replace terminated
//! instances) and a small Kubernetes API served by the test (see
//! `fake_kube`), which registers a Ready node for every new instance.

use crate::common;
use crate::fake_kube;

use std::collections::BTreeMap;
use std::path::Path;

use aws_config::{BehaviorVersion, Region};
use aws_sdk_ec2::config::Credentials;
use aws_sdk_ec2::types::Filter;
use common::{command, file_url, Run};
use fake_kube::{FakeKube, Faults};

use crate::common::IMAGE;

/// Flags that keep a roll quick: no sleeps between steps, fast re-checks.
const FAST: &[&str] = &[
    "--interval",
    "0s",
    "--post-drain-delay",
    "0s",
    "--validate-tick",
    "200ms",
    "--validate-success-pause",
    "0s",
    "--validation-timeout",
    "30s",
];

struct Cluster {
    moto: &'static kops_testkit::Moto,
    name: String,
    state: String,
    dir: tempfile::TempDir,
}

impl Cluster {
    fn kops(&self, args: &[&str]) -> Run {
        let mut c = command(args);
        c.args(["--state", &self.state]);
        for (k, v) in self.moto.env() {
            c.env(k, v);
        }
        c.env("KUBECONFIG", common::scratch_kubeconfig());
        c.output().unwrap().into()
    }

    fn kops_ok(&self, args: &[&str]) -> Run {
        let r = self.kops(args);
        assert_eq!(
            r.code, 0,
            "kops {args:?}:\nstdout:\n{}\nstderr:\n{}",
            r.stdout, r.stderr
        );
        r
    }

    /// Sets the machine type of an instance group through `get` and `replace`.
    fn set_machine_type(&self, group: &str, machine_type: &str) {
        let r = self.kops_ok(&["get", "ig", group, "--name", &self.name, "-o", "yaml"]);
        let mut yaml = String::new();
        for line in r.stdout.lines() {
            if line.trim_start().starts_with("machineType:") {
                let indent = &line[..line.len() - line.trim_start().len()];
                yaml.push_str(&format!("{indent}machineType: {machine_type}\n"));
            } else {
                yaml.push_str(line);
                yaml.push('\n');
            }
        }
        let file = self.dir.path().join(format!("{group}.yaml"));
        std::fs::write(&file, yaml).unwrap();
        self.kops_ok(&["replace", "-f", file.to_str().unwrap()]);
    }

    fn rt(&self) -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    async fn ec2(&self) -> aws_sdk_ec2::Client {
        let config = aws_config::defaults(BehaviorVersion::latest())
            .endpoint_url(self.moto.endpoint())
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new("testing", "testing", None, None, "moto"))
            .load()
            .await;
        aws_sdk_ec2::Client::new(&config)
    }

    /// Running instances: id → (instance group, launch template id, version).
    fn instances(&self) -> BTreeMap<String, (String, String, String)> {
        self.rt().block_on(async {
            let ec2 = self.ec2().await;
            let out = ec2
                .describe_instances()
                .filters(
                    Filter::builder()
                        .name("tag:KubernetesCluster")
                        .values(&self.name)
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
            let mut map = BTreeMap::new();
            for r in out.reservations() {
                for i in r.instances() {
                    let tag = |k: &str| {
                        i.tags()
                            .iter()
                            .find(|t| t.key() == Some(k))
                            .and_then(|t| t.value())
                            .unwrap_or_default()
                            .to_string()
                    };
                    map.insert(
                        i.instance_id().unwrap().to_string(),
                        (
                            tag("kops.k8s.io/instancegroup"),
                            tag("aws:ec2launchtemplate:id"),
                            tag("aws:ec2launchtemplate:version"),
                        ),
                    );
                }
            }
            map
        })
    }

    /// Launch template id → latest version number.
    fn latest_versions(&self) -> BTreeMap<String, String> {
        self.rt().block_on(async {
            let ec2 = self.ec2().await;
            let out = ec2.describe_launch_templates().send().await.unwrap();
            out.launch_templates()
                .iter()
                .map(|t| {
                    (
                        t.launch_template_id().unwrap().to_string(),
                        t.latest_version_number().unwrap().to_string(),
                    )
                })
                .collect()
        })
    }
}

/// moto for these tests: kops-testkit's, which fixes moto's launch
/// template versions (their user data was kept undecoded, so an
/// autoscaling group could never launch from a second version).
fn moto() -> Option<&'static kops_testkit::Moto> {
    kops_testkit::require_moto()
}

/// The column names of the table `stdout` starts with.
fn table_header(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect()
}

/// A private cluster in one zone with a bastion, one control-plane node and
/// two worker nodes, applied to moto.
fn cluster(name: &str) -> Option<Cluster> {
    let moto = moto()?;
    let dir = tempfile::tempdir().unwrap();
    let state = file_url(&dir.path().join("state"));
    let key = dir.path().join("id.pub");
    std::fs::write(&key, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKF1D4tCJrnUwJ/ZQf8x0OY7yS4ALaMtuLZOd6Ymnb6b test@example\n").unwrap();
    let c = Cluster {
        moto,
        name: name.to_string(),
        state,
        dir,
    };
    c.kops_ok(&[
        "create",
        "cluster",
        name,
        "--zones",
        "us-east-1a",
        "--topology",
        "private",
        "--bastion",
        "--node-count",
        "2",
        "--ssh-public-key",
        key.to_str().unwrap(),
        "--image",
        IMAGE,
    ]);
    c.kops_ok(&["update", "cluster", name, "--yes"]);
    Some(c)
}

/// Rows of the rolling-update table: name → (status, needupdate, ready).
fn table(stdout: &str) -> BTreeMap<String, (String, usize, usize)> {
    stdout
        .lines()
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .map(|l| {
            let cells: Vec<&str> = l.split_whitespace().collect();
            (
                cells[0].to_string(),
                (
                    cells[1].to_string(),
                    cells[2].parse().unwrap(),
                    cells[3].parse().unwrap(),
                ),
            )
        })
        .collect()
}

fn kubeconfig_args(path: &Path) -> Vec<String> {
    vec!["--kubeconfig".into(), path.display().to_string()]
}

fn with<'a>(base: &[&'a str], extra: &'a [String]) -> Vec<&'a str> {
    let mut v = base.to_vec();
    v.extend(extra.iter().map(String::as_str));
    v
}

#[test]
fn machine_type_change_rolls_bastion_then_control_plane_then_nodes() {
    let name = "roll.example.com";
    let Some(c) = cluster(name) else { return };
    let kube = FakeKube::start(&c.moto.endpoint(), name, Faults::default());
    let kc = kube.write_kubeconfig(c.dir.path(), name);
    let kc = kubeconfig_args(&kc);

    // Healthy and up to date.
    let r = c.kops_ok(&with(&["validate", "cluster", name], &kc));
    assert!(
        r.stdout.contains(&format!("Your cluster {name} is ready")),
        "{}",
        r.stdout
    );
    let r = c.kops_ok(&with(&["rolling-update", "cluster", name], &kc));
    assert!(
        r.stdout.contains("No rolling-update required."),
        "{}",
        r.stdout
    );
    let header = table_header(&r.stdout);
    assert_eq!(
        header,
        [
            "NAME",
            "STATUS",
            "NEEDUPDATE",
            "READY",
            "MIN",
            "TARGET",
            "MAX",
            "NODES"
        ],
        "{}",
        r.stdout
    );

    // Only the worker group changes: only it needs an update.
    c.set_machine_type("nodes-us-east-1a", "t3.large");
    c.kops_ok(&["update", "cluster", name, "--yes"]);
    let r = c.kops_ok(&with(&["rolling-update", "cluster", name], &kc));
    let rows = table(&r.stdout);
    assert_eq!(
        rows.get("nodes-us-east-1a"),
        Some(&("NeedsUpdate".to_string(), 2, 0)),
        "{}",
        r.stdout
    );
    assert_eq!(
        rows.get("control-plane-us-east-1a"),
        Some(&("Ready".to_string(), 0, 1)),
        "{}",
        r.stdout
    );
    assert_eq!(
        rows.get("bastions"),
        Some(&("Ready".to_string(), 0, 1)),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("Must specify --yes to rolling-update."),
        "{}",
        r.stdout
    );

    // Then every group: all three are listed, and --yes rolls them in order.
    c.set_machine_type("bastions", "t3.small");
    c.set_machine_type("control-plane-us-east-1a", "t3.xlarge");
    c.kops_ok(&["update", "cluster", name, "--yes"]);
    let r = c.kops_ok(&with(&["rolling-update", "cluster", name], &kc));
    let rows = table(&r.stdout);
    assert!(
        rows.values().all(|(s, n, _)| s == "NeedsUpdate" && *n >= 1),
        "{}",
        r.stdout
    );
    let before = c.instances();
    let r = c.kops_ok(&with(
        &with(&["rolling-update", "cluster", name, "--yes"], &kc),
        &FAST.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
    ));
    let terminated: Vec<String> = r
        .stderr
        .lines()
        .filter(|l| l.contains("] terminated "))
        .map(|l| l[1..l.find(']').unwrap()].to_string())
        .collect();
    assert_eq!(
        terminated,
        [
            "bastions",
            "control-plane-us-east-1a",
            "nodes-us-east-1a",
            "nodes-us-east-1a"
        ],
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("detached"),
        "surge 1 on AWS: {}",
        r.stderr
    );

    // Every old instance was cordoned and drained (but the bastion, which
    // is no node); the PDB-free pods were evicted; DaemonSet and static
    // pods were left alone.
    let log = kube.log();
    let old_nodes: Vec<&String> = before
        .iter()
        .filter(|(_, (g, _, _))| g != "bastions")
        .map(|(id, _)| id)
        .collect();
    for id in &old_nodes {
        assert!(log.contains(&format!("cordon {id}")), "{id}: {log:?}");
        assert!(log.contains(&format!("taint {id}")), "{id}: {log:?}");
    }
    assert!(
        log.iter().all(|l| !l.contains("evict kube-system/")),
        "{log:?}"
    );
    assert_eq!(
        log.iter()
            .filter(|l| l.starts_with("evict default/web-"))
            .count(),
        2,
        "{log:?}"
    );
    // The control-plane node is cordoned before any worker.
    let cp = before
        .iter()
        .find(|(_, (g, _, _))| g.starts_with("control-plane"))
        .unwrap()
        .0;
    let first_worker_cordon = log
        .iter()
        .position(|l| {
            l.starts_with("cordon ")
                && old_nodes
                    .iter()
                    .any(|id| **id != *cp && l == &format!("cordon {id}"))
        })
        .unwrap();
    assert!(
        log.iter()
            .position(|l| l == &format!("cordon {cp}"))
            .unwrap()
            < first_worker_cordon,
        "{log:?}"
    );

    // Afterwards every instance is new and runs its template's latest version.
    let after = c.instances();
    let latest = c.latest_versions();
    assert_eq!(after.len(), before.len(), "{after:?}");
    for (id, (group, template, version)) in &after {
        assert!(!before.contains_key(id), "{id} of {group} was not replaced");
        assert_eq!(
            Some(version),
            latest.get(template),
            "{id} of {group} runs {template}:{version}"
        );
    }
    let r = c.kops_ok(&with(&["rolling-update", "cluster", name], &kc));
    assert!(
        r.stdout.contains("No rolling-update required."),
        "{}",
        r.stdout
    );
    let r = c.kops_ok(&with(&["validate", "cluster", name], &kc));
    assert!(r.stdout.contains("is ready"), "{}", r.stdout);
}

#[test]
fn cloudonly_rolls_without_a_kubernetes_api_and_finishes_an_interrupted_surge() {
    let name = "cloudonly.example.com";
    let Some(c) = cluster(name) else { return };
    c.set_machine_type("nodes-us-east-1a", "t3.large");
    c.kops_ok(&["update", "cluster", name, "--yes"]);

    // An earlier roll detached one worker for surge and stopped there.
    let worker = c
        .instances()
        .into_iter()
        .find(|(_, (g, _, _))| g == "nodes-us-east-1a")
        .unwrap()
        .0;
    c.rt().block_on(async {
        let config = aws_config::defaults(BehaviorVersion::latest())
            .endpoint_url(c.moto.endpoint())
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new("testing", "testing", None, None, "moto"))
            .load()
            .await;
        let cloud = kops_aws::AwsCloud::from_config("us-east-1", config);
        kops_aws::instances::detach_for_surge(&cloud, &format!("nodes-us-east-1a.{name}"), &worker)
            .await
            .unwrap();
    });

    // No kubeconfig anywhere: --cloudonly must not need one.
    let r = c.kops_ok(&["rolling-update", "cluster", name, "--cloudonly"]);
    let header = table_header(&r.stdout);
    assert_eq!(
        header,
        [
            "NAME",
            "STATUS",
            "NEEDUPDATE",
            "READY",
            "MIN",
            "TARGET",
            "MAX"
        ],
        "{}",
        r.stdout
    );
    let rows = table(&r.stdout);
    // Two outdated members (one launched to replace the detached one is
    // already new) plus the detached instance.
    let (status, need, _) = &rows["nodes-us-east-1a"];
    assert_eq!(status, "NeedsUpdate");
    assert!(*need >= 2, "{}", r.stdout);

    let r = c.kops_ok(&[
        "rolling-update",
        "cluster",
        name,
        "--cloudonly",
        "--yes",
        "--interval",
        "0s",
    ]);
    assert!(
        r.stderr.contains(&format!("terminated {worker}")),
        "the detached instance is removed: {}",
        r.stderr
    );
    let after = c.instances();
    let latest = c.latest_versions();
    assert!(!after.contains_key(&worker));
    for (id, (group, template, version)) in &after {
        if group == "nodes-us-east-1a" {
            assert_eq!(Some(version), latest.get(template), "{id}");
        }
    }
    let workers = after
        .values()
        .filter(|(g, _, _)| g == "nodes-us-east-1a")
        .count();
    assert_eq!(workers, 2, "{after:?}");
    let r = c.kops_ok(&["rolling-update", "cluster", name, "--cloudonly"]);
    assert!(
        r.stdout.contains("No rolling-update required."),
        "{}",
        r.stdout
    );
}

#[test]
fn a_pdb_blocked_eviction_fails_after_the_drain_timeout_or_is_skipped_when_asked() {
    let name = "pdb.example.com";
    let Some(c) = cluster(name) else { return };
    let kube = FakeKube::start(
        &c.moto.endpoint(),
        name,
        Faults {
            pdb_blocked_pod: true,
            ..Default::default()
        },
    );
    let kc = kube.write_kubeconfig(c.dir.path(), name);
    let kc = kubeconfig_args(&kc);
    c.set_machine_type("nodes-us-east-1a", "t3.large");
    c.kops_ok(&["update", "cluster", name, "--yes"]);
    let fast: Vec<String> = FAST.iter().map(|s| s.to_string()).collect();
    let roll = |extra: &[&str]| {
        let mut args = with(
            &with(&["rolling-update", "cluster", name, "--yes"], &kc),
            &fast,
        );
        args.extend_from_slice(extra);
        c.kops(&args)
    };
    // The dry run lists the nodes: the fake registers them (and the pod).
    c.kops_ok(&with(&["rolling-update", "cluster", name], &kc));
    let blocked = kube
        .state
        .lock()
        .unwrap()
        .pods
        .keys()
        .find(|k| k.starts_with("default/db-"))
        .cloned()
        .unwrap();
    let r = roll(&["--drain-timeout", "2s"]);
    assert_ne!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("failed to drain node")
            && r.stderr.contains(&blocked)
            && r.stderr.contains("disruption budget")
            && r.stderr.contains("--drain-timeout 2s"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("hint:"), "{}", r.stderr);
    // The blocked node's instance was not terminated.
    let blocked_node = blocked.trim_start_matches("default/db-").to_string();
    assert!(c.instances().contains_key(&blocked_node));

    let r = roll(&["--drain-timeout", "1s", "--fail-on-drain-error=false"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("terminating anyway"), "{}", r.stderr);
    assert!(!c.instances().contains_key(&blocked_node));
    let r = c.kops_ok(&with(&["rolling-update", "cluster", name], &kc));
    assert!(
        r.stdout.contains("No rolling-update required."),
        "{}",
        r.stdout
    );
}

#[test]
fn validate_reports_missing_and_unready_nodes_and_failing_control_plane_pods() {
    let name = "health.example.com";
    let Some(c) = cluster(name) else { return };
    let kube = FakeKube::start(&c.moto.endpoint(), name, Faults::default());
    let kc = kube.write_kubeconfig(c.dir.path(), name);
    let kc = kubeconfig_args(&kc);

    let r = c.kops_ok(&with(&["validate", "cluster", name], &kc));
    for text in [
        "INSTANCE GROUPS",
        "NODE STATUS",
        "control-plane-us-east-1a",
        "nodes-us-east-1a",
        "Your cluster health.example.com is ready",
    ] {
        assert!(r.stdout.contains(text), "{text}: {}", r.stdout);
    }
    let r = c.kops_ok(&with(&["validate", "cluster", name, "-o", "json"], &kc));
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["nodes"].as_array().unwrap().len(), 3, "{v}");
    assert!(v.get("failures").is_none(), "{v}");
    let r = c.kops_ok(&with(&["validate", "cluster", name, "-o", "yaml"], &kc));
    assert!(r.stdout.contains("nodes:"), "{}", r.stdout);

    let instances = c.instances();
    let workers: Vec<&String> = instances
        .iter()
        .filter(|(_, (g, _, _))| g == "nodes-us-east-1a")
        .map(|(id, _)| id)
        .collect();
    let cp = instances
        .iter()
        .find(|(_, (g, _, _))| g.starts_with("control-plane"))
        .unwrap()
        .0;

    // A NotReady node and a failing control-plane pod.
    kube.set_faults(Faults {
        not_ready: [workers[0].clone()].into(),
        failing_control_plane_pods: ["kube-apiserver".to_string()].into(),
        ..Default::default()
    });
    let r = c.kops(&with(&["validate", "cluster", name], &kc));
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("VALIDATION ERRORS"), "{}", r.stdout);
    assert!(
        r.stdout.contains(&format!(
            "node \"{}\" of role \"node\" is not ready",
            workers[0]
        )),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains(&format!(
            "system-cluster-critical pod \"kube-apiserver-{cp}\" is not ready (main)"
        )),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("Validation Failed"), "{}", r.stdout);
    assert!(r.stderr.contains("cluster not yet healthy"), "{}", r.stderr);

    let r = c.kops(&with(&["validate", "cluster", name, "-o", "json"], &kc));
    assert_eq!(r.code, 2);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let kinds: Vec<&str> = v["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["Node", "Pod"], "{v}");
    assert_eq!(
        v["failures"][0]["instanceGroup"]["metadata"]["name"],
        "nodes-us-east-1a"
    );

    // A missing node: a new instance that never joins.
    kube.set_faults(Faults::default());
    let state = kube.state.clone();
    // Remove the node of the second worker and stop it from re-registering,
    // as if its kubelet never started.
    {
        let mut s = state.lock().unwrap();
        s.faults.never_join.insert(workers[1].clone());
        s.nodes.remove(workers[1].as_str());
    }
    let r = c.kops(&with(&["validate", "cluster", name], &kc));
    assert_eq!(r.code, 2, "{}", r.stdout);
    assert!(
        r.stdout.contains(&format!(
            "machine \"{}\" has not yet joined cluster",
            workers[1]
        )),
        "{}",
        r.stdout
    );

    // --wait retries until the deadline and says so.
    let r = c.kops(&with(
        &[
            "validate",
            "cluster",
            name,
            "--wait",
            "1s",
            "--interval",
            "300ms",
        ],
        &kc,
    ));
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("will retry"), "{}", r.stderr);
    assert!(r.stderr.contains("wait time exceeded"), "{}", r.stderr);
}

#[test]
fn reconcile_updates_and_rolls_the_control_plane_before_the_nodes() {
    let name = "reconcile.example.com";
    let Some(c) = cluster(name) else { return };
    let kube = FakeKube::start(&c.moto.endpoint(), name, Faults::default());
    let kc = kube.write_kubeconfig(c.dir.path(), name);
    c.set_machine_type("nodes-us-east-1a", "t3.large");
    c.set_machine_type("control-plane-us-east-1a", "t3.xlarge");
    let before = c.instances();

    // Without --yes: the dry run of update, nothing rolled.
    let r = c.kops_ok(&["reconcile", "cluster", name]);
    assert!(r.stderr.contains("Must specify --yes"), "{}", r.stderr);
    assert_eq!(c.instances(), before);

    let kc_flag = format!("--kubeconfig={}", kc.display());
    let fast: Vec<String> = FAST
        .chunks(2)
        .map(|p| format!("--rolling-update-flag={}={}", p[0], p[1]))
        .collect();
    let r = c.kops_ok(&with(
        &["reconcile", "cluster", name, "--yes", &kc_flag],
        &fast,
    ));
    let steps: Vec<&str> = r
        .stdout
        .lines()
        .filter(|l| {
            l.starts_with("Updating ")
                || l.starts_with("Waiting ")
                || l.starts_with("Performing ")
                || l.starts_with("Pruning ")
        })
        .collect();
    assert_eq!(
        steps,
        [
            "Updating control plane configuration",
            "Waiting for the kubernetes API to be served",
            "Performing rolling-update for control plane",
            "Updating node configuration",
            "Performing rolling-update for nodes",
            "Pruning old resources that are no longer used",
        ],
        "{}",
        r.stdout
    );
    let terminated: Vec<String> = r
        .stderr
        .lines()
        .filter(|l| l.contains("] terminated "))
        .map(|l| l[1..l.find(']').unwrap()].to_string())
        .collect();
    assert_eq!(
        terminated,
        [
            "control-plane-us-east-1a",
            "nodes-us-east-1a",
            "nodes-us-east-1a"
        ],
        "{}",
        r.stderr
    );
    // Everything runs the newest templates: nothing is left to roll.
    let r = c.kops_ok(&[
        "rolling-update",
        "cluster",
        name,
        "--kubeconfig",
        kc.to_str().unwrap(),
    ]);
    assert!(
        r.stdout.contains("No rolling-update required."),
        "{}",
        r.stdout
    );
}
