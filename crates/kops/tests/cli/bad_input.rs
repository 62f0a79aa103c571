//! Bad input gets a clear error naming the field and the fix, a non-zero exit
//! code, no panic, and nothing written to the state store. Each case's
//! stderr is a snapshot.

use crate::common;

use common::{command, file_url, kops, tree, Run};

/// A valid cluster with a control-plane group and a node group.
const BASE: &str = r#"apiVersion: kops.k8s.io/v1alpha2
kind: Cluster
metadata:
  name: bad.example.com
spec:
  api:
    loadBalancer:
      class: Network
      type: Public
  cloudProvider: aws
  etcdClusters:
  - etcdMembers:
    - instanceGroup: control-plane-us-east-1a
      name: a
    name: main
  - etcdMembers:
    - instanceGroup: control-plane-us-east-1a
      name: a
    name: events
  kubernetesApiAccess:
  - 0.0.0.0/0
  kubernetesVersion: v1.34.1
  networkCIDR: 172.20.0.0/16
  networking:
    cilium: {}
  nonMasqueradeCIDR: 100.64.0.0/10
  sshAccess:
  - 0.0.0.0/0
  subnets:
  - cidr: 172.20.32.0/19
    name: us-east-1a
    type: Public
    zone: us-east-1a
  - cidr: 172.20.64.0/19
    name: us-east-1b
    type: Public
    zone: us-east-1b
  topology:
    dns:
      type: Public
---
apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata:
  labels:
    kops.k8s.io/cluster: bad.example.com
  name: control-plane-us-east-1a
spec:
  machineType: t3.medium
  maxSize: 1
  minSize: 1
  role: Master
  subnets:
  - us-east-1a
---
apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata:
  labels:
    kops.k8s.io/cluster: bad.example.com
  name: nodes
spec:
  machineType: t3.medium
  maxSize: 3
  minSize: 2
  role: Node
  subnets:
  - us-east-1a
  - us-east-1b
"#;

