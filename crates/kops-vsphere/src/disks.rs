//! The disks of a cluster's VMs: the boot disk grown to the group's
//! `rootVolumeSize` and, on control-plane VMs, one extra disk per etcd
//! cluster, all set in the clone spec. Each etcd disk is described to the
//! guest in [`ETCD_KEY`] (its etcd cluster, member, SCSI address and size),
//! which nodeup reads to find, format and mount it for etcd-manager.

use std::fmt::Write as _;

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

/// An etcd disk as made: the volume and where it sits on the VM's SCSI bus.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdDisk {
    pub volume: EtcdVolume,
    /// The SCSI controller's bus number.
    pub bus: u32,
    /// The disk's unit number on that controller (the guest's SCSI target).
    pub unit: u32,
}

impl EtcdDisk {
    /// The guestinfo value for a VM's disks: one `;`-separated entry per
    /// disk, each `etcd=<name> member=<m> members=<a,b,c> bus=<n> unit=<n>
    /// gib=<n> version=<etcd version>`, and `addresses=<ip,ip,ip>` when
    /// the members have static addresses.
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
            });
        }
        Ok(out)
    }
}

/// Where the etcd disks of `cluster` live on `datastore` (a directory of
/// their own, so they outlive the VM they are attached to).
pub fn etcd_disk_dir(datastore: &str, cluster: &str) -> String {
    format!("[{datastore}] kops-etcd/{cluster}")
}

/// The file of one member's disk of one etcd cluster.
pub fn etcd_disk_path(datastore: &str, cluster: &str, volume: &EtcdVolume) -> String {
    format!(
        "{}/{}-{}.vmdk",
        etcd_disk_dir(datastore, cluster),
        volume.etcd,
        volume.member
    )
}

/// An etcd disk attached to a VM, found by the SCSI address the VM's
/// [`ETCD_KEY`] gives it (its bus and unit, set when the VM was cloned),
/// not by its file: Storage vMotion and Storage DRS move and rename a
/// VM's disk files after the VM, but its devices keep their addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachedEtcdDisk {
    pub volume: EtcdVolume,
    /// Its file now (wherever vCenter moved it).
    pub file: String,
    pub capacity_kib: u64,
    /// Its `<deviceChange>` detaching it (the file kept).
    pub detach: String,
}

/// The etcd disks attached to a VM: for each disk its [`ETCD_KEY`] lists
/// (`recorded`), the virtual disk at that SCSI bus and unit of
/// `devices` (`config.hardware.device`, read with the VM's listing: no
/// call). A recorded disk no longer attached is left out.
pub fn attached_etcd_disks(devices: &[Element], recorded: &[EtcdDisk]) -> Vec<AttachedEtcdDisk> {
    let controller_key = |bus: u32| {
        devices
            .iter()
            .filter(|d| is_scsi(d))
            .find(|d| d.text_at(&["busNumber"]).map(str::trim) == Some(&bus.to_string()))
            .and_then(|d| d.text_at(&["key"]))
            .map(|k| k.trim().to_string())
    };
    recorded
        .iter()
        .filter_map(|disk| {
            let controller = controller_key(disk.bus)?;
            let device = devices.iter().find(|d| {
                d.xsi_type() == Some("VirtualDisk")
                    && d.text_at(&["controllerKey"]).map(str::trim) == Some(controller.as_str())
                    && d.text_at(&["unitNumber"]).map(str::trim) == Some(&disk.unit.to_string())
            })?;
            Some(AttachedEtcdDisk {
                volume: disk.volume.clone(),
                file: device.text_at(&["backing", "fileName"])?.to_string(),
                capacity_kib: device.text_at(&["capacityInKB"])?.trim().parse().ok()?,
                detach: etcd_device_change(device, "remove", None),
            })
        })
        .collect()
}

/// A VirtualMachineConfigSpec's `<deviceChange>`s detaching `disks`
/// (their files kept, so the VM can be destroyed and its replacement
/// attach them); empty when there are none.
pub fn detach_etcd_disks(disks: &[AttachedEtcdDisk]) -> String {
    disks.iter().map(|d| d.detach.as_str()).collect()
}

/// The `<deviceChange>`s detaching the disks of `devices` whose files
/// are `files` (a fresh clone's etcd disks, attached by those paths).
pub fn detach_files(devices: &[Element], files: &[EtcdFile]) -> String {
    devices
        .iter()
        .filter(|d| {
            d.xsi_type() == Some("VirtualDisk")
                && d.text_at(&["backing", "fileName"])
                    .is_some_and(|f| files.iter().any(|e| e.path == f))
        })
        .map(|d| etcd_device_change(d, "remove", None))
        .collect()
}

