//! The real kops 1.37 on kops-testkit's GCE API test server, for each shape
//! (minimal 1 zone, HA over 3 zones, private topology, internal API load
//! balancer with Cilium), both ways:
//! - kops makes the cluster (`create cluster`, `update cluster --yes`, a
//!   second `update --yes` that changes nothing), kops-rs takes it over
//!   (with kops' release as `KOPS_BASE_URL`: its plan is empty, its `update
//!   --yes` makes no Google write and rewrites no state-store file), and
//!   `delete cluster --yes` leaves nothing; no call is answered 501 (a
//!   method the server lacks);
//! - kops-rs makes the cluster and kops plans only its own kops-controller
//!   addon (by design).
//!
//! Skipped, with the reason, without the real kops built with its Google
//! clients pointed at the endpoint overrides
//! (`../shared/tools/gokops/build-gce.sh`: `~/.cache/kops-go/kops-go-gce`,
//! or `KOPS_GO_GCE`), its release and channel beside it, or Google's
//! discovery documents.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use kops_testkit::GceApi;
use serde_json::Value;

use crate::common::{command, file_url, Run};

const NAME: &str = "gokops.example.com";
const PROJECT: &str = "testproject";

/// The real kops for GCE, its release (KOPS_BASE_URL) and stable channel.
struct GoKops {
    binary: PathBuf,
    base: String,
    channel: String,
}

fn go_kops_gce() -> Option<GoKops> {
    let binary = std::env::var_os("KOPS_GO_GCE")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/kops-go/kops-go-gce"))
        });
    let Some(binary) = binary.filter(|b| b.is_file()) else {
        eprintln!(
            "skipped: the real kops for GCE is not built (../shared/tools/gokops/build-gce.sh, or KOPS_GO_GCE)"
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

/// Runs the real kops on the server with a clean environment.
fn run_go(go: &GoKops, api: &GceApi, home: &Path, args: &[&str]) -> Run {
    let mut c = Command::new(&go.binary);
    c.args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("NO_COLOR", "1")
        .env("KOPS_BASE_URL", &go.base)
        // kops builds a Cloud Storage client on GCE even for a file://
        // store, and that needs credentials or an emulator's address; the
        // store here is a directory, so the address is never called.
        .env("STORAGE_EMULATOR_HOST", "http://127.0.0.1:9")
        .envs(api.env())
        .stdin(Stdio::null());
    c.output().expect("run the real kops").into()
}

/// kops-rs with kops' release as KOPS_BASE_URL: its nodes boot kops'
/// nodeup, as on a cluster kops-rs has just taken over.
fn run_rs(go: &GoKops, api: &GceApi, args: &[&str]) -> Run {
    let mut c = command(args);
    c.envs(api.env()).env("KOPS_BASE_URL", &go.base);
    c.output().expect("run kops-rs").into()
}

/// A home below `work` whose `~/.ssh/id_rsa.pub` is a key kops parses (the
/// conformance cases'); `None`, saying why, without the shared tree.
fn home_with_key(work: &Path) -> Option<(PathBuf, PathBuf)> {
    let case_key =
        kops_testkit::shared_dir()?.join("conformance/kops/update_cluster/minimal_gce/id_rsa.pub");
    let Ok(text) = std::fs::read_to_string(&case_key) else {
        eprintln!("skipped: {} not found", case_key.display());
        return None;
    };
    let home = work.join("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    let key = home.join(".ssh/id_rsa.pub");
    std::fs::write(&key, text).unwrap();
    Some((home, key))
}

/// A cluster shape both ways run: its label in the output and the
/// `create cluster` flags beyond the common ones.
struct Shape {
    label: &'static str,
    flags: &'static [&'static str],
}

const MINIMAL: Shape = Shape {
    label: "minimal 1 zone",
    flags: &["--zones", "us-central1-a"],
};

/// Three control-plane groups (one per zone), each with its etcd disks.
const HA: Shape = Shape {
    label: "HA over 3 zones",
    flags: &[
        "--zones",
        "us-central1-a,us-central1-b,us-central1-c",
        "--control-plane-zones",
        "us-central1-a,us-central1-b,us-central1-c",
    ],
};

/// Private subnets: kops makes a Cloud NAT router for them.
const PRIVATE: Shape = Shape {
    label: "private topology",
    flags: &["--zones", "us-central1-a", "--topology", "private"],
};

/// kops allows an internal API load balancer only with a private subnet.
const INTERNAL_LB_CILIUM: Shape = Shape {
    label: "internal load balancer, Cilium",
    flags: &[
        "--zones",
        "us-central1-a",
        "--topology",
        "private",
        "--api-loadbalancer-type",
        "internal",
        "--networking",
        "cilium",
    ],
};

/// `create cluster` of `shape`: no DNS, kops' stable channel.
fn create_args<'a>(go: &'a GoKops, state: &'a str, key: &'a Path, shape: &Shape) -> Vec<&'a str> {
    let mut args = vec![
        "create",
        "cluster",
        "--name",
        NAME,
        "--cloud",
        "gce",
        "--project",
        PROJECT,
        "--dns",
        "none",
        "--state",
        state,
        "--channel",
        &go.channel,
        "--ssh-public-key",
        key.to_str().unwrap_or_default(),
    ];
    args.extend(shape.flags.iter().copied());
    args
}

