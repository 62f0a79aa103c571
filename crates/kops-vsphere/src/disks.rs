//! The disks of a cluster's VMs: the boot disk grown to the group's
//! `rootVolumeSize` in the clone spec and, on control-plane VMs, one
//! First Class Disk per etcd cluster, attached after the clone at free
//! units of the boot disk's SCSI controller. Each etcd disk is described
//! to the guest in [`ETCD_KEY`] (its etcd cluster, member, SCSI address,
//! size and disk id), which nodeup reads to find, format and mount it for
//! etcd-manager.

use crate::client::MoRef;
use crate::xml::{escape, Element};
use crate::VsphereError;

/// The guestinfo key describing a VM's etcd disks ([`EtcdDisk::encode_all`]).
pub const ETCD_KEY: &str = "guestinfo.kops.etcd";

/// SCSI controllers reserve unit 7 for themselves.
const SCSI_CONTROLLER_UNIT: u32 = 7;
/// Units a SCSI controller has (0..=15 on LSI Logic and PVSCSI).
const SCSI_UNITS: u32 = 16;

/// One etcd cluster's data disk on a control-plane VM, as the group wants it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdVolume {
    /// The etcd cluster (`main`, `events`, ...).
    pub etcd: String,
    /// This VM's member of it (`spec.etcdClusters[].etcdMembers[].name`).
    pub member: String,
    /// Every member of the etcd cluster (the static peer list).
    pub members: Vec<String>,
    /// The members' static addresses, in `members`' order (empty when the
    /// control-plane VMs take DHCP addresses: one member only).
    pub addresses: Vec<String>,
    pub size_gib: u64,
    /// The etcd version the cluster runs (etcd-manager's static config).
    pub version: String,
}

/// An etcd disk as made: the volume, where it sits on the VM's SCSI bus
/// and the First Class Disk it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdDisk {
    pub volume: EtcdVolume,
    /// The SCSI controller's bus number.
    pub bus: u32,
    /// The disk's unit number on that controller (the guest's SCSI target).
    pub unit: u32,
    /// Its First Class Disk id; `None` on a VM cloned before etcd disks
    /// were First Class Disks (its disk is then a file of the VM, found by
    /// its SCSI address).
    pub id: Option<String>,
}

impl EtcdDisk {
    /// The guestinfo value for a VM's disks: one `;`-separated entry per
    /// disk, each `etcd=<name> member=<m> members=<a,b,c> bus=<n> unit=<n>
    /// gib=<n> version=<etcd version>`, then `addresses=<ip,ip,ip>` when
    /// the members have static addresses and `id=<disk id>` when the disk
    /// is a First Class Disk.
    pub fn encode_all(disks: &[EtcdDisk]) -> String {
        disks
            .iter()
            .map(|d| {
                let mut entry = format!(
                    "etcd={} member={} members={} bus={} unit={} gib={} version={}",
                    d.volume.etcd,
                    d.volume.member,
                    d.volume.members.join(","),
                    d.bus,
                    d.unit,
                    d.volume.size_gib,
                    d.volume.version,
                );
                if !d.volume.addresses.is_empty() {
                    entry.push_str(&format!(" addresses={}", d.volume.addresses.join(",")));
                }
                if let Some(id) = &d.id {
                    entry.push_str(&format!(" id={id}"));
                }
                entry
            })
            .collect::<Vec<_>>()
            .join(";")
    }

