//! Applying a channel to a cluster: the state store for the channel and its
//! manifests, the Kubernetes API (server-side apply as field manager `kops`,
//! list and delete for pruning, a merge patch for the record).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, Node, Secret};
use kube::api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::GroupVersionKind;
use kube::discovery::{self, ApiCapabilities, ApiResource, Scope};
use kube::{Api, Client, Config};
use serde_json::json;

use crate::channel::{
    has_scheme, installed_versions, manifest_objects, parse_version, plan, resolve, AddonSpec,
    Channel, ManifestObject, PruneKind, Reason, ANNOTATION_PREFIX, RECORD_NAMESPACE,
};
use crate::ChannelsError;

/// The field manager of every apply, as kops' applier names itself.
pub const FIELD_MANAGER: &str = "kops";

/// A future that fetches one `http(s)://` URL.
pub type HttpFuture<'a> = Pin<Box<dyn Future<Output = Result<Vec<u8>, String>> + Send + 'a>>;

/// Downloads `http://` and `https://` channels and manifests (custom addons
/// may live on a web server). The caller supplies it (nodeup passes its
/// downloader), so this crate needs no HTTP client of its own.
pub trait HttpGet: Send + Sync {
    /// The body of a successful GET; an error says why not (404 included).
    fn get<'a>(&'a self, url: &'a str) -> HttpFuture<'a>;
}

/// Makes a new self-signed CA named `common_name`: (certificate PEM,
/// private key PEM).
pub type NewCa = fn(common_name: &str) -> Result<(String, String), String>;

#[derive(Clone, Default)]
pub struct ApplyOptions {
    /// Only say what would be applied.
    pub dry_run: bool,
    /// For `http(s)://` locations; without it they are refused.
    pub http: Option<Arc<dyn HttpGet>>,
    /// For addons with `needsPKI`; without it they fail.
    pub new_ca: Option<NewCa>,
}

impl std::fmt::Debug for ApplyOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApplyOptions")
            .field("dry_run", &self.dry_run)
            .field("http", &self.http.is_some())
            .field("new_ca", &self.new_ca.is_some())
            .finish()
    }
}

/// What happened to one addon.
#[derive(Debug, Clone, PartialEq)]
pub enum AddonOutcome {
    /// The cluster has this version already.
    Current { name: String },
    /// Dry run: would be applied.
    WouldApply { name: String, reason: Reason },
    Applied {
        name: String,
        reason: Reason,
        objects: usize,
        pruned: usize,
    },
    /// Not applied (its record is unchanged, so the next run tries again).
    Failed { name: String, error: String },
}

/// The outcome of one pass over the channel, in channel order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    pub addons: Vec<AddonOutcome>,
}

impl Report {
    pub fn failed(&self) -> usize {
        self.addons
            .iter()
            .filter(|a| matches!(a, AddonOutcome::Failed { .. }))
            .count()
    }

    pub fn applied(&self) -> usize {
        self.addons
            .iter()
            .filter(|a| matches!(a, AddonOutcome::Applied { .. }))
            .count()
    }
}

/// A client for the cluster in the kubeconfig at `path` (its current
/// context).
pub async fn client_from_kubeconfig(path: &Path) -> Result<Client, ChannelsError> {
    let error = |message: String| ChannelsError::Kubeconfig {
        path: path.display().to_string(),
        message,
    };
    let kubeconfig = Kubeconfig::read_from(path).map_err(|e| error(e.to_string()))?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| error(e.to_string()))?;
    Client::try_from(config).map_err(|e| error(e.to_string()))
}

fn kube_error(context: impl Into<String>) -> impl FnOnce(kube::Error) -> ChannelsError {
    let context = context.into();
    move |source| ChannelsError::Kube { context, source }
}

/// The outcome of one channel of [`apply_channels`].
#[derive(Debug)]
pub struct ChannelReport {
    /// The channel's location as given.
    pub channel: String,
    pub result: Result<Report, ChannelsError>,
}

