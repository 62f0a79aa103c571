//! `kops rolling-update cluster`: replace the instances that run an outdated spec.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::Args;

use crate::args::{bool_flag, parse_duration, GlobalArgs, KubeApiFlags};
use crate::context::{cluster_name, state};
use crate::kubeconfig::{admin_kubeconfig, kubeconfig_for};
use crate::output::{print, status, Table};

#[derive(Debug, Args)]
pub struct RollingUpdateClusterArgs {
    #[arg(value_name = "CLUSTER")]
    pub cluster_name: Option<String>,
    /// Perform the rolling update (otherwise only show what needs it).
    #[arg(short = 'y', long)]
    pub yes: bool,
    /// Replace every instance, even those that are up to date.
    #[arg(long)]
    pub force: bool,
    /// Do not use the Kubernetes API: no drain, no validation (causes downtime).
    #[arg(long)]
    pub cloudonly: bool,
    /// Instance groups to update (default: all).
    #[arg(long = "instance-group", visible_aliases = ["ig", "instance-groups"], value_delimiter = ',', value_name = "NAMES")]
    pub instance_groups: Vec<String>,
    /// Roles to update: control-plane, node, bastion, apiserver (default: all).
    #[arg(long = "instance-group-roles", visible_aliases = ["role", "roles", "instance-group-role"], value_delimiter = ',', value_name = "ROLES")]
    pub roles: Vec<String>,
    /// Maximum time to wait for the cluster to validate.
    #[arg(long, default_value = "15m", value_parser = parse_duration, value_name = "DURATION")]
    pub validation_timeout: Duration,
    /// Maximum time to wait for a node to drain.
    #[arg(long, default_value = "15m", value_parser = parse_duration, value_name = "DURATION")]
    pub drain_timeout: Duration,
    /// Consecutive successful validations required after each replacement.
    #[arg(long, default_value_t = 2, value_name = "N")]
    pub validate_count: u32,
    /// Time to wait after replacing a control-plane node.
    #[arg(long, alias = "master-interval", default_value = "15s", value_parser = parse_duration, value_name = "DURATION")]
    pub control_plane_interval: Duration,
    /// Time to wait after replacing a worker node.
    #[arg(long, default_value = "15s", value_parser = parse_duration, value_name = "DURATION")]
    pub node_interval: Duration,
    /// Time to wait after replacing a bastion.
    #[arg(long, default_value = "15s", value_parser = parse_duration, value_name = "DURATION")]
    pub bastion_interval: Duration,
    /// Sets --control-plane-interval, --node-interval and --bastion-interval at once.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    pub interval: Option<Duration>,
    /// Time to wait after draining each node.
    #[arg(long, default_value = "5s", value_parser = parse_duration, value_name = "DURATION")]
    pub post_drain_delay: Duration,
    /// Fail if draining a node fails (otherwise terminate it anyway).
    #[arg(long, default_value = "true", num_args = 0..=1, default_missing_value = "true", value_parser = bool_flag, value_name = "BOOL")]
    pub fail_on_drain_error: bool,
    /// Fail if the cluster does not validate (otherwise continue).
    #[arg(long, default_value = "true", num_args = 0..=1, default_missing_value = "true", value_parser = bool_flag, value_name = "BOOL")]
    pub fail_on_validate_error: bool,
    /// Roll all node instance groups at the same time; each waits only for
    /// its own validation failures (and the control plane's).
    #[arg(long)]
    pub parallel_node_groups: bool,
    /// Path to the kubeconfig file (default: KUBECONFIG, then ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    #[command(flatten)]
    pub kube: KubeApiFlags,
    /// Reach the API with a new cluster admin credential of this lifetime
    /// (issued from the state store's CA) instead of the kubeconfig's user.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    pub admin: Option<Duration>,
    /// Prompt to continue after each instance is updated.
    #[arg(short = 'i', long)]
    pub interactive: bool,
    /// Time between validation attempts while waiting for health.
    #[arg(long, default_value = "30s", value_parser = parse_duration, hide = true)]
    pub validate_tick: Duration,
    /// Pause between two consecutive successful validations.
    #[arg(long, default_value = "10s", value_parser = parse_duration, hide = true)]
    pub validate_success_pause: Duration,
}

