//! kops-controller (`kops-controller.addons.k8s.io`) as kops-rs runs it: a
//! host service on control-plane nodes, not kops' DaemonSet (kops-rs
//! publishes no container image). The addon keeps kops' `kops-controller`
//! ConfigMap, byte for byte the configuration kops writes (nodeup reads it
//! from the state store to configure the service), and the RBAC the
//! service needs to label nodes.
//!
//! The configuration names how a node's identity is checked (on AWS the
//! IAM roles whose instances may bootstrap, every node and API-server
//! group's, and the region; on Google Cloud the project, region and
//! cluster; on vSphere the vCenter and datacenter; on bare metal no cloud,
//! the `Host` keys of enrolled machines),
//! the paths nodeup writes the service's certificate and signing
//! keys to, and the certificates it may issue (kube-proxy's only when
//! kube-proxy runs).

use kops_api::Role;
use serde_json::{json, Value};

use super::template::{self, TemplateError};
use crate::Model;

/// Where kops-controller reads its vCenter credentials on vSphere when the
/// operator mounts them (kops-controller's `VSPHERE_CREDENTIALS_FILE`).
const VSPHERE_CREDENTIALS_FILE: &str = "/etc/kubernetes/kops-controller/vsphere/credentials";

/// Where nodeup writes kops-controller's certificates and keys.
const PKI_DIR: &str = "/etc/kubernetes/kops-controller/pki";

pub(super) fn objects(model: &Model<'_>) -> Result<Option<Vec<Value>>, TemplateError> {
    let Some(config) = config_json(model) else {
        return Ok(None);
    };
    template::render(
        "kops_controller/manifest.yaml",
        include_str!("kops_controller/manifest.yaml"),
        &json!({
            "config": config,
            "vsphere_secret": (model.cluster.spec.cloud_provider.as_deref() == Some("vsphere"))
                .then_some(super::vsphere::CPI_SECRET),
        }),
    )
    .map(Some)
}

