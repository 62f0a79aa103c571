//! The AWS render: the account and hosted-zone look-ups (see the parent
//! module), kops-model's AWS graph, kops-aws' Terraform or CloudFormation.

use std::path::PathBuf;

use kops_aws::render::Input;
use kops_model::Model;

use super::files::neutral_files;
use super::request::{CloudRender, Prepared, RenderClusterError, RenderTarget, ACCOUNT_TIMEOUT};
use crate::update::options::Phase;
use crate::{OpsError, Registry};

/// The AWS render: the account and hosted-zone look-ups, kops-model's
/// AWS graph, kops-render's Terraform or CloudFormation.
pub(crate) async fn render(
    registry: &Registry,
    prepared: &Prepared,
    target: RenderTarget,
    network_only: bool,
) -> Result<CloudRender, RenderClusterError> {
    let Prepared {
        cluster,
        groups,
        ssh_public_key,
        config_base,
        region,
        node_inputs,
    } = prepared;
    // The cluster as the model and the completed spec see it: with the API
    // access kops' populate step defaults (a private control plane without
    // `spec.api` gets its load balancer) and the zone it finds in
    // `spec.dnsZone`.
    let mut resolved = kops_api::populate::with_api_access(cluster, Some(groups));
    let mut warnings = kops_api::validation::warnings(&resolved);
    let (account_id, zone) = cloud_lookups(&resolved, region).await;
    let zone_unknown = match zone {
        Some(Ok(id)) => {
            resolved.spec.dns_zone = Some(id);
            None
        }
        Some(Err(reason)) => Some(reason),
        None => None,
    };
    let model = Model {
        cluster: &resolved,
        groups,
        ssh_public_key: ssh_public_key.as_deref(),
        node_inputs: Some(node_inputs),
        account_id: account_id.as_ref().ok().map(String::as_str),
        config_base,
    };
    if let Some(reason) = zone_unknown {
        warnings.push(format!(
            "{reason}, so the addons and IAM policies name the zone `{}` by name and the rendered files look its id up when applied; create the hosted zone (or set `spec.dnsZone` to its name or id) and render again to name its id",
            kops_model::dns::zone(&model)
        ));
    }
    if let Err(reason) = &account_id {
        let needing = needs_account(&model);
        if !needing.is_empty() {
            warnings.push(format!(
                "{reason}, so {} are written as placeholders; configure AWS credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE or ~/.aws/credentials) and render again to fill them in",
                needing.join(" and ")
            ));
        }
    }
    let mut graph = kops_aws::model::build(&model)?;
    if network_only {
        graph = graph
            .without(|k| Phase::of_kind(k.kind) != Phase::Network)
            .map_err(OpsError::from)?;
    }
    let mut files = neutral_files(&model, &resolved)?;
    files.extend(kops_model::files::karpenter_files(&model)?);
    if network_only {
        // The files nodes and addons read are the cluster phase's.
        files.clear();
    }
    if !network_only && kops_model::iam::irsa::discovery_store(&model).is_some() {
        let certificates = service_account_certificates(registry, cluster).await?;
        files.extend(kops_model::files::discovery_files(
            &model,
            region,
            &certificates,
        )?);
    }
    let input = Input {
        graph: &graph,
        cluster: cluster.name(),
        region,
        config_base,
        files: &files,
        private_zone: model.dns_type() == "Private",
    };
    let outcome = match target {
        RenderTarget::Terraform => kops_aws::render::terraform(&input)?,
        RenderTarget::CloudFormation => kops_aws::render::cloudformation(&input)?,
    };
    Ok(CloudRender {
        outcome,
        files,
        tasks: graph.len(),
        warnings,
    })
}