pub async fn run(global: &GlobalArgs, a: RollingUpdateClusterArgs) -> Result<i32> {
    let registry = state(global).await?;
    let cluster = cluster_name(&registry, global, a.cluster_name.as_deref()).await?;
    let options = kops_roll::RollOptions {
        force: a.force,
        cloud_only: a.cloudonly,
        fail_on_drain_error: a.fail_on_drain_error,
        fail_on_validate_error: a.fail_on_validate_error,
        drain_timeout: a.drain_timeout,
        post_drain_delay: a.post_drain_delay,
        validation_timeout: a.validation_timeout,
        validate_count: a.validate_count,
        control_plane_interval: a.interval.unwrap_or(a.control_plane_interval),
        node_interval: a.interval.unwrap_or(a.node_interval),
        bastion_interval: a.interval.unwrap_or(a.bastion_interval),
        parallel_node_groups: a.parallel_node_groups,
        validate_tick: a.validate_tick,
        validate_success_pause: a.validate_success_pause,
        ..Default::default()
    };
    let (kubeconfig, _guard) = match a.admin {
        Some(lifetime) => {
            let (path, dir) =
                admin_kubeconfig(&registry, &cluster, lifetime, a.kube.api_server.clone()).await?;
            (Some(path), Some(dir))
        }
        None => kubeconfig_for(&a.kube, a.kubeconfig.as_deref(), &cluster)?,
    };
    let progress: kops_roll::Progress = if a.interactive {
        interactive_progress(a.cloudonly)
    } else {
        std::sync::Arc::new(|event: &kops_roll::RollEvent| status(&event.to_string()))
    };
    let plan = kops_roll::plan_rolling_update(
        &registry,
        kops_roll::RollingUpdateRequest {
            cluster: cluster.clone(),
            kubeconfig,
            instance_groups: a.instance_groups.clone(),
            roles: a.roles.clone(),
            options,
            progress: Some(progress),
        },
    )
    .await
    .map_err(|e| {
        if matches!(e, kops_roll::RollError::KubeApi { .. }) {
            status("Unable to reach the kubernetes API.");
            status("Use --cloudonly to do a rolling-update without confirming progress with the k8s API\n");
        }
        e
    })?;
    let mut columns = vec![
        "NAME",
        "STATUS",
        "NEEDUPDATE",
        "READY",
        "MIN",
        "TARGET",
        "MAX",
    ];
    if !plan.cloud_only {
        columns.push("NODES");
    }
    let mut table = Table::new(&columns);
    for g in &plan.groups {
        let mut row = vec![
            g.ig_name().to_string(),
            g.status().to_string(),
            g.need_update.len().to_string(),
            g.ready.len().to_string(),
            g.min_size.to_string(),
            g.target_size.to_string(),
            g.max_size.to_string(),
        ];
        if !plan.cloud_only {
            row.push(g.nodes().to_string());
        }
        table.row(row);
    }
    print(&table.render());
    let cloud = plan.cloud();
    let calls = || {
        if let Some(summary) = cloud.calls_summary() {
            status(&format!("({summary})"));
        }
    };
    if !plan.needs_update() {
        print("\nNo rolling-update required.\n");
        calls();
        return Ok(0);
    }
    if !a.yes {
        print("\nMust specify --yes to rolling-update.\n");
        calls();
        return Ok(0);
    }
    let started = std::time::Instant::now();
    let rolled = plan.execute().await;
    calls();
    rolled?;
    status(&format!(
        "Rolling update of cluster {cluster} completed in {:.1}s.",
        started.elapsed().as_secs_f64()
    ));
    Ok(0)
}

/// `--interactive`: after each instance is replaced (and the cluster
/// validated, unless --cloudonly) ask whether to go on, as kops does:
/// `n` stops with exit code 3, `a` stops asking.
fn interactive_progress(cloud_only: bool) -> kops_roll::Progress {
    use std::io::BufRead;
    use std::sync::Mutex;
    // The instance (and node) replaced last, not yet asked about; whether to ask at all.
    let state: Mutex<(Option<String>, bool)> = Mutex::new((None, true));
    std::sync::Arc::new(move |event: &kops_roll::RollEvent| {
        status(&event.to_string());
        let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
        match event {
            kops_roll::RollEvent::Terminated { instance, node, .. } => {
                s.0 = Some(match node {
                    Some(n) => format!("{instance:?}, node {n:?}"),
                    None => format!("{instance:?}"),
                });
                if !cloud_only {
                    return;
                }
            }
            kops_roll::RollEvent::Validated { .. }
            | kops_roll::RollEvent::ValidationIgnored { .. } => {}
            _ => return,
        }
        let (Some(done), true) = (s.0.take(), s.1) else {
            return;
        };
        status(&format!("Pausing after finished {done}"));
        print("Continue? (Y)es, (N)o, (A)lwaysYes: [Y] ");
        let mut line = String::new();
        let _ = std::io::stdin().lock().read_line(&mut line);
        match line.trim().to_ascii_lowercase().as_str() {
            "n" => {
                status("User signaled to stop");
                std::process::exit(3);
            }
            "a" => {
                status("Always Yes, stop prompting for rest of hosts");
                s.1 = false;
            }
            _ => {}
        }
    })
}
