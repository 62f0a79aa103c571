//! `kops get assets [--copy]` through the binary, on a file:// state store
//! (no AWS): the node configs' files with their sha256, the manifests'
//! images, both remapped onto spec.assets' mirrors, and `--copy` filling a
//! file:// file repository.

use std::path::Path;

use crate::common::{command, file_url, Run};

const CLUSTER: &str = "seed001.example.com";

/// The seed-001 cluster (data/seed001/expected-cluster.yml) in a fresh
/// store, with `assets` added to its spec when given.
fn cluster_with(dir: &Path, assets: &str) -> String {
    let state = file_url(&dir.join("state"));
    let spec = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/cli/data/seed001/expected-cluster.yml"
    ))
    .unwrap()
    .replace("configBase: STATE/", &format!("configBase: {state}/"))
    .replacen("spec:\n", &format!("spec:\n{assets}"), 1);
    let file = dir.join("cluster.yml");
    std::fs::write(&file, spec).unwrap();
    let r = kops(dir, &["create", "-f", file.to_str().unwrap()]);
    assert_eq!(r.code, 0, "create -f: {}", r.stderr);
    state
}

fn kops(dir: &Path, args: &[&str]) -> Run {
    command(args)
        .current_dir(dir)
        .env("KOPS_STATE_STORE", file_url(&dir.join("state")))
        .env("KOPS_CLUSTER_NAME", CLUSTER)
        .output()
        .expect("run kops")
        .into()
}

fn sha256(bytes: &[u8]) -> String {
    kops_nodeup::bootstrap::sha256_hex(bytes)
}

