//! `kops validate cluster` and `kops rolling-update cluster`: their flags,
//! and the printing of what kops-roll returns.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::{Args, Subcommand};

use crate::cli::{parse_duration, GlobalArgs};
use crate::output::{print, status, Table};

// ------------------------------------------------------------------ flags

/// `validate cluster -o`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    Table,
    Yaml,
    Json,
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    #[command(subcommand)]
    pub what: ValidateCommand,
}

#[derive(Debug, Subcommand)]
pub enum ValidateCommand {
    /// Validate a cluster: instance groups against the cloud, nodes Ready, control-plane and critical pods running.
    Cluster(ValidateClusterArgs),
}

#[derive(Debug, Args)]
pub struct ValidateClusterArgs {
    #[arg(value_name = "CLUSTER")]
    pub cluster_name: Option<String>,
    /// Output format: table, yaml or json.
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// Keep validating until the cluster is valid or this much time passed.
    #[arg(long, default_value = "0s", value_parser = parse_duration, value_name = "DURATION")]
    pub wait: Duration,
    /// Consecutive successful validations required (with --wait).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub count: u32,
    /// Time between validation attempts.
    #[arg(long, default_value = "10s", value_parser = parse_duration, value_name = "DURATION")]
    pub interval: Duration,
    /// Path to the kubeconfig file (default: KUBECONFIG, then ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The maximum number of non-ready worker nodes tolerated.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub max_unready_nodes: usize,
}

#[derive(Debug, Args)]
pub struct RollingUpdateArgs {
    #[command(subcommand)]
    pub what: RollingUpdateCommand,
}

#[derive(Debug, Subcommand)]
pub enum RollingUpdateCommand {
    /// Replace the instances that run an outdated spec (a dry run without --yes).
    Cluster(Box<RollingUpdateClusterArgs>),
}

fn bool_flag(text: &str) -> Result<bool, String> {
    match text {
        "true" | "1" | "yes" => Ok(true),
        "false" | "0" | "no" => Ok(false),
        _ => Err(format!("`{text}` is not a boolean; write true or false")),
    }
}

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
    /// Time between validation attempts while waiting for health.
    #[arg(long, default_value = "30s", value_parser = parse_duration, hide = true)]
    pub validate_tick: Duration,
    /// Pause between two consecutive successful validations.
    #[arg(long, default_value = "10s", value_parser = parse_duration, hide = true)]
    pub validate_success_pause: Duration,
}

/// The state store and the cluster named (or the only one in the store).
async fn open(
    global: &GlobalArgs,
    positional: Option<&str>,
) -> Result<(kops_ops::Registry, String)> {
    let registry = kops_ops::open_state(global.state.as_deref()).await?;
    let name = positional.or(global.name.as_deref());
    let cluster = kops_ops::resolve_cluster_name(&registry, name).await?;
    Ok((registry, cluster))
}

// ------------------------------------------------------------------ validate

pub async fn validate(global: &GlobalArgs, args: ValidateArgs) -> Result<i32> {
    let ValidateCommand::Cluster(a) = args.what;
    let (registry, cluster) = open(global, a.cluster_name.as_deref()).await?;
    if a.output == Output::Table {
        print(&format!("Validating cluster {cluster}\n\n"));
    }
    let waiting = !a.wait.is_zero();
    let on_attempt = move |attempt: u32, result: &kops_roll::ValidationCluster| {
        if waiting && !result.is_valid() {
            let first = result
                .failures
                .first()
                .map(|f| f.message.as_str())
                .unwrap_or_default();
            status(&format!(
                "(will retry) attempt {attempt}: {} failure(s), first: {first}",
                result.failures.len()
            ));
        } else if waiting {
            status(&format!("attempt {attempt}: cluster passed validation"));
        }
    };
    let outcome = kops_roll::validate_cluster(
        &registry,
        kops_roll::ValidateRequest {
            cluster: cluster.clone(),
            kubeconfig: a.kubeconfig,
            wait: a.wait,
            count: a.count,
            interval: a.interval,
            max_unready_nodes: a.max_unready_nodes,
            sdk_config: None,
        },
        &on_attempt,
    )
    .await?;
    let result = &outcome.result;
    match a.output {
        Output::Table => print(&validation_table(&outcome)),
        Output::Json => print(&format!("{}\n", serde_json::to_string_pretty(result)?)),
        Output::Yaml => print(&kops_api::manifest::to_yaml(&serde_json::to_value(result)?)),
    }
    if result.is_valid() {
        return Ok(0);
    }
    if waiting {
        status(&format!(
            "Error: validation failed: wait time exceeded during validation ({})",
            humantime::format_duration(a.wait)
        ));
    } else {
        status("Error: validation failed: cluster not yet healthy");
    }
    Ok(2)
}

