//! A cluster's etcd disks as First Class Disks: vCenter keeps them apart
//! from any VM, under ids of their own, and keeps them when a VM they are
//! attached to is deleted (by kops-rs or by anyone in vCenter). Each is
//! named after its cluster, etcd cluster and member
//! ([`disks::disk_name`]) and found by that name among the datastore's
//! First Class Disks, or by its id on the VM holding it, never by its
//! file: Storage vMotion and Storage DRS move and rename files.

use std::collections::BTreeMap;

use futures::stream::{self, StreamExt, TryStreamExt};

use crate::client::MoRef;
use crate::disks::{self, AttachedEtcdDisk, EtcdVolume};
use crate::vcenter::{FirstClassDisk, Vcenter};
use crate::VsphereError;

/// What clones do to the etcd disks ([`KeptDisks::plan`]).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct DiskPlan {
    /// (name, GiB).
    pub(crate) make: Vec<(String, u64)>,
    /// (name, GiB now, GiB asked).
    pub(crate) grow: Vec<(String, u64, u64)>,
}

/// Disks read at once while the datastore's First Class Disks are listed.
const PARALLEL_READS: usize = 8;

/// What is known of a cluster's kept etcd disks: those attached to its
/// listed VMs (read with the listing: no call), those made or registered
/// in this run and, read once when a disk is not known otherwise, the
/// cluster's First Class Disks on its datastore.
pub(crate) struct KeptDisks {
    cluster: String,
    /// The datacenter's inventory path (a registered disk's URL names it).
    datacenter: String,
    /// The placement's datastore: new disks go there, and it is the one
    /// listed.
    datastore: MoRef,
    /// First Class Disks by name.
    known: BTreeMap<String, FirstClassDisk>,
    /// Capacities (KiB) of the disks attached to listed VMs by name,
    /// First Class Disks or not.
    attached: BTreeMap<String, u64>,
    listed: bool,
}

