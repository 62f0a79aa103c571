//! vSphere through the binary against govmomi's vCenter simulator (vcsim,
//! see kops-testkit): create, update, a no-op update that writes nothing,
//! scale up and down, a user-data change rolled with `rolling-update
//! --cloudonly`, delete leaving everything else as it was; bad input
//! leaving the simulator untouched; no credential anywhere kops-rs writes.
//! Each step's SOAP calls are printed (docs/vsphere.md's numbers).

use std::collections::BTreeMap;
use std::path::Path;

use kops_testkit::cloud_init;
use kops_testkit::vcsim::{self, Vcsim};
use kops_vsphere::client::MoRef;
use kops_vsphere::vcenter::Vcenter;

use crate::common::{command, file_url, tree, Run};

/// Runs `kops ARGS` with the simulator's credentials.
pub(crate) fn kops_vc(sim: &Vcsim, args: &[&str]) -> Run {
    let mut c = command(args);
    for (k, v) in sim.env() {
        c.env(k, v);
    }
    c.output().expect("run kops").into()
}

pub(crate) fn ok(sim: &Vcsim, args: &[&str]) -> Run {
    let r = kops_vc(sim, args);
    assert_eq!(
        r.code, 0,
        "kops {args:?}\nstdout: {}\nstderr: {}",
        r.stdout, r.stderr
    );
    r
}

/// `kops update cluster CLUSTER --yes`, which must succeed.
pub(crate) fn update_yes(sim: &Vcsim, cluster: &str, state: &str) -> Run {
    ok(
        sim,
        &["update", "cluster", cluster, "--yes", "--state", state],
    )
}

/// The SOAP call summary a vSphere command prints.
pub(crate) fn calls(r: &Run) -> String {
    r.stderr
        .lines()
        .find_map(|l| {
            let at = l.find(" vSphere SOAP calls")?;
            let start = l[..at].rfind(['(', ' ']).map_or(0, |i| i + 1);
            Some(l[start..].trim_end_matches(['.', ')']).to_string())
        })
        .unwrap_or_else(|| panic!("no call summary in:\n{}", r.stderr))
}

pub(crate) fn create_args<'a>(
    sim: &'a Vcsim,
    name: &'a str,
    state: &'a str,
    control_planes: &'a str,
) -> Vec<&'a str> {
    vec![
        "create",
        "cluster",
        name,
        "--cloud",
        "vsphere",
        "--vsphere-server",
        sim.url(),
        "--vsphere-datacenter",
        vcsim::DATACENTER,
        "--vsphere-resource-pool",
        vcsim::CLUSTER,
        "--vsphere-datastore",
        vcsim::DATASTORE,
        "--vsphere-network",
        vcsim::NETWORK,
        "--vsphere-folder",
        "kops-clusters",
        "--vsphere-control-plane-vip",
        "10.0.0.100",
        "--image",
        vcsim::TEMPLATE,
        "--zones",
        "a,b",
        "--node-count",
        "2",
        "--control-plane-count",
        control_planes,
        "--state",
        state,
    ]
}

/// What the simulator's datacenter holds: every VM and folder under its VM
/// folder (one level of folders down), by path, and every First Class Disk
/// of its datastore, by name.
pub(crate) fn inventory(sim: &Vcsim) -> Vec<String> {
    runtime().block_on(async {
        let vc = login(sim).await;
        let root = vc.find_path("DC0/vm").await.unwrap().unwrap();
        let mut out = Vec::new();
        for (folder, name) in named(&vc, &root, "Folder").await {
            out.push(format!("{name}/"));
            for (_, vm) in named(&vc, &folder, "VirtualMachine").await {
                out.push(format!("{name}/{vm}"));
            }
        }
        for (_, vm) in named(&vc, &root, "VirtualMachine").await {
            out.push(vm);
        }
        // First Class Disks (the etcd disks), by name.
        let datastore = vc
            .find_path(&format!("DC0/datastore/{}", vcsim::DATASTORE))
            .await
            .unwrap()
            .unwrap();
        for id in vc.disk_ids(&datastore).await.unwrap() {
            if let Some(disk) = vc.disk(&datastore, &id).await.unwrap() {
                out.push(format!("disk {}", disk.name));
            }
        }
        vc.logout().await;
        out.sort();
        out
    })
}

