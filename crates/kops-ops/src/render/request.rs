//! What `update cluster --target` is asked and answers, and what each
//! cloud's render is handed and hands back.

use std::path::PathBuf;

use kops_model::files::StateFile;

use crate::OpsError;

/// The file formats `update cluster` can write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RenderTarget {
    Terraform,
    CloudFormation,
}

impl RenderTarget {
    /// The output directory when none is given (kops' defaults).
    pub fn default_out(self) -> PathBuf {
        match self {
            RenderTarget::Terraform => PathBuf::from("out/terraform"),
            RenderTarget::CloudFormation => PathBuf::from("out/cloudformation"),
        }
    }
}

pub struct RenderRequest {
    pub cluster: String,
    pub target: RenderTarget,
    /// `None`: [`RenderTarget::default_out`].
    pub out: Option<PathBuf>,
    /// `--phase network`: only the network's resources (the other phases
    /// build on objects a file target cannot look up, and are refused).
    pub phase: Option<crate::update::options::Phase>,
}

#[derive(Debug)]
pub struct RenderOutcome {
    pub out: PathBuf,
    /// Written, relative to `out`.
    pub files: Vec<String>,
    /// Tasks in the graph.
    pub tasks: usize,
    /// State-store files written directly (not managed by the rendered files).
    pub state_files_written: Vec<String>,
    /// Task types without a renderer (a bug to report; empty normally).
    pub unrendered: Vec<String>,
    /// What the render could not fill in, one line each, with how to get
    /// it (the account without credentials).
    pub warnings: Vec<String>,
}

/// How long the render waits for the account before rendering without it:
/// a credential source that does not answer (an unreachable endpoint, an
/// identity provider down) must not hold up a render that can do without.
pub const ACCOUNT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum RenderClusterError {
    #[error(transparent)]
    Ops(#[from] OpsError),
    #[error(transparent)]
    Render(#[from] kops_render::RenderError),
    #[error("{0}")]
    NodeConfig(String),
    /// The service-account keyset (for the published JWKS).
    #[error(transparent)]
    Pki(#[from] kops_pki::PkiError),
    #[error("cannot write `{path}`: {source}\nhint: check that the output directory (--out) is writable")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl From<kops_model::ModelError> for RenderClusterError {
    fn from(e: kops_model::ModelError) -> Self {
        Self::Ops(e.into())
    }
}

impl From<kops_state::registry::RegistryError> for RenderClusterError {
    fn from(e: kops_state::registry::RegistryError) -> Self {
        Self::Ops(e.into())
    }
}

/// What every cloud's render shares: the cluster, its groups and keys,
/// where its state lives, and what node configs and user data need.
pub(crate) struct Prepared {
    pub cluster: kops_api::Cluster,
    pub groups: Vec<kops_api::InstanceGroup>,
    pub ssh_public_key: Option<String>,
    pub config_base: String,
    pub region: String,
    pub node_inputs: kops_nodeup::config::NodeInputs,
}

/// What a cloud's render hands back to be written.
pub(crate) struct CloudRender {
    pub outcome: kops_render::Outcome,
    /// The state-store files (rendered as objects, or written to the store).
    pub files: Vec<StateFile>,
    pub tasks: usize,
    pub warnings: Vec<String>,
}
