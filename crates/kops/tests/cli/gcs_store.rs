//! A `gs://` state store on fake-gcs-server (issue 23): create, get, edit,
//! replace and delete through the binary; concurrent writers lose no
//! update; a missing bucket and missing credentials are one clear error.

use crate::common;

use std::path::Path;
use std::process::{Child, Command, Stdio};

use common::{command, Run};
use kops_testkit::FakeGcs;

const CLUSTER: &str = "gcs.example.com";

/// `kops ARGS` with `STORAGE_EMULATOR_HOST` pointing at `server`.
fn kops_gcs(server: &FakeGcs, args: &[&str]) -> Command {
    let mut c = command(args);
    c.envs(server.env())
        .env_remove("GOOGLE_APPLICATION_CREDENTIALS")
        // Were the emulator variable ignored, credentials would be looked
        // up and not found: no metadata server answers here.
        .env("GCE_METADATA_HOST", "127.0.0.1:1");
    c
}

fn run(mut c: Command) -> Run {
    c.output().expect("run kops").into()
}

/// A fresh bucket with the one-zone cluster created from a manifest.
fn created(server: &FakeGcs, bucket: &str, dir: &Path) -> String {
    server.create_bucket(bucket).unwrap();
    let state = format!("gs://{bucket}/kops");
    let file = dir.join("c.yaml");
    std::fs::write(&file, common::one_zone_cluster(CLUSTER)).unwrap();
    let r = run(kops_gcs(
        server,
        &["create", "-f", file.to_str().unwrap(), "--state", &state],
    ));
    assert_eq!(r.code, 0, "create: {}", r.stderr);
    state
}

/// An editor script: runs `before` (shell), then `sed -i EXPR` on the file.
fn editor(dir: &Path, name: &str, before: &str, expr: &str) -> String {
    let script = dir.join(name);
    std::fs::write(
        &script,
        format!("#!/bin/sh\nset -e\n{before}\nsed -i '{expr}' \"$1\"\n"),
    )
    .unwrap();
    let status = Command::new("chmod").arg("+x").arg(&script).status();
    assert!(status.unwrap().success());
    script.display().to_string()
}

