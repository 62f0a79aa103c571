//! `create cluster --cloud gce` through the binary: the project from
//! gcloud's configuration when `--project` is not given, the stored spec,
//! and the GCE flags in a dry run.

use crate::common;

use common::{command, file_url, kops, Run};

fn assert_has(text: &str, wanted: &[&str]) {
    for want in wanted {
        assert!(text.contains(want), "`{want}` missing:\n{text}");
    }
}

#[test]
fn project_from_gcloud_and_stored_spec() {
    let tmp = tempfile::tempdir().unwrap();
    let gcloud = tmp.path().join("gcloud");
    std::fs::create_dir_all(gcloud.join("configurations")).unwrap();
    std::fs::write(gcloud.join("active_config"), "work").unwrap();
    std::fs::write(
        gcloud.join("configurations/config_work"),
        "[core]\naccount = me@example.com\nproject = from-gcloud\n",
    )
    .unwrap();
    let state = file_url(&tmp.path().join("state"));
    let r: Run = command(&[
        "create",
        "cluster",
        "g.example.com",
        "--cloud",
        "gce",
        "--zones",
        "us-central1-a,us-central1-b",
        "--state",
        &state,
    ])
    .env("CLOUDSDK_CONFIG", &gcloud)
    .output()
    .expect("run kops")
    .into();
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("Using gcloud's default project from-gcloud"),
        "{}",
        r.stderr
    );

    let got = kops(&[
        "get",
        "all",
        "g.example.com",
        "-o",
        "yaml",
        "--state",
        &state,
    ]);
    assert_eq!(got.code, 0, "{}", got.stderr);
    assert_has(
        &got.stdout,
        &[
            "cloudProvider: gce",
            "project: from-gcloud",
            "region: us-central1",
            "cidr: 10.0.16.0/20",
            "machineType: e2-medium",
            "- us-central1-b",
            "image: ubuntu-os-cloud/ubuntu-2404-noble-amd64-v20260615",
        ],
    );
    assert!(!got.stdout.contains("class: Network"), "{}", got.stdout);
}

#[test]
fn gce_flags_in_a_dry_run() {
    let r = kops(&[
        "create",
        "cluster",
        "p.example.com",
        "--cloud",
        "gce",
        "--project",
        "my-project",
        "--gce-service-account",
        "kops@my-project.iam.gserviceaccount.com",
        "--zones",
        "europe-west4-a",
        "--topology",
        "private",
        "--bastion",
        "--dry-run",
        "-o",
        "yaml",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_has(
        &r.stdout,
        &[
            "gceServiceAccount: kops@my-project.iam.gserviceaccount.com",
            "project: my-project",
            "type: Private",
            "machineType: e2-micro",
            "name: bastions",
        ],
    );
    assert!(!r.stdout.contains("utility-"), "{}", r.stdout);
}

/// `--vpc` (`--network-id`) on GCE names an existing network, as in kops:
/// with its subnetwork (`--subnets`) the spec is kops' (checked against the
/// real kops 1.37: `networkID` and the subnet's `id`, no range); alone it
/// is refused, since kops reads the ranges the network's subnetworks use
/// from Compute Engine to pick a free one, and nothing is written.
#[test]
fn existing_network_with_vpc() {
    let tmp = tempfile::tempdir().unwrap();
    let state = file_url(&tmp.path().join("state"));
    let create = |name: &str, extra: &[&str]| {
        let mut args = vec![
            "create",
            "cluster",
            name,
            "--cloud",
            "gce",
            "--project",
            "p",
            "--zones",
            "us-central1-a",
            "--state",
            &state,
        ];
        args.extend_from_slice(extra);
        kops(&args)
    };
    let r = create(
        "n.example.com",
        &[
            "--vpc",
            "shared-net",
            "--subnets",
            "shared-sub",
            "--dry-run",
            "-o",
            "yaml",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_has(
        &r.stdout,
        &[
            "networkID: shared-net",
            "  - id: shared-sub\n    name: us-central1\n    region: us-central1\n    type: Public\n",
        ],
    );
    assert!(!r.stdout.contains("cidr: 10."), "{}", r.stdout);

    let r = create(
        "n.example.com",
        &[
            "--network-id",
            "host-project/shared-net",
            "--subnets",
            "shared-sub",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let got = kops(&[
        "get",
        "cluster",
        "n.example.com",
        "-o",
        "yaml",
        "--state",
        &state,
    ]);
    assert_has(
        &got.stdout,
        &["networkID: host-project/shared-net", "id: shared-sub"],
    );

    let r = create("m.example.com", &["--vpc", "shared-net"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert_has(
        &r.stderr,
        &[
            "the ranges the subnetworks of network `shared-net` use are not known",
            "--subnets",
        ],
    );
    let listed = kops(&["get", "clusters", "--state", &state]);
    assert!(
        !listed.stdout.contains("m.example.com"),
        "{}",
        listed.stdout
    );
}
