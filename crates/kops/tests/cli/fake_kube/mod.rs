//! A small Kubernetes API for tests, served over plain HTTP/1.1 on
//! 127.0.0.1 by a thread: nodes (list, patch), pods (list, by
//! `spec.nodeName`), and evictions (policy/v1; 429 for pods a
//! PodDisruptionBudget protects).
//!
//! It plays kubelet and cloud controller against moto: before answering,
//! it reads the cluster's running EC2 instances and registers a Ready node
//! for each new one (bastions excepted), with the pods such a node runs (a
//! DaemonSet pod everywhere, the three control-plane static pods on
//! control-plane nodes, an application pod on workers); nodes of instances
//! that are gone are deleted with their pods.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

/// What the fake should get wrong, set by a test.
#[derive(Debug, Default, Clone)]
pub struct Faults {
    /// Instances that never register a node.
    pub never_join: BTreeSet<String>,
    /// Nodes (by instance id) reported NotReady.
    pub not_ready: BTreeSet<String>,
    /// Control-plane pods (by app, e.g. `kube-apiserver`) whose container is not ready.
    pub failing_control_plane_pods: BTreeSet<String>,
    /// Give the first worker node registered a pod whose eviction a PDB refuses.
    pub pdb_blocked_pod: bool,
}

#[derive(Debug, Default)]
pub struct State {
    pub nodes: BTreeMap<String, Value>,
    /// By `namespace/name`.
    pub pods: BTreeMap<String, Value>,
    /// What happened, in order: `cordon <node>`, `taint <node>`, `evict <ns/pod>`,
    /// `blocked <ns/pod>`, `register <node> <role>`, `remove <node>`.
    pub log: Vec<String>,
    pub faults: Faults,
    known: BTreeSet<String>,
    blocked: BTreeSet<String>,
    workers_seen: usize,
}

pub struct FakeKube {
    pub port: u16,
    pub state: Arc<Mutex<State>>,
}

impl FakeKube {
    /// Starts the server; it syncs with moto at `endpoint` for `cluster`.
    pub fn start(endpoint: &str, cluster: &str, faults: Faults) -> FakeKube {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(Mutex::new(State {
            faults,
            ..Default::default()
        }));
        let shared = state.clone();
        let endpoint = endpoint.to_string();
        let cluster = cluster.to_string();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let config = rt.block_on(
                aws_config::defaults(aws_config::BehaviorVersion::latest())
                    .endpoint_url(&endpoint)
                    .region(aws_config::Region::new("us-east-1"))
                    .credentials_provider(aws_sdk_ec2::config::Credentials::new(
                        "testing", "testing", None, None, "moto",
                    ))
                    .load(),
            );
            let ec2 = aws_sdk_ec2::Client::new(&config);
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let _ = serve(stream, &shared, &rt, &ec2, &cluster);
            }
        });
        FakeKube { port, state }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Writes a kubeconfig with a context named after the cluster.
    pub fn write_kubeconfig(&self, dir: &Path, cluster: &str) -> PathBuf {
        let path = dir.join("kubeconfig");
        std::fs::write(
            &path,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: {cluster}\n  cluster:\n    server: {}\ncontexts:\n- name: {cluster}\n  context:\n    cluster: {cluster}\n    user: {cluster}\ncurrent-context: {cluster}\nusers:\n- name: {cluster}\n  user:\n    token: test\n",
                self.url()
            ),
        )
        .unwrap();
        path
    }

    pub fn log(&self) -> Vec<String> {
        self.state.lock().unwrap().log.clone()
    }

    pub fn set_faults(&self, faults: Faults) {
        self.state.lock().unwrap().faults = faults;
    }
}

struct Request {
    method: String,
    path: String,
    query: BTreeMap<String, String>,
    body: Vec<u8>,
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Ok(b) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(if bytes[i] == b'+' { b' ' } else { bytes[i] });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn read_request(stream: &mut TcpStream) -> Option<Request> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let target = parts.next()?.to_string();
    let mut length = 0usize;
    loop {
        let mut h = String::new();
        reader.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let query = query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), percent_decode(v)))
        .collect();
    Some(Request {
        method,
        path: path.to_string(),
        query,
        body,
    })
}

fn respond(stream: &mut TcpStream, code: u16, body: &Value) {
    let text = body.to_string();
    let reason = match code {
        200 => "OK",
        201 => "Created",
        404 => "Not Found",
        429 => "Too Many Requests",
        _ => "Error",
    };
    let _ = write!(
        stream,
        "HTTP/1.1 {code} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
        text.len()
    );
    let _ = stream.flush();
}