#[test]
fn create_get_edit_replace_delete() {
    let Some(server) = kops_testkit::require_fake_gcs() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let state = created(server, "kops-cli-lifecycle", dir.path());

    let r = run(kops_gcs(server, &["get", "clusters", "--state", &state]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains(CLUSTER), "{}", r.stdout);
    let r = run(kops_gcs(
        server,
        &["get", "ig", "--name", CLUSTER, "--state", &state],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("nodes") && r.stdout.contains("control-plane-us-east-1a"),
        "{}",
        r.stdout
    );
    // Edit in an editor.
    let ed = editor(dir.path(), "ed.sh", "", "s/maxSize: 2/maxSize: 6/");
    let mut c = kops_gcs(
        server,
        &["edit", "ig", "nodes", "--name", CLUSTER, "--state", &state],
    );
    let r = run({
        c.env("EDITOR", &ed);
        c
    });
    assert_eq!(r.code, 0, "edit: {}", r.stderr);
    let ig = |server: &FakeGcs| {
        run(kops_gcs(
            server,
            &[
                "get", "ig", "nodes", "--name", CLUSTER, "-o", "yaml", "--state", &state,
            ],
        ))
        .stdout
    };
    assert!(ig(server).contains("maxSize: 6"), "{}", ig(server));

    // Replace from a file.
    let file = dir.path().join("replaced.yaml");
    let manifest = common::one_zone_cluster(CLUSTER).replace("maxSize: 2", "maxSize: 4");
    std::fs::write(&file, manifest).unwrap();
    let r = run(kops_gcs(
        server,
        &["replace", "-f", file.to_str().unwrap(), "--state", &state],
    ));
    assert_eq!(r.code, 0, "replace: {}", r.stderr);
    assert!(ig(server).contains("maxSize: 4"), "{}", ig(server));

    // Delete a group, then the cluster from the store.
    let r = run(kops_gcs(
        server,
        &[
            "delete", "ig", "nodes", "--name", CLUSTER, "--state", &state, "--yes",
        ],
    ));
    assert_eq!(r.code, 0, "delete ig: {}", r.stderr);
    assert!(!ig(server).contains("maxSize"));
    let r = run(kops_gcs(
        server,
        &[
            "delete",
            "cluster",
            CLUSTER,
            "--state",
            &state,
            "--unregister",
            "--yes",
        ],
    ));
    assert_eq!(r.code, 0, "delete cluster: {}", r.stderr);
    let r = run(kops_gcs(server, &["get", "clusters", "--state", &state]));
    assert!(!r.stdout.contains(CLUSTER), "{}", r.stdout);
    let store = kops_state::GcsStore::with_endpoint(
        "gs://kops-cli-lifecycle",
        kops_state::gcs::Endpoint {
            url: format!("http://{}", server.host()),
            authenticated: false,
        },
    )
    .unwrap();
    let left = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(kops_state::ObjectStore::list(&store, ""))
        .unwrap();
    assert!(left.is_empty(), "left in the bucket: {left:?}");
}

/// Eight `kops edit ig --set` processes at once, each adding its own label:
/// every label is there afterwards (each retries on top of the others).
#[test]
fn concurrent_set_edits_lose_no_update() {
    let Some(server) = kops_testkit::require_fake_gcs() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let state = created(server, "kops-cli-race", dir.path());
    let writers = 8;
    let children: Vec<Child> = (0..writers)
        .map(|i| {
            let label = format!("spec.nodeLabels=writer{i}=yes");
            kops_gcs(
                server,
                &[
                    "edit", "ig", "nodes", "--name", CLUSTER, "--state", &state, "--set", &label,
                ],
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
        })
        .collect();
    for child in children {
        let r: Run = child.wait_with_output().unwrap().into();
        assert_eq!(r.code, 0, "{}", r.stderr);
    }
    let r = run(kops_gcs(
        server,
        &[
            "get", "ig", "nodes", "--name", CLUSTER, "-o", "yaml", "--state", &state,
        ],
    ));
    for i in 0..writers {
        assert!(
            r.stdout.contains(&format!("    writer{i}: ")),
            "writer {i}'s label was lost:\n{}",
            r.stdout
        );
    }
}

/// Two editors open the same group and save at the same moment: one is
/// saved, the other is refused with a conflict instead of overwriting it.
#[test]
fn concurrent_editors_conflict_instead_of_overwriting() {
    let Some(server) = kops_testkit::require_fake_gcs() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let state = created(server, "kops-cli-editors", dir.path());
    let barrier = dir.path().join("barrier");
    std::fs::create_dir(&barrier).unwrap();
    // Each editor waits until both have the file open, then edits.
    let wait = format!(
        "touch {b}/$$; while [ $(ls {b} | wc -l) -lt 2 ]; do sleep 0.05; done",
        b = barrier.display()
    );
    let spawn = |name: &str, expr: &str| {
        let ed = editor(dir.path(), name, &wait, expr);
        let mut c = kops_gcs(
            server,
            &["edit", "ig", "nodes", "--name", CLUSTER, "--state", &state],
        );
        c.env("EDITOR", ed)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let a = spawn("a.sh", "s/maxSize: 2/maxSize: 5/");
    let b = spawn("b.sh", "s/minSize: 2/minSize: 1/");
    let a: Run = a.wait_with_output().unwrap().into();
    let b: Run = b.wait_with_output().unwrap().into();
    let (won, lost, change) = match (a.code, b.code) {
        (0, _) => (a, b, "maxSize: 5"),
        (_, 0) => (b, a, "minSize: 1"),
        _ => panic!("neither edit was saved:\n{}\n{}", a.stderr, b.stderr),
    };
    assert!(won.stderr.contains("Saved"), "{}", won.stderr);
    assert_ne!(lost.code, 0, "both edits reported success");
    assert!(
        lost.stderr
            .contains("was changed by another writer since it was read")
            && lost
                .stderr
                .contains("gs://kops-cli-editors/kops/gcs.example.com/instancegroup/nodes"),
        "{}",
        lost.stderr
    );
    let r = run(kops_gcs(
        server,
        &[
            "get", "ig", "nodes", "--name", CLUSTER, "-o", "yaml", "--state", &state,
        ],
    ));
    assert!(r.stdout.contains(change), "{}", r.stdout);
}

#[test]
fn missing_bucket_is_one_clear_error() {
    let Some(server) = kops_testkit::require_fake_gcs() else {
        return;
    };
    let r = run(kops_gcs(
        server,
        &["get", "clusters", "--state", "gs://kops-no-such-bucket/x"],
    ));
    assert_ne!(r.code, 0);
    assert!(
        r.stderr
            .contains("bucket `kops-no-such-bucket` does not exist")
            && r.stderr
                .contains("gcloud storage buckets create gs://kops-no-such-bucket"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
}

#[test]
fn missing_credentials_are_one_clear_error() {
    // No emulator: Cloud Storage itself, but no credentials to reach it.
    let home = tempfile::tempdir().unwrap();
    let mut c = command(&["get", "clusters", "--state", "gs://kops-any-bucket/x"]);
    c.env_remove("STORAGE_EMULATOR_HOST")
        .env_remove("GOOGLE_APPLICATION_CREDENTIALS")
        .env_remove("CLOUDSDK_CONFIG")
        .env("HOME", home.path())
        .env("GCE_METADATA_HOST", "127.0.0.1:1");
    let r = run(c);
    assert_ne!(r.code, 0);
    assert!(
        r.stderr
            .contains("no usable Google credentials for `gs://kops-any-bucket/x")
            && r.stderr.contains("gcloud auth application-default login")
            && r.stderr.contains("GOOGLE_APPLICATION_CREDENTIALS"),
        "{}",
        r.stderr
    );

    // A key file that is not there is named.
    let mut c = command(&["get", "clusters", "--state", "gs://kops-any-bucket/x"]);
    c.env_remove("STORAGE_EMULATOR_HOST")
        .env("GOOGLE_APPLICATION_CREDENTIALS", "/nonexistent/key.json");
    let r = run(c);
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("/nonexistent/key.json"), "{}", r.stderr);
}
