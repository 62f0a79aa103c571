//! The IAM names kops derives from the spec (roles, instance profiles),
//! the region and partition, which the AWS builders
//! (`kops_aws::model::iam`: roles, policies, profiles) and the addons share.

pub mod irsa;
pub mod shared_profile;

use kops_api::{InstanceGroup, Role};
use serde_json::Value;

use crate::{Model, ModelError};

/// IAM's limit on role (and instance profile) names.
pub const MAX_ROLE_NAME: usize = 64;

/// The region of the cluster's first subnet: its `region` (Google Cloud),
/// else the AWS region of its zone (`us-east-1a` → `us-east-1`, a Local
/// Zone's parent region), else the zone's name as it is.
pub fn region(model: &Model<'_>) -> Option<String> {
    let subnet = model.cluster.spec.subnets.iter().flatten().next()?;
    if let Some(region) = &subnet.region {
        return Some(region.clone());
    }
    let zone = subnet.zone.as_deref()?;
    Some(kops_api::zones::aws_region(zone).unwrap_or_else(|| zone.to_string()))
}

/// The AWS partition a region belongs to (`aws`, `aws-cn`, `aws-us-gov`),
/// the second field of its ARNs.
pub fn partition(region: &str) -> &'static str {
    if region.starts_with("cn-") {
        "aws-cn"
    } else if region.starts_with("us-gov-") {
        "aws-us-gov"
    } else {
        "aws"
    }
}
/// The hosted zone dns-controller writes to: `spec.dnsZone` as an id, as
/// `update cluster` resolves it before applying. A zone known only by name
/// (an offline render) is given by its name, as the API records are, and
/// the renderers look its id up (`data "aws_route53_zone"`, or a stack
/// parameter). `None` without DNS records (gossip, `dns: None`).
pub fn hosted_zone_id(model: &Model<'_>) -> Option<String> {
    if !model.publishes_dns_records() {
        return None;
    }
    let zone = crate::dns::zone(model);
    let zone = zone
        .trim_start_matches('/')
        .trim_start_matches("hostedzone/");
    Some(zone.to_string())
}

/// The key of a role in `spec.additionalPolicies` / `spec.externalPolicies`
/// and the prefix of its IAM names.
pub fn role_names(role: Role) -> (&'static str, &'static [&'static str]) {
    match role {
        Role::ControlPlane => ("masters", &["control-plane", "master"]),
        Role::ApiServer => ("apiservers", &["apiserver"]),
        Role::Node => ("nodes", &["node"]),
        Role::Bastion => ("bastions", &["bastion"]),
    }
}

/// The IAM role / instance profile name of a role: `masters.<cluster>`...,
/// shortened to IAM's limit the way kops does (`-` and a hash of the full name).
pub fn iam_name(model: &Model<'_>, role: Role) -> String {
    truncate_with_hash(&model.scoped(role_names(role).0), MAX_ROLE_NAME)
}

pub use kops_api::names::{hash6, truncate_with_hash};

/// The roles kops-rs makes an IAM role and instance profile for: those
/// with a group that names no existing profile, in a stable order.
pub fn roles_in_use(model: &Model<'_>) -> Vec<Role> {
    let mut roles: Vec<Role> = Role::ALL
        .into_iter()
        .filter(|r| {
            model
                .groups_with(*r)
                .any(|g| custom_profile_arn(g).is_none())
        })
        .collect();
    roles.sort();
    roles
}

/// `spec.iam.profile` of a group: the ARN of an existing instance profile.
pub fn custom_profile_arn(group: &InstanceGroup) -> Option<&str> {
    group
        .spec
        .extra
        .get("iam")
        .and_then(|i| i.get("profile"))
        .and_then(Value::as_str)
        .filter(|a| !a.is_empty())
}

/// The instance profile a group's instances run with: the one its
/// `spec.iam.profile` names, else the one kops-rs makes for its role.
pub fn instance_profile_name(
    model: &Model<'_>,
    index: usize,
    group: &InstanceGroup,
    role: Role,
) -> Result<String, ModelError> {
    match custom_profile_arn(group) {
        None => Ok(iam_name(model, role)),
        Some(arn) => shared_profile::profile_name_from_arn(arn)
            .map(str::to_string)
            .ok_or_else(|| ModelError::Spec {
                path: format!("instanceGroups[{index}].spec.iam.profile"),
                message: format!("`{arn}` is not an instance profile's ARN"),
                hint: "write the profile's ARN, e.g. `arn:aws:iam::123456789012:instance-profile/KopsExampleRole`".into(),
            }),
    }
}
