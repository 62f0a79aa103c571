//! The addon applier: what kops' `channels apply channel` does on control-plane
//! nodes. It reads the bootstrap channel (`addons/bootstrap-channel.yaml` in
//! the state store, written by `kops update cluster`) and the cluster's
//! custom addons (`spec.addons[].manifest`: an `Addons` index or a plain
//! manifest, by URL), compares each addon with
//! what the cluster records as installed, and for the addons that changed
//! applies their manifests with server-side apply, prunes what the manifest no
//! longer has, and records the new version.
//!
//! The record is kops' own: an annotation `addons.k8s.io/<addon>` on the
//! `kube-system` namespace holding `{"channel", "id", "manifestHash",
//! "systemGeneration"}`, so a cluster that kops set up is not re-applied after
//! switching, and the other way round.
//!
//! [`channel`] is pure (parsing, the decision what to apply, the objects of a
//! manifest); [`apply`] talks to the Kubernetes API (kube-rs) and the state
//! store (kops-state). This crate must not depend on the cloud or on the
//! cluster model: the channel file is its whole input.

pub mod apply;
pub mod channel;

pub use apply::{
    apply_channel, apply_channels, channels_from_pod_manifest, client_from_kubeconfig,
    list_installed, AddonOutcome, ApplyOptions, ChannelReport, HttpFuture, HttpGet, InstalledAddon,
    NewCa, Report,
};
pub use channel::{Channel, ChannelError, InstalledVersion, Reason};

/// Everything that can go wrong applying a channel.
#[derive(Debug, thiserror::Error)]
pub enum ChannelsError {
    #[error(transparent)]
    Channel(#[from] ChannelError),
    #[error("state store: {0}")]
    Store(#[from] kops_state::StoreError),
    #[error("{what} is not in the state store at {url}\nhint: run `kops update cluster --yes` to write it")]
    Missing { what: String, url: String },
    #[error("{url}: a channel is a URL (https://, s3://, file://); legacy addon names are not supported")]
    NotAUrl { url: String },
    #[error("reading {url}: {message}")]
    Fetch { url: String, message: String },
    #[error("addon {addon} has no manifest")]
    NoManifest { addon: String },
    #[error("addon {addon} needs PKI (a CA and a cert-manager issuer): {message}")]
    NeedsPki { addon: String, message: String },
    #[error("namespace {namespace} does not exist, so addon records cannot be read\nhint: is the API server fully up?")]
    NoRecordNamespace { namespace: String },
    #[error("the API server's version {version:?} is not a version")]
    Version { version: String },
    #[error("kubeconfig {path}: {message}")]
    Kubeconfig { path: String, message: String },
    #[error("Kubernetes API: {context}: {source}")]
    Kube {
        context: String,
        #[source]
        source: kube::Error,
    },
}
