//! `kops create keypair KEYSET`: add a CA keypair to a keyset (CA rotation).

use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::Args;
use kops_ops::pki;

use crate::args::GlobalArgs;
use crate::context::{cluster_name, state};
use crate::output::status;

#[derive(Debug, Args)]
pub struct CreateKeypairArgs {
    /// The keyset (e.g. kubernetes-ca, service-account), or `all` for every CA keyset.
    #[arg(value_name = "KEYSET")]
    pub keyset: String,
    /// A CA certificate to add (PEM); without it a new CA is made.
    #[arg(long, value_name = "FILE")]
    pub cert: Option<PathBuf>,
    /// The CA's private key (PEM).
    #[arg(long, value_name = "FILE")]
    pub key: Option<PathBuf>,
    /// Make the new keypair the one that signs.
    #[arg(long)]
    pub primary: bool,
}

fn read_pem(path: &Path) -> Result<String> {
    Ok(
        std::fs::read_to_string(path).map_err(|source| kops_ops::OpsError::ReadFile {
            path: path.display().to_string(),
            source,
        })?,
    )
}

pub async fn run(global: &GlobalArgs, a: CreateKeypairArgs) -> Result<i32> {
    let new = pki::NewKeypair {
        certificate_pem: a.cert.as_deref().map(read_pem).transpose()?,
        private_key_pem: a.key.as_deref().map(read_pem).transpose()?,
        primary: a.primary,
    };
    let registry = state(global).await?;
    let cluster = cluster_name(&registry, global, None).await?;
    for (keyset, id) in pki::create_keypair(&registry, &cluster, &a.keyset, &new).await? {
        status(&format!("Created {keyset} {id}"));
    }
    Ok(0)
}
