//! The applier against a small Kubernetes API served from this test (plain
//! HTTP/1.1 on 127.0.0.1, objects kept in memory): discovery, server-side
//! apply, merge patch, list by label and delete: the endpoints the applier
//! uses, as the API server answers them.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use kops_channels::{apply_channel, client_from_kubeconfig, AddonOutcome, ApplyOptions, Reason};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// One resource the fake API knows.
struct Resource {
    prefix: &'static str,
    plural: &'static str,
    kind: &'static str,
    namespaced: bool,
}

const RESOURCES: &[Resource] = &[
    Resource {
        prefix: "api/v1",
        plural: "namespaces",
        kind: "Namespace",
        namespaced: false,
    },
    Resource {
        prefix: "api/v1",
        plural: "configmaps",
        kind: "ConfigMap",
        namespaced: true,
    },
    Resource {
        prefix: "api/v1",
        plural: "serviceaccounts",
        kind: "ServiceAccount",
        namespaced: true,
    },
    Resource {
        prefix: "apis/apps/v1",
        plural: "deployments",
        kind: "Deployment",
        namespaced: true,
    },
    Resource {
        prefix: "apis/rbac.authorization.k8s.io/v1",
        plural: "clusterroles",
        kind: "ClusterRole",
        namespaced: false,
    },
];

/// Objects by (prefix, plural, namespace, name); requests as `METHOD path`.
#[derive(Default)]
struct State {
    objects: BTreeMap<(String, String, String, String), Value>,
    requests: Vec<String>,
}

struct FakeApi {
    url: String,
    state: Arc<Mutex<State>>,
}

impl FakeApi {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let state = shared.clone();
                std::thread::spawn(move || serve(stream, &state));
            }
        });
        let api = FakeApi { url, state };
        api.put(
            "api/v1",
            "namespaces",
            "",
            "kube-system",
            json!({
                "apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": "kube-system", "annotations": {"unrelated": "kept"}},
            }),
        );
        api
    }

    fn put(&self, prefix: &str, plural: &str, ns: &str, name: &str, object: Value) {
        self.state.lock().unwrap().objects.insert(
            (prefix.into(), plural.into(), ns.into(), name.into()),
            object,
        );
    }

    fn get(&self, prefix: &str, plural: &str, ns: &str, name: &str) -> Option<Value> {
        self.state
            .lock()
            .unwrap()
            .objects
            .get(&(prefix.into(), plural.into(), ns.into(), name.into()))
            .cloned()
    }

    fn take_requests(&self) -> Vec<String> {
        std::mem::take(&mut self.state.lock().unwrap().requests)
    }

    fn record(&self, addon: &str) -> Option<Value> {
        let ns = self.get("api/v1", "namespaces", "", "kube-system")?;
        let text = ns["metadata"]["annotations"][format!("addons.k8s.io/{addon}")].as_str()?;
        serde_json::from_str(text).ok()
    }
}

fn serve(stream: TcpStream, state: &Mutex<State>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut out = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let (method, target) = (
            parts.next().unwrap_or("").to_string(),
            parts.next().unwrap_or("").to_string(),
        );
        let mut length = 0;
        let mut content_type = String::new();
        loop {
            let mut header = String::new();
            reader.read_line(&mut header).unwrap();
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            let (name, value) = header.split_once(':').unwrap();
            match name.to_ascii_lowercase().as_str() {
                "content-length" => length = value.trim().parse().unwrap(),
                "content-type" => content_type = value.trim().to_string(),
                _ => {}
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        let (status, response) = handle(state, &method, &target, &content_type, &body);
        let text = response.to_string();
        let reply = format!(
            "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{text}",
            text.len()
        );
        if out.write_all(reply.as_bytes()).is_err() {
            return;
        }
    }
}

fn not_found(what: &str) -> (u16, Value) {
    (
        404,
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404, "message": format!("{what} not found")}),
    )
}