fn status(code: u16, reason: &str, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": message, "reason": reason, "code": code})
}

fn merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        (t, p) => *t = p.clone(),
    }
}

fn list(kind: &str, items: Vec<Value>) -> Value {
    json!({"apiVersion": "v1", "kind": kind, "metadata": {"resourceVersion": "1"}, "items": items})
}

fn serve(
    mut stream: TcpStream,
    state: &Mutex<State>,
    rt: &tokio::runtime::Runtime,
    ec2: &aws_sdk_ec2::Client,
    cluster: &str,
) -> Option<()> {
    let req = read_request(&mut stream)?;
    if req.method == "GET" {
        sync(state, rt, ec2, cluster);
    }
    let segments: Vec<&str> = req.path.trim_matches('/').split('/').collect();
    let mut s = state.lock().unwrap();
    match (req.method.as_str(), segments.as_slice()) {
        ("GET", ["api", "v1", "nodes"]) => {
            let items = s.nodes.values().cloned().collect();
            respond(&mut stream, 200, &list("NodeList", items));
        }
        ("GET", ["api", "v1", "pods"]) | ("GET", ["api", "v1", "namespaces", _, "pods"]) => {
            let namespace = (segments.len() == 5).then(|| segments[3].to_string());
            let node = req
                .query
                .get("fieldSelector")
                .and_then(|f| f.strip_prefix("spec.nodeName="))
                .map(str::to_string);
            let items = s
                .pods
                .values()
                .filter(|p| {
                    namespace
                        .as_deref()
                        .is_none_or(|n| p["metadata"]["namespace"] == n)
                })
                .filter(|p| node.as_deref().is_none_or(|n| p["spec"]["nodeName"] == n))
                .cloned()
                .collect();
            respond(&mut stream, 200, &list("PodList", items));
        }
        ("PATCH", ["api", "v1", "nodes", name]) => {
            let name = name.to_string();
            let patch: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
            let Some(node) = s.nodes.get_mut(&name) else {
                respond(&mut stream, 404, &status(404, "NotFound", "node not found"));
                return Some(());
            };
            merge(node, &patch);
            let node = node.clone();
            if patch["spec"]["unschedulable"] == true {
                s.log.push(format!("cordon {name}"));
            }
            if patch["spec"]["taints"].is_array() {
                s.log.push(format!("taint {name}"));
            }
            respond(&mut stream, 200, &node);
        }
        ("POST", ["api", "v1", "namespaces", ns, "pods", name, "eviction"]) => {
            let key = format!("{ns}/{name}");
            if !s.pods.contains_key(&key) {
                respond(&mut stream, 404, &status(404, "NotFound", "pod not found"));
            } else if s.blocked.contains(&key) {
                s.log.push(format!("blocked {key}"));
                respond(
                    &mut stream,
                    429,
                    &status(
                        429,
                        "TooManyRequests",
                        "Cannot evict pod as it would violate the pod's disruption budget.",
                    ),
                );
            } else {
                s.pods.remove(&key);
                s.log.push(format!("evict {key}"));
                respond(
                    &mut stream,
                    201,
                    &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
                );
            }
        }
        _ => {
            respond(
                &mut stream,
                404,
                &status(404, "NotFound", "no such path in the fake API"),
            );
        }
    }
    Some(())
}

fn tag<'a>(i: &'a aws_sdk_ec2::types::Instance, key: &str) -> Option<&'a str> {
    i.tags()
        .iter()
        .find(|t| t.key() == Some(key))
        .and_then(|t| t.value())
}

