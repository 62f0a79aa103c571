//! kops' commands and flags that scripts use, through the binary: the
//! config file, `update cluster`'s kubeconfig, `--admin`, `--phase`,
//! `--lifecycle-overrides`, `--allow-kops-downgrade`, `version --server`,
//! `get clusters --full`, `delete cluster --external`, and the flags that
//! are accepted and answered with one line.

use std::path::Path;

use aws_sdk_ec2::types::Filter;

use crate::common::{self, command, file_url, kops, kops_on, Run, IMAGE};

/// `kops create -f` of a one-zone cluster manifest into `state`.
fn store_one_zone_cluster(dir: &Path, name: &str, state: &str) {
    let manifest = dir.join(format!("{name}.yaml"));
    std::fs::write(&manifest, common::one_zone_cluster(name)).unwrap();
    ok(
        kops(&["create", "-f", manifest.to_str().unwrap(), "--state", state]),
        "create -f",
    );
}

/// Exit code 1 and `text` in the error.
fn refused(r: &Run, text: &str) {
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains(text), "{}", r.stderr);
}

fn ok(r: Run, what: &str) -> Run {
    assert_eq!(
        r.code, 0,
        "{what}:\nstdout:\n{}\nstderr:\n{}",
        r.stdout, r.stderr
    );
    r
}

/// `create cluster NAME` on moto (one zone, no DNS, moto's image) in `state`.
fn create(moto: &kops_testkit::Moto, name: &str, state: &str) {
    ok(
        kops_on(
            moto,
            &[
                "create",
                "cluster",
                name,
                "--zones",
                "us-east-1a",
                "--state",
                state,
                "--image",
                IMAGE,
                "--dns",
                "none",
            ],
        ),
        "create cluster",
    );
}

/// `kops ARGS` on moto with KUBECONFIG at `kubeconfig`.
fn kops_kc(moto: &kops_testkit::Moto, kubeconfig: &Path, args: &[&str]) -> Run {
    let mut c = command(args);
    for (k, v) in moto.env() {
        c.env(k, v);
    }
    c.env("KUBECONFIG", kubeconfig);
    c.output().unwrap().into()
}

/// The YAML of a kubeconfig file.
fn kubeconfig(path: &Path) -> serde_json::Value {
    serde_yaml_ng::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn named<'a>(
    doc: &'a serde_json::Value,
    section: &str,
    name: &str,
) -> Option<&'a serde_json::Value> {
    doc[section]
        .as_array()?
        .iter()
        .find(|e| e["name"].as_str() == Some(name))
}

/// The EC2 filter for resources tagged for the cluster `name`.
fn tagged_for(name: &str) -> Filter {
    Filter::builder()
        .name("tag:KubernetesCluster")
        .values(name)
        .build()
}

/// EC2 tags as (key, value) pairs.
fn tag_pairs(tags: &[aws_sdk_ec2::types::Tag]) -> Vec<(String, String)> {
    tags.iter()
        .map(|t| {
            (
                t.key().unwrap_or_default().into(),
                t.value().unwrap_or_default().into(),
            )
        })
        .collect()
}

/// The security groups (id → tags) of the cluster `name` in moto.
fn security_groups(endpoint: &str, name: &str) -> Vec<(String, Vec<(String, String)>)> {
    let filter = tagged_for(name);
    common::with_moto_sdk(endpoint, |config| async move {
        let ec2 = aws_sdk_ec2::Client::new(&config);
        let out = ec2
            .describe_security_groups()
            .filters(filter)
            .send()
            .await
            .unwrap();
        out.security_groups()
            .iter()
            .map(|g| {
                (
                    g.group_id().unwrap_or_default().to_string(),
                    tag_pairs(g.tags()),
                )
            })
            .collect()
    })
}

