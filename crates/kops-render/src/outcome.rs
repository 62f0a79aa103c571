//! What a render makes, and why it can fail.

use std::collections::BTreeMap;

use kops_engine::TaskKey;

/// Why a graph could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("`{key}` is referenced (for `{attr}`) but renders to no resource\nhint: this is a bug in the renderer; please report it with the cluster spec")]
    Reference { key: TaskKey, attr: String },
    #[error("{what} cannot be rendered\nhint: {hint}")]
    Unsupported { what: String, hint: String },
}

/// Files to write, by path relative to the output directory.
#[derive(Debug, Clone, Default)]
pub struct Rendered {
    pub files: BTreeMap<String, Vec<u8>>,
}

/// A render and the tasks it had no renderer for.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    pub rendered: Rendered,
    pub unrendered: Vec<TaskKey>,
}
