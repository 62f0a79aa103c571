//! A small Kubernetes API for tests, served over plain HTTP/1.1 on
//! 127.0.0.1 by threads, objects kept in memory: discovery of the built-in
//! kinds addon manifests use, get, list (by label; pods also by the
//! `spec.nodeName` field selector), create, server-side apply (field manager
//! `kops`, forced), JSON merge patch, delete, pod evictions (the pod is
//! deleted; no PodDisruptionBudget is checked) and `/version`. Enough for
//! the addon applier and a drain; not a validating API server (any object of a known
//! kind is accepted as sent). The built-in kinds are generic storage; an
//! applied CustomResourceDefinition serves its kind from then on (deleting
//! it stops that).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

/// One resource the fake API knows.
#[derive(Clone)]
struct Resource {
    /// `api/v1` or `apis/<group>/<version>`.
    prefix: String,
    plural: String,
    kind: String,
    namespaced: bool,
}

fn r(prefix: &str, plural: &str, kind: &str, namespaced: bool) -> Resource {
    Resource {
        prefix: prefix.into(),
        plural: plural.into(),
        kind: kind.into(),
        namespaced,
    }
}

/// The built-in kinds addon manifests use (custom resources come from the
/// CustomResourceDefinitions applied).
#[rustfmt::skip]
fn builtin_resources() -> Vec<Resource> {
    vec![
        r("api/v1", "namespaces", "Namespace", false),
        r("api/v1", "nodes", "Node", false),
        r("api/v1", "pods", "Pod", true),
        r("api/v1", "configmaps", "ConfigMap", true),
        r("api/v1", "secrets", "Secret", true),
        r("api/v1", "serviceaccounts", "ServiceAccount", true),
        r("api/v1", "services", "Service", true),
        r("api/v1", "endpoints", "Endpoints", true),
        r("api/v1", "limitranges", "LimitRange", true),
        r("api/v1", "resourcequotas", "ResourceQuota", true),
        r("api/v1", "persistentvolumeclaims", "PersistentVolumeClaim", true),
        r("apis/apps/v1", "deployments", "Deployment", true),
        r("apis/apps/v1", "daemonsets", "DaemonSet", true),
        r("apis/apps/v1", "statefulsets", "StatefulSet", true),
        r("apis/apps/v1", "replicasets", "ReplicaSet", true),
        r("apis/batch/v1", "jobs", "Job", true),
        r("apis/batch/v1", "cronjobs", "CronJob", true),
        r("apis/autoscaling/v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", true),
        r("apis/rbac.authorization.k8s.io/v1", "clusterroles", "ClusterRole", false),
        r("apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", "ClusterRoleBinding", false),
        r("apis/rbac.authorization.k8s.io/v1", "roles", "Role", true),
        r("apis/rbac.authorization.k8s.io/v1", "rolebindings", "RoleBinding", true),
        r("apis/policy/v1", "poddisruptionbudgets", "PodDisruptionBudget", true),
        r("apis/storage.k8s.io/v1", "storageclasses", "StorageClass", false),
        r("apis/storage.k8s.io/v1", "csidrivers", "CSIDriver", false),
        r("apis/storage.k8s.io/v1", "csinodes", "CSINode", false),
        r("apis/storage.k8s.io/v1", "volumeattachments", "VolumeAttachment", false),
        r("apis/scheduling.k8s.io/v1", "priorityclasses", "PriorityClass", false),
        r("apis/admissionregistration.k8s.io/v1", "mutatingwebhookconfigurations", "MutatingWebhookConfiguration", false),
        r("apis/admissionregistration.k8s.io/v1", "validatingwebhookconfigurations", "ValidatingWebhookConfiguration", false),
        r("apis/admissionregistration.k8s.io/v1", "validatingadmissionpolicies", "ValidatingAdmissionPolicy", false),
        r("apis/admissionregistration.k8s.io/v1", "validatingadmissionpolicybindings", "ValidatingAdmissionPolicyBinding", false),
        r("apis/apiextensions.k8s.io/v1", "customresourcedefinitions", "CustomResourceDefinition", false),
        r("apis/apiregistration.k8s.io/v1", "apiservices", "APIService", false),
        r("apis/networking.k8s.io/v1", "networkpolicies", "NetworkPolicy", true),
        r("apis/networking.k8s.io/v1", "ingresses", "Ingress", true),
        r("apis/networking.k8s.io/v1", "ingressclasses", "IngressClass", false),
        r("apis/coordination.k8s.io/v1", "leases", "Lease", true),
        r("apis/discovery.k8s.io/v1", "endpointslices", "EndpointSlice", true),
        r("apis/node.k8s.io/v1", "runtimeclasses", "RuntimeClass", false),
        r("apis/flowcontrol.apiserver.k8s.io/v1", "flowschemas", "FlowSchema", false),
        r("apis/flowcontrol.apiserver.k8s.io/v1", "prioritylevelconfigurations", "PriorityLevelConfiguration", false),
        r("apis/certificates.k8s.io/v1", "certificatesigningrequests", "CertificateSigningRequest", false),
    ]
}

