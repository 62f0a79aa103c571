//! node-problem-detector (`node-problem-detector.addons.k8s.io`), on when
//! `spec.nodeProblemDetector.enabled` is true: a DaemonSet on every Linux
//! node that turns kernel and systemd trouble into node conditions and
//! events.
//!
//! From `spec.nodeProblemDetector`: `image`, `cpuRequest`, `cpuLimit`,
//! `memoryRequest`, `memoryLimit`, with kops' defaults.

use serde_json::{json, Value};

use super::{pods, template, TemplateError};
use crate::Model;

const KEY: &str = "node-problem-detector.addons.k8s.io";
const TEMPLATE: &str = include_str!("node_problem_detector/manifest.yaml");
/// The image unless `image` says.
const IMAGE: &str = "registry.k8s.io/node-problem-detector/node-problem-detector:v0.8.18";

pub(super) fn objects(model: &Model<'_>) -> Result<Option<Vec<Value>>, TemplateError> {
    let Some(spec) = model.cluster.spec.node_problem_detector.as_ref() else {
        return Ok(None);
    };
    if spec.enabled != Some(true) {
        return Ok(None);
    }
    let text = |key: &str| -> Option<String> {
        match spec.extra.get(key)? {
            Value::String(s) if s.is_empty() => None,
            Value::String(s) => Some(s.clone()),
            Value::Null => None,
            other => Some(other.to_string()),
        }
    };
    let context = json!({
        "image": text("image").unwrap_or_else(|| IMAGE.into()),
        "cpu_request": text("cpuRequest").unwrap_or_else(|| "20m".into()),
        "cpu_limit": text("cpuLimit"),
        "memory_request": text("memoryRequest").unwrap_or_else(|| "100Mi".into()),
        "memory_limit": text("memoryLimit").unwrap_or_else(|| "100Mi".into()),
    });
    let mut objects = template::render(KEY, TEMPLATE, &context)?;
    pods::mark(&mut objects);
    Ok(Some(objects))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addons::tests::{assert_golden, cluster};
    use crate::security::tests::model;

    #[test]
    fn identical_to_kops_in_every_case() {
        assert_golden(KEY, 1);
    }

    #[test]
    fn cpu_limit_only_when_set() {
        let (mut cluster, groups) = cluster();
        assert!(objects(&model(&cluster, &groups)).unwrap().is_none());
        let mut spec = kops_api::cluster::EnabledSpec {
            enabled: Some(true),
            ..Default::default()
        };
        spec.extra.insert("cpuLimit".into(), json!("50m"));
        cluster.spec.node_problem_detector = Some(spec);
        let objects = objects(&model(&cluster, &groups)).unwrap().unwrap();
        let daemonset = objects.iter().find(|o| o["kind"] == "DaemonSet").unwrap();
        let limits = &daemonset["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"];
        assert_eq!(limits, &json!({"cpu": "50m", "memory": "100Mi"}));
    }
}