impl KeptDisks {
    /// Knowing the disks `attached` to the cluster's listed VMs.
    pub(crate) fn new<'a>(
        cluster: &str,
        datacenter: &str,
        datastore: &MoRef,
        attached: impl IntoIterator<Item = &'a AttachedEtcdDisk>,
    ) -> Self {
        let mut kept = KeptDisks {
            cluster: cluster.to_string(),
            datacenter: datacenter.to_string(),
            datastore: datastore.clone(),
            known: BTreeMap::new(),
            attached: BTreeMap::new(),
            listed: false,
        };
        for disk in attached {
            let name = disks::disk_name(cluster, &disk.volume);
            kept.attached.insert(name.clone(), disk.capacity_kib);
            if let (Some(id), Some(datastore)) = (&disk.id, &disk.datastore) {
                kept.known.insert(
                    name.clone(),
                    FirstClassDisk {
                        id: id.clone(),
                        name,
                        file: disk.file.clone(),
                        datastore: datastore.clone(),
                        capacity_mb: disk.capacity_kib / 1024,
                    },
                );
            }
        }
        kept
    }

    pub(crate) fn cluster(&self) -> &str {
        &self.cluster
    }

    /// What a clone of `volumes` does to their disks, each volume smaller
    /// than its disk refused: a disk attached to a listed VM is known at
    /// no call; with `look`, one no listed VM holds is looked for among
    /// the datastore's disks (listed once), and is to be made when none
    /// is found. The disks to make, with their sizes in GiB, and to grow,
    /// with both sizes.
    pub(crate) async fn plan(
        &mut self,
        vc: &Vcenter,
        volumes: &[EtcdVolume],
        look: bool,
    ) -> Result<DiskPlan, VsphereError> {
        let mut plan = DiskPlan::default();
        for volume in volumes {
            let name = disks::disk_name(&self.cluster, volume);
            let capacity_kib = match self.attached.get(&name) {
                Some(capacity) => Some(*capacity),
                None if look => self.find(vc, &name).await?.map(|d| d.capacity_mb * 1024),
                None => continue,
            };
            match capacity_kib {
                None => plan.make.push((name, volume.size_gib)),
                Some(capacity) => {
                    disks::refuse_shrink(volume, &name, capacity)?;
                    let have = capacity / disks::KIB_PER_GIB;
                    if look && capacity < volume.size_gib * disks::KIB_PER_GIB {
                        plan.grow.push((name, have, volume.size_gib));
                    }
                }
            }
        }
        Ok(plan)
    }

    /// The disks a clone of `volumes` attaches, in their order: each
    /// member's kept disk, grown when its volume asks for more, or a new
    /// one. A volume smaller than its kept disk is refused.
    pub(crate) async fn ensure(
        &mut self,
        vc: &Vcenter,
        volumes: &[EtcdVolume],
    ) -> Result<Vec<FirstClassDisk>, VsphereError> {
        let mut out = Vec::new();
        for volume in volumes {
            let name = disks::disk_name(&self.cluster, volume);
            let want_mb = volume.size_gib * 1024;
            let disk = match self.find(vc, &name).await? {
                Some(mut disk) => {
                    disks::refuse_shrink(volume, &name, disk.capacity_mb * 1024)?;
                    if disk.capacity_mb < want_mb {
                        vc.extend_disk(&disk.datastore, &disk.id, want_mb).await?;
                        disk.capacity_mb = want_mb;
                    }
                    disk
                }
                None => vc.create_disk(&self.datastore, &name, want_mb).await?,
            };
            self.known.insert(name, disk.clone());
            out.push(disk);
        }
        Ok(out)
    }

    /// Makes a VM's etcd disk that is a plain file (cloned before etcd
    /// disks were First Class Disks) its member's First Class Disk `name`,
    /// where the file is; nothing when a disk of that name exists.
    pub(crate) async fn register(
        &mut self,
        vc: &Vcenter,
        file: &str,
        name: &str,
    ) -> Result<(), VsphereError> {
        if self.find(vc, name).await?.is_some() {
            return Ok(());
        }
        let disk = vc.register_disk(&self.datacenter, file, name).await?;
        self.known.insert(name.to_string(), disk);
        Ok(())
    }

    /// Every kept disk of the cluster on its datastore, and any other
    /// known (attached to its VMs elsewhere).
    pub(crate) async fn all(&mut self, vc: &Vcenter) -> Result<Vec<FirstClassDisk>, VsphereError> {
        self.list(vc).await?;
        Ok(self.known.values().cloned().collect())
    }

    /// The disk named `name`: known, or among the datastore's First
    /// Class Disks.
    async fn find(
        &mut self,
        vc: &Vcenter,
        name: &str,
    ) -> Result<Option<FirstClassDisk>, VsphereError> {
        if !self.known.contains_key(name) {
            self.list(vc).await?;
        }
        Ok(self.known.get(name).cloned())
    }

    /// Reads the cluster's First Class Disks on the datastore, once: its
    /// disk ids (one call), then each disk (a call each, a few at a time;
    /// vCenter has no lookup by name before 7.0 U2). Two disks of one name
    /// are an error: which holds the member's data cannot be told.
    async fn list(&mut self, vc: &Vcenter) -> Result<(), VsphereError> {
        if self.listed {
            return Ok(());
        }
        let ids = vc.disk_ids(&self.datastore).await?;
        let datastore = &self.datastore;
        let found: Vec<Option<FirstClassDisk>> = stream::iter(ids)
            .map(|id| async move { vc.disk(datastore, &id).await })
            .buffer_unordered(PARALLEL_READS)
            .try_collect()
            .await?;
        let prefix = disks::disk_prefix(&self.cluster);
        for disk in found.into_iter().flatten() {
            if !disk.name.starts_with(&prefix) {
                continue;
            }
            if let Some(other) = self.known.get(&disk.name).filter(|o| o.id != disk.id) {
                return Err(VsphereError::Invalid {
                    message: format!(
                        "two First Class Disks are named `{}` ({} and {}): kops-rs cannot tell which holds the etcd member's data",
                        disk.name, other.id, disk.id
                    ),
                    fix: "rename or delete in vCenter the one that is not the member's disk (`govc disk.ls -l` lists them), then run the command again".into(),
                });
            }
            self.known.insert(disk.name.clone(), disk);
        }
        self.listed = true;
        Ok(())
    }
}