/// One pass over several channels, in order, as kops' `channels apply
/// channel A B …`: the bootstrap channel and then the cluster's custom
/// addons (`spec.addons[].manifest`). A channel that cannot be read does
/// not stop the others.
pub async fn apply_channels(
    client: &Client,
    channel_urls: &[String],
    options: &ApplyOptions,
) -> Vec<ChannelReport> {
    let mut out = Vec::new();
    for url in channel_urls {
        out.push(ChannelReport {
            channel: url.clone(),
            result: apply_channel(client, url, options).await,
        });
    }
    out
}

/// The channels listed by kops' `kops-channels` pod manifest at
/// `manifest_url` (see [`crate::channel::channels_of_pod`]), or `None` when
/// there is no such file.
pub async fn channels_from_pod_manifest(
    manifest_url: &str,
    options: &ApplyOptions,
) -> Result<Option<Vec<String>>, ChannelsError> {
    let mut reader = Reader {
        http: options.http.clone(),
        stores: HashMap::new(),
    };
    let Some(text) = reader.read(manifest_url).await? else {
        return Ok(None);
    };
    Ok(Some(crate::channel::channels_of_pod(
        manifest_url,
        &String::from_utf8_lossy(&text),
    )?))
}

/// One pass: reads the channel at `channel_url` (`s3://`, `file://`,
/// `https://` with [`ApplyOptions::http`]; a `kind: Addons` index or a
/// plain manifest), applies the addons whose record differs, and records
/// them. An addon that fails does not stop the others; those that failed
/// are tried once more at the end of the pass when another addon was
/// applied meanwhile (one may define the kinds another uses), and else on
/// the next pass.
pub async fn apply_channel(
    client: &Client,
    channel_url: &str,
    options: &ApplyOptions,
) -> Result<Report, ChannelsError> {
    // kops writes a channel in a local state store as a bare absolute path
    // (its node config and kops-channels manifest), and reads it as a file.
    if !has_scheme(channel_url) && !channel_url.starts_with('/') {
        return Err(ChannelsError::NotAUrl {
            url: channel_url.to_string(),
        });
    }
    let mut reader = Reader {
        http: options.http.clone(),
        stores: HashMap::new(),
    };
    let text = reader
        .read(channel_url)
        .await?
        .ok_or_else(|| ChannelsError::Missing {
            what: "the channel".into(),
            url: channel_url.into(),
        })?;
    let channel = Channel::load(channel_url, &text)?;
    // Entries for other Kubernetes versions are left out (the server's
    // version is asked only when the channel has such entries).
    let mut version_errors = Vec::new();
    let channel = if channel
        .spec
        .addons
        .iter()
        .any(|a| !a.kubernetes_version.is_empty())
    {
        let info = client
            .apiserver_version()
            .await
            .map_err(kube_error("reading the API server's version"))?;
        let version = parse_version(&info.git_version).ok_or_else(|| ChannelsError::Version {
            version: info.git_version.clone(),
        })?;
        let (current, errors) = channel.for_version(version);
        version_errors = errors;
        current
    } else {
        channel
    };

    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut installed = BTreeMap::new();
    for namespace in channel.record_namespaces() {
        let annotations: BTreeMap<String, String> = match namespaces.get_opt(&namespace).await {
            Ok(Some(record)) => record.metadata.annotations.clone().unwrap_or_default(),
            // Not there yet: its addons are not installed (the manifest may
            // create it).
            Ok(None) if namespace != RECORD_NAMESPACE => BTreeMap::new(),
            Ok(None) => {
                return Err(ChannelsError::NoRecordNamespace {
                    namespace: namespace.clone(),
                })
            }
            Err(e) => return Err(kube_error(format!("reading namespace {namespace}"))(e)),
        };
        installed.insert(namespace, installed_versions(&annotations));
    }
    let planned: HashMap<&str, Reason> = plan(&channel, &installed)
        .into_iter()
        .map(|(addon, reason)| (addon.name.as_str(), reason))
        .collect();

    let mut applier = Applier {
        client: client.clone(),
        resources: HashMap::new(),
        new_ca: options.new_ca,
    };
    // Addons that are current but lack their CA or issuer.
    let mut planned = planned;
    let mut pki_missing = BTreeSet::new();
    for addon in channel.spec.addons.iter().filter(|a| a.needs_pki) {
        if !applier.pki_installed(&addon.name).await? {
            pki_missing.insert(addon.name.clone());
            planned
                .entry(addon.name.as_str())
                .or_insert(Reason::PkiMissing);
        }
    }
    // kops' kops-controller addon, current by its record but applied as
    // kops' applier left it (without the exclusion): this applier runs on
    // a node with the host service, so it applies it again, bridged.
    if let Some(addon) = channel
        .spec
        .addons
        .iter()
        .find(|a| a.name == kops_api::switch::KOPS_CONTROLLER_ADDON)
    {
        if !planned.contains_key(addon.name.as_str()) {
            let url = resolve(channel_url, &addon.manifest);
            let manifest = reader.read(&url).await?.unwrap_or_default();
            if kops_api::switch::runs_in_a_pod(&String::from_utf8_lossy(&manifest))
                && applier.kops_daemonset_unbridged().await?
            {
                planned.insert(addon.name.as_str(), Reason::NotBridged);
            }
        }
    }
    let mut report = Report::default();
    for (name, error) in version_errors {
        report.addons.push(AddonOutcome::Failed { name, error });
    }
    let skipped = report.addons.len();
    for addon in &channel.spec.addons {
        let name = addon.name.clone();
        let Some(reason) = planned.get(addon.name.as_str()).cloned() else {
            report.addons.push(AddonOutcome::Current { name });
            continue;
        };
        if options.dry_run {
            report
                .addons
                .push(AddonOutcome::WouldApply { name, reason });
            continue;
        }
        let outcome = applier
            .install(&mut reader, channel_url, addon, reason, &pki_missing)
            .await;
        report.addons.push(outcome);
    }
    if report.applied() > 0 && report.failed() > 0 {
        for (index, addon) in channel.spec.addons.iter().enumerate() {
            let index = index + skipped;
            if !matches!(report.addons[index], AddonOutcome::Failed { .. }) {
                continue;
            }
            let Some(reason) = planned.get(addon.name.as_str()).cloned() else {
                continue;
            };
            let outcome = applier
                .install(&mut reader, channel_url, addon, reason, &pki_missing)
                .await;
            if matches!(outcome, AddonOutcome::Applied { .. }) {
                report.addons[index] = outcome;
            }
        }
    }
    Ok(report)
}