/// (snapshot name, text to replace in BASE, replacement)
const MANIFEST_CASES: &[(&str, &str, &str)] = &[
    ("yaml_bad_indentation", "  cloudProvider: aws\n", "  cloudProvider: aws\n   oops: [\n"),
    ("yaml_tab_indentation", "  cloudProvider: aws\n", "\tcloudProvider: aws\n"),
    ("type_min_size_not_a_number", "  minSize: 2\n", "  minSize: two\n"),
    ("type_subnets_not_a_list", "  subnets:\n  - us-east-1a\n  - us-east-1b\n", "  subnets: us-east-1a\n"),
    ("missing_kind", "kind: Cluster\n", ""),
    ("wrong_api_version", "apiVersion: kops.k8s.io/v1alpha2\nkind: Cluster", "apiVersion: kops.k8s.io/v1beta9\nkind: Cluster"),
    ("cluster_name_uppercase", "  name: bad.example.com\nspec", "  name: Bad.example.com\nspec"),
    ("cluster_name_not_fqdn", "  name: bad.example.com\nspec", "  name: bad\nspec"),
    ("cloud_provider_missing", "  cloudProvider: aws\n", ""),
    ("cloud_provider_unknown", "  cloudProvider: aws\n", "  cloudProvider: awz\n"),
    ("kubernetes_version_missing", "  kubernetesVersion: v1.34.1\n", ""),
    ("kubernetes_version_too_old", "v1.34.1", "v1.25.16"),
    ("kubernetes_version_too_new", "v1.34.1", "v1.45.0"),
    ("kubernetes_version_not_a_version", "v1.34.1", "latest"),
    ("networking_unknown", "    cilium: {}\n", "    weave: {}\n"),
    ("networking_two_cnis", "    cilium: {}\n", "    cilium: {}\n    calico: {}\n"),
    ("network_cidr_invalid", "  networkCIDR: 172.20.0.0/16\n", "  networkCIDR: 172.20.0.0/33\n"),
    ("network_cidr_host_bits", "  networkCIDR: 172.20.0.0/16\n", "  networkCIDR: 172.20.1.0/16\n"),
    ("subnet_cidr_outside_network", "172.20.64.0/19", "10.1.0.0/19"),
    ("subnet_cidrs_overlap", "172.20.64.0/19", "172.20.32.0/20"),
    ("subnet_cidr_invalid", "172.20.64.0/19", "172.20.64.0"),
    ("subnet_type_unknown", "    name: us-east-1b\n    type: Public\n", "    name: us-east-1b\n    type: Protected\n"),
    ("subnet_names_duplicate", "    name: us-east-1b\n", "    name: us-east-1a\n"),
    ("zones_in_two_regions", "    zone: us-east-1b\n", "    zone: us-west-2b\n"),
    ("dns_type_unknown", "      type: Public\n---", "      type: Global\n---"),
    ("ssh_access_not_a_cidr", "  sshAccess:\n  - 0.0.0.0/0\n", "  sshAccess:\n  - everyone\n"),
    // Classic is accepted (kops 1.36's clusters), but not with what only a
    // Network Load Balancer does.
    ("api_load_balancer_classic_tls", "      class: Network\n", "      class: Classic\n      sslCertificate: arn:aws:acm:us-east-1:123456789012:certificate/example\n"),
    ("non_masquerade_overlaps_vpc", "  nonMasqueradeCIDR: 100.64.0.0/10\n", "  nonMasqueradeCIDR: 172.16.0.0/12\n"),
    ("ig_min_greater_than_max", "  maxSize: 3\n  minSize: 2\n", "  maxSize: 3\n  minSize: 5\n"),
    ("ig_negative_size", "  maxSize: 3\n  minSize: 2\n", "  maxSize: 3\n  minSize: -1\n"),
    ("ig_role_unknown", "  role: Node\n", "  role: Worker\n"),
    ("ig_subnet_unknown", "  - us-east-1a\n  - us-east-1b\n", "  - us-east-1a\n  - us-east-1c\n"),
    ("ig_name_invalid", "  name: nodes\n", "  name: Nodes_1\n"),
    ("ig_machine_type_invalid", "  machineType: t3.medium\n  maxSize: 3\n", "  machineType: t3 medium\n  maxSize: 3\n"),
    ("ig_taint_malformed", "  role: Node\n", "  role: Node\n  taints:\n  - dedicated\n"),
    ("ig_http_tokens_invalid", "  role: Node\n", "  role: Node\n  instanceMetadata:\n    httpTokens: sometimes\n"),
    ("ig_root_volume_type_unknown", "  role: Node\n", "  role: Node\n  rootVolumeType: ssd\n"),
    ("etcd_member_missing_group", "    - instanceGroup: control-plane-us-east-1a\n      name: a\n    name: events", "    - instanceGroup: control-plane-us-east-1c\n      name: a\n    name: events"),
    ("etcd_member_on_node_group", "    - instanceGroup: control-plane-us-east-1a\n      name: a\n    name: main", "    - instanceGroup: nodes\n      name: a\n    name: main"),
    ("etcd_even_members", "      name: a\n    name: main", "      name: a\n    - instanceGroup: control-plane-us-east-1a\n      name: b\n    name: main"),
];

fn filters() -> Vec<(&'static str, &'static str)> {
    vec![(r"/tmp/\.tmp[A-Za-z0-9]+", "[TMP]")]
}

fn snapshot(name: &str, text: &str) {
    let mut settings = insta::Settings::clone_current();
    for (re, with) in filters() {
        settings.add_filter(re, with);
    }
    settings.set_prepend_module_to_snapshot(false);
    settings.bind(|| insta::assert_snapshot!(name, text));
}

/// Runs one failing command; checks exit code, no panic, empty state store.
fn expect_failure(name: &str, args: &[&str], state_dir: &std::path::Path, before: &[String]) {
    // Run from the state's parent, so relative paths in snapshots are stable.
    let cwd = state_dir.parent().unwrap();
    let r: Run = command(args)
        .current_dir(cwd)
        .output()
        .expect("run kops")
        .into();
    assert_ne!(
        r.code, 0,
        "{name}: expected a failure, got success:\n{}",
        r.stderr
    );
    assert_eq!(
        r.code, 1,
        "{name}: exit code {} (a panic exits 101):\n{}",
        r.code, r.stderr
    );
    assert!(
        !r.stderr.contains("panicked"),
        "{name} panicked:\n{}",
        r.stderr
    );
    assert_eq!(tree(state_dir), before, "{name}: the state store changed");
    snapshot(name, &r.stderr);
}

