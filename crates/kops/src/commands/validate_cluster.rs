//! `kops validate cluster`: instance groups against the cloud, nodes Ready,
//! control-plane and critical pods running.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::Args;

use crate::args::{parse_duration, GlobalArgs, KubeApiFlags};
use crate::context::{cluster_name, state};
use crate::kubeconfig::kubeconfig_for;
use crate::output::{print, status, Table};

/// `validate cluster -o`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    Table,
    Yaml,
    Json,
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
    #[command(flatten)]
    pub kube: KubeApiFlags,
    /// The maximum number of non-ready worker nodes tolerated.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub max_unready_nodes: usize,
}

pub async fn run(global: &GlobalArgs, a: ValidateClusterArgs) -> Result<i32> {
    let registry = state(global).await?;
    let cluster = cluster_name(&registry, global, a.cluster_name.as_deref()).await?;
    if a.output == Output::Table {
        print(&format!("Validating cluster {cluster}\n\n"));
    }
    let (kubeconfig, _guard) = kubeconfig_for(&a.kube, a.kubeconfig.as_deref(), &cluster)?;
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
            kubeconfig,
            wait: a.wait,
            count: a.count,
            interval: a.interval,
            max_unready_nodes: a.max_unready_nodes,
        },
        &on_attempt,
    )
    .await?;
    let result = &outcome.result;
    if let Some(calls) = &outcome.cloud_calls {
        status(&format!("({calls})"));
    }
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
