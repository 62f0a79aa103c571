//! A cluster's VMs: where they go ([`Placement`]), what each group wants
//! ([`GroupSpec`]), what exists (listed from the cluster's folder by
//! marker) and the changes between the two: update (create missing VMs,
//! destroy surplus ones), replace one VM (a rolling update's step) and
//! delete (everything of the cluster, powered off first).

use std::collections::BTreeMap;

use base64::Engine;
use sha2::{Digest, Sha256};

use crate::client::MoRef;
use crate::disks::{self, AttachedEtcdDisk, EtcdDisk, EtcdVolume, TemplateHardware, ETCD_KEY};
use crate::kept::KeptDisks;
use crate::network::{first_nic, Network};
use crate::vcenter::{extra_config, extra_config_xml, FirstClassDisk, Properties, Vcenter};
use crate::{
    VsphereError, BOOTED_KEY, CLUSTER_KEY, GROUP_KEY, JOINING_ROLES, ROLE_KEY, SPEC_HASH_KEY,
    TOKEN_KEY,
};

/// Where the cluster's VMs live (names as the user gave them).
#[derive(Debug, Clone)]
pub struct Placement {
    pub datacenter: String,
    /// The VM folder (under the datacenter's `vm` folder), made when missing.
    pub folder: String,
    /// A cluster, host or resource pool (a name under `<dc>/host`, or an
    /// inventory path).
    pub resource_pool: String,
    pub datastore: String,
    /// The network of the VMs' first NIC (a standard or distributed port
    /// group); `None` keeps the template's.
    pub network: Option<String>,
}

/// One instance group as the VMs should be.
#[derive(Debug, Clone)]
pub struct GroupSpec {
    pub name: String,
    /// Its role as kops writes it (`Master`, `Node`, ...): only
    /// [`JOINING_ROLES`] get a bootstrap token.
    pub role: String,
    /// The template VM (its name under `<dc>/vm`, or an inventory path).
    pub template: String,
    pub count: usize,
    pub cpus: u32,
    pub memory_mb: u64,
    /// The user data (nodeup's bootstrap script).
    pub user_data: String,
    /// The boot disk's size (`rootVolumeSize`); `None` keeps the template's.
    pub root_disk_gib: Option<u64>,
    /// One data disk per etcd cluster (control-plane groups).
    pub etcd: Vec<EtcdVolume>,
    /// The VM's static address (a control-plane group of one VM); `None`:
    /// DHCP.
    pub network: Option<StaticNetwork>,
}

/// A VM's static address, given to it by cloud-init's network config in
/// `guestinfo.metadata` (its first NIC, matched by MAC address).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaticNetwork {
    /// `IP/prefix`.
    pub address: String,
    pub gateway: String,
    pub nameservers: Vec<String>,
}

impl GroupSpec {
    /// Whether its VMs join through kops-controller (and so get a
    /// one-time token).
    pub fn joins(&self) -> bool {
        JOINING_ROLES.contains(&self.role.as_str())
    }

    /// The hash a VM made from this spec carries: a VM with another hash
    /// is replaced by a rolling update.
    pub fn hash(&self, placement: &Placement) -> String {
        let mut h = Sha256::new();
        for part in [
            self.template.as_str(),
            &self.cpus.to_string(),
            &self.memory_mb.to_string(),
            placement.network.as_deref().unwrap_or(""),
            &self.user_data,
        ] {
            h.update(part.as_bytes());
            h.update([0]);
        }
        // Disks count only when asked for, so the hash of a VM made
        // before kops-rs sized disks stays the same.
        if let Some(gib) = self.root_disk_gib {
            h.update(format!("root-disk={gib}").as_bytes());
            h.update([0]);
        }
        for volume in &self.etcd {
            h.update(
                format!(
                    "etcd={} member={} members={} gib={} version={}",
                    volume.etcd,
                    volume.member,
                    volume.members.join(","),
                    volume.size_gib,
                    volume.version,
                )
                .as_bytes(),
            );
            if !volume.addresses.is_empty() {
                h.update(format!(" addresses={}", volume.addresses.join(",")).as_bytes());
            }
            h.update([0]);
        }
        if let Some(network) = &self.network {
            h.update(
                format!(
                    "address={} gateway={} nameservers={}",
                    network.address,
                    network.gateway,
                    network.nameservers.join(",")
                )
                .as_bytes(),
            );
            h.update([0]);
        }
        hex(&h.finalize())[..16].to_string()
    }
}

/// A VM of the cluster as listed.
#[derive(Debug, Clone)]
pub struct Vm {
    pub reference: MoRef,
    pub name: String,
    pub group: String,
    /// The BIOS UUID (the node's provider ID is `vsphere://<uuid>`).
    pub uuid: String,
    pub powered_on: bool,
    pub ip: Option<String>,
    pub spec_hash: String,
    /// Whether its one-time bootstrap token is still unused.
    pub has_token: bool,
    /// Its role ([`ROLE_KEY`]); `None` on a VM cloned before kops-rs
    /// wrote it.
    pub role: Option<String>,
    /// Whether its guest ever booted (nodeup's first-boot marker,
    /// [`BOOTED_KEY`]).
    pub booted: bool,
    /// Its etcd disks, found by the disk ids (or, cloned before etcd
    /// disks were First Class Disks, the SCSI addresses) its
    /// `guestinfo.kops.etcd` records, wherever vCenter moved their files.
    pub etcd_disks: Vec<AttachedEtcdDisk>,
    /// Why its `guestinfo.kops.etcd` cannot be read, if it cannot: such a
    /// VM is never destroyed (its etcd disks could not be told apart).
    pub etcd_unreadable: Option<String>,
    /// Plain-file etcd disks an earlier destroy detached to register as
    /// First Class Disks, and may not have (file, disk name).
    pub etcd_registering: Vec<(String, String)>,
}

/// The vCenter objects a placement names, looked up.
pub struct Resolved {
    pub datacenter: MoRef,
    pub vm_folder_path: String,
    /// `None` when the folder does not exist yet.
    pub folder: Option<MoRef>,
    pub pool: MoRef,
    pub datastore: MoRef,
    /// The VMs' network, when the placement names one.
    pub network: Option<Network>,
    /// Template name → the template.
    pub templates: BTreeMap<String, Template>,
}

/// A template VM as clones need it.
pub struct Template {
    pub vm: MoRef,
    /// Its current snapshot (clones are linked to it).
    pub snapshot: Option<MoRef>,
    pub hardware: TemplateHardware,
}

/// What a run changed (or, dry, would change).
#[derive(Debug, Default, Clone)]
pub struct Changes {
    pub folder_created: bool,
    pub created: Vec<String>,
    pub destroyed: Vec<String>,
    /// VMs made from an older spec (a rolling update replaces them).
    pub stale: Vec<String>,
    /// VMs that never started (powered off, their bootstrap token unused
    /// and no first-boot marker: an update interrupted between the clone
    /// and the power-on): destroyed and cloned again, so they are in
    /// `destroyed` and their groups' clones in `created` too.
    pub unfinished: Vec<String>,
    /// VMs that booted once and are powered off now (host maintenance,
    /// HA, an operator): left alone, only reported.
    pub powered_off: Vec<String>,
    /// etcd disks the clones make (`<name> (<n> GiB)`).
    pub etcd_disks_made: Vec<String>,
    /// Kept etcd disks the clones grow first (`<name> (<a> GiB to <b> GiB)`).
    pub etcd_disks_grown: Vec<String>,
    /// VMs of groups that do not join through kops-controller (control
    /// plane) still holding a bootstrap token, as clones made before
    /// kops-rs stopped giving them one: the token is removed.
    pub tokens_removed: Vec<String>,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        !self.folder_created
            && self.created.is_empty()
            && self.destroyed.is_empty()
            && self.tokens_removed.is_empty()
    }
}

