//! A group's names, tags and defaults, its node configs and user data:
//! what the builders of each cloud (`kops_aws::model::compute`,
//! `kops_gce::model::compute`) and the addons share.

use std::collections::BTreeMap;

use kops_api::{InstanceGroup, Role};

use crate::tags::Tags;
use crate::{Model, ModelError};

/// Root volume sizes (GiB) kops uses when a group sets none.
pub const DEFAULT_ROOT_VOLUME_SIZE_CONTROL_PLANE: i32 = 64;
pub const DEFAULT_ROOT_VOLUME_SIZE_NODE: i32 = 128;
pub const DEFAULT_ROOT_VOLUME_SIZE_BASTION: i32 = 32;
pub const DEFAULT_VOLUME_TYPE: &str = "gp3";
pub const DEFAULT_GP3_IOPS: i32 = 3000;
pub const DEFAULT_GP3_THROUGHPUT: i32 = 125;
pub const DEFAULT_IO_IOPS: i32 = 100;
/// etcd volume size (GiB) when a member sets none.
pub const DEFAULT_ETCD_VOLUME_SIZE: i32 = 20;

/// The tag prefix of the cluster-autoscaler's node-template labels.
pub const TAG_NODE_TEMPLATE_LABEL: &str = "k8s.io/cluster-autoscaler/node-template/label/";
/// The tag prefix of the cluster-autoscaler's node-template taints.
pub const TAG_NODE_TEMPLATE_TAINT: &str = "k8s.io/cluster-autoscaler/node-template/taint/";
/// The tag prefix of an instance's role (`k8s.io/role/node: 1`).
pub const TAG_ROLE_PREFIX: &str = "k8s.io/role/";
/// The tag naming an instance's group.
pub const TAG_INSTANCE_GROUP: &str = "kops.k8s.io/instancegroup";
/// The tag prefix of etcd volumes (`k8s.io/etcd/main: <member>/<members>`).
pub const TAG_ETCD_PREFIX: &str = "k8s.io/etcd/";
/// The node-termination-handler's default managed-ASG tag.
pub const DEFAULT_NTH_MANAGED_TAG: &str = "aws-node-termination-handler/managed";

/// The groups kops runs as autoscaling groups: all but those Karpenter manages.
pub fn cloud_groups<'a>(model: &Model<'a>) -> impl Iterator<Item = &'a InstanceGroup> {
    model
        .groups
        .iter()
        .filter(|g| g.spec.manager.as_deref() != Some("Karpenter"))
}

/// The name of a group's launch template and autoscaling group.
pub fn group_name(model: &Model<'_>, group: &InstanceGroup) -> String {
    match group.role() {
        Some(Role::ControlPlane) => format!("{}.masters.{}", group.name(), model.name()),
        Some(Role::ApiServer) => format!("{}.apiservers.{}", group.name(), model.name()),
        _ => format!("{}.{}", group.name(), model.name()),
    }
}

pub fn spec_error(index: usize, field: &str, message: String, hint: &str) -> ModelError {
    ModelError::Spec {
        path: format!("instanceGroups[{index}].spec.{field}"),
        message,
        hint: hint.to_string(),
    }
}

/// The tags of a group's instances (and of its template and ASG).
pub fn group_tags(model: &Model<'_>, group: &InstanceGroup, role: Role) -> Tags {
    let name = group_name(model, group);
    let mut tags = model.tags(&name, &[]);
    for (k, v) in group.spec.cloud_labels.iter().flatten() {
        tags.insert(k.clone(), v.clone());
    }
    let nth = model.cluster.spec.node_termination_handler.as_ref();
    if crate::nth_queue_mode(model.cluster) {
        let key = nth
            .and_then(|n| n.managed_asg_tag.clone())
            .unwrap_or_else(|| DEFAULT_NTH_MANAGED_TAG.to_string());
        if !key.is_empty() {
            tags.entry(key).or_default();
        }
    }
    for (k, v) in node_labels(group, role) {
        tags.insert(format!("{TAG_NODE_TEMPLATE_LABEL}{k}"), v);
    }
    for taint in group.spec.taints.iter().flatten() {
        if let Some((key, value, effect)) = parse_taint(taint) {
            tags.insert(
                format!("{TAG_NODE_TEMPLATE_TAINT}{key}"),
                format!("{value}:{effect}"),
            );
        }
    }
    let roles: &[&str] = match role {
        Role::ControlPlane => &["master", "control-plane"],
        Role::ApiServer => &["apiserver"],
        Role::Node => &["node"],
        Role::Bastion => &["bastion"],
    };
    for r in roles {
        tags.insert(format!("{TAG_ROLE_PREFIX}{r}"), "1".to_string());
    }
    tags.insert(TAG_INSTANCE_GROUP.to_string(), group.name().to_string());
    tags
}