/// Whether moto has a VPC tagged for cluster `name`, and its tags.
fn vpc_tags(endpoint: &str, name: &str) -> Option<Vec<(String, String)>> {
    let filter = tagged_for(name);
    common::with_moto_sdk(endpoint, |config| async move {
        let ec2 = aws_sdk_ec2::Client::new(&config);
        let out = ec2.describe_vpcs().filters(filter).send().await.unwrap();
        out.vpcs().first().map(|v| tag_pairs(v.tags()))
    })
}

#[test]
fn the_state_store_comes_from_kops_yaml_after_the_flag_and_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let from_file = file_url(&dir.path().join("a"));
    let from_env = file_url(&dir.path().join("b"));
    let manifest = dir.path().join("c.yaml");
    std::fs::write(&manifest, common::one_zone_cluster("conf.example.com")).unwrap();
    std::fs::write(
        home.join(".kops.yaml"),
        format!("kops_state_store: {from_file}/\n"),
    )
    .unwrap();
    let run = |args: &[&str], env: Option<&str>| -> Run {
        let mut c = command(args);
        c.env("HOME", &home);
        if let Some(v) = env {
            c.env("KOPS_STATE_STORE", v);
        }
        c.output().unwrap().into()
    };
    ok(
        run(&["create", "-f", manifest.to_str().unwrap()], None),
        "create -f",
    );
    assert!(dir.path().join("a/conf.example.com/config").exists());
    let r = ok(run(&["get", "clusters"], None), "get clusters");
    assert!(r.stdout.contains("conf.example.com"), "{}", r.stdout);
    // The environment wins over the file; the flag over both.
    let r = run(&["get", "clusters"], Some(&from_env));
    assert!(!r.stdout.contains("conf.example.com"), "{}", r.stdout);
    let r = ok(
        run(&["get", "clusters", "--state", &from_file], Some(&from_env)),
        "--state",
    );
    assert!(r.stdout.contains("conf.example.com"), "{}", r.stdout);
    // --config names another file.
    let other = dir.path().join("other.yaml");
    std::fs::write(&other, format!("KOPS_STATE_STORE: {from_env}\n")).unwrap();
    let r = run(
        &["get", "clusters", "--config", other.to_str().unwrap()],
        None,
    );
    assert!(!r.stdout.contains("conf.example.com"), "{}", r.stdout);
}

#[test]
fn kops_logging_flags_are_accepted() {
    let r = ok(
        kops(&[
            "--logtostderr",
            "--alsologtostderr=false",
            "--stderrthreshold",
            "INFO",
            "--v=2",
            "--vmodule",
            "x=3",
            "version",
        ]),
        "version with klog flags",
    );
    assert!(r.stdout.starts_with("Client version: "), "{}", r.stdout);
}

