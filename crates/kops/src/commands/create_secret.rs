//! `kops create secret TYPE -f FILE`: store a dockerconfig, encryptionconfig or ciliumpassword secret.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args;
use kops_ops::pki;

use crate::args::GlobalArgs;
use crate::context::{cluster_name, state};
use crate::output::status;

#[derive(Debug, Args)]
pub struct CreateSecretArgs {
    /// The secret's type: dockerconfig, encryptionconfig or ciliumpassword.
    #[arg(value_name = "TYPE")]
    pub kind: String,
    /// Cluster name (positional form of --name).
    #[arg(value_name = "CLUSTER")]
    pub cluster_name: Option<String>,
    /// The file holding the secret (`-` reads stdin).
    #[arg(short = 'f', long = "filename", value_name = "FILE")]
    pub filename: PathBuf,
    /// Replace the secret if it exists.
    #[arg(long)]
    pub force: bool,
}

pub async fn run(global: &GlobalArgs, a: CreateSecretArgs) -> Result<i32> {
    // The type first: an unknown one fails before anything is read.
    pki::SecretKind::parse(&a.kind)?;
    let data = if a.filename == Path::new("-") {
        let mut buf = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut buf)
            .context("reading the secret from stdin")?;
        buf
    } else {
        std::fs::read(&a.filename).map_err(|source| kops_ops::OpsError::ReadFile {
            path: a.filename.display().to_string(),
            source,
        })?
    };
    let registry = state(global).await?;
    let cluster = cluster_name(&registry, global, a.cluster_name.as_deref()).await?;
    let kind = pki::create_secret(&registry, &cluster, &a.kind, &data, a.force).await?;
    status(&format!(
        "{} the {} secret of cluster {cluster}",
        if a.force { "Stored" } else { "Created" },
        kind.name()
    ));
    Ok(0)
}
