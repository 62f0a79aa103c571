//! The rest of a GCE cluster's lifecycle through the binary, against the
//! GCE API test server and kops-testkit's Kubernetes API: `get instances`,
//! `validate cluster`, `rolling-update cluster` (cloud only, then with
//! drains and validation), `delete instance` and `toolbox dump`, on
//! kops' `minimal_gce` case after a spec change that gives the nodes a new
//! instance template.
//!
//! The test plays kubelet: a thread registers a Ready node for every
//! instance the test server runs (provider ID `gce://<project>/<zone>/<name>`),
//! with the control-plane pods on control-plane nodes and an application
//! pod on workers, and registers it again when the instance is recreated
//! (same name, new id).

use std::collections::BTreeMap;

use kops_testkit::kube_api::FakeApi;
use kops_testkit::GceApi;
use serde_json::{json, Value};

use crate::common::kubelet::{self, FAST_ROLL};
use crate::common::{command, file_url, Run};
use crate::gce_lifecycle::{by_method, cluster_name, seed};

pub(crate) struct Case {
    pub(crate) api: GceApi,
    kube: FakeApi,
    pub(crate) name: String,
    state: String,
    pub(crate) dir: tempfile::TempDir,
}

impl Case {
    pub(crate) fn kops(&self, args: &[&str]) -> Run {
        let mut c = command(args);
        c.args(["--state", &self.state]);
        for (k, v) in self.api.env() {
            c.env(k, v);
        }
        // `update cluster --yes` writes the cluster's own kubeconfig: not
        // over the one of the test's Kubernetes API.
        let kubeconfig = if args.first() == Some(&"update") {
            "kubeconfig-update"
        } else {
            "kubeconfig"
        };
        c.env("KUBECONFIG", self.dir.path().join(kubeconfig));
        c.output().expect("run kops").into()
    }

    pub(crate) fn kops_ok(&self, args: &[&str]) -> Run {
        self.kops(args).expect_ok(args)
    }

    /// The project's instances: name → (zone, numeric id, template name).
    fn instances(&self) -> BTreeMap<String, (String, String, String)> {
        let mut out = BTreeMap::new();
        for path in self.api.paths() {
            let parts: Vec<&str> = path.split('/').collect();
            if parts.len() != 8 || parts[6] != "instances" {
                continue;
            }
            let Some(i) = self.api.get(&path) else {
                continue;
            };
            let template = i["metadata"]["items"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|m| m["key"] == "instance-template")
                .and_then(|m| m["value"].as_str())
                .and_then(|t| t.rsplit('/').next())
                .unwrap_or_default()
                .to_string();
            out.insert(
                parts[7].to_string(),
                (
                    parts[5].to_string(),
                    i["id"].as_str().unwrap_or_default().to_string(),
                    template,
                ),
            );
        }
        out
    }

    /// Registers a node for each instance (again for a recreated one) and
    /// removes the nodes of instances that are gone; `known` is name → id.
    fn sync_nodes(&self, known: &mut BTreeMap<String, String>) {
        let running = self.instances();
        let stale: Vec<String> = known
            .iter()
            .filter(|(name, id)| running.get(*name).map(|r| &r.1) != Some(*id))
            .map(|(name, _)| name.clone())
            .collect();
        for name in stale {
            kubelet::unregister(&self.kube, &name);
            known.remove(&name);
        }
        for (name, (zone, id, _)) in running {
            if known.contains_key(&name) {
                continue;
            }
            let path = format!("compute/v1/projects/testproject/zones/{zone}/instances/{name}");
            let labels = self.api.get(&path).map(|i| i["labels"].clone());
            let control_plane = labels
                .as_ref()
                .is_some_and(|l| l.get("k8s-io-role-control-plane").is_some());
            kubelet::register(
                &self.kube,
                &name,
                &format!("gce://testproject/{zone}/{name}"),
                json!({"topology.kubernetes.io/zone": zone}),
                control_plane,
            );
            known.insert(name, id);
        }
    }

    /// Runs `kops ARGS` while a thread keeps the nodes in step with the
    /// instances.
    fn kops_with_kubelet(&self, args: &[&str], known: &mut BTreeMap<String, String>) -> Run {
        let (r, synced) = kubelet::while_syncing(
            known.clone(),
            |mine| self.sync_nodes(mine),
            || self.kops(args),
        );
        *known = synced;
        r
    }

