//! etcd's data disks on a vSphere control-plane VM.
//!
//! `update cluster` adds one virtual disk per etcd cluster to a
//! control-plane VM's clone spec and describes them in the VM's
//! `guestinfo.kops.etcd` (etcd cluster, member, SCSI bus/unit, size; see
//! [`kops_vsphere::disks`]). nodeup finds each disk by its SCSI target
//! (the unit number) and size, formats it once (ext4, labelled
//! `kops-etcd-<etcd>`), and mounts it where etcd-manager's `external`
//! volume provider looks: a directory under `/mnt/disks` named
//! `<cluster>--<etcd>--<member>` (the provider's volume tag is the prefix
//! `<cluster>--<etcd>--`; the member is the peer id of its static config),
//! holding the data directory `mnt/`. On a disk it has just formatted,
//! the first member (by name) also gets etcd-manager's
//! `please-create-new-cluster` marker, so a new cluster is created once.
//! A systemd mount unit mounts it again at boot, by label. A kept disk
//! that `update` grew for a larger `volumeSize` gets its file system grown
//! too, online, once mounted (`resize2fs`).

use std::path::{Path, PathBuf};

use kops_vsphere::disks::{EtcdDisk, ETCD_KEY};

use super::Guest;
use crate::agent::{NodeupError, PlannedFile};

/// Where etcd-manager's external volume provider finds its volumes.
pub const DISKS_DIR: &str = "/mnt/disks";
/// Where etcd-manager writes its backups on vSphere (the VM's root disk).
pub const BACKUPS_DIR: &str = "/mnt/disks/backups";
/// The file that lets etcd-manager (static config) create a new cluster.
pub const NEW_CLUSTER_MARKER: &str = "please-create-new-cluster";

/// The etcd disks this VM was cloned with (none when it has no
/// `guestinfo.kops.etcd`).
pub fn disks(guest: &dyn Guest) -> Result<Vec<EtcdDisk>, NodeupError> {
    let vsphere = |reason: String| NodeupError::Vsphere { reason };
    match guest.get(ETCD_KEY).map_err(vsphere)? {
        Some(text) => EtcdDisk::decode_all(&text).map_err(vsphere),
        None => Ok(Vec::new()),
    }
}

/// etcd-manager's volume tag for one etcd cluster: the prefix of its
/// volume directories.
pub fn volume_tag(cluster: &str, etcd: &str) -> String {
    format!("{cluster}--{etcd}--")
}

/// A member's peer id (and volume directory name).
pub fn peer_id(cluster: &str, etcd: &str, member: &str) -> String {
    format!("{}{member}", volume_tag(cluster, etcd))
}

/// Where a disk is mounted.
pub fn mount_point(cluster: &str, disk: &EtcdDisk) -> String {
    format!(
        "{DISKS_DIR}/{}",
        peer_id(cluster, &disk.volume.etcd, &disk.volume.member)
    )
}

/// The file system label of an etcd cluster's disk (ext4 allows 16 bytes).
pub fn label(etcd: &str) -> String {
    let mut label = format!("kops-etcd-{etcd}");
    label.truncate(16);
    label
}

/// etcd-manager's `--static-config` for the etcd cluster of `disk`: every
/// member with its address. The members' static addresses come with the
/// disk (`spec.cloudConfig.vSphereControlPlaneAddresses`); etcd-manager
/// maps each peer's name under `--dns-suffix` to them in `/etc/hosts`. A
/// cluster of one member without them runs at this VM's own address (its
/// node address, else loopback). More than one member without addresses
/// is an error: no member could reach another.
pub fn static_config(
    cluster: &str,
    disk: &EtcdDisk,
    own_address: Option<&str>,
) -> Result<String, String> {
    let volume = &disk.volume;
    let addresses: Vec<String> = if volume.addresses.len() == volume.members.len() {
        volume.addresses.clone()
    } else if volume.members.len() == 1 && volume.addresses.is_empty() {
        vec![own_address.unwrap_or("127.0.0.1").to_string()]
    } else {
        return Err(format!(
            "etcd `{}` has {} members but {ETCD_KEY} gives {} addresses; give each control-plane group an address (spec.cloudConfig.vSphereControlPlaneAddresses), run `kops update cluster --yes` and replace this VM with `kops rolling-update cluster`",
            volume.etcd,
            volume.members.len(),
            volume.addresses.len()
        ));
    };
    let nodes: Vec<serde_json::Value> = volume
        .members
        .iter()
        .zip(addresses)
        .map(|(member, address)| {
            serde_json::json!({
                "id": peer_id(cluster, &volume.etcd, member),
                "ip": [address],
            })
        })
        .collect();
    Ok(serde_json::json!({"etcdVersion": volume.version, "nodes": nodes}).to_string())
}

