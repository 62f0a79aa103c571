//! What most commands start from: the state store (from --state,
//! KOPS_STATE_STORE or the config file), the cluster they work on, and
//! input files (`-` is stdin).

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use kops_ops::{OpsError, Registry};

use crate::cli::{GlobalArgs, KubeApiFlags};

pub async fn state(global: &GlobalArgs) -> Result<Registry> {
    Ok(kops_ops::open_state(global.state.as_deref()).await?)
}

pub async fn cluster_name(
    registry: &Registry,
    global: &GlobalArgs,
    positional: Option<&str>,
) -> Result<String> {
    let name = positional.or(global.name.as_deref());
    Ok(kops_ops::resolve_cluster_name(registry, name).await?)
}

pub fn read_input(path: &Path) -> Result<(String, String)> {
    if path == Path::new("-") {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("reading the manifest from stdin")?;
        return Ok(("<stdin>".to_string(), text));
    }
    let text = std::fs::read_to_string(path).map_err(|source| OpsError::ReadFile {
        path: path.display().to_string(),
        source,
    })?;
    Ok((path.display().to_string(), text))
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
    let Some(server) = &flags.api_server else {
        return Ok((kubeconfig.map(Path::to_path_buf), None));
    };
    let files = kops_pki::KubeconfigFiles::resolve(
        kubeconfig,
        std::env::var("KUBECONFIG").ok().as_deref(),
        std::env::var_os("HOME").map(PathBuf::from).as_deref(),
    )
    .map_err(OpsError::from)?;
    let source = files.files.iter().find(|f| f.exists()).ok_or_else(|| {
        anyhow::anyhow!(
            "--api-server {server}: no kubeconfig found ({})\nhint: export one with `kops export kubeconfig {cluster} --admin`",
            files.files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(", ")
        )
    })?;
    let text = std::fs::read_to_string(source)
        .with_context(|| format!("reading {}", source.display()))?;
    let mut doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text)
        .with_context(|| format!("{} is not YAML", source.display()))?;
    let named = |doc: &serde_yaml_ng::Value, section: &str, name: &str| -> Option<serde_yaml_ng::Value> {
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
        .and_then(|c| c.get("context")?.get("cluster")?.as_str().map(str::to_string))
        .ok_or_else(|| anyhow::anyhow!("{}: context `{context}` names no cluster", source.display()))?;
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
    kops_ops::pki::export_kubeconfig(
        registry,
        kops_ops::pki::ExportKubeconfigRequest {
            cluster: cluster.to_string(),
            admin: Some(lifetime),
            user: None,
            internal: false,
            api_server,
            files: kops_pki::KubeconfigFiles {
                files: vec![path.clone()],
            },
            local_user: None,
            lookup_load_balancer: true,
            sdk_config: None,
        },
    )
    .await?;
    Ok((path, dir))
}
