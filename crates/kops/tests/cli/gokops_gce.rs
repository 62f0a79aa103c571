//! The real kops 1.37 on kops-testkit's GCE API test server: `create
//! cluster`, `update cluster --yes`, a second `update --yes` that changes
//! nothing, then kops-rs taking the cluster over (with kops' release as
//! `KOPS_BASE_URL`: its plan is empty and its `update --yes` writes
//! nothing), and `delete cluster --yes` leaving nothing; no call is
//! answered 501 (a method the server lacks).
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

/// The cluster both tests make: 1 zone, no DNS, kops' stable channel.
fn create_args<'a>(go: &'a GoKops, state: &'a str, key: &'a Path) -> Vec<&'a str> {
    vec![
        "create",
        "cluster",
        "--name",
        NAME,
        "--cloud",
        "gce",
        "--project",
        PROJECT,
        "--zones",
        "us-central1-a",
        "--dns",
        "none",
        "--state",
        state,
        "--channel",
        &go.channel,
        "--ssh-public-key",
        key.to_str().unwrap_or_default(),
    ]
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

#[test]
fn real_kops_creates_updates_and_deletes_a_gce_cluster_on_the_test_server() {
    let Some(go) = go_kops_gce() else { return };
    let Some(api) = kops_testkit::require_gce_api() else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let Some((home, key)) = home_with_key(work.path()) else {
        return;
    };
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
    go_ok(&create_args(&go, &state, &key));
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
    let writes: Vec<String> = again
        .iter()
        .filter(|c| c.is_write())
        .map(|c| format!("{} {}", c.method, c.path))
        .collect();
    println!(
        "kops 1.37 on the test server: apply {} calls ({} writes), {resources} resources; second update {} calls, writes {writes:?}",
        apply.len(),
        apply.iter().filter(|c| c.is_write()).count(),
        again.len()
    );

    // Taking over: kops-rs' plan of the cluster kops made.
    let r = run_rs(
        &go,
        &api,
        &["update", "cluster", NAME, "--state", &state, "-o", "json"],
    );
    let takeover = api.take_calls();
    assert!(!takeover.iter().any(|c| c.is_write()), "a plan wrote");
    let plan: Value = serde_json::from_str(&r.stdout).unwrap_or_else(|e| {
        panic!(
            "kops-rs' plan is not JSON ({e}):\n{}\n{}",
            r.stdout, r.stderr
        )
    });
    let changes = planned(&plan);
    println!(
        "kops-rs taking over kops' GCE cluster: exit {}, {} calls, {} changes planned",
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
    println!("state-store files kops-rs rewrote: {rewritten:?}");
    let writes: Vec<String> = applied
        .iter()
        .filter(|c| c.is_write())
        .map(|c| format!("{} {}", c.method, c.path))
        .collect();
    println!(
        "kops-rs update --yes on kops' GCE cluster: exit {}, {} calls, writes {writes:?}",
        r.code,
        applied.len()
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        writes.is_empty(),
        "kops-rs changed kops' cluster: {writes:?}"
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
        "kops 1.37 delete: {} calls ({} writes); left {left:?}",
        delete.len(),
        delete.iter().filter(|c| c.is_write()).count()
    );
    assert!(left.is_empty(), "delete left: {left:?}");
}

/// The other way: kops-rs makes the cluster (with kops' release as
/// `KOPS_BASE_URL`, so its nodes boot kops' nodeup), and the real kops
/// plans it: its own kops-controller addon and the channel's hash of it (by
/// design), no other addon, no firewall rule, not kops-version.txt, and it
/// keeps the workers' instance template. Not yet as kops: with a `file://`
/// store kops writes bare paths where kops-rs writes the URL
/// (cluster-completed.spec, the channels manifest, the control-plane node
/// config, and so the control-plane template's user data).
#[test]
fn real_kops_plans_its_addon_and_templates_on_a_kops_rs_gce_cluster() {
    let Some(go) = go_kops_gce() else { return };
    let Some(api) = kops_testkit::require_gce_api() else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let Some((home, key)) = home_with_key(work.path()) else {
        return;
    };
    let state = file_url(&work.path().join("state"));
    let rs_ok = |args: &[&str]| {
        let r = run_rs(&go, &api, args);
        assert_eq!(r.code, 0, "kops-rs {args:?}:\n{}\n{}", r.stdout, r.stderr);
        r
    };
    rs_ok(&create_args(&go, &state, &key));
    rs_ok(&["update", "cluster", NAME, "--state", &state, "--yes"]);
    let apply = api.take_calls();
    let r = run_go(
        &go,
        &api,
        &home,
        &["update", "cluster", "--name", NAME, "--state", &state],
    );
    let plan = api.take_calls();
    println!(
        "kops 1.37 on kops-rs' GCE cluster ({} calls to make it): exit {}, {} calls, writes {}",
        apply.len(),
        r.code,
        plan.len(),
        plan.iter().filter(|c| c.is_write()).count(),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    // What kops plans, by kind: the state-store files kops-rs writes on GCE
    // are kops' bytes (only kops-controller's addon differs, by design).
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
    println!("kops plans on kops-rs' GCE cluster: {lines:#?}");
    for line in &lines {
        if line.starts_with("AddonManifest/") {
            assert!(line.contains("kops-controller.addons.k8s.io"), "{line}");
        }
        assert!(!line.starts_with("FirewallRule/"), "{line}");
        assert!(!line.starts_with("InstanceTemplate/nodes-"), "{line}");
        assert_ne!(*line, "ManagedFile/kops-version.txt");
    }
    rs_ok(&["delete", "cluster", NAME, "--state", &state, "--yes"]);
}
