//! Secrets `update cluster --yes` hands the cluster's own components
//! through the Kubernetes API (on vSphere: the vCenter credentials of the
//! cloud controller manager, kops-controller and the CSI driver), through
//! the kubeconfig's context named after the cluster only. A Secret whose
//! data is already what it would write is left alone; its namespace is
//! made when missing. Nothing here is written anywhere else.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::ByteString;
use kube::api::{Patch, PatchParams};
use kube::Api;
use serde_json::json;

use kops_ops::vsphere::ComponentSecret;

/// How long the API may take to answer before the Secrets are left for
/// the next update.
const TIMEOUT: Duration = Duration::from_secs(10);

/// What became of the Secrets.
#[derive(Debug, PartialEq)]
pub enum SecretsOutcome {
    /// `namespace/name` of each Secret written (empty: all were current).
    Applied(Vec<String>),
    /// The API could not be reached (no context, no answer): why.
    Unreachable(String),
    /// The API answered but refused a write: what and why.
    Refused(String),
}

/// Creates or updates `secrets` in the cluster `cluster`.
pub async fn apply_secrets(
    kubeconfig: Option<&Path>,
    cluster: &str,
    secrets: &[ComponentSecret],
) -> SecretsOutcome {
    let client = match crate::k8s::cluster_client(kubeconfig, cluster).await {
        Ok(c) => c,
        Err(reason) => return SecretsOutcome::Unreachable(reason),
    };
    let apply = async {
        let mut written = Vec::new();
        let params = PatchParams::apply("kops").force();
        for secret in secrets {
            let what = format!("{}/{}", secret.namespace, secret.name);
            let api: Api<Secret> = Api::namespaced(client.clone(), secret.namespace);
            let current = match api.get_opt(secret.name).await {
                Ok(current) => current,
                // The first call tells whether the API answers at all.
                Err(kube::Error::Api(e)) => {
                    return Err(SecretsOutcome::Refused(format!(
                        "reading {what}: {}",
                        e.message
                    )))
                }
                Err(e) if written.is_empty() => {
                    return Err(SecretsOutcome::Unreachable(e.to_string()))
                }
                Err(e) => return Err(SecretsOutcome::Refused(format!("reading {what}: {e}"))),
            };
            let data: Option<BTreeMap<String, String>> = current.as_ref().map(|s| {
                s.data
                    .iter()
                    .flatten()
                    .map(|(k, v)| (k.clone(), String::from_utf8_lossy(&v.0).into_owned()))
                    .collect()
            });
            if data.as_ref() == Some(&secret.data) {
                continue;
            }
            if current.is_none() {
                let namespaces: Api<Namespace> = Api::all(client.clone());
                let missing = namespaces
                    .get_opt(secret.namespace)
                    .await
                    .map_err(|e| {
                        SecretsOutcome::Refused(format!(
                            "reading namespace {}: {e}",
                            secret.namespace
                        ))
                    })?
                    .is_none();
                if missing {
                    let ns = json!({
                        "apiVersion": "v1", "kind": "Namespace",
                        "metadata": {"name": secret.namespace},
                    });
                    namespaces
                        .patch(secret.namespace, &params, &Patch::Apply(&ns))
                        .await
                        .map_err(|e| {
                            SecretsOutcome::Refused(format!(
                                "making namespace {}: {e}",
                                secret.namespace
                            ))
                        })?;
                }
            }
            let object = Secret {
                metadata: ObjectMeta {
                    name: Some(secret.name.to_string()),
                    namespace: Some(secret.namespace.to_string()),
                    labels: Some(BTreeMap::from([(
                        "app.kubernetes.io/managed-by".to_string(),
                        "kops".to_string(),
                    )])),
                    ..Default::default()
                },
                type_: Some("Opaque".into()),
                data: Some(
                    secret
                        .data
                        .iter()
                        .map(|(k, v)| (k.clone(), ByteString(v.clone().into_bytes())))
                        .collect(),
                ),
                ..Default::default()
            };
            api.patch(secret.name, &params, &Patch::Apply(&object))
                .await
                .map_err(|e| SecretsOutcome::Refused(format!("writing {what}: {e}")))?;
            written.push(what);
        }
        Ok(written)
    };
    match tokio::time::timeout(TIMEOUT, apply).await {
        Ok(Ok(written)) => SecretsOutcome::Applied(written),
        Ok(Err(outcome)) => outcome,
        Err(_) => SecretsOutcome::Unreachable(format!("no answer within {}s", TIMEOUT.as_secs())),
    }
}