#[test]
fn base_manifests_are_valid() {
    for base in [BASE, GCE_BASE] {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("cluster.yaml");
        std::fs::write(&file, base).unwrap();
        let state = file_url(&tmp.path().join("state"));
        let r = kops(&["create", "-f", file.to_str().unwrap(), "--state", &state]);
        assert_eq!(r.code, 0, "{}", r.stderr);
    }
}

/// `create -f` of `base` with `from` replaced by `to` fails as snapshot
/// `name` says, and writes nothing.
fn expect_manifest_refused(name: &str, base: &str, from: &str, to: &str) {
    assert!(
        base.contains(from),
        "{name}: `{from}` not in the base manifest"
    );
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("cluster.yaml"), base.replace(from, to)).unwrap();
    let state_dir = tmp.path().join("state");
    let state = file_url(&state_dir);
    expect_failure(
        name,
        &["create", "-f", "cluster.yaml", "--state", &state],
        &state_dir,
        &[],
    );
}

#[test]
fn bad_manifests_are_refused_with_clear_errors() {
    for (name, from, to) in MANIFEST_CASES {
        expect_manifest_refused(name, BASE, from, to);
    }
}

#[test]
fn bad_commands_are_refused_with_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let state_dir = tmp.path().join("state");
    let state = file_url(&state_dir);
    let file = tmp.path().join("cluster.yaml");
    std::fs::write(&file, BASE).unwrap();
    let f = file.to_str().unwrap();

    let lone = tmp.path().join("lone-ig.yaml");
    let ig_doc = BASE.split("---\n").nth(2).unwrap();
    std::fs::write(
        &lone,
        ig_doc.replace("  labels:\n    kops.k8s.io/cluster: bad.example.com\n", ""),
    )
    .unwrap();
    expect_failure(
        "ig_without_cluster_label",
        &["create", "-f", "lone-ig.yaml", "--state", &state],
        &state_dir,
        &[],
    );
    expect_failure("state_store_not_set", &["get", "clusters"], &state_dir, &[]);
    expect_failure(
        "state_store_scheme_unknown",
        &["get", "clusters", "--state", "ftp://x/y"],
        &state_dir,
        &[],
    );
    expect_failure(
        "manifest_file_missing",
        &[
            "create",
            "-f",
            "/nonexistent/cluster.yaml",
            "--state",
            &state,
        ],
        &state_dir,
        &[],
    );
    expect_failure(
        "create_cluster_bad_topology",
        &[
            "create",
            "cluster",
            "c.example.com",
            "--zones",
            "us-east-1a",
            "--topology",
            "hybrid",
            "--state",
            &state,
        ],
        &state_dir,
        &[],
    );
    expect_failure(
        "create_cluster_bad_networking",
        &[
            "create",
            "cluster",
            "c.example.com",
            "--zones",
            "us-east-1a",
            "--networking",
            "weave",
            "--state",
            &state,
        ],
        &state_dir,
        &[],
    );
    expect_failure(
        "create_cluster_no_zones",
        &["create", "cluster", "c.example.com", "--state", &state],
        &state_dir,
        &[],
    );
    expect_failure(
        "create_cluster_zones_two_regions",
        &[
            "create",
            "cluster",
            "c.example.com",
            "--zones",
            "us-east-1a,eu-west-1a",
            "--state",
            &state,
        ],
        &state_dir,
        &[],
    );
    expect_failure(
        "create_cluster_bad_set_path",
        &[
            "create",
            "cluster",
            "c.example.com",
            "--zones",
            "us-east-1a",
            "--set",
            "cluster.spec.kubeProxy.enabled=maybe",
            "--state",
            &state,
        ],
        &state_dir,
        &[],
    );
    expect_failure(
        "create_cluster_bad_kubernetes_version",
        &[
            "create",
            "cluster",
            "c.example.com",
            "--zones",
            "us-east-1a",
            "--kubernetes-version",
            "1.20.0",
            "--state",
            &state,
        ],
        &state_dir,
        &[],
    );
    expect_failure(
        "create_cluster_ssh_key_missing",
        &[
            "create",
            "cluster",
            "c.example.com",
            "--zones",
            "us-east-1a",
            "--ssh-public-key",
            "/nonexistent/id.pub",
            "--state",
            &state,
        ],
        &state_dir,
        &[],
    );

    // With a cluster in the store.
    assert_eq!(kops(&["create", "-f", f, "--state", &state]).code, 0);
    let before = tree(&state_dir);
    expect_failure(
        "create_existing_cluster",
        &["create", "-f", f, "--state", &state],
        &state_dir,
        &before,
    );
    expect_failure(
        "get_unknown_cluster",
        &["get", "clusters", "nope.example.com", "--state", &state],
        &state_dir,
        &before,
    );
    expect_failure(
        "get_unknown_instance_group",
        &[
            "get",
            "ig",
            "nope",
            "--name",
            "bad.example.com",
            "--state",
            &state,
        ],
        &state_dir,
        &before,
    );
    let other = tmp.path().join("other.yaml");
    std::fs::write(&other, BASE.replace("bad.example.com", "other.example.com")).unwrap();
    expect_failure(
        "replace_missing_without_force",
        &["replace", "-f", other.to_str().unwrap(), "--state", &state],
        &state_dir,
        &before,
    );
    expect_failure(
        "delete_group_used_by_etcd",
        &[
            "delete",
            "ig",
            "control-plane-us-east-1a",
            "--name",
            "bad.example.com",
            "--yes",
            "--state",
            &state,
        ],
        &state_dir,
        &before,
    );
    let key = tmp.path().join("bad.pub");
    std::fs::write(&key, "ssh-rsa not-base64!!").unwrap();
    expect_failure(
        "sshpublickey_malformed",
        &[
            "create",
            "sshpublickey",
            "-i",
            key.to_str().unwrap(),
            "--name",
            "bad.example.com",
            "--state",
            &state,
        ],
        &state_dir,
        &before,
    );
    expect_failure(
        "create_ig_bad_role",
        &[
            "create",
            "ig",
            "gpu",
            "--role",
            "Worker",
            "--name",
            "bad.example.com",
            "--state",
            &state,
        ],
        &state_dir,
        &before,
    );
    expect_failure(
        "create_ig_unknown_subnet",
        &[
            "create",
            "ig",
            "gpu",
            "--subnet",
            "us-east-1z",
            "--edit=false",
            "--name",
            "bad.example.com",
            "--state",
            &state,
        ],
        &state_dir,
        &before,
    );
}

