//! Where nodes get nodeup, through the binary against moto: a release's
//! `nodeup-linux-amd64` beside `kops` is uploaded to the state store by
//! `update cluster --yes` under a versioned, content-addressed key and the
//! launch templates' user data names its URL and pins its sha256; kops'
//! `NODEUP_URL_AMD64` + `NODEUP_HASH_AMD64` and `KOPS_BASE_URL` (hash from
//! `<url>.sha256`) override it; a group whose architecture has no nodeup
//! stops the update before anything is written.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use base64::Engine;
use sha2::{Digest, Sha256};

use crate::common::{self, file_url, Run};

use crate::common::IMAGE;
const FAKE_NODEUP: &[u8] = b"#!/bin/sh\necho 'a fake nodeup for the publish test'\n";

/// A copy of the `kops` binary in its own directory (`<tmp>/<name>/kops`),
/// so the files beside it are the test's.
fn kops_copy(tmp: &Path, name: &str) -> PathBuf {
    let dir = tmp.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let kops = dir.join("kops");
    std::fs::copy(env!("CARGO_BIN_EXE_kops"), &kops).unwrap();
    kops
}

/// Runs a `kops` binary against moto with a clean environment plus `env`.
fn run(kops: &Path, moto: &kops_testkit::Moto, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut c = Command::new(kops);
    c.args(args)
        .env_remove("KOPS_STATE_STORE")
        .env_remove("KOPS_CLUSTER_NAME")
        .env_remove("KOPS_BASE_URL")
        .env_remove("NODEUP_URL_AMD64")
        .env_remove("NODEUP_URL_ARM64")
        .env_remove("NODEUP_HASH_AMD64")
        .env_remove("NODEUP_HASH_ARM64")
        .env("HOME", "/nonexistent-home")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null());
    for (k, v) in moto.env() {
        c.env(k, v);
    }
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap().into()
}

fn create(kops: &Path, moto: &kops_testkit::Moto, cluster: &str, state: &str, extra: &[&str]) {
    let mut args = vec![
        "create",
        "cluster",
        cluster,
        "--zones",
        "us-east-1a",
        "--state",
        state,
        "--image",
        IMAGE,
        "--dns",
        "none",
    ];
    args.extend_from_slice(extra);
    let r = run(kops, moto, &args, &[]);
    assert_eq!(r.code, 0, "create: {}", r.stderr);
}

/// The decoded user data of the latest version of a launch template.
fn user_data(endpoint: &str, template: &str) -> String {
    common::with_moto_sdk(endpoint, |config| async move {
        let out = aws_sdk_ec2::Client::new(&config)
            .describe_launch_template_versions()
            .launch_template_name(template)
            .versions("$Latest")
            .send()
            .await
            .unwrap();
        let data = out.launch_template_versions()[0]
            .launch_template_data()
            .and_then(|d| d.user_data())
            .unwrap_or_default()
            .to_string();
        String::from_utf8(
            base64::engine::general_purpose::STANDARD
                .decode(data)
                .unwrap(),
        )
        .unwrap()
    })
}

