//! The AWS VPC CNI (`networking.amazon-vpc-routed-eni`): the `aws-node`
//! DaemonSet (ipamd and the network policy agent) giving pods addresses of
//! the VPC's subnets on the nodes' ENIs, its RBAC and the `ENIConfig` CRD.
//!
//! The manifest is kops' own (`amazon_vpc/manifest.yaml`). ipamd's
//! environment is kops': the AWS chart's defaults, the spec's `env` over
//! them, then the address family and the tags of the ENIs it creates
//! (`KubernetesCluster` and the cluster's ownership tag), sorted by name.
//! kops inserts an `env` value into a double-quoted YAML string; kops-rs
//! inserts it as is, the same for values without `\` or `"`.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::networking::{at, selinux, spec, text};
use super::{template, TemplateError};
use crate::Model;

/// The images kops deploys when the spec names none (CNI release v1.23.0).
const IMAGE: &str = "602401143452.dkr.ecr.us-west-2.amazonaws.com/amazon-k8s-cni:v1.23.0";
const INIT_IMAGE: &str = "602401143452.dkr.ecr.us-west-2.amazonaws.com/amazon-k8s-cni-init:v1.23.0";
const NETWORK_POLICY_AGENT_IMAGE: &str =
    "602401143452.dkr.ecr.us-west-2.amazonaws.com/amazon/aws-network-policy-agent:v1.4.1";

/// ipamd's settings kops starts from: the AWS chart's values.
const DEFAULT_ENV: &[(&str, &str)] = &[
    ("ADDITIONAL_ENI_TAGS", "{}"),
    ("AWS_VPC_CNI_NODE_PORT_SUPPORT", "true"),
    ("AWS_VPC_ENI_MTU", "9001"),
    ("AWS_VPC_K8S_CNI_CONFIGURE_RPFILTER", "false"),
    ("AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG", "false"),
    ("AWS_VPC_K8S_CNI_EXTERNALSNAT", "false"),
    (
        "AWS_VPC_K8S_CNI_LOG_FILE",
        "/host/var/log/aws-routed-eni/ipamd.log",
    ),
    ("AWS_VPC_K8S_CNI_LOGLEVEL", "DEBUG"),
    ("AWS_VPC_K8S_CNI_RANDOMIZESNAT", "prng"),
    ("AWS_VPC_K8S_CNI_VETHPREFIX", "eni"),
    (
        "AWS_VPC_K8S_PLUGIN_LOG_FILE",
        "/var/log/aws-routed-eni/plugin.log",
    ),
    ("AWS_VPC_K8S_PLUGIN_LOG_LEVEL", "DEBUG"),
    ("DISABLE_INTROSPECTION", "false"),
    ("DISABLE_METRICS", "false"),
    ("ENABLE_POD_ENI", "false"),
    ("ENABLE_PREFIX_DELEGATION", "false"),
    ("ENABLE_SUBNET_DISCOVERY", "true"),
    ("NETWORK_POLICY_ENFORCING_MODE", "standard"),
    ("WARM_ENI_TARGET", "1"),
    ("WARM_PREFIX_TARGET", "1"),
    ("DISABLE_NETWORK_RESOURCE_PROVISIONING", "false"),
];

/// The addon's objects; `None` when the cluster does not run the VPC CNI.
pub(super) fn objects(model: &Model<'_>) -> Result<Option<Vec<Value>>, TemplateError> {
    let spec = spec(model);
    let Some(vpc) = at(&spec, &["networking", "amazonvpc"]) else {
        return Ok(None);
    };
    let env = env(model, vpc);
    let context = json!({
        "image": text(vpc, &["imageName"]).unwrap_or(IMAGE),
        "init_image": text(vpc, &["initImageName"]).unwrap_or(INIT_IMAGE),
        "network_policy_agent_image": text(vpc, &["networkPolicyAgentImage"])
            .unwrap_or(NETWORK_POLICY_AGENT_IMAGE),
        // kops tests the value for being non-empty, so "false" counts.
        "annotate_pod_ip": env.get("ANNOTATE_POD_IP").is_some_and(|v| !v.is_empty()),
        "env": env.into_iter().collect::<Vec<_>>(),
        "ipv6_only": model.ipv6_only(),
        "cluster_name": model.name(),
        "selinux": selinux(&spec),
    });
    template::render(
        "networking.amazon-vpc-routed-eni",
        include_str!("amazon_vpc/manifest.yaml"),
        &context,
    )
    .map(Some)
}

/// ipamd's environment by name, as kops builds it.
fn env(model: &Model<'_>, vpc: &Value) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = DEFAULT_ENV
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    for var in at(vpc, &["env"])
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(name) = var.get("name").and_then(Value::as_str) {
            let value = var.get("value").and_then(Value::as_str).unwrap_or_default();
            env.insert(name.to_string(), value.to_string());
        }
    }
    let ipv6_only = model.ipv6_only();
    env.insert("ENABLE_IPv4".into(), (!ipv6_only).to_string());
    env.insert("ENABLE_IPv6".into(), ipv6_only.to_string());
    if ipv6_only {
        env.insert("ENABLE_PREFIX_DELEGATION".into(), "true".into());
        env.insert("WARM_PREFIX_TARGET".into(), "1".into());
    }
    let name = model.name();
    env.insert(
        "ADDITIONAL_ENI_TAGS".into(),
        json!({"KubernetesCluster": name, format!("kubernetes.io/cluster/{name}"): "owned"})
            .to_string(),
    );
    env
}

#[cfg(test)]
mod tests {
    use super::super::manifest;
    use crate::addons::tests::{cluster, compare_golden};
    use crate::security::tests::model;

    const KEY: &str = "networking.amazon-vpc-routed-eni";

    #[test]
    fn identical_to_kops_in_every_golden_case() {
        let (identical, placeholders) = compare_golden(KEY, |_, _| {});
        assert_eq!(placeholders, 0);
        if kops_testkit::shared_dir().is_some() {
            assert!(identical >= 2, "{identical} golden cases");
        }
    }

    #[test]
    fn env_and_images_come_from_the_spec() {
        let (mut cluster, groups) = cluster();
        let networking = cluster.spec.networking.get_or_insert_with(Default::default);
        networking.cni = None;
        networking.amazonvpc = Some(
            serde_json::from_value(serde_json::json!({
                "env": [
                    {"name": "WARM_IP_TARGET", "value": "10"},
                    {"name": "AWS_VPC_ENI_MTU", "value": "1500"},
                    {"name": "ANNOTATE_POD_IP", "value": "true"},
                ],
            }))
            .unwrap(),
        );
        let text = manifest(&model(&cluster, &groups), KEY).unwrap().unwrap();
        assert!(text.contains("- name: WARM_IP_TARGET\n          value: \"10\"\n"));
        assert!(text.contains("- name: AWS_VPC_ENI_MTU\n          value: \"1500\"\n"));
        assert!(!text.contains("value: \"9001\""));
        assert!(text.contains("  - patch\n"), "pods may be annotated");
        assert!(text.contains("amazon-k8s-cni:v1.23.0\n"));
        for document in text.split("\n---\n") {
            assert!(document.contains("    role.kubernetes.io/networking: \"1\"\n"));
        }
    }
}