#[test]
fn lists_files_with_sha256_and_images_in_kops_table_format() {
    let dir = tempfile::tempdir().unwrap();
    cluster_with(dir.path(), "");
    let r = kops(dir.path(), &["get", "assets"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // Two tables, each after a blank line: images, then files.
    let tables: Vec<&str> = r.stdout.split("\n\n").collect();
    assert!(r.stdout.starts_with('\n'), "{}", r.stdout);
    let header = |t: &str| -> Vec<String> {
        let first = t
            .trim_start_matches('\n')
            .lines()
            .next()
            .unwrap_or_default();
        first
            .split('\t')
            .filter(|c| !c.is_empty())
            .map(str::to_string)
            .collect()
    };
    let images = tables
        .iter()
        .find(|t| header(t) == ["CANONICAL", "DOWNLOAD"])
        .unwrap_or_else(|| panic!("{}", r.stdout));
    let files = tables
        .iter()
        .find(|t| header(t) == ["CANONICAL", "DOWNLOAD", "SHA"])
        .unwrap_or_else(|| panic!("{}", r.stdout));
    assert!(
        images.contains("registry.k8s.io/kops/dns-controller:"),
        "{images}"
    );
    assert!(
        images.contains("registry.k8s.io/etcd-manager/etcd-manager-slim:"),
        "{images}"
    );
    let kubelet = "https://dl.k8s.io/release/v1.34.0/bin/linux/amd64/kubelet";
    let line = files
        .lines()
        .find(|l| l.starts_with(kubelet))
        .unwrap_or_else(|| panic!("{files}"));
    let cells: Vec<&str> = line.split('\t').filter(|c| !c.is_empty()).collect();
    assert_eq!(cells[0], kubelet);
    assert_eq!(cells[1], kubelet, "no repository: download = canonical");
    assert_eq!(
        Some(cells[2]),
        kops_nodeup::assets::known_hash(kubelet),
        "{line}"
    );
    for asset in [
        "kubectl",
        "ecr-credential-provider",
        "cni-plugins",
        "containerd-",
        "runc",
    ] {
        assert!(files.contains(asset), "{asset} missing:\n{files}");
    }

    // -o yaml: kops' document (images, files with canonical/download/sha).
    let r = kops(dir.path(), &["get", "assets", "-o", "yaml"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let doc: serde_json::Value = serde_yaml_ng::from_str(&r.stdout).unwrap();
    let files = doc["files"].as_array().unwrap();
    assert!(files
        .iter()
        .all(|f| f["sha"].as_str().is_some_and(|s| s.len() == 64)));
    assert!(doc["images"].as_array().is_some_and(|i| !i.is_empty()));
}

#[test]
fn copy_fills_a_file_repository_and_names_what_it_could_not_fetch() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // containerd from an explicit package the test serves itself; the
    // other files are on the Internet, which a fake curl makes unreachable.
    let src = d.join("src");
    std::fs::create_dir_all(&src).unwrap();
    let tarball = b"not really containerd, but its sha256 is what the spec says";
    std::fs::write(src.join("containerd.tar.gz"), tarball).unwrap();
    let package = format!("file://{}/containerd.tar.gz", src.display());
    let mirror = file_url(&d.join("mirror"));
    let assets = format!(
        "  assets:\n    fileRepository: {mirror}\n    containerRegistry: mirror.example.com\n  containerd:\n    packages:\n      urlAmd64: {package}\n      hashAmd64: {}\n",
        sha256(tarball)
    );
    cluster_with(d, &assets);
    let bin = d.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let curl = bin.join("curl");
    std::fs::write(
        &curl,
        "#!/bin/sh\necho 'curl: (6) Could not resolve host' >&2\nexit 6\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&curl, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );

    let run = |args: &[&str]| -> Run {
        command(args)
            .current_dir(d)
            .env("KOPS_STATE_STORE", file_url(&d.join("state")))
            .env("KOPS_CLUSTER_NAME", CLUSTER)
            .env("PATH", &path)
            .output()
            .expect("run kops")
            .into()
    };

    // The listing maps files onto the repository and images onto the registry.
    let r = run(&["get", "assets", "-o", "json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let doc: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let kubelet = doc["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["canonical"].as_str().unwrap().ends_with("/kubelet"))
        .unwrap();
    assert_eq!(
        kubelet["download"],
        format!("{mirror}/release/v1.34.0/bin/linux/amd64/kubelet")
    );
    let dns = doc["images"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| {
            i["canonical"]
                .as_str()
                .unwrap()
                .starts_with("registry.k8s.io/kops/dns-controller:")
        })
        .unwrap();
    assert!(
        dns["download"]
            .as_str()
            .unwrap()
            .starts_with("mirror.example.com/kops-dns-controller:"),
        "{dns}"
    );

    let r = run(&["get", "assets", "--copy"]);
    assert_eq!(
        r.code, 1,
        "the unreachable files fail the copy: {}",
        r.stderr
    );
    let copied = d
        .join("mirror")
        .join(src.strip_prefix("/").unwrap())
        .join("containerd.tar.gz");
    assert_eq!(std::fs::read(&copied).unwrap(), tarball, "{}", r.stderr);
    assert!(r.stderr.contains("copied "), "{}", r.stderr);
    assert!(
        r.stderr
            .contains("https://dl.k8s.io/release/v1.34.0/bin/linux/amd64/kubelet: download failed"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains("would copy registry.k8s.io/kops/dns-controller:"),
        "{}",
        r.stderr
    );
    assert!(
        !d.join("mirror/release").exists(),
        "nothing unverified is written"
    );

    // Again: the copied file is recognised by its sha256.
    let r = run(&["get", "assets", "--copy"]);
    assert!(r.stderr.contains("present "), "{}", r.stderr);
    assert!(
        r.stderr.contains("0 copied, 1 already present"),
        "{}",
        r.stderr
    );
}

#[test]
fn copy_without_a_file_repository_is_an_error_with_a_hint() {
    let dir = tempfile::tempdir().unwrap();
    cluster_with(dir.path(), "");
    let r = kops(dir.path(), &["get", "assets", "--copy"]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("spec.assets.fileRepository"),
        "{}",
        r.stderr
    );
}