/// Reads channels and manifests by URL: object stores through kops-state
/// (one per directory), `http(s)://` through the caller's [`HttpGet`].
struct Reader {
    http: Option<Arc<dyn HttpGet>>,
    stores: HashMap<String, Arc<dyn kops_state::ObjectStore>>,
}

impl Reader {
    async fn read(&mut self, url: &str) -> Result<Option<Vec<u8>>, ChannelsError> {
        if url.starts_with("http://") || url.starts_with("https://") {
            let Some(http) = &self.http else {
                return Err(ChannelsError::Fetch {
                    url: url.to_string(),
                    message: "no HTTP client here (nodeup channels apply has one)".into(),
                });
            };
            return http
                .get(url)
                .await
                .map(Some)
                .map_err(|message| ChannelsError::Fetch {
                    url: url.to_string(),
                    message,
                });
        }
        // A store opened already (the channel's directory) serves what is
        // under it: one S3 client per pass, not one per addon.
        let under = self
            .stores
            .iter()
            .filter_map(|(base, store)| {
                let prefix = if base.ends_with('/') {
                    base.clone()
                } else {
                    format!("{base}/")
                };
                let key = url.strip_prefix(&prefix)?;
                (!key.is_empty()).then(|| (store.clone(), key.to_string()))
            })
            .min_by_key(|(_, key)| key.len());
        if let Some((store, key)) = under {
            return Ok(store.read(&key).await?);
        }
        let (dir, file) = url.rsplit_once('/').ok_or_else(|| ChannelsError::Missing {
            what: "a file name".into(),
            url: url.into(),
        })?;
        // `file:///x.yaml`: the directory is the root.
        let dir = if dir.ends_with("://") {
            format!("{dir}/")
        } else {
            dir.to_string()
        };
        let store = match self.stores.get(&dir) {
            Some(store) => store.clone(),
            None => {
                let store = kops_state::open(&dir).await?;
                self.stores.insert(dir, store.clone());
                store
            }
        };
        Ok(store.read(file).await?)
    }
}