fn inventory_path(datacenter: &str, kind: &str, name: &str) -> String {
    if name.starts_with('/') {
        name.trim_start_matches('/').to_string()
    } else {
        format!("{datacenter}/{kind}/{name}")
    }
}

/// Looks up everything a placement and the groups name; the first missing
/// one is an error naming it and the fix. Nothing is made here.
pub async fn resolve(
    vc: &Vcenter,
    placement: &Placement,
    groups: &[GroupSpec],
) -> Result<Resolved, VsphereError> {
    let dc = &placement.datacenter;
    let missing = |what: &'static str, name: &str, fix: &str| VsphereError::Missing {
        what,
        name: name.to_string(),
        fix: fix.to_string(),
    };
    let datacenter = vc
        .find_path(dc)
        .await?
        .filter(|r| r.kind == "Datacenter")
        .ok_or_else(|| {
            missing(
                "datacenter",
                dc,
                "name an existing datacenter in spec.cloudConfig.vSphereDatacenter (--vsphere-datacenter)",
            )
        })?;
    let datastore = vc
        .find_path(&inventory_path(dc, "datastore", &placement.datastore))
        .await?
        .ok_or_else(|| {
            missing(
                "datastore",
                &placement.datastore,
                "name an existing datastore of the datacenter in spec.cloudConfig.vSphereDatastore (--vsphere-datastore)",
            )
        })?;
    let pool_fix = "name an existing cluster, host or resource pool in spec.cloudConfig.vSphereResourcePool (--vsphere-resource-pool)";
    let found = vc
        .find_path(&inventory_path(dc, "host", &placement.resource_pool))
        .await?
        .ok_or_else(|| missing("resource pool", &placement.resource_pool, pool_fix))?;
    let pool = match found.kind.as_str() {
        "ResourcePool" => found,
        "ClusterComputeResource" | "ComputeResource" => vc
            .properties(&found, &["resourcePool"])
            .await?
            .get("resourcePool")
            .and_then(MoRef::from_element)
            .ok_or_else(|| missing("resource pool", &placement.resource_pool, pool_fix))?,
        _ => return Err(missing("resource pool", &placement.resource_pool, pool_fix)),
    };
    let network = match &placement.network {
        Some(name) => {
            let reference = vc
                .find_path(&inventory_path(dc, "network", name))
                .await?
                .ok_or_else(|| {
                    missing(
                        "network",
                        name,
                        "name an existing network of the datacenter in spec.cloudConfig.vSphereNetwork (--vsphere-network)",
                    )
                })?;
            Some(Network::lookup(vc, name, reference).await?)
        }
        None => None,
    };
    let mut templates: BTreeMap<String, Template> = BTreeMap::new();
    for group in groups {
        if let Some(template) = templates.get(&group.template) {
            fits(&template.hardware, group)?;
            continue;
        }
        let template = vc
            .find_path(&inventory_path(dc, "vm", &group.template))
            .await?
            .filter(|r| r.kind == "VirtualMachine")
            .ok_or_else(|| {
                missing(
                    "template",
                    &group.template,
                    &format!(
                        "set instance group `{}`'s spec.image to an existing template VM of the datacenter",
                        group.name
                    ),
                )
            })?;
        let found = vc
            .properties(
                &template,
                &["snapshot.currentSnapshot", "config.hardware.device"],
            )
            .await?;
        let snapshot = found
            .get("snapshot.currentSnapshot")
            .and_then(MoRef::from_element);
        let hardware = TemplateHardware::from_devices(found.get("config.hardware.device"));
        fits(&hardware, group)?;
        templates.insert(
            group.template.clone(),
            Template {
                vm: template,
                snapshot,
                hardware,
            },
        );
    }
    let vm_folder_path = inventory_path(dc, "vm", &placement.folder);
    let folder = vc
        .find_path(&vm_folder_path)
        .await?
        .filter(|r| r.kind == "Folder");
    Ok(Resolved {
        datacenter,
        vm_folder_path,
        folder,
        pool,
        datastore,
        network,
        templates,
    })
}

/// Whether a group can be cloned from a template: its disk grows (never
/// shrinks), its etcd disks have free SCSI units, and a static address
/// has a network adapter to go on.
fn fits(hardware: &TemplateHardware, group: &GroupSpec) -> Result<(), VsphereError> {
    hardware.grows(&group.template, &group.name, group.root_disk_gib)?;
    hardware.etcd_slots(&group.template, group.etcd.len())?;
    if group.network.is_some() && first_nic(&hardware.devices).is_none() {
        return Err(VsphereError::Invalid {
            message: format!(
                "instance group `{}` has a static address, but its template `{}` has no network adapter",
                group.name, group.template
            ),
            fix: "add a network adapter to the template, or remove the group from spec.cloudConfig.vSphereControlPlaneAddresses".into(),
        });
    }
    Ok(())
}

/// The cluster's VMs in `folder` (those carrying its marker).
pub async fn list(vc: &Vcenter, folder: &MoRef, cluster: &str) -> Result<Vec<Vm>, VsphereError> {
    Ok(listing(vc, folder, cluster).await?.0)
}

/// The cluster's VMs in `folder`, and the names of all VMs there (a new
/// VM's name must be free in its folder).
async fn listing(
    vc: &Vcenter,
    folder: &MoRef,
    cluster: &str,
) -> Result<(Vec<Vm>, Vec<String>), VsphereError> {
    let found = vc
        .children(
            folder,
            "VirtualMachine",
            &[
                "name",
                "config.extraConfig",
                "config.uuid",
                "runtime.powerState",
                "guest.ipAddress",
                "config.hardware.device",
            ],
        )
        .await?;
    let names = found
        .iter()
        .filter_map(|(_, p)| p.get("name").map(|n| n.text.trim().to_string()))
        .collect();
    let mut vms: Vec<Vm> = found
        .into_iter()
        .filter_map(|(reference, p)| vm_of(reference, &p, cluster))
        .collect();
    vms.sort_by(|a, b| a.name.cmp(&b.name));
    Ok((vms, names))
}

