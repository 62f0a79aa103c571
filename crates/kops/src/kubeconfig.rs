//! The kubeconfigs commands write and read: the entry `export kubeconfig`
//! and `update cluster --yes` merge, the copy with `--api-server`'s server,
//! and a temporary admin kubeconfig from the state store's CA.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use kops_ops::kubeconfig::{self, ExportKubeconfigRequest};
use kops_ops::OpsError;

use clap::Args;

use crate::args::KubeApiFlags;
use crate::output::status;

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

/// `--admin`, `--user` and `--internal`: the user and the API name a
/// written kubeconfig gets (`export kubeconfig`, and `update cluster` after
/// applying, where each implies `--create-kube-config`).
#[derive(Debug, Args, Default, Clone)]
pub struct KubeconfigUserFlags {
    /// Also write an admin user (client certificate from the cluster CA) valid this long; `--admin` alone is 18h.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "18h", value_name = "DURATION")]
    pub admin: Option<String>,
    /// Use this existing kubeconfig user in the context.
    #[arg(long, value_name = "USER")]
    pub user: Option<String>,
    /// Use the cluster's internal API name (api.internal.CLUSTER).
    #[arg(long)]
    pub internal: bool,
}

impl KubeconfigUserFlags {
    /// The admin credential's lifetime, when `--admin` was given.
    pub fn admin_lifetime(&self) -> Result<Option<Duration>> {
        self.admin.as_deref().map(parse_admin).transpose()
    }
}

pub fn parse_admin(text: &str) -> Result<Duration> {
    match humantime::parse_duration(text.trim()) {
        Ok(d) => Ok(d),
        Err(e) => bail!("`--admin={text}` is not a duration ({e})\nhint: write e.g. `--admin=18h` or `--admin=1h30m`; `--admin` alone means 18h"),
    }
}

/// Who the kubeconfig's context is and which server it names.
#[derive(Debug, Clone, Default)]
pub struct KubeconfigChoice {
    /// `--admin`: a new admin credential this long.
    pub admin: Option<Duration>,
    /// `--user`: an existing kubeconfig user.
    pub user: Option<String>,
    /// `--internal`: the internal API name.
    pub internal: bool,
    /// `--api-server`: this URL as is.
    pub api_server: Option<String>,
    /// `--auth-plugin`: kops' exec credential plugin instead of a certificate.
    pub auth_plugin: bool,
}

