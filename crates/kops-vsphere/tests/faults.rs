//! The cluster's VMs made, kept and deleted through a vCenter that fails
//! a fifth of the calls (HTTP 503 or a dropped connection, before vCenter
//! sees them): kops-testkit's fault proxy in front of govmomi's vcsim.
//! Each step ends as it does without faults; the calls sent again are
//! counted.

use kops_testkit::fault_proxy::FaultProxy;
use kops_testkit::vcsim::{self, Vcsim};
use kops_vsphere::cluster::{self, GroupSpec, Placement, StaticNetwork};
use kops_vsphere::disks::EtcdVolume;
use kops_vsphere::vcenter::{extra_config, Vcenter};
use kops_vsphere::Credentials;

const CLUSTER: &str = "faults.k8s.local";

fn groups() -> Vec<GroupSpec> {
    let group = |name: &str, count: usize| GroupSpec {
        name: name.into(),
        role: "Node".into(),
        template: vcsim::TEMPLATE.into(),
        count,
        cpus: 1,
        memory_mb: 1024,
        user_data: "#!/bin/sh\n".into(),
        root_disk_gib: None,
        etcd: Vec::new(),
        network: None,
    };
    let mut control_plane = group("control-plane", 1);
    control_plane.role = "Master".into();
    control_plane.etcd = vec![EtcdVolume {
        etcd: "main".into(),
        member: "a".into(),
        members: vec!["a".into()],
        addresses: vec!["10.0.0.11".into()],
        size_gib: 1,
        version: "3.6.12".into(),
    }];
    control_plane.network = Some(StaticNetwork {
        address: "10.0.0.11/24".into(),
        gateway: "10.0.0.1".into(),
        nameservers: vec!["10.0.0.2".into()],
    });
    vec![control_plane, group("nodes", 2)]
}

#[tokio::test]
async fn a_flaky_vcenter_gets_the_same_cluster() {
    if !vcsim::vcsim_available() {
        return;
    }
    let sim = Vcsim::start().unwrap();
    let proxy = FaultProxy::start(sim.url(), 0.2, 7).unwrap();
    let credentials = Credentials {
        username: vcsim::USER.into(),
        password: vcsim::PASSWORD.into(),
    };
    let placement = Placement {
        datacenter: vcsim::DATACENTER.into(),
        folder: "faults".into(),
        resource_pool: vcsim::CLUSTER.into(),
        datastore: vcsim::DATASTORE.into(),
        network: Some(vcsim::NETWORK.into()),
    };
    let groups = groups();
    let vc = Vcenter::login(proxy.url(), &credentials).await.unwrap();

    // update --yes, then again: no change.
    for round in 0..2 {
        let resolved = cluster::resolve(&vc, &placement, &groups).await.unwrap();
        let changes = cluster::update(&vc, CLUSTER, &placement, resolved, &groups, true)
            .await
            .unwrap();
        assert_eq!(
            changes.created.len(),
            if round == 0 { 3 } else { 0 },
            "{changes:?}"
        );
        assert!(changes.destroyed.is_empty(), "{changes:?}");
    }
    let folder = vc.find_path("DC0/vm/faults").await.unwrap().unwrap();
    let vms = cluster::list(&vc, &folder, CLUSTER).await.unwrap();
    assert_eq!(vms.len(), 3);
    assert!(vms.iter().all(|vm| vm.powered_on), "{vms:?}");
    let found = vc
        .children(&folder, "VirtualMachine", &["name", "config.extraConfig"])
        .await
        .unwrap();
    let (_, control_plane) = found
        .iter()
        .find(|(_, p)| p["name"].text.starts_with("control-plane-1."))
        .expect("the control-plane VM");
    let extra = extra_config(control_plane.get("config.extraConfig"));
    use base64::Engine;
    let metadata = base64::engine::general_purpose::STANDARD
        .decode(&extra["guestinfo.metadata"])
        .unwrap();
    assert!(
        String::from_utf8_lossy(&metadata).contains("10.0.0.11/24"),
        "{}",
        String::from_utf8_lossy(&metadata)
    );

    // delete: nothing of the cluster left.
    let deleted = cluster::delete(
        &vc,
        CLUSTER,
        vcsim::DATACENTER,
        "faults",
        vcsim::DATASTORE,
        true,
    )
    .await
    .unwrap();
    assert_eq!(deleted.vms.len(), 3);
    assert!(vc.find_path("DC0/vm/faults").await.unwrap().is_none());

    let (forwarded, failed) = proxy.counts();
    let sent: u64 = vc.client.calls().values().sum();
    assert!(failed > 0, "no fault was injected");
    assert_eq!(sent, forwarded + failed, "each failed call was sent again");
    println!("{sent} SOAP calls sent, {failed} of them failed by the proxy and sent again");
    vc.logout().await;
}
