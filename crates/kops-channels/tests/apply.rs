//! The applier against a small Kubernetes API served from the test process
//! (kops_testkit::kube_api: plain HTTP/1.1 on 127.0.0.1, objects in memory):
//! discovery, server-side apply, merge patch, list by label and delete, the
//! endpoints the applier uses.

use kops_channels::{
    apply_channel, apply_channels, client_from_kubeconfig, AddonOutcome, ApplyOptions, HttpGet,
    Reason,
};
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
    let dry = apply_channel(
        &client,
        &channel,
        &ApplyOptions {
            dry_run: true,
            ..Default::default()
        },
    )
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

/// A custom addon's web server: a Deployment and, unless `without_service`,
/// its Service, labelled so that the channel's prune selector finds them.
fn web_manifest(replicas: u32, without_service: bool) -> String {
    let mut text = format!(
        "apiVersion: v1
kind: Namespace
metadata:
  name: web
---
apiVersion: apps/v1
kind: Deployment
metadata:
  labels:
    app.kubernetes.io/part-of: web
  name: nginx
  namespace: web
spec:
  replicas: {replicas}
  selector:
    matchLabels:
      app: nginx
  template:
    metadata:
      labels:
        app: nginx
    spec:
      containers:
      - image: nginx:1.27
        name: nginx
"
    );
    if !without_service {
        text.push_str(
            "---
apiVersion: v1
kind: Service
metadata:
  labels:
    app.kubernetes.io/part-of: web
  name: nginx
  namespace: web
spec:
  ports:
  - port: 80
  selector:
    app: nginx
",
        );
    }
    text
}

/// A custom channel as kops' docs describe it: an `Addons` index
/// (`addon.yaml`) next to a directory per addon; the addon takes the
/// index's name, records itself in namespace `web` and prunes Deployments
/// and Services of its label.
fn write_custom_channel(dir: &std::path::Path, manifest: &str) {
    std::fs::create_dir_all(dir.join("web.example.org")).unwrap();
    std::fs::write(dir.join("web.example.org/v1.yaml"), manifest).unwrap();
    let index = format!(
        "kind: Addons
metadata:
  name: web.example.org
spec:
  addons:
  - manifest: web.example.org/v1.yaml
    manifestHash: {}
    namespace: web
    version: 1.0.0
    selector:
      k8s-addon: web.example.org
    prune:
      kinds:
      - group: apps
        kind: Deployment
        labelSelector: app.kubernetes.io/part-of=web
      - kind: Service
        labelSelector: app.kubernetes.io/part-of=web
        namespaces:
        - web
",
        sha(manifest)
    );
    std::fs::write(dir.join("addon.yaml"), index).unwrap();
}

fn channel_names(reports: &[kops_channels::ChannelReport]) -> Vec<String> {
    reports
        .iter()
        .flat_map(|r| match &r.result {
            Ok(report) => names(report),
            Err(e) => vec![format!("channel {}: {e}", r.channel)],
        })
        .collect()
}