fn vm_of(reference: MoRef, p: &Properties, cluster: &str) -> Option<Vm> {
    let extra = extra_config(p.get("config.extraConfig"));
    if extra.get(CLUSTER_KEY).map(String::as_str) != Some(cluster) {
        return None;
    }
    let text = |name: &str| p.get(name).map(|e| e.text.trim().to_string());
    let (recorded, etcd_unreadable) = match extra.get(ETCD_KEY).map(|v| EtcdDisk::decode_all(v)) {
        None => (Vec::new(), None),
        Some(Ok(recorded)) => (recorded, None),
        Some(Err(e)) => (Vec::new(), Some(e)),
    };
    let devices = p
        .get("config.hardware.device")
        .map(|d| d.children.as_slice())
        .unwrap_or_default();
    Some(Vm {
        reference,
        name: text("name").unwrap_or_default(),
        group: extra.get(GROUP_KEY).cloned().unwrap_or_default(),
        uuid: text("config.uuid").unwrap_or_default(),
        powered_on: text("runtime.powerState").as_deref() == Some("poweredOn"),
        ip: text("guest.ipAddress").filter(|ip| !ip.is_empty()),
        spec_hash: extra.get(SPEC_HASH_KEY).cloned().unwrap_or_default(),
        has_token: extra.contains_key(TOKEN_KEY),
        role: extra.get(ROLE_KEY).cloned(),
        booted: extra.get(BOOTED_KEY).is_some_and(|v| !v.is_empty()),
        etcd_disks: disks::attached_etcd_disks(devices, &recorded),
        etcd_unreadable,
        etcd_registering: extra
            .get(REGISTER_KEY)
            .map(|v| {
                v.split(';')
                    .filter_map(|m| m.split_once("=>"))
                    .map(|(from, to)| (from.to_string(), to.to_string()))
                    .collect()
            })
            .unwrap_or_default(),
    })
}

/// Brings the cluster's VMs to the groups' counts (`resolved` is what
/// [`resolve`] found for the placement and groups): makes the folder,
/// clones missing VMs, destroys surplus ones (newest names last kept).
/// VMs of groups no longer in the spec are left alone (as kops leaves a
/// deleted group's instances to `delete instancegroup`). With `apply`
/// false only the changes are computed.
pub async fn update(
    vc: &Vcenter,
    cluster: &str,
    placement: &Placement,
    resolved: Resolved,
    groups: &[GroupSpec],
    apply: bool,
) -> Result<Changes, VsphereError> {
    let mut changes = Changes::default();
    let (existing, mut taken) = match &resolved.folder {
        Some(folder) => listing(vc, folder, cluster).await?,
        None => Default::default(),
    };
    let mut to_create: Vec<(&GroupSpec, String)> = Vec::new();
    // A VM that provably never booted (powered off, no first-boot marker
    // although its nodeup sets it before anything else: it carries its
    // role, or, cloned before roles were written, an unused token) was
    // left by an interrupted update between the clone and the power-on.
    // It is made again. A powered-off VM that booted is someone's doing
    // in vCenter: left alone, reported.
    let (unfinished, existing): (Vec<Vm>, Vec<Vm>) = existing.into_iter().partition(|v| {
        !v.powered_on
            && !v.booted
            && (v.role.is_some() || v.has_token)
            && groups.iter().any(|g| g.name == v.group)
    });
    changes.unfinished = unfinished.iter().map(|v| v.name.clone()).collect();
    changes.powered_off = existing
        .iter()
        .filter(|v| !v.powered_on)
        .map(|v| v.name.clone())
        .collect();
    let mut to_destroy: Vec<&Vm> = unfinished.iter().collect();
    for group in groups {
        let hash = group.hash(placement);
        let mut mine: Vec<&Vm> = existing.iter().filter(|v| v.group == group.name).collect();
        // Up to date VMs are kept first.
        mine.sort_by_key(|v| (v.spec_hash != hash, v.name.clone()));
        for vm in mine.iter().take(group.count) {
            if vm.spec_hash != hash {
                changes.stale.push(vm.name.clone());
            }
        }
        to_destroy.extend(mine.iter().skip(group.count));
        for _ in mine.len()..group.count {
            let name = free_name(cluster, &group.name, &taken);
            taken.push(name.clone());
            to_create.push((group, name));
        }
    }
    let tokens_to_remove: Vec<&Vm> = existing
        .iter()
        .filter(|v| v.has_token && groups.iter().any(|g| g.name == v.group && !g.joins()))
        .collect();
    changes.tokens_removed = tokens_to_remove.iter().map(|v| v.name.clone()).collect();
    changes.folder_created = resolved.folder.is_none();
    changes.created = to_create.iter().map(|(_, n)| n.clone()).collect();
    changes.destroyed = to_destroy.iter().map(|v| v.name.clone()).collect();
    // A volumeSize below a kept disk's is refused before anything is made
    // (dry run too): the listed VMs' disks at no cost, the datastore's
    // disks read once when a clone needs one no listed VM holds.
    // (An unfinished VM's disks are kept for its clone too.)
    let mut kept = KeptDisks::new(
        cluster,
        &placement.datacenter,
        &resolved.datastore,
        existing
            .iter()
            .chain(&unfinished)
            .flat_map(|v| &v.etcd_disks),
    );
    for group in groups {
        let clones = to_create.iter().filter(|(g, _)| g.name == group.name);
        let plan = kept.plan(vc, &group.etcd, clones.count() > 0).await?;
        changes.etcd_disks_made.extend(
            plan.make
                .into_iter()
                .map(|(name, gib)| format!("{name} ({gib} GiB)")),
        );
        changes.etcd_disks_grown.extend(
            plan.grow
                .into_iter()
                .map(|(name, have, want)| format!("{name} ({have} GiB to {want} GiB)")),
        );
    }
    if !apply || changes.is_empty() {
        return Ok(changes);
    }
    let folder = match &resolved.folder {
        Some(folder) => folder.clone(),
        None => make_folder(vc, &resolved.vm_folder_path).await?,
    };
    // Unfinished VMs go first: their etcd disks are detached for the
    // clones that take their place.
    let (first, rest): (Vec<&Vm>, Vec<&Vm>) = to_destroy
        .into_iter()
        .partition(|v| changes.unfinished.contains(&v.name));
    for vm in first {
        destroy_vm(vc, vm, &mut kept).await?;
    }
    for (group, name) in &to_create {
        clone(
            vc, cluster, placement, &resolved, &folder, group, name, &mut kept,
        )
        .await?;
    }
    for vm in rest {
        destroy_vm(vc, vm, &mut kept).await?;
    }
    for vm in tokens_to_remove {
        vc.set_extra_config(&vm.reference, &[(TOKEN_KEY, "")])
            .await?;
    }
    Ok(changes)
}

