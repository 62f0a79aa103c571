//! The EKS pod identity webhook (`eks-pod-identity-webhook.addons.k8s.io`),
//! on when `spec.podIdentityWebhook.enabled` is true: a mutating webhook
//! that gives the pods of each service account listed in
//! `spec.iam.serviceAccountExternalPermissions` (with AWS permissions) its
//! IAM role's ARN and a projected token, so workloads outside kops' own
//! addons get service-account roles too.
//!
//! From `spec.podIdentityWebhook`: `replicas` (default 2). The mappings
//! name the AWS account: without it (and with mappings) the addon stays a
//! placeholder. kops' suite has no case with the webhook, so this follows
//! kops' template and defaults without a golden comparison.

use serde_json::{json, Map, Value};

use super::{pods, template, TemplateError};
use crate::iam::irsa::{self, ServiceAccount};
use crate::Model;

const KEY: &str = "eks-pod-identity-webhook.addons.k8s.io";
const TEMPLATE: &str = include_str!("pod_identity_webhook/manifest.yaml");

/// Whether the cluster asks for the webhook.
pub(super) fn enabled(model: &Model<'_>) -> bool {
    model
        .cluster
        .spec
        .extra
        .get("podIdentityWebhook")
        .and_then(|w| w.get("enabled"))
        .and_then(Value::as_bool)
        == Some(true)
}

pub(super) fn objects(model: &Model<'_>) -> Result<Option<Vec<Value>>, TemplateError> {
    if !enabled(model) {
        return Ok(None);
    }
    let Some(region) = crate::iam::region(model) else {
        return Ok(None);
    };
    let Some(config) = config(model, &region) else {
        return Ok(None);
    };
    let replicas = model.cluster.spec.extra["podIdentityWebhook"]
        .get("replicas")
        .and_then(Value::as_u64)
        .filter(|r| *r > 0)
        .unwrap_or(2);
    let context = json!({"replicas": replicas, "region": region, "config": config});
    let mut objects = template::render(KEY, TEMPLATE, &context)?;
    pods::mark(&mut objects);
    Ok(Some(objects))
}

/// The webhook's configuration: a JSON object from `<namespace>/<name>` to
/// the service account's role, keys sorted and fields in kops' order, as
/// kops writes it. `None` when a role needs the unknown AWS account.
fn config(model: &Model<'_>, region: &str) -> Option<String> {
    let partition = crate::iam::partition(region);
    let permissions = model
        .cluster
        .spec
        .iam
        .as_ref()
        .and_then(|i| i.service_account_external_permissions.as_ref());
    let mut mappings = std::collections::BTreeMap::new();
    for permission in permissions.into_iter().flatten() {
        if permission.aws.is_none() {
            continue;
        }
        let account = model.account_id?;
        let sa = ServiceAccount {
            namespace: permission.namespace.clone(),
            name: permission.name.clone(),
        };
        let role = irsa::role_name(model, &sa);
        let mut mapping = Map::new();
        mapping.insert(
            "RoleARN".into(),
            json!(format!("arn:{partition}:iam::{account}:role/{role}")),
        );
        mapping.insert("Audience".into(), json!(irsa::AWS_AUDIENCE));
        mapping.insert("UseRegionalSTS".into(), json!(true));
        mapping.insert("TokenExpiration".into(), json!(0));
        mappings.insert(format!("{}/{}", sa.namespace, sa.name), mapping);
    }
    // Each mapping's fields keep kops' order, which serde_json's sorted
    // maps would not: write the object by hand.
    let entries: Vec<String> = mappings
        .iter()
        .map(|(key, mapping)| {
            let fields: Vec<String> = ["RoleARN", "Audience", "UseRegionalSTS", "TokenExpiration"]
                .iter()
                .map(|f| format!("{}:{}", json!(f), mapping[*f]))
                .collect();
            format!("{}:{{{}}}", json!(key), fields.join(","))
        })
        .collect();
    Some(format!("{{{}}}", entries.join(",")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addons::tests::cluster;
    use crate::security::tests::model;

    fn with_webhook() -> (kops_api::Cluster, Vec<kops_api::InstanceGroup>) {
        let (mut cluster, groups) = cluster();
        cluster
            .spec
            .extra
            .insert("podIdentityWebhook".into(), json!({"enabled": true}));
        (cluster, groups)
    }

    #[test]
    fn off_unless_enabled() {
        let (cluster, groups) = cluster();
        assert!(objects(&model(&cluster, &groups)).unwrap().is_none());
    }

    #[test]
    fn maps_each_service_account_to_its_role() {
        let (mut cluster, groups) = with_webhook();
        cluster.spec.iam = serde_json::from_value(json!({
            "serviceAccountExternalPermissions": [
                {"name": "b", "namespace": "web", "aws": {"policyARNs": ["arn:aws:iam::aws:policy/X"]}},
                {"name": "a", "namespace": "web", "aws": {"policyARNs": ["arn:aws:iam::aws:policy/X"]}},
            ],
        }))
        .unwrap();
        let mut model = model(&cluster, &groups);
        assert!(objects(&model).unwrap().is_none(), "needs the account");
        model.account_id = Some("111122223333");
        let objects = objects(&model).unwrap().unwrap();
        let config = objects.iter().find(|o| o["kind"] == "ConfigMap").unwrap();
        assert_eq!(
            config["data"]["config"],
            "{\"web/a\":{\"RoleARN\":\"arn:aws:iam::111122223333:role/a.web.sa.addons.example.com\",\
             \"Audience\":\"amazonaws.com\",\"UseRegionalSTS\":true,\"TokenExpiration\":0},\
             \"web/b\":{\"RoleARN\":\"arn:aws:iam::111122223333:role/b.web.sa.addons.example.com\",\
             \"Audience\":\"amazonaws.com\",\"UseRegionalSTS\":true,\"TokenExpiration\":0}}"
        );
        let deployment = objects.iter().find(|o| o["kind"] == "Deployment").unwrap();
        assert_eq!(deployment["spec"]["replicas"], 2);
        let args = deployment["spec"]["template"]["spec"]["containers"][0]["command"].to_string();
        assert!(args.contains("--aws-default-region=us-test-1"), "{args}");
    }

    #[test]
    fn no_mappings_is_an_empty_object() {
        let (cluster, groups) = with_webhook();
        let objects = objects(&model(&cluster, &groups)).unwrap().unwrap();
        let config = objects.iter().find(|o| o["kind"] == "ConfigMap").unwrap();
        assert_eq!(config["data"]["config"], "{}");
    }
}