/// Every file below `dir` with its bytes, by relative path.
fn snapshot(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                todo.push(path);
            } else if let Ok(bytes) = std::fs::read(&path) {
                let name = path
                    .strip_prefix(dir)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                out.insert(name, bytes);
            }
        }
    }
    out
}

/// Calls answered 501 (methods the server lacks).
fn unserved(api_calls: &[kops_testkit::gce_api::Call]) -> Vec<String> {
    api_calls
        .iter()
        .filter(|c| c.status == 501)
        .map(|c| format!("{} {}", c.http_method, c.path))
        .collect()
}

/// The planned changes of a JSON plan: `Kind/name field` lines.
fn planned(plan: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for section in ["create", "modify"] {
        for task in plan[section].as_array().into_iter().flatten() {
            let key = format!(
                "{}/{}",
                task["kind"].as_str().unwrap_or(""),
                task["name"].as_str().unwrap_or("")
            );
            if section == "create" {
                out.push(format!("create {key}"));
                continue;
            }
            for change in task["changes"].as_array().into_iter().flatten() {
                let field = change["path"]
                    .as_str()
                    .or(change["field"].as_str())
                    .unwrap_or("");
                out.push(format!(
                    "modify {key} {field}: {} -> {}",
                    change["from"], change["to"]
                ));
            }
        }
    }
    out
}

/// The writes among `calls`, as `METHOD path` lines.
fn writes(calls: &[kops_testkit::gce_api::Call]) -> Vec<String> {
    calls
        .iter()
        .filter(|c| c.is_write())
        .map(|c| format!("{} {}", c.method, c.path))
        .collect()
}

/// The real kops makes a cluster of `shape` (create, `update --yes`, a
/// second `update --yes` that writes nothing), kops-rs takes it over (its
/// plan is empty, its `update --yes` makes no Google write and rewrites no
/// state-store file), and kops deletes it to nothing.
fn kops_made_cluster_taken_over(shape: &Shape) {
    let Some(go) = go_kops_gce() else { return };
    let Some(api) = kops_testkit::require_gce_api() else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let Some((home, key)) = home_with_key(work.path()) else {
        return;
    };
    let label = shape.label;
    let state = file_url(&work.path().join("state"));
    let go_ok = |args: &[&str]| {
        let r = run_go(&go, &api, &home, args);
        assert_eq!(
            r.code, 0,
            "kops {args:?}:\nstdout:\n{}\nstderr:\n{}",
            r.stdout, r.stderr
        );
        r
    };
    go_ok(&create_args(&go, &state, &key, shape));
    go_ok(&[
        "update", "cluster", "--name", NAME, "--state", &state, "--yes",
    ]);
    let apply = api.take_calls();
    assert!(unserved(&apply).is_empty(), "501: {:?}", unserved(&apply));
    let resources = api.paths().len();
    go_ok(&[
        "update", "cluster", "--name", NAME, "--state", &state, "--yes",
    ]);
    let again = api.take_calls();
    assert!(unserved(&again).is_empty(), "501: {:?}", unserved(&again));
    println!(
        "[{label}] kops 1.37 on the test server: apply {} calls ({} writes), {resources} resources; second update {} calls, writes {:?}",
        apply.len(),
        writes(&apply).len(),
        again.len(),
        writes(&again)
    );

    // Taking over: kops-rs' plan of the cluster kops made.
    let r = run_rs(
        &go,
        &api,
        &["update", "cluster", NAME, "--state", &state, "-o", "json"],
    );
    let takeover = api.take_calls();
    assert!(writes(&takeover).is_empty(), "a plan wrote");
    let plan: Value = serde_json::from_str(&r.stdout).unwrap_or_else(|e| {
        panic!(
            "kops-rs' plan is not JSON ({e}):\n{}\n{}",
            r.stdout, r.stderr
        )
    });
    let changes = planned(&plan);
    println!(
        "[{label}] kops-rs taking over kops' GCE cluster: exit {}, {} calls, {} changes planned",
        r.code,
        takeover.len(),
        changes.len(),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        changes.is_empty(),
        "kops-rs would change kops' cluster: {changes:#?}"
    );
    let stored = snapshot(&work.path().join("state"));
    let r = run_rs(
        &go,
        &api,
        &["update", "cluster", NAME, "--state", &state, "--yes"],
    );
    let applied = api.take_calls();
    let after = snapshot(&work.path().join("state"));
    let rewritten: Vec<&String> = after
        .iter()
        .filter(|(path, bytes)| stored.get(*path) != Some(*bytes))
        .map(|(path, _)| path)
        .collect();
    let google_writes = writes(&applied);
    println!(
        "[{label}] kops-rs update --yes on kops' GCE cluster: exit {}, {} calls, Google writes {google_writes:?}, state-store files rewritten {rewritten:?}",
        r.code,
        applied.len()
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        google_writes.is_empty(),
        "kops-rs changed kops' cluster: {google_writes:?}"
    );
    assert!(
        rewritten.is_empty(),
        "kops-rs rewrote kops' state-store files: {rewritten:?}"
    );

    go_ok(&[
        "delete", "cluster", "--name", NAME, "--state", &state, "--yes",
    ]);
    let delete = api.take_calls();
    assert!(unserved(&delete).is_empty(), "501: {:?}", unserved(&delete));
    let left: Vec<String> = api
        .paths()
        .into_iter()
        .filter(|p| !p.ends_with("/iamPolicy") && !p.contains("/changes/"))
        .collect();
    println!(
        "[{label}] kops 1.37 delete: {} calls ({} writes); left {left:?}",
        delete.len(),
        writes(&delete).len()
    );
    assert!(left.is_empty(), "delete left: {left:?}");
}

