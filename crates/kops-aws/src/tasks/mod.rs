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

pub mod vpc;

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