/// The `<deviceChange>`s growing a fresh clone's attached etcd disks
/// (`devices` read back from it) to their volumes' sizes, for those of
/// `files` kept smaller than asked, or of a size not known before the
/// clone. A disk found larger than asked is refused ([`refuse_shrink`]):
/// the caller removes the clone.
pub fn grow_etcd_disks(devices: &[Element], files: &[EtcdFile]) -> Result<String, VsphereError> {
    let mut xml = String::new();
    for device in devices
        .iter()
        .filter(|d| d.xsi_type() == Some("VirtualDisk"))
    {
        let Some(file) = files
            .iter()
            .find(|f| device.text_at(&["backing", "fileName"]) == Some(f.path.as_str()))
        else {
            continue;
        };
        let have: u64 = device
            .text_at(&["capacityInKB"])
            .and_then(|c| c.trim().parse().ok())
            .unwrap_or(0);
        refuse_shrink(&file.volume, &file.path, have)?;
        let want = file.volume.size_gib * KIB_PER_GIB;
        if have < want {
            xml.push_str(&etcd_device_change(device, "edit", Some(want)));
        }
    }
    Ok(xml)
}

/// An error when a kept etcd disk of `capacity_kib` is larger than its
/// member's `volumeSize` asks: etcd disks grow, never shrink.
pub fn refuse_shrink(
    volume: &EtcdVolume,
    path: &str,
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
            "{field} is {} GiB, but the kept disk `{path}` holds {have} GiB: etcd disks do not shrink",
            volume.size_gib
        ),
        fix: format!("set {field} to {have} or more"),
    })
}

/// One etcd disk of a VM as a `<deviceChange>` of `operation`, its
/// capacity changed to `capacity_kib` when given.
fn etcd_device_change(d: &Element, operation: &str, capacity_kib: Option<u64>) -> String {
    let text = |path: &[&str]| d.text_at(path).map(escape).unwrap_or_default();
    let capacity = capacity_kib
        .map(|c| c.to_string())
        .unwrap_or_else(|| text(&["capacityInKB"]));
    // The label and summary come along: vcsim 0.24 fails an edit without
    // them (vCenter does not mind either way).
    format!(
        "<deviceChange><operation>{operation}</operation><device xsi:type=\"VirtualDisk\"><key>{}</key>\
         <deviceInfo><label>{}</label><summary>{}</summary></deviceInfo>\
         <backing xsi:type=\"VirtualDiskFlatVer2BackingInfo\"><fileName>{}</fileName><diskMode>{}</diskMode></backing>\
         <controllerKey>{}</controllerKey><unitNumber>{}</unitNumber><capacityInKB>{capacity}</capacityInKB></device></deviceChange>",
        text(&["key"]),
        text(&["deviceInfo", "label"]),
        text(&["deviceInfo", "summary"]),
        text(&["backing", "fileName"]),
        d.text_at(&["backing", "diskMode"]).map(escape).unwrap_or_else(|| "persistent".into()),
        text(&["controllerKey"]),
        text(&["unitNumber"]),
    )
}

/// An etcd volume's disk file and whether it exists already (a VM made
/// before this one left it: it is attached, not created).
#[derive(Debug, Clone)]
pub struct EtcdFile {
    pub volume: EtcdVolume,
    pub path: String,
    pub exists: bool,
    /// The existing file's capacity in KiB, when known before the clone
    /// (from the VM it was attached to, or the datastore's browser).
    pub capacity_kib: Option<u64>,
}

impl EtcdFile {
    /// Whether the clone must grow this disk once attached: a kept file
    /// smaller than the volume asks, or of unknown size (then read back
    /// from the clone).
    pub fn grows(&self) -> bool {
        self.exists
            && self
                .capacity_kib
                .is_none_or(|c| c < self.volume.size_gib * KIB_PER_GIB)
    }
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

const KIB_PER_GIB: u64 = 1024 * 1024;

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