    /// Reads [`EtcdDisk::encode_all`]'s format back; an error names the bad entry.
    pub fn decode_all(text: &str) -> Result<Vec<EtcdDisk>, String> {
        let mut out = Vec::new();
        for entry in text.split(';').map(str::trim).filter(|e| !e.is_empty()) {
            let field = |name: &str| {
                entry
                    .split_whitespace()
                    .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
                    .filter(|v| !v.is_empty())
                    .ok_or_else(|| format!("{ETCD_KEY} entry `{entry}` has no {name}"))
            };
            let number = |name: &str| {
                field(name)?
                    .parse::<u64>()
                    .map_err(|_| format!("{ETCD_KEY} entry `{entry}`: {name} is not a number"))
            };
            let small = |name: &str| {
                number(name).and_then(|n| u32::try_from(n).map_err(|_| format!("{name} too large")))
            };
            out.push(EtcdDisk {
                volume: EtcdVolume {
                    etcd: field("etcd")?.to_string(),
                    member: field("member")?.to_string(),
                    members: field("members")?.split(',').map(str::to_string).collect(),
                    addresses: field("addresses")
                        .map(|a| a.split(',').map(str::to_string).collect())
                        .unwrap_or_default(),
                    size_gib: number("gib")?,
                    version: field("version")?.to_string(),
                },
                bus: small("bus")?,
                unit: small("unit")?,
                id: field("id").ok().map(str::to_string),
            });
        }
        Ok(out)
    }
}

/// What every First Class Disk of `cluster` is named from: `kops:`, the
/// cluster's name and `:` (a cluster name, a DNS name, has no `:`, so no
/// other cluster's disk starts so).
pub fn disk_prefix(cluster: &str) -> String {
    format!("kops:{cluster}:")
}

/// The First Class Disk name of one member's disk of one etcd cluster:
/// `kops:<cluster>:etcd-<etcd>-<member>`.
pub fn disk_name(cluster: &str, volume: &EtcdVolume) -> String {
    format!(
        "{}etcd-{}-{}",
        disk_prefix(cluster),
        volume.etcd,
        volume.member
    )
}

/// Where kops-rs kept a cluster's etcd disks before they were First Class
/// Disks: a directory of the datastore, removed with the cluster.
pub fn legacy_etcd_dir(datastore: &str, cluster: &str) -> String {
    format!("[{datastore}] kops-etcd/{cluster}")
}

/// An etcd disk attached to a VM: its First Class Disk, found by the id
/// the VM's [`ETCD_KEY`] records, or (cloned before etcd disks were
/// First Class Disks) the virtual disk at the SCSI address it records.
/// Neither depends on the disk's file, which Storage vMotion and Storage
/// DRS move and rename.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachedEtcdDisk {
    pub volume: EtcdVolume,
    /// Its First Class Disk id; `None` for a disk that is a plain file of
    /// the VM (registered as a First Class Disk when the VM goes).
    pub id: Option<String>,
    /// Its file now (wherever vCenter moved it).
    pub file: String,
    /// The datastore holding it.
    pub datastore: Option<MoRef>,
    pub capacity_kib: u64,
    /// Its `<deviceChange>` detaching it (the disk kept).
    pub detach: String,
}

/// The etcd disks attached to a VM: for each disk its [`ETCD_KEY`] lists
/// (`recorded`), the virtual disk of `devices` (`config.hardware.device`,
/// read with the VM's listing: no call) that is its First Class Disk, or
/// without an id the one at its SCSI bus and unit. A recorded disk no
/// longer attached is left out.
pub fn attached_etcd_disks(devices: &[Element], recorded: &[EtcdDisk]) -> Vec<AttachedEtcdDisk> {
    let controller_key = |bus: u32| {
        devices
            .iter()
            .filter(|d| is_scsi(d))
            .find(|d| d.text_at(&["busNumber"]).map(str::trim) == Some(&bus.to_string()))
            .and_then(|d| d.text_at(&["key"]))
            .map(|k| k.trim().to_string())
    };
    let virtual_disks = || {
        devices
            .iter()
            .filter(|d| d.xsi_type() == Some("VirtualDisk"))
    };
    recorded
        .iter()
        .filter_map(|disk| {
            let device = match &disk.id {
                Some(id) => virtual_disks()
                    .find(|d| d.text_at(&["vDiskId", "id"]).map(str::trim) == Some(id.as_str()))?,
                None => {
                    let controller = controller_key(disk.bus)?;
                    virtual_disks().find(|d| {
                        d.text_at(&["controllerKey"]).map(str::trim) == Some(controller.as_str())
                            && d.text_at(&["unitNumber"]).map(str::trim)
                                == Some(&disk.unit.to_string())
                    })?
                }
            };
            Some(AttachedEtcdDisk {
                volume: disk.volume.clone(),
                id: disk.id.clone(),
                file: device.text_at(&["backing", "fileName"])?.to_string(),
                datastore: device
                    .child("backing")
                    .and_then(|b| b.child("datastore"))
                    .and_then(MoRef::from_element),
                capacity_kib: device.text_at(&["capacityInKB"])?.trim().parse().ok()?,
                detach: etcd_device_change(device, "remove"),
            })
        })
        .collect()
}

