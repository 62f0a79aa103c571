//! The launch templates `update cluster` creates on moto carry kops-rs'
//! node bootstrap script: decoded from EC2, the user data downloads nodeup
//! with a hash check, and its boot config names the cluster's config base,
//! the group and the hash of exactly the node config `update cluster --yes`
//! stores for the group. A bastion runs no nodeup. Changing the spec in a
//! way the node config sees (the Kubernetes version) changes the hash, and
//! so the template: a new version.

use crate::common;

use base64::Engine;
use common::{cloud, load, run, IMAGE, SSH_KEY};
use kops_aws::AwsCloud;
use kops_engine::Mode;
use kops_model::Model;

// Not `userdata.example.com`: its bastion load balancer's 32-character name
// would hold `--`, which moto refuses for target groups.
const CONFIG_BASE: &str = "s3://state-bucket/userdata1.example.com";

fn manifests(version: &str) -> String {
    format!(
        r#"apiVersion: kops.k8s.io/v1alpha2
kind: Cluster
metadata: {{name: userdata1.example.com}}
spec:
  cloudProvider: aws
  kubernetesVersion: {version}
  kubernetesApiAccess: [0.0.0.0/0]
  sshAccess: [203.0.113.0/24]
  networkCIDR: 172.20.0.0/16
  networking: {{cilium: {{}}}}
  etcdClusters:
  - {{name: main, etcdMembers: [{{name: a, instanceGroup: control-plane-us-east-1a}}]}}
  - {{name: events, etcdMembers: [{{name: a, instanceGroup: control-plane-us-east-1a}}]}}
  subnets:
  - {{name: us-east-1a, zone: us-east-1a, cidr: 172.20.32.0/19, type: Public}}
---
apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata: {{name: control-plane-us-east-1a, labels: {{kops.k8s.io/cluster: userdata1.example.com}}}}
spec: {{role: Master, image: "{IMAGE}", machineType: t3.medium, minSize: 1, maxSize: 1, subnets: [us-east-1a]}}
---
apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata: {{name: nodes, labels: {{kops.k8s.io/cluster: userdata1.example.com}}}}
spec: {{role: Node, image: "{IMAGE}", machineType: t3.medium, minSize: 1, maxSize: 1, subnets: [us-east-1a]}}
---
apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata: {{name: bastions, labels: {{kops.k8s.io/cluster: userdata1.example.com}}}}
spec: {{role: Bastion, image: "{IMAGE}", machineType: t3.micro, minSize: 1, maxSize: 1, subnets: [us-east-1a]}}
"#
    )
}

/// Template name → (latest version, decoded user data of that version).
async fn user_data_in_cloud(cloud: &AwsCloud) -> std::collections::BTreeMap<String, (i64, String)> {
    let templates = cloud
        .ec2()
        .describe_launch_templates()
        .send()
        .await
        .unwrap();
    let mut out = std::collections::BTreeMap::new();
    for t in templates.launch_templates() {
        let name = t.launch_template_name().unwrap().to_string();
        if !name.ends_with("userdata1.example.com") {
            continue;
        }
        let version = t.latest_version_number().unwrap();
        let versions = cloud
            .ec2()
            .describe_launch_template_versions()
            .launch_template_name(&name)
            .versions(version.to_string())
            .send()
            .await
            .unwrap();
        let data = versions.launch_template_versions()[0]
            .launch_template_data()
            .and_then(|d| d.user_data())
            .unwrap_or_default();
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(data)
            .unwrap();
        out.insert(name, (version, String::from_utf8(decoded).unwrap()));
    }
    out
}

fn boot_config_of(script: &str) -> kops_nodeup::BootConfig {
    let text = kops_nodeup::bootstrap::boot_config_text(script)
        .unwrap_or_else(|| panic!("no boot config in\n{script}"));
    kops_nodeup::BootConfig::parse(text).unwrap()
}

#[tokio::test]
async fn launch_templates_carry_the_node_bootstrap() {
    let Some(cloud) = cloud().await else {
        return;
    };
    let cluster_name = "userdata1.example.com";
    let yaml = manifests("v1.34.10");
    let (cluster, groups) = load(&yaml);
    let model = Model {
        cluster: &cluster,
        groups: &groups,
        ssh_public_key: Some(SSH_KEY),
        node_inputs: None,
        account_id: None,
        config_base: CONFIG_BASE,
    };
    let graph = kops_aws::model::build(&model).unwrap();
    run(&cloud, cluster_name, &graph, Mode::Apply)
        .await
        .unwrap();

    let stored = kops_model::compute::node_configs(&model).unwrap();
    assert_eq!(stored.len(), 2, "bastions get no node config");
    let in_cloud = user_data_in_cloud(&cloud).await;
    for (template, group, role) in [
        (
            "control-plane-us-east-1a.masters.userdata1.example.com",
            "control-plane-us-east-1a",
            "ControlPlane",
        ),
        ("nodes.userdata1.example.com", "nodes", "Node"),
    ] {
        let (_, script) = &in_cloud[template];
        assert!(script.starts_with("#!/bin/bash\n"), "{script}");
        assert!(!script.contains("not implemented"), "{script}");
        assert!(script.contains("NODEUP_URL_AMD64=https://"), "{script}");
        assert!(script.contains("NODEUP_URL_ARM64=https://"), "{script}");
        assert!(script.contains("download-or-bust"), "{script}");
        assert!(script.contains("export AWS_REGION=us-east-1\n"), "{script}");
        assert!(
            script.contains("./nodeup --install-systemd-unit --conf="),
            "{script}"
        );
        let boot = boot_config_of(script);
        let config = stored.iter().find(|c| c.group == group).unwrap();
        assert_eq!(boot.nodeup_config_hash, config.hash);
        assert_eq!(boot.instance_group_name, group);
        assert_eq!(boot.instance_group_role, role);
        assert_eq!(boot.config_base.as_deref(), Some(CONFIG_BASE));
        assert_eq!(boot.cluster_name, cluster_name);
        // The stored config pins the published kubelet for the version.
        assert!(config
            .yaml
            .contains("@https://dl.k8s.io/release/v1.34.10/bin/linux/amd64/kubelet"));
    }
    let (_, bastion) = &in_cloud["bastions.userdata1.example.com"];
    assert!(!bastion.contains("nodeup"), "{bastion}");

    // A second run changes nothing.
    let again = run(&cloud, cluster_name, &graph, Mode::DryRun)
        .await
        .unwrap();
    assert!(
        !again.report.plan().to_string().contains("LaunchTemplate/"),
        "{}",
        again.report.plan()
    );

    // Another Kubernetes version: another node config, another hash, a new
    // template version with it.
    let (cluster2, groups2) = load(&manifests("v1.35.7"));
    let model2 = Model {
        cluster: &cluster2,
        groups: &groups2,
        ssh_public_key: Some(SSH_KEY),
        node_inputs: None,
        account_id: None,
        config_base: CONFIG_BASE,
    };
    let graph2 = kops_aws::model::build(&model2).unwrap();
    run(&cloud, cluster_name, &graph2, Mode::Apply)
        .await
        .unwrap();
    let after = user_data_in_cloud(&cloud).await;
    let (version, script) = &after["nodes.userdata1.example.com"];
    assert_eq!(*version, in_cloud["nodes.userdata1.example.com"].0 + 1);
    let new_hash = kops_model::compute::node_configs(&model2)
        .unwrap()
        .into_iter()
        .find(|c| c.group == "nodes")
        .unwrap()
        .hash;
    assert_eq!(boot_config_of(script).nodeup_config_hash, new_hash);
}