/// Replaces the cluster's VM whose BIOS UUID is `uuid` (destroy, then
/// clone its group's VM again under a name free in the folder, never the
/// destroyed VM's, so its replacement joins as a new Kubernetes node);
/// `groups` must hold its group. The (old, new) names, or `None` when no
/// VM of the cluster has that UUID any more.
pub async fn replace(
    vc: &Vcenter,
    cluster: &str,
    placement: &Placement,
    groups: &[GroupSpec],
    uuid: &str,
) -> Result<Option<(String, String)>, VsphereError> {
    let Some(folder) = vc
        .find_path(&inventory_path(
            &placement.datacenter,
            "vm",
            &placement.folder,
        ))
        .await?
        .filter(|r| r.kind == "Folder")
    else {
        return Ok(None);
    };
    let (existing, taken) = listing(vc, &folder, cluster).await?;
    let Some(vm) = existing.iter().find(|v| v.uuid.eq_ignore_ascii_case(uuid)) else {
        return Ok(None);
    };
    let group = groups
        .iter()
        .find(|g| g.name == vm.group)
        .ok_or_else(|| VsphereError::Missing {
            what: "instance group",
            name: vm.group.clone(),
            fix: format!(
                "VM `{}` belongs to a group the cluster no longer has; `kops delete instance` cannot replace it, delete the VM in vCenter",
                vm.name
            ),
        })?;
    let resolved = resolve(vc, placement, std::slice::from_ref(group)).await?;
    // The replaced VM holds its member's disks: their sizes are known from
    // the listing, a shrink refused before the VM goes.
    let mut kept = KeptDisks::new(
        cluster,
        &placement.datacenter,
        &resolved.datastore,
        existing.iter().flat_map(|v| &v.etcd_disks),
    );
    kept.plan(vc, &group.etcd, true).await?;
    destroy_vm(vc, vm, &mut kept).await?;
    let name = free_name(cluster, &group.name, &taken);
    clone(
        vc, cluster, placement, &resolved, &folder, group, &name, &mut kept,
    )
    .await?;
    Ok(Some((vm.name.clone(), name)))
}

/// What `delete cluster` removes (or, dry, would remove).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Removal {
    /// The cluster's VMs, by name.
    pub vms: Vec<String>,
    /// Its etcd disks (First Class Disks), by name.
    pub disks: Vec<String>,
}

/// Powers off and destroys every VM of the cluster in its folder, then
/// the folder when nothing else is in it, then the cluster's etcd disks
/// (its First Class Disks on `datastore`, and any its VMs held on
/// another) and the directory kops-rs kept them in before they were
/// First Class Disks. A missing datacenter or folder means no VM to
/// delete; the disks are still removed (VMs deleted by hand leave them).
/// With `apply` false, only what would go is listed.
pub async fn delete(
    vc: &Vcenter,
    cluster: &str,
    datacenter: &str,
    folder: &str,
    datastore: &str,
    apply: bool,
) -> Result<Removal, VsphereError> {
    let path = inventory_path(datacenter, "vm", folder);
    let folder = vc.find_path(&path).await?.filter(|r| r.kind == "Folder");
    let vms = match &folder {
        Some(folder) => list(vc, folder, cluster).await?,
        None => Vec::new(),
    };
    let mut removal = Removal {
        vms: vms.iter().map(|v| v.name.clone()).collect(),
        disks: Vec::new(),
    };
    let Some(datacenter_ref) = vc.find_path(datacenter).await? else {
        return Ok(removal);
    };
    let datastore_ref = vc
        .find_path(&inventory_path(datacenter, "datastore", datastore))
        .await?;
    let mut kept = datastore_ref.map(|ds| {
        KeptDisks::new(
            cluster,
            datacenter,
            &ds,
            vms.iter().flat_map(|v| &v.etcd_disks),
        )
    });
    if !apply {
        if let Some(kept) = &mut kept {
            removal.disks = kept.all(vc).await?.into_iter().map(|d| d.name).collect();
        }
        return Ok(removal);
    }
    for vm in &vms {
        if vm.powered_on {
            vc.power_off(&vm.reference).await?;
        }
        vc.destroy(&vm.reference).await?;
    }
    if let Some(kept) = &mut kept {
        for disk in kept.all(vc).await? {
            match vc.delete_disk(&disk.datastore, &disk.id).await {
                Err(VsphereError::Fault { kind, .. }) if kind.contains("NotFound") => {}
                other => other?,
            }
            removal.disks.push(disk.name);
        }
    }
    let datastore = datastore.rsplit('/').next().unwrap_or(datastore);
    let legacy = disks::legacy_etcd_dir(datastore, cluster);
    match vc.delete_datastore_file(&datacenter_ref, &legacy).await {
        Err(VsphereError::Fault { kind, .. }) if kind.contains("FileNotFound") => {}
        other => other?,
    }
    let Some(folder) = folder else {
        return Ok(removal);
    };
    let left = vc.properties(&folder, &["childEntity"]).await?;
    let empty = left
        .get("childEntity")
        .is_none_or(|c| c.children.is_empty());
    if empty {
        vc.destroy(&folder).await?;
    }
    Ok(removal)
}

/// The folder at `path` (its parent must exist).
async fn make_folder(vc: &Vcenter, path: &str) -> Result<MoRef, VsphereError> {
    let (parent, name) = path.rsplit_once('/').unwrap_or(("", path));
    let parent_ref = vc
        .find_path(parent)
        .await?
        .ok_or_else(|| VsphereError::Missing {
            what: "folder",
            name: parent.to_string(),
            fix: "make the parent folder of spec.cloudConfig.vSphereFolder first, or name a folder directly under the datacenter's VM folder".into(),
        })?;
    vc.create_folder(&parent_ref, name).await
}

/// The extraConfig key recording, with the detach of a VM's plain-file
/// etcd disks, the First Class Disks they are to be registered as
/// (`<file>=><disk name>`, `;`-separated).
const REGISTER_KEY: &str = "kops.etcd-register";

/// Powers off and destroys a VM being replaced. Its etcd disks are
/// detached first, kept for its replacement; those that are plain files
/// of the VM (cloned before etcd disks were First Class Disks) are then
/// registered as First Class Disks where they are (vCenter would delete
/// them with the VM).
async fn destroy_vm(vc: &Vcenter, vm: &Vm, kept: &mut KeptDisks) -> Result<(), VsphereError> {
    if let Some(reason) = &vm.etcd_unreadable {
        return Err(VsphereError::Invalid {
            message: format!(
                "VM `{}`'s {ETCD_KEY} does not parse ({reason}), so its etcd disks cannot be told apart from its own",
                vm.name
            ),
            fix: format!(
                "detach its etcd disks in vCenter (keep their files), or fix {ETCD_KEY}, then run the command again"
            ),
        });
    }
    if vm.powered_on {
        vc.power_off(&vm.reference).await?;
    }
    // What an earlier destroy detached and was killed before registering.
    for (file, name) in &vm.etcd_registering {
        kept.register(vc, file, name).await?;
    }
    let detach = detach_and_record(vm, kept.cluster());
    if !detach.is_empty() {
        vc.reconfigure(&vm.reference, &detach).await?;
    }
    for (file, name) in registrations(vm, kept.cluster()) {
        kept.register(vc, &file, &name).await?;
    }
    vc.destroy(&vm.reference).await
}

/// The etcd disks of `vm` that are plain files, with the First Class
/// Disk names they are to be registered as: (file, name).
fn registrations(vm: &Vm, cluster: &str) -> Vec<(String, String)> {
    vm.etcd_disks
        .iter()
        .filter(|d| d.id.is_none())
        .map(|d| (d.file.clone(), disks::disk_name(cluster, &d.volume)))
        .collect()
}

/// One reconfiguration detaching `vm`'s etcd disks and recording, in
/// [`REGISTER_KEY`], those that must then be registered: a process
/// killed between the detach and the registration leaves the record for
/// the next destroy. Empty when it has none.
pub(crate) fn detach_and_record(vm: &Vm, cluster: &str) -> String {
    let mut spec = disks::detach_etcd_disks(&vm.etcd_disks);
    let pending = registrations(vm, cluster);
    if !pending.is_empty() {
        let record = pending
            .iter()
            .map(|(file, name)| format!("{file}=>{name}"))
            .collect::<Vec<_>>()
            .join(";");
        spec.push_str(&extra_config_xml(&[(REGISTER_KEY, record.as_str())]));
    }
    spec
}