struct Applier {
    client: Client,
    new_ca: Option<NewCa>,
    /// Discovered resources by (group, version, kind).
    resources: HashMap<(String, String, String), (ApiResource, ApiCapabilities)>,
}

impl Applier {
    /// Applies `addon` and records it in its namespace's annotation (unless
    /// only its PKI is missing), then makes its PKI when missing.
    async fn install(
        &mut self,
        reader: &mut Reader,
        channel_url: &str,
        addon: &AddonSpec,
        reason: Reason,
        pki_missing: &BTreeSet<String>,
    ) -> AddonOutcome {
        let outcome = if reason == Reason::PkiMissing {
            AddonOutcome::Applied {
                name: addon.name.clone(),
                reason,
                objects: 0,
                pruned: 0,
            }
        } else {
            self.install_manifest(reader, channel_url, addon, reason)
                .await
        };
        if !pki_missing.contains(&addon.name) || !matches!(outcome, AddonOutcome::Applied { .. }) {
            return outcome;
        }
        match self.install_pki(&addon.name).await {
            Ok(()) => outcome,
            Err(e) => AddonOutcome::Failed {
                name: addon.name.clone(),
                error: e.to_string(),
            },
        }
    }

    /// Marks the nodes an updated addon asks to roll (kops'
    /// `needsRollingUpdate`: `control-plane`, `workers` or `all`) with the
    /// annotation `kops.k8s.io/needs-update`, which `kops rolling-update`
    /// reads. Only for an update: a first install rolls nothing.
    async fn mark_nodes(&self, addon: &AddonSpec) -> Result<(), ChannelsError> {
        let selector = match addon.needs_rolling_update.as_deref() {
            None | Some("") => return Ok(()),
            Some("control-plane") => "node-role.kubernetes.io/master=",
            Some("workers") => "node-role.kubernetes.io/node=",
            Some(_) => "",
        };
        let nodes: Api<Node> = Api::all(self.client.clone());
        let mut params = ListParams::default();
        if !selector.is_empty() {
            params = params.labels(selector);
        }
        let list = nodes.list(&params).await.map_err(kube_error(format!(
            "listing nodes to mark for {}",
            addon.name
        )))?;
        let patch = json!({"metadata": {"annotations": {"kops.k8s.io/needs-update": ""}}});
        for node in list.items {
            let name = node.metadata.name.unwrap_or_default();
            nodes
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(kube_error(format!(
                    "marking node {name} for a rolling update"
                )))?;
        }
        Ok(())
    }

