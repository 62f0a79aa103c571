//! The API load balancer's names and ports, which the AWS builders
//! (`kops_aws::model::api_load_balancer`) and the addons share.

use std::collections::BTreeMap;

use kops_api::{ClusterSubnetSpec, Role, SubnetType};

use crate::iam::hash6;
use crate::security::{uses_api_load_balancer, ETCD_CILIUM_CLIENT_PORT, KOPS_CONTROLLER_PORT};
use crate::{Model, ModelError};

/// The API port.
pub const API_PORT: i32 = 443;

/// kops' 32-character AWS names for load balancers and target groups:
/// `<prefix>-<cluster with dashes>`, cut to 25 characters, then `-` and a
/// hash of the whole (always added).
pub fn resource_name32(cluster: &str, prefix: &str) -> String {
    let name = format!("{prefix}-{}", cluster.replace('.', "-"));
    let mut base_len = name.len().min(32 - 7);
    while !name.is_char_boundary(base_len) {
        base_len -= 1;
    }
    format!("{}-{}", &name[..base_len], hash6(&name))
}

/// The load balancer task's name (and `Name` tag): `api.<cluster>`.
pub fn load_balancer_name(model: &Model<'_>) -> String {
    model.scoped("api")
}

/// Whether the API is behind a Classic ELB (`class: Classic`, from a
/// cluster kops 1.36 or earlier made).
pub fn uses_classic(model: &Model<'_>) -> bool {
    uses_api_load_balancer(model) && model.cluster.api_load_balancer_class() == Some("Classic")
}

/// The API target group's name.
pub fn target_group_name(model: &Model<'_>) -> String {
    resource_name32(model.name(), "tcp")
}

/// The extra listeners of a cluster without DNS (`dns: None`), whose nodes
/// reach kops-controller (and Cilium's etcd, when Cilium manages one)
/// through the API load balancer: (name prefix, port).
pub fn kops_controller_ports(model: &Model<'_>) -> Vec<(&'static str, i32)> {
    if !model.uses_none_dns() || !uses_api_load_balancer(model) || uses_classic(model) {
        return Vec::new();
    }
    let mut ports = vec![("kops-controller", KOPS_CONTROLLER_PORT)];
    let cilium_etcd = model
        .cluster
        .spec
        .networking
        .as_ref()
        .and_then(|n| n.cilium.as_ref())
        .is_some_and(|c| c.etcd_managed == Some(true));
    if cilium_etcd {
        ports.push(("etcd-cilium", ETCD_CILIUM_CLIENT_PORT));
    }
    ports
}

/// The API's TLS certificate (`spec.api.loadBalancer.sslCertificate`): the
/// balancer then terminates TLS on 443 and passes TCP through on 8443.
pub fn ssl_certificate(model: &Model<'_>) -> Option<String> {
    model
        .cluster
        .spec
        .api
        .as_ref()
        .and_then(|a| a.load_balancer.as_ref())
        .and_then(|lb| lb.ssl_certificate.clone())
        .filter(|c| !c.is_empty())
}

pub fn spec_error(field: &str, message: String, hint: &str) -> ModelError {
    ModelError::Spec {
        path: format!("spec.api.loadBalancer.{field}"),
        message,
        hint: hint.to_string(),
    }
}

/// The subnets the load balancer is placed in: one per zone, of the kinds
/// its type calls for, preferring utility subnets and those of the
/// control plane.
/// A load balancer is dual-stack when every one of its subnets has IPv6.
pub fn all_ipv6(subnets: &[&ClusterSubnetSpec]) -> bool {
    !subnets.is_empty()
        && subnets
            .iter()
            .all(|s| s.ipv6_cidr.as_deref().is_some_and(|c| !c.is_empty()))
}

pub fn subnets<'a>(model: &Model<'a>, internal: bool) -> Vec<&'a ClusterSubnetSpec> {
    let control_plane: Vec<&str> = model
        .groups_with(Role::ControlPlane)
        .flat_map(|g| g.spec.subnets.iter().flatten().map(String::as_str))
        .collect();
    let mut by_zone: BTreeMap<&str, Vec<&ClusterSubnetSpec>> = BTreeMap::new();
    for subnet in model.cluster.spec.subnets.iter().flatten() {
        let fits = match subnet.subnet_type() {
            Some(SubnetType::Public | SubnetType::Utility) => !internal,
            Some(SubnetType::Private | SubnetType::DualStack) => internal,
            None => false,
        };
        if fits {
            by_zone
                .entry(subnet.zone.as_deref().unwrap_or_default())
                .or_default()
                .push(subnet);
        }
    }
    let score = |s: &ClusterSubnetSpec| {
        let mut score = 0;
        if control_plane.contains(&s.name.as_str()) {
            score += 1;
        }
        match s.subnet_type() {
            Some(SubnetType::DualStack) => score += 2,
            Some(SubnetType::Utility) => score += 3,
            _ => {}
        }
        score
    };
    by_zone
        .into_values()
        .filter_map(|candidates| {
            // The first of the best, so the choice is stable.
            let best = candidates.iter().map(|s| score(s)).max()?;
            candidates.into_iter().find(|s| score(s) == best)
        })
        .collect()
}
