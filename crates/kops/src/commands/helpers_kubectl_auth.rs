//! `kops helpers kubectl-auth` (hidden, as in kops): the exec credential
//! plugin `export kubeconfig --auth-plugin` points kubectl at; prints an
//! `ExecCredential` with a short-lived admin certificate (cached).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::Args;
use kops_ops::kubectl_auth::{kubectl_auth, KubectlAuthRequest};

use crate::args::GlobalArgs;
use crate::context::state;
use crate::kubeconfig::local_user_name;
use crate::output::print;

#[derive(Debug, Args)]
pub struct KubectlAuthArgs {
    /// Version of client.authentication.k8s.io schema in use.
    #[arg(long, default_value = "v1beta1", value_name = "VERSION")]
    pub api_version: String,
    /// Cluster to target.
    #[arg(long, value_name = "CLUSTER")]
    pub cluster: Option<String>,
    /// Lifetime of the credential to issue.
    #[arg(long, default_value = "1h", value_parser = crate::args::parse_duration, value_name = "DURATION")]
    pub lifetime: Duration,
}

pub async fn run(global: &GlobalArgs, a: KubectlAuthArgs) -> Result<i32> {
    let Some(cluster) = a.cluster.filter(|c| !c.is_empty()) else {
        bail!("ClusterName is required\nhint: pass --cluster NAME");
    };
    let registry = state(global).await?;
    let request = KubectlAuthRequest {
        cluster,
        state: global.state.clone().unwrap_or_default(),
        lifetime: a.lifetime,
        api_version: a.api_version,
        local_user: local_user_name(),
        home: std::env::var_os("HOME").map(PathBuf::from),
    };
    print(&kubectl_auth(&registry, &request).await?);
    Ok(0)
}
