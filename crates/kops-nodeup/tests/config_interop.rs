//! The control-plane node config of a cluster kops made must be the one
//! kops-rs builds, byte for byte, or `update` replans the launch template
//! (issue 17): no public API name for gossip clusters, the API load
//! balancer's addresses as `ApiserverAdditionalIPs`, and kops' images under
//! `KOPS_BASE_URL`.

use kops_api::{Cluster, InstanceGroup, Object};
use kops_nodeup::assets::Arch;
use kops_nodeup::config::{self, BaseUrlImage, NodeInputs, BASE_URL_IMAGES};
use serde_json::json;

const CONFIG_BASE: &str = "s3://state/interop.k8s.local";

fn load(name: &str, extra_spec: &str) -> (Cluster, Vec<InstanceGroup>) {
    let yaml = format!(
        r#"apiVersion: kops.k8s.io/v1alpha2
kind: Cluster
metadata: {{name: {name}}}
spec:
  api: {{loadBalancer: {{type: Public, class: Network}}}}
  cloudProvider: aws
  kubernetesVersion: v1.34.0
  networkCIDR: 172.20.0.0/16
  networking: {{cilium: {{}}}}
  nonMasqueradeCIDR: 100.64.0.0/10
  topology: {{dns: {{type: Private}}}}
  etcdClusters:
  - {{name: main, etcdMembers: [{{name: a, instanceGroup: control-plane-us-east-1a}}]}}
  - {{name: events, etcdMembers: [{{name: a, instanceGroup: control-plane-us-east-1a}}]}}
  subnets:
  - {{name: us-east-1a, zone: us-east-1a, cidr: 172.20.64.0/19, type: Private}}
  - {{name: utility-us-east-1a, zone: us-east-1a, cidr: 172.20.0.0/22, type: Utility}}
{extra_spec}---
apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata: {{name: control-plane-us-east-1a}}
spec: {{role: Master, image: ami-1, machineType: t3.medium, subnets: [us-east-1a]}}
---
apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata: {{name: apiserver}}
spec: {{role: APIServer, image: ami-1, machineType: t3.medium, subnets: [us-east-1a]}}
---
apiVersion: kops.k8s.io/v1alpha2
kind: InstanceGroup
metadata: {{name: nodes}}
spec: {{role: Node, image: ami-1, machineType: t3.medium, subnets: [us-east-1a]}}
"#
    );
    let mut cluster = None;
    let mut groups = Vec::new();
    for object in kops_api::parse_objects("test.yaml", &yaml).unwrap() {
        match object {
            Object::Cluster(c) => cluster = Some(*c),
            Object::InstanceGroup(g) => groups.push(*g),
            _ => {}
        }
    }
    (cluster.unwrap(), groups)
}

fn configs(
    cluster: &Cluster,
    groups: &[InstanceGroup],
    inputs: NodeInputs,
) -> Vec<config::NodeupConfig> {
    let inputs = NodeInputs {
        instance_groups: Some(groups.to_vec()),
        ..inputs
    };
    groups
        .iter()
        .map(|g| config::nodeup_config_with_inputs(cluster, g, CONFIG_BASE, &inputs).unwrap())
        .collect()
}

#[test]
fn gossip_clusters_name_no_public_api_name_as_kops() {
    let (cluster, groups) = load("interop.k8s.local", "");
    let all = configs(&cluster, &groups, NodeInputs::default());
    for c in &all[..2] {
        let api = &c.api_server_config.as_ref().unwrap().api;
        assert!(api.is_empty(), "{api:?}");
    }
    let yaml = config::render_yaml(&all[0]);
    assert!(yaml.starts_with("APIServerConfig:\n  API: {}\n"), "{yaml}");

    // A hosted zone (populate) or a name the user set is written.
    let (cluster, groups) = load("interop.example.com", "  dnsZone: example.com\n");
    let all = configs(&cluster, &groups, NodeInputs::default());
    let api = &all[0].api_server_config.as_ref().unwrap().api;
    assert_eq!(
        api.get("publicName"),
        Some(&json!("api.interop.example.com"))
    );
    let (mut cluster, groups) = load("interop.k8s.local", "");
    cluster.spec.api.as_mut().unwrap().public_name = Some("api.example.org".into());
    let all = configs(&cluster, &groups, NodeInputs::default());
    let api = &all[0].api_server_config.as_ref().unwrap().api;
    assert_eq!(api.get("publicName"), Some(&json!("api.example.org")));
}

#[test]
fn api_servers_list_the_load_balancer_addresses() {
    let (cluster, groups) = load("interop.k8s.local", "");
    let lb = "api-interop-k8s-local-abcdef-1.us-east-1.elb.amazonaws.com".to_string();
    let all = configs(
        &cluster,
        &groups,
        NodeInputs {
            api_server_addresses: vec![lb.clone()],
            ..NodeInputs::default()
        },
    );
    assert_eq!(all[0].apiserver_additional_ips, vec![lb.clone()]);
    assert_eq!(all[1].apiserver_additional_ips, vec![lb.clone()]);
    assert!(all[2].apiserver_additional_ips.is_empty());
    let yaml = config::render_yaml(&all[0]);
    assert!(
        yaml.contains(&format!("\nApiserverAdditionalIPs:\n- {lb}\nAssets:\n")),
        "{yaml}"
    );
    // Unknown (no balancer yet, Terraform): no field at all.
    let none = configs(&cluster, &groups, NodeInputs::default());
    assert!(!config::render_yaml(&none[0]).contains("ApiserverAdditionalIPs"));
    // kops' own file reads back with the field.
    let back = config::parse_yaml("x", &yaml).unwrap();
    assert_eq!(back.apiserver_additional_ips, vec![lb]);
}

#[test]
fn base_url_images_per_role_in_kops_order() {
    let (cluster, groups) = load("interop.k8s.local", "");
    let base = "file:///root/kops-base/1.37.0/";
    let mut images = Vec::new();
    // Given in another order than kops': the config orders them.
    for name in BASE_URL_IMAGES.iter().rev() {
        for arch in [Arch::Arm64, Arch::Amd64] {
            images.push(BaseUrlImage {
                name: name.to_string(),
                arch,
                url: config::base_url_image_url(base, name, arch),
                sha256: format!("{}{}", &name[..2], arch.as_str()),
            });
        }
    }
    let all = configs(
        &cluster,
        &groups,
        NodeInputs {
            base_url_images: images,
            ..NodeInputs::default()
        },
    );
    let yaml = config::render_yaml(&all[0]);
    let expected = "images:
  amd64:
  - hash: koamd64
    sources:
    - file:///root/kops-base/1.37.0/images/kops-controller-amd64.tar.gz
  - hash: koamd64
    sources:
    - file:///root/kops-base/1.37.0/images/kops-channels-amd64.tar.gz
  - hash: dnamd64
    sources:
    - file:///root/kops-base/1.37.0/images/dns-controller-amd64.tar.gz
  - hash: kuamd64
    sources:
    - file:///root/kops-base/1.37.0/images/kube-apiserver-healthcheck-amd64.tar.gz
  arm64:
  - hash: koarm64
";
    assert!(yaml.contains(expected), "{yaml}");
    let api_server = &all[1].images;
    assert_eq!(api_server.len(), 2);
    for list in api_server.values() {
        assert_eq!(list.len(), 1);
        assert!(list[0].sources[0].contains("/images/kube-apiserver-healthcheck-"));
    }
    assert!(all[2].images.is_empty());
    assert!(!config::render_yaml(&all[2]).contains("images:"));
}
