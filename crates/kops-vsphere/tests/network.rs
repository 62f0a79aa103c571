//! The network of cloned VMs on govmomi's vCenter simulator: a group's VMs
//! cloned onto a distributed port group (DC0_DVPG1 of the switch DVS0; the
//! template's NIC is on DC0_DVPG0) get a port of it, read back from each
//! VM's NIC (port group key, switch UUID); a second update changes
//! nothing; moving the cluster to the standard network marks every VM
//! stale and a replacement lands on it. The switch's uplink port group,
//! the switch itself and a folder are refused before anything is made.

use std::collections::BTreeMap;

use kops_testkit::vcsim::{self, Vcsim};
use kops_vsphere::client::MoRef;
use kops_vsphere::cluster::{self, GroupSpec, Placement};
use kops_vsphere::vcenter::Vcenter;
use kops_vsphere::VsphereError;

mod common;

use common::{login, no_op_update};

const CLUSTER: &str = "net.k8s.local";
const DISTRIBUTED: &str = "DC0_DVPG1";

fn placement(folder: &str, network: &str) -> Placement {
    Placement {
        datacenter: vcsim::DATACENTER.into(),
        folder: folder.into(),
        resource_pool: vcsim::CLUSTER.into(),
        datastore: vcsim::DATASTORE.into(),
        network: Some(network.into()),
    }
}

fn group(name: &str, count: usize) -> GroupSpec {
    GroupSpec {
        name: name.into(),
        role: "Node".into(),
        template: vcsim::TEMPLATE.into(),
        count,
        cpus: 1,
        memory_mb: 1024,
        user_data: "#!/bin/bash\n".into(),
        root_disk_gib: None,
        etcd: Vec::new(),
        network: None,
    }
}

/// What a NIC is backed by, as read from a VM.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Backing {
    /// A standard port group by name.
    Standard(String),
    /// A distributed port: (port group key, switch UUID).
    Distributed(String, String),
}

fn backing_of(devices: &kops_vsphere::xml::Element) -> Backing {
    let nic = devices
        .children
        .iter()
        .find(|d| d.child("macAddress").is_some())
        .expect("a network adapter");
    let backing = nic.child("backing").expect("a NIC backing");
    let text = |path: &[&str]| backing.text_at(path).unwrap_or_default().to_string();
    match backing.xsi_type() {
        Some("VirtualEthernetCardNetworkBackingInfo") => Backing::Standard(text(&["deviceName"])),
        Some("VirtualEthernetCardDistributedVirtualPortBackingInfo") => Backing::Distributed(
            text(&["port", "portgroupKey"]),
            text(&["port", "switchUuid"]),
        ),
        other => panic!("unexpected NIC backing {other:?}"),
    }
}

/// The first NIC's backing of each VM in `folder`, by VM name.
async fn nics(vc: &Vcenter, folder: &str) -> BTreeMap<String, Backing> {
    let folder = vc
        .find_path(&format!("DC0/vm/{folder}"))
        .await
        .unwrap()
        .unwrap();
    vc.children(
        &folder,
        "VirtualMachine",
        &["name", "config.hardware.device"],
    )
    .await
    .unwrap()
    .into_iter()
    .map(|(_, p)| {
        (
            p["name"].text.clone(),
            backing_of(&p["config.hardware.device"]),
        )
    })
    .collect()
}

/// A distributed port group's key and its switch's UUID, read from the
/// simulator (the simulator built from an older vcsim-kops has no
/// DC0_DVPG1).
async fn port_group(vc: &Vcenter, name: &str) -> (String, String) {
    let found = vc
        .find_path(&format!("DC0/network/{name}"))
        .await
        .unwrap()
        .unwrap_or_else(|| {
            panic!("no port group {name} in vcsim: .vcsim/vcsim-kops is older than crates/kops-testkit/vcsim/main.go, run scripts/setup-vcsim")
        });
    let p = vc
        .properties(&found, &["key", "config.distributedVirtualSwitch"])
        .await
        .unwrap();
    let switch = MoRef::from_element(&p["config.distributedVirtualSwitch"]).unwrap();
    let uuid = vc.properties(&switch, &["uuid"]).await.unwrap()["uuid"]
        .text
        .clone();
    (p["key"].text.clone(), uuid)
}

/// The calls `resolve` makes for a placement (a session of its own).
async fn resolve_calls(sim: &Vcsim, placement: &Placement, groups: &[GroupSpec]) -> u64 {
    let vc = login(sim).await;
    let before: u64 = vc.client.calls().values().sum();
    cluster::resolve(&vc, placement, groups).await.unwrap();
    let after: u64 = vc.client.calls().values().sum();
    vc.logout().await;
    after - before
}

