//! `update cluster --target terraform|cloudformation`: the same task graph
//! as the direct apply, written as files instead of applied. Nearly
//! offline: the cloud calls are the two look-ups kops' render makes, only
//! when AWS credentials are configured and each bounded by
//! [`ACCOUNT_TIMEOUT`]: the account (STS GetCallerIdentity), which addon
//! manifests name (the termination handler's queue URL, IRSA role ARNs),
//! and, for a cluster publishing its names in Route 53 without
//! `spec.dnsZone`, the hosted zone, whose id dns-controller, external-dns,
//! the IAM policies, the API records and the completed spec name. Without
//! the account those addons stay placeholders and the render says so once;
//! without the zone its name stands in (Terraform looks the id up; see
//! kops-render for what stands in for the other cloud look-ups).
//!
//! State-store files (completed spec, etcd specs, channel, node configs)
//! become `aws_s3_object` resources in Terraform when the config base is in
//! S3 (kops' default), `google_storage_bucket_object` when it is in Cloud
//! Storage; otherwise, and for CloudFormation, which has no S3
//! object resource, they are written to the state store here when the
//! config base is in the state store kops-rs was given.

use std::path::{Path, PathBuf};

use kops_api::validation;
use kops_aws::render::Input;
use kops_model::files::StateFile;
use kops_model::Model;
use kops_state::WriteOptions;

use crate::cloud::Cloud;
use crate::spec::completed_spec;
use crate::update::options::Phase;
use crate::{require_cluster, OpsError, Registry};

pub(crate) mod gce;

/// The file formats `update cluster` can write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RenderTarget {
    Terraform,
    CloudFormation,
}

impl RenderTarget {
    /// The output directory when none is given (kops' defaults).
    pub fn default_out(self) -> PathBuf {
        match self {
            RenderTarget::Terraform => PathBuf::from("out/terraform"),
            RenderTarget::CloudFormation => PathBuf::from("out/cloudformation"),
        }
    }
}

pub struct RenderRequest {
    pub cluster: String,
    pub target: RenderTarget,
    /// `None`: [`RenderTarget::default_out`].
    pub out: Option<PathBuf>,
    /// `--phase network`: only the network's resources (the other phases
    /// build on objects a file target cannot look up, and are refused).
    pub phase: Option<crate::update::options::Phase>,
}

#[derive(Debug)]
pub struct RenderOutcome {
    pub out: PathBuf,
    /// Written, relative to `out`.
    pub files: Vec<String>,
    /// Tasks in the graph.
    pub tasks: usize,
    /// State-store files written directly (not managed by the rendered files).
    pub state_files_written: Vec<String>,
    /// Task types without a renderer (a bug to report; empty normally).
    pub unrendered: Vec<String>,
    /// What the render could not fill in, one line each, with how to get
    /// it (the account without credentials).
    pub warnings: Vec<String>,
}