/// `<group>-<n>.<cluster>` with the smallest `n` not taken (the VM's name
/// and its host name).
fn free_name(cluster: &str, group: &str, taken: &[String]) -> String {
    (1..)
        .map(|n| format!("{group}-{n}.{cluster}"))
        .find(|name| !taken.contains(name))
        .unwrap_or_default()
}

/// A fresh one-time bootstrap token (32 random bytes, hex).
pub fn new_token() -> String {
    let mut bytes = [0u8; 32];
    aws_lc_rs::rand::fill(&mut bytes).expect("the system's random source works");
    hex(&bytes)
}

/// The cloud-init VMware metadata of a VM (JSON): its name, and with a
/// static address the network config (version 2) of its NIC with MAC
/// address `mac`: the address, the default route and the DNS servers, no
/// DHCP.
pub fn metadata(name: &str, network: Option<(&StaticNetwork, &str)>) -> String {
    let mut metadata = serde_json::json!({"instance-id": name, "local-hostname": name});
    if let Some((network, mac)) = network {
        let default_route = if network.gateway.contains(':') {
            "::/0"
        } else {
            "0.0.0.0/0"
        };
        metadata["network"] = serde_json::json!({
            "version": 2,
            "ethernets": {
                "nic0": {
                    "match": {"macaddress": mac},
                    "set-name": "eth0",
                    "dhcp4": false,
                    "dhcp6": false,
                    "addresses": [network.address],
                    "routes": [{"to": default_route, "via": network.gateway}],
                    "nameservers": {"addresses": network.nameservers},
                },
            },
        });
    }
    metadata.to_string()
}

/// Clones one VM of `group` as `name`, with its etcd disks: each
/// member's kept First Class Disk (grown when its volume asks for more)
/// or a new one, attached before the first boot.
#[allow(clippy::too_many_arguments)]
async fn clone(
    vc: &Vcenter,
    cluster: &str,
    placement: &Placement,
    resolved: &Resolved,
    folder: &MoRef,
    group: &GroupSpec,
    name: &str,
    kept: &mut KeptDisks,
) -> Result<MoRef, VsphereError> {
    let template = resolved
        .templates
        .get(&group.template)
        .ok_or_else(|| VsphereError::protocol("template not resolved"))?;
    let slots = template
        .hardware
        .etcd_slots(&group.template, group.etcd.len())?;
    let etcd = kept.ensure(vc, &group.etcd).await?;
    let etcd_disks: Vec<EtcdDisk> = group
        .etcd
        .iter()
        .zip(&etcd)
        .zip(&slots.units)
        .map(|((volume, disk), unit)| EtcdDisk {
            volume: volume.clone(),
            bus: slots.bus,
            unit: *unit,
            id: Some(disk.id.clone()),
        })
        .collect();
    let disk_change = template.hardware.boot_disk_change(group.root_disk_gib);
    // A linked clone's disk is a child of the snapshot's and cannot grow:
    // a group asking for a larger disk gets full clones.
    let grows = template
        .hardware
        .grows(&group.template, &group.name, group.root_disk_gib)?;
    let snapshot = template.snapshot.as_ref().filter(|_| !grows);
    let etcd_value = EtcdDisk::encode_all(&etcd_disks);
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let user_data = b64(&group.user_data);
    let first_metadata = b64(&metadata(name, None));
    let token = group.joins().then(new_token);
    let hash = group.hash(placement);
    let mut values = vec![
        ("guestinfo.userdata", user_data.as_str()),
        ("guestinfo.userdata.encoding", "base64"),
        ("guestinfo.metadata", first_metadata.as_str()),
        ("guestinfo.metadata.encoding", "base64"),
        (CLUSTER_KEY, cluster),
        (GROUP_KEY, group.name.as_str()),
        (ROLE_KEY, group.role.as_str()),
        (SPEC_HASH_KEY, hash.as_str()),
        // The disks' serial numbers (their vCenter UUIDs) are visible in
        // the guest, as the vSphere CSI driver requires.
        ("disk.EnableUUID", "TRUE"),
    ];
    if let Some(token) = &token {
        values.push((TOKEN_KEY, token.as_str()));
    }
    if !etcd_disks.is_empty() {
        values.push((ETCD_KEY, etcd_value.as_str()));
    }
    let extra = extra_config_xml(&values);
    let network_change = resolved
        .network
        .as_ref()
        .map(|network| network.nic_change(&template.hardware.devices))
        .unwrap_or_default();
    let linked = if snapshot.is_some() {
        "<diskMoveType>createNewChildDiskBacking</diskMoveType>"
    } else {
        ""
    };
    let spec = format!(
        "<location>{}{linked}{}</location><template>false</template>\
         <config><numCPUs>{}</numCPUs><memoryMB>{}</memoryMB>{network_change}{disk_change}{extra}</config>\
         <powerOn>false</powerOn>{}",
        resolved.datastore.xml("datastore"),
        resolved.pool.xml("pool"),
        group.cpus,
        group.memory_mb,
        snapshot.map(|s| s.xml("snapshot")).unwrap_or_default(),
    );
    let vm = vc.clone_vm(&template.vm, folder, name, &spec).await?;
    if let Err(e) = start_clone(vc, &vm, group, name, &slots, &etcd).await {
        // A clone that never booted is not left behind half-made: it goes,
        // its etcd disks detached first (they may hold a member's data).
        if let Err(cleanup) = discard(vc, &vm, &etcd).await {
            tracing::warn!("could not remove the unfinished VM `{name}`: {cleanup}");
        }
        return Err(e);
    }
    Ok(vm)
}

/// A fresh clone's last steps before its first boot: its etcd disks
/// attached at their units, its static network config (matched to the MAC
/// address vCenter generated for its NIC, its devices read back once);
/// then the power-on.
async fn start_clone(
    vc: &Vcenter,
    vm: &MoRef,
    group: &GroupSpec,
    name: &str,
    slots: &disks::EtcdSlots,
    etcd: &[FirstClassDisk],
) -> Result<(), VsphereError> {
    for (disk, unit) in etcd.iter().zip(&slots.units) {
        let unit = i32::try_from(*unit).unwrap_or(i32::MAX);
        vc.attach_disk(vm, &disk.datastore, &disk.id, slots.controller_key, unit)
            .await?;
    }
    if let Some(network) = &group.network {
        let found = vc.properties(vm, &["config.hardware.device"]).await?;
        let devices = found
            .get("config.hardware.device")
            .map(|d| d.children.as_slice())
            .unwrap_or_default();
        let mac = first_nic(devices)
            .and_then(|nic| nic.text_at(&["macAddress"]))
            .ok_or_else(|| {
                VsphereError::protocol("the clone has no network adapter with a MAC address")
            })?;
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let with_network = b64(&metadata(name, Some((network, mac))));
        vc.set_extra_config(vm, &[("guestinfo.metadata", with_network.as_str())])
            .await?;
    }
    vc.power_on(vm).await
}