#[tokio::test]
async fn clones_attach_to_a_distributed_port_group() {
    if !vcsim::vcsim_available() {
        return;
    }
    let sim = Vcsim::start().unwrap();
    let vc = login(&sim).await;
    let (key, uuid) = port_group(&vc, DISTRIBUTED).await;
    // The template sits on the other port group, so the clones' backing
    // is what the clone spec set.
    let template = vc
        .find_path(&format!("DC0/vm/{}", vcsim::TEMPLATE))
        .await
        .unwrap()
        .unwrap();
    let template_nic = backing_of(
        &vc.properties(&template, &["config.hardware.device"])
            .await
            .unwrap()["config.hardware.device"],
    );
    assert_eq!(template_nic, {
        let (k, u) = port_group(&vc, "DC0_DVPG0").await;
        Backing::Distributed(k, u)
    });
    assert_ne!(
        template_nic,
        Backing::Distributed(key.clone(), uuid.clone())
    );

    let groups = [group("control-plane", 1), group("nodes", 2)];
    let distributed = placement("net", DISTRIBUTED);
    let resolved = cluster::resolve(&vc, &distributed, &groups).await.unwrap();
    let changes = cluster::update(&vc, CLUSTER, &distributed, resolved, &groups, true)
        .await
        .unwrap();
    assert_eq!(changes.created.len(), 3, "{changes:?}");
    let calls = vc.client.calls();
    eprintln!(
        "first update (DC0_DVPG1, 3 VMs): {}",
        kops_vsphere::calls_summary(&calls)
    );
    vc.logout().await;
    let found = nics(&login(&sim).await, "net").await;
    assert_eq!(
        found.keys().cloned().collect::<Vec<_>>(),
        [
            "control-plane-1.net.k8s.local",
            "nodes-1.net.k8s.local",
            "nodes-2.net.k8s.local"
        ]
    );
    for (vm, backing) in &found {
        assert_eq!(
            backing,
            &Backing::Distributed(key.clone(), uuid.clone()),
            "{vm}"
        );
    }

    // A second update (its own session) changes nothing.
    let (vc, calls) = no_op_update(&sim, CLUSTER, &distributed, &groups).await;
    eprintln!(
        "second update (DC0_DVPG1): {}",
        kops_vsphere::calls_summary(&calls)
    );

    // The port group and its switch cost two reads per run, not per clone.
    let standard = placement("net", vcsim::NETWORK);
    assert_eq!(
        resolve_calls(&sim, &distributed, &groups).await,
        resolve_calls(&sim, &standard, &groups).await + 2
    );

    // Moving the cluster to the standard network: every VM is stale (its
    // hash names the network), and a replacement lands on it.
    let resolved = cluster::resolve(&vc, &standard, &groups).await.unwrap();
    let changes = cluster::update(&vc, CLUSTER, &standard, resolved, &groups, false)
        .await
        .unwrap();
    assert_eq!(changes.stale.len(), 3, "{changes:?}");
    let folder = vc.find_path("DC0/vm/net").await.unwrap().unwrap();
    let node = cluster::list(&vc, &folder, CLUSTER)
        .await
        .unwrap()
        .into_iter()
        .find(|vm| vm.name == "nodes-1.net.k8s.local")
        .unwrap();
    let replaced = cluster::replace(&vc, CLUSTER, &standard, &groups, &node.uuid)
        .await
        .unwrap();
    assert_eq!(
        replaced,
        Some((
            "nodes-1.net.k8s.local".to_string(),
            "nodes-3.net.k8s.local".to_string()
        ))
    );
    let found = nics(&vc, "net").await;
    assert_eq!(
        found["nodes-3.net.k8s.local"],
        Backing::Standard(vcsim::NETWORK.into())
    );
    assert_eq!(
        found["nodes-2.net.k8s.local"],
        Backing::Distributed(key.clone(), uuid.clone())
    );
    let resolved = cluster::resolve(&vc, &standard, &groups).await.unwrap();
    let changes = cluster::update(&vc, CLUSTER, &standard, resolved, &groups, false)
        .await
        .unwrap();
    assert_eq!(
        changes.stale,
        ["control-plane-1.net.k8s.local", "nodes-2.net.k8s.local"],
        "{changes:?}"
    );

    cluster::delete(
        &vc,
        CLUSTER,
        vcsim::DATACENTER,
        "net",
        vcsim::DATASTORE,
        true,
    )
    .await
    .unwrap();
    vc.logout().await;
}

#[tokio::test]
async fn an_uplink_port_group_a_switch_and_a_folder_are_refused() {
    if !vcsim::vcsim_available() {
        return;
    }
    let sim = Vcsim::start().unwrap();
    let vc = login(&sim).await;
    port_group(&vc, DISTRIBUTED).await;
    let switch = vc.find_path("DC0/network/DVS0").await.unwrap().unwrap();
    let uplinks = vc
        .properties(&switch, &["config.uplinkPortgroup"])
        .await
        .unwrap();
    let uplink = MoRef::from_element(&uplinks["config.uplinkPortgroup"].children[0]).unwrap();
    let uplink_name = vc.properties(&uplink, &["name"]).await.unwrap()["name"]
        .text
        .clone();
    let groups = [group("nodes", 1)];
    for (network, says) in [
        (
            uplink_name.as_str(),
            "is the uplink port group of distributed switch `DVS0`",
        ),
        ("DVS0", "is a distributed switch, not a port group"),
        ("/DC0/network", "is a Folder, not a port group"),
    ] {
        let err = match cluster::resolve(&vc, &placement("refused", network), &groups).await {
            Err(e) => e,
            Ok(_) => panic!("{network} was accepted"),
        };
        assert!(matches!(err, VsphereError::Invalid { .. }), "{err:?}");
        let text = err.to_string();
        assert!(
            text.contains(&format!("network `{network}` {says}"))
                && text.contains("spec.cloudConfig.vSphereNetwork (--vsphere-network)"),
            "{text}"
        );
        assert_eq!(text.lines().count(), 2, "{text}");
    }
    // resolve makes nothing: no folder.
    assert!(vc.find_path("DC0/vm/refused").await.unwrap().is_none());
    vc.logout().await;
}