fn validation_table(outcome: &kops_roll::ValidationOutcome) -> String {
    let mut out = String::from("INSTANCE GROUPS\n");
    let mut groups = Table::new(&["NAME", "ROLE", "MACHINETYPE", "MIN", "MAX", "SUBNETS"]);
    for ig in &outcome.instance_groups {
        let role = match ig.role() {
            Some(kops_api::Role::ControlPlane) => "ControlPlane".to_string(),
            Some(r) => r.as_str().to_string(),
            None => ig.spec.role.clone().unwrap_or_default(),
        };
        groups.row(vec![
            ig.name().to_string(),
            role,
            ig.spec.machine_type.clone().unwrap_or_default(),
            ig.spec.min_size.map(|n| n.to_string()).unwrap_or_default(),
            ig.spec.max_size.map(|n| n.to_string()).unwrap_or_default(),
            ig.spec.subnets.clone().unwrap_or_default().join(","),
        ]);
    }
    out.push_str(&groups.render());
    out.push_str("\nNODE STATUS\n");
    let mut nodes = Table::new(&["NAME", "ROLE", "READY"]);
    for n in &outcome.result.nodes {
        nodes.row(vec![n.name.clone(), n.role.clone(), n.status.clone()]);
    }
    out.push_str(&nodes.render());
    if outcome.result.is_valid() {
        out.push_str(&format!(
            "\nYour cluster {} is ready\n",
            outcome.cluster.name()
        ));
    } else {
        out.push_str("\nVALIDATION ERRORS\n");
        let mut failures = Table::new(&["KIND", "NAME", "MESSAGE"]);
        for f in &outcome.result.failures {
            failures.row(vec![f.kind.clone(), f.name.clone(), f.message.clone()]);
        }
        out.push_str(&failures.render());
        out.push_str("\nValidation Failed\n");
    }
    out
}

// ------------------------------------------------------------------ rolling-update

pub async fn rolling_update(global: &GlobalArgs, args: RollingUpdateArgs) -> Result<i32> {
    let RollingUpdateCommand::Cluster(a) = args.what;
    let (registry, cluster) = open(global, a.cluster_name.as_deref()).await?;
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
    let progress: kops_roll::Progress =
        std::sync::Arc::new(|event: &kops_roll::RollEvent| status(&event.to_string()));
    let plan = kops_roll::plan_rolling_update(
        &registry,
        kops_roll::RollingUpdateRequest {
            cluster: cluster.clone(),
            kubeconfig: a.kubeconfig.clone(),
            instance_groups: a.instance_groups.clone(),
            roles: a.roles.clone(),
            options,
            progress: Some(progress),
            sdk_config: None,
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
    if !plan.needs_update() {
        print("\nNo rolling-update required.\n");
        return Ok(0);
    }
    if !a.yes {
        print("\nMust specify --yes to rolling-update.\n");
        return Ok(0);
    }
    let started = std::time::Instant::now();
    plan.execute().await?;
    status(&format!(
        "Rolling update of cluster {cluster} completed in {:.1}s.",
        started.elapsed().as_secs_f64()
    ));
    Ok(0)
}
