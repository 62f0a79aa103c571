//! The tests' kubelet on kops-testkit's Kubernetes API: a Ready node for
//! an instance with the pods such a node runs (the control plane's static
//! pods as mirror pods on a control-plane node, an application pod on a
//! worker), and its removal when the instance is gone.

use kops_testkit::kube_api::FakeApi;
use serde_json::{json, Value};

/// Flags that keep a roll quick: no sleeps between steps, fast re-checks.
pub const FAST_ROLL: &[&str] = &[
    "--interval",
    "0s",
    "--post-drain-delay",
    "0s",
    "--validate-tick",
    "100ms",
    "--validate-success-pause",
    "0s",
    "--validation-timeout",
    "30s",
];

const CONTROL_PLANE_PODS: [&str; 3] = [
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
];

/// Registers the Ready node `name` (with `labels`, to which the
/// control-plane role label is added when `control_plane`) and its pods.
pub fn register(
    kube: &FakeApi,
    name: &str,
    provider_id: &str,
    mut labels: Value,
    control_plane: bool,
) {
    if control_plane {
        labels["node-role.kubernetes.io/control-plane"] = json!("");
    }
    kube.put(
        "api/v1",
        "nodes",
        "",
        name,
        json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "spec": {"providerID": provider_id},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        }),
    );
    let pod = |ns: &str, pod: &str, labels: Value, annotations: Value| {
        kube.put(
            "api/v1",
            "pods",
            ns,
            pod,
            json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": pod, "namespace": ns, "labels": labels, "annotations": annotations},
                "spec": {"nodeName": name, "containers": [{"name": "c", "image": "x"}]},
                "status": {"phase": "Running", "containerStatuses": [{"name": "c", "ready": true, "restartCount": 0, "image": "x", "imageID": ""}]},
            }),
        );
    };
    if control_plane {
        for app in CONTROL_PLANE_PODS {
            pod(
                "kube-system",
                &format!("{app}-{name}"),
                json!({"k8s-app": app}),
                json!({"kubernetes.io/config.mirror": "x"}),
            );
        }
    } else {
        pod(
            "default",
            &format!("app-{name}"),
            json!({"app": "web"}),
            json!({}),
        );
    }
}

/// Removes the node `name` and the pods [`register`] gave it.
pub fn unregister(kube: &FakeApi, name: &str) {
    kube.delete("api/v1", "nodes", "", name);
    for app in CONTROL_PLANE_PODS {
        kube.delete("api/v1", "pods", "kube-system", &format!("{app}-{name}"));
    }
    kube.delete("api/v1", "pods", "default", &format!("app-{name}"));
}

/// Runs `run` while another thread calls `sync` on `state` every 50 ms
/// (the kubelet keeping nodes in step with the cloud); the run and the
/// state as the last sync left it.
pub fn while_syncing<S: Send, R>(
    state: S,
    mut sync: impl FnMut(&mut S) + Send,
    run: impl FnOnce() -> R,
) -> (R, S) {
    let done = &std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let syncing = s.spawn(move || {
            let mut state = state;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                sync(&mut state);
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            state
        });
        let r = run();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        (r, syncing.join().unwrap())
    })
}

/// Asserts that a roll cordoned `node` and evicted its application pod.
pub fn assert_drained(requests: &[String], stderr: &str, node: &str) {
    assert!(
        requests.iter().any(|q| q.starts_with(&format!(
            "POST /api/v1/namespaces/default/pods/app-{node}/eviction"
        ))),
        "{requests:?}"
    );
    assert!(
        stderr.contains(&format!("cordoned node {node}")),
        "{stderr}"
    );
}
