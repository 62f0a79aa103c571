//! `kops edit`: saves valid edits, reopens the editor with the error on an
//! invalid one, and saves nothing on abort. The editor is a script.

use crate::common;

use std::path::Path;

use common::{command, file_url, kops, Run};

struct Fixture {
    dir: tempfile::TempDir,
    state: String,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.yaml");
    std::fs::write(&file, common::one_zone_cluster("edit.example.com")).unwrap();
    let state = file_url(&dir.path().join("state"));
    let r = kops(&["create", "-f", file.to_str().unwrap(), "--state", &state]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    Fixture { dir, state }
}

/// An editor that applies the n-th sed expression on its n-th run and keeps
/// a copy of what it was shown.
fn scripted_editor(dir: &Path, steps: &[&str]) -> String {
    let script = dir.join("editor.sh");
    let mut body = String::from("#!/bin/sh\nset -e\nn=$(cat \"$0.count\" 2>/dev/null || echo 0)\nn=$((n+1))\necho $n > \"$0.count\"\ncp \"$1\" \"$0.shown.$n\"\ncase $n in\n");
    for (i, s) in steps.iter().enumerate() {
        body.push_str(&format!("  {}) {s} ;;\n", i + 1));
    }
    body.push_str("esac\n");
    std::fs::write(&script, body).unwrap();
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(&script)
        .status()
        .unwrap();
    script.display().to_string()
}

fn edit(f: &Fixture, editor: &str, what: &[&str]) -> Run {
    let mut args = vec!["edit"];
    args.extend_from_slice(what);
    args.extend_from_slice(&["--state", &f.state]);
    command(&args)
        .env("EDITOR", editor)
        .output()
        .unwrap()
        .into()
}

fn ig_yaml(f: &Fixture, name: &str) -> String {
    kops(&["get", "ig", name, "-o", "yaml", "--state", &f.state]).stdout
}

#[test]
fn valid_edit_is_saved() {
    let f = fixture();
    let editor = scripted_editor(f.dir.path(), &[r#"sed -i 's/maxSize: 2/maxSize: 6/' "$1""#]);
    let r = edit(&f, &editor, &["ig", "nodes"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("Saved instance group nodes"),
        "{}",
        r.stderr
    );
    assert!(ig_yaml(&f, "nodes").contains("maxSize: 6"));
}

#[test]
fn invalid_edit_reopens_with_the_error_then_saves_the_fix() {
    let f = fixture();
    let editor = scripted_editor(
        f.dir.path(),
        &[
            r#"sed -i 's/minSize: 2/minSize: 9/' "$1""#,
            r#"sed -i 's/minSize: 9/minSize: 1/' "$1""#,
        ],
    );
    let r = edit(&f, &editor, &["ig", "nodes"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let shown = std::fs::read_to_string(format!("{editor}.shown.2")).unwrap();
    assert!(
        shown.contains("# Error: ") || shown.contains("# cluster `edit.example.com` is not valid"),
        "{shown}"
    );
    assert!(
        shown.contains("spec.minSize: `9`: is greater than spec.maxSize"),
        "{shown}"
    );
    assert!(
        shown.contains("minSize: 9"),
        "the second round shows the user's edit: {shown}"
    );
    assert!(ig_yaml(&f, "nodes").contains("minSize: 1"));
}

#[test]
fn giving_up_after_an_invalid_edit_saves_nothing() {
    let f = fixture();
    let before = ig_yaml(&f, "nodes");
    let editor = scripted_editor(
        f.dir.path(),
        &[r#"sed -i 's/minSize: 2/minSize: 9/' "$1""#, "true"],
    );
    let r = edit(&f, &editor, &["ig", "nodes"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("edit aborted"), "{}", r.stderr);
    assert_eq!(ig_yaml(&f, "nodes"), before);
}

#[test]
fn empty_file_or_no_change_cancels() {
    let f = fixture();
    let before = kops(&["get", "all", "-o", "yaml", "--state", &f.state]).stdout;
    let r = edit(
        &f,
        &scripted_editor(f.dir.path(), &[r#": > "$1""#]),
        &["cluster"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("Edit cancelled"), "{}", r.stderr);
    let dir2 = tempfile::tempdir().unwrap();
    let r = edit(&f, &scripted_editor(dir2.path(), &["true"]), &["cluster"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("no changes made"), "{}", r.stderr);
    assert_eq!(
        kops(&["get", "all", "-o", "yaml", "--state", &f.state]).stdout,
        before
    );
}

#[test]
fn cluster_edit_is_validated_with_its_groups() {
    let f = fixture();
    let editor = scripted_editor(
        f.dir.path(),
        &[
            r#"sed -i 's/instanceGroup: control-plane-us-east-1a/instanceGroup: nodes/' "$1""#,
            "true",
        ],
    );
    let r = edit(&f, &editor, &["cluster", "edit.example.com"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("not a control-plane group"),
        "{}",
        r.stderr
    );
}

#[test]
fn editor_failure_saves_nothing() {
    let f = fixture();
    let r = edit(&f, "false", &["ig", "nodes"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("exited with"), "{}", r.stderr);
}