/// A VirtualMachineConfigSpec's `<deviceChange>`s detaching `disks`
/// (the disks kept); empty when there are none.
pub fn detach_etcd_disks(disks: &[AttachedEtcdDisk]) -> String {
    disks.iter().map(|d| d.detach.as_str()).collect()
}

/// An error when a kept etcd disk (`disk`, its name or file) of
/// `capacity_kib` is larger than its member's `volumeSize` asks: etcd
/// disks grow, never shrink.
pub fn refuse_shrink(
    volume: &EtcdVolume,
    disk: &str,
    capacity_kib: u64,
) -> Result<(), VsphereError> {
    if capacity_kib <= volume.size_gib * KIB_PER_GIB {
        return Ok(());
    }
    let field = format!(
        "spec.etcdClusters[{}].etcdMembers[{}].volumeSize",
        volume.etcd, volume.member
    );
    let have = capacity_kib.div_ceil(KIB_PER_GIB);
    Err(VsphereError::Invalid {
        message: format!(
            "{field} is {} GiB, but the kept disk `{disk}` holds {have} GiB: etcd disks do not shrink",
            volume.size_gib
        ),
        fix: format!("set {field} to {have} or more"),
    })
}

/// One etcd disk of a VM as a `<deviceChange>` of `operation`.
fn etcd_device_change(d: &Element, operation: &str) -> String {
    let text = |path: &[&str]| d.text_at(path).map(escape).unwrap_or_default();
    // The label and summary come along: vcsim 0.24 fails an edit without
    // them (vCenter does not mind either way).
    format!(
        "<deviceChange><operation>{operation}</operation><device xsi:type=\"VirtualDisk\"><key>{}</key>\
         <deviceInfo><label>{}</label><summary>{}</summary></deviceInfo>\
         <backing xsi:type=\"VirtualDiskFlatVer2BackingInfo\"><fileName>{}</fileName><diskMode>{}</diskMode></backing>\
         <controllerKey>{}</controllerKey><unitNumber>{}</unitNumber><capacityInKB>{}</capacityInKB></device></deviceChange>",
        text(&["key"]),
        text(&["deviceInfo", "label"]),
        text(&["deviceInfo", "summary"]),
        text(&["backing", "fileName"]),
        d.text_at(&["backing", "diskMode"]).map(escape).unwrap_or_else(|| "persistent".into()),
        text(&["controllerKey"]),
        text(&["unitNumber"]),
        text(&["capacityInKB"]),
    )
}

/// Where a clone's etcd disks go: the SCSI controller (its device key and
/// bus) and one free unit per disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdSlots {
    pub controller_key: i32,
    pub bus: u32,
    pub units: Vec<u32>,
}

/// What the clone needs of a template's hardware.
#[derive(Debug, Clone)]
pub struct TemplateHardware {
    pub devices: Vec<Element>,
}

/// The template's boot disk (its first virtual disk).
#[derive(Debug, Clone)]
struct BootDisk<'a> {
    device: &'a Element,
    key: &'a str,
    controller_key: &'a str,
    capacity_kib: u64,
}

/// KiB in a GiB.
pub const KIB_PER_GIB: u64 = 1024 * 1024;

impl TemplateHardware {
    /// From a template's `config.hardware.device`.
    pub fn from_devices(devices: Option<&Element>) -> TemplateHardware {
        TemplateHardware {
            devices: devices.map(|d| d.children.clone()).unwrap_or_default(),
        }
    }