#[test]
fn update_yes_writes_the_kubeconfig_and_admin_adds_the_admin_user() {
    let Some(moto) = kops_testkit::require_moto() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let state = file_url(&dir.path().join("state"));
    let kc = dir.path().join("kubeconfig");
    let name = "kubecfg.example.com";
    create(moto, name, &state);

    // A dry run writes nothing.
    ok(
        kops_kc(moto, &kc, &["update", "cluster", name, "--state", &state]),
        "dry run",
    );
    assert!(!kc.exists());

    // The first --yes: kops' first-run text and a context with no user.
    let r = ok(
        kops_kc(
            moto,
            &kc,
            &["update", "cluster", name, "--state", &state, "--yes"],
        ),
        "update --yes",
    );
    assert!(r.stdout.contains("Cluster is starting."), "{}", r.stdout);
    let doc = kubeconfig(&kc);
    assert_eq!(doc["current-context"], name);
    let cluster = named(&doc, "clusters", name).expect("cluster entry");
    // No DNS: the API load balancer's name, as kops writes it.
    let server = cluster["cluster"]["server"].as_str().unwrap();
    assert!(
        server.starts_with("https://api") && server.ends_with(".elb.amazonaws.com"),
        "{server}"
    );
    assert!(named(&doc, "users", name).is_none(), "{doc}");
    assert!(r.stderr.contains("no user credentials"), "{}", r.stderr);

    // Again with --admin: the admin user, with a client certificate.
    let r = ok(
        kops_kc(
            moto,
            &kc,
            &[
                "update",
                "cluster",
                name,
                "--state",
                &state,
                "--yes",
                "--admin=1h",
            ],
        ),
        "update --yes --admin",
    );
    assert!(
        r.stdout.contains("kops rolling-update cluster"),
        "{}",
        r.stdout
    );
    let doc = kubeconfig(&kc);
    let user = named(&doc, "users", name).expect("admin user");
    assert!(
        user["user"]["client-certificate-data"].is_string(),
        "{user}"
    );
    assert_eq!(
        named(&doc, "contexts", name).unwrap()["context"]["user"],
        name
    );

    // --create-kube-config=false leaves the file alone; --admin and --user clash.
    std::fs::remove_file(&kc).unwrap();
    ok(
        kops_kc(
            moto,
            &kc,
            &[
                "update",
                "cluster",
                name,
                "--state",
                &state,
                "--yes",
                "--create-kube-config=false",
            ],
        ),
        "--create-kube-config=false",
    );
    assert!(!kc.exists());
    let r = kops_kc(
        moto,
        &kc,
        &[
            "update", "cluster", name, "--state", &state, "--admin", "--user", "x",
        ],
    );
    refused(&r, "cannot use both --admin and --user");

    // The version that last updated the cluster, and its completed spec.
    let r = ok(
        kops(&["version", "--server", "--state", &state, "--name", name]),
        "version --server",
    );
    assert!(
        r.stdout.contains(&format!(
            "Last applied server version: {}",
            kops_api::KOPS_VERSION
        )),
        "{}",
        r.stdout
    );
    let r = ok(
        kops(&[
            "get", "clusters", name, "--full", "-o", "yaml", "--state", &state,
        ]),
        "get clusters --full",
    );
    assert!(r.stdout.contains("WARNING"), "{}", r.stdout);
    assert!(r.stdout.contains("configBase:"), "{}", r.stdout);
}

#[test]
fn phase_network_applies_only_the_network() {
    let Some(moto) = kops_testkit::require_moto() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let state = file_url(&dir.path().join("state"));
    let name = "phase.example.com";
    create(moto, name, &state);

    // The dry run of the phase plans only network tasks.
    let r = ok(
        kops_on(
            moto,
            &[
                "update", "cluster", name, "--state", &state, "--phase", "network", "-o", "json",
            ],
        ),
        "dry run --phase network",
    );
    let plan: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let kinds: Vec<&str> = plan["create"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["kind"].as_str().unwrap())
        .collect();
    assert!(
        kinds.contains(&"VPC") && kinds.contains(&"Subnet"),
        "{kinds:?}"
    );
    for other in [
        "SecurityGroup",
        "IAMRole",
        "LaunchTemplate",
        "AutoscalingGroup",
    ] {
        assert!(!kinds.contains(&other), "{other} in {kinds:?}");
    }

    let r = ok(
        kops_on(
            moto,
            &[
                "update",
                "cluster",
                name,
                "--state",
                &state,
                "--phase",
                "network",
                "--yes",
                "--create-kube-config=false",
            ],
        ),
        "--phase network --yes",
    );
    assert!(r.stderr.contains("applied"), "{}", r.stderr);
    assert!(vpc_tags(&moto.endpoint(), name).is_some(), "no VPC");
    assert!(security_groups(&moto.endpoint(), name).is_empty());
    // The files nodes read belong to the cluster phase.
    assert!(!dir
        .path()
        .join(format!("state/{name}/kops-version.txt"))
        .exists());

    let r = kops_on(
        moto,
        &[
            "update", "cluster", name, "--state", &state, "--phase", "nodes",
        ],
    );
    refused(&r, "unknown phase `nodes`");
}

