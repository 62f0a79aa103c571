//! What kops' networking addons (flannel, kindnet, kopeio, the AWS VPC CNI,
//! Calico) read from the cluster beyond their own `spec.networking` block:
//! the cluster's ranges with kops' defaults and containerd's SELinux switch.

use serde_json::Value;

use crate::Model;

/// The cluster spec as JSON, so the templates' contexts read the spec's
/// v1alpha2 fields by name, including those kops-api keeps as extras.
pub(super) fn spec(model: &Model<'_>) -> Value {
    serde_json::to_value(&model.cluster.spec).unwrap_or(Value::Null)
}

/// The value at `path` (field names), when set and not null.
pub(super) fn at<'v>(value: &'v Value, path: &[&str]) -> Option<&'v Value> {
    let mut value = value;
    for key in path {
        value = value.get(*key)?;
    }
    (!value.is_null()).then_some(value)
}

/// The string at `path`, when set and not empty.
pub(super) fn text<'v>(value: &'v Value, path: &[&str]) -> Option<&'v str> {
    at(value, path)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// `spec.nonMasqueradeCIDR`, kops' default `100.64.0.0/10` when unset.
pub(super) fn non_masquerade_cidr(model: &Model<'_>) -> String {
    model
        .cluster
        .spec
        .non_masquerade_cidr
        .clone()
        .unwrap_or_else(|| "100.64.0.0/10".to_string())
}

/// `spec.podCIDR`, else kops' default for an IPv4 cluster: the upper half
/// of `nonMasqueradeCIDR`. None for an IPv6-only cluster without one.
pub(super) fn pod_cidr(model: &Model<'_>) -> Option<String> {
    if let Some(cidr) = &model.cluster.spec.pod_cidr {
        return Some(cidr.clone());
    }
    non_masquerade_cidr(model)
        .parse::<ipnet::Ipv4Net>()
        .ok()
        .and_then(|net| net.subnets(net.prefix_len() + 1).ok()?.nth(1))
        .map(|half| half.to_string())
}

/// `spec.serviceClusterIPRange`, else kops' default for the address family.
pub(super) fn service_cluster_ip_range(model: &Model<'_>) -> String {
    match &model.cluster.spec.service_cluster_ip_range {
        Some(range) => range.clone(),
        None if model.ipv6_only() => "fd00:5e4f:ce::/108".to_string(),
        None => "100.64.0.0/13".to_string(),
    }
}

/// `spec.containerd.seLinuxEnabled`: the CNI's containers then run with
/// the `spc_t` SELinux type.
pub(super) fn selinux(spec: &Value) -> bool {
    at(spec, &["containerd", "seLinuxEnabled"])
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// The cloud provider's name: `spec.cloudProvider` as a string or as the
/// one key of its object form (`cloudProvider: {aws: {}}`).
pub(super) fn cloud_provider(spec: &Value) -> Option<&str> {
    match at(spec, &["cloudProvider"])? {
        Value::String(name) => Some(name),
        Value::Object(map) => map.keys().next().map(String::as_str),
        _ => None,
    }
}

/// Labels the pod templates of an addon's Deployments and DaemonSets
/// `kops.k8s.io/managed-by: kops`, as kops does for every addon.
pub(super) fn label_pods(objects: &mut [Value]) {
    for object in objects {
        let workload = object.get("apiVersion").and_then(Value::as_str) == Some("apps/v1")
            && matches!(
                object.get("kind").and_then(Value::as_str),
                Some("Deployment" | "DaemonSet")
            );
        if !workload {
            continue;
        }
        let metadata = object
            .pointer_mut("/spec/template/metadata")
            .and_then(Value::as_object_mut);
        if let Some(metadata) = metadata {
            let labels = metadata
                .entry("labels")
                .or_insert_with(|| Value::Object(Default::default()));
            if let Some(labels) = labels.as_object_mut() {
                labels.insert("kops.k8s.io/managed-by".into(), "kops".into());
            }
        }
    }
}
