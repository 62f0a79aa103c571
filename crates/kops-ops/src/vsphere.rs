//! vSphere's use cases: `update cluster` (the cluster's VMs brought to the
//! groups' sizes, the state-store files written only when they differ)
//! and `delete cluster`, over kops-vsphere-model (what the spec means on
//! vSphere) and kops-vsphere (vCenter). What is here is what needs the
//! state store: the keys, nodeup, the user data and the files nodes read.
//! `get instances`, validate, rolling update and dump go through
//! kops-vsphere-model's `VsphereInstances`, opened by [`instances`].
//! Credentials come from the environment only ([`kops_vsphere::Credentials`]).

use std::collections::BTreeMap;

use kops_api::{Cluster, InstanceGroup};
use kops_vsphere::cluster::{self, Changes, GroupSpec};
use kops_vsphere::vcenter::Vcenter;
use kops_vsphere::Credentials;
use kops_vsphere_model::groups::group_specs;
use kops_vsphere_model::secrets::component_secrets;
use kops_vsphere_model::settings::{connect, require_api_address, settings, Settings};
use kops_vsphere_model::store_key;

pub use kops_vsphere::calls_summary;
pub use kops_vsphere_model::secrets::ComponentSecret;

use crate::{require_cluster, OpsError, Registry};

/// One refused field of the spec, with its fix.
fn spec_error(field: &str, message: &str, hint: &str) -> OpsError {
    OpsError::Flags(vec![kops_api::FieldError::new(field, message).hint(hint)])
}

/// What a vSphere update did or would do.
#[derive(Debug, Default)]
pub struct VsphereUpdate {
    pub changes: Changes,
    /// State-store keys written (or, dry, to write).
    pub state_writes: Vec<String>,
    /// SOAP calls by method.
    pub calls: BTreeMap<String, u64>,
    /// What the spec allows but will likely not work (printed, not fatal).
    pub warnings: Vec<String>,
    /// After an apply: the vCenter credentials of the cluster's
    /// components, to be written as Secrets through its API
    /// ([`component_secrets`]).
    pub secrets: Vec<ComponentSecret>,
}

impl VsphereUpdate {
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty() && self.state_writes.is_empty()
    }
}

pub(crate) struct Loaded {
    pub(crate) cluster: Cluster,
    pub(crate) groups: Vec<InstanceGroup>,
    pub(crate) settings: Settings,
    specs: Vec<GroupSpec>,
    /// The state-store key control-plane user data carries instead of the
    /// operator's (see [`store_key`]).
    store_key: Option<Credentials>,
}

/// The cluster, its groups and settings; `consent` decides the state-store
/// key of control-plane VMs ([`store_key`]; its warnings go to
/// `warnings`).
pub(crate) async fn load(
    registry: &Registry,
    name: &str,
    consent: store_key::Consent,
    warnings: &mut Vec<String>,
) -> Result<Loaded, OpsError> {
    let cluster = require_cluster(registry, name).await?;
    let groups = registry.list_instance_groups(name).await?;
    kops_api::validation::validate_all(&cluster, &groups)?;
    let settings = settings(&cluster)?;
    let specs = group_specs(&cluster, &groups)?;
    let store_key =
        store_key::control_plane_store_key(consent, &config_base(registry, &cluster), warnings)?;
    Ok(Loaded {
        cluster,
        groups,
        settings,
        specs,
        store_key,
    })
}