/// The Kubernetes labels a group's nodes get: the role's own, then the
/// group's `nodeLabels`.
fn node_labels(group: &InstanceGroup, role: Role) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    let own: &[&str] = match role {
        Role::ControlPlane => &[
            "node-role.kubernetes.io/control-plane",
            "node.kubernetes.io/exclude-from-external-load-balancers",
            "kops.k8s.io/kops-controller-pki",
        ],
        Role::ApiServer => &["node-role.kubernetes.io/api-server"],
        Role::Node => &["node-role.kubernetes.io/node"],
        Role::Bastion => &[],
    };
    for k in own {
        labels.insert((*k).to_string(), String::new());
    }
    labels.extend(group.node_labels());
    labels
}

/// `key=value:Effect` or `key:Effect` as (key, value, effect); `None`
/// without an effect.
pub fn parse_taint(taint: &str) -> Option<(String, String, String)> {
    let (rest, effect) = taint.rsplit_once(':')?;
    if effect.is_empty() {
        return None;
    }
    let (key, value) = rest.split_once('=').unwrap_or((rest, ""));
    Some((key.to_string(), value.to_string(), effect.to_string()))
}

/// A Go duration (`48h20m`, `0`, `90s`) in seconds.
pub fn parse_go_duration(text: &str) -> Option<i64> {
    let text = text.trim();
    if text == "0" {
        return Some(0);
    }
    let mut seconds = 0f64;
    let mut rest = text;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let factor = match &rest[..unit_len] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 0.001,
            "us" | "µs" => 0.000_001,
            "ns" => 0.000_000_001,
            _ => return None,
        };
        seconds += number * factor;
        rest = &rest[unit_len..];
    }
    Some(seconds.round() as i64)
}

/// The user data of a group's instances: kops-rs' node bootstrap script
/// (download nodeup from its mirrors with a sha256 check, write the boot
/// config carrying the hash of the group's node config, run nodeup).
pub fn user_data(
    model: &Model<'_>,
    index: usize,
    group: &InstanceGroup,
) -> Result<String, ModelError> {
    // The boot config names the config base as kops writes the path it
    // parsed: bare for a local directory. (Enrolment writes kops' own
    // literal `file://` URL instead, as kops' toolbox enroll does.)
    kops_nodeup::bootstrap::user_data_with(
        model.cluster,
        group,
        &kops_api::store_path::written(model.config_base),
        &model.node_inputs(),
    )
    .map_err(|e| node_config_error(index, e))
}

/// Every group's node config as `update cluster --yes` stores it
/// (`igconfig/<role>/<group>/nodeupconfig.yaml` under the config base): the
/// same configs whose hashes the user data carries. Bastions have none.
pub fn node_configs(
    model: &Model<'_>,
) -> Result<Vec<kops_nodeup::RenderedNodeupConfig>, ModelError> {
    let mut out = Vec::new();
    for (index, group) in model.groups.iter().enumerate() {
        if group.spec.manager.as_deref() == Some("Karpenter") {
            continue;
        }
        if let Some(rendered) = kops_nodeup::config::rendered_with_inputs(
            model.cluster,
            group,
            model.config_base,
            &model.node_inputs(),
        )
        .map_err(|e| node_config_error(index, e))?
        {
            out.push(rendered);
        }
    }
    Ok(out)
}

fn node_config_error(index: usize, error: kops_nodeup::config::ConfigError) -> ModelError {
    let text = error.to_string();
    let (message, hint) = text.split_once("\nhint: ").unwrap_or((&text, ""));
    ModelError::Spec {
        path: format!("instanceGroups[{index}]"),
        message: message.to_string(),
        hint: hint.to_string(),
    }
}

pub fn to_i32(index: usize, field: &str, value: i64) -> Result<i32, ModelError> {
    i32::try_from(value).map_err(|_| {
        spec_error(
            index,
            field,
            format!("`{value}` is out of range"),
            "use a smaller value",
        )
    })
}

/// `spec.maxPrice`, the most the group pays per spot instance hour. kops
/// types it as text; a number written unquoted is read as its text.
pub fn max_price(group: &InstanceGroup) -> Option<String> {
    match group.spec.extra.get("maxPrice")? {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}
