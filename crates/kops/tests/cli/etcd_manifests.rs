//! Every etcd cluster where kops puts it: for each AWS and GCE case of kops'
//! `update_cluster` suite (in ../shared), renders the case with the `kops`
//! binary (`--target terraform`) and compares every etcd-manager manifest
//! (`*manifests-etcdmanager-*`) and etcd cluster spec (`*etcd-cluster-spec-*`)
//! of the golden `data/` directory with ours, byte for byte once key
//! material (PEM blocks) is set aside. One differing file fails the test;
//! the message names each file and its first differing line.
//!
//! kops' harness turns `APIServerNodes` on for two cases; the render here
//! does the same through `KOPS_FEATURE_FLAGS`.

use std::path::Path;
use std::process::Command;

use crate::terraform_conformance::{aws_cases, gce_cases};

/// The cases kops' integration test runs with a feature flag on.
fn feature_flags(case: &str) -> &'static str {
    match case {
        "apiservernodes" | "minimal_gce_plb_apiserver" => "+APIServerNodes",
        _ => "",
    }
}

fn is_etcd_file(name: &str) -> bool {
    name.contains("manifests-etcdmanager-") || name.contains("etcd-cluster-spec-")
}

/// The text with every PEM block replaced by one marker line.
fn keys_aside(text: &str) -> String {
    let mut out = Vec::new();
    let mut in_pem = false;
    for line in text.lines() {
        if line.contains("-----BEGIN") {
            in_pem = true;
        }
        if in_pem {
            if line.contains("-----END") {
                in_pem = false;
            }
            if out.last() != Some(&"<key material>") {
                out.push("<key material>");
            }
            continue;
        }
        out.push(line);
    }
    out.join("\n")
}

fn cluster_name(manifest: &str) -> Option<String> {
    let doc = manifest
        .split("\n---")
        .find(|d| d.lines().any(|l| l.trim() == "kind: Cluster"))?;
    let meta = doc.split("\nmetadata:").nth(1)?;
    meta.lines()
        .find_map(|l| l.strip_prefix("  name:"))
        .map(|n| n.trim().trim_matches('"').to_string())
}

fn kops(args: &[&str], dir: &Path, flags: &str) -> Result<(), String> {
    let out = Command::new(env!("CARGO_BIN_EXE_kops"))
        .args(args)
        .current_dir(dir)
        .env_remove("KOPS_STATE_STORE")
        .env_remove("KOPS_CLUSTER_NAME")
        .env_remove("AWS_PROFILE")
        .env("KOPS_FEATURE_FLAGS", flags)
        .output()
        .map_err(|e| format!("cannot run kops: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    let err = String::from_utf8_lossy(&out.stderr);
    Err(format!(
        "`kops {}` failed: {}",
        args.first().copied().unwrap_or(""),
        err.lines().next().unwrap_or("").trim()
    ))
}

/// Renders one case; returns one line per differing or missing file.
fn check_case(case: &Path) -> Result<(usize, Vec<String>), String> {
    let name = case.file_name().unwrap().to_string_lossy().to_string();
    let flags = feature_flags(&name);
    let input = case.join("in-v1alpha2.yaml");
    let manifest = std::fs::read_to_string(&input).map_err(|e| e.to_string())?;
    let cluster = cluster_name(&manifest).ok_or("no Cluster in in-v1alpha2.yaml")?;
    let work = tempfile::tempdir().map_err(|e| e.to_string())?;
    let state = format!("file://{}", work.path().join("state").display());
    let out = work.path().join("out");
    let input = input.to_string_lossy();
    kops(
        &["create", "-f", &input, "--state", &state],
        work.path(),
        flags,
    )?;
    let key = case.join("id_rsa.pub");
    if key.is_file() {
        let key = key.to_string_lossy();
        let args = [
            "create",
            "sshpublickey",
            &cluster,
            "-i",
            &key,
            "--state",
            &state,
        ];
        kops(&args, work.path(), flags)?;
    }
    let out_s = out.to_string_lossy();
    kops(
        &crate::common::terraform_args(&cluster, &state, &out_s),
        work.path(),
        flags,
    )?;
    let mut names: Vec<String> = std::fs::read_dir(case.join("data"))
        .map_err(|e| e.to_string())?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| is_etcd_file(n))
        .collect();
    names.sort();
    let mut diffs = Vec::new();
    for file in &names {
        let want = std::fs::read_to_string(case.join("data").join(file)).unwrap_or_default();
        let Ok(got) = std::fs::read_to_string(out.join("data").join(file)) else {
            diffs.push(format!("{name}/{file}: not rendered"));
            continue;
        };
        let (want, got) = (keys_aside(&want), keys_aside(&got));
        if want != got {
            let first = want
                .lines()
                .zip(got.lines())
                .enumerate()
                .find(|(_, (a, b))| a != b)
                .map(|(i, (a, b))| format!("line {}: kops `{a}`, kops-rs `{b}`", i + 1))
                .unwrap_or_else(|| {
                    format!(
                        "{} lines in kops', {} in ours",
                        want.lines().count(),
                        got.lines().count()
                    )
                });
            diffs.push(format!("{name}/{file}: {first}"));
        }
    }
    Ok((names.len(), diffs))
}

fn check(cases: Vec<std::path::PathBuf>, cloud: &str) {
    let mut files = 0;
    let mut failures = Vec::new();
    for case in &cases {
        match check_case(case) {
            Ok((n, diffs)) => {
                files += n;
                failures.extend(diffs);
            }
            Err(e) => failures.push(format!("{}: {e}", case.display())),
        }
    }
    println!(
        "{cloud}: {} cases, {files} etcd files, {} differ",
        cases.len(),
        failures.len()
    );
    assert!(files > 0, "{cloud}: no etcd files in kops' cases");
    assert!(
        failures.is_empty(),
        "{cloud}: etcd files that differ from kops':\n{}",
        failures.join("\n")
    );
}

#[test]
fn aws_etcd_manifests_equal_kops() {
    let Some(shared) = kops_testkit::shared_dir() else {
        return;
    };
    check(aws_cases(&shared), "AWS");
}

#[test]
fn gce_etcd_manifests_equal_kops() {
    let Some(shared) = kops_testkit::shared_dir() else {
        return;
    };
    check(gce_cases(&shared), "GCE");
}

#[test]
fn keys_are_set_aside_only() {
    let text = "a\n-----BEGIN X-----\nabc\n-----END X-----\nb";
    assert_eq!(keys_aside(text), "a\n<key material>\nb");
    assert!(is_etcd_file(
        "aws_s3_object_manifests-etcdmanager-cilium-master-us-test-1a_content"
    ));
    assert!(!is_etcd_file("aws_s3_object_nodeupconfig-nodes_content"));
}
