//! `kops version`: the client version (`--server`: the kops version that
//! last updated the cluster, from its `kops-version.txt`).

use anyhow::Result;
use clap::Args;

use crate::args::GlobalArgs;
use crate::output::print;

#[derive(Debug, Args)]
pub struct VersionArgs {
    /// Print only the version number.
    #[arg(long)]
    pub short: bool,
    /// Also show the kOps version that made the last change to the state store.
    #[arg(long)]
    pub server: bool,
}

pub async fn run(global: &GlobalArgs, args: VersionArgs) -> Result<i32> {
    if args.short {
        print(&format!("{}\n", crate::VERSION));
    } else {
        print(&format!("Client version: {} (kops-rs)\n", crate::VERSION));
    }
    if args.server {
        let server = server_version(global).await;
        if args.short {
            print(&format!("{server}\n"));
        } else {
            print(&format!("Last applied server version: {server}\n"));
        }
    }
    Ok(0)
}

/// The cluster's `kops-version.txt`, or kops' words for what went wrong.
async fn server_version(global: &GlobalArgs) -> String {
    let Ok(registry) = kops_ops::open_state(global.state.as_deref()).await else {
        return "could not fetch cluster".into();
    };
    let Ok(name) = kops_ops::resolve_cluster_name(&registry, global.name.as_deref()).await else {
        return "could not fetch cluster".into();
    };
    if kops_ops::require_cluster(&registry, &name).await.is_err() {
        return "could not fetch cluster".into();
    }
    match registry
        .store()
        .read(&format!("{name}/kops-version.txt"))
        .await
    {
        Ok(Some(bytes)) => String::from_utf8_lossy(&bytes).trim_end().to_string(),
        _ => "could get cluster version".into(),
    }
}
