//! `kops delete instance ID|NODE`: replace one instance as kops' single-instance
//! update does (detach for surge, drain, terminate, wait, validate).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::Args;
use kops_roll::{CloudGroup, InstanceStatus, Kubernetes};

use crate::args::{bool_flag, parse_duration, GlobalArgs, KubeApiFlags};
use crate::context::{cluster_name, state};
use crate::kubeconfig::kubeconfig_for;
use crate::live::live_instances;
use crate::output::{print, status};

#[derive(Debug, Args)]
pub struct DeleteInstanceArgs {
    /// The instance's id (`i-...` on AWS, its name on GCE) or its node's name.
    #[arg(value_name = "INSTANCE|NODE")]
    pub target: String,
    /// Delete it (otherwise only say what would happen).
    #[arg(short = 'y', long)]
    pub yes: bool,
    /// Detach the instance from its group first, so the group launches the
    /// replacement before the instance goes (default true, as kops; never
    /// for control-plane instances).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value = "true", value_parser = bool_flag, value_name = "BOOL")]
    pub surge: bool,
    /// Do not use the Kubernetes API: no node lookup, drain or validation.
    #[arg(long)]
    pub cloudonly: bool,
    /// Maximum time to wait for the cluster to validate (and for the replacement).
    #[arg(long, default_value = "15m", value_parser = parse_duration, value_name = "DURATION")]
    pub validation_timeout: Duration,
    /// Consecutive successful validations required after the replacement.
    #[arg(long, default_value_t = 2, value_name = "N")]
    pub validate_count: u32,
    /// Time to wait after draining the node.
    #[arg(long, default_value = "5s", value_parser = parse_duration, value_name = "DURATION")]
    pub post_drain_delay: Duration,
    /// Fail if draining the node fails (otherwise terminate it anyway).
    #[arg(long, default_value = "true", num_args = 0..=1, default_missing_value = "true", value_parser = bool_flag, value_name = "BOOL")]
    pub fail_on_drain_error: bool,
    /// Fail if the cluster does not validate.
    #[arg(long, default_value = "true", num_args = 0..=1, default_missing_value = "true", value_parser = bool_flag, value_name = "BOOL")]
    pub fail_on_validate_error: bool,
    /// Kubeconfig for the node lookup, drain and validation (default: KUBECONFIG, then ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    #[command(flatten)]
    pub kube: KubeApiFlags,
    /// Time between validation attempts while waiting for health.
    #[arg(long, default_value = "30s", value_parser = parse_duration, hide = true)]
    pub validate_tick: Duration,
    /// Pause between two consecutive successful validations.
    #[arg(long, default_value = "10s", value_parser = parse_duration, hide = true)]
    pub validate_success_pause: Duration,
}