/// The groups' specs with their user data (after the keys exist), the
/// state-store keys written, and the node inputs.
async fn with_user_data(
    registry: &Registry,
    loaded: &Loaded,
    config_base: &str,
    apply: bool,
) -> Result<(Vec<GroupSpec>, Vec<String>, kops_nodeup::config::NodeInputs), OpsError> {
    let nodeup =
        crate::update::nodeup::resolve_from_environment(registry, &loaded.cluster, &loaded.groups)
            .await?;
    let mut written = Vec::new();
    if apply {
        crate::pki::ensure_cluster_pki(registry, &loaded.cluster).await?;
        written.extend(nodeup.upload(registry).await?);
    }
    let mut inputs = crate::pki::node_inputs(registry, &loaded.cluster, &loaded.groups).await?;
    inputs.nodeup = Some(nodeup.sources.clone());
    inputs.base_url_images = nodeup.images.clone();
    // The control plane's virtual IP is the API's address: a name of the
    // API server's certificate (kops' ApiserverAdditionalIPs).
    if let Some(vip) = loaded
        .cluster
        .spec
        .cloud_config
        .as_ref()
        .and_then(|c| c.vsphere_control_plane_vip.clone())
        .filter(|v| !v.trim().is_empty())
    {
        inputs.api_server_addresses = vec![vip];
    }
    let mut specs = loaded.specs.clone();
    for spec in &mut specs {
        let group = loaded
            .groups
            .iter()
            .find(|g| g.name() == spec.name)
            .expect("specs come from the groups");
        spec.user_data = kops_nodeup::bootstrap::user_data_with_env(
            &loaded.cluster,
            group,
            config_base,
            &inputs,
            &store_key::with_store_key(loaded.store_key.as_ref()),
        )
        .map_err(|e| {
            spec_error(
                &format!("instance group `{}`", spec.name),
                &e.to_string(),
                "fix the group's spec",
            )
        })?;
        if let Some(rendered) =
            kops_nodeup::config::rendered_with_inputs(&loaded.cluster, group, config_base, &inputs)
                .map_err(|e| {
                    spec_error(
                        &format!("instance group `{}`", spec.name),
                        &e.to_string(),
                        "fix the group's spec",
                    )
                })?
        {
            let key = kops_state::registry::nodeup_config_key(
                loaded.cluster.name(),
                rendered.role,
                group.name(),
            );
            if write_if_changed(registry, &key, rendered.yaml.as_bytes(), apply).await? {
                written.push(key);
            }
        }
    }
    Ok((specs, written, inputs))
}

/// The addons the control plane applies (`addons/`: the bootstrap channel
/// and its manifests, vSphere's cloud controller manager and CSI driver
/// among them), written when they differ; the keys written.
async fn write_addons(
    registry: &Registry,
    loaded: &Loaded,
    config_base: &str,
    inputs: &kops_nodeup::config::NodeInputs,
    apply: bool,
) -> Result<Vec<String>, OpsError> {
    let model = kops_model::Model {
        cluster: &loaded.cluster,
        groups: &loaded.groups,
        ssh_public_key: None,
        node_inputs: Some(inputs),
        account_id: None,
        config_base,
    };
    let files = crate::render::files::neutral_files(&model, &loaded.cluster).map_err(|e| {
        OpsError::CannotApply {
            cluster: loaded.cluster.name().to_string(),
            reason: e.to_string(),
        }
    })?;
    let mut written = Vec::new();
    for file in files
        .iter()
        .filter(|f| f.base.is_none() && f.path.starts_with("addons/"))
    {
        let key = format!("{}/{}", loaded.cluster.name(), file.path);
        if write_if_changed(registry, &key, &file.contents, apply).await? {
            written.push(key);
        }
    }
    Ok(written)
}

/// Writes `key` when its bytes differ (or only says so, dry); whether it
/// differed.
async fn write_if_changed(
    registry: &Registry,
    key: &str,
    bytes: &[u8],
    apply: bool,
) -> Result<bool, OpsError> {
    let store_error = |e: kops_state::StoreError| OpsError::Registry(e.into());
    let current = registry.store().read(key).await.map_err(store_error)?;
    if current.as_deref() == Some(bytes) {
        return Ok(false);
    }
    if apply {
        registry
            .store()
            .write(key, bytes, kops_state::WriteOptions::default())
            .await
            .map_err(store_error)?;
    }
    Ok(true)
}

