//! A vSphere cluster on a distributed port group, through the binary on
//! govmomi's vCenter simulator: `--vsphere-network DC0_DVPG1` (a port
//! group of the switch DVS0) puts every VM's NIC on a port of it (read back:
//! port group key and switch UUID), a second update changes nothing, and
//! the switch's uplink port group is refused in one line and a hint with
//! nothing made. Each step's SOAP calls are printed (docs/vsphere.md's numbers).

use kops_testkit::vcsim::{self, Vcsim};
use kops_vsphere::client::MoRef;

use crate::common::file_url;
use crate::vsphere::{
    calls, create_args, first_nics, inventory, kops_vc, login, ok, runtime, update_yes,
};

const DISTRIBUTED: &str = "DC0_DVPG1";

/// `create cluster` arguments with `--vsphere-network network`.
fn on_network<'a>(sim: &'a Vcsim, name: &'a str, state: &'a str, network: &'a str) -> Vec<&'a str> {
    let mut args = create_args(sim, name, state, "1");
    let at = args.iter().position(|a| *a == "--vsphere-network").unwrap();
    args[at + 1] = network;
    args
}

/// Each VM's first NIC in the clusters' folder: (VM, backing type, port
/// group key, switch UUID).
fn nic_ports(sim: &Vcsim) -> Vec<(String, String, String, String)> {
    first_nics(sim)
        .into_iter()
        .map(|(vm, nic)| {
            let backing = nic.child("backing").expect("a backing");
            let text = |path: &[&str]| backing.text_at(path).unwrap_or_default().to_string();
            (
                vm,
                backing.xsi_type().unwrap_or_default().to_string(),
                text(&["port", "portgroupKey"]),
                text(&["port", "switchUuid"]),
            )
        })
        .collect()
}

/// The key of port group `name` and its switch's UUID and uplink port
/// group's name, as the simulator holds them.
fn port_group(sim: &Vcsim, name: &str) -> (String, String, String) {
    runtime().block_on(async {
        let vc = login(sim).await;
        let found = vc
            .find_path(&format!("DC0/network/{name}"))
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("no port group {name} in vcsim: .vcsim/vcsim-kops is older than crates/kops-testkit/vcsim/main.go, run scripts/setup-vcsim"));
        let p = vc
            .properties(&found, &["key", "config.distributedVirtualSwitch"])
            .await
            .unwrap();
        let switch = MoRef::from_element(&p["config.distributedVirtualSwitch"]).unwrap();
        let s = vc
            .properties(&switch, &["uuid", "config.uplinkPortgroup"])
            .await
            .unwrap();
        let uplink = MoRef::from_element(&s["config.uplinkPortgroup"].children[0]).unwrap();
        let uplink_name = vc.properties(&uplink, &["name"]).await.unwrap()["name"]
            .text
            .clone();
        vc.logout().await;
        (p["key"].text.clone(), s["uuid"].text.clone(), uplink_name)
    })
}

#[test]
fn vsphere_cluster_on_a_distributed_port_group() {
    if !vcsim::vcsim_available() {
        return;
    }
    let sim = Vcsim::start().unwrap();
    let before = inventory(&sim);
    let (key, uuid, uplink) = port_group(&sim, DISTRIBUTED);
    let tmp = tempfile::tempdir().unwrap();
    let state = file_url(&tmp.path().join("state"));
    let mut steps: Vec<(&str, String)> = Vec::new();

    // One control plane and two node groups, as docs/vsphere.md's first row.
    ok(&sim, &on_network(&sim, "dv.k8s.local", &state, DISTRIBUTED));
    let r = update_yes(&sim, "dv.k8s.local", &state);
    steps.push(("update --yes (1 control plane, 2 node groups)", calls(&r)));
    let nics = nic_ports(&sim);
    assert_eq!(
        nics.iter().map(|n| n.0.as_str()).collect::<Vec<_>>(),
        [
            "control-plane-a-1.dv.k8s.local",
            "nodes-a-1.dv.k8s.local",
            "nodes-b-1.dv.k8s.local"
        ]
    );
    for (vm, kind, got_key, got_uuid) in &nics {
        assert_eq!(
            (kind.as_str(), got_key, got_uuid),
            (
                "VirtualEthernetCardDistributedVirtualPortBackingInfo",
                &key,
                &uuid
            ),
            "{vm}"
        );
    }
    let r = update_yes(&sim, "dv.k8s.local", &state);
    assert!(calls(&r).contains(", 0 changing"), "{}", r.stderr);
    assert!(
        r.stderr.contains("No changes need to be applied"),
        "{}",
        r.stderr
    );
    steps.push(("update --yes again (no change)", calls(&r)));
    let r = ok(
        &sim,
        &["update", "cluster", "dv.k8s.local", "--state", &state],
    );
    steps.push(("update (dry run, no change)", calls(&r)));
    assert_eq!(nic_ports(&sim), nics);

    // The switch's uplink port group: one line and a hint naming the
    // field, nothing made.
    let cluster_vms = inventory(&sim);
    ok(&sim, &on_network(&sim, "up.k8s.local", &state, &uplink));
    let r = kops_vc(
        &sim,
        &[
            "update",
            "cluster",
            "up.k8s.local",
            "--yes",
            "--state",
            &state,
        ],
    );
    assert_ne!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "network `{uplink}` is the uplink port group of distributed switch `DVS0`"
        )) && r
            .stderr
            .contains("spec.cloudConfig.vSphereNetwork (--vsphere-network)"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.lines().count() <= 2, "{}", r.stderr);
    assert!(!r.stderr.contains("{ "), "a Debug structure: {}", r.stderr);
    assert_eq!(
        inventory(&sim),
        cluster_vms,
        "the refused update made something"
    );

    let r = ok(
        &sim,
        &[
            "delete",
            "cluster",
            "dv.k8s.local",
            "--yes",
            "--state",
            &state,
        ],
    );
    steps.push(("delete --yes (3 VMs and the folder)", calls(&r)));
    assert_eq!(inventory(&sim), before, "delete left the simulator changed");

    for (step, calls) in steps {
        println!("{step}: {calls}");
    }
}
