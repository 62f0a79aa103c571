//! What most commands start from: the state store (from --state,
//! KOPS_STATE_STORE or the config file), the cluster they work on, and
//! input files (`-` is stdin).

use std::io::Read;
use std::path::Path;

use anyhow::{Context, Result};
use kops_ops::{OpsError, Registry};

use crate::args::GlobalArgs;

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
