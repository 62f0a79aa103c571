//! IAM roles for the addons' pods (IRSA): with
//! `spec.iam.useServiceAccountExternalPermissions`, kops gives each pod
//! template running as a service account that has a role the role's ARN and
//! a projected token the AWS SDKs exchange for the role's credentials.

use serde_json::{json, Value};

use crate::iam::irsa::{self, ServiceAccount};
use crate::Model;

/// Where the projected token is mounted.
const TOKEN_DIR: &str = "/var/run/secrets/amazonaws.com/";
/// The token volume's name.
const VOLUME: &str = "token-amazonaws-com";

/// Adds the role to the pod templates (Deployments and DaemonSets) running
/// as one of `accounts` (service account names in the object's namespace),
/// when the cluster uses service-account roles. `None` when it does and the
/// AWS account is unknown: the role's ARN names it, so the addon stays a
/// placeholder.
pub(super) fn add(model: &Model<'_>, objects: &mut [Value], accounts: &[&str]) -> Option<()> {
    if !irsa::uses_service_account_permissions(model) {
        return Some(());
    }
    let account = model.account_id?;
    let region = crate::iam::region(model)?;
    let partition = crate::iam::partition(&region);
    for object in objects.iter_mut() {
        let workload = object["apiVersion"] == "apps/v1"
            && matches!(object["kind"].as_str(), Some("Deployment" | "DaemonSet"));
        if !workload {
            continue;
        }
        let namespace = object["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default")
            .to_string();
        let Some(pod) = object
            .pointer_mut("/spec/template/spec")
            .and_then(Value::as_object_mut)
        else {
            continue;
        };
        // `serviceAccount` is the deprecated spelling some of kops'
        // manifests use (dns-controller's).
        let name = ["serviceAccountName", "serviceAccount"]
            .iter()
            .find_map(|key| pod.get(*key).and_then(Value::as_str))
            .unwrap_or_default()
            .to_string();
        if !accounts.contains(&name.as_str()) {
            continue;
        }
        let role = irsa::role_name(model, &ServiceAccount { namespace, name });
        let arn = format!("arn:{partition}:iam::{account}:role/{role}");
        // kops rewrites the pod spec through its typed form, which drops
        // fields set to null (the containers' too).
        pod.retain(|_, v| !v.is_null());
        push(
            pod,
            "volumes",
            json!({
                "name": VOLUME,
                "projected": {
                    "defaultMode": 420,
                    "sources": [{"serviceAccountToken": {
                        "audience": irsa::AWS_AUDIENCE,
                        "expirationSeconds": 86400,
                        "path": "token",
                    }}],
                },
            }),
        );
        if let Some(containers) = pod.get_mut("containers").and_then(Value::as_array_mut) {
            for container in containers.iter_mut().filter_map(Value::as_object_mut) {
                container.retain(|_, v| !v.is_null());
                push(
                    container,
                    "volumeMounts",
                    json!({"mountPath": TOKEN_DIR, "name": VOLUME, "readOnly": true}),
                );
                push(
                    container,
                    "env",
                    json!({"name": "AWS_ROLE_ARN", "value": arn}),
                );
                push(
                    container,
                    "env",
                    json!({"name": "AWS_WEB_IDENTITY_TOKEN_FILE", "value": format!("{TOKEN_DIR}token")}),
                );
            }
        }
        let security = pod.entry("securityContext").or_insert_with(|| json!({}));
        if let Some(security) = security.as_object_mut() {
            security.entry("fsGroup").or_insert(json!(10001));
        }
    }
    Some(())
}

/// Appends `item` to the list `key` of `map`, creating the list.
fn push(map: &mut serde_json::Map<String, Value>, key: &str, item: Value) {
    let list = map.entry(key).or_insert_with(|| json!([]));
    if let Some(list) = list.as_array_mut() {
        list.push(item);
    }
}
