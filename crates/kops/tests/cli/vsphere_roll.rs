//! The rest of a vSphere cluster's lifecycle through the binary, against
//! govmomi's vCenter simulator and kops-testkit's Kubernetes API:
//! `validate cluster`, `rolling-update cluster` with drains and validation,
//! `delete instance` (no surge on vSphere: refused, then without) and
//! `toolbox dump`, and the Secrets `update cluster --yes` writes.
//!
//! The test plays kubelet: a thread registers a Ready node for every VM of
//! the cluster (named as the VM, provider ID `vsphere://<BIOS uuid>`, as
//! kops-controller certifies it), the control-plane pods on control-plane
//! nodes and an application pod on workers, and removes the node of a VM
//! that is gone.

use std::collections::BTreeMap;

use kops_testkit::kube_api::FakeApi;
use kops_testkit::vcsim::{self, Vcsim};
use kops_vsphere::vcenter::Vcenter;
use serde_json::{json, Value};

use crate::common::kubelet::{self, FAST_ROLL};
use crate::common::{command, file_url, Run};
use crate::vsphere::{
    calls, create_args, edit_group, login, no_credentials_in, ok, runtime, update_yes,
};

const CLUSTER: &str = "roll.k8s.local";

struct Case {
    sim: Vcsim,
    kube: FakeApi,
    state: String,
    dir: tempfile::TempDir,
    /// More environment for every run (the components' accounts).
    env: std::sync::Mutex<Vec<(String, String)>>,
}

impl Case {
    fn kops(&self, args: &[&str]) -> Run {
        let mut c = command(args);
        c.args(["--state", &self.state]);
        for (k, v) in self.sim.env() {
            c.env(k, v);
        }
        c.env("KUBECONFIG", self.dir.path().join("kubeconfig"));
        for (k, v) in self.env.lock().unwrap().iter() {
            c.env(k, v);
        }
        c.output().expect("run kops").into()
    }

    fn kops_ok(&self, args: &[&str]) -> Run {
        self.kops(args).expect_ok(args)
    }

    /// Runs `kops ARGS` while a thread keeps the nodes in step with the VMs.
    fn kops_with_kubelet(&self, args: &[&str], known: &mut BTreeMap<String, String>) -> Run {
        let rt = runtime();
        let vc = rt.block_on(login(&self.sim));
        let (r, (_, synced)) = kubelet::while_syncing(
            (&rt, known.clone()),
            |(rt, mine)| rt.block_on(sync_nodes(&vc, &self.kube, mine)),
            || self.kops(args),
        );
        rt.block_on(vc.logout());
        *known = synced;
        r
    }

    /// The cluster's VMs now.
    fn vms(&self) -> BTreeMap<String, (String, String)> {
        runtime().block_on(async {
            let vc = login(&self.sim).await;
            let v = vms(&vc).await;
            vc.logout().await;
            v
        })
    }

    fn sync(&self, known: &mut BTreeMap<String, String>) {
        let rt = runtime();
        rt.block_on(async {
            let vc = login(&self.sim).await;
            sync_nodes(&vc, &self.kube, known).await;
            vc.logout().await;
        });
    }
}

/// The cluster's VMs: name → (BIOS uuid, instance group).
async fn vms(vc: &Vcenter) -> BTreeMap<String, (String, String)> {
    let Some(folder) = vc.find_path("DC0/vm/kops-clusters").await.unwrap() else {
        return BTreeMap::new();
    };
    vc.children(
        &folder,
        "VirtualMachine",
        &["name", "config.uuid", "config.extraConfig"],
    )
    .await
    .unwrap()
    .into_iter()
    .filter_map(|(_, p)| {
        let extra = kops_vsphere::vcenter::extra_config(p.get("config.extraConfig"));
        (extra.get("kops.cluster").map(String::as_str) == Some(CLUSTER)).then(|| {
            (
                p["name"].text.clone(),
                (
                    p["config.uuid"].text.to_ascii_lowercase(),
                    extra["kops.instancegroup"].clone(),
                ),
            )
        })
    })
    .collect()
}

/// Registers a node for each VM and removes the nodes of VMs that are
/// gone; `known` is node name → uuid.
async fn sync_nodes(vc: &Vcenter, kube: &FakeApi, known: &mut BTreeMap<String, String>) {
    let running = vms(vc).await;
    let stale: Vec<String> = known
        .iter()
        .filter(|(name, uuid)| running.get(*name).map(|r| &r.0) != Some(*uuid))
        .map(|(name, _)| name.clone())
        .collect();
    for name in stale {
        kubelet::unregister(kube, &name);
        known.remove(&name);
    }
    for (name, (uuid, group)) in running {
        if known.contains_key(&name) {
            continue;
        }
        kubelet::register(
            kube,
            &name,
            &format!("vsphere://{uuid}"),
            json!({"kops.k8s.io/instancegroup": group}),
            group.starts_with("control-plane"),
        );
        known.insert(name, uuid);
    }
}

