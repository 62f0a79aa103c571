//! Spec fixtures the builders' unit tests share, in this crate and in each
//! cloud's (pure: manifests parsed in memory, no IO).

use kops_api::{Cluster, InstanceGroup, Object};

use crate::Model;

/// A cluster and its groups from manifests.
pub fn load(yaml: &str) -> (Cluster, Vec<InstanceGroup>) {
    let mut cluster = None;
    let mut groups = Vec::new();
    for object in kops_api::parse_objects("test.yaml", yaml).expect("valid manifests") {
        match object {
            Object::Cluster(c) => cluster = Some(*c),
            Object::InstanceGroup(g) => groups.push(*g),
            _ => {}
        }
    }
    (cluster.expect("a Cluster"), groups)
}

pub fn model<'a>(cluster: &'a Cluster, groups: &'a [InstanceGroup]) -> Model<'a> {
    Model {
        cluster,
        groups,
        ssh_public_key: None,
        node_inputs: None,
        account_id: None,
        config_base: cluster
            .spec
            .config_base
            .as_deref()
            .unwrap_or("s3://state/c"),
    }
}

pub const PUBLIC: &str = r#"
apiVersion: kops.k8s.io/v1alpha2
kind: Cluster
metadata:
  name: pub.example.com
spec:
  cloudProvider: aws
  configBase: s3://state-bucket/pub.example.com
  kubernetesApiAccess: [203.0.113.0/24]
  sshAccess: [198.51.100.7/32, "2001:db8::/64"]
  networkCIDR: 172.20.0.0/16
  networking: {cilium: {}}
  etcdClusters:
  - {name: main, etcdMembers: [{name: a, instanceGroup: control-plane}]}
  - {name: events, etcdMembers: [{name: a, instanceGroup: control-plane}]}
  subnets:
  - {name: us-east-1a, zone: us-east-1a, cidr: 172.20.32.0/19, type: Public}
---
apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata: {name: control-plane, labels: {kops.k8s.io/cluster: pub.example.com}}
spec: {role: Master, image: ami-12345678, machineType: t3.medium, subnets: [us-east-1a]}
---
apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata: {name: nodes, labels: {kops.k8s.io/cluster: pub.example.com}}
spec: {role: Node, image: ami-12345678, machineType: t3.medium, subnets: [us-east-1a]}
"#;

pub fn private_with_bastion() -> String {
    PUBLIC
        .replace("pub.example.com", "priv.example.com")
        .replace(
            "  - {name: us-east-1a, zone: us-east-1a, cidr: 172.20.32.0/19, type: Public}",
            "  - {name: us-east-1a, zone: us-east-1a, cidr: 172.20.32.0/19, type: Private}\n  - {name: utility-us-east-1a, zone: us-east-1a, cidr: 172.20.4.0/22, type: Utility}",
        )
        .replace(
            "  networkCIDR:",
            "  api: {loadBalancer: {type: Public, class: Network}}\n  networkCIDR:",
        )
        + r#"---
apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata: {name: bastions, labels: {kops.k8s.io/cluster: priv.example.com}}
spec: {role: Bastion, image: ami-12345678, machineType: t3.micro, subnets: [utility-us-east-1a]}
"#
}