/// How long the render waits for the account before rendering without it:
/// a credential source that does not answer (an unreachable endpoint, an
/// identity provider down) must not hold up a render that can do without.
pub const ACCOUNT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum RenderClusterError {
    #[error(transparent)]
    Ops(#[from] OpsError),
    #[error(transparent)]
    Render(#[from] kops_render::RenderError),
    #[error("{0}")]
    NodeConfig(String),
    /// The service-account keyset (for the published JWKS).
    #[error(transparent)]
    Pki(#[from] kops_pki::PkiError),
    #[error("cannot write `{path}`: {source}\nhint: check that the output directory (--out) is writable")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl From<kops_model::ModelError> for RenderClusterError {
    fn from(e: kops_model::ModelError) -> Self {
        Self::Ops(e.into())
    }
}

impl From<kops_state::registry::RegistryError> for RenderClusterError {
    fn from(e: kops_state::registry::RegistryError) -> Self {
        Self::Ops(e.into())
    }
}

/// What every cloud's render shares: the cluster, its groups and keys,
/// where its state lives, and what node configs and user data need.
pub(crate) struct Prepared {
    pub cluster: kops_api::Cluster,
    pub groups: Vec<kops_api::InstanceGroup>,
    pub ssh_public_key: Option<String>,
    pub config_base: String,
    pub region: String,
    pub node_inputs: kops_nodeup::config::NodeInputs,
}

/// What a cloud's render hands back to be written.
pub(crate) struct CloudRender {
    pub outcome: kops_render::Outcome,
    /// The state-store files (rendered as objects, or written to the store).
    pub files: Vec<StateFile>,
    pub tasks: usize,
    pub warnings: Vec<String>,
}

/// vSphere clusters have no file target (see docs/vsphere.md).
fn no_vsphere_render() -> OpsError {
    crate::flag_error(
        "--target",
        "vSphere clusters are applied directly; kops-rs renders no Terraform for them",
        "use `--target direct` (the default)",
    )
}

/// Renders the cluster and writes the files.
pub async fn render_cluster(
    registry: &Registry,
    request: RenderRequest,
) -> Result<RenderOutcome, RenderClusterError> {
    let cluster = require_cluster(registry, &request.cluster).await?;
    let cloud = Cloud::of(&cluster)?;
    if cloud == Cloud::Vsphere {
        return Err(no_vsphere_render().into());
    }
    if matches!(request.phase, Some(Phase::Security | Phase::Cluster)) {
        return Err(crate::flag_error(
            "--phase",
            "only `--phase network` can be rendered to a file target",
            "apply the security and cluster phases with `--target direct`, or render the whole cluster without --phase",
        )
        .into());
    }
    let network_only = request.phase == Some(Phase::Network);
    let groups = registry.list_instance_groups(&request.cluster).await?;
    validation::validate_all(&cluster, &groups).map_err(OpsError::from)?;
    // Where nodes get nodeup (see update), before anything is written.
    let nodeup =
        crate::update::nodeup::resolve_from_environment(registry, &cluster, &groups).await?;
    let region = cloud.region(&cluster)?;
    let keys = registry.list_ssh_public_keys(&request.cluster).await?;
    let config_base = cluster
        .spec
        .config_base
        .clone()
        .unwrap_or_else(|| registry.config_base(&request.cluster));
    // The CA keysets first, as kops' render does: the node configs and the
    // workers' boot configs carry their certificates.
    crate::pki::ensure_cluster_pki(registry, &cluster)
        .await
        .map_err(OpsError::from)?;
    let mut node_inputs = crate::pki::node_inputs(registry, &cluster, &groups)
        .await
        .map_err(OpsError::from)?;
    node_inputs.nodeup = Some(nodeup.sources.clone());
    // kops' images under KOPS_BASE_URL, as update; the API load balancer's
    // addresses stay unknown here (it may not exist), as in kops' renders.
    node_inputs.base_url_images = nodeup.images.clone();
    let prepared = Prepared {
        cluster,
        groups,
        ssh_public_key: keys.first().map(|k| k.public_key.clone()),
        config_base,
        region,
        node_inputs,
    };
    let rendered = match cloud {
        Cloud::Aws => render_aws(registry, &prepared, request.target, network_only).await?,
        Cloud::Gce => gce::render(&prepared, request.target)?,
        Cloud::Vsphere => return Err(no_vsphere_render().into()),
    };
    let CloudRender {
        outcome,
        files,
        tasks,
        warnings,
    } = rendered;
    let config_base = prepared.config_base;
    let out = request.out.unwrap_or_else(|| request.target.default_out());
    let mut written = Vec::new();
    for (path, bytes) in &outcome.rendered.files {
        write_file(&out.join(path), bytes)?;
        written.push(path.clone());
    }

    // State files the rendered output does not manage go to the store.
    let managed_by_terraform = request.target == RenderTarget::Terraform
        && kops_render::terraform_writes_files(&config_base);
    // The nodeup binaries the user data pins go to the state store.
    let mut state_files_written = nodeup.upload(registry).await?;
    if !managed_by_terraform
        && kops_api::store_path::same(&config_base, &registry.config_base(&request.cluster))
    {
        for file in &files {
            if file.base.is_some() {
                // The discovery store is not the state store.
                continue;
            }
            let key = format!("{}/{}", request.cluster, file.path);
            registry
                .store()
                .write(&key, &file.contents, WriteOptions::default())
                .await
                .map_err(|e| OpsError::Registry(e.into()))?;
            state_files_written.push(registry.store().url_of(&key));
        }
    }
    // The discovery documents go to the discovery store, unless Terraform
    // manages them as S3 objects (kops' test stores, `memfs://`, are not
    // written anywhere).
    for file in &files {
        let Some(base) = &file.base else {
            continue;
        };
        let in_terraform =
            request.target == RenderTarget::Terraform && kops_render::terraform_writes_files(base);
        if in_terraform || base.starts_with("memfs://") {
            continue;
        }
        let store_error = |e: kops_state::StoreError| OpsError::Registry(e.into());
        let store = kops_state::open(base).await.map_err(store_error)?;
        store
            .write(&file.path, &file.contents, WriteOptions::default())
            .await
            .map_err(store_error)?;
        state_files_written.push(store.url_of(&file.path));
    }
    Ok(RenderOutcome {
        out,
        files: written,
        tasks,
        state_files_written,
        unrendered: outcome.unrendered.iter().map(ToString::to_string).collect(),
        warnings,
    })
}

/// The AWS render: the account and hosted-zone look-ups, kops-model's
/// AWS graph, kops-render's Terraform or CloudFormation.
async fn render_aws(
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

/// The cloud-neutral state-store files every cloud renders: the completed
/// spec, etcd specs, the addons and channel, each group's node config.
pub(crate) fn neutral_files(
    model: &Model<'_>,
    resolved: &kops_api::Cluster,
) -> Result<Vec<StateFile>, RenderClusterError> {
    let completed = completed_spec(resolved, model.config_base);
    let inputs = model.node_inputs();
    Ok(kops_model::files::state_files(
        model,
        &kops_api::manifest::to_yaml(&completed),
        node_configs(&completed, model.groups, model.config_base, &inputs)?,
    )?)
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
    let probe = Model {
        cluster,
        groups: &[],
        ssh_public_key: None,
        node_inputs: None,
        account_id: None,
        config_base: "",
    };
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

/// Each group's node config (`nodeupconfig-<group>`), as kops-nodeup
/// renders it for the state store (bastions and Karpenter groups have none).
fn node_configs(
    cluster: &kops_api::Cluster,
    groups: &[kops_api::InstanceGroup],
    config_base: &str,
    inputs: &kops_nodeup::config::NodeInputs,
) -> Result<Vec<StateFile>, RenderClusterError> {
    let mut rendered = Vec::new();
    for group in groups {
        if group.spec.manager.as_deref() == Some("Karpenter") {
            continue;
        }
        rendered.extend(
            kops_nodeup::config::rendered_with_inputs(cluster, group, config_base, inputs)
                .map_err(|e| RenderClusterError::NodeConfig(e.to_string()))?,
        );
    }
    Ok(rendered
        .into_iter()
        .map(|r| StateFile::new(format!("nodeupconfig-{}", r.group), r.path, r.yaml))
        .collect())
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), RenderClusterError> {
    let error = |source| RenderClusterError::Write {
        path: path.display().to_string(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(error)?;
    }
    std::fs::write(path, bytes).map_err(error)
}