/// The resources a CustomResourceDefinition serves (one per served
/// version).
fn crd_resources(crd: &Value) -> Vec<Resource> {
    let spec = &crd["spec"];
    let (Some(group), Some(plural), Some(kind)) = (
        spec["group"].as_str(),
        spec["names"]["plural"].as_str(),
        spec["names"]["kind"].as_str(),
    ) else {
        return Vec::new();
    };
    let namespaced = spec["scope"].as_str() != Some("Cluster");
    spec["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["served"].as_bool() != Some(false))
        .filter_map(|v| v["name"].as_str())
        .map(|version| r(&format!("apis/{group}/{version}"), plural, kind, namespaced))
        .collect()
}

/// Objects by (prefix, plural, namespace, name); requests as `METHOD path`.
struct State {
    objects: BTreeMap<(String, String, String, String), Value>,
    requests: Vec<String>,
    resources: Vec<Resource>,
}

pub struct FakeApi {
    pub url: String,
    state: Arc<Mutex<State>>,
}

impl FakeApi {
    /// Starts the API with one namespace, `kube-system`.
    pub fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(Mutex::new(State {
            objects: BTreeMap::new(),
            requests: Vec::new(),
            resources: builtin_resources(),
        }));
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

    /// Stores `object` as if it existed (`prefix` is `api/v1` or
    /// `apis/<group>/<version>`, `ns` empty for cluster-scoped kinds).
    pub fn put(&self, prefix: &str, plural: &str, ns: &str, name: &str, object: Value) {
        self.state.lock().unwrap().objects.insert(
            (prefix.into(), plural.into(), ns.into(), name.into()),
            object,
        );
    }

    /// Serves the kinds of a CustomResourceDefinition from now on, as if
    /// it had been applied (e.g. kops' `hosts.kops.k8s.io`).
    pub fn serve_crd(&self, crd: &Value) {
        self.state
            .lock()
            .unwrap()
            .resources
            .extend(crd_resources(crd));
    }

    /// Writes a kubeconfig for this API (its current context, a token
    /// user) to `dir/kubeconfig` and returns its path.
    pub fn write_kubeconfig(&self, dir: &std::path::Path) -> std::path::PathBuf {
        let path = dir.join("kubeconfig");
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    server: {}\n  name: c\n\
             contexts:\n- context:\n    cluster: c\n    user: u\n  name: c\ncurrent-context: c\n\
             users:\n- name: u\n  user:\n    token: t\n",
            self.url
        );
        std::fs::write(&path, text).expect("write the kubeconfig");
        path
    }

    /// Deletes a stored object (as if someone removed it); whether it
    /// existed.
    pub fn delete(&self, prefix: &str, plural: &str, ns: &str, name: &str) -> bool {
        self.state
            .lock()
            .unwrap()
            .objects
            .remove(&(prefix.into(), plural.into(), ns.into(), name.into()))
            .is_some()
    }

    /// The stored object, if any.
    pub fn get(&self, prefix: &str, plural: &str, ns: &str, name: &str) -> Option<Value> {
        self.state
            .lock()
            .unwrap()
            .objects
            .get(&(prefix.into(), plural.into(), ns.into(), name.into()))
            .cloned()
    }

    /// Every stored object as (`api/v1` or `apis/<group>/<version>`, plural,
    /// namespace, name), sorted.
    pub fn keys(&self) -> Vec<(String, String, String, String)> {
        self.state.lock().unwrap().objects.keys().cloned().collect()
    }

    /// The requests since the last call, as `METHOD target`.
    pub fn take_requests(&self) -> Vec<String> {
        std::mem::take(&mut self.state.lock().unwrap().requests)
    }

    /// The applier's installed-version record of `addon`, parsed.
    pub fn record(&self, addon: &str) -> Option<Value> {
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
        "version" => {
            return (
                200,
                json!({"major": "1", "minor": "33", "gitVersion": "v1.33.0", "platform": "linux/amd64"}),
            )
        }
        "api" => {
            return (
                200,
                json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}),
            )
        }
        "apis" => {
            // group → versions, in first-seen order
            let mut groups: Vec<(String, Vec<String>)> = Vec::new();
            for gv in state
                .resources
                .iter()
                .filter_map(|r| r.prefix.strip_prefix("apis/"))
            {
                let Some((g, v)) = gv.split_once('/') else {
                    continue;
                };
                match groups.iter_mut().find(|(name, _)| name == g) {
                    Some((_, versions)) if !versions.iter().any(|x| x == v) => {
                        versions.push(v.to_string())
                    }
                    Some(_) => {}
                    None => groups.push((g.to_string(), vec![v.to_string()])),
                }
            }
            let groups: Vec<Value> = groups
                .iter()
                .map(|(g, versions)| {
                    let listed: Vec<Value> = versions
                        .iter()
                        .map(|v| json!({"groupVersion": format!("{g}/{v}"), "version": v}))
                        .collect();
                    json!({"name": g, "versions": listed, "preferredVersion": listed[0]})
                })
                .collect();
            return (
                200,
                json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}),
            );
        }
        _ => {}
    }
    if state.resources.iter().any(|r| r.prefix == path) {
        let group_version = path.trim_start_matches("apis/").trim_start_matches("api/");
        let resources: Vec<Value> = state
            .resources
            .iter()
            .filter(|x| x.prefix == path)
            .map(|x| json!({"name": x.plural, "singularName": "", "namespaced": x.namespaced, "kind": x.kind, "verbs": ["create", "delete", "get", "list", "patch", "update"]}))
            .collect();
        return (
            200,
            json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}),
        );
    }
    // objects: <prefix>/[namespaces/<ns>/]<plural>[/<name>]
    let Some(r) = state
        .resources
        .iter()
        .find(|r| {
            path.starts_with(&format!("{}/", r.prefix)) && {
                let rest = &path[r.prefix.len() + 1..];
                let segs: Vec<&str> = rest.split('/').collect();
                match segs.as_slice() {
                    ["namespaces", _, plural, ..] => *plural == r.plural,
                    [plural, ..] => *plural == r.plural,
                    _ => false,
                }
            }
        })
        .cloned()
    else {
        return not_found(path);
    };
    let rest = &path[r.prefix.len() + 1..];
    let segs: Vec<&str> = rest.split('/').collect();
    // The Eviction API (policy/v1): the pod is deleted.
    if let (["namespaces", ns, "pods", name, "eviction"], "POST") = (segs.as_slice(), method) {
        let key = (
            r.prefix.clone(),
            r.plural.clone(),
            ns.to_string(),
            name.to_string(),
        );
        return match state.objects.remove(&key) {
            Some(_) => (
                201,
                json!({"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}),
            ),
            None => not_found(name),
        };
    }
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
                    let s = percent_decode(s);
                    s.split(',')
                        .filter_map(|p| {
                            p.split_once('=')
                                .map(|(k, v)| (k.to_string(), v.to_string()))
                        })
                        .collect::<Vec<_>>()
                })
                .collect();
            // `fieldSelector=spec.nodeName=<node>` (the one field pods are
            // listed by here).
            let on_node: Option<String> = query
                .split('&')
                .filter_map(|kv| kv.strip_prefix("fieldSelector="))
                .find_map(|s| {
                    percent_decode(s)
                        .strip_prefix("spec.nodeName=")
                        .map(str::to_string)
                });
            let items: Vec<Value> = state
                .objects
                .iter()
                .filter(|((p, pl, n, _), _)| {
                    *p == r.prefix && *pl == r.plural && (ns.is_empty() || *n == ns)
                })
                .filter(|(_, o)| {
                    selector
                        .iter()
                        .all(|(k, v)| o["metadata"]["labels"][k].as_str() == Some(v))
                })
                .filter(|(_, o)| {
                    on_node
                        .as_deref()
                        .is_none_or(|n| o["spec"]["nodeName"].as_str() == Some(n))
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
            if r.kind == "CustomResourceDefinition" {
                let served = crd_resources(&object);
                state.resources.retain(|x| {
                    !served
                        .iter()
                        .any(|s| s.prefix == x.prefix && s.plural == x.plural)
                });
                state.resources.extend(served);
            }
            state.objects.insert(key(&name), object.clone());
            (200, object)
        }
        ("POST", None) => {
            let Ok(mut object) = serde_json::from_slice::<Value>(body) else {
                return (400, json!({"kind": "Status", "code": 400}));
            };
            let Some(name) = object["metadata"]["name"].as_str().map(str::to_string) else {
                return (
                    422,
                    json!({"kind": "Status", "code": 422, "message": "metadata.name is required"}),
                );
            };
            if state.objects.contains_key(&key(&name)) {
                return (
                    409,
                    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "AlreadyExists", "code": 409, "message": format!("{name} already exists")}),
                );
            }
            if r.namespaced {
                object["metadata"]["namespace"] = json!(ns);
            }
            if r.kind == "CustomResourceDefinition" {
                let served = crd_resources(&object);
                state.resources.retain(|x| {
                    !served
                        .iter()
                        .any(|s| s.prefix == x.prefix && s.plural == x.plural)
                });
                state.resources.extend(served);
            }
            state.objects.insert(key(&name), object.clone());
            (201, object)
        }
        ("DELETE", Some(name)) => match state.objects.remove(&key(&name)) {
            Some(removed) => {
                if r.kind == "CustomResourceDefinition" {
                    let served = crd_resources(&removed);
                    state.resources.retain(|x| {
                        !served
                            .iter()
                            .any(|s| s.prefix == x.prefix && s.plural == x.plural)
                    });
                }
                (
                    200,
                    json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}),
                )
            }
            None => not_found(&name),
        },
        _ => (405, json!({"kind": "Status", "code": 405})),
    }
}

/// Decodes `%XX` escapes and `+` (a query string's space).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
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
