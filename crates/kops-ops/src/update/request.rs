//! What `update cluster` is asked and answers, and what every cloud's
//! update shares: the checks a task-graph cloud makes first, progress.

use kops_api::validation;
use kops_engine::{Progress, Report};

use super::options;
use crate::{require_cluster, OpsError, Registry};

/// What `update cluster` was asked to do.
pub struct UpdateRequest {
    pub cluster: String,
    /// Apply (`--yes`) or only compare (the default).
    pub apply: bool,
    /// Reports each task's start, retries and end.
    pub progress: Option<Box<dyn Progress>>,
    /// Which groups, phase and lifecycles; whether a downgrade is allowed.
    pub options: UpdateOptions,
    /// Asks the cluster which Kubernetes version its control plane runs,
    /// given the spec's (the CLI asks its API); `None` with
    /// `--ignore-kubelet-version-skew`. Called only by the updates that use
    /// the answer, to fill [`UpdateOptions::control_plane_running_version`].
    pub running_version: Option<RunningVersion>,
}

/// See [`UpdateRequest::running_version`].
pub type RunningVersion =
    Box<dyn FnOnce(String) -> futures::future::BoxFuture<'static, Option<String>> + Send>;

/// `update cluster`'s choices beyond the cluster (see [`super::options`]).
#[derive(Debug, Clone, Default)]
pub struct UpdateOptions {
    /// `--instance-group`: update only these groups' launch templates and
    /// autoscaling groups (and node configs).
    pub instance_groups: Vec<String>,
    /// `--instance-group-roles`: only the groups of these roles (when no
    /// group is named).
    pub instance_group_roles: Vec<String>,
    /// `--phase`: change only this phase's tasks.
    pub phase: Option<options::Phase>,
    /// `--lifecycle-overrides`: task kind → lifecycle.
    pub lifecycle_overrides: std::collections::BTreeMap<String, kops_engine::Lifecycle>,
    /// `--allow-kops-downgrade`: update a cluster last updated by a newer kops.
    pub allow_kops_downgrade: bool,
    /// The oldest control-plane kubelet's version, as the cluster reports
    /// it (kops' `ControlPlaneRunningVersion`; `None` when it could not be
    /// asked or `--ignore-kubelet-version-skew`): when the spec names
    /// another, groups without an API server keep this one.
    pub control_plane_running_version: Option<String>,
    /// `--vsphere-copy-operator-credentials`: an in-cluster component
    /// without an account of its own gets the operator's (vSphere).
    pub vsphere_copy_operator_credentials: bool,
}

/// What it did.
#[derive(Debug)]
pub struct UpdateOutcome {
    pub report: Report,
    /// API calls made, by `service:Operation` (AWS) or method (Google).
    pub calls: std::collections::BTreeMap<String, u64>,
    /// Whose API the calls went to (`AWS`, `Google Cloud`).
    pub provider: &'static str,
    pub region: String,
    /// How many tasks the model built.
    pub tasks: usize,
    /// The most tasks on one dependency path: with parallel work, the
    /// number of cloud round trips an apply cannot avoid.
    pub longest_chain: usize,
    /// What the user should know about the spec, one line each (a
    /// deprecated Classic API load balancer).
    pub warnings: Vec<String>,
    /// The state-store files whose contents change (a dry run's plan
    /// lists them; with `--yes` they were written), one line each.
    pub state_files: Vec<String>,
    /// Time spent waiting on the cloud's request-rate limits.
    pub limits: kops_engine::LimitWaits,
}

/// What `update cluster` did or would do, in the shape of the cloud's
/// work: a task graph planned or applied (AWS, GCE), or VMs reconciled
/// with the groups' sizes (vSphere, which is not task-graph shaped).
#[derive(Debug)]
pub enum Updated {
    Tasks(UpdateOutcome),
    Vms(crate::vsphere::VsphereUpdate),
}

/// What every task-graph cloud's update checks first: the control plane's
/// running version (when asked), the spec and its groups valid, and no
/// downgrade from a newer kops. Answers the stored spec and its groups.
pub(crate) async fn prepare(
    registry: &Registry,
    request: &mut UpdateRequest,
) -> Result<(kops_api::Cluster, Vec<kops_api::InstanceGroup>), OpsError> {
    if let Some(ask) = request.running_version.take() {
        let spec = require_cluster(registry, &request.cluster).await?;
        if let Some(version) = spec.spec.kubernetes_version {
            request.options.control_plane_running_version = ask(version).await;
        }
    }
    let cluster = require_cluster(registry, &request.cluster).await?;
    let groups = registry.list_instance_groups(&request.cluster).await?;
    validation::validate_all(&cluster, &groups)?;
    let opts = &request.options;
    if !opts.allow_kops_downgrade {
        let last = registry
            .store()
            .read(&format!("{}/kops-version.txt", request.cluster))
            .await
            .map_err(|e| OpsError::Registry(e.into()))?;
        let last = last.map(|b| String::from_utf8_lossy(&b).into_owned());
        options::check_downgrade(last.as_deref(), kops_api::KOPS_VERSION)?;
    }
    Ok((cluster, groups))
}

pub(crate) struct BoxedProgress(pub(crate) Box<dyn Progress>);

impl Progress for BoxedProgress {
    fn event(&self, event: &kops_engine::ProgressEvent<'_>) {
        self.0.event(event)
    }
}