    /// Applies `addon`'s manifest and records it.
    async fn install_manifest(
        &mut self,
        reader: &mut Reader,
        channel_url: &str,
        addon: &AddonSpec,
        reason: Reason,
    ) -> AddonOutcome {
        let name = addon.name.clone();
        let (objects, pruned) = match self.addon(reader, channel_url, addon).await {
            Ok(counts) => counts,
            Err(e) => {
                return AddonOutcome::Failed {
                    name,
                    error: e.to_string(),
                }
            }
        };
        if reason != Reason::NotInstalled && reason != Reason::NotBridged {
            if let Err(e) = self.mark_nodes(addon).await {
                return AddonOutcome::Failed {
                    name,
                    error: e.to_string(),
                };
            }
        }
        let value = addon.version(channel_url).encode();
        let patch = json!({"metadata": {"annotations": {
            format!("{ANNOTATION_PREFIX}{}", addon.name): value
        }}});
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        match namespaces
            .patch(
                addon.record_namespace(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(_) => AddonOutcome::Applied {
                name,
                reason,
                objects,
                pruned,
            },
            Err(e) => AddonOutcome::Failed {
                name,
                error: format!(
                    "recording the installed version in namespace {}: {e}",
                    addon.record_namespace()
                ),
            },
        }
    }

    /// Whether kops' kops-controller DaemonSet exists without the
    /// exclusion of host-service nodes.
    async fn kops_daemonset_unbridged(&self) -> Result<bool, ChannelsError> {
        let api: Api<DaemonSet> = Api::namespaced(self.client.clone(), "kube-system");
        let found = api
            .get_opt("kops-controller")
            .await
            .map_err(kube_error("reading DaemonSet kube-system/kops-controller"))?;
        let Some(ds) = found else {
            return Ok(false);
        };
        let affinity = serde_json::to_string(
            &ds.spec
                .and_then(|s| s.template.spec)
                .and_then(|s| s.affinity),
        )
        .unwrap_or_default();
        Ok(!affinity.contains(kops_api::switch::HOST_CONTROLLER_LABEL))
    }

    /// The cert-manager `Issuer` resource, if the cluster serves it.
    async fn issuer_resource(&mut self) -> Option<(ApiResource, ApiCapabilities)> {
        self.resource("cert-manager.io", "v1", "Issuer").await.ok()
    }

    /// Whether the CA secret `<name>-ca` and the issuer `<name>` exist in
    /// kube-system (kops' check; without the Issuer kind, they do not).
    async fn pki_installed(&mut self, name: &str) -> Result<bool, ChannelsError> {
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), RECORD_NAMESPACE);
        let secret = format!("{name}-ca");
        if secrets
            .get_opt(&secret)
            .await
            .map_err(kube_error(format!(
                "reading secret {RECORD_NAMESPACE}/{secret}"
            )))?
            .is_none()
        {
            return Ok(false);
        }
        let Some((resource, _)) = self.issuer_resource().await else {
            return Ok(false);
        };
        let issuers: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), RECORD_NAMESPACE, &resource);
        Ok(issuers
            .get_opt(name)
            .await
            .map_err(kube_error(format!(
                "reading issuer {RECORD_NAMESPACE}/{name}"
            )))?
            .is_some())
    }

    /// Makes what is missing of the addon's PKI: a new CA in the secret
    /// `<name>-ca`, and the issuer `<name>` signing with it. Existing
    /// objects are kept as they are (created, never applied over).
    async fn install_pki(&mut self, name: &str) -> Result<(), ChannelsError> {
        let pki_error = |message: String| ChannelsError::NeedsPki {
            addon: name.to_string(),
            message,
        };
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), RECORD_NAMESPACE);
        let secret_name = format!("{name}-ca");
        let exists = secrets
            .get_opt(&secret_name)
            .await
            .map_err(kube_error(format!(
                "reading secret {RECORD_NAMESPACE}/{secret_name}"
            )))?
            .is_some();
        if !exists {
            let new_ca = self.new_ca.ok_or_else(|| {
                pki_error("no CA generator here (nodeup channels apply has one)".into())
            })?;
            let (certificate, key) = new_ca(name).map_err(pki_error)?;
            let secret: Secret = serde_json::from_value(json!({
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": secret_name, "namespace": RECORD_NAMESPACE},
                "stringData": {"tls.crt": certificate, "tls.key": key},
                "type": "kubernetes.io/tls",
            }))
            .map_err(|e| pki_error(e.to_string()))?;
            match secrets.create(&PostParams::default(), &secret).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(e) => {
                    return Err(kube_error(format!(
                        "creating secret {RECORD_NAMESPACE}/{secret_name}"
                    ))(e))
                }
            }
        }
        let (resource, _) = self.issuer_resource().await.ok_or_else(|| {
            pki_error(
                "the cluster does not serve cert-manager.io/v1 Issuer yet (cert-manager's addon)"
                    .into(),
            )
        })?;
        let issuers: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), RECORD_NAMESPACE, &resource);
        let issuer: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "cert-manager.io/v1",
            "kind": "Issuer",
            "metadata": {"name": name, "namespace": RECORD_NAMESPACE},
            "spec": {"ca": {"secretName": secret_name}},
        }))
        .map_err(|e| pki_error(e.to_string()))?;
        match issuers.create(&PostParams::default(), &issuer).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
            Err(e) => Err(kube_error(format!(
                "creating issuer {RECORD_NAMESPACE}/{name}"
            ))(e)),
        }
    }

    /// Applies one addon's manifest and prunes; returns the number of
    /// objects applied and deleted.
    async fn addon(
        &mut self,
        reader: &mut Reader,
        channel_url: &str,
        addon: &AddonSpec,
    ) -> Result<(usize, usize), ChannelsError> {
        if addon.manifest.is_empty() {
            return Err(ChannelsError::NoManifest {
                addon: addon.name.clone(),
            });
        }
        let url = resolve(channel_url, &addon.manifest);
        let manifest = reader
            .read(&url)
            .await?
            .ok_or_else(|| ChannelsError::Missing {
                what: format!("the manifest of {}", addon.name),
                url: url.clone(),
            })?;
        addon.verify(&manifest)?;
        let text = String::from_utf8_lossy(&manifest);
        // kops' kops-controller DaemonSet, applied from a node that runs
        // kops-controller as a host service (kops-rs' nodeup runs this
        // applier): kept off such nodes (see [`kops_api::switch`]). The record
        // keeps the channel's hash, so kops' own applier sees it applied.
        let text = if addon.name == kops_api::switch::KOPS_CONTROLLER_ADDON {
            kops_api::switch::bridge_manifest(&text).map_err(|message| ChannelsError::Fetch {
                url: url.clone(),
                message,
            })?
        } else {
            text
        };
        let objects = manifest_objects(&addon.name, &text)?;
        for object in &objects {
            self.apply(object).await?;
        }
        let mut pruned = 0;
        if let Some(prune) = &addon.prune {
            for kind in &prune.kinds {
                pruned += self.prune(kind, &objects).await?;
            }
        }
        Ok((objects.len(), pruned))
    }

    async fn resource(
        &mut self,
        group: &str,
        version: &str,
        kind: &str,
    ) -> Result<(ApiResource, ApiCapabilities), ChannelsError> {
        let key = (group.to_string(), version.to_string(), kind.to_string());
        if let Some(found) = self.resources.get(&key) {
            return Ok(found.clone());
        }
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let found = discovery::pinned_kind(&self.client, &gvk)
            .await
            .map_err(kube_error(format!("finding the API of {}", describe(&gvk))))?;
        self.resources.insert(key, found.clone());
        Ok(found)
    }

    fn api(
        &self,
        resource: &ApiResource,
        caps: &ApiCapabilities,
        namespace: Option<&str>,
    ) -> Api<DynamicObject> {
        match (&caps.scope, namespace) {
            (Scope::Namespaced, Some(ns)) => {
                Api::namespaced_with(self.client.clone(), ns, resource)
            }
            (Scope::Namespaced, None) => {
                Api::default_namespaced_with(self.client.clone(), resource)
            }
            (Scope::Cluster, _) => Api::all_with(self.client.clone(), resource),
        }
    }

    async fn apply(&mut self, object: &ManifestObject) -> Result<(), ChannelsError> {
        let (resource, caps) = self
            .resource(&object.group, &object.version, &object.kind)
            .await?;
        let namespace = match caps.scope {
            Scope::Namespaced => Some(object.namespace.as_deref().unwrap_or("default")),
            Scope::Cluster => None,
        };
        let api = self.api(&resource, &caps, namespace);
        let params = PatchParams::apply(FIELD_MANAGER).force();
        api.patch(&object.name, &params, &Patch::Apply(&object.object))
            .await
            .map_err(kube_error(format!(
                "applying {} {}",
                object.kind,
                qualified(namespace, &object.name)
            )))?;
        Ok(())
    }

    /// Deletes objects of one kind that match the selector and that the
    /// manifest does not have.
    async fn prune(
        &mut self,
        spec: &PruneKind,
        objects: &[ManifestObject],
    ) -> Result<usize, ChannelsError> {
        let group = discovery::group(&self.client, &spec.group)
            .await
            .map_err(kube_error(format!("finding API group {:?}", spec.group)))?;
        let Some((resource, caps)) = group.recommended_kind(&spec.kind) else {
            // The cluster has no such kind, so nothing of it to prune.
            return Ok(0);
        };
        let namespaced = matches!(caps.scope, Scope::Namespaced);
        let keep: BTreeSet<(String, String)> = objects
            .iter()
            .filter(|o| o.group == spec.group && o.kind == spec.kind)
            .map(|o| {
                let ns = match (namespaced, &o.namespace) {
                    (false, _) => String::new(),
                    (true, Some(ns)) => ns.clone(),
                    (true, None) => "default".to_string(),
                };
                (ns, o.name.clone())
            })
            .collect();
        let mut params = ListParams::default();
        if !spec.label_selector.is_empty() {
            params = params.labels(&spec.label_selector);
        }
        if !spec.field_selector.is_empty() {
            params = params.fields(&spec.field_selector);
        }
        let scopes: Vec<Option<&str>> = if spec.namespaces.is_empty() || !namespaced {
            vec![None]
        } else {
            spec.namespaces.iter().map(|n| Some(n.as_str())).collect()
        };
        let mut deleted = 0;
        for scope in scopes {
            let list_api = match scope {
                Some(ns) => {
                    Api::<DynamicObject>::namespaced_with(self.client.clone(), ns, &resource)
                }
                None => Api::<DynamicObject>::all_with(self.client.clone(), &resource),
            };
            let live = list_api
                .list(&params)
                .await
                .map_err(kube_error(format!("listing {} to prune", spec.kind)))?;
            for item in live.items {
                let name = item.metadata.name.clone().unwrap_or_default();
                let ns = item.metadata.namespace.clone().unwrap_or_default();
                if keep.contains(&(ns.clone(), name.clone())) {
                    continue;
                }
                let namespace = (!ns.is_empty()).then_some(ns.as_str());
                self.api(&resource, &caps, namespace)
                    .delete(&name, &DeleteParams::default())
                    .await
                    .map_err(kube_error(format!(
                        "pruning {} {}",
                        spec.kind,
                        qualified(namespace, &name)
                    )))?;
                deleted += 1;
            }
        }
        Ok(deleted)
    }
}

