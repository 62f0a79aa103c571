//! The flags that decide how kops reaches and authenticates to a cluster's
//! Kubernetes API, through the binary: `export kubeconfig --auth-plugin`
//! and the `helpers kubectl-auth` plugin it names, `--use-kubeconfig`, and
//! the kubelet version-skew rule `update cluster` applies unless
//! `--ignore-kubelet-version-skew`.

use std::path::Path;

use serde_json::json;

use crate::common::{self, command, file_url, kops, kops_on, Run, IMAGE};

fn ok(r: Run, what: &str) -> Run {
    assert_eq!(
        r.code, 0,
        "{what}:\nstdout:\n{}\nstderr:\n{}",
        r.stdout, r.stderr
    );
    r
}

/// A one-zone AWS cluster in a file store with its cluster CA (no cloud call).
fn store_with_ca(dir: &Path, name: &str) -> String {
    let state = file_url(&dir.join("state"));
    let manifest = dir.join("c.yaml");
    std::fs::write(&manifest, common::one_zone_cluster(name)).unwrap();
    ok(
        kops(&[
            "create",
            "-f",
            manifest.to_str().unwrap(),
            "--state",
            &state,
        ]),
        "create -f",
    );
    ok(
        kops(&[
            "create",
            "keypair",
            "kubernetes-ca",
            "--primary",
            "--name",
            name,
            "--state",
            &state,
        ]),
        "create keypair",
    );
    state
}

#[test]
fn export_kubeconfig_auth_plugin_writes_kops_exec_entry_and_the_plugin_answers() {
    let dir = tempfile::tempdir().unwrap();
    let name = "auth.example.com";
    let state = store_with_ca(dir.path(), name);
    let kubeconfig = dir.path().join("kubeconfig");
    ok(
        kops(&[
            "export",
            "kubeconfig",
            name,
            "--auth-plugin",
            "--state",
            &state,
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
        ]),
        "export kubeconfig --auth-plugin",
    );
    let doc: serde_json::Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(&kubeconfig).unwrap()).unwrap();
    let user = &doc["users"][0];
    assert_eq!(user["name"], name);
    // What kops 1.37 writes for the same flags, field for field.
    assert_eq!(
        user["user"],
        json!({"exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "args": ["helpers", "kubectl-auth", format!("--cluster={name}"), format!("--state={state}")],
            "command": "kops",
            "env": null,
            "provideClusterInfo": false,
        }})
    );
    assert_eq!(doc["contexts"][0]["context"]["user"], name);

    // The plugin, as kubectl runs it: an ExecCredential, then the cached one.
    let home = dir.path().join("home");
    let plugin = |extra: &[&str]| -> Run {
        let mut args = vec![
            "helpers",
            "kubectl-auth",
            "--cluster",
            name,
            "--state",
            &state,
        ];
        args.extend_from_slice(extra);
        command(&args).env("HOME", &home).output().unwrap().into()
    };
    let first = ok(plugin(&[]), "helpers kubectl-auth");
    let credential: serde_json::Value = serde_json::from_str(&first.stdout).unwrap();
    assert_eq!(
        credential["apiVersion"],
        "client.authentication.k8s.io/v1beta1"
    );
    assert_eq!(credential["kind"], "ExecCredential");
    let status = &credential["status"];
    assert!(status["clientCertificateData"]
        .as_str()
        .unwrap()
        .starts_with("-----BEGIN CERTIFICATE-----"));
    assert!(status["clientKeyData"]
        .as_str()
        .unwrap()
        .contains("PRIVATE KEY-----"));
    assert!(status["expirationTimestamp"]
        .as_str()
        .unwrap()
        .ends_with('Z'));
    let cache: Vec<_> = std::fs::read_dir(home.join(".kube/cache/kops-authentication"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(cache.len(), 1, "{cache:?}");
    assert!(cache[0].starts_with("auth_example_com_"), "{cache:?}");
    let second = ok(plugin(&[]), "helpers kubectl-auth (cached)");
    assert_eq!(
        first.stdout, second.stdout,
        "the cached credential is reused"
    );

    let bad = plugin(&["--api-version", "v1"]);
    assert_eq!(bad.code, 1);
    assert!(
        bad.stderr.contains("api-version `v1` is not supported"),
        "{}",
        bad.stderr
    );
}

#[test]
fn use_kubeconfig_needs_the_context_named_after_the_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let name = "ctx.example.com";
    let state = store_with_ca(dir.path(), name);
    let api = kops_testkit::kube_api::FakeApi::start();
    // Its only context is `c`, not the cluster's name.
    let kubeconfig = api.write_kubeconfig(dir.path());
    for args in [
        vec!["validate", "cluster", name, "--use-kubeconfig"],
        vec!["rolling-update", "cluster", name, "--use-kubeconfig"],
        vec!["get", "instances", name, "--use-kubeconfig"],
    ] {
        let mut full = args.clone();
        full.extend(["--state", state.as_str()]);
        let r: Run = command(&full)
            .env("KUBECONFIG", &kubeconfig)
            .output()
            .unwrap()
            .into();
        assert_eq!(r.code, 1, "{args:?}: {}", r.stderr);
        assert!(
            r.stderr
                .contains(&format!("context \"{name}\" does not exist")),
            "{args:?}: {}",
            r.stderr
        );
    }
}

