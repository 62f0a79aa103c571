//! What a cluster's spec says of its cloud: the region, the project.

use kops_api::Cluster;

use crate::OpsError;

/// `--external` on a cloud other than AWS (which [`super::external`]
/// never picks): the refusal kops' `--external` would give.
pub(crate) fn external_is_aws(store: &str) -> OpsError {
    crate::flag_error(
        "--external",
        "--external finds a cluster's resources on AWS only, as kops' does",
        &format!("delete the cluster from the state store that holds its spec: `kops delete cluster NAME --state {store}`, without --external"),
    )
}

/// An AWS cluster's region: the region of its subnets' zones.
pub fn aws_region(cluster: &kops_api::Cluster) -> Result<String, OpsError> {
    cluster.aws_region().ok_or_else(|| OpsError::CannotApply {
        cluster: cluster.name().to_string(),
        reason: "its subnets name no AWS availability zone".into(),
    })
}

/// The cluster's Google Cloud project (`spec.project`), required on GCE.
pub fn gce_project(cluster: &kops_api::Cluster) -> Result<String, OpsError> {
    cluster
        .spec
        .project
        .clone()
        .filter(|p| !p.is_empty())
        .ok_or_else(|| OpsError::CannotApply {
            cluster: cluster.name().to_string(),
            reason:
                "spec.project is not set; set it to the Google Cloud project the cluster lives in"
                    .into(),
        })
}

/// A GCE cluster's region: `subnets[].region`, else the region of a
/// subnet's zone.
pub fn gce_region(cluster: &Cluster) -> Result<String, OpsError> {
    let subnets = cluster.spec.subnets.iter().flatten();
    subnets
        .clone()
        .find_map(|s| s.region.clone().filter(|r| !r.is_empty()))
        .or_else(|| {
            subnets
                .filter_map(|s| s.zone.as_deref())
                .find_map(kops_api::zones::gce_region)
        })
        .ok_or_else(|| OpsError::CannotApply {
            cluster: cluster.name().to_string(),
            reason: "its subnets name no GCE region (spec.subnets[].region)".into(),
        })
}