/// Merges `cluster`'s entry into `files` and prints what was set, as
/// `export kubeconfig` does (also `update cluster --yes`'s kubeconfig).
pub async fn write_kubeconfig(
    registry: &kops_ops::Registry,
    cluster: &str,
    choice: KubeconfigChoice,
    files: kops_pki::KubeconfigFiles,
) -> Result<()> {
    let outcome = kubeconfig::export_kubeconfig(
        registry,
        ExportKubeconfigRequest {
            cluster: cluster.to_string(),
            admin: choice.admin,
            user: choice.user,
            internal: choice.internal,
            api_server: choice.api_server,
            files,
            local_user: local_user_name(),
            auth_plugin_state: choice
                .auth_plugin
                .then(|| registry.store().base_url().to_string()),
            lookup_load_balancer: true,
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
    Ok(())
}

/// The kubeconfig files of this user: `explicit` (`--kubeconfig`), else
/// KUBECONFIG's, else ~/.kube/config.
pub fn local_kubeconfig_files(explicit: Option<&Path>) -> Result<kops_pki::KubeconfigFiles> {
    Ok(kops_pki::KubeconfigFiles::resolve(
        explicit,
        std::env::var("KUBECONFIG").ok().as_deref(),
        std::env::var_os("HOME").map(PathBuf::from).as_deref(),
    )
    .map_err(OpsError::from)?)
}

/// The kubeconfig a command reads the Kubernetes API from: `--kubeconfig`
/// (else KUBECONFIG's first file, else ~/.kube/config), with the cluster's
/// server replaced by `--api-server` when given (a copy in a temporary
/// directory, which lives as long as the returned guard).
pub fn kubeconfig_for(
    flags: &KubeApiFlags,
    kubeconfig: Option<&Path>,
    cluster: &str,
) -> Result<(Option<PathBuf>, Option<tempfile::TempDir>)> {
    if flags.use_kubeconfig {
        // kops then loads the context named after the cluster, and only it.
        let files = local_kubeconfig_files(kubeconfig)?;
        if !files.files.iter().any(|f| f.exists()) || !files.has_context(cluster) {
            bail!(
                "loading kubecfg settings for \"{cluster}\": context \"{cluster}\" does not exist in {}\nhint: export it with `kops export kubeconfig {cluster} --admin`, or leave out --use-kubeconfig",
                files.describe()
            );
        }
    }
    let Some(server) = &flags.api_server else {
        return Ok((kubeconfig.map(Path::to_path_buf), None));
    };
    let files = local_kubeconfig_files(kubeconfig)?;
    let source = files.files.iter().find(|f| f.exists()).ok_or_else(|| {
        anyhow::anyhow!(
            "--api-server {server}: no kubeconfig found ({})\nhint: export one with `kops export kubeconfig {cluster} --admin`",
            files.files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(", ")
        )
    })?;
    let text =
        std::fs::read_to_string(source).with_context(|| format!("reading {}", source.display()))?;
    let mut doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text)
        .with_context(|| format!("{} is not YAML", source.display()))?;
    let named =
        |doc: &serde_yaml_ng::Value, section: &str, name: &str| -> Option<serde_yaml_ng::Value> {
            doc.get(section)?
                .as_sequence()?
                .iter()
                .find(|e| e.get("name").and_then(|n| n.as_str()) == Some(name))
                .cloned()
        };
    let context = named(&doc, "contexts", cluster)
        .map(|_| cluster.to_string())
        .or_else(|| doc.get("current-context").and_then(|c| c.as_str()).map(str::to_string))
        .ok_or_else(|| anyhow::anyhow!("{} has no context `{cluster}`\nhint: export one with `kops export kubeconfig {cluster}`", source.display()))?;
    let kube_cluster = named(&doc, "contexts", &context)
        .and_then(|c| {
            c.get("context")?
                .get("cluster")?
                .as_str()
                .map(str::to_string)
        })
        .ok_or_else(|| {
            anyhow::anyhow!("{}: context `{context}` names no cluster", source.display())
        })?;
    if let Some(list) = doc.get_mut("clusters").and_then(|c| c.as_sequence_mut()) {
        for entry in list {
            if entry.get("name").and_then(|n| n.as_str()) == Some(kube_cluster.as_str()) {
                if let Some(c) = entry.get_mut("cluster").and_then(|c| c.as_mapping_mut()) {
                    c.insert("server".into(), server.as_str().into());
                }
            }
        }
    }
    if let Some(m) = doc.as_mapping_mut() {
        m.insert("current-context".into(), context.as_str().into());
    }
    let dir = tempfile::tempdir().context("creating a temporary directory")?;
    let path = dir.path().join("kubeconfig");
    std::fs::write(&path, serde_yaml_ng::to_string(&doc)?)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok((Some(path), Some(dir)))
}

/// A kubeconfig in a temporary directory holding an admin credential of
/// `lifetime` for `cluster`, issued from the state store's CA (as kops
/// reaches the API without a local kubeconfig); `api_server` overrides the
/// server.
pub async fn admin_kubeconfig(
    registry: &kops_ops::Registry,
    cluster: &str,
    lifetime: std::time::Duration,
    api_server: Option<String>,
) -> Result<(PathBuf, tempfile::TempDir)> {
    let dir = tempfile::tempdir().context("creating a temporary directory")?;
    let path = dir.path().join("kubeconfig");
    kops_ops::kubeconfig::export_kubeconfig(
        registry,
        kops_ops::kubeconfig::ExportKubeconfigRequest {
            cluster: cluster.to_string(),
            admin: Some(lifetime),
            user: None,
            internal: false,
            api_server,
            files: kops_pki::KubeconfigFiles {
                files: vec![path.clone()],
            },
            local_user: None,
            auth_plugin_state: None,
            lookup_load_balancer: true,
        },
    )
    .await?;
    Ok((path, dir))
}
