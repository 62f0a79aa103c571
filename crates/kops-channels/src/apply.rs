//! Applying a channel to a cluster: the state store for the channel and its
//! manifests, the Kubernetes API (server-side apply as field manager `kops`,
//! list and delete for pruning, a merge patch for the record).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::GroupVersionKind;
use kube::discovery::{self, ApiCapabilities, ApiResource, Scope};
use kube::{Api, Client, Config};
use serde_json::json;

use crate::channel::{
    installed_versions, manifest_objects, plan, AddonSpec, Channel, ManifestObject, PruneKind,
    Reason, ANNOTATION_PREFIX, RECORD_NAMESPACE,
};
use crate::ChannelsError;

/// The field manager of every apply, as kops' applier names itself.
pub const FIELD_MANAGER: &str = "kops";

#[derive(Debug, Clone, Default)]
pub struct ApplyOptions {
    /// Only say what would be applied.
    pub dry_run: bool,
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

/// One pass: reads the channel at `channel_url` (`s3://…` or `file://…`),
/// applies the addons whose record differs, and records them. An addon that
/// fails does not stop the others; it is reported and tried again next pass.
pub async fn apply_channel(
    client: &Client,
    channel_url: &str,
    options: &ApplyOptions,
) -> Result<Report, ChannelsError> {
    let (dir, file) = channel_url
        .rsplit_once('/')
        .ok_or_else(|| ChannelsError::Missing {
            what: "the channel".into(),
            url: channel_url.into(),
        })?;
    let store = kops_state::open(dir).await?;
    let text = store
        .read(file)
        .await?
        .ok_or_else(|| ChannelsError::Missing {
            what: "the bootstrap channel".into(),
            url: channel_url.into(),
        })?;
    let channel = Channel::parse(channel_url, &String::from_utf8_lossy(&text))?;

    let namespaces: Api<Namespace> = Api::all(client.clone());
    let record = namespaces
        .get(RECORD_NAMESPACE)
        .await
        .map_err(kube_error(format!("reading namespace {RECORD_NAMESPACE}")))?;
    let annotations: BTreeMap<String, String> =
        record.metadata.annotations.clone().unwrap_or_default();
    let installed = installed_versions(&annotations);
    let planned: HashMap<&str, Reason> = plan(&channel, &installed)
        .into_iter()
        .map(|(addon, reason)| (addon.name.as_str(), reason))
        .collect();

    let mut applier = Applier {
        client: client.clone(),
        resources: HashMap::new(),
    };
    let mut report = Report::default();
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
        let outcome = match applier.addon(store.as_ref(), addon).await {
            Ok((objects, pruned)) => {
                let value = addon.version(channel_url).encode();
                let patch = json!({"metadata": {"annotations": {
                    format!("{ANNOTATION_PREFIX}{}", addon.name): value
                }}});
                match namespaces
                    .patch(
                        RECORD_NAMESPACE,
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
                        error: format!("recording the installed version: {e}"),
                    },
                }
            }
            Err(e) => AddonOutcome::Failed {
                name,
                error: e.to_string(),
            },
        };
        report.addons.push(outcome);
    }
    Ok(report)
}

struct Applier {
    client: Client,
    /// Discovered resources by (group, version, kind).
    resources: HashMap<(String, String, String), (ApiResource, ApiCapabilities)>,
}

impl Applier {
    /// Applies one addon's manifest and prunes; returns the number of
    /// objects applied and deleted.
    async fn addon(
        &mut self,
        store: &dyn kops_state::ObjectStore,
        addon: &AddonSpec,
    ) -> Result<(usize, usize), ChannelsError> {
        let manifest =
            store
                .read(&addon.manifest)
                .await?
                .ok_or_else(|| ChannelsError::Missing {
                    what: format!("the manifest of {}", addon.name),
                    url: store.url_of(&addon.manifest),
                })?;
        addon.verify(&manifest)?;
        let objects = manifest_objects(&addon.name, &String::from_utf8_lossy(&manifest))?;
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
