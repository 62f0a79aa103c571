//! kopeio networking (`networking.kope.io`): kops' own agent DaemonSet
//! routing pod subnets between nodes, and its RBAC. The manifest
//! (`kopeio/manifest.yaml`) is kops' and has no setting.

use serde_json::{json, Value};

use super::{template, TemplateError};
use crate::Model;

/// The addon's objects; `None` when the cluster does not run kopeio.
pub(super) fn objects(model: &Model<'_>) -> Result<Option<Vec<Value>>, TemplateError> {
    let kopeio = model
        .cluster
        .spec
        .networking
        .as_ref()
        .and_then(|n| n.kopeio.as_ref());
    if kopeio.is_none() {
        return Ok(None);
    }
    template::render(
        "networking.kope.io",
        include_str!("kopeio/manifest.yaml"),
        &json!({}),
    )
    .map(Some)
}

#[cfg(test)]
mod tests {
    use crate::addons::tests::compare_golden;

    #[test]
    fn identical_to_kops_in_every_golden_case() {
        let (identical, placeholders) = compare_golden("networking.kope.io", |_, _| {});
        assert_eq!(placeholders, 0);
        if kops_testkit::shared_dir().is_some() {
            assert!(identical >= 1, "{identical} golden cases");
        }
    }
}
