//! The applier against a small Kubernetes API served from the test process
//! (kops_testkit::kube_api: plain HTTP/1.1 on 127.0.0.1, objects in memory):
//! discovery, server-side apply, merge patch, list by label and delete, the
//! endpoints the applier uses.

use kops_channels::{apply_channel, client_from_kubeconfig, AddonOutcome, ApplyOptions, Reason};
use kops_testkit::kube_api::FakeApi;
use serde_json::json;
use sha2::{Digest, Sha256};

fn sha(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

const LABELS: &str =
    "addon.kops.k8s.io/name=example.addons.k8s.io,app.kubernetes.io/managed-by=kops";

fn example_manifest(greeting: &str) -> String {
    format!(
        "apiVersion: v1
kind: ConfigMap
metadata:
  labels:
    addon.kops.k8s.io/name: example.addons.k8s.io
    app.kubernetes.io/managed-by: kops
    k8s-addon: example.addons.k8s.io
  name: example
  namespace: kube-system
data:
  greeting: {greeting}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  labels:
    addon.kops.k8s.io/name: example.addons.k8s.io
    app.kubernetes.io/managed-by: kops
  name: example
  namespace: kube-system
spec:
  replicas: 1
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: example
rules: []
"
    )
}

/// A state store with the channel: `example` (three objects, pruning
/// ConfigMaps) and `gone` (an empty manifest pruning ConfigMaps: an addon
/// turned off).
fn write_store(dir: &std::path::Path, example: &str, example_hash: &str) {
    let addons = dir.join("addons");
    std::fs::create_dir_all(addons.join("example.addons.k8s.io")).unwrap();
    std::fs::create_dir_all(addons.join("gone.addons.k8s.io")).unwrap();
    std::fs::write(addons.join("example.addons.k8s.io/k8s-1.20.yaml"), example).unwrap();
    std::fs::write(addons.join("gone.addons.k8s.io/k8s-1.12.yaml"), "").unwrap();
    let channel = format!(
        "kind: Addons
metadata:
  name: bootstrap
spec:
  addons:
  - id: k8s-1.20
    manifest: example.addons.k8s.io/k8s-1.20.yaml
    manifestHash: {example_hash}
    name: example.addons.k8s.io
    prune:
      kinds:
      - kind: ConfigMap
        labelSelector: {LABELS}
        namespaces:
        - kube-system
    selector:
      k8s-addon: example.addons.k8s.io
  - id: k8s-1.12
    manifest: gone.addons.k8s.io/k8s-1.12.yaml
    manifestHash: {}
    name: gone.addons.k8s.io
    prune:
      kinds:
      - kind: ConfigMap
        labelSelector: addon.kops.k8s.io/name=gone.addons.k8s.io,app.kubernetes.io/managed-by=kops
        namespaces:
        - kube-system
    selector:
      k8s-addon: gone.addons.k8s.io
",
        sha("")
    );
    std::fs::write(addons.join("bootstrap-channel.yaml"), channel).unwrap();
}

fn names(report: &kops_channels::Report) -> Vec<String> {
    report
        .addons
        .iter()
        .map(|a| match a {
            AddonOutcome::Current { name } => format!("current {name}"),
            AddonOutcome::WouldApply { name, .. } => format!("would apply {name}"),
            AddonOutcome::Applied {
                name,
                objects,
                pruned,
                ..
            } => {
                format!("applied {name} ({objects} objects, {pruned} pruned)")
            }
            AddonOutcome::Failed { name, error } => format!("failed {name}: {error}"),
        })
        .collect()
}

#[tokio::test]
async fn applies_prunes_records_and_then_has_nothing_to_do() {
    let api = FakeApi::start();
    let dir = tempfile::tempdir().unwrap();
    let manifest = example_manifest("hello");
    write_store(dir.path(), &manifest, &sha(&manifest));
    let channel = format!(
        "file://{}/addons/bootstrap-channel.yaml",
        dir.path().display()
    );
    let client = client_from_kubeconfig(&api.write_kubeconfig(dir.path()))
        .await
        .unwrap();
    // Left over from an earlier version of each addon.
    let stale = |name: &str, addon: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "kube-system", "labels": {
            "addon.kops.k8s.io/name": addon, "app.kubernetes.io/managed-by": "kops"}}})
    };
    api.put(
        "api/v1",
        "configmaps",
        "kube-system",
        "old-example",
        stale("old-example", "example.addons.k8s.io"),
    );
    api.put(
        "api/v1",
        "configmaps",
        "kube-system",
        "old-gone",
        stale("old-gone", "gone.addons.k8s.io"),
    );
    api.put("api/v1", "configmaps", "kube-system", "users", json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "users", "namespace": "kube-system"}}));

    // Dry run: says what, changes nothing.
    let dry = apply_channel(&client, &channel, &ApplyOptions { dry_run: true })
        .await
        .unwrap();
    assert_eq!(
        names(&dry),
        [
            "would apply example.addons.k8s.io",
            "would apply gone.addons.k8s.io"
        ]
    );
    assert!(api.take_requests().iter().all(|r| r.starts_with("GET ")));

    let report = apply_channel(&client, &channel, &ApplyOptions::default())
        .await
        .unwrap();
    assert_eq!(
        names(&report),
        [
            "applied example.addons.k8s.io (3 objects, 1 pruned)",
            "applied gone.addons.k8s.io (0 objects, 1 pruned)"
        ]
    );
    let cm = api
        .get("api/v1", "configmaps", "kube-system", "example")
        .unwrap();
    assert_eq!(cm["data"]["greeting"], "hello");
    assert!(api
        .get("apis/apps/v1", "deployments", "kube-system", "example")
        .is_some());
    assert!(api
        .get(
            "apis/rbac.authorization.k8s.io/v1",
            "clusterroles",
            "",
            "example"
        )
        .is_some());
    assert!(api
        .get("api/v1", "configmaps", "kube-system", "old-example")
        .is_none());
    assert!(api
        .get("api/v1", "configmaps", "kube-system", "old-gone")
        .is_none());
    assert!(
        api.get("api/v1", "configmaps", "kube-system", "users")
            .is_some(),
        "not the addon's: kept"
    );
    assert_eq!(
        api.record("example.addons.k8s.io").unwrap(),
        json!({"channel": channel, "id": "k8s-1.20", "manifestHash": sha(&manifest), "systemGeneration": 1})
    );
    let ns = api.get("api/v1", "namespaces", "", "kube-system").unwrap();
    assert_eq!(ns["metadata"]["annotations"]["unrelated"], "kept");
    api.take_requests();

    // Second pass: one read of the records, no write.
    let again = apply_channel(&client, &channel, &ApplyOptions::default())
        .await
        .unwrap();
    assert_eq!(
        names(&again),
        [
            "current example.addons.k8s.io",
            "current gone.addons.k8s.io"
        ]
    );
    assert_eq!(api.take_requests(), ["GET /api/v1/namespaces/kube-system"]);

    // A changed manifest: only that addon is applied again.
    let changed = example_manifest("bonjour");
    write_store(dir.path(), &changed, &sha(&changed));
    let third = apply_channel(&client, &channel, &ApplyOptions::default())
        .await
        .unwrap();
    assert_eq!(
        names(&third),
        [
            "applied example.addons.k8s.io (3 objects, 0 pruned)",
            "current gone.addons.k8s.io"
        ]
    );
    assert!(matches!(
        &third.addons[0],
        AddonOutcome::Applied {
            reason: Reason::ManifestChanged,
            ..
        }
    ));
    let cm = api
        .get("api/v1", "configmaps", "kube-system", "example")
        .unwrap();
    assert_eq!(cm["data"]["greeting"], "bonjour");
}

