//! The disks of cloned VMs on govmomi's vCenter simulator: a group's
//! `rootVolumeSize` grows the boot disk in the clone spec, a control-plane
//! group gets one thin First Class Disk per etcd cluster (described in the
//! VM's `guestinfo.kops.etcd`), read back from the VM's hardware; a second
//! update changes nothing. A rolled control-plane VM's replacement gets
//! the same disks, by id, grown when its member's `volumeSize` grew (a
//! smaller one is refused with nothing made); VMs deleted in vCenter
//! leave them; `delete` removes them. (vcsim's template disk is smaller
//! than 1 GiB, so the refusal of a shrinking boot disk is a unit test of
//! `disks`.)

use std::collections::BTreeMap;

use kops_testkit::vcsim::{self, Vcsim};
use kops_vsphere::cluster::{self, GroupSpec, Placement};
use kops_vsphere::disks::{EtcdDisk, EtcdVolume, TemplateHardware, ETCD_KEY};
use kops_vsphere::vcenter::{extra_config, Vcenter};

mod common;

use common::{login, no_op_update};

const CLUSTER: &str = "disks.k8s.local";

fn placement() -> Placement {
    Placement {
        datacenter: vcsim::DATACENTER.into(),
        folder: "disks".into(),
        resource_pool: vcsim::CLUSTER.into(),
        datastore: vcsim::DATASTORE.into(),
        network: Some(vcsim::NETWORK.into()),
    }
}

fn group(name: &str, root: Option<u64>, etcd: Vec<EtcdVolume>) -> GroupSpec {
    GroupSpec {
        name: name.into(),
        role: "Master".into(),
        template: vcsim::TEMPLATE.into(),
        count: 1,
        cpus: 2,
        memory_mb: 4096,
        user_data: "#!/bin/bash\n".into(),
        root_disk_gib: root,
        etcd,
        network: None,
    }
}

fn volume(etcd: &str, gib: u64) -> EtcdVolume {
    EtcdVolume {
        etcd: etcd.into(),
        member: "a".into(),
        members: vec!["a".into()],
        addresses: Vec::new(),
        size_gib: gib,
        version: "3.6.12".into(),
    }
}

/// Each VM of the folder: its disks as (controller key, unit, GiB, file)
/// and its extraConfig.
type Disks = Vec<(String, u32, u64, String)>;
async fn vms(vc: &Vcenter) -> BTreeMap<String, (Disks, BTreeMap<String, String>)> {
    let folder = vc.find_path("DC0/vm/disks").await.unwrap().unwrap();
    let mut out = BTreeMap::new();
    for (_, p) in vc
        .children(
            &folder,
            "VirtualMachine",
            &["name", "config.hardware.device", "config.extraConfig"],
        )
        .await
        .unwrap()
    {
        let mut disks: Disks = p["config.hardware.device"]
            .children
            .iter()
            .filter(|d| d.xsi_type() == Some("VirtualDisk"))
            .map(|d| {
                (
                    d.text_at(&["controllerKey"]).unwrap().to_string(),
                    d.text_at(&["unitNumber"]).unwrap().parse().unwrap(),
                    d.text_at(&["capacityInKB"])
                        .unwrap()
                        .parse::<u64>()
                        .unwrap()
                        / (1024 * 1024),
                    d.text_at(&["backing", "fileName"])
                        .unwrap_or("")
                        .to_string(),
                )
            })
            .collect();
        disks.sort_by_key(|d| d.1);
        out.insert(
            p["name"].text.clone(),
            (disks, extra_config(p.get("config.extraConfig"))),
        );
    }
    out
}

/// `delete cluster`'s vSphere part for the test's cluster; the VMs named.
async fn delete_all(vc: &Vcenter) -> Vec<String> {
    cluster::delete(
        vc,
        CLUSTER,
        vcsim::DATACENTER,
        "disks",
        vcsim::DATASTORE,
        true,
    )
    .await
    .unwrap()
    .vms
}

