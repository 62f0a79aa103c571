//! Not rendered yet: the state store gets a placeholder for this addon.

use serde_json::Value;

use crate::Model;

/// The addon's objects for this cluster; `None` while kops-rs does not
/// render it.
pub(super) fn objects(_model: &Model<'_>) -> Option<Vec<Value>> {
    None
}
