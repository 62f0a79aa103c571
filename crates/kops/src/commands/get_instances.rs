//! `kops get instances`: the cluster's instances from the cloud, with their
//! node names when the Kubernetes API answers.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;
use kops_roll::CloudInstance;

use crate::args::{GetOutput, GlobalArgs, KubeApiFlags};
use crate::context::{cluster_name, state};
use crate::kubeconfig::kubeconfig_for;
use crate::live::{kube_nodes, live_instances, status_text};
use crate::output::{print, status, Table};

#[derive(Debug, Args)]
pub struct GetInstancesArgs {
    #[arg(value_name = "CLUSTER")]
    pub cluster_name: Option<String>,
    /// Kubeconfig for the node names (default: KUBECONFIG, then ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    #[command(flatten)]
    pub kube: KubeApiFlags,
}

pub async fn run(global: &GlobalArgs, args: GetInstancesArgs, output: GetOutput) -> Result<i32> {
    if output == GetOutput::Plaintext {
        bail!("`get instances` prints table, yaml or json\nhint: use `-o table`, `-o yaml` or `-o json`");
    }
    let registry = state(global).await?;
    let cluster = cluster_name(&registry, global, args.cluster_name.as_deref()).await?;
    // As kops: without the Kubernetes API the list still comes, without node names.
    let (kubeconfig, _guard) = kubeconfig_for(&args.kube, args.kubeconfig.as_deref(), &cluster)?;
    let nodes = match kube_nodes(kubeconfig.as_deref(), &cluster).await {
        Ok(n) => n,
        Err(e) => {
            status(&format!(
                "warning: cannot list node names. Kubernetes API unavailable: {}",
                e.to_string().lines().next().unwrap_or_default()
            ));
            Vec::new()
        }
    };
    let live = live_instances(&registry, &cluster, &nodes).await?;
    // vSphere counts its SOAP calls (its instance ids are the VMs' BIOS
    // UUIDs, the `vsphere://` provider IDs of their nodes).
    if let Some(summary) = live.cloud.calls_summary() {
        status(&summary);
    }
    let mut rows = Vec::new();
    for g in &live.groups {
        let mut members: Vec<&CloudInstance> = g.members().collect();
        members.sort_by(|a, b| a.id().cmp(b.id()));
        for m in members {
            let d = live.details.get(m.id()).cloned().unwrap_or_default();
            let state = if m.instance.lifecycle_state.starts_with("Warmed") {
                "WarmPool"
            } else {
                ""
            };
            rows.push(serde_json::json!({
                "id": m.id(),
                "nodeName": m.node.as_ref().map(|n| n.name.clone()),
                "status": status_text(m),
                "roles": d.roles,
                "internalIP": d.private_ip.unwrap_or_default(),
                "externalIP": d.public_ip.unwrap_or_default(),
                "instanceGroup": g.name,
                "machineType": d.instance_type.or_else(|| m.instance.instance_type.clone()).unwrap_or_default(),
                "state": state,
            }));
        }
    }
    for r in &mut rows {
        if let Some(o) = r.as_object_mut() {
            if o.get("nodeName").is_some_and(|v| v.is_null()) {
                o.remove("nodeName");
            }
        }
    }
    match output {
        GetOutput::Json => print(&format!("{}\n", kops_order_json(&rows))),
        GetOutput::Yaml => print(&serde_yaml_ng::to_string(&rows)?),
        _ => {
            let text = |v: &serde_json::Value, k: &str| -> String {
                match v.get(k) {
                    Some(serde_json::Value::String(s)) => s.clone(),
                    Some(serde_json::Value::Array(a)) => a
                        .iter()
                        .filter_map(|x| x.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                    _ => String::new(),
                }
            };
            let mut t = Table::new(&[
                "ID",
                "NODE-NAME",
                "STATUS",
                "ROLES",
                "STATE",
                "INTERNAL-IP",
                "EXTERNAL-IP",
                "INSTANCE-GROUP",
                "MACHINE-TYPE",
            ]);
            for r in &rows {
                t.row(
                    [
                        "id",
                        "nodeName",
                        "status",
                        "roles",
                        "state",
                        "internalIP",
                        "externalIP",
                        "instanceGroup",
                        "machineType",
                    ]
                    .iter()
                    .map(|k| text(r, k))
                    .collect(),
                );
            }
            print(&format!("\n{}", t.render()));
        }
    }
    Ok(0)
}

/// kops' `get instances -o json`: one compact array, each object's fields
/// in kops' order (`nodeName` left out when unknown, `roles` null when none).
fn kops_order_json(rows: &[serde_json::Value]) -> String {
    const FIELDS: [&str; 9] = [
        "id",
        "nodeName",
        "status",
        "roles",
        "internalIP",
        "externalIP",
        "instanceGroup",
        "machineType",
        "state",
    ];
    let objects: Vec<String> = rows
        .iter()
        .map(|row| {
            let fields: Vec<String> = FIELDS
                .iter()
                .filter_map(|k| {
                    let v = match row.get(*k) {
                        None => return None,
                        Some(serde_json::Value::Array(a)) if a.is_empty() => {
                            serde_json::Value::Null
                        }
                        Some(v) => v.clone(),
                    };
                    Some(format!("{}:{}", serde_json::Value::from(*k), v))
                })
                .collect();
            format!("{{{}}}", fields.join(","))
        })
        .collect();
    format!("[{}]", objects.join(","))
}