/// The calls made since `before`.
fn since(now: &BTreeMap<String, u64>, before: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    now.iter()
        .map(|(m, n)| (m.clone(), n - before.get(m).copied().unwrap_or(0)))
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// The BIOS UUID of the cluster's VM `name`.
async fn uuid_of(vc: &Vcenter, name: &str) -> String {
    let folder = vc.find_path("DC0/vm/disks").await.unwrap().unwrap();
    cluster::list(vc, &folder, CLUSTER)
        .await
        .unwrap()
        .into_iter()
        .find(|vm| vm.name == name)
        .expect("the VM")
        .uuid
}

#[tokio::test]
async fn clones_get_their_disks_and_a_second_update_is_a_no_op() {
    if !vcsim::vcsim_available() {
        return;
    }
    let sim = Vcsim::start().unwrap();
    let vc = login(&sim).await;
    let template = vc
        .find_path(&format!("DC0/vm/{}", vcsim::TEMPLATE))
        .await
        .unwrap()
        .unwrap();
    let hardware = TemplateHardware::from_devices(
        vc.properties(&template, &["config.hardware.device"])
            .await
            .unwrap()
            .get("config.hardware.device"),
    );
    let template_gib = hardware.boot_disk_gib().unwrap();
    let root = template_gib + 30;
    let groups = [
        group(
            "control-plane-a",
            Some(root),
            vec![volume("main", 20), volume("events", 25)],
        ),
        group("nodes", None, Vec::new()),
    ];
    let placement = placement();
    let resolved = cluster::resolve(&vc, &placement, &groups).await.unwrap();
    let changes = cluster::update(&vc, CLUSTER, &placement, resolved, &groups, true)
        .await
        .unwrap();
    assert_eq!(changes.created.len(), 2, "{changes:?}");
    assert_eq!(
        changes.etcd_disks_made,
        [
            "kops:disks.k8s.local:etcd-main-a (20 GiB)",
            "kops:disks.k8s.local:etcd-events-a (25 GiB)"
        ]
    );

    let found = vms(&vc).await;
    let (cp_disks, cp_extra) = &found["control-plane-a-1.disks.k8s.local"];
    let boot_controller = cp_disks[0].0.clone();
    assert_eq!(cp_disks[0].2, root, "boot disk grown: {cp_disks:?}");
    // The etcd disks sit on the boot disk's controller at the next free
    // units, with their sizes, and the guest is told where.
    let etcd: Vec<(u32, u64)> = cp_disks[1..]
        .iter()
        .map(|(c, unit, gib, _)| {
            assert_eq!(c, &boot_controller);
            (*unit, *gib)
        })
        .collect();
    let described = EtcdDisk::decode_all(&cp_extra[ETCD_KEY]).unwrap();
    assert_eq!(
        described
            .iter()
            .map(|d| (d.unit, d.volume.size_gib))
            .collect::<Vec<_>>(),
        etcd,
        "{described:?}"
    );
    assert_eq!(etcd.iter().map(|e| e.1).collect::<Vec<_>>(), [20, 25]);
    assert_eq!(described[0].volume.etcd, "main");
    assert_eq!(described[1].volume.etcd, "events");
    assert!(!etcd.iter().any(|e| e.0 == 7), "unit 7 is the controller's");
    assert_eq!(cp_extra["disk.EnableUUID"], "TRUE");
    // A worker keeps the template's one disk and has no etcd description.
    let (node_disks, node_extra) = &found["nodes-1.disks.k8s.local"];
    assert_eq!(node_disks.len(), 1, "{node_disks:?}");
    assert_eq!(node_disks[0].2, template_gib);
    assert!(!node_extra.contains_key(ETCD_KEY));
    vc.logout().await;

    // A second update (a new session, so its calls are its own) lists the
    // VMs and changes nothing.
    let (vc, calls) = no_op_update(&sim, CLUSTER, &placement, &groups).await;
    eprintln!("second update: {calls:?}");

    // The etcd disks are First Class Disks named after their members,
    // kept across a replacement.
    let ids = |found: &BTreeMap<String, (Disks, BTreeMap<String, String>)>, vm: &str| {
        EtcdDisk::decode_all(&found[vm].1[ETCD_KEY])
            .unwrap()
            .into_iter()
            .map(|d| d.id.expect("a disk id"))
            .collect::<Vec<_>>()
    };
    let etcd_ids = ids(&found, "control-plane-a-1.disks.k8s.local");
    let datastore = vc
        .find_path(&format!("DC0/datastore/{}", vcsim::DATASTORE))
        .await
        .unwrap()
        .unwrap();
    let mut names = Vec::new();
    for id in &etcd_ids {
        let disk = vc.disk(&datastore, id).await.unwrap().expect("the disk");
        assert!(disk.file.starts_with("[LocalDS_0] fcd/"), "{disk:?}");
        names.push(disk.name);
    }
    assert_eq!(
        names,
        [
            "kops:disks.k8s.local:etcd-main-a",
            "kops:disks.k8s.local:etcd-events-a"
        ]
    );
    // A larger volumeSize (with a changed user data): `update` sees the
    // VM as outdated and makes nothing; the roll attaches the same files
    // and grows the smaller one before the replacement's first boot.
    let mut grown = groups.clone();
    grown[0].user_data.push_str("# changed\n");
    grown[0].etcd[0].size_gib = 30;
    let resolved = cluster::resolve(&vc, &placement, &grown).await.unwrap();
    let changes = cluster::update(&vc, CLUSTER, &placement, resolved, &grown, true)
        .await
        .unwrap();
    assert!(changes.is_empty(), "{changes:?}");
    assert_eq!(changes.stale, ["control-plane-a-1.disks.k8s.local"]);
    let uuid = uuid_of(&vc, "control-plane-a-1.disks.k8s.local").await;
    let before = vc.client.calls();
    let replaced = cluster::replace(&vc, CLUSTER, &placement, &grown, &uuid)
        .await
        .unwrap();
    let roll = since(&vc.client.calls(), &before);
    eprintln!("roll growing one etcd disk: {roll:?}");
    assert_eq!(
        replaced,
        Some((
            "control-plane-a-1.disks.k8s.local".to_string(),
            "control-plane-a-2.disks.k8s.local".to_string()
        ))
    );
    // The kept disks and their sizes come from the listing (no disk
    // listed or made); the growth is one ExtendDisk_Task before the
    // disks are attached to the clone.
    assert!(!roll.contains_key("ListVStorageObject"), "{roll:?}");
    assert!(!roll.contains_key("CreateDisk_Task"), "{roll:?}");
    assert_eq!(roll.get("ReconfigVM_Task"), Some(&1), "detach: {roll:?}");
    assert_eq!(roll.get("ExtendDisk_Task"), Some(&1), "{roll:?}");
    assert_eq!(roll.get("AttachDisk_Task"), Some(&2), "{roll:?}");
    let found = vms(&vc).await;
    assert!(!found.contains_key("control-plane-a-1.disks.k8s.local"));
    let (disks, extra) = &found["control-plane-a-2.disks.k8s.local"];
    assert_eq!(ids(&found, "control-plane-a-2.disks.k8s.local"), etcd_ids);
    assert_eq!(
        disks[1..].iter().map(|d| d.2).collect::<Vec<_>>(),
        [30, 25],
        "{disks:?}"
    );
    let described = EtcdDisk::decode_all(&extra[ETCD_KEY]).unwrap();
    assert_eq!(described[0].volume.size_gib, 30);
    vc.logout().await;

    // A second update changes nothing.
    let (vc, _) = no_op_update(&sim, CLUSTER, &placement, &grown).await;
    vc.logout().await;

    // A smaller volumeSize is refused by update (dry run or not) and by
    // the roll, before anything is made: the simulator is untouched.
    let vc = login(&sim).await;
    let as_it_was = vms(&vc).await;
    let mut shrunk = grown.clone();
    shrunk[0].etcd[0].size_gib = 20;
    let refusal = "spec.etcdClusters[main].etcdMembers[a].volumeSize is 20 GiB, but the kept disk \
                   `kops:disks.k8s.local:etcd-main-a` holds 30 GiB: etcd disks do not shrink\n\
                   hint: set spec.etcdClusters[main].etcdMembers[a].volumeSize to 30 or more";
    for apply in [false, true] {
        let resolved = cluster::resolve(&vc, &placement, &shrunk).await.unwrap();
        let e = cluster::update(&vc, CLUSTER, &placement, resolved, &shrunk, apply)
            .await
            .unwrap_err();
        assert_eq!(e.to_string(), refusal);
    }
    let uuid = uuid_of(&vc, "control-plane-a-2.disks.k8s.local").await;
    let e = cluster::replace(&vc, CLUSTER, &placement, &shrunk, &uuid)
        .await
        .unwrap_err();
    assert_eq!(e.to_string(), refusal);
    let calls = vc.client.calls();
    assert_eq!(kops_vsphere::changing_calls(&calls), 0, "{calls:?}");
    assert_eq!(vms(&vc).await, as_it_was);

    // delete's dry run lists the VMs and the etcd disks; delete removes
    // them.
    let listed = cluster::delete(
        &vc,
        CLUSTER,
        vcsim::DATACENTER,
        "disks",
        vcsim::DATASTORE,
        false,
    )
    .await
    .unwrap();
    assert_eq!(listed.vms.len(), 2, "{listed:?}");
    assert_eq!(
        listed.disks,
        [
            "kops:disks.k8s.local:etcd-events-a",
            "kops:disks.k8s.local:etcd-main-a"
        ]
    );
    delete_all(&vc).await;
    let left = vc.disk_ids(&datastore).await.unwrap();
    assert!(etcd_ids.iter().all(|id| !left.contains(id)), "{left:?}");
    // Again, with nothing left: nothing to do, no error.
    let names = delete_all(&vc).await;
    assert!(names.is_empty());

    // VMs deleted in vCenter (their disks not detached first) leave the
    // etcd disks, kept after a VM's deletion: `delete cluster` still
    // removes them, though no VM names them.
    let again = [group(
        "control-plane-z",
        None,
        vec![volume("main", 20), volume("events", 25)],
    )];
    let resolved = cluster::resolve(&vc, &placement, &again).await.unwrap();
    cluster::update(&vc, CLUSTER, &placement, resolved, &again, true)
        .await
        .unwrap();
    let folder = vc.find_path("DC0/vm/disks").await.unwrap().unwrap();
    let mut kept = Vec::new();
    for vm in cluster::list(&vc, &folder, CLUSTER).await.unwrap() {
        kept.extend(vm.etcd_disks.iter().filter_map(|d| d.id.clone()));
        vc.power_off(&vm.reference).await.unwrap();
        vc.destroy(&vm.reference).await.unwrap();
    }
    assert_eq!(kept.len(), 2);
    for id in &kept {
        assert!(vc.disk(&datastore, id).await.unwrap().is_some(), "{id}");
    }
    delete_all(&vc).await;
    let left = vc.disk_ids(&datastore).await.unwrap();
    assert!(kept.iter().all(|id| !left.contains(id)), "{left:?}");

    vc.logout().await;
}
