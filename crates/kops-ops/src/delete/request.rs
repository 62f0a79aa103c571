//! What `delete cluster` is asked and answers.

use std::time::Duration;

use kops_aws::delete::{DeleteReport, Resource};

/// Receives each resource deleted (`None`) or still blocked (`Some(reason)`).
pub type DeleteProgress = dyn Fn(&Resource, Option<&str>) + Send + Sync;

/// What `delete cluster` was asked to do.
pub struct DeleteRequest {
    pub cluster: String,
    pub yes: bool,
    /// The region, when the state store no longer has the cluster's spec.
    pub region: Option<String>,
    /// `--external`: a cluster the state store does not hold; its
    /// resources are found by their `KubernetesCluster` tag in `region`,
    /// and the state store is not touched. As in kops, this is AWS only:
    /// kops' `--external` always builds an AWS client from `--region`
    /// (there is no Google Cloud path: nothing would name the project),
    /// so a Google Cloud region is refused at once.
    pub external: bool,
    /// Passes over the remaining resources before giving up.
    pub passes: u32,
    pub interval: Duration,
    /// Called per resource deleted (`None`) or still blocked (`Some(reason)`).
    pub progress: Box<DeleteProgress>,
}

/// What was found (and, with `--yes`, deleted).
#[derive(Debug)]
pub struct DeleteOutcome {
    pub resources: Vec<Resource>,
    /// State-store keys of the cluster.
    pub state_keys: Vec<String>,
    pub report: Option<DeleteReport>,
    /// The cloud calls made, as one phrase (`42 AWS calls`).
    pub calls: String,
    /// Time spent waiting on the cloud's request-rate limits.
    pub limits: kops_engine::LimitWaits,
}