fn handle(
    state: &Mutex<State>,
    method: &str,
    target: &str,
    content_type: &str,
    body: &[u8],
) -> (u16, Value) {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let path = path.trim_start_matches('/');
    let mut state = state.lock().unwrap();
    state.requests.push(format!("{method} {target}"));
    // discovery
    match path {
        "api" => {
            return (
                200,
                json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}),
            )
        }
        "apis" => {
            let groups: Vec<Value> = ["apps/v1", "rbac.authorization.k8s.io/v1"]
                .iter()
                .map(|gv| {
                    let (g, v) = gv.split_once('/').unwrap();
                    json!({"name": g, "versions": [{"groupVersion": gv, "version": v}], "preferredVersion": {"groupVersion": gv, "version": v}})
                })
                .collect();
            return (
                200,
                json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}),
            );
        }
        _ => {}
    }
    if let Some(r) = RESOURCES.iter().find(|r| r.prefix == path) {
        let group_version = r
            .prefix
            .trim_start_matches("apis/")
            .trim_start_matches("api/");
        let resources: Vec<Value> = RESOURCES
            .iter()
            .filter(|x| x.prefix == r.prefix)
            .map(|x| json!({"name": x.plural, "singularName": "", "namespaced": x.namespaced, "kind": x.kind, "verbs": ["create", "delete", "get", "list", "patch", "update"]}))
            .collect();
        return (
            200,
            json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}),
        );
    }
    // objects: <prefix>/[namespaces/<ns>/]<plural>[/<name>]
    let Some(r) = RESOURCES.iter().find(|r| {
        path.starts_with(&format!("{}/", r.prefix)) && {
            let rest = &path[r.prefix.len() + 1..];
            let segs: Vec<&str> = rest.split('/').collect();
            match segs.as_slice() {
                ["namespaces", _, plural, ..] => *plural == r.plural,
                [plural, ..] => *plural == r.plural,
                _ => false,
            }
        }
    }) else {
        return not_found(path);
    };
    let rest = &path[r.prefix.len() + 1..];
    let segs: Vec<&str> = rest.split('/').collect();
    let (ns, name) = match segs.as_slice() {
        ["namespaces", ns, _, name] if r.plural != "namespaces" => {
            (ns.to_string(), Some(name.to_string()))
        }
        ["namespaces", ns, _] if r.plural != "namespaces" => (ns.to_string(), None),
        [_, name] => (String::new(), Some(name.to_string())),
        _ => (String::new(), None),
    };
    let key = |name: &str| {
        (
            r.prefix.to_string(),
            r.plural.to_string(),
            ns.clone(),
            name.to_string(),
        )
    };
    match (method, name) {
        ("GET", Some(name)) => match state.objects.get(&key(&name)) {
            Some(o) => (200, o.clone()),
            None => not_found(&name),
        },
        ("GET", None) => {
            let selector: Vec<(String, String)> = query
                .split('&')
                .filter_map(|kv| kv.strip_prefix("labelSelector="))
                .flat_map(|s| {
                    let s = s
                        .replace("%3D", "=")
                        .replace("%2C", ",")
                        .replace("%2F", "/");
                    s.split(',')
                        .filter_map(|p| {
                            p.split_once('=')
                                .map(|(k, v)| (k.to_string(), v.to_string()))
                        })
                        .collect::<Vec<_>>()
                })
                .collect();
            let items: Vec<Value> = state
                .objects
                .iter()
                .filter(|((p, pl, n, _), _)| {
                    p == r.prefix && pl == r.plural && (ns.is_empty() || *n == ns)
                })
                .filter(|(_, o)| {
                    selector
                        .iter()
                        .all(|(k, v)| o["metadata"]["labels"][k].as_str() == Some(v))
                })
                .map(|(_, o)| o.clone())
                .collect();
            (
                200,
                json!({"kind": format!("{}List", r.kind), "apiVersion": "v1", "metadata": {}, "items": items}),
            )
        }
        ("PATCH", Some(name)) => {
            let patch: Value = serde_json::from_slice(body).unwrap();
            let object = if content_type.starts_with("application/apply-patch") {
                assert!(
                    query.contains("fieldManager=kops") && query.contains("force=true"),
                    "{query}"
                );
                let mut o = patch;
                if r.namespaced {
                    o["metadata"]["namespace"] = json!(ns);
                }
                o
            } else {
                let Some(mut o) = state.objects.get(&key(&name)).cloned() else {
                    return not_found(&name);
                };
                merge(&mut o, &patch);
                o
            };
            state.objects.insert(key(&name), object.clone());
            (200, object)
        }
        ("DELETE", Some(name)) => match state.objects.remove(&key(&name)) {
            Some(_) => (
                200,
                json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}),
            ),
            None => not_found(&name),
        },
        _ => (405, json!({"kind": "Status", "code": 405})),
    }
}

/// JSON merge patch (RFC 7386).
fn merge(target: &mut Value, patch: &Value) {
    match (target.as_object_mut(), patch.as_object()) {
        (Some(t), Some(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        _ => *target = patch.clone(),
    }
}

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

fn kubeconfig(dir: &std::path::Path, server: &str) -> std::path::PathBuf {
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1
kind: Config
clusters:
- cluster:
    server: {server}
  name: c
contexts:
- context:
    cluster: c
    user: u
  name: c
current-context: c
users:
- name: u
  user:
    token: t
"
        ),
    )
    .unwrap();
    path
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
    let client = client_from_kubeconfig(&kubeconfig(dir.path(), &api.url))
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
    let client = client_from_kubeconfig(&kubeconfig(dir.path(), &api.url))
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
    let client = client_from_kubeconfig(&kubeconfig(dir.path(), &api.url))
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