/// The extraConfig of every VM of the shared folder, by VM name.
fn guestinfo(sim: &Vcsim) -> BTreeMap<String, BTreeMap<String, String>> {
    runtime().block_on(async {
        let vc = login(sim).await;
        let mut out = BTreeMap::new();
        if let Some(folder) = vc.find_path("DC0/vm/kops-clusters").await.unwrap() {
            for (_, p) in vc
                .children(&folder, "VirtualMachine", &["name", "config.extraConfig"])
                .await
                .unwrap()
            {
                let name = p["name"].text.clone();
                out.insert(
                    name,
                    kops_vsphere::vcenter::extra_config(p.get("config.extraConfig")),
                );
            }
        }
        vc.logout().await;
        out
    })
}

/// Each VM's first network adapter in the shared folder, by VM name.
pub(crate) fn first_nics(sim: &Vcsim) -> BTreeMap<String, kops_vsphere::xml::Element> {
    runtime().block_on(async {
        let vc = login(sim).await;
        let folder = vc.find_path("DC0/vm/kops-clusters").await.unwrap().unwrap();
        let mut out = BTreeMap::new();
        for (_, p) in vc
            .children(
                &folder,
                "VirtualMachine",
                &["name", "config.hardware.device"],
            )
            .await
            .unwrap()
        {
            if let Some(nic) = p["config.hardware.device"]
                .children
                .iter()
                .find(|d| d.child("macAddress").is_some())
            {
                out.insert(p["name"].text.clone(), nic.clone());
            }
        }
        vc.logout().await;
        out
    })
}

/// The MAC address of each VM's first network adapter in the shared
/// folder, by VM name.
fn nic_macs(sim: &Vcsim) -> BTreeMap<String, String> {
    first_nics(sim)
        .into_iter()
        .map(|(vm, nic)| {
            (
                vm,
                nic.text_at(&["macAddress"]).unwrap_or_default().to_string(),
            )
        })
        .collect()
}

async fn named(vc: &Vcenter, folder: &MoRef, kind: &str) -> Vec<(MoRef, String)> {
    vc.children(folder, kind, &["name"])
        .await
        .unwrap()
        .into_iter()
        .map(|(r, p)| (r, p["name"].text.clone()))
        .collect()
}

pub(crate) async fn login(sim: &Vcsim) -> Vcenter {
    let credentials = kops_vsphere::Credentials {
        username: vcsim::USER.into(),
        password: vcsim::PASSWORD.into(),
    };
    // A simulator on HTTPS is trusted through its own CA.
    match sim.tls() {
        Some(tls) => {
            let ca = std::fs::read_to_string(tls.ca_file()).unwrap();
            let trust = kops_vsphere::trust::Trust::Ca(ca);
            Vcenter::login_with(sim.url(), &trust, &credentials)
                .await
                .unwrap()
        }
        None => Vcenter::login(sim.url(), &credentials).await.unwrap(),
    }
}

pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Every file of the state store with its bytes.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    tree(dir)
        .into_iter()
        .map(|f| {
            let bytes = std::fs::read(dir.join(&f)).unwrap();
            (f, bytes)
        })
        .collect()
}

/// Asserts that no file of the state store holds the simulator's user or
/// password.
pub(crate) fn no_credentials_in(store: &Path) {
    for (file, bytes) in snapshot(store) {
        let text = String::from_utf8_lossy(&bytes);
        for secret in [vcsim::USER, vcsim::PASSWORD] {
            assert!(
                !text.contains(secret),
                "`{secret}` in the state store's {file}"
            );
        }
    }
}

/// Changes `group`'s spec with `change` (through `get -o yaml` and `replace`).
pub(crate) fn edit_group(
    sim: &Vcsim,
    dir: &Path,
    state: &str,
    cluster: &str,
    group: &str,
    change: &dyn Fn(&str) -> String,
) {
    let got = ok(
        sim,
        &[
            "get",
            "instancegroups",
            group,
            "--name",
            cluster,
            "-o",
            "yaml",
            "--state",
            state,
        ],
    );
    let file = dir.join(format!("{group}.yaml"));
    std::fs::write(&file, change(&got.stdout)).unwrap();
    ok(
        sim,
        &["replace", "-f", file.to_str().unwrap(), "--state", state],
    );
}

