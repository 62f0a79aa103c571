//! The pure part: the node config kops-rs builds matches kops' own for the
//! same spec (asset list, kubelet settings), the bootstrap script carries the
//! config's hash and the nodeup mirrors, and `spec.assets.fileRepository`
//! moves every download to the mirror.

use kops_api::{Cluster, InstanceGroup, Object};
use kops_nodeup::assets::{self, Arch, AssetError};
use kops_nodeup::config::{self, ConfigError};
use kops_nodeup::{bootstrap, BootConfig};

const CONFIG_BASE: &str = "memfs://clusters.example.com/minimal-aws.example.com";

fn load(yaml: &str) -> (Cluster, Vec<InstanceGroup>) {
    let mut cluster = None;
    let mut groups = Vec::new();
    for object in kops_api::parse_objects("test.yaml", yaml).unwrap() {
        match object {
            Object::Cluster(c) => cluster = Some(*c),
            Object::InstanceGroup(g) => groups.push(*g),
            _ => {}
        }
    }
    (cluster.unwrap(), groups)
}

fn minimal(extra_spec: &str) -> (Cluster, Vec<InstanceGroup>) {
    load(&format!(
        r#"apiVersion: kops.k8s.io/v1alpha2
kind: Cluster
metadata: {{name: minimal-aws.example.com}}
spec:
  cloudProvider: aws
  kubernetesVersion: v1.34.0
  networkCIDR: 172.20.0.0/16
  networking: {{cni: {{}}}}
  nonMasqueradeCIDR: 100.64.0.0/10
  etcdClusters:
  - {{name: main, etcdMembers: [{{name: us-test-1a, instanceGroup: master-us-test-1a}}]}}
  - {{name: events, etcdMembers: [{{name: us-test-1a, instanceGroup: master-us-test-1a}}]}}
  subnets:
  - {{name: us-test-1a, zone: us-test-1a, cidr: 172.20.32.0/19, type: Public}}
{extra_spec}---
apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata: {{name: master-us-test-1a, labels: {{kops.k8s.io/cluster: minimal-aws.example.com}}}}
spec: {{role: Master, image: ami-12345678, machineType: m3.medium, subnets: [us-test-1a]}}
---
apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata: {{name: nodes, labels: {{kops.k8s.io/cluster: minimal-aws.example.com}}}}
spec: {{role: Node, image: ami-12345678, machineType: t2.medium, subnets: [us-test-1a]}}
---
apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata: {{name: bastions, labels: {{kops.k8s.io/cluster: minimal-aws.example.com}}}}
spec: {{role: Bastion, image: ami-12345678, machineType: t3.micro, subnets: [us-test-1a]}}
"#
    ))
}

/// kops' golden node configs for minimal-aws (read from ../shared).
fn golden(file: &str) -> Option<serde_yaml_ng::Value> {
    let Some(shared) = kops_testkit::shared_dir() else {
        eprintln!("skipped: ../shared is absent");
        return None;
    };
    let path = shared
        .join("conformance/kops/update_cluster/minimal-aws/data")
        .join(file);
    let text = std::fs::read_to_string(&path).ok()?;
    Some(serde_yaml_ng::from_str(&text).unwrap())
}

#[test]
fn assets_and_kubelet_match_kops_minimal_aws() {
    let (cluster, groups) = minimal("");
    for (group, file) in [
        (&groups[1], "aws_s3_object_nodeupconfig-nodes_content"),
        (
            &groups[0],
            "aws_s3_object_nodeupconfig-master-us-test-1a_content",
        ),
    ] {
        let Some(kops) = golden(file) else { return };
        let ours = config::nodeup_config(&cluster, group, CONFIG_BASE).unwrap();
        let ours: serde_yaml_ng::Value =
            serde_yaml_ng::from_str(&config::render_yaml(&ours)).unwrap();
        for field in [
            "Assets",
            "KubernetesVersion",
            "KubeProxy",
            "Networking",
            "UpdatePolicy",
            "containerdConfig",
            "ClusterName",
        ] {
            assert_eq!(
                ours[field], kops[field],
                "{file}: {field} differs from kops'"
            );
        }
        // kubelet: every setting kops writes, except the control plane's
        // feature gate kops adds for its own addons.
        for (k, v) in kops["KubeletConfig"].as_mapping().unwrap() {
            if k.as_str() == Some("featureGates") {
                continue;
            }
            assert_eq!(&ours["KubeletConfig"][k], v, "{file}: KubeletConfig.{k:?}");
        }
        if group.is_control_plane() {
            assert_eq!(ours["EtcdClusterNames"], kops["EtcdClusterNames"]);
            assert_eq!(ours["ControlPlaneConfig"], kops["ControlPlaneConfig"]);
            for (k, v) in kops["APIServerConfig"]["KubeAPIServer"]
                .as_mapping()
                .unwrap()
            {
                assert_eq!(
                    &ours["APIServerConfig"]["KubeAPIServer"][k], v,
                    "KubeAPIServer.{k:?}"
                );
            }
        }
    }
}