/// kops-controller's entry in the bootstrap channel checks nodes against
/// this vCenter (not AWS) and may read the credentials Secret; kube-vip's
/// image on the control plane comes from the spec's registry mirror.
fn addons_and_images(store: &std::path::Path, server: &str) {
    let channel = std::fs::read_to_string(store.join("addons/bootstrap-channel.yaml")).unwrap();
    assert!(
        channel.contains("name: kops-controller.addons.k8s.io"),
        "{channel}"
    );
    let manifest =
        std::fs::read_to_string(store.join("addons/kops-controller.addons.k8s.io/k8s-1.16.yaml"))
            .unwrap();
    let config = manifest
        .lines()
        .find(|l| l.trim_start().starts_with("{\"clusterName\""))
        .expect("kops-controller's config");
    let options: kops_controller::Options = serde_json::from_str(config.trim()).unwrap();
    let expected = kops_controller::Options::for_vsphere(
        CLUSTER,
        &options.config_base,
        &options.secret_store,
        server,
        vcsim::DATACENTER,
    );
    assert_eq!(options.cloud, "vsphere", "{config}");
    assert_eq!(
        options.server.provider, expected.server.provider,
        "{config}"
    );
    assert!(
        manifest.contains("name: kops-controller-vsphere")
            && manifest.contains("- vsphere-cloud-secret"),
        "{manifest}"
    );
    let control_plane = std::fs::read_to_string(
        store.join("igconfig/control-plane/control-plane-a/nodeupconfig.yaml"),
    )
    .unwrap();
    assert!(
        control_plane.contains("kubeVIPImage: registry.example.com/kube-vip:v0.8.9"),
        "{control_plane}"
    );
    let node =
        std::fs::read_to_string(store.join("igconfig/node/nodes-a/nodeupconfig.yaml")).unwrap();
    assert!(!node.contains("kubeVIPImage"), "{node}");
}

/// The Secrets the cloud controller manager (and kops-controller) and the
/// CSI driver read, as `update` wrote them.
fn component_secrets(case: &Case) {
    use base64::Engine;
    let decode = |secret: &Value, key: &str| {
        let b64 = secret["data"][key]
            .as_str()
            .unwrap_or_else(|| panic!("no `{key}` in {secret}"));
        String::from_utf8(
            base64::engine::general_purpose::STANDARD
                .decode(b64)
                .unwrap(),
        )
        .unwrap()
    };
    let cpi = case
        .kube
        .get("api/v1", "secrets", "kube-system", "vsphere-cloud-secret")
        .expect("the cloud controller manager's Secret");
    assert_eq!(decode(&cpi, "127.0.0.1.username"), "ccm-reader");
    assert_eq!(decode(&cpi, "127.0.0.1.password"), "ccm-password");
    assert!(case
        .kube
        .get("api/v1", "namespaces", "", "vmware-system-csi")
        .is_some());
    let csi = case
        .kube
        .get(
            "api/v1",
            "secrets",
            "vmware-system-csi",
            "vsphere-config-secret",
        )
        .expect("the CSI driver's Secret");
    let conf = decode(&csi, "csi-vsphere.conf");
    let port = case
        .sim
        .url()
        .rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches("/sdk");
    for line in [
        format!("cluster-id = \"{CLUSTER}\""),
        "[VirtualCenter \"127.0.0.1\"]".to_string(),
        format!("user = \"{}\"", vcsim::USER),
        format!("password = \"{}\"", vcsim::PASSWORD),
        format!("port = \"{port}\""),
        "datacenters = \"DC0\"".to_string(),
        "insecure-flag = \"true\"".to_string(),
    ] {
        assert!(conf.lines().any(|l| l == line), "`{line}` not in\n{conf}");
    }
}