/// `kops delete instance`: as kops' single-instance update. Detach for surge
/// (not control-plane instances), validate, drain, terminate, wait for the
/// group's replacement and validate again; kops-roll's roller does each step
/// on a group made of just this instance.
pub async fn run(global: &GlobalArgs, a: DeleteInstanceArgs) -> Result<i32> {
    let registry = state(global).await?;
    let cluster = cluster_name(&registry, global, None).await?;
    kops_ops::require_cluster(&registry, &cluster).await?;
    let (kubeconfig, _guard) = kubeconfig_for(&a.kube, a.kubeconfig.as_deref(), &cluster)?;
    let kube = if a.cloudonly {
        None
    } else {
        let connected = async {
            let k = kops_roll::KubeClient::connect(kubeconfig.as_deref(), &cluster).await?;
            let nodes = k.nodes().await?;
            Ok::<_, kops_roll::RollError>((k, nodes))
        }
        .await;
        match connected {
            Ok(k) => Some(k),
            Err(e) => bail!(
                "cannot reach the Kubernetes API of cluster `{cluster}`: {}\nhint: pass --kubeconfig, or --cloudonly to delete without draining",
                e.to_string().lines().next().unwrap_or_default()
            ),
        }
    };
    let nodes = kube.as_ref().map(|(_, n)| n.clone()).unwrap_or_default();
    let live = live_instances(&registry, &cluster, &nodes).await?;
    let found = live.groups.iter().find_map(|g| {
        g.members()
            .find(|m| {
                m.id() == a.target
                    || (!a.cloudonly && m.node.as_ref().is_some_and(|n| n.name == a.target))
            })
            .map(|m| (g, m))
    });
    let Some((group, member)) = found else {
        bail!(
            "instance `{}` not found in cluster `{cluster}`\nhint: `kops get instances --name {cluster}` lists its instances and their node names",
            a.target
        );
    };
    let id = member.id().to_string();
    match (&member.node, a.cloudonly) {
        (_, true) => print(&format!("Instance {id} found for deletion\n")),
        (Some(n), false) => print(&format!("Instance {id} ({}) found for deletion\n", n.name)),
        (None, false) => bail!(
            "instance {id} has no node in cluster `{cluster}`\nhint: use --cloudonly to delete it without the Kubernetes API"
        ),
    }
    if !a.yes {
        print("\nMust specify --yes to delete instance\n");
        return Ok(0);
    }

    let mut target = member.clone();
    target.status = InstanceStatus::NeedsUpdate;
    let mut surge = a.surge && !target.instance.detached;
    if surge && group.role() == kops_api::Role::ControlPlane {
        status("warning: cannot detach control-plane instances; assuming --surge=false");
        surge = false;
    }
    if group.instance_group.spec.manager.as_deref() == Some("Karpenter") {
        surge = false;
    }
    if target.instance.detached {
        target.status = InstanceStatus::Detached;
    }
    // As kops: asking to surge where the cloud cannot detach is an error.
    if surge && !live.cloud.supports_surge() {
        bail!(
            "failed to detach instance {id}: {}",
            kops_roll::CloudError::NoSurge {
                cloud: live.cloud.name().to_string()
            }
        );
    }
    // The roller surges only with the Kubernetes API; without it, detach here.
    if surge && a.cloudonly {
        live.cloud.detach(&group.name, &target.instance).await?;
        status(&format!("[{}] detached {id}", group.ig_name()));
        target.status = InstanceStatus::Detached;
        target.instance.detached = true;
        surge = false;
    }
    let mut ig = group.instance_group.clone();
    let settings = ig.spec.rolling_update.get_or_insert_with(Default::default);
    settings.max_surge = Some(serde_json::json!(usize::from(surge)));
    settings.max_unavailable = Some(serde_json::json!(1));
    settings.drain_and_terminate = Some(true);
    let one = CloudGroup {
        instance_group: ig,
        name: group.name.clone(),
        min_size: group.min_size,
        target_size: group.target_size,
        max_size: group.max_size,
        ready: group.members().filter(|m| m.id() != id).cloned().collect(),
        need_update: vec![target],
    };
    let options = kops_roll::RollOptions {
        cloud_only: a.cloudonly,
        fail_on_drain_error: a.fail_on_drain_error,
        fail_on_validate_error: a.fail_on_validate_error,
        post_drain_delay: a.post_drain_delay,
        validation_timeout: a.validation_timeout,
        validate_count: a.validate_count,
        control_plane_interval: Duration::ZERO,
        node_interval: Duration::ZERO,
        bastion_interval: Duration::ZERO,
        validate_tick: a.validate_tick,
        validate_success_pause: a.validate_success_pause,
        ..Default::default()
    };
    let progress: kops_roll::Progress =
        std::sync::Arc::new(|event: &kops_roll::RollEvent| status(&event.to_string()));
    let roller = kops_roll::Roller {
        cluster_name: cluster.clone(),
        cluster: live.cluster,
        instance_groups: live.instance_groups,
        cloud: live.cloud,
        kube: kube.map(|(k, _)| std::sync::Arc::new(k) as std::sync::Arc<dyn Kubernetes>),
        options,
        progress: Some(progress),
    };
    std::sync::Arc::new(roller).run(vec![one]).await?;
    status(&format!(
        "Deleted instance {id}; group {} replaced it",
        group.name
    ));
    Ok(0)
}