    fn boot_disk(&self) -> Option<BootDisk<'_>> {
        let device = self
            .devices
            .iter()
            .find(|d| d.xsi_type() == Some("VirtualDisk"))?;
        Some(BootDisk {
            device,
            key: device.text_at(&["key"])?,
            controller_key: device.text_at(&["controllerKey"])?,
            capacity_kib: device
                .text_at(&["capacityInKB"])
                .and_then(|c| c.trim().parse().ok())
                .unwrap_or(0),
        })
    }

    /// The boot disk's size in GiB (rounded down), if the template has a disk.
    pub fn boot_disk_gib(&self) -> Option<u64> {
        self.boot_disk().map(|d| d.capacity_kib / KIB_PER_GIB)
    }

    /// Whether a group asking for `root_gib` needs the boot disk grown;
    /// an error when it asks for less than the template has (a disk cannot
    /// shrink) or the template has no disk.
    pub fn grows(
        &self,
        template: &str,
        group: &str,
        root_gib: Option<u64>,
    ) -> Result<bool, VsphereError> {
        let Some(want) = root_gib else {
            return Ok(false);
        };
        let fix = |detail: String| {
            VsphereError::Invalid {
            message: format!("instance group `{group}` asks for a {want} GiB disk, but {detail}"),
            fix: format!("set instance group `{group}`'s spec.rootVolume.size to at least the template's disk size, or leave it unset"),
        }
        };
        let disk = self
            .boot_disk()
            .ok_or_else(|| fix(format!("template `{template}` has no virtual disk")))?;
        let want_kib = want * KIB_PER_GIB;
        if want_kib < disk.capacity_kib {
            return Err(fix(format!(
                "template `{template}`'s disk is {} GiB (a disk cannot shrink)",
                disk.capacity_kib.div_ceil(KIB_PER_GIB)
            )));
        }
        Ok(want_kib > disk.capacity_kib)
    }

    /// The clone spec's `<deviceChange>` growing the boot disk to
    /// `root_gib` (when larger); empty otherwise.
    pub fn boot_disk_change(&self, root_gib: Option<u64>) -> String {
        match (root_gib, self.boot_disk()) {
            (Some(want), Some(disk)) if want * KIB_PER_GIB > disk.capacity_kib => {
                grown_disk(&disk, want)
            }
            _ => String::new(),
        }
    }

    /// Where `count` etcd disks attach on a clone: the boot disk's SCSI
    /// controller (or the first one), at the lowest free units; an error
    /// naming the template when it has no SCSI controller or too few free
    /// units.
    pub fn etcd_slots(&self, template: &str, count: usize) -> Result<EtcdSlots, VsphereError> {
        let no_scsi = || {
            VsphereError::Invalid {
            message: format!("template `{template}` has no SCSI controller for the etcd disks"),
            fix: "give the control plane's template VM a SCSI controller (LSI Logic or PVSCSI) for its boot disk; kops-rs adds the etcd disks to it".into(),
        }
        };
        if count == 0 {
            return Ok(EtcdSlots {
                controller_key: 0,
                bus: 0,
                units: Vec::new(),
            });
        }
        let controller = self
            .boot_disk()
            .and_then(|d| self.device_by_key(d.controller_key))
            .filter(|c| is_scsi(c))
            .or_else(|| self.devices.iter().find(|d| is_scsi(d)))
            .ok_or_else(no_scsi)?;
        let key = controller.text_at(&["key"]).ok_or_else(no_scsi)?;
        let controller_key: i32 = key.trim().parse().map_err(|_| no_scsi())?;
        let bus: u32 = controller
            .text_at(&["busNumber"])
            .and_then(|b| b.trim().parse().ok())
            .unwrap_or(0);
        let used: Vec<u32> = self
            .devices
            .iter()
            .filter(|d| d.text_at(&["controllerKey"]) == Some(key))
            .filter_map(|d| d.text_at(&["unitNumber"])?.trim().parse().ok())
            .collect();
        let units: Vec<u32> = (0..SCSI_UNITS)
            .filter(|u| *u != SCSI_CONTROLLER_UNIT && !used.contains(u))
            .take(count)
            .collect();
        if units.len() < count {
            return Err(VsphereError::Invalid {
                message: format!(
                    "template `{template}`'s SCSI controller has no free unit for the etcd disks"
                ),
                fix: "free units on the template's SCSI controller for the etcd disks".into(),
            });
        }
        Ok(EtcdSlots {
            controller_key,
            bus,
            units,
        })
    }

    fn device_by_key(&self, key: &str) -> Option<&Element> {
        self.devices
            .iter()
            .find(|d| d.text_at(&["key"]) == Some(key))
    }
}

