//! `kops export kubeconfig`: write a kubeconfig for a cluster (merged into
//! $KUBECONFIG or ~/.kube/config).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::Args;
use kops_ops::pki::{self, ExportKubeconfigRequest};

use crate::cli::GlobalArgs;
use crate::context::{cluster_name, state};
use crate::output::status;

#[derive(Debug, Args)]
pub struct ExportKubeconfigArgs {
    #[arg(value_name = "CLUSTER")]
    pub cluster_name: Option<String>,
    /// Also write an admin user (client certificate from the cluster CA) valid this long; `--admin` alone is 18h.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "18h", value_name = "DURATION")]
    pub admin: Option<String>,
    /// Use this existing kubeconfig user in the context.
    #[arg(long, value_name = "USER")]
    pub user: Option<String>,
    /// Use the cluster's internal API name (api.internal.CLUSTER).
    #[arg(long)]
    pub internal: bool,
    /// The kubeconfig file to write (instead of $KUBECONFIG or ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The API server URL to write, as is.
    #[arg(long, value_name = "URL")]
    pub api_server: Option<String>,
    /// Export every cluster in the state store.
    #[arg(long)]
    pub all: bool,
    /// Use the kOps authentication plugin (`kops helpers kubectl-auth`),
    /// which kops-rs does not have: refused with a hint.
    #[arg(long)]
    pub auth_plugin: bool,
}

/// The local user's name as kops puts it in `kubecfg-<name>`: the name field
/// of the password database entry, else `$USER`.
pub fn local_user_name() -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let uid = std::fs::metadata("/proc/self").ok().map(|m| m.uid());
    let from_passwd = uid.and_then(|uid| {
        let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
        passwd.lines().find_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            (fields.len() > 4 && fields[2] == uid.to_string()).then(|| {
                let gecos = fields[4].split(',').next().unwrap_or("").trim();
                if gecos.is_empty() {
                    fields[0].to_string()
                } else {
                    gecos.to_string()
                }
            })
        })
    });
    from_passwd.or_else(|| std::env::var("USER").ok().filter(|u| !u.is_empty()))
}

pub fn parse_admin(text: &str) -> Result<Duration> {
    match humantime::parse_duration(text.trim()) {
        Ok(d) => Ok(d),
        Err(e) => bail!("`--admin={text}` is not a duration ({e})\nhint: write e.g. `--admin=18h` or `--admin=1h30m`; `--admin` alone means 18h"),
    }
}

pub async fn run(global: &GlobalArgs, a: ExportKubeconfigArgs) -> Result<i32> {
    if a.auth_plugin {
        bail!("--auth-plugin: kops-rs has no authentication plugin (kops' `kops helpers kubectl-auth`)\nhint: use `--admin[=DURATION]` for a client certificate, or `--user USER` for an existing kubeconfig user");
    }
    let admin = a.admin.as_deref().map(parse_admin).transpose()?;
    if admin.is_some() && a.user.is_some() {
        return Err(pki::PkiOpsError::AdminAndUser.into());
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
        let outcome = pki::export_kubeconfig(
            &registry,
            ExportKubeconfigRequest {
                cluster,
                admin,
                user: a.user.clone(),
                internal: a.internal,
                api_server: a.api_server.clone(),
                files: files.clone(),
                local_user: local_user_name(),
                lookup_load_balancer: true,
                sdk_config: None,
            },
        )
        .await?;
        for w in &outcome.warnings {
            status(&format!("Warning: {w}"));
        }
        status(&format!(
            "kOps has set your kubectl context to {} (server {}, in {})",
            outcome.context,
            outcome.server,
            outcome
                .files_written
                .iter()
                .map(|f| f.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok(0)
}