/// What kops may plan on a cluster kops-rs made: its own kops-controller
/// addon and the channel's hash of it (by design), and nothing else.
const DESIGNED: &[&str] = &[
    "AddonManifest/gokops.example.com-addons-kops-controller.addons.k8s.io-k8s-1.16",
    "BootstrapChannel/gokops.example.com-addons-bootstrap",
];

/// The other way: kops-rs makes a cluster of `shape` (with kops' release as
/// `KOPS_BASE_URL`, so its nodes boot kops' nodeup), and the real kops
/// plans only the designed change ([`DESIGNED`]): every state-store file
/// kops-rs wrote (with a `file://` store too) is kops' bytes, and kops keeps
/// every Google resource, control-plane templates included.
fn kops_rs_made_cluster_planned_by_kops(shape: &Shape) {
    let Some(go) = go_kops_gce() else { return };
    let Some(api) = kops_testkit::require_gce_api() else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let Some((home, key)) = home_with_key(work.path()) else {
        return;
    };
    let label = shape.label;
    let state = file_url(&work.path().join("state"));
    let rs_ok = |args: &[&str]| {
        let r = run_rs(&go, &api, args);
        assert_eq!(r.code, 0, "kops-rs {args:?}:\n{}\n{}", r.stdout, r.stderr);
        r
    };
    rs_ok(&create_args(&go, &state, &key, shape));
    rs_ok(&["update", "cluster", NAME, "--state", &state, "--yes"]);
    let apply = api.take_calls();
    let r = run_go(
        &go,
        &api,
        &home,
        &["update", "cluster", "--name", NAME, "--state", &state],
    );
    let plan = api.take_calls();
    assert_eq!(r.code, 0, "{}", r.stderr);
    // The tasks kops would create or modify, as `Kind/name` lines.
    let lines: Vec<&str> = r
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("  "))
        .filter(|l| {
            l.split_once('/').is_some_and(|(kind, _)| {
                !kind.is_empty() && kind.chars().all(|c| c.is_ascii_alphanumeric())
            })
        })
        .collect();
    let unexpected: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| !DESIGNED.contains(l))
        .collect();
    println!(
        "[{label}] kops 1.37 on kops-rs' GCE cluster ({} calls to make it): exit {}, {} calls, {} writes, {} changes planned: {lines:#?}",
        apply.len(),
        r.code,
        plan.len(),
        writes(&plan).len(),
        lines.len(),
    );
    assert!(writes(&plan).is_empty(), "a plan wrote");
    assert!(
        unexpected.is_empty(),
        "kops plans more than its addon on kops-rs' cluster: {unexpected:#?}\n{}",
        r.stdout
    );
    rs_ok(&["delete", "cluster", NAME, "--state", &state, "--yes"]);
}

#[test]
fn real_kops_creates_updates_and_deletes_a_gce_cluster_on_the_test_server() {
    kops_made_cluster_taken_over(&MINIMAL);
}

#[test]
fn kops_rs_takes_over_kops_ha_gce_cluster_over_3_zones() {
    kops_made_cluster_taken_over(&HA);
}

#[test]
fn kops_rs_takes_over_kops_private_gce_cluster() {
    kops_made_cluster_taken_over(&PRIVATE);
}

#[test]
fn kops_rs_takes_over_kops_gce_cluster_with_internal_lb_and_cilium() {
    kops_made_cluster_taken_over(&INTERNAL_LB_CILIUM);
}

#[test]
fn real_kops_plans_only_its_addon_on_a_kops_rs_gce_cluster() {
    kops_rs_made_cluster_planned_by_kops(&MINIMAL);
}

#[test]
fn real_kops_plans_only_its_addon_on_a_kops_rs_ha_gce_cluster() {
    kops_rs_made_cluster_planned_by_kops(&HA);
}

#[test]
fn real_kops_plans_only_its_addon_on_a_kops_rs_private_gce_cluster() {
    kops_rs_made_cluster_planned_by_kops(&PRIVATE);
}

#[test]
fn real_kops_plans_only_its_addon_on_a_kops_rs_gce_cluster_with_internal_lb_and_cilium() {
    kops_rs_made_cluster_planned_by_kops(&INTERNAL_LB_CILIUM);
}