fn sized(size: u32) -> impl Fn(&str) -> String {
    move |yaml: &str| {
        yaml.lines()
            .map(|l| {
                if l.starts_with("  minSize:") {
                    format!("  minSize: {size}")
                } else if l.starts_with("  maxSize:") {
                    format!("  maxSize: {size}")
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

fn vms_of(sim: &Vcsim, cluster: &str) -> Vec<String> {
    guestinfo(sim)
        .into_iter()
        .filter(|(_, extra)| extra.get("kops.cluster").map(String::as_str) == Some(cluster))
        .map(|(name, _)| {
            let suffix = format!(".{cluster}");
            name.strip_suffix(&suffix).unwrap_or(&name).to_string()
        })
        .collect()
}

#[test]
fn lifecycle_on_the_simulator() {
    if !vcsim::vcsim_available() {
        return;
    }
    let sim = Vcsim::start().unwrap();
    let before = inventory(&sim);
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("state");
    let state = file_url(&store);
    let mut steps: Vec<(String, String)> = Vec::new();

    // Two clusters in one folder: one control plane and three.
    ok(&sim, &create_args(&sim, "one.k8s.local", &state, "1"));
    // Three control-plane VMs need static addresses (etcd's members find
    // each other there): without them `create` refuses in one line.
    let r = kops_vc(&sim, &create_args(&sim, "three.k8s.local", &state, "3"));
    assert_ne!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("vSphereControlPlaneAddresses: has no address for")
            && r.stderr.contains("--vsphere-control-plane-addresses"),
        "{}",
        r.stderr
    );
    assert!(!store.join("three.k8s.local").exists(), "create wrote");
    let mut three = create_args(&sim, "three.k8s.local", &state, "3");
    three.extend([
        "--vsphere-control-plane-addresses",
        "10.0.0.11/24,10.0.0.12/24,10.0.0.13/24",
        "--vsphere-gateway",
        "10.0.0.1",
        "--vsphere-nameservers",
        "10.0.0.2",
    ]);
    ok(&sim, &three);
    // The plan names the VMs and the etcd disks it would make, and makes
    // nothing.
    let r = ok(
        &sim,
        &["update", "cluster", "one.k8s.local", "--state", &state],
    );
    for line in [
        "Will clone VMs:",
        "Will make etcd disks (First Class Disks):\n  kops:one.k8s.local:etcd-main-a (20 GiB)\n  kops:one.k8s.local:etcd-events-a (20 GiB)\n",
    ] {
        assert!(r.stdout.contains(line), "{line}\n{}", r.stdout);
    }
    assert_eq!(inventory(&sim), before, "the dry run made something");
    let r = update_yes(&sim, "one.k8s.local", &state);
    assert!(
        r.stdout.contains("Made etcd disks (First Class Disks):"),
        "{}",
        r.stdout
    );
    steps.push((
        "update --yes (1 control plane, 2 node groups)".into(),
        calls(&r),
    ));
    assert_eq!(
        vms_of(&sim, "one.k8s.local"),
        ["control-plane-a-1", "nodes-a-1", "nodes-b-1"]
    );
    let r = update_yes(&sim, "three.k8s.local", &state);
    steps.push((
        "update --yes (3 control planes, 2 node groups)".into(),
        calls(&r),
    ));
    assert_eq!(
        vms_of(&sim, "three.k8s.local"),
        [
            "control-plane-a-1-1",
            "control-plane-a-2-1",
            "control-plane-b-1-1",
            "nodes-a-1",
            "nodes-b-1"
        ]
    );
    // Each control-plane VM boots with its static address: cloud-init's
    // own VMware data source reads its guestinfo and renders the address,
    // default route and DNS server on the NIC with the VM's MAC address;
    // its etcd disks list every member's address. Workers keep DHCP.
    let info = guestinfo(&sim);
    let macs = nic_macs(&sim);
    if cloud_init::cloud_init_available() {
        for (vm, address) in [
            ("control-plane-a-1-1.three.k8s.local", "10.0.0.11/24"),
            ("control-plane-a-2-1.three.k8s.local", "10.0.0.12/24"),
            ("control-plane-b-1-1.three.k8s.local", "10.0.0.13/24"),
        ] {
            let view = cloud_init::read_guestinfo(&info[vm]).unwrap();
            assert_eq!(view.hostname.as_deref(), Some(vm));
            let network = view.network.expect("a network config");
            let netplan = &network.netplan;
            for want in [address, macs[vm].as_str(), "via: 10.0.0.1", "- 10.0.0.2"] {
                assert!(netplan.contains(want), "{vm}: no `{want}` in\n{netplan}");
            }
            assert!(netplan.contains("dhcp4: false"), "{netplan}");
            let networkd = &network.networkd["eth0"];
            assert!(
                networkd.contains(&format!("Address={address}"))
                    && networkd.contains("Gateway=10.0.0.1"),
                "{networkd}"
            );
        }
        let view = cloud_init::read_guestinfo(&info["nodes-a-1.three.k8s.local"]).unwrap();
        assert!(view.network.is_none(), "{view:?}");
        assert!(view.user_data.unwrap_or_default().contains("nodeup"));
    }
    for vm in [
        "control-plane-a-1-1.three.k8s.local",
        "control-plane-b-1-1.three.k8s.local",
    ] {
        // In the members' order (a-1, b-1, a-2), each its group's address.
        let etcd = &info[vm]["guestinfo.kops.etcd"];
        let want = "members=a-1,b-1,a-2 bus=0 unit=1 gib=20 version=3.6.12 addresses=10.0.0.11,10.0.0.13,10.0.0.12";
        assert!(etcd.contains(want), "{vm}: {etcd}");
    }
    let r = update_yes(&sim, "three.k8s.local", &state);
    assert!(calls(&r).contains(", 0 changing"), "{}", r.stderr);
    // A control-plane VM's replacement gets the same address, on its own
    // NIC.
    let r = ok(
        &sim,
        &[
            "rolling-update",
            "cluster",
            "three.k8s.local",
            "--instance-group",
            "control-plane-a-2",
            "--force",
            "--cloudonly",
            "--yes",
            "--state",
            &state,
        ],
    );
    steps.push((
        "rolling-update --cloudonly --force (1 control-plane VM, static address)".into(),
        calls(&r),
    ));
    let replaced = "control-plane-a-2-2.three.k8s.local";
    let info = guestinfo(&sim);
    assert!(info.contains_key(replaced), "{}", r.stderr);
    assert!(!info.contains_key("control-plane-a-2-1.three.k8s.local"));
    if cloud_init::cloud_init_available() {
        let view = cloud_init::read_guestinfo(&info[replaced]).unwrap();
        let netplan = view.network.expect("a network config").netplan;
        assert!(
            netplan.contains("10.0.0.12/24") && netplan.contains(&nic_macs(&sim)[replaced]),
            "{netplan}"
        );
    }

    // Each VM carries its boot data for cloud-init and a one-time token.
    let vm = &info["nodes-a-1.one.k8s.local"];
    assert_eq!(vm["guestinfo.userdata.encoding"], "base64");
    assert_eq!(vm["kops.instancegroup"], "nodes-a");
    assert_eq!(vm["guestinfo.kops.bootstrap-token"].len(), 64);
    assert_eq!(vm["kops.role"], "Node");
    // Control-plane VMs read the state store: no join token to steal.
    let (name, control_plane) = info
        .iter()
        .find(|(name, _)| name.starts_with("control-plane-"))
        .expect("a control-plane VM");
    assert_eq!(control_plane["kops.role"], "Master", "{name}");
    assert!(
        !control_plane.contains_key("guestinfo.kops.bootstrap-token"),
        "{name}"
    );
    // A worker reaches the API and kops-controller at the control plane's
    // virtual IP (kube-vip holds it).
    use base64::Engine;
    let user_data = base64::engine::general_purpose::STANDARD
        .decode(&vm["guestinfo.userdata"])
        .unwrap();
    let boot = kops_nodeup::bootstrap::boot_config_text(&String::from_utf8_lossy(&user_data))
        .map(str::to_string)
        .expect("boot config in the user data");
    let boot = kops_nodeup::bootstrap::BootConfig::parse(&boot).unwrap();
    assert_eq!(boot.api_server_ips, ["10.0.0.100"]);
    assert_eq!(
        boot.config_server.unwrap().servers,
        ["https://10.0.0.100:3988/"]
    );

    // A second update: no change, no write (vCenter or state store).
    let files = snapshot(&store);
    let r = update_yes(&sim, "one.k8s.local", &state);
    assert!(
        r.stderr.contains("No changes need to be applied"),
        "{}",
        r.stderr
    );
    assert!(calls(&r).contains(", 0 changing"), "{}", r.stderr);
    assert!(
        snapshot(&store) == files,
        "the no-op update wrote to the state store"
    );
    steps.push(("update --yes again (no change)".into(), calls(&r)));
    let r = ok(
        &sim,
        &["update", "cluster", "one.k8s.local", "--state", &state],
    );
    steps.push(("update (dry run, no change)".into(), calls(&r)));

    // A control-plane VM that booted (nodeup set its first-boot marker;
    // it keeps its token) and was then powered off in vCenter (host
    // maintenance, HA) is not taken for a clone that never started: the
    // plan and `update --yes` report it in one line and leave it alone.
    let vc = runtime().block_on(login(&sim));
    let control_plane = runtime()
        .block_on(vc.find_path(&format!(
            "{}/vm/kops-clusters/control-plane-a-1.one.k8s.local",
            vcsim::DATACENTER
        )))
        .unwrap()
        .expect("the control-plane VM");
    runtime().block_on(async {
        vc.set_extra_config(&control_plane, &[(kops_vsphere::BOOTED_KEY, "1")])
            .await
            .unwrap();
        vc.power_off(&control_plane).await.unwrap();
    });
    let left_alone = "Left alone, powered off after they booted (power them on in vCenter): control-plane-a-1.one.k8s.local";
    let plan = ok(
        &sim,
        &["update", "cluster", "one.k8s.local", "--state", &state],
    );
    assert!(plan.stdout.contains(left_alone), "{}", plan.stdout);
    let r = update_yes(&sim, "one.k8s.local", &state);
    assert!(r.stdout.contains(left_alone), "{}\n{}", r.stdout, r.stderr);
    assert!(calls(&r).contains(", 0 changing"), "{}", r.stderr);
    assert_eq!(
        vms_of(&sim, "one.k8s.local"),
        ["control-plane-a-1", "nodes-a-1", "nodes-b-1"]
    );
    runtime().block_on(async {
        vc.power_on(&control_plane).await.unwrap();
        vc.logout().await;
    });

    // Scale up, then down.
    edit_group(
        &sim,
        tmp.path(),
        &state,
        "one.k8s.local",
        "nodes-a",
        &sized(3),
    );
    let r = update_yes(&sim, "one.k8s.local", &state);
    steps.push(("scale nodes-a 1 → 3".into(), calls(&r)));
    assert_eq!(
        vms_of(&sim, "one.k8s.local"),
        [
            "control-plane-a-1",
            "nodes-a-1",
            "nodes-a-2",
            "nodes-a-3",
            "nodes-b-1"
        ]
    );
    edit_group(
        &sim,
        tmp.path(),
        &state,
        "one.k8s.local",
        "nodes-a",
        &sized(1),
    );
    let r = update_yes(&sim, "one.k8s.local", &state);
    steps.push(("scale nodes-a 3 → 1".into(), calls(&r)));
    assert_eq!(
        vms_of(&sim, "one.k8s.local"),
        ["control-plane-a-1", "nodes-a-1", "nodes-b-1"]
    );

    // A user-data change: update names the VM, rolling-update replaces it.
    edit_group(
        &sim,
        tmp.path(),
        &state,
        "one.k8s.local",
        "nodes-b",
        &|yaml: &str| {
            yaml.replace(
                "  nodeLabels:\n",
                "  nodeLabels:\n    example.com/rolled: \"yes\"\n",
            )
        },
    );
    let r = update_yes(&sim, "one.k8s.local", &state);
    assert!(
        r.stdout.contains("older spec") && r.stdout.contains("nodes-b-1.one.k8s.local"),
        "{}",
        r.stdout
    );
    let r = ok(
        &sim,
        &[
            "get",
            "instances",
            "one.k8s.local",
            "-o",
            "json",
            "--state",
            &state,
        ],
    );
    let rows: Vec<serde_json::Value> = serde_json::from_str(&r.stdout).unwrap();
    let stale: Vec<&str> = rows
        .iter()
        .filter(|row| row["status"] == "NeedsUpdate")
        .map(|row| row["instanceGroup"].as_str().unwrap())
        .collect();
    assert_eq!(stale, ["nodes-b"], "{}", r.stdout);
    let r = ok(
        &sim,
        &[
            "rolling-update",
            "cluster",
            "one.k8s.local",
            "--cloudonly",
            "--yes",
            "--state",
            &state,
        ],
    );
    steps.push((
        "rolling-update --cloudonly (1 VM replaced)".into(),
        calls(&r),
    ));
    // The replacement takes a new name (a new Kubernetes node).
    assert_eq!(
        vms_of(&sim, "one.k8s.local"),
        ["control-plane-a-1", "nodes-a-1", "nodes-b-2"],
        "{}",
        r.stderr
    );
    let r = ok(
        &sim,
        &["get", "instances", "one.k8s.local", "--state", &state],
    );
    steps.push(("get instances".into(), calls(&r)));
    assert!(!r.stdout.contains("NeedsUpdate"), "{}", r.stdout);
    let r = update_yes(&sim, "one.k8s.local", &state);
    assert!(
        r.stderr.contains("No changes need to be applied"),
        "{}",
        r.stderr
    );

    // The bootstrap channel holds vSphere's cloud controller manager and
    // CSI driver (their configs point at Secrets), and none of AWS'.
    let channel =
        std::fs::read_to_string(store.join("one.k8s.local/addons/bootstrap-channel.yaml")).unwrap();
    for addon in [
        "vsphere-cloud-controller.addons.k8s.io",
        "vsphere-csi-driver.addons.k8s.io",
    ] {
        assert!(channel.contains(addon), "{addon} not in\n{channel}");
    }
    assert!(!channel.contains("aws-cloud-controller"), "{channel}");

    // No credential in the state store (addons included), the specs, the
    // node configs or the VMs' user data.
    let secrets = [vcsim::USER, vcsim::PASSWORD];
    no_credentials_in(&store);
    let specs = ok(
        &sim,
        &[
            "get",
            "all",
            "one.k8s.local",
            "-o",
            "yaml",
            "--state",
            &state,
        ],
    );
    let decode = |b64: &str| {
        use base64::Engine;
        String::from_utf8(
            base64::engine::general_purpose::STANDARD
                .decode(b64)
                .unwrap(),
        )
        .unwrap()
    };
    for (name, extra) in guestinfo(&sim) {
        let user_data = decode(&extra["guestinfo.userdata"]);
        let metadata = decode(&extra["guestinfo.metadata"]);
        assert!(user_data.contains("nodeup"), "{name}: {user_data}");
        for secret in secrets {
            assert!(
                !user_data.contains(secret) && !metadata.contains(secret),
                "`{secret}` in {name}'s guestinfo"
            );
            assert!(!specs.stdout.contains(secret), "`{secret}` in the specs");
        }
    }

    // Delete one cluster: the other's VMs and the folder stay.
    let r = ok(
        &sim,
        &["delete", "cluster", "one.k8s.local", "--state", &state],
    );
    assert!(r.stdout.contains("nodes-b-2.one.k8s.local"), "{}", r.stdout);
    // Its etcd disks too, and no other cluster's.
    for disk in [
        "kops:one.k8s.local:etcd-main-a",
        "kops:one.k8s.local:etcd-events-a",
    ] {
        assert!(r.stdout.contains(disk), "{disk}\n{}", r.stdout);
    }
    assert!(!r.stdout.contains("kops:three.k8s.local"), "{}", r.stdout);
    steps.push(("delete (dry run)".into(), calls(&r)));
    let r = ok(
        &sim,
        &[
            "delete",
            "cluster",
            "one.k8s.local",
            "--yes",
            "--state",
            &state,
        ],
    );
    steps.push(("delete --yes (3 VMs)".into(), calls(&r)));
    assert!(vms_of(&sim, "one.k8s.local").is_empty());
    assert_eq!(vms_of(&sim, "three.k8s.local").len(), 5);
    let r = ok(
        &sim,
        &[
            "delete",
            "cluster",
            "three.k8s.local",
            "--yes",
            "--state",
            &state,
        ],
    );
    steps.push(("delete --yes (5 VMs and the folder)".into(), calls(&r)));
    assert_eq!(inventory(&sim), before, "delete left the simulator changed");
    assert!(tree(&store).is_empty(), "{:?}", tree(&store));

    for (step, calls) in steps {
        println!("{step}: {calls}");
    }
}

/// With a custom S3 endpoint (MinIO), control-plane VMs carry a state-store
/// key in their user data, so in guestinfo: the cluster's own key from
/// VSPHERE_STATE_STORE_CREDENTIALS_FILE; without one `update` refuses
/// (one line, nothing made) unless asked to copy the operator's.
#[test]
fn control_plane_vms_get_the_clusters_own_store_key() {
    if !vcsim::vcsim_available() {
        return;
    }
    let sim = Vcsim::start().unwrap();
    let before = inventory(&sim);
    let tmp = tempfile::tempdir().unwrap();
    let state = file_url(&tmp.path().join("state"));
    let name = "storekey.k8s.local";
    ok(&sim, &create_args(&sim, name, &state, "1"));
    let minio = [
        ("S3_ENDPOINT", "https://minio.example.com:9000"),
        ("S3_REGION", "us-east-1"),
        ("S3_ACCESS_KEY_ID", "operator-key"),
        ("S3_SECRET_ACCESS_KEY", "operator-secret"),
    ];
    let run = |args: &[&str], extra: &[(&str, &str)]| -> Run {
        let mut c = command(args);
        for (k, v) in sim.env() {
            c.env(k, v);
        }
        for (k, v) in minio.iter().chain(extra) {
            c.env(k, v);
        }
        c.output().expect("run kops").into()
    };
    let update = ["update", "cluster", name, "--yes", "--state", &state];

    let r = run(&update, &[]);
    assert_ne!(r.code, 0, "{}", r.stderr);
    for part in [
        "`operator-key`",
        "VSPHERE_STATE_STORE_CREDENTIALS_FILE",
        "--vsphere-copy-operator-credentials",
        "/storekey.k8s.local/",
    ] {
        assert!(r.stderr.contains(part), "{part}: {}", r.stderr);
    }
    assert!(!r.stderr.contains("operator-secret"), "{}", r.stderr);
    assert!(r.stderr.lines().count() <= 2, "{}", r.stderr);
    assert_eq!(inventory(&sim), before, "the refusal made something");

    let key = tmp.path().join("store-key");
    std::fs::write(&key, "cluster-key\ncluster-secret\n").unwrap();
    let key = key.display().to_string();
    let r = run(
        &update,
        &[("VSPHERE_STATE_STORE_CREDENTIALS_FILE", key.as_str())],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    use base64::Engine;
    let mut control_planes = 0;
    for (vm, info) in guestinfo(&sim) {
        let user_data = base64::engine::general_purpose::STANDARD
            .decode(&info["guestinfo.userdata"])
            .unwrap();
        let user_data = String::from_utf8_lossy(&user_data);
        assert!(!user_data.contains("operator-"), "{vm}: {user_data}");
        if info["kops.role"] == "Master" {
            control_planes += 1;
            assert!(
                user_data.contains("export S3_ACCESS_KEY_ID=cluster-key\n")
                    && user_data.contains("export S3_SECRET_ACCESS_KEY=cluster-secret\n")
                    && user_data.contains("export S3_ENDPOINT=https://minio.example.com:9000\n"),
                "{vm}: {user_data}"
            );
        } else {
            assert!(!user_data.contains("S3_ACCESS_KEY_ID"), "{vm}: {user_data}");
        }
    }
    assert_eq!(control_planes, 1);

    // Asked to, the operator's own key goes there, with a warning; the
    // control-plane VM is then made from an older spec.
    let r = run(
        &[
            "update",
            "cluster",
            name,
            "--vsphere-copy-operator-credentials",
            "--state",
            &state,
        ],
        &[],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("carries your own state-store key S3_ACCESS_KEY_ID `operator-key`"),
        "{}",
        r.stderr
    );
    assert!(
        r.stdout.contains("VMs made from an older spec")
            && r.stdout.contains(&format!("control-plane-a-1.{name}"))
            && !r.stdout.contains(&format!("nodes-a-1.{name}")),
        "{}",
        r.stdout
    );
}

/// Bad input: one line naming what is wrong and the fix, a non-zero exit,
/// and nothing made in the simulator.
#[test]
fn bad_input_leaves_nothing() {
    if !vcsim::vcsim_available() {
        return;
    }
    let sim = Vcsim::start().unwrap();
    let before = inventory(&sim);
    let cases: [(&str, &str, &str, &str); 5] = [
        (
            "--vsphere-datacenter",
            "DC9",
            "datacenter `DC9` does not exist",
            "vSphereDatacenter",
        ),
        (
            "--vsphere-datastore",
            "NoSuchDS",
            "datastore `NoSuchDS` does not exist",
            "vSphereDatastore",
        ),
        (
            "--vsphere-network",
            "No Net",
            "network `No Net` does not exist",
            "vSphereNetwork",
        ),
        (
            "--image",
            "no-template",
            "template `no-template` does not exist",
            "spec.image",
        ),
        (
            "--vsphere-resource-pool",
            "NoPool",
            "resource pool `NoPool` does not exist",
            "vSphereResourcePool",
        ),
    ];
    for (i, (flag, value, message, fix)) in cases.iter().enumerate() {
        let tmp = tempfile::tempdir().unwrap();
        let state = file_url(tmp.path());
        let name = format!("bad{i}.k8s.local");
        let mut args = create_args(&sim, &name, &state, "1");
        let at = args.iter().position(|a| a == flag).unwrap();
        args[at + 1] = value;
        ok(&sim, &args);
        let r = kops_vc(
            &sim,
            &["update", "cluster", &name, "--yes", "--state", &state],
        );
        assert_ne!(r.code, 0, "{flag}: {}", r.stderr);
        assert!(
            r.stderr.contains(message) && r.stderr.contains(fix),
            "{flag}: {}",
            r.stderr
        );
        assert!(r.stderr.lines().count() <= 2, "{flag}: {}", r.stderr);
        assert!(!r.stderr.contains("{ "), "a Debug structure: {}", r.stderr);
        assert_eq!(
            inventory(&sim),
            before,
            "{flag} left something in the simulator"
        );
    }

    // No DNS and no control-plane virtual IP: nodes would have no API
    // address; `create` says which flag to give and writes nothing.
    let tmp = tempfile::tempdir().unwrap();
    let state = file_url(tmp.path());
    let mut args = create_args(&sim, "novip.k8s.local", &state, "1");
    let at = args
        .iter()
        .position(|a| *a == "--vsphere-control-plane-vip")
        .unwrap();
    args.drain(at..at + 2);
    let r = kops_vc(&sim, &args);
    assert_ne!(r.code, 0);
    assert!(
        r.stderr.contains("--vsphere-control-plane-vip") && r.stderr.contains("kube-vip"),
        "{}",
        r.stderr
    );
    assert!(snapshot(tmp.path()).is_empty(), "create wrote something");

    // Wrong credentials, an unreachable vCenter, no credentials.
    let tmp = tempfile::tempdir().unwrap();
    let state = file_url(tmp.path());
    ok(&sim, &create_args(&sim, "creds.k8s.local", &state, "1"));
    let update = [
        "update",
        "cluster",
        "creds.k8s.local",
        "--yes",
        "--state",
        &state,
    ];
    let r: Run = command(&update)
        .env("VSPHERE_USERNAME", vcsim::USER)
        .env("VSPHERE_PASSWORD", "wrong")
        .output()
        .unwrap()
        .into();
    assert_ne!(r.code, 0);
    assert!(
        r.stderr.contains("refused the login") && r.stderr.contains("VSPHERE_PASSWORD"),
        "{}",
        r.stderr
    );
    let r: Run = command(&update)
        .env_remove("VSPHERE_USERNAME")
        .env_remove("VSPHERE_PASSWORD")
        .env_remove("VSPHERE_CREDENTIALS_FILE")
        .output()
        .unwrap()
        .into();
    assert_ne!(r.code, 0);
    assert!(
        r.stderr
            .contains("set VSPHERE_USERNAME and VSPHERE_PASSWORD"),
        "{}",
        r.stderr
    );
    assert_eq!(inventory(&sim), before);

    // No Terraform for vSphere: refused before anything is written.
    let out = tmp.path().join("tf");
    let r = kops_vc(
        &sim,
        &[
            "update",
            "cluster",
            "creds.k8s.local",
            "--target",
            "terraform",
            "--out",
            out.to_str().unwrap(),
            "--state",
            &state,
        ],
    );
    assert_ne!(r.code, 0);
    assert!(
        r.stderr.contains("--target") && r.stderr.contains("direct"),
        "{}",
        r.stderr
    );
    assert!(!out.exists());

    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{closed}/sdk");
    let mut args = create_args(&sim, "gone.k8s.local", &state, "1");
    let at = args.iter().position(|a| *a == "--vsphere-server").unwrap();
    args[at + 1] = &url;
    ok(&sim, &args);
    let r = kops_vc(
        &sim,
        &[
            "update",
            "cluster",
            "gone.k8s.local",
            "--yes",
            "--state",
            &state,
        ],
    );
    assert_ne!(r.code, 0);
    assert!(
        r.stderr.contains("is unreachable") && r.stderr.contains("--vsphere-server"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.lines().count() <= 2, "{}", r.stderr);
}
