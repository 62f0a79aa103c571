//! The node side of kops-rs: what turns an instance into a Kubernetes node.
//!
//! The pure part (no IO, usable by kops-model): [`config`] (kops'
//! `nodeup.Config`, its builder from the cluster and instance group, its
//! stored YAML and hash), [`assets`] (the files nodes download, their URLs
//! with `spec.assets.fileRepository` applied, and their sha256 from the
//! compiled table [`known_hashes`] or the spec), and [`bootstrap`] (the boot
//! config and the user-data script that fetches and runs nodeup).
//!
//! The IO part, behind the default `agent` feature: [`agent`], the nodeup
//! agent that reads its config from the state store, downloads and checks
//! assets, and writes the node's files under a root directory. It must not
//! depend on kops-model, kops-ops or the AWS task crates, and it never
//! prints: the `nodeup` binary renders what it returns.

pub mod assets;
pub mod bootstrap;
pub mod config;
pub mod known_hashes;

#[cfg(feature = "agent")]
pub mod agent;

pub use assets::{Arch, Asset, AssetError};
pub use bootstrap::{user_data, BootConfig};
pub use config::{
    config_hash, nodeup_config, nodeup_config_key, render_yaml, rendered, rendered_all,
    NodeupConfig, RenderedNodeupConfig,
};
