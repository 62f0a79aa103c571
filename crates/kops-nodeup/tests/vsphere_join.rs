//! A vSphere worker joins through kops-controller, on govmomi's vCenter
//! simulator: `update`'s code clones the worker VMs (cloud-init user data,
//! metadata and a one-time token in guestinfo), nodeup reads its boot
//! config from the VM's guestinfo (no boot config file), sends its BIOS
//! UUID and the token's MAC to kops-controller, whose vSphere verifier
//! logs in to vCenter with credentials from a mounted file. The worker
//! gets its certificates and node config.
//!
//! The guest shows its firmware as Linux does on VM hardware version 13
//! and later: `product_uuid` with its first three fields byte-swapped
//! against vCenter's `config.uuid`, `product_serial` in vCenter's order.
//!
//! Refused, each with one log line and nothing issued: the same worker
//! again (its token was used: a replay), a VM of this cluster with a
//! forged token (its real token stays), a VM of another cluster with its
//! own valid token.

mod common;

use kops_controller::test_support::{self, ServingPki};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use kops_bootstrap::protocol;
use kops_nodeup::agent::{self, vsphere::Guest, NodeupError};
use kops_nodeup::bootstrap::{BootConfig, ConfigServer};
use kops_testkit::logs::Logs;
use kops_testkit::vcsim::{self, Vcsim};
use kops_vsphere::cluster::{self, GroupSpec, Placement};
use kops_vsphere::vcenter::{extra_config, Vcenter};
use kops_vsphere::{Credentials, TOKEN_KEY};

const CLUSTER: &str = "a.k8s.local";
const OTHER: &str = "b.k8s.local";
const FOLDER: &str = "joins";

/// What a VM's guest reads through VMware Tools (its guestinfo, as
/// vCenter holds it) and in its firmware tables, as Linux shows them on
/// hardware version 13 and later (SMBIOS 2.7).
#[derive(Debug, Clone)]
struct VmView {
    /// vCenter's `config.uuid`.
    uuid: String,
    guestinfo: BTreeMap<String, String>,
    /// Whether `product_serial` is VMware's (else the host's, as with
    /// `SMBIOS.reflectHost`).
    vmware_serial: bool,
    /// What the guest set (`vmware-rpctool info-set`).
    set: Arc<std::sync::Mutex<BTreeMap<String, String>>>,
}