#[test]
fn lifecycle_override_ignore_leaves_security_groups_alone() {
    let Some(moto) = kops_testkit::require_moto() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let state = file_url(&dir.path().join("state"));
    let name = "lifecycle-overrides.example.com";
    common::create_and_apply(moto, name, &state);
    let before = security_groups(&moto.endpoint(), name);
    assert!(!before.is_empty());

    // A new cloud label changes every resource's tags...
    ok(
        kops(&[
            "edit",
            "cluster",
            name,
            "--state",
            &state,
            "--set",
            "spec.cloudLabels.team=blue",
        ]),
        "edit --set",
    );
    // ...but the security groups' are left as they are.
    let r = ok(
        kops_on(
            moto,
            &[
                "update",
                "cluster",
                name,
                "--state",
                &state,
                "-o",
                "json",
                "--lifecycle-overrides",
                "SecurityGroup=Ignore",
            ],
        ),
        "dry run with the override",
    );
    let plan: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let modified: Vec<&str> = plan["modify"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["kind"].as_str().unwrap())
        .collect();
    assert!(modified.contains(&"VPC"), "{modified:?}");
    assert!(!modified.contains(&"SecurityGroup"), "{modified:?}");
    ok(
        kops_on(
            moto,
            &[
                "update",
                "cluster",
                name,
                "--state",
                &state,
                "--yes",
                "--lifecycle-overrides",
                "SecurityGroup=Ignore",
            ],
        ),
        "update with the override",
    );
    let vpc = vpc_tags(&moto.endpoint(), name).unwrap();
    assert!(vpc.contains(&("team".into(), "blue".into())), "{vpc:?}");
    for (id, tags) in security_groups(&moto.endpoint(), name) {
        assert!(!tags.iter().any(|(k, _)| k == "team"), "{id}: {tags:?}");
    }

    // A name that is no task kind is a warning (kops ignores it silently);
    // a lifecycle that is none is an error.
    let r = ok(
        kops_on(
            moto,
            &[
                "update",
                "cluster",
                name,
                "--state",
                &state,
                "--lifecycle-overrides",
                "SecurityGroups=Ignore",
            ],
        ),
        "unknown kind",
    );
    assert!(
        r.stderr.contains("no task of kind `SecurityGroups`"),
        "{}",
        r.stderr
    );
    let r = kops_on(
        moto,
        &[
            "update",
            "cluster",
            name,
            "--state",
            &state,
            "--lifecycle-overrides",
            "SecurityGroup=Skip",
        ],
    );
    refused(&r, "unknown lifecycle `Skip`");
}

#[test]
fn a_newer_kops_in_the_state_store_refuses_the_update_unless_allowed() {
    let Some(moto) = kops_testkit::require_moto() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let state = file_url(&dir.path().join("state"));
    let name = "downgrade.example.com";
    create(moto, name, &state);
    std::fs::write(
        dir.path().join(format!("state/{name}/kops-version.txt")),
        "1.99.0",
    )
    .unwrap();
    let r = kops_on(moto, &["update", "cluster", name, "--state", &state]);
    refused(&r, "last updated by kops 1.99.0");
    assert!(r.stderr.contains("--allow-kops-downgrade"), "{}", r.stderr);
    ok(
        kops_on(
            moto,
            &[
                "update",
                "cluster",
                name,
                "--state",
                &state,
                "--allow-kops-downgrade",
            ],
        ),
        "--allow-kops-downgrade",
    );
}

#[test]
fn delete_cluster_external_finds_resources_by_tag_and_leaves_the_state() {
    let Some(moto) = kops_testkit::require_moto() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let state = file_url(&dir.path().join("state"));
    let name = "extdel.example.com";
    common::create_and_apply(moto, name, &state);
    let r = kops_on(moto, &["delete", "cluster", name, "--external"]);
    refused(&r, "--region is required (when --external)");
    let r = ok(
        kops_on(
            moto,
            &[
                "delete",
                "cluster",
                name,
                "--external",
                "--region",
                "us-east-1",
                "--yes",
                "--interval",
                "100ms",
                "--wait",
                "1m",
            ],
        ),
        "delete --external",
    );
    assert!(r.stderr.contains("state store untouched"), "{}", r.stderr);
    assert!(vpc_tags(&moto.endpoint(), name).is_none());
    assert!(dir.path().join(format!("state/{name}/config")).exists());
}

