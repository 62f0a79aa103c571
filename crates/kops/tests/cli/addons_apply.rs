//! What `update cluster` writes for the addons applies: a cluster made with
//! `kops create cluster` defaults (Cilium, CoreDNS, dns-controller, the cloud
//! controller, EBS CSI, node-termination-handler, ...), rendered offline,
//! then its bootstrap channel from the state store goes through the addon
//! applier that control-plane nodes run (kops-channels) into a Kubernetes
//! API served from the test. Every addon is applied and recorded, and the
//! second pass writes nothing. The same for some of kops' conformance cases
//! (their `in-v1alpha2.yaml`, read from ../shared at run time): every
//! object of every addon kops-rs renders is accepted (custom resources once
//! their definitions are in), and the second pass writes nothing.

use std::path::Path;

use kops_channels::{apply_channel, client_from_kubeconfig, AddonOutcome, ApplyOptions};
use kops_testkit::kube_api::FakeApi;

use crate::common::{file_url, kops};

const NAME: &str = "addons.example.com";

#[tokio::test]
async fn update_writes_addons_the_applier_applies_once() {
    let dir = tempfile::tempdir().unwrap();
    let state = file_url(&dir.path().join("state"));
    let key = dir.path().join("id_rsa.pub");
    std::fs::write(&key, "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQCtWu40XQo8dczLsCq0OWV+hxm9uV3WxeH9Kgh4sMzQxNtoU1pvW0XdjpkBesRKGoolfWeCLXWxpyQb1IaiMkKoz7MdhQ/6UKjMjP66aFWWp3pwD0uj0HuJ7tq4gKHKRYGTaZIRWpzUiANBrjugVgA+Sd7E/mYwc/DMXkIyRZbvhQ== test@example.com\n").unwrap();
    let r = kops(&[
        "create",
        "cluster",
        NAME,
        "--zones",
        "us-east-1a",
        "--dns-zone",
        "example.com",
        "--ssh-public-key",
        key.to_str().unwrap(),
        "--state",
        &state,
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let out = dir.path().join("out");
    let r = kops(&crate::common::terraform_args(
        NAME,
        &state,
        out.to_str().unwrap(),
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);

    let api = FakeApi::start();
    let client = client_from_kubeconfig(&api.write_kubeconfig(dir.path()))
        .await
        .unwrap();
    let channel = format!("{state}/{NAME}/addons/bootstrap-channel.yaml");
    let first = apply_channel(&client, &channel, &options()).await.unwrap();
    let mut applied = Vec::new();
    for addon in &first.addons {
        match addon {
            AddonOutcome::Applied { name, objects, .. } => {
                applied.push(format!("{name}: {objects}"))
            }
            other => panic!("not applied: {other:?}"),
        }
    }
    eprintln!("applied: {applied:#?}");
    // Rendered by kops-rs (the others are still placeholders: no objects).
    for key in [
        "coredns.addons.k8s.io",
        "dns-controller.addons.k8s.io",
        "aws-cloud-controller.addons.k8s.io",
        "storage-aws.addons.k8s.io",
        "kubelet-api.rbac.addons.k8s.io",
        "limit-range.addons.k8s.io",
    ] {
        assert!(
            applied
                .iter()
                .any(|a| a.starts_with(key) && !a.ends_with(": 0")),
            "{key} has no objects: {applied:?}"
        );
    }
    assert!(applied
        .iter()
        .any(|a| a.starts_with("networking.cilium.io")));
    for addon in &first.addons {
        let AddonOutcome::Applied { name, .. } = addon else {
            unreachable!()
        };
        let record = api
            .record(name)
            .unwrap_or_else(|| panic!("{name} not recorded"));
        assert_eq!(record["systemGeneration"], 1);
    }
    // CoreDNS at the cluster's DNS address, the cloud controller, and the
    // default StorageClass are in the API.
    let service = api
        .get("api/v1", "services", "kube-system", "kube-dns")
        .unwrap();
    assert_eq!(service["spec"]["clusterIP"], "100.64.0.10");
    assert!(api
        .get("apis/apps/v1", "deployments", "kube-system", "coredns")
        .is_some());
    assert!(api
        .get(
            "apis/apps/v1",
            "daemonsets",
            "kube-system",
            "aws-cloud-controller-manager"
        )
        .is_some());
    assert!(api
        .get(
            "apis/storage.k8s.io/v1",
            "storageclasses",
            "",
            "kops-csi-1-21"
        )
        .is_some());
    api.take_requests();

    let second = apply_channel(&client, &channel, &options()).await.unwrap();
    assert!(
        second
            .addons
            .iter()
            .all(|a| matches!(a, AddonOutcome::Current { .. })),
        "{second:?}"
    );
    let writes: Vec<String> = api
        .take_requests()
        .into_iter()
        .filter(|r| !r.starts_with("GET "))
        .collect();
    assert!(writes.is_empty(), "{writes:?}");
}

/// Options as nodeup's: a CA generator for addons with `needsPKI`.
fn options() -> ApplyOptions {
    fn new_ca(name: &str) -> Result<(String, String), String> {
        let ca = kops_pki::CertificateAuthority::generate(name).map_err(|e| e.to_string())?;
        Ok((
            ca.certificate_pem().to_string(),
            ca.private_key_pem().to_string(),
        ))
    }
    ApplyOptions {
        new_ca: Some(new_ca),
        ..Default::default()
    }
}

/// Cases with many kinds of addons: the defaults, Cilium in a private
/// topology, and many optional addons (CRDs, webhooks, APIService, ...).
const CASES: &[&str] = &["minimal-aws", "privatecilium", "many-addons"];

/// The `metadata.name` of the `kind: Cluster` document.
fn cluster_name(manifest: &str) -> Option<String> {
    for doc in manifest.split("\n---") {
        let value: serde_yaml_ng::Value = serde_yaml_ng::from_str(doc).ok()?;
        if value.get("kind").and_then(|k| k.as_str()) == Some("Cluster") {
            return value
                .get("metadata")?
                .get("name")?
                .as_str()
                .map(str::to_string);
        }
    }
    None
}

/// Renders `case` offline (`create -f`, its SSH key, `update cluster
/// --target terraform`) into a file:// state store under `work`, without
/// the case's `configBase` (a memfs:// or s3:// location of kops' tests),
/// so the bootstrap channel and its manifests land in that store. Returns
/// the channel's URL.
fn render_case(case: &Path, work: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(case.join("in-v1alpha2.yaml")).map_err(|e| e.to_string())?;
    let name = cluster_name(&text).ok_or("no Cluster in in-v1alpha2.yaml")?;
    let input: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("configBase:"))
        .map(|l| format!("{l}\n"))
        .collect();
    let input_path = work.join("in.yaml");
    std::fs::write(&input_path, input).map_err(|e| e.to_string())?;
    let state = file_url(&work.join("state"));
    let run = |args: &[&str]| -> Result<(), String> {
        let r = kops(args);
        if r.code == 0 {
            Ok(())
        } else {
            Err(format!("kops {}: {}", args[..2].join(" "), r.stderr.trim()))
        }
    };
    run(&[
        "create",
        "-f",
        input_path.to_str().unwrap_or(""),
        "--state",
        &state,
    ])?;
    let key = case.join("id_rsa.pub");
    if key.is_file() {
        run(&[
            "create",
            "sshpublickey",
            &name,
            "-i",
            key.to_str().unwrap_or(""),
            "--state",
            &state,
        ])?;
    }
    let out = work.join("out");
    run(&crate::common::terraform_args(
        &name,
        &state,
        out.to_str().unwrap_or(""),
    ))?;
    Ok(format!("{state}/{name}/addons/bootstrap-channel.yaml"))
}

/// The objects of every addon manifest next to the channel, as the test
/// API stores them: (prefix, namespace, name, kind), with namespaced kinds
/// defaulting to `default` when the manifest says none.
fn manifest_objects(channel_path: &Path) -> Vec<(String, String, String)> {
    let text = std::fs::read_to_string(channel_path).unwrap();
    let channel = kops_channels::Channel::load("c", text.as_bytes()).unwrap();
    let dir = channel_path.parent().unwrap();
    let mut out = Vec::new();
    for addon in &channel.spec.addons {
        let manifest = std::fs::read_to_string(dir.join(&addon.manifest)).unwrap();
        for object in kops_channels::channel::manifest_objects(&addon.name, &manifest).unwrap() {
            let prefix = if object.group.is_empty() {
                format!("api/{}", object.version)
            } else {
                format!("apis/{}/{}", object.group, object.version)
            };
            out.push((prefix, object.kind.clone(), object.name.clone()));
        }
    }
    out
}

#[tokio::test]
async fn conformance_cases_addons_are_accepted_and_applied_once() {
    let Some(shared) = kops_testkit::shared_dir() else {
        return;
    };
    let root = shared.join("conformance/kops/update_cluster");
    let mut summary = Vec::new();
    for case in CASES {
        let dir = root.join(case);
        if !dir.join("in-v1alpha2.yaml").is_file() {
            eprintln!(
                "skipping {case}: no {}",
                dir.join("in-v1alpha2.yaml").display()
            );
            continue;
        }
        let work = tempfile::tempdir().unwrap();
        let channel = render_case(&dir, work.path()).unwrap_or_else(|e| panic!("{case}: {e}"));

        let api = FakeApi::start();
        let client = client_from_kubeconfig(&api.write_kubeconfig(work.path()))
            .await
            .unwrap();
        let first = apply_channel(&client, &channel, &options())
            .await
            .unwrap_or_else(|e| panic!("{case}: {e}"));
        let mut objects = 0;
        for addon in &first.addons {
            match addon {
                AddonOutcome::Applied {
                    name, objects: n, ..
                } => {
                    objects += n;
                    assert!(api.record(name).is_some(), "{case}: {name} not recorded");
                }
                other => panic!("{case}: not applied: {other:?}"),
            }
        }
        // Every object of every manifest is in the API, by kind and name.
        let stored = api.keys();
        let expected = manifest_objects(Path::new(channel.trim_start_matches("file://")));
        assert_eq!(expected.len(), objects, "{case}");
        for (prefix, kind, name) in &expected {
            assert!(
                stored.iter().any(|(p, _, _, n)| p == prefix && n == name),
                "{case}: {prefix} {kind} {name} is not in the API"
            );
        }
        api.take_requests();

        let second = apply_channel(&client, &channel, &options()).await.unwrap();
        assert!(
            second
                .addons
                .iter()
                .all(|a| matches!(a, AddonOutcome::Current { .. })),
            "{case}: {second:?}"
        );
        let writes: Vec<String> = api
            .take_requests()
            .into_iter()
            .filter(|r| !r.starts_with("GET "))
            .collect();
        assert!(writes.is_empty(), "{case}: {writes:?}");
        let kinds: std::collections::BTreeSet<&str> =
            expected.iter().map(|(_, k, _)| k.as_str()).collect();
        summary.push(format!(
            "{case}: {} addons, {objects} objects of {} kinds applied",
            first.addons.len(),
            kinds.len()
        ));
    }
    eprintln!("{}", summary.join("\n"));
}

/// The objects kops' Terraform output puts in the state store
/// (`aws_s3_object` blocks: `key` and `content = file(...)`), as (key,
/// data file).
fn s3_objects(tf: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for block in tf.split("\nresource \"aws_s3_object\" ").skip(1) {
        let block = block.split("\n}").next().unwrap_or("");
        let field = |name: &str| {
            block.lines().find_map(|l| {
                let (k, v) = l.trim().split_once('=')?;
                (k.trim() == name).then(|| v.trim().to_string())
            })
        };
        let (Some(key), Some(content)) = (field("key"), field("content")) else {
            continue;
        };
        let key = key.trim_matches('"').to_string();
        let Some(file) = content
            .strip_prefix("file(\"${path.module}/")
            .and_then(|c| c.strip_suffix("\")"))
        else {
            continue;
        };
        out.push((key, file.to_string()));
    }
    out
}

/// kops' own rendering of every AWS case (its bootstrap channel and
/// manifests, from the expected Terraform output in ../shared) goes through
/// the applier into the test API: every addon is applied (custom resources
/// after their definitions, needsPKI addons get their CA and issuer), and
/// the second pass writes nothing. Kinds or fields kops uses that the
/// applier mishandles show up here before kops-rs renders them.
#[tokio::test]
async fn kops_rendered_addons_apply_once() {
    let Some(shared) = kops_testkit::shared_dir() else {
        return;
    };
    let root = shared.join("conformance/kops/update_cluster");
    let mut cases: Vec<_> = std::fs::read_dir(&root)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    cases.sort();
    let mut summary = Vec::new();
    for case in cases {
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        let Ok(tf) = std::fs::read_to_string(case.join("kubernetes.tf")) else {
            continue;
        };
        let objects = s3_objects(&tf);
        let Some((channel_key, _)) = objects
            .iter()
            .find(|(k, _)| k.ends_with("/addons/bootstrap-channel.yaml"))
        else {
            continue;
        };
        let work = tempfile::tempdir().unwrap();
        for (key, file) in &objects {
            let to = work.path().join("store").join(key);
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(case.join(file), &to).unwrap_or_else(|e| panic!("{name}: {file}: {e}"));
        }
        let channel = file_url(&work.path().join("store").join(channel_key));
        let api = FakeApi::start();
        let client = client_from_kubeconfig(&api.write_kubeconfig(work.path()))
            .await
            .unwrap();
        let first = apply_channel(&client, &channel, &options())
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut count = 0;
        for addon in &first.addons {
            match addon {
                AddonOutcome::Applied { objects, .. } => count += objects,
                other => panic!("{name}: not applied: {other:?}"),
            }
        }
        api.take_requests();
        let second = apply_channel(&client, &channel, &options()).await.unwrap();
        assert!(
            second
                .addons
                .iter()
                .all(|a| matches!(a, AddonOutcome::Current { .. })),
            "{name}: {second:?}"
        );
        let writes: Vec<String> = api
            .take_requests()
            .into_iter()
            .filter(|r| !r.starts_with("GET "))
            .collect();
        assert!(writes.is_empty(), "{name}: {writes:?}");
        summary.push(format!(
            "{name}: {} addons, {count} objects",
            first.addons.len()
        ));
    }
    eprintln!("{} cases:\n{}", summary.len(), summary.join("\n"));
}