#[tokio::test]
async fn a_custom_channel_is_applied_with_the_bootstrap_channel_and_pruned() {
    let api = FakeApi::start();
    let dir = tempfile::tempdir().unwrap();
    let manifest = example_manifest("hello");
    write_store(dir.path(), &manifest, &sha(&manifest));
    let custom_dir = dir.path().join("custom");
    let web = web_manifest(2, false);
    write_custom_channel(&custom_dir, &web);
    let bootstrap = format!(
        "file://{}/addons/bootstrap-channel.yaml",
        dir.path().display()
    );
    let custom = format!("file://{}/addon.yaml", custom_dir.display());
    let channels = [bootstrap.clone(), custom.clone()];
    let client = client_from_kubeconfig(&api.write_kubeconfig(dir.path()))
        .await
        .unwrap();

    let first = apply_channels(&client, &channels, &ApplyOptions::default()).await;
    assert_eq!(
        channel_names(&first),
        [
            "applied example.addons.k8s.io (3 objects, 0 pruned)",
            "applied gone.addons.k8s.io (0 objects, 0 pruned)",
            "applied web.example.org (3 objects, 0 pruned)",
        ]
    );
    let deployment = api
        .get("apis/apps/v1", "deployments", "web", "nginx")
        .unwrap();
    assert_eq!(deployment["spec"]["replicas"], 2);
    assert!(api.get("api/v1", "services", "web", "nginx").is_some());
    // Recorded where the addon says, under the channel's location.
    let ns = api.get("api/v1", "namespaces", "", "web").unwrap();
    let record: serde_json::Value = serde_json::from_str(
        ns["metadata"]["annotations"]["addons.k8s.io/web.example.org"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        record,
        json!({"channel": custom, "manifestHash": sha(&web), "systemGeneration": 1})
    );
    assert!(
        api.record("web.example.org").is_none(),
        "not in kube-system"
    );
    api.take_requests();

    // Second pass: the records are read, nothing is written.
    let second = apply_channels(&client, &channels, &ApplyOptions::default()).await;
    assert!(
        channel_names(&second)
            .iter()
            .all(|n| n.starts_with("current ")),
        "{second:?}"
    );
    let writes: Vec<String> = api
        .take_requests()
        .into_iter()
        .filter(|r| !r.starts_with("GET "))
        .collect();
    assert!(writes.is_empty(), "{writes:?}");

    // A new version of the channel drops the Service: it is pruned, the
    // Deployment is updated and kept, the bootstrap channel is untouched.
    let web2 = web_manifest(3, true);
    write_custom_channel(&custom_dir, &web2);
    let third = apply_channels(&client, &channels, &ApplyOptions::default()).await;
    assert_eq!(
        channel_names(&third),
        [
            "current example.addons.k8s.io",
            "current gone.addons.k8s.io",
            "applied web.example.org (2 objects, 1 pruned)",
        ]
    );
    assert!(api.get("api/v1", "services", "web", "nginx").is_none());
    let deployment = api
        .get("apis/apps/v1", "deployments", "web", "nginx")
        .unwrap();
    assert_eq!(deployment["spec"]["replicas"], 3);
    let fourth = apply_channels(&client, &channels, &ApplyOptions::default()).await;
    assert!(
        channel_names(&fourth)
            .iter()
            .all(|n| n.starts_with("current ")),
        "{fourth:?}"
    );
}

/// kops writes a channel in a local state store as a bare path (its
/// kops-channels manifest lists it so), and applies it as the file.
#[tokio::test]
async fn a_channel_at_a_bare_path_is_read_as_a_file() {
    let api = FakeApi::start();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("web.yaml");
    std::fs::write(&path, web_manifest(1, false)).unwrap();
    let location = path.display().to_string();
    let client = client_from_kubeconfig(&api.write_kubeconfig(dir.path()))
        .await
        .unwrap();
    let applied = apply_channel(&client, &location, &ApplyOptions::default())
        .await
        .unwrap();
    let name = format!("manifest-{}", &sha(&location)[..12]);
    assert_eq!(
        names(&applied),
        [format!("applied {name} (3 objects, 0 pruned)")]
    );
    assert_eq!(api.record(&name).unwrap()["channel"], json!(location));
}

#[tokio::test]
async fn a_plain_manifest_is_a_channel_of_one_addon() {
    let api = FakeApi::start();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("web.yaml");
    let web = web_manifest(1, false);
    std::fs::write(&path, format!("\n{web}\n")).unwrap();
    let url = format!("file://{}", path.display());
    let client = client_from_kubeconfig(&api.write_kubeconfig(dir.path()))
        .await
        .unwrap();

    let first = apply_channel(&client, &url, &ApplyOptions::default())
        .await
        .unwrap();
    // kops' name: manifest-<first 12 hex digits of sha256(location)>.
    let name = format!("manifest-{}", &sha(&url)[..12]);
    assert_eq!(
        names(&first),
        [format!("applied {name} (3 objects, 0 pruned)")]
    );
    assert_eq!(
        api.record(&name).unwrap(),
        json!({"channel": url, "manifestHash": sha(web.trim()), "systemGeneration": 1})
    );
    assert!(api
        .get("apis/apps/v1", "deployments", "web", "nginx")
        .is_some());
    let second = apply_channel(&client, &url, &ApplyOptions::default())
        .await
        .unwrap();
    assert_eq!(names(&second), [format!("current {name}")]);

    // Changed: applied again (without a prune spec nothing is deleted, as
    // in kops).
    std::fs::write(&path, web_manifest(4, true)).unwrap();
    let third = apply_channel(&client, &url, &ApplyOptions::default())
        .await
        .unwrap();
    assert_eq!(
        names(&third),
        [format!("applied {name} (2 objects, 0 pruned)")]
    );
    assert!(api.get("api/v1", "services", "web", "nginx").is_some());
}

/// Serves fixed bodies by URL, counting requests.
struct FakeHttp(std::collections::BTreeMap<String, String>);

impl HttpGet for FakeHttp {
    fn get<'a>(&'a self, url: &'a str) -> kops_channels::HttpFuture<'a> {
        let body = self.0.get(url).cloned();
        Box::pin(async move {
            body.map(String::into_bytes)
                .ok_or_else(|| "HTTP 404 Not Found".to_string())
        })
    }
}

#[tokio::test]
async fn https_channels_resolve_their_manifests_and_relative_names_are_refused() {
    let api = FakeApi::start();
    let dir = tempfile::tempdir().unwrap();
    let client = client_from_kubeconfig(&api.write_kubeconfig(dir.path()))
        .await
        .unwrap();
    let web = web_manifest(1, false);
    let index = "kind: Addons
metadata:
  name: web.example.org
spec:
  addons:
  - manifest: ../manifests/./web-v1.yaml
    id: v1
";
    let http = FakeHttp(
        [
            (
                "https://addons.example.org/channels/addon.yaml".to_string(),
                index.to_string(),
            ),
            (
                "https://addons.example.org/manifests/web-v1.yaml".to_string(),
                web.clone(),
            ),
        ]
        .into(),
    );
    let options = ApplyOptions {
        http: Some(std::sync::Arc::new(http)),
        ..Default::default()
    };
    let channels = [
        "https://addons.example.org/channels/addon.yaml".to_string(),
        "https://addons.example.org/channels/missing.yaml".to_string(),
        "web.example.org".to_string(),
    ];
    let reports = apply_channels(&client, &channels, &options).await;
    let text = channel_names(&reports);
    assert_eq!(text[0], "applied web.example.org (3 objects, 0 pruned)");
    assert!(
        text[1].contains("missing.yaml") && text[1].contains("404"),
        "{text:?}"
    );
    assert!(text[2].contains("a channel is a URL"), "{text:?}");
    assert_eq!(api.record("web.example.org").unwrap()["id"], "v1");

    // Without an HTTP client, an https channel is an error, not a panic.
    let err = apply_channel(&client, &channels[0], &ApplyOptions::default())
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("no HTTP client"), "{err}");
}