/// Destroys a clone that did not start, its etcd disks (`etcd`) detached
/// first where attached.
async fn discard(vc: &Vcenter, vm: &MoRef, etcd: &[FirstClassDisk]) -> Result<(), VsphereError> {
    let found = vc
        .properties(vm, &["config.hardware.device", "runtime.powerState"])
        .await?;
    if found.get("runtime.powerState").map(|p| p.text.trim()) == Some("poweredOn") {
        vc.power_off(vm).await?;
    }
    let attached: Vec<&str> = found
        .get("config.hardware.device")
        .map(|d| d.children.as_slice())
        .unwrap_or_default()
        .iter()
        .filter_map(|d| d.text_at(&["vDiskId", "id"]).map(str::trim))
        .collect();
    for disk in etcd.iter().filter(|d| attached.contains(&d.id.as_str())) {
        vc.detach_disk(vm, &disk.id).await?;
    }
    vc.destroy(vm).await
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kops_testkit::vcsim::{self, Vcsim};

    /// A VM's `kops.spec-hash` names its network by the name given, as
    /// before distributed port groups: VMs made on a standard network keep
    /// their hash (a changed one would roll every VM).
    #[test]
    fn the_spec_hash_of_a_standard_network_is_unchanged() {
        let placement = Placement {
            datacenter: "DC0".into(),
            folder: "k8s".into(),
            resource_pool: "Cluster1".into(),
            datastore: "ds1".into(),
            network: Some("VM Network".into()),
        };
        let group = GroupSpec {
            name: "nodes".into(),
            role: "Node".into(),
            template: "ubuntu-2404-template".into(),
            count: 2,
            cpus: 2,
            memory_mb: 4096,
            user_data: "#!/bin/bash\n".into(),
            root_disk_gib: None,
            etcd: Vec::new(),
            network: None,
        };
        assert_eq!(group.hash(&placement), "7dfb5065bbdb17f6");
    }

    /// A started simulator and a session on it; `None` without vcsim.
    async fn simulator() -> Option<(Vcsim, Vcenter)> {
        if !vcsim::vcsim_available() {
            return None;
        }
        let sim = Vcsim::start().unwrap();
        let credentials = crate::Credentials {
            username: vcsim::USER.into(),
            password: vcsim::PASSWORD.into(),
        };
        let vc = Vcenter::login(sim.url(), &credentials).await.unwrap();
        Some((sim, vc))
    }

    /// One control-plane group of one VM with a 1 GiB etcd `main` disk,
    /// its VMs in the folder `folder`.
    fn one_control_plane(folder: &str) -> (Placement, EtcdVolume, [GroupSpec; 1]) {
        let placement = Placement {
            datacenter: vcsim::DATACENTER.into(),
            folder: folder.into(),
            resource_pool: vcsim::CLUSTER.into(),
            datastore: vcsim::DATASTORE.into(),
            network: None,
        };
        let volume = EtcdVolume {
            etcd: "main".into(),
            member: "a".into(),
            members: vec!["a".into()],
            addresses: Vec::new(),
            size_gib: 1,
            version: "3.6.12".into(),
        };
        let group = GroupSpec {
            name: "cp".into(),
            role: "Master".into(),
            template: vcsim::TEMPLATE.into(),
            count: 1,
            cpus: 1,
            memory_mb: 1024,
            user_data: "#!/bin/sh\n".into(),
            root_disk_gib: None,
            etcd: vec![volume.clone()],
            network: None,
        };
        (placement, volume, [group])
    }

    /// `update --yes` of `groups`, resolved first.
    async fn apply(
        vc: &Vcenter,
        cluster: &str,
        placement: &Placement,
        groups: &[GroupSpec],
    ) -> Changes {
        let resolved = resolve(vc, placement, groups).await.unwrap();
        update(vc, cluster, placement, resolved, groups, true)
            .await
            .unwrap()
    }

    /// The datastore of the simulator's placements.
    async fn datastore(vc: &Vcenter) -> MoRef {
        vc.find_path(&format!(
            "{}/datastore/{}",
            vcsim::DATACENTER,
            vcsim::DATASTORE
        ))
        .await
        .unwrap()
        .unwrap()
    }

    /// The calls made since `before`, by method.
    fn since(vc: &Vcenter, before: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
        vc.client
            .calls()
            .into_iter()
            .map(|(m, n)| {
                let n = n - before.get(&m).copied().unwrap_or(0);
                (m, n)
            })
            .filter(|(_, n)| *n > 0)
            .collect()
    }

    /// An etcd disk is a First Class Disk kept after its VM's deletion:
    /// an operator deleting the control-plane VM in vCenter (no detach
    /// first) leaves it, and the next update clones the member again with
    /// the same disk, found among the datastore's disks by its name.
    #[tokio::test]
    async fn an_etcd_disk_survives_its_vms_deletion_in_vcenter() {
        let Some((_sim, vc)) = simulator().await else {
            return;
        };
        let cluster = "deleted.k8s.local";
        let (placement, volume, groups) = one_control_plane("deleted");
        apply(&vc, cluster, &placement, &groups).await;
        let folder = vc.find_path("DC0/vm/deleted").await.unwrap().unwrap();
        let vm = list(&vc, &folder, cluster).await.unwrap().remove(0);
        assert_eq!(vm.etcd_disks.len(), 1, "{vm:?}");
        let id = vm.etcd_disks[0].id.clone().expect("a First Class Disk");
        let datastore = datastore(&vc).await;
        let disk = vc.disk(&datastore, &id).await.unwrap().unwrap();
        assert_eq!(disk.name, disks::disk_name(cluster, &volume));
        assert_eq!(disk.capacity_mb, 1024);

        vc.power_off(&vm.reference).await.unwrap();
        vc.destroy(&vm.reference).await.unwrap();
        assert_eq!(vc.disk(&datastore, &id).await.unwrap(), Some(disk));

        let before = vc.client.calls();
        let changes = apply(&vc, cluster, &placement, &groups).await;
        let calls = since(&vc, &before);
        eprintln!("update re-cloning the deleted member: {calls:?}");
        assert_eq!(changes.created.len(), 1, "{changes:?}");
        assert!(changes.etcd_disks_made.is_empty(), "kept: {changes:?}");
        assert_eq!(calls.get("CreateDisk_Task"), None, "{calls:?}");
        assert_eq!(calls.get("ListVStorageObject"), Some(&1), "{calls:?}");
        assert_eq!(calls.get("AttachDisk_Task"), Some(&1), "{calls:?}");
        let now = list(&vc, &folder, cluster).await.unwrap();
        assert_eq!(now.len(), 1);
        assert_eq!(now[0].etcd_disks[0].id.as_deref(), Some(id.as_str()));
        assert!(
            apply(&vc, cluster, &placement, &groups).await.is_empty(),
            "a second update changes nothing"
        );
        vc.logout().await;
    }

    /// A control-plane VM cloned before etcd disks were First Class Disks
    /// holds a plain disk, found by its SCSI address. Storage vMotion
    /// renamed it after the VM (simulated: detached, moved into the VM's
    /// directory, attached again at its address). Replacing the VM
    /// detaches it and registers it as the member's First Class Disk
    /// where it is (vCenter would delete it with the VM otherwise); the
    /// new clone attaches it by id and no disk is made. A process killed
    /// between the detach and the registration leaves a record, and the
    /// next replacement registers the disk from it.
    #[tokio::test]
    async fn a_plain_etcd_disk_renamed_after_its_vm_survives_the_vms_replacement() {
        let Some((_sim, vc)) = simulator().await else {
            return;
        };
        let datacenter = vc.find_path(vcsim::DATACENTER).await.unwrap().unwrap();
        for killed in [false, true] {
            let name = if killed { "killed" } else { "renamed" };
            let cluster = format!("{name}.k8s.local");
            let cluster = cluster.as_str();
            let (placement, volume, groups) = one_control_plane(name);
            // The VM as an older kops-rs made it: its etcd disk a file of
            // the cluster's directory at SCSI 0:1, described without an id.
            let mut without_etcd = groups.clone();
            without_etcd[0].etcd.clear();
            apply(&vc, cluster, &placement, &without_etcd).await;
            let folder = vc
                .find_path(&format!("DC0/vm/{name}"))
                .await
                .unwrap()
                .unwrap();
            let vm = list(&vc, &folder, cluster).await.unwrap().remove(0);
            vc.power_off(&vm.reference).await.unwrap();
            let dir = disks::legacy_etcd_dir(vcsim::DATASTORE, cluster);
            vc.make_directory(&datacenter, &dir).await;
            let controller = vc.scsi_controller_key(&vm.reference).await;
            let home = format!("{dir}/{}-{}.vmdk", volume.etcd, volume.member);
            let described = EtcdDisk::encode_all(&[EtcdDisk {
                volume: volume.clone(),
                bus: 0,
                unit: 1,
                id: None,
            }]);
            let spec = format!(
                "<deviceChange><operation>add</operation><fileOperation>create</fileOperation>\
                 <device xsi:type=\"VirtualDisk\"><key>-101</key>\
                 <backing xsi:type=\"VirtualDiskFlatVer2BackingInfo\"><fileName>{home}</fileName>\
                 <diskMode>persistent</diskMode><thinProvisioned>true</thinProvisioned></backing>\
                 <controllerKey>{controller}</controllerKey><unitNumber>1</unitNumber>\
                 <capacityInKB>1048576</capacityInKB></device></deviceChange>{}",
                extra_config_xml(&[(ETCD_KEY, described.as_str())])
            );
            vc.reconfigure(&vm.reference, &spec).await.unwrap();
            let vm = list(&vc, &folder, cluster).await.unwrap().remove(0);
            assert_eq!(vm.etcd_disks.len(), 1, "{vm:?}");
            assert_eq!(vm.etcd_disks[0].id, None);
            assert_eq!(vm.etcd_disks[0].file, home);

            // Storage vMotion renames it after the VM.
            let renamed = format!("[{}] {}/{}_1.vmdk", vcsim::DATASTORE, vm.name, vm.name);
            let detach = vm.etcd_disks[0].detach.clone();
            vc.reconfigure(&vm.reference, &detach).await.unwrap();
            vc.move_virtual_disk(&datacenter, &home, &renamed)
                .await
                .unwrap();
            let attach = detach
                .replace(
                    "<operation>remove</operation>",
                    "<operation>add</operation>",
                )
                .replace(
                    &format!("<fileName>{home}</fileName>"),
                    &format!("<fileName>{renamed}</fileName>"),
                );
            vc.reconfigure(&vm.reference, &attach).await.unwrap();
            let vm = list(&vc, &folder, cluster).await.unwrap().remove(0);
            assert_eq!(vm.etcd_disks.len(), 1, "found by its address: {vm:?}");
            assert_eq!(vm.etcd_disks[0].file, renamed);

            let disk_name = disks::disk_name(cluster, &volume);
            let vm = if killed {
                vc.reconfigure(&vm.reference, &detach_and_record(&vm, cluster))
                    .await
                    .unwrap();
                let vm = list(&vc, &folder, cluster).await.unwrap().remove(0);
                assert!(vm.etcd_disks.is_empty(), "detached: {vm:?}");
                assert_eq!(vm.etcd_registering, [(renamed.clone(), disk_name.clone())]);
                vm
            } else {
                vm
            };
            let before = vc.client.calls();
            let replaced = replace(&vc, cluster, &placement, &groups, &vm.uuid)
                .await
                .unwrap()
                .expect("replaced");
            let calls = since(&vc, &before);
            eprintln!("replacing a VM with a plain etcd disk (killed: {killed}): {calls:?}");
            assert_eq!(replaced.0, vm.name);
            assert_eq!(calls.get("RegisterDisk"), Some(&1), "{calls:?}");
            assert_eq!(calls.get("CreateDisk_Task"), None, "{calls:?}");
            assert!(
                vc.disk_exists(&datacenter, &renamed).await.unwrap(),
                "{renamed}"
            );
            let now = list(&vc, &folder, cluster).await.unwrap();
            assert_eq!(now.len(), 1);
            assert_eq!(now[0].name, replaced.1);
            let disk = &now[0].etcd_disks[0];
            assert_eq!(disk.file, renamed, "{now:?}");
            let id = disk.id.clone().expect("now a First Class Disk");
            let found = vc.disk(&datastore(&vc).await, &id).await.unwrap().unwrap();
            assert_eq!(found.name, disk_name);
            assert!(apply(&vc, cluster, &placement, &groups).await.is_empty());
        }
        vc.logout().await;
    }

    /// A First Class Disk is not a file of a datastore directory: on vSAN,
    /// whose top-level directories only the namespace manager makes (the
    /// simulator started with -vsan refuses FileManager.MakeDirectory
    /// there, as vSAN does), the control plane's etcd disk is made with no
    /// directory at all; the next update changes nothing.
    #[tokio::test]
    async fn a_control_plane_with_an_etcd_disk_is_made_on_vsan() {
        if !vcsim::vcsim_available() {
            return;
        }
        let sim = Vcsim::start_vsan().unwrap();
        let credentials = crate::Credentials {
            username: vcsim::USER.into(),
            password: vcsim::PASSWORD.into(),
        };
        let vc = Vcenter::login(sim.url(), &credentials).await.unwrap();
        let datacenter = vc.find_path(vcsim::DATACENTER).await.unwrap().unwrap();
        let cluster = "vsan.k8s.local";
        let (placement, volume, groups) = one_control_plane("vsan");

        // As vSAN: no directory at the datastore's top level by MakeDirectory.
        let top = format!("[{}] elsewhere", vcsim::DATASTORE);
        let body = format!(
            "<_this type=\"FileManager\">FileManager</_this><name>{top}</name>{}<createParentDirectories>true</createParentDirectories>",
            datacenter.xml("datacenter")
        );
        let refused = vc
            .client
            .call_or_fault("MakeDirectory", &body)
            .await
            .unwrap();
        assert!(
            refused.is_err_and(|f| f.kind.contains("CannotCreateFile")),
            "vSAN refuses a top-level directory"
        );

        apply(&vc, cluster, &placement, &groups).await;
        let calls = vc.client.calls();
        assert_eq!(calls.get("CreateDisk_Task"), Some(&1), "{calls:?}");
        assert_eq!(
            calls.get("MakeDirectory"),
            Some(&1),
            "only the refused one: {calls:?}"
        );
        assert_eq!(calls.get("CreateDirectory"), None, "{calls:?}");
        let folder = vc.find_path("DC0/vm/vsan").await.unwrap().unwrap();
        let vm = list(&vc, &folder, cluster).await.unwrap().remove(0);
        assert_eq!(vm.etcd_disks.len(), 1, "{vm:?}");
        let id = vm.etcd_disks[0].id.clone().unwrap();
        let disk = vc.disk(&datastore(&vc).await, &id).await.unwrap().unwrap();
        assert_eq!(disk.name, disks::disk_name(cluster, &volume));

        assert!(apply(&vc, cluster, &placement, &groups).await.is_empty());
        assert_eq!(vc.client.calls().get("CreateDisk_Task"), Some(&1));
        vc.logout().await;
    }

    /// A clone that did not start goes, but its etcd disk stays for the
    /// next clone of its member, grown there when its volume grew.
    #[tokio::test]
    async fn an_unstarted_clone_is_discarded_or_made_again_and_its_etcd_disk_kept() {
        let Some((_sim, vc)) = simulator().await else {
            return;
        };
        let cluster = "discard.k8s.local";
        let (placement, _, groups) = one_control_plane("discard");
        apply(&vc, cluster, &placement, &groups).await;
        let folder = vc.find_path("DC0/vm/discard").await.unwrap().unwrap();
        let vms = list(&vc, &folder, cluster).await.unwrap();
        assert_eq!(vms.len(), 1);
        let id = vms[0].etcd_disks[0].id.clone().unwrap();
        let datastore = datastore(&vc).await;
        let disk = vc.disk(&datastore, &id).await.unwrap().unwrap();
        discard(&vc, &vms[0].reference, std::slice::from_ref(&disk))
            .await
            .unwrap();
        assert!(list(&vc, &folder, cluster).await.unwrap().is_empty());
        assert!(vc.disk(&datastore, &id).await.unwrap().is_some());

        // The next clone of the member finds the disk no VM holds (the
        // datastore's disks listed once) and grows it before attaching it.
        let mut grown = groups.clone();
        grown[0].etcd[0].size_gib = 2;
        let before = vc.client.calls();
        let changes = apply(&vc, cluster, &placement, &grown).await;
        assert!(changes.etcd_disks_made.is_empty(), "{changes:?}");
        assert_eq!(
            changes.etcd_disks_grown,
            ["kops:discard.k8s.local:etcd-main-a (1 GiB to 2 GiB)"]
        );
        let calls = since(&vc, &before);
        eprintln!("update re-cloning the member, its disk grown: {calls:?}");
        assert_eq!(calls.get("ListVStorageObject"), Some(&1), "{calls:?}");
        assert_eq!(calls.get("ExtendDisk_Task"), Some(&1), "{calls:?}");
        assert_eq!(calls.get("CreateDisk_Task"), None, "{calls:?}");
        let vms = list(&vc, &folder, cluster).await.unwrap();
        assert_eq!(vms.len(), 1);
        let attached: Vec<(Option<&str>, u64)> = vms[0]
            .etcd_disks
            .iter()
            .map(|d| (d.id.as_deref(), d.capacity_kib))
            .collect();
        assert_eq!(attached, [(Some(id.as_str()), 2 * 1024 * 1024)]);

        // An update killed between the clone and the power-on leaves a VM
        // powered off with its role and no first-boot marker: the next
        // update makes it again (its etcd disk kept), and one after that
        // changes nothing.
        let left = list(&vc, &folder, cluster).await.unwrap();
        vc.power_off(&left[0].reference).await.unwrap();
        let changes = apply(&vc, cluster, &placement, &grown).await;
        assert_eq!(changes.unfinished, [left[0].name.clone()], "{changes:?}");
        assert_eq!(changes.destroyed, changes.unfinished, "{changes:?}");
        assert_eq!(changes.created.len(), 1, "{changes:?}");
        let now = list(&vc, &folder, cluster).await.unwrap();
        assert_eq!(now.len(), 1);
        assert!(now[0].powered_on && now[0].uuid != left[0].uuid, "{now:?}");
        let ids = |vm: &Vm| -> Vec<Option<String>> {
            vm.etcd_disks.iter().map(|d| d.id.clone()).collect()
        };
        assert_eq!(ids(&now[0]), ids(&left[0]));
        let changes = apply(&vc, cluster, &placement, &grown).await;
        assert!(
            changes.is_empty() && changes.unfinished.is_empty(),
            "{changes:?}"
        );
        vc.logout().await;
    }

    /// A control-plane VM that booted (nodeup set its first-boot marker;
    /// its token stays: control-plane VMs do not join through
    /// kops-controller) and was then powered off, for host maintenance or
    /// by HA, is left alone by `update --yes` and reported.
    #[tokio::test]
    async fn a_powered_off_control_plane_vm_that_booted_survives_update() {
        let Some((_sim, vc)) = simulator().await else {
            return;
        };
        let cluster = "booted.k8s.local";
        let (placement, _, groups) = one_control_plane("booted");
        apply(&vc, cluster, &placement, &groups).await;
        let folder = vc.find_path("DC0/vm/booted").await.unwrap().unwrap();
        let before = list(&vc, &folder, cluster).await.unwrap();
        assert_eq!(before.len(), 1);
        let vm = &before[0];
        // A control-plane VM carries its role and no join token.
        assert_eq!(vm.role.as_deref(), Some("Master"));
        assert!(!vm.has_token, "{vm:?}");
        // The guest's first boot: nodeup sets the marker through VMware
        // Tools (here written as vCenter then shows it).
        vc.set_extra_config(&vm.reference, &[(crate::BOOTED_KEY, "1")])
            .await
            .unwrap();
        vc.power_off(&vm.reference).await.unwrap();
        let changes = apply(&vc, cluster, &placement, &groups).await;
        assert!(changes.destroyed.is_empty(), "{changes:?}");
        assert!(changes.unfinished.is_empty(), "{changes:?}");
        assert!(changes.created.is_empty(), "{changes:?}");
        assert_eq!(
            changes.powered_off,
            std::slice::from_ref(&vm.name),
            "reported"
        );
        let after = list(&vc, &folder, cluster).await.unwrap();
        assert_eq!(after.len(), 1);
        assert_eq!(after[0].uuid, vm.uuid, "the same VM");
        assert!(!after[0].powered_on, "{after:?}");

        // A control-plane VM cloned before roles were written holds a
        // token kops-controller must never accept: update removes it.
        vc.set_extra_config(
            &vm.reference,
            &[(ROLE_KEY, ""), (TOKEN_KEY, "0123456789abcdef")],
        )
        .await
        .unwrap();
        let changes = apply(&vc, cluster, &placement, &groups).await;
        assert_eq!(changes.tokens_removed, std::slice::from_ref(&vm.name));
        assert!(changes.destroyed.is_empty(), "{changes:?}");
        let after = list(&vc, &folder, cluster).await.unwrap();
        assert!(!after[0].has_token, "{after:?}");
        assert!(
            apply(&vc, cluster, &placement, &groups).await.is_empty(),
            "a second update changes nothing"
        );
        vc.logout().await;
    }
}
