//! What `update cluster` writes for the addons applies: a cluster made with
//! `kops create cluster` defaults (Cilium, CoreDNS, dns-controller, the cloud
//! controller, EBS CSI, node-termination-handler, ...), rendered offline,
//! then its bootstrap channel from the state store goes through the addon
//! applier that control-plane nodes run (kops-channels) into a Kubernetes
//! API served from the test. Every addon is applied and recorded, and the
//! second pass writes nothing.

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
    let r = kops(&[
        "update",
        "cluster",
        NAME,
        "--state",
        &state,
        "--target",
        "terraform",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);

    let api = FakeApi::start();
    let client = client_from_kubeconfig(&api.write_kubeconfig(dir.path()))
        .await
        .unwrap();
    let channel = format!("{state}/{NAME}/addons/bootstrap-channel.yaml");
    let first = apply_channel(&client, &channel, &ApplyOptions::default())
        .await
        .unwrap();
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

    let second = apply_channel(&client, &channel, &ApplyOptions::default())
        .await
        .unwrap();
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
