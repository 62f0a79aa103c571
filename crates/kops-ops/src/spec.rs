//! The completed spec (`cluster-completed.spec`) the use cases write and
//! read, from kops-api's populate step.

/// The populated spec kops writes beside the user's
/// (`cluster-completed.spec`): every default kops' populate step derives,
/// filled in by [`kops_api::populate`]. The hosted zone is whatever
/// `cluster` names (update passes the one it looked up); the API's
/// DNS-or-load-balancer choice is made from the subnets, as the instance
/// groups are not at hand here.
pub fn completed_spec(cluster: &kops_api::Cluster, config_base: &str) -> kops_api::Cluster {
    kops_api::populate::completed_spec(
        cluster,
        &kops_api::populate::PopulateOptions {
            config_base,
            ..Default::default()
        },
    )
}