    /// Changes a group's machine type in the state store only.
    pub(crate) fn replace_machine_type(&self, group: &str, from: &str, to: &str) {
        let r = self.kops_ok(&["get", "ig", group, "--name", &self.name, "-o", "yaml"]);
        let yaml = r.stdout.replace(
            &format!("machineType: {from}"),
            &format!("machineType: {to}"),
        );
        let file = self.dir.path().join(format!("{group}.yaml"));
        std::fs::write(&file, yaml).unwrap();
        self.kops_ok(&["replace", "-f", file.to_str().unwrap()]);
    }

    fn set_machine_type(&self, group: &str, from: &str, to: &str) {
        self.replace_machine_type(group, from, to);
        self.kops_ok(&["update", "cluster", &self.name, "--yes"]);
    }
}

/// The minimal_gce case applied; `None` (skipped) without kops' data or
/// the test server's discovery documents.
pub(crate) fn applied() -> Option<Case> {
    let shared = kops_testkit::shared_dir()?;
    let input = shared.join("conformance/kops/update_cluster/minimal_gce/in-v1alpha2.yaml");
    if !input.is_file() {
        eprintln!("skipping: {} not found", input.display());
        return None;
    }
    let api = kops_testkit::require_gce_api()?;
    api.set_page_size(Some(2));
    let dir = tempfile::tempdir().unwrap();
    let manifest = std::fs::read_to_string(&input).unwrap();
    let name = cluster_name(&manifest);
    seed(&api, &manifest, &name);
    let kube = FakeApi::start();
    kube.write_kubeconfig(dir.path());
    let case = Case {
        api,
        kube,
        state: file_url(&dir.path().join("state")),
        name,
        dir,
    };
    case.kops_ok(&["create", "-f", input.to_str().unwrap()]);
    case.kops_ok(&["update", "cluster", &case.name, "--yes"]);
    Some(case)
}

fn json_rows(r: &Run) -> Vec<Value> {
    serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{e}: {}", r.stdout))
}