fn is_scsi(device: &Element) -> bool {
    device.xsi_type().is_some_and(|t| {
        matches!(
            t,
            "VirtualLsiLogicController"
                | "VirtualLsiLogicSASController"
                | "ParaVirtualSCSIController"
                | "VirtualBusLogicController"
        )
    })
}

/// An edit of the template's boot disk to `gib` (its backing kept).
fn grown_disk(disk: &BootDisk<'_>, gib: u64) -> String {
    let backing = disk.device.child("backing");
    let file = backing
        .and_then(|b| b.text_at(&["fileName"]))
        .unwrap_or_default();
    let mode = backing
        .and_then(|b| b.text_at(&["diskMode"]))
        .unwrap_or("persistent");
    let kind = backing
        .and_then(Element::xsi_type)
        .unwrap_or("VirtualDiskFlatVer2BackingInfo");
    let unit = disk
        .device
        .text_at(&["unitNumber"])
        .map(|u| format!("<unitNumber>{u}</unitNumber>"))
        .unwrap_or_default();
    // The label and summary come along: vcsim 0.24 fails an edit without
    // them (vCenter does not mind either way).
    let info = format!(
        "<deviceInfo><label>{}</label><summary>{}</summary></deviceInfo>",
        escape(
            disk.device
                .text_at(&["deviceInfo", "label"])
                .unwrap_or("Hard disk 1")
        ),
        escape(
            disk.device
                .text_at(&["deviceInfo", "summary"])
                .unwrap_or_default()
        ),
    );
    format!(
        "<deviceChange><operation>edit</operation><device xsi:type=\"VirtualDisk\"><key>{}</key>{info}\
         <backing xsi:type=\"{}\"><fileName>{}</fileName><diskMode>{}</diskMode></backing>\
         <controllerKey>{}</controllerKey>{unit}<capacityInKB>{}</capacityInKB></device></deviceChange>",
        disk.key,
        escape(kind),
        escape(file),
        escape(mode),
        disk.controller_key,
        gib * KIB_PER_GIB,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn volume(etcd: &str) -> EtcdVolume {
        EtcdVolume {
            etcd: etcd.into(),
            member: "a".into(),
            members: vec!["a".into(), "b".into(), "c".into()],
            addresses: vec!["10.0.0.11".into(), "10.0.0.12".into(), "10.0.0.13".into()],
            size_gib: 20,
            version: "3.6.12".into(),
        }
    }

    #[test]
    fn etcd_disks_round_trip_through_guestinfo() {
        let disks = vec![
            EtcdDisk {
                volume: volume("main"),
                bus: 0,
                unit: 1,
                id: Some("6c0b1d5e-0000-4000-8000-000000000001".into()),
            },
            EtcdDisk {
                volume: volume("events"),
                bus: 0,
                unit: 2,
                id: None,
            },
        ];
        let text = EtcdDisk::encode_all(&disks);
        assert_eq!(
            text,
            "etcd=main member=a members=a,b,c bus=0 unit=1 gib=20 version=3.6.12 addresses=10.0.0.11,10.0.0.12,10.0.0.13 id=6c0b1d5e-0000-4000-8000-000000000001;\
             etcd=events member=a members=a,b,c bus=0 unit=2 gib=20 version=3.6.12 addresses=10.0.0.11,10.0.0.12,10.0.0.13"
        );
        assert_eq!(EtcdDisk::decode_all(&text).unwrap(), disks);
        // A VM cloned before members had addresses has none.
        let older =
            EtcdDisk::decode_all("etcd=main member=a members=a bus=0 unit=1 gib=20 version=3.6.12")
                .unwrap();
        assert!(older[0].volume.addresses.is_empty());
        assert_eq!(older[0].id, None);
        let e = EtcdDisk::decode_all("etcd=main member=a bus=0 unit=x gib=2").unwrap_err();
        assert!(e.contains("members"), "{e}");
    }

    #[test]
    fn disk_names_carry_the_cluster_and_no_other_clusters_prefix() {
        assert_eq!(
            disk_name("c1.k8s.local", &volume("main")),
            "kops:c1.k8s.local:etcd-main-a"
        );
        // A cluster named like another's disk prefix plus more is not
        // matched by that prefix.
        let other = disk_name("c1.k8s.local.etcd-x", &volume("main"));
        assert!(!other.starts_with(&disk_prefix("c1.k8s.local")), "{other}");
    }

    fn hardware() -> TemplateHardware {
        let xml = r#"<?xml version="1.0"?><soapenv:Envelope xmlns:soapenv="x" xmlns:xsi="y"><soapenv:Body><R><val>
            <VirtualDevice xsi:type="VirtualLsiLogicController"><key>1000</key><busNumber>0</busNumber></VirtualDevice>
            <VirtualDevice xsi:type="VirtualDisk"><key>2000</key><deviceInfo><label>Hard disk 1</label><summary>x</summary></deviceInfo>
              <backing xsi:type="VirtualDiskFlatVer2BackingInfo"><fileName>[ds] t/t.vmdk</fileName><diskMode>persistent</diskMode></backing>
              <controllerKey>1000</controllerKey><unitNumber>0</unitNumber><capacityInKB>20971520</capacityInKB></VirtualDevice>
            <VirtualDevice xsi:type="VirtualCdrom"><key>3000</key><controllerKey>1000</controllerKey><unitNumber>1</unitNumber></VirtualDevice>
            </val></R></soapenv:Body></soapenv:Envelope>"#;
        let root = crate::xml::parse(xml).unwrap();
        TemplateHardware::from_devices(root.find("val"))
    }

    #[test]
    fn the_boot_disk_grows_never_shrinks_and_etcd_disks_take_free_units() {
        let hw = hardware();
        assert_eq!(hw.boot_disk_gib(), Some(20));
        assert!(!hw.grows("t", "g", None).unwrap());
        assert!(!hw.grows("t", "g", Some(20)).unwrap());
        assert!(hw.grows("t", "g", Some(40)).unwrap());
        let e = hw.grows("t", "g", Some(10)).unwrap_err().to_string();
        assert_eq!(
            e,
            "instance group `g` asks for a 10 GiB disk, but template `t`'s disk is 20 GiB (a disk cannot shrink)\nhint: set instance group `g`'s spec.rootVolume.size to at least the template's disk size, or leave it unset"
        );
        let xml = hw.boot_disk_change(Some(40));
        assert!(xml.starts_with("<deviceChange><operation>edit</operation><device xsi:type=\"VirtualDisk\"><key>2000</key>"), "{xml}");
        assert!(
            xml.contains("<capacityInKB>41943040</capacityInKB>"),
            "{xml}"
        );
        // Without a size, or the template's, the boot disk is left alone.
        assert!(hw.boot_disk_change(None).is_empty());
        assert!(hw.boot_disk_change(Some(20)).is_empty());
        // Units 0 (boot disk) and 1 (CD-ROM) are taken, 7 is the controller's.
        let slots = hw.etcd_slots("t", 2).unwrap();
        assert_eq!(
            slots,
            EtcdSlots {
                controller_key: 1000,
                bus: 0,
                units: vec![2, 3]
            }
        );
        let nine = hw.etcd_slots("t", 9).unwrap();
        assert_eq!(nine.units, [2, 3, 4, 5, 6, 8, 9, 10, 11]);
        let e = hw.etcd_slots("t", 14).unwrap_err().to_string();
        assert!(
            e.starts_with("template `t`'s SCSI controller has no free unit"),
            "{e}"
        );
    }

    #[test]
    fn attached_etcd_disks_are_found_by_id_or_by_address_and_never_shrink() {
        let xml = r#"<?xml version="1.0"?><soapenv:Envelope xmlns:soapenv="x" xmlns:xsi="y"><soapenv:Body><R><val>
            <VirtualDevice xsi:type="VirtualIDEController"><key>200</key><busNumber>0</busNumber></VirtualDevice>
            <VirtualDevice xsi:type="VirtualLsiLogicController"><key>1000</key><busNumber>0</busNumber></VirtualDevice>
            <VirtualDevice xsi:type="VirtualDisk"><key>2000</key><deviceInfo><label>Hard disk 1</label><summary>x</summary></deviceInfo>
              <backing xsi:type="VirtualDiskFlatVer2BackingInfo"><fileName>[ds] t/t.vmdk</fileName><diskMode>persistent</diskMode></backing>
              <controllerKey>1000</controllerKey><unitNumber>0</unitNumber><capacityInKB>20971520</capacityInKB></VirtualDevice>
            <VirtualDevice xsi:type="VirtualDisk"><key>2001</key><deviceInfo><label>Hard disk 2</label><summary>y</summary></deviceInfo>
              <backing xsi:type="VirtualDiskFlatVer2BackingInfo"><fileName>[ds] kops-etcd/c/main-a.vmdk</fileName><diskMode>persistent</diskMode></backing>
              <controllerKey>1000</controllerKey><unitNumber>1</unitNumber><capacityInKB>10485760</capacityInKB></VirtualDevice>
            <VirtualDevice xsi:type="VirtualDisk"><key>2002</key><deviceInfo><label>Hard disk 3</label><summary>z</summary></deviceInfo>
              <backing xsi:type="VirtualDiskFlatVer2BackingInfo"><fileName>[ds] fcd/0f1e.vmdk</fileName><diskMode>persistent</diskMode></backing>
              <controllerKey>1000</controllerKey><unitNumber>5</unitNumber><capacityInKB>20971520</capacityInKB>
              <vDiskId><id>0f1e</id></vDiskId></VirtualDevice>
            </val></R></soapenv:Body></soapenv:Envelope>"#;
        let root = crate::xml::parse(xml).unwrap();
        let devices = &root.find("val").unwrap().children;
        // main (cloned before First Class Disks) by its SCSI address (the
        // IDE bus 0 is not SCSI bus 0); events by its disk id, though the
        // address recorded is another.
        let recorded = [
            EtcdDisk {
                volume: volume("main"),
                bus: 0,
                unit: 1,
                id: None,
            },
            EtcdDisk {
                volume: volume("events"),
                bus: 0,
                unit: 2,
                id: Some("0f1e".into()),
            },
            EtcdDisk {
                volume: volume("gone"),
                bus: 0,
                unit: 3,
                id: Some("aaaa".into()),
            },
        ];
        let attached = attached_etcd_disks(devices, &recorded);
        let found: Vec<(&str, Option<&str>, &str, u64)> = attached
            .iter()
            .map(|d| {
                (
                    d.volume.etcd.as_str(),
                    d.id.as_deref(),
                    d.file.as_str(),
                    d.capacity_kib,
                )
            })
            .collect();
        assert_eq!(
            found,
            [
                ("main", None, "[ds] kops-etcd/c/main-a.vmdk", 10485760),
                ("events", Some("0f1e"), "[ds] fcd/0f1e.vmdk", 20971520),
            ]
        );
        // Detaching keeps each device's capacity and file.
        let detach = detach_etcd_disks(&attached);
        assert_eq!(detach.matches("<operation>remove</operation>").count(), 2);
        assert!(!detach.contains("fileOperation"), "{detach}");
        assert!(
            detach.contains("<key>2002</key>")
                && detach.contains("<capacityInKB>10485760</capacityInKB>"),
            "{detach}"
        );
        // A disk larger than asked is refused, naming the field and the fix.
        let mut small = volume("events");
        small.size_gib = 10;
        let e = refuse_shrink(&small, "kops:c:etcd-events-a", 20 * KIB_PER_GIB)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "spec.etcdClusters[events].etcdMembers[a].volumeSize is 10 GiB, but the kept disk `kops:c:etcd-events-a` holds 20 GiB: etcd disks do not shrink\nhint: set spec.etcdClusters[events].etcdMembers[a].volumeSize to 20 or more"
        );
        assert!(refuse_shrink(&small, "d", 10 * KIB_PER_GIB).is_ok());
    }
}
