//! The state-store files `update cluster --yes` writes besides the specs
//! and node configs, on moto with a file state store (issue 17): the etcd
//! cluster specs, `kops-version.txt`, the etcd-manager, kops-channels and
//! API health-check manifests, the bootstrap channel and every addon
//! manifest it names, at kops' keys. A second update plans nothing and
//! rewrites none of them.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::SystemTime;

use crate::common::{command, file_url, tree, Run};

/// An image moto has (see lifecycle).
use crate::common::IMAGE;

fn kops_on(moto: &kops_testkit::Moto, args: &[&str]) -> Run {
    let mut c = command(args);
    for (k, v) in moto.env() {
        c.env(k, v);
    }
    c.output().unwrap().into()
}

/// Modification times of the files of `dir` that `update` writes besides
/// the specs and node configs.
fn written(dir: &Path) -> BTreeMap<String, SystemTime> {
    tree(dir)
        .into_iter()
        .filter(|p| {
            p.starts_with("addons/")
                || p.starts_with("manifests/")
                || p.starts_with("backups/etcd/")
                || p == "kops-version.txt"
        })
        .filter_map(|p| {
            let modified = std::fs::metadata(dir.join(&p)).ok()?.modified().ok()?;
            Some((p, modified))
        })
        .collect()
}

#[test]
fn update_writes_kops_state_files_once() {
    let Some(moto) = kops_testkit::require_moto() else {
        return;
    };
    let cluster = "statefiles.example.com";
    moto.ensure_hosted_zone("example.com").unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let state = file_url(&tmp.path().join("state"));
    let key = tmp.path().join("id.pub");
    std::fs::write(&key, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKF1D4tCJrnUwJ/ZQf8x0OY7yS4ALaMtuLZOd6Ymnb6b test@example\n").unwrap();
    let r = kops_on(
        moto,
        &[
            "create",
            "cluster",
            cluster,
            "--zones",
            "us-east-1a",
            "--networking",
            "cilium",
            "--ssh-public-key",
            key.to_str().unwrap(),
            "--state",
            &state,
            "--image",
            IMAGE,
        ],
    );
    assert_eq!(r.code, 0, "create: {}", r.stderr);
    let r = kops_on(
        moto,
        &["update", "cluster", cluster, "--state", &state, "--yes"],
    );
    assert_eq!(r.code, 0, "apply: {}", r.stderr);

    let dir = tmp.path().join("state").join(cluster);
    for path in [
        "backups/etcd/main/control/etcd-cluster-spec",
        "backups/etcd/events/control/etcd-cluster-spec",
        "kops-version.txt",
        "manifests/channels/kops-channels.yaml",
        "manifests/etcd/main-control-plane-us-east-1a.yaml",
        "manifests/etcd/events-control-plane-us-east-1a.yaml",
        "manifests/static/kube-apiserver-healthcheck.yaml",
        "addons/bootstrap-channel.yaml",
    ] {
        assert!(dir.join(path).is_file(), "{path} not written");
    }
    let spec =
        std::fs::read_to_string(dir.join("backups/etcd/main/control/etcd-cluster-spec")).unwrap();
    assert!(spec.contains("\"memberCount\": 1"), "{spec}");
    // Every manifest the channel names is beside it, as kops lays them out.
    let channel = std::fs::read_to_string(dir.join("addons/bootstrap-channel.yaml")).unwrap();
    let channel =
        kops_channels::Channel::load("bootstrap-channel.yaml", channel.as_bytes()).unwrap();
    assert!(channel.spec.addons.len() >= 8, "{:?}", channel.spec.addons);
    for addon in &channel.spec.addons {
        let manifest = addon.manifest.trim_start_matches("./");
        assert!(
            dir.join("addons").join(manifest).is_file(),
            "{manifest} named by the channel but not written"
        );
    }
    let first = written(&dir);

    let r = kops_on(
        moto,
        &["update", "cluster", cluster, "--state", &state, "--yes"],
    );
    assert_eq!(r.code, 0, "second apply: {}", r.stderr);
    let second = written(&dir);
    assert_eq!(first, second, "the second update rewrote state files");
    let r = kops_on(
        moto,
        &[
            "update",
            "cluster",
            cluster,
            "--state",
            &state,
            "--exit-code",
        ],
    );
    assert_eq!(r.code, 0, "nothing to do:\n{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("No changes need to be applied"),
        "{}",
        r.stderr
    );

    let r = kops_on(moto, &crate::common::delete_args(cluster, &state));
    assert_eq!(r.code, 0, "delete: {}", r.stderr);
}