/// kops' `--external` is AWS only (it builds an AWS client from
/// `--region`, never reads the state store): a Google Cloud region is
/// refused at once, in one line, with the state store left as it is,
/// instead of asking AWS endpoints that do not exist for that region.
#[test]
fn delete_cluster_external_refuses_a_google_cloud_region() {
    let dir = tempfile::tempdir().unwrap();
    let state = file_url(&dir.path().join("state"));
    let started = std::time::Instant::now();
    for args in [
        &["--external", "--region", "us-test1"][..],
        &["--external", "--region", "us-central1", "--yes"][..],
        &["--external", "--region", "us-test1", "--state", &state][..],
    ] {
        let mut all = vec!["delete", "cluster", "minimal-gce.example.com"];
        all.extend_from_slice(args);
        let r = kops(&all);
        assert_eq!(r.code, 1, "{args:?}: {}", r.stderr);
        assert!(
            r.stderr.contains("- --region: `us-")
                && r.stderr
                    .contains("is a Google Cloud region: --external looks on AWS only"),
            "{args:?}: {}",
            r.stderr
        );
        assert!(
            r.stderr
                .contains("hint: delete a Google Cloud cluster from the state store"),
            "{}",
            r.stderr
        );
    }
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "no AWS call was tried"
    );
    assert!(!dir.path().join("state").exists());
}

#[test]
fn accepted_flags_of_clouds_and_plugins_kops_rs_does_not_serve_answer_in_one_line() {
    let r = kops(&[
        "create",
        "cluster",
        "x.example.com",
        "--zones",
        "us-east-1a",
        "--os-ext-net",
        "ext",
    ]);
    assert_eq!(r.code, 1);
    assert_eq!(
        r.stderr.lines().next().unwrap(),
        "Error: --os-ext-net: OpenStack is not supported by kops-rs, which creates clusters on AWS"
    );
}

#[test]
fn create_instancegroup_zone_and_clusterapi_machinedeployment() {
    let dir = tempfile::tempdir().unwrap();
    let state = file_url(&dir.path().join("state"));
    let name = "capi.example.com";
    store_one_zone_cluster(dir.path(), name, &state);
    let r = ok(
        kops(&[
            "create",
            "ig",
            "extra",
            "--name",
            name,
            "--state",
            &state,
            "--zone",
            "us-east-1a",
            "--edit=false",
        ]),
        "create ig --zone",
    );
    assert!(
        r.stderr.contains("Created instance group extra"),
        "{}",
        r.stderr
    );
    let r = ok(
        kops(&[
            "get", "ig", "extra", "--name", name, "--state", &state, "-o", "yaml",
        ]),
        "get ig",
    );
    assert!(r.stdout.contains("zones:\n  - us-east-1a"), "{}", r.stdout);

    let r = ok(
        kops(&[
            "toolbox",
            "clusterapi",
            "generate",
            "machinedeployment",
            "--cluster",
            name,
            "--name",
            "md1",
            "--replicas",
            "3",
            "--state",
            &state,
            "--image",
            "ubuntu-os-cloud/ubuntu-2404",
        ]),
        "machinedeployment",
    );
    let docs: Vec<serde_json::Value> = r
        .stdout
        .split("---\n")
        .map(|d| serde_yaml_ng::from_str(d).unwrap())
        .collect();
    let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "KopsConfigTemplate",
            "GCPMachineTemplate",
            "MachineDeployment"
        ]
    );
    assert_eq!(docs[2]["metadata"]["name"], "md1-us-east-1a");
    assert_eq!(docs[2]["spec"]["replicas"], 3);
    assert_eq!(docs[2]["spec"]["clusterName"], "capi-example-com");
    assert_eq!(
        docs[1]["spec"]["template"]["spec"]["image"],
        "projects/ubuntu-os-cloud/global/images/ubuntu-2404"
    );
}