#[tokio::test]
async fn a_manifest_that_does_not_match_its_hash_is_not_applied() {
    let api = FakeApi::start();
    let dir = tempfile::tempdir().unwrap();
    let manifest = example_manifest("hello");
    write_store(dir.path(), &manifest, &sha("something else"));
    let channel = format!(
        "file://{}/addons/bootstrap-channel.yaml",
        dir.path().display()
    );
    let client = client_from_kubeconfig(&api.write_kubeconfig(dir.path()))
        .await
        .unwrap();

    let report = apply_channel(&client, &channel, &ApplyOptions::default())
        .await
        .unwrap();
    assert_eq!(report.failed(), 1);
    let text = names(&report).join("\n");
    assert!(
        text.contains("failed example.addons.k8s.io") && text.contains("hint:"),
        "{text}"
    );
    assert!(
        text.contains("applied gone.addons.k8s.io"),
        "the others go on: {text}"
    );
    assert!(api
        .get("api/v1", "configmaps", "kube-system", "example")
        .is_none());
    assert!(
        api.record("example.addons.k8s.io").is_none(),
        "not recorded, so tried again"
    );
}

#[tokio::test]
async fn a_missing_channel_says_how_to_write_it() {
    let api = FakeApi::start();
    let dir = tempfile::tempdir().unwrap();
    let client = client_from_kubeconfig(&api.write_kubeconfig(dir.path()))
        .await
        .unwrap();
    let channel = format!(
        "file://{}/addons/bootstrap-channel.yaml",
        dir.path().display()
    );
    let err = apply_channel(&client, &channel, &ApplyOptions::default())
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("kops update cluster --yes"), "{err}");
}
