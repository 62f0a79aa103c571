//! `update cluster --target terraform` and the AWS account: with
//! credentials configured (here moto's) the render asks STS, as kops'
//! Terraform target does, and the addons that name the account (the node
//! termination handler's queue URL) name it; without credentials the render
//! stays offline and says once what it left as a placeholder.

use std::path::Path;

use crate::common::{self, command, file_url, kops_on, Run, IMAGE};

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

/// `kops ARGS` with no AWS credentials anywhere, in us-east-1.
fn offline(args: &[&str]) -> Run {
    let mut c = command(args);
    for variable in AWS_VARIABLES {
        c.env_remove(variable);
    }
    c.env("AWS_REGION", "us-east-1");
    c.output().expect("run kops").into()
}

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
        &crate::common::terraform_args(name, &state, out.to_str().unwrap()),
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
    let started = std::time::Instant::now();
    let r = offline(&crate::common::terraform_args(
        name,
        &state,
        out.to_str().unwrap(),
    ));
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

/// A file of the render's state store (a `file://` config base: Terraform
/// does not manage the state files).
fn state_file(state: &Path, cluster: &str, path: &str) -> String {
    let file = state.join(cluster).join(path);
    std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

/// The render with credentials finds the cluster's hosted zone, as kops'
/// Terraform target does: dns-controller, the control plane's IAM policy
/// and the completed spec name its id. Without the zone the render names
/// it by name (Terraform looks the id up) and says so once.
#[test]
fn render_names_the_hosted_zone_it_finds() {
    let Some(moto) = kops_testkit::require_moto() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // A domain no other test uses: moto may be shared by the process.
    let (domain, name) = ("render-zone.test", "c.render-zone.test");
    let state = file_url(&dir.path().join("state"));
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
            "--dns",
            "public",
            "--state",
            &state,
            "--image",
            IMAGE,
        ],
    );
    assert_eq!(r.code, 0, "create: {}", r.stderr);
    let render = |out: &str| {
        let out = dir.path().join(out);
        kops_on(
            moto,
            &crate::common::terraform_args(name, &state, out.to_str().unwrap()),
        )
    };
    let dns_controller = "addons/dns-controller.addons.k8s.io/k8s-1.12.yaml";

    // No zone yet: by name, one warning.
    let r = render("before");
    assert_eq!(r.code, 0, "render: {}", r.stderr);
    let warnings: Vec<&str> = r
        .stderr
        .lines()
        .filter(|l| l.starts_with("warning: the hosted zone is unknown"))
        .collect();
    assert_eq!(warnings.len(), 1, "{}", r.stderr);
    let manifest = state_file(&dir.path().join("state"), name, dns_controller);
    assert!(
        manifest.contains(&format!("- --zone={domain}\n")),
        "{manifest}"
    );

    let endpoint = moto.endpoint().to_string();
    let id = common::with_moto_sdk(&endpoint, |config| async move {
        let zone = aws_sdk_route53::Client::new(&config)
            .create_hosted_zone()
            .name(domain)
            .caller_reference(domain)
            .send()
            .await
            .unwrap();
        let id = zone.hosted_zone().unwrap().id();
        id.trim_start_matches("/hostedzone/").to_string()
    });
    let r = render("after");
    assert_eq!(r.code, 0, "render: {}", r.stderr);
    assert!(!r.stderr.contains("hosted zone is unknown"), "{}", r.stderr);
    let manifest = state_file(&dir.path().join("state"), name, dns_controller);
    assert!(
        manifest.contains(&format!("- --zone=*/{id}\n")),
        "{manifest}"
    );
    let completed = state_file(&dir.path().join("state"), name, "cluster-completed.spec");
    assert!(
        completed.contains(&format!("dnsZone: {id}\n")),
        "{completed}"
    );
    let tf = std::fs::read_to_string(dir.path().join("after/kubernetes.tf")).unwrap();
    assert!(!tf.contains("data \"aws_route53_zone\""), "{tf}");
    let policy = std::fs::read_dir(dir.path().join("after/data"))
        .unwrap()
        .flatten()
        .find(|f| {
            let n = f.file_name().to_string_lossy().to_string();
            n.starts_with("aws_iam_role_policy_masters.") && n.ends_with("_policy")
        })
        .map(|f| std::fs::read_to_string(f.path()).unwrap())
        .expect("the control plane's policy");
    assert!(
        policy.contains(&format!(":route53:::hostedzone/{id}\"")),
        "{policy}"
    );
}

/// A control plane in a private subnet and no `spec.api`: kops' populate
/// step gives the API a load balancer (Public, Classic on AWS), which the
/// render builds (with the Classic deprecation warning), offline too.
#[test]
fn private_control_plane_without_api_gets_its_load_balancer() {
    let dir = tempfile::tempdir().unwrap();
    let name = "noapi.example.com";
    let manifest = common::one_zone_cluster(name).replace(
        "  - {cidr: 172.20.32.0/19, name: us-east-1a, type: Public, zone: us-east-1a}\n",
        "  - {cidr: 172.20.32.0/19, name: us-east-1a, type: Private, zone: us-east-1a}\n  - {cidr: 172.20.4.0/22, name: utility-us-east-1a, type: Utility, zone: us-east-1a}\n  topology: {dns: {type: Public}}\n",
    );
    // Images by owner/name: an offline render does not look them up.
    let manifest = manifest.replace(
        "spec: {machineType",
        &format!("spec: {{image: {IMAGE}, machineType"),
    );
    assert!(manifest.contains("type: Private"), "{manifest}");
    std::fs::write(dir.path().join("cluster.yaml"), &manifest).unwrap();
    let state = file_url(&dir.path().join("state"));
    let input = dir.path().join("cluster.yaml");
    let r = offline(&["create", "-f", input.to_str().unwrap(), "--state", &state]);
    assert_eq!(r.code, 0, "create: {}", r.stderr);
    let out = dir.path().join("out");
    let r = offline(&crate::common::terraform_args(
        name,
        &state,
        out.to_str().unwrap(),
    ));
    assert_eq!(r.code, 0, "render: {}", r.stderr);
    let tf = std::fs::read_to_string(out.join("kubernetes.tf")).unwrap();
    assert!(
        tf.contains("resource \"aws_elb\" \"api-noapi-example-com\""),
        "{tf}"
    );
    assert!(
        r.stderr.contains("class `Classic` is deprecated"),
        "{}",
        r.stderr
    );
}