#[test]
fn instance_selector_picks_types_from_ec2_and_stores_the_group() {
    let Some(moto) = kops_testkit::require_moto() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let state = file_url(&dir.path().join("state"));
    let name = "selector.example.com";
    store_one_zone_cluster(dir.path(), name, &state);
    let r = ok(
        kops_on(
            moto,
            &[
                "toolbox",
                "instance-selector",
                "spot",
                "--name",
                name,
                "--state",
                &state,
                "--vcpus",
                "2",
                "--memory",
                "4gb",
                "--usage-class",
                "spot",
                "--dry-run",
                "-o",
                "json",
            ],
        ),
        "instance-selector --dry-run",
    );
    let ig: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let types: Vec<&str> = ig["spec"]["mixedInstancesPolicy"]["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(types.contains(&"c5.large"), "{types:?}");
    assert!(!types.contains(&"m5.large"), "8 GiB: {types:?}");
    assert_eq!(ig["spec"]["machineType"], types[0]);
    assert_eq!(
        ig["spec"]["mixedInstancesPolicy"]["spotAllocationStrategy"],
        "capacity-optimized"
    );
    assert_eq!(
        ig["spec"]["cloudLabels"]["k8s.io/cluster-autoscaler/enabled"],
        "1"
    );
    assert_eq!(ig["spec"]["maxSize"], 10);
    // Nothing stored by the dry run; stored without it.
    assert!(!dir
        .path()
        .join(format!("state/{name}/instancegroup/spot"))
        .exists());
    ok(
        kops_on(
            moto,
            &[
                "toolbox",
                "instance-selector",
                "od",
                "--name",
                name,
                "--state",
                &state,
                "--vcpus-min",
                "4",
                "--vcpus-max",
                "4",
                "--cpu-architecture",
                "x86_64",
                "--ig-count",
                "2",
            ],
        ),
        "instance-selector",
    );
    let r = ok(
        kops(&["get", "ig", "--name", name, "--state", &state]),
        "get ig",
    );
    assert!(
        r.stdout.contains("od1") && r.stdout.contains("od2"),
        "{}",
        r.stdout
    );
    let r = kops_on(
        moto,
        &[
            "toolbox",
            "instance-selector",
            "none",
            "--name",
            name,
            "--state",
            &state,
            "--vcpus",
            "1000",
        ],
    );
    refused(&r, "criteria specified was too narrow");
}

/// kops' `kops get CLUSTER` (the seed-001 Makefile's `cluster-get`): the
/// cluster and its instance groups, as `get all CLUSTER`.
#[test]
fn get_with_a_cluster_name_is_get_all() {
    let dir = tempfile::tempdir().unwrap();
    let state = file_url(&dir.path().join("state"));
    store_one_zone_cluster(dir.path(), "getname.example.com", &state);
    let short = ok(
        kops(&["get", "getname.example.com", "--state", &state]),
        "get NAME",
    );
    let all = ok(
        kops(&["get", "all", "getname.example.com", "--state", &state]),
        "get all NAME",
    );
    assert_eq!(short.stdout, all.stdout);
    assert!(
        short.stdout.contains("control-plane-us-east-1a"),
        "{}",
        short.stdout
    );
    // Global flags first, as the Makefile's variables may put them.
    let first = ok(
        kops(&["--state", &state, "get", "getname.example.com"]),
        "--state get NAME",
    );
    assert_eq!(first.stdout, all.stdout);
    // An unknown cluster: the usual not-found error.
    let r = kops(&["get", "nosuch.example.com", "--state", &state]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("nosuch.example.com"), "{}", r.stderr);
}