/// systemd's name for the mount unit of `path` (`systemd-escape --path`).
pub fn mount_unit(path: &str) -> String {
    let trimmed = path.trim_matches('/');
    let mut out = String::new();
    for (i, byte) in trimmed.bytes().enumerate() {
        match byte {
            b'/' => out.push('-'),
            b'.' if i == 0 => out.push_str("\\x2e"),
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'.' => out.push(char::from(byte)),
            other => out.push_str(&format!("\\x{other:02x}")),
        }
    }
    format!("{out}.mount")
}

/// The mount units that mount the disks again at boot, by label, before
/// the kubelet starts etcd-manager.
pub fn mount_units(cluster: &str, disks: &[EtcdDisk]) -> Vec<PlannedFile> {
    disks
        .iter()
        .map(|disk| {
            let at = mount_point(cluster, disk);
            PlannedFile::new(
                format!("/etc/systemd/system/{}", mount_unit(&at)),
                0o644,
                format!(
                    "# Written by kops-rs nodeup.\n[Unit]\nDescription=etcd `{}` data disk (kops-rs)\nBefore=kubelet.service\n\n\
                     [Mount]\nWhat=/dev/disk/by-label/{}\nWhere={at}\nType=ext4\nOptions=defaults,noatime\n\n\
                     [Install]\nWantedBy=local-fs.target\n",
                    disk.volume.etcd,
                    label(&disk.volume.etcd),
                ),
            )
        })
        .collect()
}

pub use crate::agent::command::{Ran, Runner, System};

/// The block device of `disk`: the SCSI disk (channel 0, LUN 0) whose
/// target is the disk's unit, read from `<root>/sys/block`; when several
/// controllers have one there, the one of the disk's size. (A disk kept
/// from an earlier VM has that size too: the clone grows a kept disk to a
/// larger `volumeSize` before the VM boots, and refuses a smaller one.)
pub fn find_device(root: &Path, disk: &EtcdDisk) -> Result<String, String> {
    let block = root.join("sys/block");
    let want_sectors = disk.volume.size_gib * 1024 * 1024 * 2;
    let entries =
        std::fs::read_dir(&block).map_err(|e| format!("cannot list {}: {e}", block.display()))?;
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let dir = entry.path();
        let Some(address) = std::fs::read_link(dir.join("device"))
            .ok()
            .and_then(|t| t.file_name().map(|n| n.to_string_lossy().into_owned()))
        else {
            continue;
        };
        let parts: Vec<u32> = address.split(':').filter_map(|p| p.parse().ok()).collect();
        let [_, 0, target, 0] = parts[..] else {
            continue;
        };
        let sectors: u64 = std::fs::read_to_string(dir.join("size"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
        if target == disk.unit {
            found.push((
                format!("/dev/{}", entry.file_name().to_string_lossy()),
                sectors == want_sectors,
            ));
        }
    }
    if found.len() > 1 {
        found.retain(|(_, sized)| *sized);
    }
    let mut found: Vec<String> = found.into_iter().map(|(d, _)| d).collect();
    found.sort();
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(format!(
            "no disk at SCSI target {} for etcd `{}` (guestinfo.kops.etcd); replace this VM with `kops rolling-update cluster`",
            disk.unit, disk.volume.etcd
        )),
        _ => Err(format!(
            "several {} GiB disks at SCSI target {} ({}) for etcd `{}`; give the template one SCSI controller",
            disk.volume.size_gib,
            disk.unit,
            found.join(", "),
            disk.volume.etcd
        )),
    }
}