    /// The clone spec's `<deviceChange>`s for the disks: the boot disk
    /// grown to `root_gib` (when larger), then one thin disk per etcd
    /// volume (created, or the existing file attached) on the boot disk's
    /// SCSI controller, at the lowest free units. Also the etcd disks as
    /// placed.
    pub fn disk_changes(
        &self,
        template: &str,
        root_gib: Option<u64>,
        etcd: &[EtcdFile],
        datastore: &MoRef,
    ) -> Result<(String, Vec<EtcdDisk>), VsphereError> {
        let mut xml = String::new();
        let boot = self.boot_disk();
        if let (Some(want), Some(disk)) = (root_gib, &boot) {
            if want * KIB_PER_GIB > disk.capacity_kib {
                xml.push_str(&grown_disk(disk, want));
            }
        }
        if etcd.is_empty() {
            return Ok((xml, Vec::new()));
        }
        let no_scsi = || {
            VsphereError::Invalid {
            message: format!("template `{template}` has no SCSI controller for the etcd disks"),
            fix: "give the control plane's template VM a SCSI controller (LSI Logic or PVSCSI) for its boot disk; kops-rs adds the etcd disks to it".into(),
        }
        };
        let controller = boot
            .as_ref()
            .and_then(|d| self.device_by_key(d.controller_key))
            .filter(|c| is_scsi(c))
            .or_else(|| self.devices.iter().find(|d| is_scsi(d)))
            .ok_or_else(no_scsi)?;
        let controller_key = controller.text_at(&["key"]).ok_or_else(no_scsi)?;
        let bus: u32 = controller
            .text_at(&["busNumber"])
            .and_then(|b| b.trim().parse().ok())
            .unwrap_or(0);
        let used: Vec<u32> = self
            .devices
            .iter()
            .filter(|d| d.text_at(&["controllerKey"]) == Some(controller_key))
            .filter_map(|d| d.text_at(&["unitNumber"])?.trim().parse().ok())
            .collect();
        let mut free = (0..SCSI_UNITS).filter(|u| *u != SCSI_CONTROLLER_UNIT && !used.contains(u));
        let mut placed = Vec::new();
        for (index, file) in etcd.iter().enumerate() {
            let volume = &file.volume;
            let unit = free.next().ok_or_else(|| VsphereError::Invalid {
                message: format!(
                    "template `{template}`'s SCSI controller has no free unit for the etcd disks"
                ),
                fix: "free units on the template's SCSI controller for the etcd disks".into(),
            })?;
            // New devices take negative keys, unique within the spec.
            let key = -101 - i64::try_from(index).unwrap_or(0);
            // A new file is made at the volume's size; a kept one is
            // attached at its own (0 when unknown, as govc attaches: the
            // server takes the file's), grown after the clone when smaller.
            let (create, capacity_kib) = if file.exists {
                ("", file.capacity_kib.unwrap_or(0))
            } else {
                (
                    "<fileOperation>create</fileOperation>",
                    volume.size_gib * KIB_PER_GIB,
                )
            };
            let _ = write!(
                xml,
                "<deviceChange><operation>add</operation>{create}\
                 <device xsi:type=\"VirtualDisk\"><key>{key}</key>\
                 <backing xsi:type=\"VirtualDiskFlatVer2BackingInfo\"><fileName>{}</fileName>{}\
                 <diskMode>persistent</diskMode><thinProvisioned>true</thinProvisioned></backing>\
                 <controllerKey>{controller_key}</controllerKey><unitNumber>{unit}</unitNumber>\
                 <capacityInKB>{capacity_kib}</capacityInKB></device></deviceChange>",
                escape(&file.path),
                datastore.xml("datastore"),
            );
            placed.push(EtcdDisk {
                volume: volume.clone(),
                bus,
                unit,
            });
        }
        Ok((xml, placed))
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
            },
            EtcdDisk {
                volume: volume("events"),
                bus: 0,
                unit: 2,
            },
        ];
        let text = EtcdDisk::encode_all(&disks);
        assert_eq!(
            text,
            "etcd=main member=a members=a,b,c bus=0 unit=1 gib=20 version=3.6.12 addresses=10.0.0.11,10.0.0.12,10.0.0.13;\
             etcd=events member=a members=a,b,c bus=0 unit=2 gib=20 version=3.6.12 addresses=10.0.0.11,10.0.0.12,10.0.0.13"
        );
        assert_eq!(EtcdDisk::decode_all(&text).unwrap(), disks);
        // A VM cloned before members had addresses has none.
        let older =
            EtcdDisk::decode_all("etcd=main member=a members=a bus=0 unit=1 gib=20 version=3.6.12")
                .unwrap();
        assert!(older[0].volume.addresses.is_empty());
        let e = EtcdDisk::decode_all("etcd=main member=a bus=0 unit=x gib=2").unwrap_err();
        assert!(e.contains("members"), "{e}");
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
        let ds = MoRef::new("Datastore", "ds-1");
        let (xml, placed) = hw
            .disk_changes(
                "t",
                Some(40),
                &[
                    EtcdFile {
                        volume: volume("main"),
                        path: etcd_disk_path("ds", "c", &volume("main")),
                        exists: false,
                        capacity_kib: None,
                    },
                    EtcdFile {
                        volume: volume("events"),
                        path: "[ds] kops-etcd/c/events-a.vmdk".into(),
                        exists: true,
                        capacity_kib: Some(10 * KIB_PER_GIB),
                    },
                ],
                &ds,
            )
            .unwrap();
        assert!(xml.starts_with("<deviceChange><operation>edit</operation><device xsi:type=\"VirtualDisk\"><key>2000</key>"), "{xml}");
        assert!(
            xml.contains("<capacityInKB>41943040</capacityInKB>"),
            "{xml}"
        );
        // Units 0 (boot disk) and 1 (CD-ROM) are taken, 7 is the controller's.
        assert_eq!(placed.iter().map(|d| d.unit).collect::<Vec<_>>(), [2, 3]);
        // The missing disk is created, the existing one attached.
        assert_eq!(
            xml.matches("<fileOperation>create</fileOperation>").count(),
            1
        );
        assert!(
            xml.contains("<fileName>[ds] kops-etcd/c/main-a.vmdk</fileName>"),
            "{xml}"
        );
        // The new disk is made at its volume's 20 GiB, the kept one is
        // attached at its own 10 GiB (grown after the clone).
        assert!(
            xml.contains("<capacityInKB>20971520</capacityInKB>"),
            "{xml}"
        );
        assert!(
            xml.contains("<capacityInKB>10485760</capacityInKB>"),
            "{xml}"
        );
        // Without a size, the boot disk is left alone.
        let (xml, _) = hw.disk_changes("t", None, &[], &ds).unwrap();
        assert!(xml.is_empty());
    }

    #[test]
    fn kept_etcd_disks_grow_to_the_volume_size_and_never_shrink() {
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
              <backing xsi:type="VirtualDiskFlatVer2BackingInfo"><fileName>[ds] kops-etcd/c/events-a.vmdk</fileName><diskMode>persistent</diskMode></backing>
              <controllerKey>1000</controllerKey><unitNumber>2</unitNumber><capacityInKB>20971520</capacityInKB></VirtualDevice>
            </val></R></soapenv:Body></soapenv:Envelope>"#;
        let root = crate::xml::parse(xml).unwrap();
        let devices = &root.find("val").unwrap().children;
        // Found by their SCSI addresses (as recorded at the clone), not
        // by their files (the IDE bus 0 is not SCSI bus 0).
        let recorded = [
            EtcdDisk {
                volume: volume("main"),
                bus: 0,
                unit: 1,
            },
            EtcdDisk {
                volume: volume("events"),
                bus: 0,
                unit: 2,
            },
        ];
        let attached = attached_etcd_disks(devices, &recorded);
        let found: Vec<(&str, &str, u64)> = attached
            .iter()
            .map(|d| (d.volume.etcd.as_str(), d.file.as_str(), d.capacity_kib))
            .collect();
        assert_eq!(
            found,
            [
                ("main", "[ds] kops-etcd/c/main-a.vmdk", 10485760),
                ("events", "[ds] kops-etcd/c/events-a.vmdk", 20971520),
            ]
        );
        let file = |etcd: &str| EtcdFile {
            volume: volume(etcd),
            path: format!("[ds] kops-etcd/c/{etcd}-a.vmdk"),
            exists: true,
            capacity_kib: None,
        };
        // main (10 GiB) grows to 20, events (20 GiB) stays: one edit, of
        // the attached device, its file and unit kept.
        let grow = grow_etcd_disks(devices, &[file("main"), file("events")]).unwrap();
        assert_eq!(
            grow.matches("<operation>edit</operation>").count(),
            1,
            "{grow}"
        );
        assert!(
            grow.contains("<key>2001</key>")
                && grow.contains("<fileName>[ds] kops-etcd/c/main-a.vmdk</fileName>")
                && grow.contains("<unitNumber>1</unitNumber><capacityInKB>20971520</capacityInKB>"),
            "{grow}"
        );
        assert!(file("main").grows());
        assert!(!EtcdFile {
            capacity_kib: Some(20 * KIB_PER_GIB),
            ..file("main")
        }
        .grows());
        assert!(!EtcdFile {
            exists: false,
            ..file("main")
        }
        .grows());
        // A disk larger than asked is refused, naming the field and the fix.
        let mut small = file("events");
        small.volume.size_gib = 10;
        let e = grow_etcd_disks(devices, &[small]).unwrap_err().to_string();
        assert_eq!(
            e,
            "spec.etcdClusters[events].etcdMembers[a].volumeSize is 10 GiB, but the kept disk `[ds] kops-etcd/c/events-a.vmdk` holds 20 GiB: etcd disks do not shrink\nhint: set spec.etcdClusters[events].etcdMembers[a].volumeSize to 20 or more"
        );
        // Detaching keeps each device's capacity.
        let detach = detach_etcd_disks(&attached);
        assert_eq!(detach.matches("<operation>remove</operation>").count(), 2);
        assert!(
            detach.contains("<capacityInKB>10485760</capacityInKB>"),
            "{detach}"
        );
    }
}