#[test]
fn config_path_hash_and_round_trip() {
    let (cluster, groups) = minimal("");
    let all = config::rendered_all(&cluster, &groups, CONFIG_BASE).unwrap();
    let paths: Vec<&str> = all.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "igconfig/control-plane/master-us-test-1a/nodeupconfig.yaml",
            "igconfig/node/nodes/nodeupconfig.yaml"
        ],
        "bastions get no node config"
    );
    assert_eq!(
        config::nodeup_config_key("c.example.com", kops_api::Role::Node, "nodes"),
        "c.example.com/igconfig/node/nodes/nodeupconfig.yaml"
    );
    for r in &all {
        assert_eq!(r.hash, config::config_hash(r.yaml.as_bytes()));
        assert_eq!(r.hash.len(), 44, "base64 of 32 bytes");
        let back = config::parse_yaml("x", &r.yaml).unwrap();
        assert_eq!(back, r.config);
        assert_eq!(config::render_yaml(&back), r.yaml, "stable rendering");
        assert_eq!(
            r.config.config_store.as_ref().unwrap().keypairs.as_deref(),
            Some("memfs://clusters.example.com/minimal-aws.example.com/pki")
        );
    }
    // With kops-controller as the config server, as kops: only nodes that
    // run the API server read the keystore.
    let inputs = config::NodeInputs {
        config_server: true,
        ..Default::default()
    };
    for (group, store) in [(&groups[0], true), (&groups[1], false)] {
        let r = config::rendered_with_inputs(&cluster, group, CONFIG_BASE, &inputs)
            .unwrap()
            .unwrap();
        assert_eq!(r.config.config_store.is_some(), store, "{}", r.path);
    }
    assert!(
        config::rendered_with_inputs(&cluster, &groups[2], CONFIG_BASE, &inputs)
            .unwrap()
            .is_none()
    );
}

#[test]
fn bootstrap_script_carries_hash_boot_config_and_mirrors() {
    let (cluster, groups) = minimal("");
    let node = &groups[1];
    let script = bootstrap::user_data(&cluster, node, CONFIG_BASE).unwrap();
    let rendered = config::rendered(&cluster, node, CONFIG_BASE)
        .unwrap()
        .unwrap();
    assert!(script.starts_with("#!/bin/bash\n"));
    assert!(script.contains("NODEUP_URL_AMD64=https://"), "{script}");
    assert!(script.contains("NODEUP_URL_ARM64=https://"), "{script}");
    assert!(script.contains("/nodeup-linux-amd64"), "{script}");
    assert!(script.contains("export AWS_REGION=us-test-1\n"), "{script}");
    assert!(script.contains("download-or-bust"), "{script}");
    assert!(script.contains("--retry 6"), "{script}");
    // The boot config between the heredoc markers.
    let boot = kops_nodeup::bootstrap::boot_config_text(&script).unwrap();
    let boot = BootConfig::parse(boot).unwrap();
    assert_eq!(boot.nodeup_config_hash, rendered.hash);
    assert_eq!(boot.config_base.as_deref(), Some(CONFIG_BASE));
    assert_eq!(boot.instance_group_name, "nodes");
    assert_eq!(boot.instance_group_role, "Node");
    assert_eq!(boot.cluster_name, "minimal-aws.example.com");

    let cp = bootstrap::user_data(&cluster, &groups[0], CONFIG_BASE).unwrap();
    assert!(cp.contains("InstanceGroupRole: ControlPlane"), "{cp}");
    let bastion = bootstrap::user_data(&cluster, &groups[2], CONFIG_BASE).unwrap();
    assert!(!bastion.contains("nodeup --conf"), "{bastion}");

    // The asset hashes in the config are the published ones.
    let kubelet = rendered.config.assets["amd64"][0].clone();
    assert_eq!(
        kubelet,
        "5c0d28cea2a3a5c91861dda088a29d56c1b027e184dae1d792686f0710750076@https://dl.k8s.io/release/v1.34.0/bin/linux/amd64/kubelet"
    );
}