fn hex_sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn update_uploads_the_nodeup_beside_kops_and_pins_it_unless_kops_variables_say_otherwise() {
    let Some(moto) = kops_testkit::require_moto() else {
        return;
    };
    let cluster = "nodeup-publish.example.com";
    let tmp = tempfile::tempdir().unwrap();
    let state_dir = tmp.path().join("state");
    let state = file_url(&state_dir);
    let kops = kops_copy(tmp.path(), "release");
    std::fs::write(kops.with_file_name("nodeup-linux-amd64"), FAKE_NODEUP).unwrap();
    create(&kops, moto, cluster, &state, &[]);

    let r = run(
        &kops,
        moto,
        &["update", "cluster", cluster, "--state", &state, "--yes"],
        &[],
    );
    assert_eq!(r.code, 0, "apply: {}", r.stderr);

    // Uploaded once, under the cluster's own versioned, content-addressed key.
    let sha = hex_sha256(FAKE_NODEUP);
    let key = format!(
        "kops-rs/nodeup/{}/{sha}/linux/amd64/nodeup",
        env!("CARGO_PKG_VERSION")
    );
    let uploaded = state_dir.join(cluster).join(&key);
    assert_eq!(std::fs::read(&uploaded).unwrap(), FAKE_NODEUP);
    let published = common::tree(&state_dir.join(cluster).join("kops-rs"));
    assert_eq!(published, vec![key.replacen("kops-rs/", "", 1)]);
    let url = format!("{state}/{cluster}/{key}");
    for template in [
        format!("control-plane-us-east-1a.masters.{cluster}"),
        format!("nodes-us-east-1a.{cluster}"),
    ] {
        let script = user_data(&moto.endpoint(), &template);
        assert!(
            script.contains(&format!("NODEUP_URL_AMD64={url}\n")),
            "{template}: {script}"
        );
        assert!(
            script.contains(&format!("NODEUP_HASH_AMD64={sha}\n")),
            "{template}: {script}"
        );
        // No arm64 group and no arm64 binary: nothing for arm64.
        assert!(
            script.contains("NODEUP_URL_ARM64=\n"),
            "{template}: {script}"
        );
    }

    // NODEUP_URL_AMD64 with NODEUP_HASH_AMD64: used as given, nothing fetched.
    let pinned = "ab".repeat(32);
    let r = run(
        &kops,
        moto,
        &["update", "cluster", cluster, "--state", &state, "--yes"],
        &[
            (
                "NODEUP_URL_AMD64",
                "https://mirror.example.com/nodeup-amd64",
            ),
            ("NODEUP_HASH_AMD64", &pinned),
        ],
    );
    assert_eq!(r.code, 0, "apply with NODEUP_URL_AMD64: {}", r.stderr);
    let script = user_data(&moto.endpoint(), &format!("nodes-us-east-1a.{cluster}"));
    assert!(
        script.contains("NODEUP_URL_AMD64=https://mirror.example.com/nodeup-amd64\n")
            && script.contains(&format!("NODEUP_HASH_AMD64={pinned}\n")),
        "{script}"
    );

    // KOPS_BASE_URL: `<base>/linux/amd64/nodeup`, its hash read from the
    // `.sha256` beside it; without that file, an error that says so.
    let base_dir = tmp.path().join("kops-base/1.99.0");
    std::fs::create_dir_all(base_dir.join("linux/amd64")).unwrap();
    let base = format!("{}/", file_url(&base_dir));
    let r = run(
        &kops,
        moto,
        &["update", "cluster", cluster, "--state", &state, "--yes"],
        &[("KOPS_BASE_URL", &base)],
    );
    assert_eq!(r.code, 1, "apply without a .sha256: {}", r.stdout);
    assert!(
        r.stderr.contains("linux/amd64/nodeup.sha256") && r.stderr.contains("NODEUP_HASH_AMD64"),
        "{}",
        r.stderr
    );
    let published_hash = "cd".repeat(32);
    std::fs::write(
        base_dir.join("linux/amd64/nodeup.sha256"),
        format!("{published_hash}  nodeup\n"),
    )
    .unwrap();
    // kops' control plane also loads kops' images from KOPS_BASE_URL, each
    // pinned by the hash published beside it (arm64, which no group runs,
    // is best effort).
    let r = run(
        &kops,
        moto,
        &["update", "cluster", cluster, "--state", &state, "--yes"],
        &[("KOPS_BASE_URL", &base)],
    );
    assert_eq!(r.code, 1, "apply without the images' .sha256: {}", r.stdout);
    assert!(
        r.stderr
            .contains("images/kops-controller-amd64.tar.gz.sha256"),
        "{}",
        r.stderr
    );
    std::fs::create_dir_all(base_dir.join("images")).unwrap();
    for name in [
        "kops-controller",
        "kops-channels",
        "dns-controller",
        "kube-apiserver-healthcheck",
    ] {
        std::fs::write(
            base_dir.join(format!("images/{name}-amd64.tar.gz.sha256")),
            format!("{}  {name}-amd64.tar.gz\n", "ef".repeat(32)),
        )
        .unwrap();
    }
    let r = run(
        &kops,
        moto,
        &["update", "cluster", cluster, "--state", &state, "--yes"],
        &[("KOPS_BASE_URL", &base)],
    );
    assert_eq!(r.code, 0, "apply with KOPS_BASE_URL: {}", r.stderr);
    let stored = std::fs::read_to_string(state_dir.join(format!(
        "{cluster}/igconfig/control-plane/control-plane-us-east-1a/nodeupconfig.yaml"
    )))
    .unwrap();
    assert!(
        stored.contains(&format!(
            "images:\n  amd64:\n  - hash: {}\n    sources:\n    - {}/images/kops-controller-amd64.tar.gz\n",
            "ef".repeat(32),
            file_url(&base_dir)
        )),
        "{stored}"
    );
    let script = user_data(&moto.endpoint(), &format!("nodes-us-east-1a.{cluster}"));
    assert!(
        script.contains(&format!(
            "NODEUP_URL_AMD64={}/linux/amd64/nodeup\n",
            file_url(&base_dir)
        )) && script.contains(&format!("NODEUP_HASH_AMD64={published_hash}\n")),
        "{script}"
    );
}

#[test]
fn a_group_without_nodeup_for_its_architecture_stops_update_before_anything_is_written() {
    let Some(moto) = kops_testkit::require_moto() else {
        return;
    };
    let cluster = "nodeup-missing.example.com";
    let tmp = tempfile::tempdir().unwrap();
    let state_dir = tmp.path().join("state");
    let state = file_url(&state_dir);
    let kops = kops_copy(tmp.path(), "release");
    // Only the amd64 binary ships; the workers are Graviton (arm64).
    std::fs::write(kops.with_file_name("nodeup-linux-amd64"), FAKE_NODEUP).unwrap();
    create(&kops, moto, cluster, &state, &["--node-size", "t4g.medium"]);
    let before = common::tree(&state_dir);

    for apply in [false, true] {
        let mut args = vec!["update", "cluster", cluster, "--state", &state];
        if apply {
            args.push("--yes");
        }
        let r = run(&kops, moto, &args, &[]);
        assert_eq!(r.code, 1, "update (apply: {apply}): {}", r.stdout);
        for needle in [
            "instance group `nodes-us-east-1a`",
            "linux/arm64",
            "nodeup-linux-arm64",
            "NODEUP_URL_ARM64",
            "KOPS_BASE_URL",
        ] {
            assert!(r.stderr.contains(needle), "no {needle:?} in {}", r.stderr);
        }
        // Nothing written: no keysets, node configs, uploads or completed spec.
        assert_eq!(common::tree(&state_dir), before);
    }
    // The arm64 binary beside kops fixes it.
    std::fs::write(kops.with_file_name("nodeup-linux-arm64"), b"arm64").unwrap();
    let r = run(
        &kops,
        moto,
        &["update", "cluster", cluster, "--state", &state],
        &[],
    );
    assert_eq!(r.code, 0, "update: {}", r.stderr);
}
