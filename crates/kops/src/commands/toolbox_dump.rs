//! `kops toolbox dump`: the cluster's cloud resources as kops' dump document.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::{ArgAction, Args};
use serde_yaml_ng::{Mapping, Value};

use crate::args::GlobalArgs;
use crate::output::print;

#[derive(Debug, Args)]
pub struct ToolboxDumpArgs {
    #[arg(value_name = "CLUSTER")]
    pub cluster_name: Option<String>,
    /// Output format. One of json or yaml.
    #[arg(short = 'o', long = "output", default_value = "yaml", value_parser = ["json", "yaml"])]
    pub output: String,
    /// Target directory for node logs (not supported: kops-rs does not collect logs over SSH).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Include k8s resources in the dump (only with --dir, which is not supported).
    #[arg(long = "k8s-resources", action = ArgAction::Set, num_args = 0..=1,
          require_equals = true, default_value_t = false, default_missing_value = "true")]
    pub k8s_resources: bool,
    /// Include cloud resources in the dump.
    #[arg(long = "cloud-resources", action = ArgAction::Set, num_args = 0..=1,
          require_equals = true, default_value_t = true, default_missing_value = "true")]
    pub cloud_resources: bool,
    /// The maximum number of nodes from which to dump logs (only with --dir).
    #[arg(long = "max-nodes", default_value_t = 500)]
    pub max_nodes: u32,
    /// Timeout for dumping logs from a single node (only with --dir).
    #[arg(
        long = "node-dump-timeout",
        value_name = "DURATION",
        default_value = "1m"
    )]
    pub node_dump_timeout: String,
    /// File containing private key to use for SSH access to instances (only with --dir).
    #[arg(
        long = "private-key",
        value_name = "FILE",
        default_value = "~/.ssh/id_rsa"
    )]
    pub private_key: String,
    /// The remote user for SSH access to instances (only with --dir).
    #[arg(long = "ssh-user", default_value = "ubuntu")]
    pub ssh_user: String,
}

/// `kops toolbox dump`: the cloud side of the cluster (see
/// `kops_aws::delete::dump` and each cloud's `Provider::dump` for what is read and how `raw` is reduced).
/// kops' log collection (`--dir`: SSH to every node, kubectl dumps) is not
/// implemented, so asking for it is an error rather than a silent no-op.
pub async fn run(global: &GlobalArgs, a: ToolboxDumpArgs) -> Result<i32> {
    if let Some(dir) = &a.dir {
        bail!(
            "--dir {}: collecting node logs over SSH (and k8s resources) is not supported by kops-rs\n\
             hint: leave out --dir to dump the cluster's cloud resources",
            dir.display()
        );
    }
    tracing::debug!(
        k8s_resources = a.k8s_resources,
        max_nodes = a.max_nodes,
        node_dump_timeout = %a.node_dump_timeout,
        private_key = %a.private_key,
        ssh_user = %a.ssh_user,
        "log collection flags, used only with --dir"
    );
    let registry = kops_ops::open_state(global.state.as_deref()).await?;
    let name = a.cluster_name.as_deref().or(global.name.as_deref());
    let cluster = kops_ops::resolve_cluster_name(&registry, name).await?;
    let spec = kops_ops::require_cluster(&registry, &cluster).await?;
    if !a.cloud_resources {
        return Ok(0);
    }
    let cloud = kops_ops::provider::provider(&registry, &spec).await?;
    let d = cloud.dump().await?;
    if let Some(calls) = cloud.calls_summary() {
        crate::output::status(&format!("({calls})"));
    }
    let doc = dump_document(&d);
    match a.output.as_str() {
        "json" => print(&format!("{}\n", serde_json::to_string_pretty(&doc)?)),
        _ => print(&serde_yaml_ng::to_string(&doc)?),
    }
    Ok(0)
}

/// kops' dump model, keys in its order and empty fields left out (a YAML
/// mapping keeps insertion order, for the JSON output too).
fn dump_document(d: &kops_cloud::Dump) -> Value {
    fn map(entries: Vec<(&str, Option<Value>)>) -> Value {
        let mut m = Mapping::new();
        for (k, v) in entries {
            if let Some(v) = v {
                m.insert(Value::from(k), v);
            }
        }
        Value::Mapping(m)
    }
    fn text(s: &str) -> Option<Value> {
        (!s.is_empty()).then(|| Value::from(s))
    }
    fn list(items: &[String]) -> Option<Value> {
        (!items.is_empty())
            .then(|| Value::Sequence(items.iter().map(|s| Value::from(s.as_str())).collect()))
    }
    fn seq(items: Vec<Value>) -> Option<Value> {
        (!items.is_empty()).then_some(Value::Sequence(items))
    }
    let resources = d
        .resources
        .iter()
        .map(|r| {
            let raw = r
                .raw
                .iter()
                .map(|(k, v)| {
                    let v = match (*k, v.as_str()) {
                        ("shared", "true") => Value::Bool(true),
                        ("shared", "false") => Value::Bool(false),
                        _ => Value::from(v.as_str()),
                    };
                    (*k, Some(v))
                })
                .collect();
            map(vec![
                ("id", text(&r.id)),
                ("type", text(r.kind)),
                ("raw", Some(map(raw))),
            ])
        })
        .collect();
    let instances = d
        .instances
        .iter()
        .map(|i| {
            map(vec![
                ("name", text(&i.name)),
                ("publicAddresses", list(&i.public_addresses)),
                ("privateAddresses", list(&i.private_addresses)),
                ("roles", list(&i.roles)),
                ("sshUser", i.ssh_user.as_deref().and_then(text)),
            ])
        })
        .collect();
    let load_balancers = d
        .load_balancers
        .iter()
        .map(|l| {
            map(vec![
                ("name", text(&l.name)),
                ("dnsName", l.dns_name.as_deref().and_then(text)),
            ])
        })
        .collect();
    let subnets = d
        .subnets
        .iter()
        .map(|s| {
            map(vec![
                ("id", text(&s.id)),
                ("zone", s.zone.as_deref().and_then(text)),
            ])
        })
        .collect();
    map(vec![
        ("resources", seq(resources)),
        ("instances", seq(instances)),
        ("loadBalancers", seq(load_balancers)),
        ("subnets", seq(subnets)),
        (
            "vpc",
            d.vpc.as_deref().map(|id| map(vec![("id", text(id))])),
        ),
    ])
}