/// The cloud look-ups of the render (see the module docs), when AWS
/// credentials are configured: the account, and the hosted zone's id when
/// the cluster publishes DNS records in a zone `spec.dnsZone` does not
/// name (`None`: no look-up wanted); the reasons when either is unknown.
/// Credentials are looked for where the SDK reads them without a network
/// call (see [`credentials_configured`]): without them the SDK would end
/// up asking the instance metadata service, which off EC2 only times out.
async fn cloud_lookups(
    cluster: &kops_api::Cluster,
    region: &str,
) -> (Result<String, String>, Option<Result<String, String>>) {
    let probe = Model::of_cluster(cluster);
    let wants_zone = cluster.spec.dns_zone.is_none() && probe.publishes_dns_records();
    if !credentials_configured() {
        // Offline: the zone's name stands in, as it always has.
        return (
            Err("the AWS account is unknown: no AWS credentials are configured".into()),
            None,
        );
    }
    let cloud = kops_aws::AwsCloud::new(region).await;
    let account = async {
        let ask = cloud.account_id();
        match tokio::time::timeout(ACCOUNT_TIMEOUT, ask).await {
            Ok(result) => result.map_err(|e| {
                let first = e.lines().next().unwrap_or_default().to_string();
                format!("the AWS account is unknown ({first})")
            }),
            Err(_) => Err(format!(
                "the AWS account is unknown (STS GetCallerIdentity did not answer in {}s)",
                ACCOUNT_TIMEOUT.as_secs()
            )),
        }
    };
    let zone = async {
        if !wants_zone {
            return None;
        }
        let private = probe.dns_type() == "Private";
        let find = kops_aws::dns::find_hosted_zone(&cloud, cluster.name(), None, private);
        Some(match tokio::time::timeout(ACCOUNT_TIMEOUT, find).await {
            Ok(Ok(zone)) => Ok(zone.id),
            Ok(Err(e)) => {
                let first = e.to_string().lines().next().unwrap_or_default().to_string();
                Err(format!("the hosted zone is unknown ({first})"))
            }
            Err(_) => Err(format!(
                "the hosted zone is unknown (Route 53 did not answer in {}s)",
                ACCOUNT_TIMEOUT.as_secs()
            )),
        })
    };
    tokio::join!(account, zone)
}

/// What the cluster's addons name the account in, for the warning when
/// it is unknown.
fn needs_account(model: &Model<'_>) -> Vec<&'static str> {
    let mut needing = Vec::new();
    if kops_model::nth_queue_mode(model.cluster) {
        needing.push("the node termination handler's queue URL");
    }
    if kops_model::iam::irsa::uses_service_account_permissions(model) {
        needing.push("the addons' service-account role ARNs");
    }
    needing
}

/// Whether AWS credentials (or an endpoint standing in for AWS) are
/// configured: keys, a profile, a web identity or a container credentials
/// endpoint in the environment, `AWS_ENDPOINT_URL`, or a shared
/// credentials or config file.
fn credentials_configured() -> bool {
    let set = |key: &str| std::env::var_os(key).is_some_and(|v| !v.is_empty());
    let variables = [
        "AWS_ACCESS_KEY_ID",
        "AWS_PROFILE",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_ENDPOINT_URL",
    ];
    if variables.iter().any(|k| set(k)) {
        return true;
    }
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let file = |variable: &str, name: &str| {
        std::env::var_os(variable)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(".aws").join(name)))
    };
    [
        file("AWS_SHARED_CREDENTIALS_FILE", "credentials"),
        file("AWS_CONFIG_FILE", "config"),
    ]
    .into_iter()
    .flatten()
    .any(|path| path.is_file())
}

/// The trusted certificates of the cluster's `service-account` keyset,
/// whose public keys the discovery store publishes. Like kops, a render
/// creates the keyset in the state store when it does not exist yet, so
/// the keys published are the ones the API server will sign with.
async fn service_account_certificates(
    registry: &Registry,
    cluster: &kops_api::Cluster,
) -> Result<Vec<String>, RenderClusterError> {
    let (keystore, _) = crate::pki::cluster_keystore(registry, cluster.name());
    let keyset = match keystore.get(kops_pki::SERVICE_ACCOUNT).await {
        Ok(Some(keyset)) => keyset,
        Ok(None) => {
            let keyset = kops_pki::Keyset::generate_ca(kops_pki::SERVICE_ACCOUNT)?;
            keystore.create(&keyset).await?;
            // Another run may have created it first: read what is stored.
            keystore
                .get(kops_pki::SERVICE_ACCOUNT)
                .await?
                .unwrap_or(keyset)
        }
        Err(e) => return Err(e.into()),
    };
    Ok(keyset
        .items
        .iter()
        .filter(|i| i.distrust_timestamp.is_none())
        .filter_map(|i| i.certificate_pem.clone())
        .collect())
}
