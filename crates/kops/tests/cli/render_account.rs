//! `update cluster --target terraform` and the AWS account: with
//! credentials configured (here moto's) the render asks STS, as kops'
//! Terraform target does, and the addons that name the account (the node
//! termination handler's queue URL) name it; without credentials the render
//! stays offline and says once what it left as a placeholder.

use std::path::Path;

use crate::common::{command, file_url, kops_on, Run, IMAGE};

/// The AWS variables a developer's shell may carry, removed so the
/// offline case has no credentials.
const AWS_VARIABLES: [&str; 9] = [
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ENDPOINT_URL",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CONFIG_FILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
];

const WARNING: &str = "warning: the AWS account is unknown";

/// The node termination handler's manifest the render wrote to the state
/// store (a `file://` config base: Terraform does not manage it).
fn nth_manifest(state: &Path, cluster: &str) -> String {
    let dir = state
        .join(cluster)
        .join("addons/node-termination-handler.aws");
    let file = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .find(|f| f.file_name().to_string_lossy().ends_with(".yaml"))
        .expect("the termination handler's manifest");
    std::fs::read_to_string(file.path()).unwrap()
}

/// `create cluster` (offline) in a fresh state store.
fn create(dir: &Path, name: &str, moto: &kops_testkit::Moto) -> String {
    let state = file_url(&dir.join("state"));
    let r = kops_on(
        moto,
        &[
            "create",
            "cluster",
            name,
            "--zones",
            "us-east-1a",
            "--networking",
            "cilium",
            "--state",
            &state,
            "--image",
            IMAGE,
            "--dns",
            "none",
        ],
    );
    assert_eq!(r.code, 0, "create: {}", r.stderr);
    state
}

#[test]
fn render_names_the_account_with_credentials_and_warns_once_without() {
    let Some(moto) = kops_testkit::require_moto() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let name = "account.example.com";
    let state = create(dir.path(), name, moto);

    // With moto's endpoint and credentials: moto's account.
    let out = dir.path().join("online");
    let r = kops_on(
        moto,
        &[
            "update",
            "cluster",
            name,
            "--state",
            &state,
            "--target",
            "terraform",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(r.code, 0, "render: {}", r.stderr);
    assert!(!r.stderr.contains(WARNING), "{}", r.stderr);
    let manifest = nth_manifest(&dir.path().join("state"), name);
    assert!(
        manifest.contains("https://sqs.us-east-1.amazonaws.com/123456789012/"),
        "{manifest}"
    );

    // No credentials anywhere: offline, one warning line.
    let out = dir.path().join("offline");
    let mut c = command(&[
        "update",
        "cluster",
        name,
        "--state",
        &state,
        "--target",
        "terraform",
        "--out",
        out.to_str().unwrap(),
    ]);
    for variable in AWS_VARIABLES {
        c.env_remove(variable);
    }
    c.env("AWS_REGION", "us-east-1");
    let started = std::time::Instant::now();
    let r: Run = c.output().expect("run kops").into();
    assert_eq!(r.code, 0, "render: {}", r.stderr);
    assert!(
        started.elapsed().as_secs() < 60,
        "the offline render waited"
    );
    let warnings: Vec<&str> = r
        .stderr
        .lines()
        .filter(|l| l.starts_with(WARNING))
        .collect();
    assert_eq!(warnings.len(), 1, "{}", r.stderr);
    assert!(warnings[0].contains("queue URL"), "{}", warnings[0]);
    assert!(warnings[0].contains("credentials"), "{}", warnings[0]);
    assert!(!nth_manifest(&dir.path().join("state"), name).contains("123456789012"));
}