/// A kubeconfig whose context of the cluster's name reaches `api`.
fn kubeconfig_for_cluster(
    dir: &Path,
    api: &kops_testkit::kube_api::FakeApi,
    cluster: &str,
) -> std::path::PathBuf {
    let path = dir.join("kubeconfig-skew");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    server: {}\n  name: {cluster}\n\
             contexts:\n- context:\n    cluster: {cluster}\n    user: u\n  name: {cluster}\ncurrent-context: {cluster}\n\
             users:\n- name: u\n  user:\n    token: t\n",
            api.url
        ),
    )
    .unwrap();
    path
}

/// The `KubernetesVersion` of the stored node config of role `role`.
fn stored_version(state_dir: &Path, cluster: &str, role: &str) -> String {
    let base = state_dir.join(cluster).join("igconfig").join(role);
    let group = std::fs::read_dir(&base)
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    let text = std::fs::read_to_string(group.join("nodeupconfig.yaml")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("KubernetesVersion: "))
        .unwrap_or_default()
        .trim()
        .to_string()
}

#[test]
fn update_holds_workers_at_the_control_planes_kubelet_unless_told_not_to() {
    let Some(moto) = kops_testkit::require_moto() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let name = "skew.example.com";
    let state_dir = dir.path().join("state");
    let state = file_url(&state_dir);
    ok(
        kops_on(
            moto,
            &[
                "create",
                "cluster",
                name,
                "--zones",
                "us-east-1a",
                "--state",
                &state,
                "--image",
                IMAGE,
                "--dns",
                "none",
                "--kubernetes-version",
                "1.34.1",
            ],
        ),
        "create cluster",
    );
    // The control plane's node still runs 1.33.4 (an upgrade under way).
    let api = kops_testkit::kube_api::FakeApi::start();
    api.put(
        "api/v1",
        "nodes",
        "",
        "cp-1",
        json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "cp-1", "labels": {"node-role.kubernetes.io/control-plane": ""}},
            "status": {"nodeInfo": {"kubeletVersion": "v1.33.4"}},
        }),
    );
    let kubeconfig = kubeconfig_for_cluster(dir.path(), &api, name);
    let update = |extra: &[&str]| -> Run {
        let mut args = vec![
            "update",
            "cluster",
            name,
            "--state",
            &state,
            "--yes",
            "--create-kube-config=false",
        ];
        args.extend_from_slice(extra);
        let mut c = command(&args);
        for (k, v) in moto.env() {
            c.env(k, v);
        }
        c.env("KUBECONFIG", &kubeconfig).output().unwrap().into()
    };
    let held = ok(update(&[]), "update --yes");
    assert!(
        held.stderr.contains(
            "The control plane runs Kubernetes 1.33.4: groups without an API server keep it"
        ),
        "{}",
        held.stderr
    );
    assert_eq!(stored_version(&state_dir, name, "node"), "1.33.4");
    assert_eq!(stored_version(&state_dir, name, "control-plane"), "1.34.1");

    let forced = ok(
        update(&["--ignore-kubelet-version-skew"]),
        "update --ignore-kubelet-version-skew",
    );
    assert!(
        !forced.stderr.contains("The control plane runs"),
        "{}",
        forced.stderr
    );
    assert_eq!(stored_version(&state_dir, name, "node"), "1.34.1");

    // The control plane caught up: nothing is held back.
    api.put(
        "api/v1",
        "nodes",
        "",
        "cp-1",
        json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "cp-1", "labels": {"node-role.kubernetes.io/control-plane": ""}},
            "status": {"nodeInfo": {"kubeletVersion": "v1.34.1"}},
        }),
    );
    let caught_up = ok(update(&["--prune"]), "update --prune");
    assert!(
        !caught_up.stderr.contains("The control plane runs"),
        "{}",
        caught_up.stderr
    );
    assert!(
        caught_up
            .stderr
            .contains("--prune: nothing deferred to delete"),
        "{}",
        caught_up.stderr
    );
    assert_eq!(stored_version(&state_dir, name, "node"), "1.34.1");
}
