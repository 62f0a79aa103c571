//! What can go wrong validating or rolling a cluster, each with what to do.

/// An error of `validate cluster` or `rolling-update cluster`.
#[derive(Debug, thiserror::Error)]
pub enum RollError {
    #[error(transparent)]
    Ops(#[from] kops_ops::OpsError),

    #[error(transparent)]
    Cloud(#[from] kops_cloud::CloudError),

    #[error("cluster `{cluster}` has no instance groups\nhint: `kops create instancegroup NAME --name {cluster}` adds one")]
    NoInstanceGroups { cluster: String },

    #[error("cannot load the kubeconfig{}: {message}\nhint: run `kops export kubeconfig {cluster} --admin`, or pass --kubeconfig FILE (or set KUBECONFIG); --cloudonly rolls without the Kubernetes API", path.as_deref().map(|p| format!(" `{p}`")).unwrap_or_default())]
    Kubeconfig {
        cluster: String,
        path: Option<String>,
        message: String,
    },

    #[error("Kubernetes API: {operation} `{object}` failed: {message}\nhint: check that the API server answers (`kubectl get nodes`) and that the kubeconfig's context is this cluster's; --cloudonly rolls without the Kubernetes API")]
    KubeApi {
        operation: &'static str,
        object: String,
        message: String,
    },

    #[error("instance group `{name}` not found in cluster `{cluster}`\nhint: `kops get instancegroups --name {cluster}` lists them")]
    InstanceGroupNotFound { cluster: String, name: String },

    #[error("invalid instance group role `{role}`\nhint: use one of control-plane, node, bastion, apiserver")]
    InvalidRole { role: String },

    #[error("failed to drain node `{node}`: {} pod(s) still there after --drain-timeout {timeout}: {}\n{reason}\nhint: a PodDisruptionBudget may forbid the eviction; check `kubectl get pdb -A`, raise --drain-timeout, or pass --fail-on-drain-error=false to terminate the node anyway", .pods.len(), .pods.join(", "), timeout = humantime_secs(*.timeout))]
    DrainTimeout {
        node: String,
        pods: Vec<String>,
        reason: String,
        timeout: std::time::Duration,
    },

    #[error("error validating cluster{operation}: cluster did not validate within {}: {last}\nhint: `kops validate cluster` shows what is wrong; raise --validation-timeout, or pass --fail-on-validate-error=false to continue anyway", humantime_secs(*.timeout))]
    ValidationTimeout {
        operation: String,
        timeout: std::time::Duration,
        last: String,
    },

    #[error("replacement for instance `{instance}` in group `{group}` did not come into service within {}\nhint: check the group's activity (`aws autoscaling describe-scaling-activities --auto-scaling-group-name {group}`)", humantime_secs(*.timeout))]
    ReplacementTimeout {
        group: String,
        instance: String,
        timeout: std::time::Duration,
    },

    #[error("{} not healthy after update, stopping rolling-update: {source}", .what)]
    Stopped {
        what: &'static str,
        #[source]
        source: Box<RollError>,
    },

    #[error("{} instance group(s) failed to roll:\n{}", .0.len(), .0.iter().map(|(g, e)| format!("- {g}: {}", e.to_string().replace('\n', "\n  "))).collect::<Vec<_>>().join("\n"))]
    Groups(Vec<(String, RollError)>),
}

impl RollError {
    /// Stops a roll at once (kops: a validation timeout ends the roll of
    /// every later group too).
    pub fn stops_the_roll(&self) -> bool {
        matches!(self, RollError::ValidationTimeout { .. })
    }

    pub(crate) fn kube(
        operation: &'static str,
        object: impl Into<String>,
        err: impl std::fmt::Display,
    ) -> Self {
        RollError::KubeApi {
            operation,
            object: object.into(),
            message: err.to_string(),
        }
    }
}

fn humantime_secs(d: std::time::Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 60.0 && (s % 60.0) == 0.0 {
        format!("{}m", s as u64 / 60)
    } else if s.fract() == 0.0 {
        format!("{}s", s as u64)
    } else {
        format!("{s:.1}s")
    }
}
