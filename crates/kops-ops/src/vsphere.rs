//! vSphere's use cases: `update cluster` (the cluster's VMs brought to the
//! groups' sizes, the state-store files written only when they differ)
//! and `delete cluster`, over kops-vsphere (`get instances`, validate,
//! rolling update and dump go through kops-roll's `Cloud`, which
//! [`crate::vsphere_instances`] serves). Credentials come from the
//! environment only ([`kops_vsphere::Credentials`]).

use std::collections::BTreeMap;

use kops_api::vsphere::StaticNetwork;
use kops_api::{Cluster, InstanceGroup, Role};
use kops_vsphere::cluster::{self, Changes, GroupSpec};
use kops_vsphere::disks::EtcdVolume;
use kops_vsphere::vcenter::Vcenter;
use kops_vsphere::Credentials;

pub use kops_vsphere::calls_summary;

use crate::{require_cluster, OpsError, Registry};

pub mod settings;
pub(crate) mod store_key;

use settings::spec_error;
pub use settings::{settings, Settings};

/// A vSphere cluster's settings from its spec.
/// Without DNS, the control plane's virtual IP is the only API address
/// nodes can have: `update` requires it (`delete` and `get` do not).
pub fn require_api_address(cluster: &Cluster) -> Result<(), OpsError> {
    let config = cluster.spec.cloud_config.clone().unwrap_or_default();
    let no_dns = cluster
        .spec
        .topology
        .as_ref()
        .and_then(|t| t.dns.as_ref())
        .and_then(|d| d.kind.as_deref())
        .is_none_or(|kind| kind == "None");
    let vip = config
        .vsphere_control_plane_vip
        .as_deref()
        .is_some_and(|v| !v.trim().is_empty());
    if no_dns && !vip {
        return Err(spec_error(
            "spec.cloudConfig.vSphereControlPlaneVIP",
            "is required for a vSphere cluster without DNS (spec.networking.topology.dns: None): nodes would have no API address",
            "set a free address of the VMs' network with `kops edit cluster` (`create cluster` takes --vsphere-control-plane-vip); kube-vip holds it on a control-plane VM",
        ));
    }
    Ok(())
}

/// Logs in to the cluster's vCenter with the environment's credentials.
pub async fn connect(settings: &Settings) -> Result<Vcenter, OpsError> {
    let credentials = Credentials::from_env()?;
    Ok(Vcenter::login_with(&settings.server, &settings.trust, &credentials).await?)
}

/// A group's VM size from its machine type (`<cpus>cpu-<memory>gb`).
fn group_size(group: &InstanceGroup) -> Result<(u32, u64), OpsError> {
    let machine = group
        .spec
        .machine_type
        .as_deref()
        .unwrap_or(kops_api::new_cluster::VSPHERE_DEFAULT_MACHINE_TYPE);
    kops_api::new_cluster::vsphere_machine_type(machine).ok_or_else(|| {
        spec_error(
            &format!("instance group `{}` spec.machineType", group.name()),
            &format!("`{machine}` is not a vSphere machine size"),
            "size vSphere VMs as `<cpus>cpu-<memory>gb`, e.g. `2cpu-4gb`",
        )
    })
}

/// A group's boot disk size in GiB (`spec.rootVolume.size`, else kops'
/// older `rootVolumeSize`); `None` keeps the template's.
fn root_disk_gib(group: &InstanceGroup) -> Result<Option<u64>, OpsError> {
    let size = group
        .spec
        .root_volume
        .as_ref()
        .and_then(|r| r.size)
        .or(group.spec.root_volume_size);
    size.map(|s| {
        u64::try_from(s).ok().filter(|s| *s > 0).ok_or_else(|| {
            spec_error(
                &format!("instance group `{}` spec.rootVolume.size", group.name()),
                &format!("`{s}` is not a disk size"),
                "give the boot disk's size in GiB, or leave it unset to keep the template's",
            )
        })
    })
    .transpose()
}