/// `update cluster` on vSphere. Every vCenter object the spec names is
/// looked up before anything is written or made.
pub async fn update(
    registry: &Registry,
    name: &str,
    apply: bool,
    copy_operator: bool,
) -> Result<VsphereUpdate, OpsError> {
    let consent = if copy_operator {
        store_key::Consent::Copy
    } else {
        store_key::Consent::Ask
    };
    let mut store_warnings = Vec::new();
    let loaded = load(registry, name, consent, &mut store_warnings).await?;
    require_api_address(&loaded.cluster)?;
    let vc = connect(&loaded.settings).await?;
    let result = update_with(registry, &loaded, &vc, apply).await;
    vc.logout().await;
    let mut outcome = result?;
    outcome.calls = vc.client.calls();
    outcome.warnings = kops_api::vsphere::warnings(&loaded.cluster);
    outcome.warnings.extend(store_warnings);
    if apply {
        outcome.secrets = component_secrets(&loaded.cluster, copy_operator, &mut outcome.warnings)?;
    }
    Ok(outcome)
}

async fn update_with(
    registry: &Registry,
    loaded: &Loaded,
    vc: &Vcenter,
    apply: bool,
) -> Result<VsphereUpdate, OpsError> {
    let placement = &loaded.settings.placement;
    let resolved = cluster::resolve(vc, placement, &loaded.specs).await?;
    let config_base = config_base(registry, &loaded.cluster);
    let (specs, mut state_writes, inputs) =
        with_user_data(registry, loaded, &config_base, apply).await?;
    state_writes.extend(write_addons(registry, loaded, &config_base, &inputs, apply).await?);
    let completed = crate::spec::completed_spec(&loaded.cluster, &config_base);
    let key = format!("{}/cluster-completed.spec", loaded.cluster.name());
    let yaml = kops_api::to_yaml(&completed);
    if write_if_changed(registry, &key, yaml.as_bytes(), apply).await? {
        state_writes.push(key);
    }
    let changes = cluster::update(
        vc,
        loaded.cluster.name(),
        placement,
        resolved,
        &specs,
        apply,
    )
    .await?;
    Ok(VsphereUpdate {
        changes,
        state_writes,
        ..Default::default()
    })
}

/// Where the cluster's state lives.
fn config_base(registry: &Registry, cluster: &Cluster) -> String {
    cluster
        .spec
        .config_base
        .clone()
        .unwrap_or_else(|| registry.config_base(cluster.name()))
}

/// The groups' specs as an update would make them now (nothing written),
/// to tell which VMs are up to date.
pub(crate) async fn current_specs(
    registry: &Registry,
    loaded: &Loaded,
) -> Result<Vec<GroupSpec>, OpsError> {
    let base = config_base(registry, &loaded.cluster);
    Ok(with_user_data(registry, loaded, &base, false).await?.0)
}

/// The running cluster's VMs, with what each should be made from now (the
/// state-store key `update` gave control-plane VMs is kept).
pub(crate) async fn instances(
    registry: &Registry,
    name: &str,
) -> Result<kops_vsphere_model::instances::VsphereInstances, OpsError> {
    let loaded = load(registry, name, store_key::Consent::Keep, &mut Vec::new()).await?;
    let specs = current_specs(registry, &loaded).await?;
    Ok(kops_vsphere_model::instances::VsphereInstances::new(
        name,
        loaded.settings,
        loaded.groups,
        specs,
    ))
}

/// `delete cluster` on vSphere: the cluster's VMs (powered off first) and
/// then its folder when empty; the names (to be) deleted.
pub async fn delete(
    registry: &Registry,
    name: &str,
    apply: bool,
) -> Result<(cluster::Removal, BTreeMap<String, u64>), OpsError> {
    let cluster = require_cluster(registry, name).await?;
    let settings = settings(&cluster)?;
    let vc = connect(&settings).await?;
    let result = cluster::delete(
        &vc,
        name,
        &settings.placement.datacenter,
        &settings.placement.folder,
        &settings.placement.datastore,
        apply,
    )
    .await;
    vc.logout().await;
    Ok((result?, vc.client.calls()))
}