#[tokio::test]
async fn entries_for_other_kubernetes_versions_are_left_out() {
    let api = FakeApi::start(); // serves v1.33.0
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("web")).unwrap();
    std::fs::write(dir.path().join("web/old.yaml"), web_manifest(1, true)).unwrap();
    std::fs::write(dir.path().join("web/new.yaml"), web_manifest(5, true)).unwrap();
    std::fs::write(
        dir.path().join("addon.yaml"),
        "kind: Addons
metadata:
  name: web.example.org
spec:
  addons:
  - id: k8s-1.20
    manifest: web/old.yaml
    kubernetesVersion: '<1.30.0'
  - id: k8s-1.30
    manifest: web/new.yaml
    kubernetesVersion: '>=1.30.0'
",
    )
    .unwrap();
    let url = format!("file://{}/addon.yaml", dir.path().display());
    let client = client_from_kubeconfig(&api.write_kubeconfig(dir.path()))
        .await
        .unwrap();
    let report = apply_channel(&client, &url, &ApplyOptions::default())
        .await
        .unwrap();
    assert_eq!(
        names(&report),
        ["applied web.example.org (2 objects, 0 pruned)"]
    );
    let deployment = api
        .get("apis/apps/v1", "deployments", "web", "nginx")
        .unwrap();
    assert_eq!(deployment["spec"]["replicas"], 5);
    assert_eq!(api.record("web.example.org").unwrap()["id"], "k8s-1.30");
}

fn fake_ca(name: &str) -> Result<(String, String), String> {
    Ok((format!("CERT {name}"), format!("KEY {name}")))
}