/// The etcd data disks of a control-plane group: one per etcd cluster
/// with a member on the group (`etcdMembers[].instanceGroup`), sized as
/// the member's `volumeSize` (kops' default 20 GiB). A member is one VM,
/// so such a group must have one VM.
fn etcd_volumes(
    cluster: &Cluster,
    group: &InstanceGroup,
    networks: &BTreeMap<String, StaticNetwork>,
) -> Result<Vec<EtcdVolume>, OpsError> {
    if group.role() != Some(Role::ControlPlane) {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for etcd in cluster.spec.etcd_clusters.iter().flatten() {
        let Some(member) = etcd
            .etcd_members
            .iter()
            .find(|m| m.instance_group.as_deref() == Some(group.name()))
        else {
            continue;
        };
        let size = member
            .volume_size
            .unwrap_or(i64::from(kops_model::compute::DEFAULT_ETCD_VOLUME_SIZE));
        out.push(EtcdVolume {
            etcd: etcd.name.clone(),
            member: member.name.clone(),
            members: etcd.etcd_members.iter().map(|m| m.name.clone()).collect(),
            // Every member's group has an address, or none is listed (a
            // single member on DHCP; validation refuses more without).
            addresses: etcd
                .etcd_members
                .iter()
                .map(|m| {
                    Some(
                        networks
                            .get(m.instance_group.as_deref()?)?
                            .address
                            .addr()
                            .to_string(),
                    )
                })
                .collect::<Option<Vec<String>>>()
                .unwrap_or_default(),
            version: kops_model::files::etcd_version(cluster, etcd.version.as_deref()),
            size_gib: u64::try_from(size).ok().filter(|s| *s > 0).ok_or_else(|| {
                spec_error(
                    &format!(
                        "spec.etcdClusters[{}].etcdMembers[{}].volumeSize",
                        etcd.name, member.name
                    ),
                    &format!("`{size}` is not a disk size"),
                    "give the etcd disk's size in GiB (kops' default is 20)",
                )
            })?,
        });
    }
    if !out.is_empty() && group.spec.min_size.unwrap_or(0) > 1 {
        return Err(spec_error(
            &format!("instance group `{}` spec.minSize", group.name()),
            "is more than 1, but the group holds one etcd member (one etcd disk set per VM)",
            "make one control-plane group per etcd member, each with minSize 1, as `kops create cluster --control-plane-count` does",
        ));
    }
    Ok(out)
}

/// The groups as GroupSpecs without user data (enough to look up their
/// templates).
fn group_specs(cluster: &Cluster, groups: &[InstanceGroup]) -> Result<Vec<GroupSpec>, OpsError> {
    let networks = kops_api::vsphere::control_plane_networks(cluster).map_err(OpsError::Flags)?;
    groups
        .iter()
        .filter(|g| g.role() != Some(Role::Bastion))
        .map(|g| {
            let (cpus, memory_mb) = group_size(g)?;
            let template = g
                .spec
                .image
                .clone()
                .filter(|i| !i.is_empty())
                .ok_or_else(|| {
                    spec_error(
                        &format!("instance group `{}` spec.image", g.name()),
                        "names no template VM",
                        "set it to a template VM of the datacenter (`kops edit ig`)",
                    )
                })?;
            Ok(GroupSpec {
                name: g.name().to_string(),
                role: g.role().unwrap_or(Role::Node).as_str().to_string(),
                template,
                count: usize::try_from(g.spec.min_size.unwrap_or(0).max(0)).unwrap_or(0),
                cpus,
                memory_mb,
                user_data: String::new(),
                root_disk_gib: root_disk_gib(g)?,
                etcd: etcd_volumes(cluster, g, &networks)?,
                network: networks.get(g.name()).map(|n| cluster::StaticNetwork {
                    address: n.address.to_string(),
                    gateway: n.gateway.to_string(),
                    nameservers: n.nameservers.iter().map(ToString::to_string).collect(),
                }),
            })
        })
        .collect()
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
    let files = crate::render::neutral_files(&model, &loaded.cluster).map_err(|e| {
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

/// The key of vCenter's CA in the CSI driver's Secret, and where the
/// driver (which mounts that Secret at /etc/cloud) reads it.
const CA_KEY: &str = "vcenter-ca.pem";
const CSI_CA_PATH: &str = "/etc/cloud/vcenter-ca.pem";

/// A Secret an in-cluster component reads its vCenter credentials from.
#[derive(Clone)]
pub struct ComponentSecret {
    pub namespace: &'static str,
    pub name: &'static str,
    /// Key → value (written as the Secret's `stringData`).
    pub data: BTreeMap<String, String>,
}

impl std::fmt::Debug for ComponentSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ComponentSecret")
            .field("namespace", &self.namespace)
            .field("name", &self.name)
            .field("keys", &self.data.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// Each in-cluster component's own vCenter account: from the file its
/// variable names, else (`copy_operator`) the operator's own, said in a
/// warning; else none, and the warning says how to give one.
fn component_account(
    var: &str,
    secret: &str,
    component: &str,
    copy_operator: bool,
    warnings: &mut Vec<String>,
) -> Result<Option<Credentials>, OpsError> {
    let lookup = |name: &str| std::env::var(name).ok();
    if let Some(own) = Credentials::from_file_named_by(var, &lookup)? {
        return Ok(Some(own));
    }
    if copy_operator {
        let operator = Credentials::from_env()?;
        warnings.push(format!(
            "copied your own vCenter account `{}` into the Secret {secret} (--vsphere-copy-operator-credentials): it can clone and destroy VMs and read every VM's guestinfo; give the {component} an account of its own in {var} (privileges: docs/vsphere.md)",
            operator.username
        ));
        return Ok(Some(operator));
    }
    warnings.push(format!(
        "the Secret {secret} was not written: the {component} needs a vCenter account of its own\nhint: name a file holding its user and password (two lines) in {var} (privileges: docs/vsphere.md), or pass --vsphere-copy-operator-credentials to copy yours"
    ));
    Ok(None)
}

/// The Secrets the cloud controller manager (and kops-controller) and the
/// CSI driver read, each with the component's own vCenter account
/// ([`component_account`]): `kube-system/vsphere-cloud-secret`
/// (`<host>.username`, `<host>.password`) and
/// `vmware-system-csi/vsphere-config-secret` (`csi-vsphere.conf`). They
/// go to the cluster's API only; never to the state store or a node. A
/// component without an account gets no Secret, and a warning.
pub fn component_secrets(
    cluster: &Cluster,
    copy_operator: bool,
    warnings: &mut Vec<String>,
) -> Result<Vec<ComponentSecret>, OpsError> {
    let settings = settings(cluster)?;
    let cpi_secret = format!("kube-system/{}", kops_model::addons::VSPHERE_CPI_SECRET);
    let csi_secret = format!(
        "vmware-system-csi/{}",
        kops_model::addons::VSPHERE_CSI_SECRET
    );
    let cpi = component_account(
        kops_vsphere::CCM_CREDENTIALS_FILE,
        &cpi_secret,
        "cloud controller manager (and kops-controller)",
        copy_operator,
        warnings,
    )?;
    let csi = component_account(
        kops_vsphere::CSI_CREDENTIALS_FILE,
        &csi_secret,
        "CSI driver",
        copy_operator,
        warnings,
    )?;
    let server = kops_api::new_cluster::VsphereServer::parse(&settings.server);
    let quoted = |v: &str| format!("\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\""));
    let mut secrets = Vec::new();
    if let Some(account) = cpi {
        secrets.push(ComponentSecret {
            namespace: "kube-system",
            name: kops_model::addons::VSPHERE_CPI_SECRET,
            data: BTreeMap::from([
                (format!("{}.username", server.host), account.username),
                (format!("{}.password", server.host), account.password),
            ]),
        });
    }
    let Some(account) = csi else {
        return Ok(secrets);
    };
    let mut conf = format!(
        "[Global]\ncluster-id = {}\n\n[VirtualCenter {}]\ninsecure-flag = \"{}\"\nuser = {}\npassword = {}\nport = \"{}\"\ndatacenters = {}\n",
        quoted(cluster.name()),
        quoted(&server.host),
        server.insecure,
        quoted(&account.username),
        quoted(&account.password),
        server.port,
        quoted(&settings.placement.datacenter),
    );
    // The CSI driver checks vCenter's certificate as kops-rs does: pinned
    // by its thumbprint, or against the spec's CA (a file next to the
    // config in the same Secret).
    let mut data = BTreeMap::new();
    match &settings.trust {
        kops_vsphere::trust::Trust::Thumbprint(pin) => {
            conf.push_str(&format!(
                "thumbprint = {}\n",
                quoted(&kops_vsphere::trust::format_thumbprint(pin))
            ));
        }
        kops_vsphere::trust::Trust::Ca(pem) => {
            conf.push_str(&format!("ca-file = {}\n", quoted(CSI_CA_PATH)));
            data.insert(CA_KEY.to_string(), pem.clone());
        }
        kops_vsphere::trust::Trust::System => {}
    }
    data.insert("csi-vsphere.conf".to_string(), conf);
    secrets.push(ComponentSecret {
        namespace: "vmware-system-csi",
        name: kops_model::addons::VSPHERE_CSI_SECRET,
        data,
    });
    Ok(secrets)
}

/// `delete cluster` on vSphere: the cluster's VMs (powered off first) and
/// then its folder when empty; the names (to be) deleted.
pub async fn delete(
    registry: &Registry,
    name: &str,
    apply: bool,
) -> Result<(Vec<String>, BTreeMap<String, u64>), OpsError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(yaml: &str) -> Cluster {
        let text = format!(
            "apiVersion: kops.k8s.io/v1alpha2\nkind: Cluster\nmetadata:\n  name: c.k8s.local\nspec:\n  cloudProvider: vsphere\n  cloudConfig:\n{yaml}"
        );
        serde_yaml_ng::from_str(&text).unwrap()
    }

    #[test]
    fn settings_from_a_kops_1_17_spec() {
        let c = cluster(
            "    vSphereServer: vc.example.com\n    vSphereDatacenter: DC0\n    vSphereResourcePool: C0\n    vSphereDatastore: ds\n    vSphereCoreDNSServer: http://10.0.0.2:2379\n",
        );
        assert_eq!(
            crate::cloud::of(&c).unwrap().region(&c).unwrap(),
            "DC0",
            "a vSphere cluster's region is its datacenter"
        );
        // Without DNS, the control plane's virtual IP is the API address.
        settings(&c).unwrap();
        let e = require_api_address(&c).unwrap_err().to_string();
        assert!(
            e.contains("spec.cloudConfig.vSphereControlPlaneVIP")
                && e.contains("--vsphere-control-plane-vip"),
            "{e}"
        );
        let c = cluster(
            "    vSphereServer: vc.example.com\n    vSphereDatacenter: DC0\n    vSphereResourcePool: C0\n    vSphereDatastore: ds\n    vSphereControlPlaneVIP: 10.0.0.100\n",
        );
        require_api_address(&c).unwrap();
        let s = settings(&c).unwrap();
        assert_eq!(s.server, "vc.example.com");
        assert_eq!(s.placement.folder, "c.k8s.local");
        assert_eq!(s.placement.network, None);
    }

    #[test]
    fn credentials_in_a_spec_and_missing_fields_are_refused() {
        let c = cluster(
            "    vSphereServer: vc\n    vSphereDatacenter: DC0\n    vSphereResourcePool: C0\n    vSphereDatastore: ds\n    vSphereUsername: admin\n    vSpherePassword: secret\n",
        );
        let e = settings(&c).unwrap_err().to_string();
        assert!(
            e.contains("VSPHERE_USERNAME") && !e.contains("secret"),
            "{e}"
        );
        let c = cluster("    vSphereServer: vc\n");
        let e = settings(&c).unwrap_err().to_string();
        assert!(e.contains("vSphereDatacenter"), "{e}");
    }

    #[test]
    fn control_plane_groups_get_etcd_disks_and_groups_their_disk_size() {
        let c = cluster(
            "    vSphereServer: vc\n  etcdClusters:\n  - {name: main, etcdMembers: [{name: a, instanceGroup: cp-a, volumeSize: 8}, {name: b, instanceGroup: cp-b}]}\n  - {name: events, etcdMembers: [{name: a, instanceGroup: cp-a}, {name: b, instanceGroup: cp-b}]}\n",
        );
        let group = |yaml: &str| -> InstanceGroup {
            serde_yaml_ng::from_str(&format!(
                "apiVersion: kops.k8s.io/v1alpha2\nkind: InstanceGroup\nmetadata:\n  name: cp-a\nspec:\n{yaml}"
            ))
            .unwrap()
        };
        let cp = group("  role: Master\n  minSize: 1\n  rootVolume: {size: 60}\n");
        let none = BTreeMap::new();
        let volumes = etcd_volumes(&c, &cp, &none).unwrap();
        let summary: Vec<(&str, &str, u64)> = volumes
            .iter()
            .map(|v| (v.etcd.as_str(), v.member.as_str(), v.size_gib))
            .collect();
        assert_eq!(summary, [("main", "a", 8), ("events", "a", 20)]);
        assert_eq!(volumes[0].members, ["a", "b"]);
        assert!(volumes[0].addresses.is_empty());
        // With the groups' static addresses, every member's is listed.
        let c = cluster(
            "    vSphereServer: vc\n    vSphereControlPlaneAddresses: {cp-a: 10.0.0.11/24, cp-b: 10.0.0.12/24}\n    vSphereGateway: 10.0.0.1\n    vSphereNameservers: [10.0.0.2]\n  etcdClusters:\n  - {name: main, etcdMembers: [{name: a, instanceGroup: cp-a}, {name: b, instanceGroup: cp-b}]}\n",
        );
        let networks = kops_api::vsphere::control_plane_networks(&c).unwrap();
        let volumes = etcd_volumes(&c, &cp, &networks).unwrap();
        assert_eq!(volumes[0].addresses, ["10.0.0.11", "10.0.0.12"]);
        let specs = group_specs(
            &c,
            &[group("  role: Master\n  minSize: 1\n  image: tmpl\n")],
        )
        .unwrap();
        let network = specs[0].network.as_ref().unwrap();
        assert_eq!(
            (network.address.as_str(), network.gateway.as_str()),
            ("10.0.0.11/24", "10.0.0.1")
        );
        assert_eq!(root_disk_gib(&cp).unwrap(), Some(60));
        // Workers get no etcd disk; kops' older rootVolumeSize is read too.
        let worker = group("  role: Node\n  rootVolumeSize: 50\n");
        assert!(etcd_volumes(&c, &worker, &none).unwrap().is_empty());
        assert_eq!(root_disk_gib(&worker).unwrap(), Some(50));
        // One member is one VM.
        let e = etcd_volumes(&c, &group("  role: Master\n  minSize: 3\n"), &none)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("cp-a")
                && e.contains("minSize")
                && e.contains("one control-plane group per etcd member"),
            "{e}"
        );
        let e = root_disk_gib(&group("  role: Node\n  rootVolume: {size: 0}\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("spec.rootVolume.size"), "{e}");
    }
}
