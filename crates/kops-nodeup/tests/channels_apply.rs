//! `nodeup channels apply` as the control plane's `kops-channels` unit runs
//! it: the channels come from kops' kops-channels pod manifest in the state
//! store (the bootstrap channel, then the cluster's custom addons), into a
//! Kubernetes API served from the test (kops_testkit::kube_api). A custom
//! addon served over HTTP goes through nodeup's downloader.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use kops_testkit::file_server::FileServer;
use kops_testkit::kube_api::FakeApi;

fn nodeup(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nodeup"))
        .args(args)
        .output()
        .expect("run nodeup")
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The pod manifest as kops writes it, listing `channels`.
fn pod(channels: &[String]) -> String {
    let mut args = String::new();
    for arg in [
        "apply",
        "channel",
        "--v=4",
        "--yes",
        "--interval=1m0s",
        "--node-name=$(NODE_NAME)",
    ] {
        args.push_str(&format!("    - {arg:?}\n"));
    }
    for channel in channels {
        args.push_str(&format!("    - {channel}\n"));
    }
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: kops-channels\n  namespace: kube-system\nspec:\n  containers:\n  - args:\n{args}    name: kops-channels\n"
    )
}

fn config_map(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: kube-system\ndata:\n  a: b\n"
    )
}

/// A state store with a bootstrap channel of one addon (a ConfigMap).
fn write_store(store: &Path) {
    let addons = store.join("addons");
    std::fs::create_dir_all(addons.join("one.addons.k8s.io")).unwrap();
    std::fs::write(
        addons.join("one.addons.k8s.io/v1.yaml"),
        config_map("from-bootstrap"),
    )
    .unwrap();
    std::fs::write(
        addons.join("bootstrap-channel.yaml"),
        "kind: Addons\nmetadata:\n  name: bootstrap\nspec:\n  addons:\n  - id: v1\n    manifest: one.addons.k8s.io/v1.yaml\n    name: one.addons.k8s.io\n",
    )
    .unwrap();
}

#[test]
fn applies_the_channels_the_pod_manifest_lists() {
    let api = FakeApi::start();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = api.write_kubeconfig(dir.path());
    let kubeconfig = kubeconfig.to_str().unwrap();
    let store = dir.path().join("state");
    write_store(&store);
    let web = FileServer::start(BTreeMap::from([(
        "/addons/web.yaml".to_string(),
        config_map("from-http").into_bytes(),
    )]));
    let local = dir.path().join("local.yaml");
    std::fs::write(&local, config_map("from-file")).unwrap();
    let bootstrap = format!("file://{}/addons/bootstrap-channel.yaml", store.display());
    let channels = [
        bootstrap.clone(),
        format!("file://{}", local.display()),
        format!("{}/addons/web.yaml", web.base),
    ];
    let manifest = store.join("manifests/channels/kops-channels.yaml");
    std::fs::create_dir_all(manifest.parent().unwrap()).unwrap();
    std::fs::write(&manifest, pod(&channels)).unwrap();
    let manifest_url = format!("file://{}", manifest.display());

    // As the unit runs it (once here): the bootstrap channel given, the
    // rest from the manifest, each channel once.
    let args = [
        "channels",
        "apply",
        "--kubeconfig",
        kubeconfig,
        "--channels-manifest",
        &manifest_url,
        &bootstrap,
    ];
    let first = nodeup(&args);
    let out = text(&first);
    assert!(first.status.success(), "{out}");
    for name in ["from-bootstrap", "from-file", "from-http"] {
        assert!(
            api.get("api/v1", "configmaps", "kube-system", name)
                .is_some(),
            "{name}: {out}"
        );
    }
    assert_eq!(out.matches("applied one.addons.k8s.io").count(), 1, "{out}");
    assert_eq!(out.matches("applied manifest-").count(), 2, "{out}");
    api.take_requests();

    let second = nodeup(&args);
    let out = text(&second);
    assert!(second.status.success(), "{out}");
    assert!(!out.contains("applied "), "{out}");
    assert_eq!(out.matches("0 applied").count(), 3, "{out}");
    let writes: Vec<String> = api
        .take_requests()
        .into_iter()
        .filter(|r| !r.starts_with("GET "))
        .collect();
    assert!(writes.is_empty(), "{writes:?}");

    // A custom channel that cannot be read fails the pass (the others are
    // still applied); no pod manifest: only the channels given.
    std::fs::write(&manifest, pod(&[format!("{}/addons/gone.yaml", web.base)])).unwrap();
    let third = nodeup(&args);
    let out = text(&third);
    assert!(!third.status.success(), "{out}");
    assert!(out.contains("gone.yaml") && out.contains("404"), "{out}");
    std::fs::remove_file(&manifest).unwrap();
    let fourth = nodeup(&args);
    let out = text(&fourth);
    assert!(fourth.status.success(), "{out}");
    assert!(out.contains("does not exist"), "{out}");

    let none = nodeup(&["channels", "apply", "--kubeconfig", kubeconfig]);
    assert!(!none.status.success());
    assert!(
        text(&none).contains("at least one channel"),
        "{}",
        text(&none)
    );
}
