//! cert-manager (`certmanager.io`), which issues certificates inside the
//! cluster (kops' own addons use it for their webhooks when it is there).
//!
//! The manifest is cert-manager's release (its CRDs and the cainjector,
//! controller and webhook deployments in kube-system); from
//! `spec.certManager`: `nameservers` (the controller's DNS servers for
//! DNS-01 checks), `defaultIssuer` (a ClusterIssuer for ingress-shim),
//! `featureGates`. On AWS the controller is told its region (Route 53's
//! STS endpoint); with `hostedZoneIDs` and service-account roles it assumes
//! its own role.

use serde_json::{json, Value};

use super::{service_account_role, template, TemplateError};
use crate::Model;

const TEMPLATE: &str = include_str!("certmanager/manifest.yaml");
/// The controller's service account, which has a role when cert-manager
/// manages DNS-01 records in hosted zones.
const SERVICE_ACCOUNT: &str = "cert-manager";

pub(super) fn objects(model: &Model<'_>) -> Result<Option<Vec<Value>>, TemplateError> {
    let spec = model.cluster.spec.cert_manager.clone().unwrap_or_default();
    let setting = |key: &str| spec.extra.get(key).filter(|v| !v.is_null());
    let nameservers: Vec<&str> = setting("nameservers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let default_issuer = setting("defaultIssuer")
        .and_then(Value::as_str)
        .filter(|i| !i.is_empty());
    // A map: its keys sorted, as kops ranges over it.
    let feature_gates: Vec<String> = setting("featureGates")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(gate, on)| match on {
            Value::String(s) => format!("{gate}={s}"),
            other => format!("{gate}={other}"),
        })
        .collect();
    let hosted_zones = setting("hostedZoneIDs")
        .and_then(Value::as_array)
        .is_some_and(|z| !z.is_empty());
    let context = json!({
        "nameservers": nameservers,
        "default_issuer": default_issuer,
        "feature_gates": feature_gates,
        // Only AWS' Route 53 solver needs the region.
        "region": crate::iam::region(model)
            .filter(|_| model.cluster.spec.cloud_provider.as_deref() != Some("gce")),
    });
    let mut objects = template::render("certmanager.io", TEMPLATE, &context)?;
    for object in &mut objects {
        mark_pods(object);
    }
    if hosted_zones && service_account_role::add(model, &mut objects, &[SERVICE_ACCOUNT]).is_none()
    {
        return Ok(None);
    }
    Ok(Some(objects))
}

/// kops labels the pods of every addon workload as its own.
fn mark_pods(object: &mut Value) {
    let workload = object["apiVersion"] == "apps/v1"
        && matches!(object["kind"].as_str(), Some("Deployment" | "DaemonSet"));
    if !workload {
        return;
    }
    if let Some(labels) = object
        .pointer_mut("/spec/template/metadata/labels")
        .and_then(Value::as_object_mut)
    {
        labels.insert("kops.k8s.io/managed-by".into(), json!("kops"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addons::tests::{cluster, compare_golden_in_account};
    use crate::security::tests::model;

    const KEY: &str = "certmanager.io";

    #[test]
    fn identical_to_kops_in_every_case() {
        let (identical, placeholders) = compare_golden_in_account(KEY, |_, _| {});
        assert_eq!(placeholders, 0);
        if kops_testkit::shared_dir().is_some() {
            assert!(identical > 0);
        }
    }

    #[test]
    fn spec_settings_reach_the_controller() {
        let (mut cluster, groups) = cluster();
        cluster.spec.cert_manager = Some(
            serde_json::from_value(json!({
                "enabled": true,
                "nameservers": ["1.1.1.1"],
                "defaultIssuer": "letsencrypt",
            }))
            .unwrap(),
        );
        let model = model(&cluster, &groups);
        let objects = objects(&model).unwrap().unwrap();
        let controller = objects
            .iter()
            .find(|o| o["kind"] == "Deployment" && o["metadata"]["name"] == "cert-manager")
            .unwrap();
        let pod = &controller["spec"]["template"]["spec"];
        assert_eq!(pod["dnsConfig"]["nameservers"], json!(["1.1.1.1"]));
        assert_eq!(pod["dnsPolicy"], "None");
        let args = pod["containers"][0]["args"].as_array().unwrap();
        assert!(args.contains(&json!("--default-issuer-name=letsencrypt")));
    }
}