#[test]
fn file_repository_redirects_every_download() {
    let (cluster, groups) =
        minimal("  assets: {fileRepository: 'https://mirror.example.com/files/'}\n");
    let rendered = config::rendered(&cluster, &groups[1], CONFIG_BASE)
        .unwrap()
        .unwrap();
    for arch in ["amd64", "arm64"] {
        let list = &rendered.config.assets[arch];
        assert_eq!(list.len(), 6);
        for a in list {
            let (hash, url) = a.split_once('@').unwrap();
            assert!(assets::is_sha256_hex(hash));
            assert!(
                url.starts_with("https://mirror.example.com/files/"),
                "{url}"
            );
        }
    }
    assert!(rendered.config.assets["amd64"].contains(
        &"5c0d28cea2a3a5c91861dda088a29d56c1b027e184dae1d792686f0710750076@https://mirror.example.com/files/release/v1.34.0/bin/linux/amd64/kubelet".to_string()
    ));
    assert!(rendered.config.assets["amd64"].contains(
        &"9d68969855fbf676cdb8ed758e420fb048d61f984f61de3e53eddfebe484d168@https://mirror.example.com/files/containerd/containerd/releases/download/v2.3.4/containerd-2.3.4-linux-amd64.tar.gz".to_string()
    ));
    let script = bootstrap::user_data(&cluster, &groups[1], CONFIG_BASE).unwrap();
    assert!(
        script.contains(&format!(
            "NODEUP_URL_AMD64=https://mirror.example.com/files/kops-rs/{}/linux/amd64/nodeup,",
            bootstrap::NODEUP_VERSION
        )),
        "{script}"
    );
    let (bad, groups) = minimal("  assets: {fileRepository: 'ftp://mirror'}\n");
    match config::rendered(&bad, &groups[1], CONFIG_BASE) {
        Err(ConfigError::Asset { source, .. }) => {
            assert!(matches!(*source, AssetError::BadFileRepository { .. }))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn unknown_hashes_are_a_clear_error_and_explicit_hashes_work() {
    let (cluster, groups) = minimal("  containerd: {version: 9.9.9}\n");
    let err = config::rendered(&cluster, &groups[1], CONFIG_BASE).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("no sha256 is known for containerd 9.9.9 (amd64)"),
        "{text}"
    );
    assert!(
        text.contains("hint: set `spec.containerd.version`"),
        "{text}"
    );

    let h = "a".repeat(64);
    let (cluster, groups) = minimal(&format!(
        "  containerd:\n    version: 9.9.9\n    packages: {{urlAmd64: 'https://m/c-amd64.tgz', hashAmd64: '{h}', urlArm64: 'https://m/c-arm64.tgz', hashArm64: '{h}'}}\n"
    ));
    let list = assets::node_assets(&cluster, Arch::Amd64).unwrap();
    assert_eq!(list[4].compact(), format!("{h}@https://m/c-amd64.tgz"));
    let r = config::rendered(&cluster, &groups[1], CONFIG_BASE)
        .unwrap()
        .unwrap();
    // kops keeps them in the node's containerd settings (its
    // containerd-custom case); the assets carry them too.
    assert!(
        r.yaml.contains("    urlAmd64: https://m/c-amd64.tgz\n"),
        "{}",
        r.yaml
    );
    assert!(r.config.assets["amd64"].contains(&format!("{h}@https://m/c-amd64.tgz")));

    let (cluster, groups) = minimal("").clone();
    let mut cluster = cluster;
    cluster.spec.kubernetes_version = Some("v1.36.99".into());
    let text = config::rendered(&cluster, &groups[1], CONFIG_BASE)
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("no sha256 is known for kubelet v1.36.99"),
        "{text}"
    );
    assert!(text.contains("hint:"), "{text}");
}

#[test]
fn additional_user_data_makes_a_multipart_document_like_kops() {
    let (cluster, mut groups) = minimal("");
    let extra: kops_api::instance_group::UserData = serde_yaml_ng::from_str(
        "{name: myscript.sh, type: text/x-shellscript, content: \"#!/bin/sh\\necho hi\\n\"}",
    )
    .unwrap();
    groups[1].spec.additional_user_data = Some(vec![extra.clone()]);
    let crlf = bootstrap::user_data(&cluster, &groups[1], CONFIG_BASE).unwrap();
    // Go's multipart writer ends the MIME lines with CRLF; kops' golden
    // files (and this test) compare with them as LF.
    assert!(
        crlf.starts_with("Content-Type: multipart/mixed; boundary=\"MIMEBOUNDARY\"\r\n"),
        "{crlf}"
    );
    assert!(crlf.ends_with("\r\n--MIMEBOUNDARY--\r\n"), "{crlf}");
    let text = crlf.replace("\r\n", "\n");
    assert!(text.starts_with(
        "Content-Type: multipart/mixed; boundary=\"MIMEBOUNDARY\"\nMIME-Version: 1.0\n\n--MIMEBOUNDARY\nContent-Disposition: attachment; filename=\"nodeup.sh\"\nContent-Transfer-Encoding: 7bit\nContent-Type: text/x-shellscript\nMime-Version: 1.0\n\n#!/bin/bash\n"
    ), "{text}");
    assert!(text.ends_with(
        "\n\n--MIMEBOUNDARY\nContent-Disposition: attachment; filename=\"myscript.sh\"\nContent-Transfer-Encoding: 7bit\nContent-Type: text/x-shellscript\nMime-Version: 1.0\n\n#!/bin/sh\necho hi\n\n--MIMEBOUNDARY--\n"
    ), "{text}");
    groups[2].spec.additional_user_data = Some(vec![extra]);
    let bastion = bootstrap::user_data(&cluster, &groups[2], CONFIG_BASE).unwrap();
    assert!(!bastion.contains("nodeup.sh"), "{bastion}");
    assert!(bastion.contains("filename=\"myscript.sh\""), "{bastion}");
}

/// A worker group with gVisor: the node config carries kops' `GVisor`
/// (platform completed), keeps the group's block in `containerdConfig`
/// and labels the kubelet `kops.k8s.io/gvisor=1`; the text of each field
/// is what kops 1.37.0-alpha.1 wrote for such a group
/// (`data/aws_s3_object_nodeupconfig-sandboxed_content`). Other groups
/// carry none of it.
#[test]
fn gvisor_fields_match_kops() {
    let (cluster, mut groups) = minimal("");
    let mut sandboxed = groups[1].clone();
    sandboxed.metadata.name = "sandboxed".into();
    sandboxed.spec.containerd =
        Some(serde_json::from_value(serde_json::json!({"gvisor": {"enabled": true}})).unwrap());
    groups.push(sandboxed);
    let rendered = |group: &InstanceGroup| {
        let config = config::nodeup_config(&cluster, group, CONFIG_BASE).unwrap();
        config::render_yaml(&config)
    };
    let yaml = rendered(&groups[3]);
    // A top-level key and the indented lines under it.
    let block = |name: &str| -> String {
        let mut lines = yaml.lines().skip_while(|l| *l != format!("{name}:"));
        let mut out = format!(
            "{}\n",
            lines
                .next()
                .unwrap_or_else(|| panic!("no {name} in\n{yaml}"))
        );
        for line in lines.take_while(|l| l.starts_with(' ') || l.starts_with('-')) {
            out.push_str(line);
            out.push('\n');
        }
        out
    };
    assert_eq!(
        block("GVisor"),
        "GVisor:\n  enabled: true\n  platform: systrap\n"
    );
    assert!(
        block("containerdConfig")
            .starts_with("containerdConfig:\n  gvisor:\n    enabled: true\n  logLevel: info\n"),
        "{yaml}"
    );
    assert!(
        yaml.contains("  nodeLabels:\n    kops.k8s.io/gvisor: \"1\"\n    node-role.kubernetes.io/node: \"\"\n"),
        "{yaml}"
    );

    // A platform of the group's own is kept.
    let mut kvm = groups[3].clone();
    kvm.spec.containerd = Some(
        serde_json::from_value(serde_json::json!({"gvisor": {"enabled": true, "platform": "kvm"}}))
            .unwrap(),
    );
    assert!(rendered(&kvm).contains("\nGVisor:\n  enabled: true\n  platform: kvm\n"));

    // Switched off, the block leaves containerdConfig too, as in kops.
    let mut off = groups[3].clone();
    off.spec.containerd =
        Some(serde_json::from_value(serde_json::json!({"gvisor": {"enabled": false}})).unwrap());
    for group in [&groups[0], &groups[1], &off] {
        let yaml = rendered(group);
        assert!(
            !yaml.to_lowercase().contains("gvisor"),
            "{}:\n{yaml}",
            group.name()
        );
    }
}
