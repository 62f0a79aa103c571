//! The GitOps loop of the second seed (a Makefile's `make cluster-update`),
//! run through the binary as that Makefile does, in one working directory:
//!
//! ```text
//! kops toolbox template --template cluster-template.yml --values values.yml \
//!     --snippets snippets --output cluster.yml
//! kops replace -f cluster.yml --force
//! kops update cluster --target terraform --out OUT
//! ```
//!
//! The template (data/seed001) uses values, `range` over the node groups,
//! `if`, `include` of a snippet and Sprig functions; its rendering must equal
//! data/seed001/expected-cluster.yml. Then a changed value in values.yml must
//! change exactly the Terraform attributes it stands for, and nothing else.
//! Needs no AWS: the state store is file:// and the target is Terraform.

use std::path::Path;

use crate::common::{command, file_url, Run};

const CLUSTER: &str = "seed001.example.com";

fn data() -> &'static Path {
    Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/cli/data/seed001"
    ))
}

/// A working directory laid out like the seed's `2-kops` folder, with
/// values.yml's state store pointing into it.
fn workdir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::copy(
        data().join("cluster-template.yml"),
        d.join("cluster-template.yml"),
    )
    .unwrap();
    std::fs::create_dir(d.join("snippets")).unwrap();
    std::fs::copy(
        data().join("snippets/cloud-labels.yml"),
        d.join("snippets/cloud-labels.yml"),
    )
    .unwrap();
    let values = std::fs::read_to_string(data().join("values.yml")).unwrap();
    std::fs::write(
        d.join("values.yml"),
        values.replace("stateStore: STATE", &format!("stateStore: {}", state(d))),
    )
    .unwrap();
    dir
}

fn state(dir: &Path) -> String {
    file_url(&dir.join("state"))
}

/// `kops ARGS` run in `dir` with KOPS_STATE_STORE set, as the Makefile runs it.
fn kops_in(dir: &Path, args: &[&str]) -> Run {
    command(args)
        .current_dir(dir)
        .env("KOPS_STATE_STORE", state(dir))
        .output()
        .expect("run kops")
        .into()
}

fn ok(r: Run, what: &str) -> Run {
    assert_eq!(
        r.code, 0,
        "{what} failed\nstdout:\n{}\nstderr:\n{}",
        r.stdout, r.stderr
    );
    r
}

const TEMPLATE: &[&str] = &[
    "toolbox",
    "template",
    "--template",
    "cluster-template.yml",
    "--values",
    "values.yml",
    "--snippets",
    "snippets",
    "--output",
    "cluster.yml",
];

/// `make cluster-update`: template, replace, Terraform output into `out`.
fn cluster_update(dir: &Path, out: &str) -> String {
    ok(kops_in(dir, TEMPLATE), "toolbox template");
    ok(
        kops_in(dir, &["replace", "-f", "cluster.yml", "--force"]),
        "replace -f",
    );
    ok(
        kops_in(
            dir,
            &[
                "update",
                "cluster",
                CLUSTER,
                "--target",
                "terraform",
                "--out",
                out,
            ],
        ),
        "update cluster --target terraform",
    );
    std::fs::read_to_string(dir.join(out).join("kubernetes.tf")).unwrap()
}

/// The lines of `a` and `b` that differ, as (before, after), position by
/// position (a value change never adds or removes lines here).
fn changed_lines(a: &str, b: &str) -> Vec<(String, String)> {
    let (a, b): (Vec<_>, Vec<_>) = (a.lines().collect(), b.lines().collect());
    assert_eq!(a.len(), b.len(), "a value change added or removed lines");
    a.iter()
        .zip(&b)
        .filter(|(x, y)| x != y)
        .map(|(x, y)| (x.trim().to_string(), y.trim().to_string()))
        .collect()
}

fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Which Terraform resource block a line number of kubernetes.tf is in.
fn resource_of(tf: &str, line: &str) -> String {
    let mut current = String::new();
    for l in tf.lines() {
        if l.starts_with("resource ") {
            current = l.trim_end_matches(" {").to_string();
        }
        if l.trim() == line {
            return current;
        }
    }
    panic!("{line} not in kubernetes.tf")
}