/// Registers nodes for new running instances and removes those of gone ones.
fn sync(
    state: &Mutex<State>,
    rt: &tokio::runtime::Runtime,
    ec2: &aws_sdk_ec2::Client,
    cluster: &str,
) {
    let Ok(out) = rt.block_on(
        ec2.describe_instances()
            .filters(
                aws_sdk_ec2::types::Filter::builder()
                    .name("tag:KubernetesCluster")
                    .values(cluster)
                    .build(),
            )
            .send(),
    ) else {
        return;
    };
    let mut running = BTreeMap::new();
    for r in out.reservations() {
        for i in r.instances() {
            let live = i
                .state()
                .and_then(|s| s.name())
                .is_some_and(|n| n.as_str() == "running" || n.as_str() == "pending");
            if live {
                running.insert(i.instance_id().unwrap_or_default().to_string(), i.clone());
            }
        }
    }
    let mut s = state.lock().unwrap();
    // Nodes of instances that are gone (the cloud controller deletes them).
    let gone: Vec<String> = s
        .nodes
        .iter()
        .filter(|(_, n)| {
            let id = n["spec"]["providerID"]
                .as_str()
                .and_then(|p| p.rsplit('/').next())
                .unwrap_or("");
            !running.contains_key(id)
        })
        .map(|(k, _)| k.clone())
        .collect();
    for name in gone {
        s.nodes.remove(&name);
        s.pods.retain(|_, p| p["spec"]["nodeName"] != name.as_str());
        s.log.push(format!("remove {name}"));
    }
    for (id, i) in &running {
        let role = if tag(i, "k8s.io/role/control-plane").is_some()
            || tag(i, "k8s.io/role/master").is_some()
        {
            "control-plane"
        } else if tag(i, "k8s.io/role/bastion").is_some() {
            "bastion"
        } else {
            "node"
        };
        let fresh = !s.known.contains(id);
        if fresh && role != "bastion" && !s.faults.never_join.contains(id) {
            s.known.insert(id.clone());
            register(&mut s, id, i, role);
        }
        // Faults apply to every sync, so a test can change them.
        let ready = if s.faults.not_ready.contains(id) {
            "False"
        } else {
            "True"
        };
        let failing = s.faults.failing_control_plane_pods.clone();
        if let Some(node) = s.nodes.get_mut(id) {
            node["status"]["conditions"][0]["status"] = json!(ready);
        }
        for app in [
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler",
        ] {
            if let Some(pod) = s.pods.get_mut(&format!("kube-system/{app}-{id}")) {
                pod["status"]["containerStatuses"][0]["ready"] = json!(!failing.contains(app));
            }
        }
    }
}

fn pod(namespace: &str, name: &str, node: &str, extra: Value) -> Value {
    let mut p = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {}},
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "x"}]},
        "status": {"phase": "Running", "containerStatuses": [{
            "name": "main", "ready": true, "restartCount": 0, "image": "x", "imageID": ""}]}
    });
    merge(&mut p, &extra);
    p
}

fn register(s: &mut State, id: &str, i: &aws_sdk_ec2::types::Instance, role: &str) {
    // Nodes are named after the instance id, as with kops' default on AWS.
    let zone = i
        .placement()
        .and_then(|p| p.availability_zone())
        .unwrap_or("us-east-1a");
    let mut labels = json!({"kubernetes.io/hostname": id, "topology.kubernetes.io/zone": zone});
    if role == "control-plane" {
        labels["node-role.kubernetes.io/control-plane"] = json!("");
    } else {
        labels["node-role.kubernetes.io/node"] = json!("");
    }
    s.nodes.insert(
        id.to_string(),
        json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": id, "labels": labels},
            "spec": {"providerID": format!("aws:///{zone}/{id}")},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}
        }),
    );
    s.log.push(format!("register {id} {role}"));
    let ds = pod(
        "kube-system",
        &format!("cilium-{id}"),
        id,
        json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "cilium", "uid": "1"}]},
               "spec": {"priorityClassName": "system-node-critical"}}),
    );
    s.pods.insert(format!("kube-system/cilium-{id}"), ds);
    if role == "control-plane" {
        for app in [
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler",
        ] {
            let p = pod(
                "kube-system",
                &format!("{app}-{id}"),
                id,
                json!({"metadata": {"labels": {"k8s-app": app},
                                    "annotations": {"kubernetes.io/config.mirror": "x"}},
                       "spec": {"priorityClassName": "system-cluster-critical"}}),
            );
            s.pods.insert(format!("kube-system/{app}-{id}"), p);
        }
    } else {
        let p = pod(
            "default",
            &format!("web-{id}"),
            id,
            json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "2"}]}}),
        );
        s.pods.insert(format!("default/web-{id}"), p);
        s.workers_seen += 1;
        if s.faults.pdb_blocked_pod && s.workers_seen == 1 {
            let key = format!("default/db-{id}");
            let p = pod(
                "default",
                &format!("db-{id}"),
                id,
                json!({"metadata": {"labels": {"app": "db"}}}),
            );
            s.pods.insert(key.clone(), p);
            s.blocked.insert(key);
        }
    }
}