fn describe(gvk: &GroupVersionKind) -> String {
    if gvk.group.is_empty() {
        format!("{}/{}", gvk.version, gvk.kind)
    } else {
        format!("{}/{} {}", gvk.group, gvk.version, gvk.kind)
    }
}

fn qualified(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_string(),
    }
}

/// One addon the cluster records as installed (kops' `toolbox addons list`).
#[derive(Debug, Clone, PartialEq)]
pub struct InstalledAddon {
    pub name: String,
    pub namespace: String,
    pub version: crate::InstalledVersion,
}

/// Every addon recorded in any namespace's `addons.k8s.io/<addon>`
/// annotations, by namespace then name.
pub async fn list_installed(client: &Client) -> Result<Vec<InstalledAddon>, ChannelsError> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let list = namespaces
        .list(&ListParams::default())
        .await
        .map_err(kube_error("listing namespaces"))?;
    let mut out = Vec::new();
    for ns in list.items {
        let name = ns.metadata.name.clone().unwrap_or_default();
        let annotations = ns.metadata.annotations.clone().unwrap_or_default();
        for (addon, version) in installed_versions(&annotations) {
            out.push(InstalledAddon {
                name: addon,
                namespace: name.clone(),
                version,
            });
        }
    }
    out.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    Ok(out)
}