/// A valid GCE cluster (kops' `minimal-gce` create output).
const GCE_BASE: &str = r#"apiVersion: kops.k8s.io/v1alpha2
kind: Cluster
metadata:
  name: gce.example.com
spec:
  api:
    loadBalancer:
      type: Public
  cloudConfig: {}
  cloudProvider: gce
  etcdClusters:
  - etcdMembers:
    - instanceGroup: control-plane-us-test1-a
      name: a
    name: main
  - etcdMembers:
    - instanceGroup: control-plane-us-test1-a
      name: a
    name: events
  kubernetesApiAccess:
  - 0.0.0.0/0
  kubernetesVersion: v1.34.1
  networking:
    cni: {}
  nonMasqueradeCIDR: 100.64.0.0/10
  project: testproject
  sshAccess:
  - 0.0.0.0/0
  subnets:
  - cidr: 10.0.16.0/20
    name: us-test1
    region: us-test1
    type: Public
  topology:
    dns:
      type: None
---
apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata:
  labels:
    kops.k8s.io/cluster: gce.example.com
  name: control-plane-us-test1-a
spec:
  machineType: e2-medium
  maxSize: 1
  minSize: 1
  role: Master
  subnets:
  - us-test1
  zones:
  - us-test1-a
---
apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata:
  labels:
    kops.k8s.io/cluster: gce.example.com
  name: nodes-us-test1-a