/// Formats (once) and mounts each etcd disk for etcd-manager, under
/// `root` (`/` on a node); the steps taken, for the log.
pub fn prepare(
    root: &Path,
    cluster: &str,
    disks: &[EtcdDisk],
    runner: &dyn Runner,
) -> Result<Vec<String>, NodeupError> {
    let fail = |reason: String| NodeupError::Vsphere { reason };
    let under = |path: &str| -> PathBuf { root.join(path.trim_start_matches('/')) };
    let run = |args: &[&str]| runner.run(args).map_err(fail);
    let mut steps = Vec::new();
    for disk in disks {
        let label = label(&disk.volume.etcd);
        let by_label = format!("/dev/disk/by-label/{label}");
        let mut fresh = false;
        let device = if under(&by_label).exists() {
            by_label
        } else {
            let device = find_device(root, disk).map_err(fail)?;
            let probe = run(&["blkid", "-p", "-o", "value", "-s", "TYPE", &device])?;
            match probe.code {
                // blkid -p: 2 is "nothing found", an empty disk.
                2 => {
                    let made = run(&["mkfs.ext4", "-q", "-m", "0", "-L", &label, &device])?;
                    if made.code != 0 {
                        return Err(fail(format!("mkfs.ext4 on {device} for etcd `{}` failed", disk.volume.etcd)));
                    }
                    steps.push(format!("formatted {device} (ext4, {label})"));
                    fresh = true;
                }
                0 => {
                    return Err(fail(format!(
                        "{device} (SCSI target {}) for etcd `{}` already holds {} without the label {label}; nodeup formats only empty disks",
                        disk.unit,
                        disk.volume.etcd,
                        if probe.stdout.is_empty() { "data".to_string() } else { format!("a {} file system", probe.stdout) },
                    )))
                }
                code => return Err(fail(format!("blkid on {device} failed (exit {code})"))),
            }
            device
        };
        let at = mount_point(cluster, disk);
        std::fs::create_dir_all(under(&at)).map_err(|e| fail(format!("cannot make {at}: {e}")))?;
        if run(&["mountpoint", "-q", &at])?.code != 0 {
            let mounted = run(&["mount", "-t", "ext4", "-o", "noatime", &device, &at])?;
            if mounted.code != 0 {
                return Err(fail(format!(
                    "mounting {device} at {at} failed (exit {})",
                    mounted.code
                )));
            }
            steps.push(format!("mounted {device} at {at}"));
        }
        // A file system just made fills its disk; a kept one may sit on a
        // disk grown since.
        if !fresh {
            steps.extend(grow_file_system(root, disk, &device, &label, runner).map_err(fail)?);
        }
        let data = under(&format!("{at}/mnt"));
        std::fs::create_dir_all(&data).map_err(|e| fail(format!("cannot make {at}/mnt: {e}")))?;
        let first = disk.volume.members.iter().min() == Some(&disk.volume.member);
        if fresh && first {
            std::fs::write(data.join(NEW_CLUSTER_MARKER), b"")
                .map_err(|e| fail(format!("cannot write {at}/mnt/{NEW_CLUSTER_MARKER}: {e}")))?;
            steps.push(format!("marked {at} to create etcd `{}`", disk.volume.etcd));
        }
    }
    Ok(steps)
}

/// The sectors (512 bytes) of block device `device` (`/dev/sdX`, or a
/// `/dev/disk/by-label` link to one), read from `<root>/sys`.
fn device_sectors(root: &Path, device: &str) -> Result<u64, String> {
    let path = root.join(device.trim_start_matches('/'));
    let name = match std::fs::read_link(&path) {
        Ok(target) => target.file_name().map(|n| n.to_string_lossy().into_owned()),
        Err(_) => Path::new(device)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned()),
    }
    .ok_or_else(|| format!("cannot tell which block device {device} is"))?;
    ["sys/class/block", "sys/block"]
        .iter()
        .find_map(|dir| std::fs::read_to_string(root.join(dir).join(&name).join("size")).ok())
        .and_then(|s| s.trim().parse().ok())
        .ok_or_else(|| format!("cannot read the size of {device} ({name}) in /sys"))
}

/// An ext4 file system's label, block count and block size, from
/// `dumpe2fs -h`.
fn file_system(text: &str) -> Option<(String, u64, u64)> {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.trim_start().strip_prefix(':'))
            .map(str::trim)
    };
    let label = field("Filesystem volume name")?.to_string();
    let blocks: u64 = field("Block count")?.parse().ok()?;
    let block_size: u64 = field("Block size")?.parse().ok()?;
    Some((label, blocks, block_size.max(1)))
}