/// kops-controller's options as kops serializes them (its field order).
pub fn config_json(model: &Model<'_>) -> Option<String> {
    let spec = &model.cluster.spec;
    let config_base = spec
        .config_base
        .clone()
        .unwrap_or_else(|| model.config_base.to_string());
    let config_base = config_base.trim_end_matches('/').to_string();
    let secret_store = spec
        .secret_store
        .clone()
        .unwrap_or_else(|| format!("{config_base}/secrets"));
    // vSphere and bare metal have no region; AWS and Google Cloud need one.
    let region = crate::iam::region(model);
    let mut roles: Vec<String> = model
        .groups
        .iter()
        .filter_map(|g| {
            let role = g.role()?;
            if !matches!(role, Role::Node | Role::ApiServer) {
                return None;
            }
            // An existing instance profile: its name stands for its role
            // (kops asks IAM; offline kops-rs cannot).
            let profile = g
                .spec
                .extra
                .get("iam")
                .and_then(|i| i.get("profile"))
                .and_then(Value::as_str)
                .and_then(|arn| arn.rsplit('/').next());
            Some(match profile {
                Some(name) => name.to_string(),
                None => crate::iam::iam_name(model, role),
            })
        })
        .collect();
    roles.sort();
    roles.dedup();
    let kube_proxy = spec
        .kube_proxy
        .as_ref()
        .and_then(|k| k.enabled)
        .unwrap_or(true);
    let cilium_etcd = spec
        .etcd_clusters
        .iter()
        .flatten()
        .any(|e| e.name == "cilium");
    let mut cert_names = vec!["kubelet", "kubelet-server"];
    let mut signing_cas = vec!["kubernetes-ca".to_string()];
    if cilium_etcd {
        cert_names.push("etcd-client-cilium");
        signing_cas.push("etcd-clients-ca-cilium".to_string());
    }
    if kube_proxy {
        cert_names.push("kube-proxy");
    }
    let q = |v: &str| Value::String(v.to_string()).to_string();
    let list = |items: &[String]| {
        format!(
            "[{}]",
            items.iter().map(|i| q(i)).collect::<Vec<_>>().join(",")
        )
    };
    let cert_names: Vec<String> = cert_names.iter().map(|s| s.to_string()).collect();
    // How kops-controller checks a node's identity: on AWS, its instance
    // role; on Google Cloud, its instance in the project (kops' clock-skew
    // allowance of five minutes); on vSphere, its VM in the vCenter; on bare
    // metal, its Host's key.
    let (cloud, provider) = if spec.cloud_provider.as_deref() == Some("vsphere") {
        // kops-rs' own (kops has no vSphere verifier): the vCenter and
        // datacenter a node's VM must be in, and the file the controller
        // reads its vCenter credentials from when it is mounted (else the
        // cloud controller manager's Secret); never the credentials.
        let config = spec.cloud_config.clone().unwrap_or_default();
        (
            "vsphere",
            format!(
                "{{\"vsphere\":{{\"server\":{},\"datacenter\":{},\"credentialsFile\":{}}}}}",
                q(config.vsphere_server.as_deref().unwrap_or_default()),
                q(config.vsphere_datacenter.as_deref().unwrap_or_default()),
                q(VSPHERE_CREDENTIALS_FILE)
            ),
        )
    } else if spec.cloud_provider.as_deref() == Some("metal") {
        // Bare metal: no cloud to ask; machines enrolled with `toolbox
        // enroll` prove themselves with their key (`pki`).
        ("metal", "{},\"pki\":{}".to_string())
    } else if spec.cloud_provider.as_deref() == Some("gce") {
        let region = region?;
        (
            "gce",
            format!(
                "{{\"gce\":{{\"projectID\":{},\"region\":{},\"clusterName\":{},\"MaxTimeSkew\":300}}}}",
                q(spec.project.as_deref().unwrap_or_default()),
                q(&region),
                q(model.name())
            ),
        )
    } else {
        let region = region?;
        (
            "aws",
            format!(
                "{{\"aws\":{{\"nodesRoles\":{},\"Region\":{}}}}}",
                list(&roles),
                q(&region)
            ),
        )
    };
    // With kops' `Metal` feature flag, machines enrolled with `toolbox
    // enroll` are verified beside the cloud's nodes.
    let provider = if cloud != "metal" && model.node_inputs().enrolled_hosts {
        format!("{provider},\"pki\":{{}}")
    } else {
        provider
    };
    Some(format!(
        "{{\"clusterName\":{},\"cloud\":\"{cloud}\",\"configBase\":{},\"secretStore\":{},\"server\":{{\"Listen\":\":3988\",\"provider\":{provider},\"serverKeyPath\":{},\"serverCertificatePath\":{},\"caBasePath\":{},\"signingCAs\":{},\"certNames\":{}}}{}}}",
        q(model.name()),
        q(&config_base),
        q(&secret_store),
        q(&format!("{PKI_DIR}/kops-controller.key")),
        q(&format!("{PKI_DIR}/kops-controller.crt")),
        q(PKI_DIR),
        list(&signing_cas),
        list(&cert_names),
        // IPv6-only clusters: pod ranges come from the instances' IPv6
        // prefixes (kops-controller's cloud IPAM).
        if model.ipv6_only() {
            ",\"enableCloudIPAM\":true"
        } else {
            ""
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addons::tests::golden_cases;
    use crate::security::tests::model;

    /// A bare-metal cluster's configuration is kops 1.37's for
    /// `create cluster --cloud=metal` (no cloud verifier, `pki`).
    #[test]
    fn metal_configuration_is_kops() {
        let cluster: kops_api::Cluster = serde_yaml_ng::from_str(
            "apiVersion: kops.k8s.io/v1alpha2\nkind: Cluster\nmetadata:\n  name: metal.k8s.local\nspec:\n  cloudProvider: metal\n  configBase: /tmp/state/metal.k8s.local\n  subnets:\n  - {name: main, zone: main, type: Public, cidr: 10.0.0.0/16}\n",
        )
        .unwrap();
        let model = Model {
            config_base: "/tmp/state/metal.k8s.local",
            ..Model::of_cluster(&cluster)
        };
        assert_eq!(
            config_json(&model).unwrap(),
            r#"{"clusterName":"metal.k8s.local","cloud":"metal","configBase":"/tmp/state/metal.k8s.local","secretStore":"/tmp/state/metal.k8s.local/secrets","server":{"Listen":":3988","provider":{},"pki":{},"serverKeyPath":"/etc/kubernetes/kops-controller/pki/kops-controller.key","serverCertificatePath":"/etc/kubernetes/kops-controller/pki/kops-controller.crt","caBasePath":"/etc/kubernetes/kops-controller/pki","signingCAs":["kubernetes-ca"],"certNames":["kubelet","kubelet-server","kube-proxy"]}}"#
        );
    }

    /// With kops' `Metal` feature flag at update, an AWS cluster's
    /// controller verifies enrolled machines too (kops adds `pki`).
    #[test]
    fn the_metal_flag_adds_pki_beside_the_cloud() {
        let cluster: kops_api::Cluster = serde_yaml_ng::from_str(
            "apiVersion: kops.k8s.io/v1alpha2\nkind: Cluster\nmetadata:\n  name: a.example.com\nspec:\n  cloudProvider: aws\n  subnets:\n  - {name: us-east-1a, zone: us-east-1a, type: Public, cidr: 10.0.0.0/16}\n",
        )
        .unwrap();
        let inputs = kops_nodeup::config::NodeInputs {
            enrolled_hosts: true,
            ..Default::default()
        };
        let mut model = Model {
            config_base: "s3://b/a.example.com",
            ..Model::of_cluster(&cluster)
        };
        let without = config_json(&model).unwrap();
        assert!(!without.contains(r#""pki":{}"#), "{without}");
        model.node_inputs = Some(&inputs);
        let with = config_json(&model).unwrap();
        assert!(
            with.contains(r#""Region":"us-east-1"}},"pki":{},"serverKeyPath""#),
            "{with}"
        );
    }

    /// The ConfigMap's configuration is kops' in every AWS case.
    #[test]
    fn configuration_is_kops_in_every_case() {
        let mut compared = 0;
        for (case, cluster, groups, theirs) in golden_cases("kops-controller.addons.k8s.io") {
            let model = model(&cluster, &groups);
            let ours = config_json(&model).expect("renders");
            let line = theirs
                .lines()
                .find(|l| l.trim_start().starts_with("{\"clusterName\""))
                .unwrap_or_default()
                .trim();
            assert_eq!(ours, line, "case {case}");
            // The manifest carries it as kops does: the ConfigMap's
            // config.yaml is the JSON itself.
            let manifest = crate::addons::manifest(&model, "kops-controller.addons.k8s.io")
                .unwrap()
                .unwrap();
            assert!(
                manifest.contains(&format!("  config.yaml: |\n    {line}\n")),
                "case {case}:\n{manifest}"
            );
            compared += 1;
        }
        if kops_testkit::shared_dir().is_some() {
            assert!(compared > 30, "only {compared} cases");
        }
    }
}
