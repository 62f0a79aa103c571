//! `kops export kubeconfig`: write a kubeconfig for a cluster (merged into
//! $KUBECONFIG or ~/.kube/config).

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;

use crate::args::GlobalArgs;
use crate::context::{cluster_name, state};
use crate::kubeconfig::{write_kubeconfig, KubeconfigChoice, KubeconfigUserFlags};

#[derive(Debug, Args)]
pub struct ExportKubeconfigArgs {
    #[arg(value_name = "CLUSTER")]
    pub cluster_name: Option<String>,
    #[command(flatten)]
    pub who: KubeconfigUserFlags,
    /// The kubeconfig file to write (instead of $KUBECONFIG or ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The API server URL to write, as is.
    #[arg(long, value_name = "URL")]
    pub api_server: Option<String>,
    /// Export every cluster in the state store.
    #[arg(long)]
    pub all: bool,
    /// Use the kOps authentication plugin: the context's user runs
    /// `kops helpers kubectl-auth`, which issues a short-lived admin
    /// certificate from the state store, instead of a static credential.
    #[arg(long)]
    pub auth_plugin: bool,
}

pub async fn run(global: &GlobalArgs, a: ExportKubeconfigArgs) -> Result<i32> {
    let admin = a.who.admin_lifetime()?;
    if admin.is_some() && a.who.user.is_some() {
        return Err(kops_ops::pki::PkiOpsError::AdminAndUser.into());
    }
    if a.all && a.cluster_name.is_some() {
        bail!("cannot use both --all and a cluster name\nhint: `kops export kubeconfig --all` exports every cluster in the state store");
    }
    let files = kops_pki::KubeconfigFiles::resolve(
        a.kubeconfig.as_deref(),
        std::env::var("KUBECONFIG").ok().as_deref(),
        std::env::var_os("HOME").map(PathBuf::from).as_deref(),
    )
    .map_err(kops_ops::OpsError::from)?;
    let registry = state(global).await?;
    let clusters = if a.all {
        let all: Vec<String> = registry
            .list_clusters()
            .await?
            .iter()
            .map(|c| c.name().to_string())
            .collect();
        if all.is_empty() {
            bail!(
                "no clusters found in {}\nhint: check --state",
                registry.store().base_url()
            );
        }
        all
    } else {
        vec![cluster_name(&registry, global, a.cluster_name.as_deref()).await?]
    };
    for cluster in clusters {
        let request = KubeconfigChoice {
            admin,
            user: a.who.user.clone(),
            internal: a.who.internal,
            api_server: a.api_server.clone(),
            auth_plugin: a.auth_plugin,
        };
        write_kubeconfig(&registry, &cluster, request, files.clone()).await?;
    }
    Ok(0)
}
