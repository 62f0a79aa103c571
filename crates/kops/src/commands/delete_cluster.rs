//! `kops delete cluster`: delete the cluster's cloud resources, then its state
//! (`--unregister`: the state only).

use std::time::Duration;

use anyhow::Result;
use clap::Args;

use crate::args::{parse_duration, GlobalArgs};
use crate::context::state;
use crate::output::{print, status, Table};

#[derive(Debug, Args)]
pub struct DeleteClusterArgs {
    #[arg(value_name = "CLUSTER")]
    pub cluster_name: Option<String>,
    /// Delete (otherwise only shows what would go).
    #[arg(short = 'y', long)]
    pub yes: bool,
    /// Remove the cluster from the state store only, leaving cloud resources.
    #[arg(long)]
    pub unregister: bool,
    /// Delete an external cluster: one the state store does not hold, found
    /// by its `KubernetesCluster` tag in --region.
    #[arg(long)]
    pub external: bool,
    /// The cluster's region (with --external, or when the state store no
    /// longer has the cluster's spec).
    #[arg(long, value_name = "REGION")]
    pub region: Option<String>,
    /// Passes over resources that still have dependencies before giving up
    /// (0: as many as --wait allows, one per --interval).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub count: u32,
    /// Time to wait for the cluster's resources to be deleted (bounds the
    /// passes when --count is 0).
    #[arg(long, default_value = "10m", value_parser = parse_duration, value_name = "DURATION")]
    pub wait: Duration,
    /// Time between passes.
    #[arg(long, default_value = "10s", value_parser = parse_duration, value_name = "DURATION")]
    pub interval: Duration,
}

impl DeleteClusterArgs {
    /// `delete cluster NAME` with the defaults (as `delete -f` uses it).
    pub fn named(name: &str, yes: bool) -> Self {
        DeleteClusterArgs {
            cluster_name: Some(name.to_string()),
            yes,
            unregister: false,
            external: false,
            region: None,
            count: 0,
            wait: Duration::from_secs(600),
            interval: Duration::from_secs(10),
        }
    }
}

pub async fn run(global: &GlobalArgs, args: DeleteClusterArgs) -> Result<i32> {
    // An external cluster needs no state store.
    let registry = if args.external && global.state.is_none() {
        kops_ops::open_state(Some("memory://external")).await?
    } else {
        state(global).await?
    };
    let DeleteClusterArgs {
        cluster_name: c,
        yes,
        unregister,
        external,
        region,
        count,
        wait,
        interval,
    } = args;
    let count = if count > 0 {
        count
    } else {
        let per_pass = interval.as_secs_f64().max(0.001);
        ((wait.as_secs_f64() / per_pass).ceil() as u32).max(1)
    };
    if external && c.is_none() && global.name.is_none() {
        anyhow::bail!("--name is required (for safety)\nhint: name the external cluster: `kops delete cluster NAME --external --region REGION`");
    }

    let cluster = match c.as_deref().or(global.name.as_deref()) {
        Some(n) => n.to_string(),
        None => kops_ops::resolve_cluster_name(&registry, None).await?,
    };
    if unregister {
        kops_ops::require_cluster(&registry, &cluster).await?;
        if !yes {
            let keys = registry.store().list(&format!("{cluster}/")).await?;
            let mut t = Table::new(&["TYPE", "NAME"]);
            for k in &keys {
                t.row(vec![
                    "state-store object".into(),
                    registry.store().url_of(k),
                ]);
            }
            print(&t.render());
            status("Must specify --yes to delete");
            return Ok(0);
        }
        let n = kops_ops::unregister_cluster(&registry, &cluster).await?;
        status(&format!(
            "Removed cluster {cluster} from the state store ({n} objects)."
        ));
        return Ok(0);
    }
    let progress = |r: &kops_cloud::Resource, blocked: Option<&str>| match blocked {
        None => status(&format!("  deleted  {} {} ({})", r.kind, r.id, r.name)),
        Some(why) => status(&format!("  waiting  {} {}: {why}", r.kind, r.id)),
    };
    let outcome = kops_ops::delete_cluster(
        &registry,
        kops_ops::DeleteRequest {
            cluster: cluster.clone(),
            yes,
            region,
            external,
            passes: count,
            interval,
            progress: Box::new(progress),
        },
    )
    .await?;
    if !yes {
        let mut t = Table::new(&["TYPE", "NAME", "ID"]);
        for r in &outcome.resources {
            let kind = if r.shared {
                format!("{} (shared, kept)", r.kind)
            } else {
                r.kind.to_string()
            };
            t.row(vec![kind, r.name.clone(), r.id.clone()]);
        }
        for k in &outcome.state_keys {
            t.row(vec![
                "state-store object".into(),
                k.clone(),
                registry.store().url_of(k),
            ]);
        }
        print(&t.render());
        status(&format!(
            "Must specify --yes to delete ({}{})",
            outcome.calls,
            crate::output::limit_waits(&outcome.limits)
        ));
        return Ok(0);
    }
    let report = outcome.report.unwrap_or_default();
    status(&format!(
        "Deleted cluster {cluster}: {} cloud resources in {} passes, {} kept as shared, {} ({}{}).",
        report.deleted.len(),
        report.passes,
        report.kept.len(),
        if external {
            "state store untouched (--external)"
        } else {
            "state removed"
        },
        outcome.calls,
        crate::output::limit_waits(&outcome.limits)
    ));
    Ok(0)
}
