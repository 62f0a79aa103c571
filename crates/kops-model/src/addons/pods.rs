//! kops labels the pods of every addon workload it renders from a template
//! (`kops.k8s.io/managed-by: kops` on the pod template), so it can tell its
//! own pods from others'.

use serde_json::{json, Value};

/// Adds kops' label to the pod templates of the Deployments and DaemonSets
/// among `objects`.
pub(super) fn mark(objects: &mut [Value]) {
    for object in objects.iter_mut() {
        let workload = object["apiVersion"] == "apps/v1"
            && matches!(object["kind"].as_str(), Some("Deployment" | "DaemonSet"));
        if !workload {
            continue;
        }
        let Some(metadata) = object
            .pointer_mut("/spec/template/metadata")
            .and_then(Value::as_object_mut)
        else {
            continue;
        };
        let labels = metadata.entry("labels").or_insert_with(|| json!({}));
        if let Some(labels) = labels.as_object_mut() {
            labels.insert("kops.k8s.io/managed-by".into(), json!("kops"));
        }
    }
}
