//! AWS tasks: one module per resource type, each implementing
//! [`kops_engine::Task`] over [`crate::AwsContext`]. Conventions:
//!
//! - `find` looks the object up in the context's batched discovery (one
//!   Describe per type and run) by its `Name` tag; a shared object (an
//!   existing VPC or subnet named by id) is described by id and never changed.
//! - `diff` compares typed fields; tags are compared only on the keys the
//!   task sets, so tags added by others do not cause endless changes.
//! - AWS errors go through [`crate::context::classify`], so throttling and
//!   eventual consistency are retried by the executor.

pub mod autoscaling_group;
pub mod classic_load_balancer;
pub mod dhcp_options;
pub mod dns_name;
pub mod ebs_volume;
pub mod ec2;
pub mod egress_only_internet_gateway;
pub mod elastic_ip;
pub mod eventbridge;
pub mod hosted_zone_association;
pub mod iam_instance_profile;
pub mod iam_oidc_provider;
pub mod iam_role;
pub mod iam_role_policy;
pub mod iam_role_policy_attachment;
pub mod iam_service_account_role;
pub mod internet_gateway;
pub mod launch_template;
pub mod lifecycle_hook;
pub mod listener;
pub mod nat_gateway;
pub mod network_load_balancer;
pub mod policy_document;
pub mod route;
pub mod route_table;
pub mod route_table_association;
pub mod security_group;
pub mod security_group_cleanup;
pub mod security_group_rule;
pub mod shared_security_group;
pub mod sqs_queue;
pub mod ssh_key;
pub mod subnet;
pub mod target_group;
pub mod vpc;
pub mod vpc_amazon_ipv6_cidr_block;
pub mod vpc_cidr_block;
pub mod vpc_dhcp_options_association;

use crate::context::Tags;

/// The subset of `actual` tags that `expected` manages.
pub fn managed_tags(actual: &Tags, expected: &Tags) -> Tags {
    actual
        .iter()
        .filter(|(k, _)| expected.contains_key(*k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Tags to (re)write: the expected ones that are missing or differ.
pub fn tags_to_write(actual: &Tags, expected: &Tags) -> Tags {
    expected
        .iter()
        .filter(|(k, v)| actual.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}