spec:
  machineType: e2-medium
  maxSize: 1
  minSize: 1
  role: Node
  subnets:
  - us-test1
  zones:
  - us-test1-a
"#;

/// (snapshot name, base manifest, text to replace, replacement)
const CLOUD_MANIFEST_CASES: &[(&str, &str, &str, &str)] = &[
    ("aws_manifest_gce_field", BASE, "  cloudProvider: aws\n", "  cloudConfig:\n    gceServiceAccount: sa@p.iam.gserviceaccount.com\n  cloudProvider: aws\n"),
    ("gce_manifest_aws_field", GCE_BASE, "  cloudProvider: gce\n", "  cloudProvider: gce\n  nodeTerminationHandler:\n    enabled: true\n"),
    ("gce_manifest_network_cidr", GCE_BASE, "  project: testproject\n", "  networkCIDR: 10.0.0.0/16\n  project: testproject\n"),
    ("gce_manifest_subnet_zone", GCE_BASE, "    region: us-test1\n", "    region: us-test1\n    zone: us-test1-a\n"),
    ("gce_manifest_zone_other_region", GCE_BASE, "  role: Node\n  subnets:\n  - us-test1\n  zones:\n  - us-test1-a\n", "  role: Node\n  subnets:\n  - us-test1\n  zones:\n  - europe-west4-a\n"),
    ("gce_manifest_machine_type", GCE_BASE, "  machineType: e2-medium\n  maxSize: 1\n  minSize: 1\n  role: Node", "  machineType: t3.medium\n  maxSize: 1\n  minSize: 1\n  role: Node"),
    // kops 1.37 removed gossip: a `.k8s.local` name needs DNS type None.
    ("gossip_with_dns_records", BASE, "bad.example.com", "bad.k8s.local"),
];

#[test]
fn bad_cloud_settings_are_refused_with_clear_errors() {
    for (name, base, from, to) in CLOUD_MANIFEST_CASES {
        expect_manifest_refused(name, base, from, to);
    }

    let tmp = tempfile::tempdir().unwrap();
    let state_dir = tmp.path().join("state");
    let state = file_url(&state_dir);
    let gce = |more: &[&'static str]| -> Vec<String> {
        let mut args = vec!["create", "cluster", "g.example.com", "--cloud", "gce"];
        args.extend_from_slice(more);
        args.extend_from_slice(&["--state", &state]);
        args.into_iter().map(str::to_string).collect()
    };
    let cases: &[(&str, Vec<String>)] = &[
        (
            "create_cluster_gce_flag_on_aws",
            [
                "create",
                "cluster",
                "a.example.com",
                "--zones",
                "us-east-1a",
                "--project",
                "p",
                "--state",
                &state,
            ]
            .map(str::to_string)
            .to_vec(),
        ),
        (
            "create_cluster_aws_flag_on_gce",
            gce(&[
                "--project",
                "p",
                "--zones",
                "us-central1-a",
                "--network-cidr",
                "10.0.0.0/16",
            ]),
        ),
        (
            "create_cluster_gce_zone_of_other_region",
            gce(&["--project", "p", "--zones", "us-central1-a,europe-west4-b"]),
        ),
        (
            "create_cluster_gce_aws_zone",
            gce(&["--project", "p", "--zones", "us-east-1a"]),
        ),
        (
            "create_cluster_gce_machine_type",
            gce(&[
                "--project",
                "p",
                "--zones",
                "us-central1-a",
                "--node-size",
                "t3.medium",
            ]),
        ),
        (
            "create_cluster_gce_empty_project",
            gce(&["--project=", "--zones", "us-central1-a"]),
        ),
        (
            "create_cluster_gce_no_project",
            gce(&["--zones", "us-central1-a"]),
        ),
        (
            "create_cluster_gce_gossip_dns",
            [
                "create",
                "cluster",
                "g.k8s.local",
                "--cloud",
                "gce",
                "--project",
                "p",
                "--zones",
                "us-central1-a",
                "--dns",
                "private",
                "--state",
                &state,
            ]
            .map(str::to_string)
            .to_vec(),
        ),
    ];
    for (name, args) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        expect_failure(name, &args, &state_dir, &[]);
    }
}