#[test]
fn template_renders_the_expected_cluster_yml() {
    let dir = workdir();
    let d = dir.path();
    ok(kops_in(d, TEMPLATE), "toolbox template");
    let got = std::fs::read_to_string(d.join("cluster.yml")).unwrap();
    let want = std::fs::read_to_string(data().join("expected-cluster.yml"))
        .unwrap()
        .replace("configBase: STATE/", &format!("configBase: {}/", state(d)));
    assert_eq!(got, want);
}

#[test]
fn gitops_loop_a_changed_value_changes_exactly_its_terraform_attributes() {
    let dir = workdir();
    let d = dir.path();
    let key = d.join("id.pub");
    std::fs::write(
        &key,
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKMAnwbSPNSbpk1bnfWt2BBm7fwBEVr1xxZmZdDbNVdC seed001\n",
    )
    .unwrap();

    ok(kops_in(d, TEMPLATE), "toolbox template");
    let replaced = ok(
        kops_in(d, &["replace", "-f", "cluster.yml", "--force"]),
        "replace -f",
    );
    assert!(
        replaced.stdout.contains("nodes-spot") || replaced.stderr.contains("nodes-spot"),
        "{}{}",
        replaced.stdout,
        replaced.stderr
    );
    // replace stored what the template rendered.
    let stored = ok(kops_in(d, &["get", "ig", "--name", CLUSTER]), "get ig");
    for ig in ["control-plane-us-test-1a", "nodes-apps", "nodes-spot"] {
        assert!(stored.stdout.contains(ig), "{}", stored.stdout);
    }
    ok(
        kops_in(
            d,
            &[
                "create",
                "sshpublickey",
                CLUSTER,
                "-i",
                key.to_str().unwrap(),
            ],
        ),
        "create sshpublickey",
    );
    let before = cluster_update(d, "out1");

    // The same values again: the same Terraform, byte for byte.
    let again = cluster_update(d, "out-again");
    assert_eq!(before, again, "a re-render without changes differs");

    // A node group's maxSize and another's machine type change in values.yml.
    let values = std::fs::read_to_string(d.join("values.yml")).unwrap();
    let values = values
        .replace("maxSize: 5", "maxSize: 7")
        .replace("machineType: t3.medium", "machineType: t3.large");
    std::fs::write(d.join("values.yml"), values).unwrap();
    let after = cluster_update(d, "out2");

    let mut changed: Vec<(String, String, String)> = changed_lines(&before, &after)
        .into_iter()
        .map(|(x, y)| (resource_of(&before, &x), squash(&x), squash(&y)))
        .collect();
    changed.sort();
    assert_eq!(
        changed,
        vec![
            (
                r#"resource "aws_autoscaling_group" "nodes-spot-seed001-example-com""#.to_string(),
                "max_size = 5".to_string(),
                "max_size = 7".to_string()
            ),
            (
                r#"resource "aws_launch_template" "nodes-apps-seed001-example-com""#.to_string(),
                r#"instance_type = "t3.medium""#.to_string(),
                r#"instance_type = "t3.large""#.to_string()
            ),
        ]
    );
}

#[test]
fn a_missing_value_with_fail_on_missing_names_the_key_and_the_line() {
    let dir = workdir();
    let d = dir.path();
    let values = std::fs::read_to_string(d.join("values.yml")).unwrap();
    let values: String = values
        .lines()
        .filter(|l| !l.starts_with("kubernetesVersion:"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(d.join("values.yml"), values).unwrap();
    let mut args = TEMPLATE.to_vec();
    args.push("--fail-on-missing");
    let r = kops_in(d, &args);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("cluster-template.yml:28:")
            && r.stderr
                .contains(r#"map has no entry for key "kubernetesVersion""#),
        "{}",
        r.stderr
    );
    assert!(
        !d.join("cluster.yml").exists(),
        "nothing is written on error"
    );
}