#[tokio::test]
async fn needs_pki_makes_a_ca_secret_and_an_issuer_once() {
    let api = FakeApi::start();
    let dir = tempfile::tempdir().unwrap();
    let addons = dir.path().join("addons");
    std::fs::create_dir_all(&addons).unwrap();
    // cert-manager's addon defines Issuers; the other addon needs PKI.
    std::fs::write(
        addons.join("certmanager.yaml"),
        "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: issuers.cert-manager.io
spec:
  group: cert-manager.io
  names:
    kind: Issuer
    plural: issuers
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
",
    )
    .unwrap();
    std::fs::write(addons.join("metrics.yaml"), config_map("metrics")).unwrap();
    std::fs::write(
        addons.join("bootstrap-channel.yaml"),
        "kind: Addons
metadata:
  name: bootstrap
spec:
  addons:
  - id: k8s-1.11
    manifest: metrics.yaml
    name: metrics-server.addons.k8s.io
    needsPKI: true
  - id: k8s-1.16
    manifest: certmanager.yaml
    name: certmanager.io
",
    )
    .unwrap();
    let url = format!(
        "file://{}/addons/bootstrap-channel.yaml",
        dir.path().display()
    );
    let client = client_from_kubeconfig(&api.write_kubeconfig(dir.path()))
        .await
        .unwrap();
    let options = ApplyOptions {
        new_ca: Some(fake_ca),
        ..Default::default()
    };

    // The issuer's kind comes with the second addon: the first is retried
    // at the end of the pass.
    let first = apply_channel(&client, &url, &options).await.unwrap();
    assert_eq!(
        names(&first),
        [
            "applied metrics-server.addons.k8s.io (1 objects, 0 pruned)",
            "applied certmanager.io (1 objects, 0 pruned)"
        ]
    );
    let secret = api
        .get(
            "api/v1",
            "secrets",
            "kube-system",
            "metrics-server.addons.k8s.io-ca",
        )
        .unwrap();
    assert_eq!(secret["type"], "kubernetes.io/tls");
    assert_eq!(
        secret["stringData"]["tls.crt"],
        "CERT metrics-server.addons.k8s.io"
    );
    let issuer = api
        .get(
            "apis/cert-manager.io/v1",
            "issuers",
            "kube-system",
            "metrics-server.addons.k8s.io",
        )
        .unwrap();
    assert_eq!(
        issuer["spec"]["ca"]["secretName"],
        "metrics-server.addons.k8s.io-ca"
    );
    api.take_requests();

    let second = apply_channel(&client, &url, &options).await.unwrap();
    assert!(
        names(&second).iter().all(|n| n.starts_with("current ")),
        "{second:?}"
    );
    let writes: Vec<String> = api
        .take_requests()
        .into_iter()
        .filter(|r| !r.starts_with("GET "))
        .collect();
    assert!(writes.is_empty(), "{writes:?}");

    // The issuer deleted: made again (the CA is kept), the manifest is not
    // applied again.
    api.take_requests();
    let _ = api.delete(
        "apis/cert-manager.io/v1",
        "issuers",
        "kube-system",
        "metrics-server.addons.k8s.io",
    );
    let third = apply_channel(&client, &url, &options).await.unwrap();
    assert_eq!(
        names(&third)[0],
        "applied metrics-server.addons.k8s.io (0 objects, 0 pruned)"
    );
    assert!(matches!(
        &third.addons[0],
        AddonOutcome::Applied {
            reason: Reason::PkiMissing,
            ..
        }
    ));
    assert!(api
        .get(
            "apis/cert-manager.io/v1",
            "issuers",
            "kube-system",
            "metrics-server.addons.k8s.io"
        )
        .is_some());

    // Without a CA generator the addon fails, saying why.
    let api2 = FakeApi::start();
    let client2 = client_from_kubeconfig(&api2.write_kubeconfig(dir.path()))
        .await
        .unwrap();
    let report = apply_channel(&client2, &url, &ApplyOptions::default())
        .await
        .unwrap();
    assert!(names(&report)[0].contains("no CA generator"), "{report:?}");
}

fn config_map(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: kube-system\n"
    )
}

#[tokio::test]
async fn an_update_that_needs_a_rolling_update_marks_those_nodes() {
    let api = FakeApi::start();
    let dir = tempfile::tempdir().unwrap();
    for (name, role) in [("cp", "master"), ("worker", "node")] {
        api.put(
            "api/v1",
            "nodes",
            "",
            name,
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
                format!("node-role.kubernetes.io/{role}"): ""}}}),
        );
    }
    let write = |manifest: &str| {
        std::fs::write(dir.path().join("net.yaml"), manifest).unwrap();
        std::fs::write(
            dir.path().join("addon.yaml"),
            format!(
                "kind: Addons
metadata:
  name: net.example.org
spec:
  addons:
  - manifest: net.yaml
    manifestHash: {}
    needsRollingUpdate: control-plane
",
                sha(manifest)
            ),
        )
        .unwrap();
    };
    write(&config_map("net-v1"));
    let url = format!("file://{}/addon.yaml", dir.path().display());
    let client = client_from_kubeconfig(&api.write_kubeconfig(dir.path()))
        .await
        .unwrap();
    let marked = |name: &str| {
        api.get("api/v1", "nodes", "", name).unwrap()["metadata"]["annotations"]
            ["kops.k8s.io/needs-update"]
            == ""
    };

    let first = apply_channel(&client, &url, &ApplyOptions::default())
        .await
        .unwrap();
    assert_eq!(first.applied(), 1);
    assert!(!marked("cp"), "a first install rolls nothing");

    write(&config_map("net-v2"));
    let second = apply_channel(&client, &url, &ApplyOptions::default())
        .await
        .unwrap();
    assert_eq!(second.applied(), 1);
    assert!(marked("cp"));
    assert!(!marked("worker"));
}