#[test]
fn vsphere_cluster_validates_rolls_and_dumps() {
    if !vcsim::vcsim_available() {
        return;
    }
    let sim = Vcsim::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let state = file_url(&dir.path().join("state"));
    let kube = FakeApi::start();
    // The kubeconfig `update cluster` would export: its context is named
    // after the cluster.
    std::fs::write(
        dir.path().join("kubeconfig"),
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    server: {}\n  name: {CLUSTER}\n\
             contexts:\n- context:\n    cluster: {CLUSTER}\n    user: admin\n  name: {CLUSTER}\n\
             current-context: {CLUSTER}\nusers:\n- name: admin\n  user:\n    token: t\n",
            kube.url
        ),
    )
    .unwrap();
    ok(&sim, &create_args(&sim, CLUSTER, &state, "1"));
    // Images come from a mirror: kube-vip's too.
    let spec = ok(
        &sim,
        &["get", "cluster", CLUSTER, "-o", "yaml", "--state", &state],
    );
    let file = dir.path().join("cluster.yaml");
    std::fs::write(
        &file,
        spec.stdout.replacen(
            "\nspec:\n",
            "\nspec:\n  assets:\n    containerRegistry: registry.example.com\n",
            1,
        ),
    )
    .unwrap();
    ok(
        &sim,
        &["replace", "-f", file.to_str().unwrap(), "--state", &state],
    );
    // No component has a vCenter account of its own yet, and the
    // operator's is not copied unasked: no Secret, one warning each.
    let r = update_yes(&sim, CLUSTER, &state);
    for (secret, var) in [
        (
            "kube-system/vsphere-cloud-secret",
            "VSPHERE_CCM_CREDENTIALS_FILE",
        ),
        (
            "vmware-system-csi/vsphere-config-secret",
            "VSPHERE_CSI_CREDENTIALS_FILE",
        ),
    ] {
        assert!(
            r.stderr
                .contains(&format!("the Secret {secret} was not written"))
                && r.stderr.contains(var),
            "{}",
            r.stderr
        );
    }
    assert!(!r.stderr.contains("is not reachable yet"), "{}", r.stderr);
    addons_and_images(&dir.path().join("state").join(CLUSTER), sim.url());
    let case = Case {
        sim,
        kube,
        state,
        dir,
        env: Default::default(),
    };
    let mut steps: Vec<(String, String)> = Vec::new();
    let first = case.vms();
    assert_eq!(first.len(), 3, "{first:?}");

    // validate: a node per VM (matched by BIOS uuid), the control plane's
    // pods: valid.
    let mut known = BTreeMap::new();
    case.sync(&mut known);
    let r = case.kops_ok(&["validate", "cluster", CLUSTER]);
    assert!(r.stdout.contains("is ready"), "{}", r.stdout);
    for vm in first.keys() {
        assert!(r.stdout.contains(vm.as_str()), "{}", r.stdout);
    }
    steps.push(("validate cluster (3 VMs, valid)".into(), calls(&r)));
    // `get instances` reads the same listing: each VM by its BIOS UUID,
    // with its node's name from the API, its group, role and address.
    let r = case.kops_ok(&["get", "instances", CLUSTER, "-o", "json"]);
    let rows: Vec<Value> = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(rows.len(), first.len(), "{}", r.stdout);
    for (vm, (uuid, _)) in &first {
        let row = rows
            .iter()
            .find(|row| row["nodeName"] == vm.as_str())
            .unwrap_or_else(|| panic!("no row for {vm}: {}", r.stdout));
        assert_eq!(row["id"], uuid.to_ascii_lowercase(), "{row}");
        assert_eq!(row["status"], "UpToDate", "{row}");
        assert!(
            vm.starts_with(row["instanceGroup"].as_str().unwrap()),
            "{row}"
        );
    }
    steps.push(("get instances (3 VMs, node names)".into(), calls(&r)));

    // Once the API answers, `update --yes` writes the components' vCenter
    // credentials there (and only there), then leaves them alone: the cloud
    // controller manager's own account from its file, and, asked for with
    // the flag and warned about, the operator's for the CSI driver.
    let account = case.dir.path().join("ccm-account");
    std::fs::write(&account, "ccm-reader\nccm-password\n").unwrap();
    case.env.lock().unwrap().push((
        "VSPHERE_CCM_CREDENTIALS_FILE".into(),
        account.display().to_string(),
    ));
    case.kube.take_requests();
    let r = case.kops_ok(&[
        "update",
        "cluster",
        CLUSTER,
        "--yes",
        "--vsphere-copy-operator-credentials",
    ]);
    assert!(
        r.stderr.contains(&format!(
            "copied your own vCenter account `{}` into the Secret vmware-system-csi/vsphere-config-secret",
            vcsim::USER
        )) && !r.stderr.contains("into the Secret kube-system/vsphere-cloud-secret"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains(
            "Secrets kube-system/vsphere-cloud-secret, vmware-system-csi/vsphere-config-secret"
        ),
        "{}",
        r.stderr
    );
    component_secrets(&case);
    let requests = case.kube.take_requests();
    let writes = requests.iter().filter(|q| !q.starts_with("GET ")).count();
    assert_eq!(writes, 3, "{requests:?}");
    steps.push((
        "update --yes writing the Secrets (Kubernetes API)".into(),
        format!("{} requests, {writes} writes", requests.len()),
    ));
    let r = case.kops_ok(&["update", "cluster", CLUSTER, "--yes"]);
    assert!(!r.stderr.contains("Secrets"), "{}", r.stderr);
    let writes: Vec<String> = case
        .kube
        .take_requests()
        .into_iter()
        .filter(|q| !q.starts_with("GET "))
        .collect();
    assert!(writes.is_empty(), "{writes:?}");
    no_credentials_in(&case.dir.path().join("state"));

    // A VM whose node has not joined fails validation, as kops words it.
    let worker = format!("nodes-a-1.{CLUSTER}");
    let uuid = first[&worker].0.clone();
    case.kube.delete("api/v1", "nodes", "", &worker);
    let r = case.kops(&["validate", "cluster", CLUSTER, "-o", "json"]);
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains(&format!(
            "machine \\\"{uuid}\\\" has not yet joined cluster"
        )),
        "{}",
        r.stdout
    );
    known.remove(&worker);
    case.sync(&mut known);

    // A user-data change: nodes-b's VM needs an update.
    edit_group(
        &case.sim,
        case.dir.path(),
        &case.state,
        CLUSTER,
        "nodes-b",
        &|yaml: &str| {
            yaml.replace(
                "  nodeLabels:\n",
                "  nodeLabels:\n    example.com/rolled: \"yes\"\n",
            )
        },
    );
    update_yes(&case.sim, CLUSTER, &case.state);
    let r = case.kops_ok(&["rolling-update", "cluster", CLUSTER]);
    assert!(
        r.stdout
            .lines()
            .any(|l| l.starts_with("nodes-b") && l.contains("NeedsUpdate")),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("Must specify --yes"), "{}", r.stdout);
    steps.push(("rolling-update (plan, 1 VM needs update)".into(), calls(&r)));

    // With the Kubernetes API: cordon, evict, destroy, clone, wait for the
    // node, validate.
    case.kube.take_requests();
    let old = format!("nodes-b-1.{CLUSTER}");
    let r = case.kops_with_kubelet(
        &[&["rolling-update", "cluster", CLUSTER, "--yes"], FAST_ROLL].concat(),
        &mut known,
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    steps.push((
        "rolling-update --yes (1 VM, drain, validate)".into(),
        calls(&r),
    ));
    let requests = case.kube.take_requests();
    kubelet::assert_drained(&requests, &r.stderr, &old);
    assert!(r.stderr.contains("cluster validated"), "{}", r.stderr);
    let after = case.vms();
    assert!(!after.contains_key(&old), "{after:?}");
    assert!(
        after.contains_key(&format!("nodes-b-2.{CLUSTER}")),
        "{after:?}"
    );
    for (vm, (uuid, _)) in &first {
        if vm != &old {
            assert_eq!(&after[vm].0, uuid, "{vm} was replaced");
        }
    }
    let r = case.kops_ok(&["rolling-update", "cluster", CLUSTER]);
    assert!(
        r.stdout.contains("No rolling-update required"),
        "{}",
        r.stdout
    );

    // delete instance: vSphere cannot surge (as kops on GCE); the default
    // --surge is refused with the hint, nothing replaced.
    let r = case.kops(&["delete", "instance", &worker, "--name", CLUSTER, "--yes"]);
    assert_ne!(r.code, 0);
    assert!(
        r.stderr
            .contains("vsphere cloud provider does not support surging"),
        "{}",
        r.stderr
    );
    // Without surge: drained, destroyed, cloned under a new name.
    case.kube.take_requests();
    let r = case.kops_with_kubelet(
        &[
            &[
                "delete",
                "instance",
                &worker,
                "--name",
                CLUSTER,
                "--yes",
                "--surge=false",
            ][..],
            &FAST_ROLL[2..],
        ]
        .concat(),
        &mut known,
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    kubelet::assert_drained(&case.kube.take_requests(), &r.stderr, &worker);
    let now = case.vms();
    assert!(!now.contains_key(&worker), "{now:?}");
    assert_eq!(now.len(), 3, "{now:?}");

    // toolbox dump: the folder and the VMs, each instance with its role.
    let r = case.kops_ok(&["toolbox", "dump", CLUSTER, "-o", "json"]);
    steps.push(("toolbox dump".into(), calls(&r)));
    let dump: Value = serde_json::from_str(&r.stdout).unwrap();
    let instances = dump["instances"].as_array().unwrap();
    assert_eq!(instances.len(), 3, "{dump}");
    let roles: Vec<&Value> = instances.iter().map(|i| &i["roles"]).collect();
    assert_eq!(
        roles,
        [
            &json!(["control-plane"]),
            &json!(["node"]),
            &json!(["node"])
        ],
        "{dump}"
    );
    let kinds: Vec<&str> = dump["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["type"].as_str())
        .collect();
    assert_eq!(kinds.iter().filter(|k| **k == "VirtualMachine").count(), 3);
    assert!(kinds.contains(&"Folder"), "{kinds:?}");

    for (step, calls) in steps {
        println!("{step}: {calls}");
    }
}