/// Grows the mounted ext4 file system on `device` (online, `resize2fs`)
/// when its disk holds at least one block more than it does: a kept disk
/// grown for a larger `volumeSize`. A file system without the disk's
/// label `label` is left alone (an error). The step taken, if any.
fn grow_file_system(
    root: &Path,
    disk: &EtcdDisk,
    device: &str,
    label: &str,
    runner: &dyn Runner,
) -> Result<Option<String>, String> {
    let disk_bytes = device_sectors(root, device)? * 512;
    let read = runner.run(&["dumpe2fs", "-h", device])?;
    let Some((found, blocks, block_size)) = file_system(&read.stdout).filter(|_| read.code == 0)
    else {
        return Err(format!(
            "dumpe2fs on {device} for etcd `{}` failed (exit {}); is it the ext4 file system nodeup made?",
            disk.volume.etcd, read.code
        ));
    };
    if found != label {
        return Err(format!(
            "{device} for etcd `{}` holds a file system labelled `{found}`, not {label}; nodeup leaves it alone",
            disk.volume.etcd
        ));
    }
    // Not a whole block more: nothing to grow (mkfs rounds down).
    if disk_bytes / block_size <= blocks {
        return Ok(None);
    }
    let grown = runner.run(&["resize2fs", device])?;
    if grown.code != 0 {
        return Err(format!(
            "resize2fs on {device} for etcd `{}` failed (exit {})",
            disk.volume.etcd, grown.code
        ));
    }
    const GIB: u64 = 1 << 30;
    Ok(Some(format!(
        "grew the file system on {device} from {} to {} GiB",
        blocks * block_size / GIB,
        disk_bytes / GIB
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kops_vsphere::disks::EtcdVolume;
    use std::cell::RefCell;

    fn disk(etcd: &str, member: &str, unit: u32, gib: u64) -> EtcdDisk {
        EtcdDisk {
            volume: EtcdVolume {
                etcd: etcd.into(),
                member: member.into(),
                members: vec!["a".into(), "b".into(), "c".into()],
                addresses: vec!["10.0.0.11".into(), "10.0.0.12".into(), "10.0.0.13".into()],
                size_gib: gib,
                version: "3.6.12".into(),
            },
            bus: 0,
            unit,
            id: None,
        }
    }

    /// A recorded command line and the answer it got.
    #[derive(Default)]
    struct Recorder {
        ran: RefCell<Vec<String>>,
        /// blkid's answer: exit code and TYPE.
        blkid: (i32, &'static str),
        /// dumpe2fs' answer: the label (else the device's by-label name)
        /// and the file system's GiB (else 20).
        fs: (Option<&'static str>, u64),
    }

    impl Runner for Recorder {
        fn run(&self, args: &[&str]) -> Result<Ran, String> {
            self.ran.borrow_mut().push(args.join(" "));
            if args[0] == "dumpe2fs" {
                let label = self
                    .fs
                    .0
                    .unwrap_or_else(|| args[2].rsplit('/').next().unwrap_or_default());
                let gib = if self.fs.1 == 0 { 20 } else { self.fs.1 };
                return Ok(Ran {
                    code: 0,
                    stdout: format!(
                        "Filesystem volume name:   {label}\nBlock count:              {}\nBlock size:               4096",
                        gib * 262144
                    ),
                    ..Default::default()
                });
            }
            let (code, stdout) = match args[0] {
                "blkid" => self.blkid,
                "mountpoint" => (1, ""),
                _ => (0, ""),
            };
            Ok(Ran {
                code,
                stdout: stdout.into(),
                ..Default::default()
            })
        }
    }

    /// A fake `/sys/block` with `name` at SCSI address `address` and `gib`.
    fn block(root: &Path, name: &str, address: &str, gib: u64) {
        let devices = root.join("sys/devices").join(address);
        std::fs::create_dir_all(&devices).unwrap();
        let dir = root.join("sys/block").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::os::unix::fs::symlink(&devices, dir.join("device")).unwrap();
        std::fs::write(dir.join("size"), format!("{}\n", gib * 1024 * 1024 * 2)).unwrap();
    }

    /// `/dev/disk/by-label/<label>` pointing at block device `name`
    /// (`/dev/<name>` a plain file).
    fn labelled(root: &Path, label: &str, name: &str) {
        let dir = root.join("dev/disk/by-label");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(root.join("dev").join(name), "").unwrap();
        std::os::unix::fs::symlink(format!("../../{name}"), dir.join(label)).unwrap();
    }

    #[test]
    fn an_empty_disk_is_found_formatted_mounted_and_marked_once() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path();
        block(root, "sda", "2:0:0:0", 40);
        block(root, "sdb", "2:0:1:0", 20);
        block(root, "sdc", "2:0:2:0", 20);
        // Another controller's disk at the same target: told apart by size.
        block(root, "sdd", "3:0:1:0", 50);
        let disks = [disk("main", "a", 1, 20), disk("events", "a", 2, 20)];
        let runner = Recorder {
            blkid: (2, ""),
            ..Default::default()
        };
        let steps = prepare(root, "c1.k8s.local", &disks, &runner).unwrap();
        assert_eq!(
            runner.ran.borrow().clone(),
            [
                "blkid -p -o value -s TYPE /dev/sdb",
                "mkfs.ext4 -q -m 0 -L kops-etcd-main /dev/sdb",
                "mountpoint -q /mnt/disks/c1.k8s.local--main--a",
                "mount -t ext4 -o noatime /dev/sdb /mnt/disks/c1.k8s.local--main--a",
                "blkid -p -o value -s TYPE /dev/sdc",
                "mkfs.ext4 -q -m 0 -L kops-etcd-events /dev/sdc",
                "mountpoint -q /mnt/disks/c1.k8s.local--events--a",
                "mount -t ext4 -o noatime /dev/sdc /mnt/disks/c1.k8s.local--events--a",
            ]
        );
        assert_eq!(steps.len(), 6, "{steps:?}");
        for etcd in ["main", "events"] {
            let data = root.join(format!("mnt/disks/c1.k8s.local--{etcd}--a/mnt"));
            assert!(data.join(NEW_CLUSTER_MARKER).is_file(), "{etcd}");
        }

        // Next boot: the label exists, nothing is formatted or marked
        // again, and the file systems fill their disks.
        for (etcd, name) in [("main", "sdb"), ("events", "sdc")] {
            labelled(root, &label(etcd), name);
            std::fs::remove_file(root.join(format!(
                "mnt/disks/c1.k8s.local--{etcd}--a/mnt/{NEW_CLUSTER_MARKER}"
            )))
            .unwrap();
        }
        let again = Recorder::default();
        prepare(root, "c1.k8s.local", &disks, &again).unwrap();
        assert_eq!(
            again.ran.borrow()[..2],
            [
                "mountpoint -q /mnt/disks/c1.k8s.local--main--a",
                "mount -t ext4 -o noatime /dev/disk/by-label/kops-etcd-main /mnt/disks/c1.k8s.local--main--a",
            ]
        );
        assert_eq!(
            again.ran.borrow()[2],
            "dumpe2fs -h /dev/disk/by-label/kops-etcd-main"
        );
        assert!(!again
            .ran
            .borrow()
            .iter()
            .any(|c| c.starts_with("mkfs") || c.starts_with("resize2fs")));
        assert!(!root
            .join(format!(
                "mnt/disks/c1.k8s.local--main--a/mnt/{NEW_CLUSTER_MARKER}"
            ))
            .exists());
    }

    #[test]
    fn a_grown_disk_gets_its_file_system_grown_online_and_only_then() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path();
        // The kept disk, grown from 20 to 30 GiB by the clone; another
        // controller's disk at the same target is told apart by size.
        block(root, "sdb", "2:0:1:0", 30);
        block(root, "sdd", "3:0:1:0", 20);
        let grown = disk("main", "a", 1, 30);
        assert_eq!(find_device(root, &grown).unwrap(), "/dev/sdb");
        labelled(root, "kops-etcd-main", "sdb");
        let runner = Recorder::default();
        let steps = prepare(root, "c1.k8s.local", std::slice::from_ref(&grown), &runner).unwrap();
        assert_eq!(
            runner.ran.borrow().clone(),
            [
                "mountpoint -q /mnt/disks/c1.k8s.local--main--a",
                "mount -t ext4 -o noatime /dev/disk/by-label/kops-etcd-main /mnt/disks/c1.k8s.local--main--a",
                "dumpe2fs -h /dev/disk/by-label/kops-etcd-main",
                "resize2fs /dev/disk/by-label/kops-etcd-main",
            ]
        );
        assert_eq!(
            steps.last().unwrap(),
            "grew the file system on /dev/disk/by-label/kops-etcd-main from 20 to 30 GiB"
        );

        // Grown already (the next boot): read, not resized.
        let done = Recorder {
            fs: (None, 30),
            ..Default::default()
        };
        prepare(root, "c1.k8s.local", std::slice::from_ref(&grown), &done).unwrap();
        assert_eq!(
            done.ran.borrow().last().unwrap(),
            "dumpe2fs -h /dev/disk/by-label/kops-etcd-main"
        );

        // A file system of another label is never resized.
        let foreign = Recorder {
            fs: (Some("data"), 20),
            ..Default::default()
        };
        let e = prepare(root, "c1.k8s.local", &[grown], &foreign)
            .unwrap_err()
            .to_string();
        assert!(e.contains("labelled `data`, not kops-etcd-main"), "{e}");
        assert!(!foreign
            .ran
            .borrow()
            .iter()
            .any(|c| c.starts_with("resize2fs")));
    }

    #[test]
    fn only_the_first_member_marks_and_used_or_missing_disks_are_refused() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path();
        block(root, "sdb", "2:0:1:0", 20);
        // Member b formats its fresh disk but does not create the cluster.
        let runner = Recorder {
            blkid: (2, ""),
            ..Default::default()
        };
        prepare(root, "c1.k8s.local", &[disk("main", "b", 1, 20)], &runner).unwrap();
        let data = root.join("mnt/disks/c1.k8s.local--main--b/mnt");
        assert!(data.is_dir() && !data.join(NEW_CLUSTER_MARKER).exists());

        // A disk holding a file system without our label is left alone.
        let used = Recorder {
            blkid: (0, "xfs"),
            ..Default::default()
        };
        let e = prepare(root, "c1.k8s.local", &[disk("main", "a", 1, 20)], &used)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("/dev/sdb")
                && e.contains("a xfs file system")
                && e.contains("kops-etcd-main"),
            "{e}"
        );
        assert!(!used.ran.borrow().iter().any(|c| c.starts_with("mkfs")));

        // No disk at that target.
        let e = prepare(
            root,
            "c1.k8s.local",
            &[disk("main", "a", 5, 20)],
            &Recorder::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("no disk at SCSI target 5") && e.contains("rolling-update"),
            "{e}"
        );
    }

    #[test]
    fn names_units_and_static_config() {
        let d = disk("main", "a", 1, 20);
        assert_eq!(volume_tag("c1.k8s.local", "main"), "c1.k8s.local--main--");
        assert_eq!(
            mount_point("c1.k8s.local", &d),
            "/mnt/disks/c1.k8s.local--main--a"
        );
        assert_eq!(
            mount_unit("/mnt/disks/c1.k8s.local--main--a"),
            "mnt-disks-c1.k8s.local\\x2d\\x2dmain\\x2d\\x2da.mount"
        );
        assert_eq!(label("events"), "kops-etcd-events");
        assert_eq!(label("something-long"), "kops-etcd-someth");
        let units = mount_units("c1.k8s.local", std::slice::from_ref(&d));
        assert_eq!(
            units[0].path,
            "/etc/systemd/system/mnt-disks-c1.k8s.local\\x2d\\x2dmain\\x2d\\x2da.mount"
        );
        let config: serde_json::Value =
            serde_json::from_str(&static_config("c1.k8s.local", &d, Some("10.0.0.5")).unwrap())
                .unwrap();
        // Every member at its static address (this VM's too).
        assert_eq!(
            config,
            serde_json::json!({"etcdVersion": "3.6.12", "nodes": [
                {"id": "c1.k8s.local--main--a", "ip": ["10.0.0.11"]},
                {"id": "c1.k8s.local--main--b", "ip": ["10.0.0.12"]},
                {"id": "c1.k8s.local--main--c", "ip": ["10.0.0.13"]},
            ]})
        );
        // One member on DHCP: its own address.
        let mut single = d.clone();
        single.volume.members = vec!["a".into()];
        single.volume.addresses.clear();
        let config: serde_json::Value = serde_json::from_str(
            &static_config("c1.k8s.local", &single, Some("10.0.0.5")).unwrap(),
        )
        .unwrap();
        assert_eq!(config["nodes"][0]["ip"][0], "10.0.0.5");
        // Three members without addresses cannot find each other.
        let mut dhcp = d.clone();
        dhcp.volume.addresses.clear();
        let e = static_config("c1.k8s.local", &dhcp, Some("10.0.0.5")).unwrap_err();
        assert!(
            e.contains("has 3 members but guestinfo.kops.etcd gives 0 addresses")
                && e.contains("vSphereControlPlaneAddresses"),
            "{e}"
        );
    }
}