/// `config.uuid`'s 16 bytes.
fn uuid_bytes(uuid: &str) -> Vec<u8> {
    let hex = uuid.replace('-', "");
    (0..32)
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

/// How Linux prints the UUID from SMBIOS 2.6 on: the first three fields
/// little-endian, so swapped against vCenter's order.
fn hardware_13_product_uuid(uuid: &str) -> String {
    let b = uuid_bytes(uuid);
    let hex = |bytes: &[u8]| -> String { bytes.iter().map(|x| format!("{x:02X}")).collect() };
    let reversed = |r: std::ops::Range<usize>| -> Vec<u8> { b[r].iter().rev().copied().collect() };
    format!(
        "{}-{}-{}-{}-{}\n",
        hex(&reversed(0..4)),
        hex(&reversed(4..6)),
        hex(&reversed(6..8)),
        hex(&b[8..10]),
        hex(&b[10..16])
    )
}

/// VMware's serial number: `VMware-` and the bytes in vCenter's order.
fn vmware_serial(uuid: &str) -> String {
    let b: Vec<String> = uuid_bytes(uuid)
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect();
    format!("VMware-{}-{}\n", b[..8].join(" "), b[8..].join(" "))
}

impl Guest for VmView {
    fn get(&self, key: &str) -> Result<Option<String>, String> {
        Ok(self.guestinfo.get(key).cloned())
    }
    fn set(&self, key: &str, value: &str) -> Result<(), String> {
        self.set.lock().unwrap().insert(key.into(), value.into());
        Ok(())
    }
    fn firmware(&self, path: &str) -> Result<Option<Vec<u8>>, String> {
        use kops_nodeup::agent::vsphere::bios;
        Ok(match path {
            bios::PRODUCT_UUID => Some(hardware_13_product_uuid(&self.uuid).into_bytes()),
            bios::PRODUCT_SERIAL if self.vmware_serial => {
                Some(vmware_serial(&self.uuid).into_bytes())
            }
            bios::PRODUCT_SERIAL => Some(b"CZJ1234ABC\n".to_vec()),
            bios::ENTRY_POINT => {
                let mut entry = b"_SM_".to_vec();
                entry.resize(31, 0);
                (entry[6], entry[7]) = (2, 7);
                Some(entry)
            }
            _ => None,
        })
    }
}

async fn view(vc: &Vcenter, vm: &str) -> VmView {
    let folder = vc
        .find_path(&format!("{}/vm/{FOLDER}", vcsim::DATACENTER))
        .await
        .unwrap()
        .unwrap();
    let found = vc
        .children(
            &folder,
            "VirtualMachine",
            &["name", "config.uuid", "config.extraConfig"],
        )
        .await
        .unwrap();
    let (_, p) = found
        .into_iter()
        .find(|(_, p)| p["name"].text == vm)
        .unwrap_or_else(|| panic!("no VM {vm}"));
    VmView {
        uuid: p["config.uuid"].text.clone(),
        guestinfo: extra_config(p.get("config.extraConfig"))
            .into_iter()
            .filter(|(k, _)| k.starts_with("guestinfo."))
            .collect(),
        vmware_serial: true,
        set: Default::default(),
    }
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn credentials() -> Credentials {
    Credentials {
        username: vcsim::USER.into(),
        password: vcsim::PASSWORD.into(),
    }
}

/// The user data of a worker VM whose boot config is `boot`.
fn user_data(boot: &BootConfig) -> String {
    format!(
        "#!/bin/bash\ncat > conf/kube_env.yaml << '__EOF_KUBE_ENV'\n{}\n__EOF_KUBE_ENV\n\ndownload-release\n",
        boot.to_yaml()
    )
}

/// `count` worker VMs of `cluster` whose user data carries `boot`.
async fn workers(vc: &Vcenter, cluster: &str, count: usize, boot: &BootConfig) {
    let placement = Placement {
        datacenter: vcsim::DATACENTER.into(),
        folder: FOLDER.into(),
        resource_pool: vcsim::CLUSTER.into(),
        datastore: vcsim::DATASTORE.into(),
        network: None,
    };
    let script = user_data(boot);
    let groups = [GroupSpec {
        name: "nodes".into(),
        role: "Node".into(),
        template: vcsim::TEMPLATE.into(),
        count,
        cpus: 2,
        memory_mb: 4096,
        user_data: script,
        root_disk_gib: None,
        etcd: Vec::new(),
        network: None,
    }];
    let resolved = cluster::resolve(vc, &placement, &groups).await.unwrap();
    cluster::update(vc, cluster, &placement, resolved, &groups, true)
        .await
        .unwrap();
}

#[test]
fn a_vsphere_worker_joins_and_others_are_refused() {
    if !vcsim::vcsim_available() {
        return;
    }
    common::run_with_logs(joins);
}

async fn joins(logs: Logs) {
    let sim = Vcsim::start().unwrap();
    let tmp = tempfile::tempdir().unwrap();

    // The control plane: kops-controller with its PKI, the group's node
    // config in the state store and the vCenter credentials in a file.
    let pki = ServingPki::write(&tmp.path().join("pki"), CLUSTER);
    let ca = &pki.ca;
    let state = tmp.path().join("state").join(CLUSTER);
    let node_config = format!(
        "ClusterName: {CLUSTER}\nKubeProxy:\n  enabled: true\nKubeletConfig:\n  nodeLabels:\n    node-role.kubernetes.io/node: \"\"\n"
    );
    write(
        &state.join("igconfig/node/nodes/nodeupconfig.yaml"),
        &node_config,
    );
    let credentials_file = tmp.path().join("vsphere-credentials");
    write(
        &credentials_file,
        &format!("{}\n{}\n", vcsim::USER, vcsim::PASSWORD),
    );
    // A controller (one per control-plane VM), serving; its URL.
    let start_controller = || async {
        let mut options = kops_controller::Options::for_vsphere(
            CLUSTER,
            &format!("file://{}", state.display()),
            "",
            sim.url(),
            vcsim::DATACENTER,
        );
        pki.configure(&mut options);
        options
            .server
            .provider
            .vsphere
            .as_mut()
            .unwrap()
            .credentials_file = credentials_file.display().to_string();
        let controller = Arc::new(
            kops_controller::build(options)
                .await
                .unwrap_or_else(|e| panic!("kops-controller: {e}")),
        );
        test_support::serve(controller).await
    };
    let url = start_controller().await;

    // The workers: this cluster's two, another cluster's one.
    let boot = |cluster: &str| BootConfig {
        cloud_provider: kops_vsphere::CLOUD.into(),
        cluster_name: cluster.into(),
        config_server: Some(ConfigServer {
            ca_certificates: ca.certificate_pem().to_string(),
            servers: vec![url.clone()],
            tls_server_name: protocol::audience(CLUSTER),
        }),
        instance_group_name: "nodes".into(),
        instance_group_role: "Node".into(),
        nodeup_config_hash: kops_nodeup::config::config_hash(node_config.as_bytes()),
        ..Default::default()
    };
    let vc = Vcenter::login(sim.url(), &credentials()).await.unwrap();
    workers(&vc, CLUSTER, 3, &boot(CLUSTER)).await;
    workers(&vc, OTHER, 1, &boot(OTHER)).await;

    // nodeup on a VM: no boot config file, everything from guestinfo.
    let node = |guest: VmView| {
        let mut options = agent::Options::new(
            tmp.path().join("no-such-kube_env.yaml"),
            tmp.path().join("root"),
        );
        options.vsphere_guest = Some(Arc::new(guest));
        options.bootstrap_timeout = Duration::from_secs(5);
        options.retry_delay = Duration::from_millis(100);
        options
    };
    let refused = |result: Result<agent::Joined, NodeupError>| match result {
        Err(NodeupError::Bootstrap { reason }) => reason,
        Err(e) => panic!("expected a refusal, got {e}\n{}", logs.text()),
        Ok(_) => panic!("was accepted\n{}", logs.text()),
    };

    // 1. The worker joins: its name from the metadata, its certificates.
    //    Its guest shows product_uuid swapped (hardware 13): nodeup sends
    //    the UUID in vCenter's order, from product_serial.
    let worker = view(&vc, &format!("nodes-1.{CLUSTER}")).await;
    assert_ne!(
        hardware_13_product_uuid(&worker.uuid).trim().to_lowercase(),
        worker.uuid
    );
    let joined = agent::join(&node(worker.clone()))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", logs.text()));
    assert_eq!(joined.node_name, format!("nodes-1.{CLUSTER}"));
    assert_eq!(joined.loaded.boot.cluster_name, CLUSTER);
    // Its first boot is marked, so `update` never remakes it.
    assert_eq!(
        worker.set.lock().unwrap().get(kops_vsphere::BOOTED_KEY),
        Some(&"1".to_string())
    );
    let issued = joined.loaded.issued.expect("certificates");
    let paths: Vec<&str> = issued.keys().map(String::as_str).collect();
    assert_eq!(
        paths,
        [
            "/var/lib/kube-proxy/client.crt",
            "/var/lib/kubelet/pki/kubelet-client.crt"
        ]
    );
    let kubelet = &issued["/var/lib/kubelet/pki/kubelet-client.crt"].0;
    let subject = kops_pki::certificate_info(kubelet).unwrap().subject;
    assert!(
        subject.contains(&format!("system:node:nodes-1.{CLUSTER}")),
        "{subject}"
    );
    assert_eq!(
        logs.count(&format!(
            "node nodes-1.{CLUSTER} (instance group nodes): issued kube-proxy, kubelet and its node config"
        )),
        1,
        "{}",
        logs.text()
    );
    // The VM holds no token any more.
    assert!(!view(&vc, &format!("nodes-1.{CLUSTER}"))
        .await
        .guestinfo
        .contains_key(TOKEN_KEY));

    // 1b. A worker whose serial number is the host's (no `VMware-`):
    //     nodeup swaps product_uuid back, as SMBIOS 2.7 says, and joins.
    let mut reflecting = view(&vc, &format!("nodes-3.{CLUSTER}")).await;
    reflecting.vmware_serial = false;
    let joined = agent::join(&node(reflecting))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", logs.text()));
    assert_eq!(joined.node_name, format!("nodes-3.{CLUSTER}"));

    // 2. The same proof again (a replay): refused.
    let reason = refused(agent::join(&node(worker)).await);
    assert!(reason.contains("403"), "{reason}");
    assert_eq!(
        logs.count(&format!("VM `nodes-1.{CLUSTER}` holds no bootstrap token")),
        1
    );

    // 3. A forged token for this cluster's other VM: refused; its token stays.
    let mut forged = view(&vc, &format!("nodes-2.{CLUSTER}")).await;
    let real = forged.guestinfo[TOKEN_KEY].clone();
    forged.guestinfo.insert(TOKEN_KEY.into(), "0".repeat(64));
    refused(agent::join(&node(forged)).await);
    assert_eq!(
        logs.count(&format!(
            "does not match VM `nodes-2.{CLUSTER}`'s token (forged)"
        )),
        1
    );
    assert_eq!(
        view(&vc, &format!("nodes-2.{CLUSTER}")).await.guestinfo[TOKEN_KEY],
        real
    );

    // 4. Another cluster's VM, with its own valid token, asking this
    //    cluster's controller: refused.
    let stranger = view(&vc, &format!("nodes-1.{OTHER}")).await;
    refused(agent::join(&node(stranger)).await);
    assert_eq!(
        logs.count(&format!(
            "VM `nodes-1.{OTHER}` is not part of cluster `{CLUSTER}`"
        )),
        1
    );
    assert_eq!(
        logs.count("issued"),
        2,
        "nothing issued to the refused: {}",
        logs.text()
    );

    // 5. The store fails after the check (the node config cannot be
    //    read): nothing is issued and the token stays, so the node's next
    //    try joins once the store answers.
    let store_file = state.join("igconfig/node/nodes/nodeupconfig.yaml");
    let aside = tmp.path().join("nodeupconfig.yaml.aside");
    std::fs::rename(&store_file, &aside).unwrap();
    let second = view(&vc, &format!("nodes-2.{CLUSTER}")).await;
    let reason = refused(agent::join(&node(second.clone())).await);
    assert!(reason.contains("500"), "{reason}");
    assert_eq!(
        view(&vc, &format!("nodes-2.{CLUSTER}")).await.guestinfo[TOKEN_KEY],
        real,
        "the token is spent only with an answer"
    );
    std::fs::rename(&aside, &store_file).unwrap();

    // 6. One token, two controllers (one per control-plane VM), two
    //    joins at once: one certificate set, one refusal.
    let url2 = start_controller().await;
    let mut to_second = second.clone();
    let mut boot2 = boot(CLUSTER);
    if let Some(server) = boot2.config_server.as_mut() {
        server.servers = vec![url2.clone()];
    }
    use base64::Engine;
    to_second.guestinfo.insert(
        "guestinfo.userdata".into(),
        base64::engine::general_purpose::STANDARD.encode(user_data(&boot2)),
    );
    let (first_node, second_node) = (node(second), node(to_second));
    let (one, two) = tokio::join!(agent::join(&first_node), agent::join(&second_node));
    let outcomes = [one.map(|j| j.node_name), two.map(|j| j.node_name)];
    let joined: Vec<&String> = outcomes.iter().filter_map(|o| o.as_ref().ok()).collect();
    assert_eq!(joined, [&format!("nodes-2.{CLUSTER}")], "{}", logs.text());
    let refusal = outcomes
        .iter()
        .find_map(|o| o.as_ref().err())
        .map(ToString::to_string)
        .unwrap();
    assert!(refusal.contains("403"), "{refusal}");
    assert_eq!(
        logs.count(&format!(
            "node nodes-2.{CLUSTER} (instance group nodes): issued"
        )),
        1,
        "{}",
        logs.text()
    );
    assert!(!view(&vc, &format!("nodes-2.{CLUSTER}"))
        .await
        .guestinfo
        .contains_key(TOKEN_KEY));
    vc.logout().await;
}
