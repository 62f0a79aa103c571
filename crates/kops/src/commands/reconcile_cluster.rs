//! `kops reconcile cluster`: update and roll the control plane, then the
//! nodes, so nodes never run a newer Kubernetes than the control plane:
//! update the control-plane and API-server groups, wait for the API,
//! roll them; update every group, roll the nodes; then update once more
//! with pruning. Without --yes, the dry run of `update cluster`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use clap::{Args, FromArgMatches};
use kops_roll::Kubernetes as _;

use crate::args::{GlobalArgs, KubeApiFlags};
use crate::commands::rolling_update_cluster::{self, RollingUpdateClusterArgs};
use crate::commands::update_cluster::{self, UpdateClusterArgs};
use crate::context::{cluster_name, state};
use crate::kubeconfig::kubeconfig_for;
use crate::output::{print, status};

#[derive(Debug, Args)]
pub struct ReconcileClusterArgs {
    #[arg(value_name = "CLUSTER")]
    pub cluster_name: Option<String>,
    /// Apply and roll (otherwise only show what `update cluster` would change).
    #[arg(short = 'y', long)]
    pub yes: bool,
    #[command(flatten)]
    pub kube: KubeApiFlags,
    /// Allow an older kops than the one that last updated the cluster.
    #[arg(long)]
    pub allow_kops_downgrade: bool,
    /// Path to the kubeconfig file (default: KUBECONFIG, then ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// How long to wait for the Kubernetes API after the control plane's update.
    #[arg(long, default_value = "10m", value_parser = crate::args::parse_duration, hide = true)]
    pub api_wait: Duration,
    /// More `rolling-update cluster` flags for both rolls (tests: `--interval=0s`).
    #[arg(
        long = "rolling-update-flag",
        hide = true,
        allow_hyphen_values = true,
        value_name = "FLAG"
    )]
    pub rolling_update_flags: Vec<String>,
}

pub async fn run(global: &GlobalArgs, a: ReconcileClusterArgs) -> Result<i32> {
    let registry = state(global).await?;
    let cluster = cluster_name(&registry, global, a.cluster_name.as_deref()).await?;
    let update = |roles: &[&str], yes: bool| UpdateClusterArgs {
        cluster_name: Some(cluster.clone()),
        yes,
        target: "direct".into(),
        create_kube_config: Some(false),
        allow_kops_downgrade: a.allow_kops_downgrade,
        instance_group_roles: roles.iter().map(|r| r.to_string()).collect(),
        kube: a.kube.clone(),
        ..Default::default()
    };
    if !a.yes {
        return update_cluster::run(global, update(&[], false)).await;
    }
    const CONTROL_PLANE: [&str; 2] = ["apiserver", "control-plane"];

    print("Updating control plane configuration\n");
    check(update_cluster::run(global, update(&CONTROL_PLANE, true)).await?)?;

    print("Waiting for the kubernetes API to be served\n");
    let (kubeconfig, _guard) = kubeconfig_for(&a.kube, a.kubeconfig.as_deref(), &cluster)?;
    wait_for_api(kubeconfig.as_deref(), &cluster, a.api_wait).await?;

    print("Performing rolling-update for control plane\n");
    let roll = |roles: &[&str]| -> Result<RollingUpdateClusterArgs> {
        let mut argv = vec![
            "rolling-update-cluster".to_string(),
            cluster.clone(),
            "--yes".into(),
        ];
        if !roles.is_empty() {
            argv.push(format!("--instance-group-roles={}", roles.join(",")));
        }
        if let Some(k) = &kubeconfig {
            argv.push(format!("--kubeconfig={}", k.display()));
        }
        argv.extend(a.rolling_update_flags.iter().cloned());
        let cmd = <RollingUpdateClusterArgs as Args>::augment_args(clap::Command::new(
            "rolling-update-cluster",
        ));
        let matches = cmd.try_get_matches_from(argv)?;
        Ok(RollingUpdateClusterArgs::from_arg_matches(&matches)?)
    };
    check(rolling_update_cluster::run(global, roll(&CONTROL_PLANE)?).await?)?;

    print("Updating node configuration\n");
    check(update_cluster::run(global, update(&[], true)).await?)?;

    print("Performing rolling-update for nodes\n");
    check(rolling_update_cluster::run(global, roll(&[])?).await?)?;

    print("Pruning old resources that are no longer used\n");
    let mut prune = update(&[], true);
    prune.prune = true;
    update_cluster::run(global, prune).await
}

/// A step that did not end with exit code 0 stops the reconcile.
fn check(code: i32) -> Result<()> {
    if code != 0 {
        bail!("reconcile stopped: a step ended with exit code {code}");
    }
    Ok(())
}

/// Polls the Kubernetes API (listing nodes) until it answers or `wait` passes.
async fn wait_for_api(
    kubeconfig: Option<&std::path::Path>,
    cluster: &str,
    wait: Duration,
) -> Result<()> {
    let started = Instant::now();
    loop {
        let attempt = async {
            let k = kops_roll::KubeClient::connect(kubeconfig, cluster).await?;
            k.nodes().await
        }
        .await;
        match attempt {
            Ok(_) => return Ok(()),
            Err(e) if started.elapsed() >= wait => bail!(
                "waiting for kubernetes API to be served: {}\nhint: check the control plane with `kops validate cluster {cluster}`",
                e.to_string().lines().next().unwrap_or_default()
            ),
            Err(e) => {
                status(&format!(
                    "(will retry) the Kubernetes API does not answer yet: {}",
                    e.to_string().lines().next().unwrap_or_default()
                ));
                tokio::time::sleep(Duration::from_secs(5).min(wait)).await;
            }
        }
    }
}