#[test]
fn gce_cluster_validates_rolls_and_replaces_instances() {
    let Some(case) = applied() else {
        return;
    };
    let name = case.name.clone();
    let first = case.instances();
    assert_eq!(first.len(), 3, "{first:?}");

    // get instances: from the cloud; without nodes no node names.
    let r = case.kops_ok(&["get", "instances", &name, "-o", "json"]);
    let rows = json_rows(&r);
    assert_eq!(rows.len(), 3, "{rows:?}");
    for row in &rows {
        let id = row["id"].as_str().unwrap();
        assert!(first.contains_key(id), "{row}");
        assert_eq!(row["status"], "UpToDate", "{row}");
        assert!(row["internalIP"].as_str().is_some_and(|ip| !ip.is_empty()));
        assert_eq!(row["machineType"], "e2-medium");
    }
    assert!(rows.iter().any(|r| r["roles"] == json!(["control-plane"])));

    // validate: a node per instance, the control plane's pods: valid.
    let mut known = BTreeMap::new();
    case.sync_nodes(&mut known);
    let r = case.kops_ok(&["validate", "cluster", &name]);
    assert!(r.stdout.contains("is ready"), "{}", r.stdout);
    let r = case.kops_ok(&["get", "instances", &name]);
    for instance in first.keys() {
        assert!(r.stdout.contains(instance), "{}", r.stdout);
    }

    // A node that has not joined fails validation, as kops words it.
    let (worker, _) = first
        .iter()
        .find(|(n, _)| n.contains("nodes"))
        .expect("a worker");
    let worker = worker.clone();
    case.kube.delete("api/v1", "nodes", "", &worker);
    let r = case.kops(&["validate", "cluster", &name, "-o", "json"]);
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains(&format!(
            "machine \\\"{worker}\\\" has not yet joined cluster"
        )),
        "{}",
        r.stdout
    );
    known.remove(&worker);
    case.sync_nodes(&mut known);

    // A spec change gives the nodes a new template: their instances need an update.
    case.set_machine_type("nodes", "e2-medium", "e2-standard-2");
    let r = case.kops_ok(&["rolling-update", "cluster", &name, "--cloudonly"]);
    assert!(r.stdout.contains("NeedsUpdate"), "{}", r.stdout);
    assert!(r.stdout.contains("Must specify --yes"), "{}", r.stdout);
    let r = case.kops_ok(&["get", "instances", &name, "-o", "json"]);
    let needs: Vec<String> = json_rows(&r)
        .iter()
        .filter(|r| r["status"] == "NeedsUpdate")
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(needs.len(), 2, "{}", r.stdout);

    // --cloudonly --yes: each node instance recreated (same name, new id,
    // the new template); the control plane is untouched.
    case.api.take_calls();
    let r = case.kops_ok(
        &[
            &["rolling-update", "cluster", &name, "--cloudonly", "--yes"],
            FAST_ROLL,
        ]
        .concat(),
    );
    let calls = case.api.take_calls();
    let after = case.instances();
    assert_eq!(after.len(), 3);
    for (instance, (zone, id, template)) in &first {
        let (z, new_id, new_template) = &after[instance];
        assert_eq!(z, zone);
        if needs.contains(instance) {
            assert_ne!(new_id, id, "{instance} was not recreated\n{}", r.stderr);
            assert_ne!(new_template, template);
        } else {
            assert_eq!(new_id, id, "{instance} was recreated");
        }
    }
    let methods = by_method(&calls);
    assert_eq!(
        methods["compute.instanceGroupManagers.recreateInstances"],
        2
    );
    assert!(!calls
        .iter()
        .any(|c| c.is_write() && c.method != "compute.instanceGroupManagers.recreateInstances"));
    println!(
        "rolling-update --cloudonly of 2 instances: {} calls {methods:?}",
        calls.len()
    );
    let r = case.kops_ok(&["rolling-update", "cluster", &name, "--cloudonly"]);
    assert!(
        r.stdout.contains("No rolling-update required"),
        "{}",
        r.stdout
    );

    // With the Kubernetes API: each node drained (its pod evicted) and the
    // cluster validated after each replacement.
    case.sync_nodes(&mut known);
    case.set_machine_type("nodes", "e2-standard-2", "e2-standard-4");
    case.kube.take_requests();
    let before = case.instances();
    let r = case.kops_with_kubelet(
        &[&["rolling-update", "cluster", &name, "--yes"], FAST_ROLL].concat(),
        &mut known,
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let requests = case.kube.take_requests();
    let replaced = case.instances();
    for instance in &needs {
        assert_ne!(replaced[instance].1, before[instance].1, "{}", r.stderr);
        kubelet::assert_drained(&requests, &r.stderr, instance);
    }
    assert!(r.stderr.contains("cluster validated"), "{}", r.stderr);

    // delete instance: GCE cannot surge, as kops says; without surge the
    // group recreates it.
    let target = needs[0].clone();
    let r = case.kops(&["delete", "instance", &target, "--name", &name, "--yes"]);
    assert_ne!(r.code, 0);
    assert!(
        r.stderr.contains("does not support surging"),
        "{}",
        r.stderr
    );
    let before = case.instances();
    let r = case.kops_with_kubelet(
        &[
            &[
                "delete",
                "instance",
                &target,
                "--name",
                &name,
                "--yes",
                "--surge=false",
            ][..],
            &FAST_ROLL[2..],
        ]
        .concat(),
        &mut known,
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let now = case.instances();
    assert_ne!(now[&target].1, before[&target].1);
    assert_eq!(now.len(), 3);
    let r = case.kops(&[
        "delete",
        "instance",
        "no-such-instance",
        "--name",
        &name,
        "--cloudonly",
    ]);
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("not found"), "{}", r.stderr);

    // toolbox dump: instances with addresses and roles, the groups.
    let r = case.kops_ok(&["toolbox", "dump", &name, "-o", "json"]);
    let dump: Value = serde_json::from_str(&r.stdout).unwrap();
    let instances = dump["instances"].as_array().unwrap();
    assert_eq!(instances.len(), 3, "{dump}");
    assert!(instances.iter().all(|i| i["privateAddresses"]
        .as_array()
        .is_some_and(|a| !a.is_empty())));
    let kinds: Vec<&str> = dump["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["type"].as_str())
        .collect();
    // (minimal_gce's API has DNS and no load balancer: no address to list.)
    for kind in ["InstanceGroupManager", "Instance"] {
        assert!(kinds.contains(&kind), "{kinds:?}");
    }
}
