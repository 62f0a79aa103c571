//! kops' GCE update cases applied directly, through the binary, against
//! the GCE API test server (kops-testkit): apply, a second apply that
//! changes nothing, and the calls each makes.

use std::collections::BTreeMap;

use kops_testkit::GceApi;

use crate::common::{command, file_url, Run};

fn kops_on(api: &GceApi, args: &[&str]) -> Run {
    let mut c = command(args);
    for (k, v) in api.env() {
        c.env(k, v);
    }
    c.output().expect("run kops").into()
}

pub(crate) fn cluster_name(manifest: &str) -> String {
    let doc = manifest.split("\n---").next().unwrap_or("");
    doc.lines()
        .skip_while(|l| !l.starts_with("metadata:"))
        .find_map(|l| l.trim().strip_prefix("name: "))
        .unwrap_or("")
        .to_string()
}

/// The project and the DNS zone a case's cluster names.
pub(crate) fn seed(api: &GceApi, manifest: &str, name: &str) {
    let project = manifest
        .lines()
        .find_map(|l| l.trim().strip_prefix("project: "))
        .unwrap_or("testproject");
    let zone = name.split_once('.').map_or(name, |(_, z)| z);
    api.seed(
        &format!(
            "dns/v1/projects/{project}/managedZones/{}",
            zone.replace('.', "-")
        ),
        serde_json::json!({"name": zone.replace('.', "-"), "dnsName": format!("{zone}.")}),
    );
}

/// Calls of one run, by discovery method.
pub(crate) fn by_method(calls: &[kops_testkit::gce_api::Call]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for call in calls {
        *counts.entry(call.method.clone()).or_default() += 1;
    }
    counts
}

fn lifecycle(case_name: &str, fault_rate: f64) {
    let Some(shared) = kops_testkit::shared_dir() else {
        return;
    };
    let case = shared
        .join("conformance/kops/update_cluster")
        .join(case_name);
    if !case.join("in-v1alpha2.yaml").is_file() {
        eprintln!("skipping: {} not found", case.display());
        return;
    }
    let Some(api) = kops_testkit::require_gce_api() else {
        return;
    };
    api.set_page_size(Some(2));
    let work = tempfile::tempdir().unwrap();
    let state = file_url(&work.path().join("state"));
    let input = case.join("in-v1alpha2.yaml");
    let manifest = std::fs::read_to_string(&input).unwrap();
    let name = cluster_name(&manifest);
    seed(&api, &manifest, &name);
    let before = api.paths();
    let r = kops_on(
        &api,
        &["create", "-f", input.to_str().unwrap(), "--state", &state],
    );
    assert_eq!(r.code, 0, "create: {}", r.stderr);
    let key = case.join("id_rsa.pub");
    if key.is_file() {
        let r = kops_on(
            &api,
            &[
                "create",
                "sshpublickey",
                &name,
                "-i",
                key.to_str().unwrap(),
                "--state",
                &state,
            ],
        );
        assert_eq!(r.code, 0, "sshpublickey: {}", r.stderr);
    }
    let r = kops_on(&api, &["update", "cluster", &name, "--state", &state]);
    assert_eq!(r.code, 0, "dry run: {}", r.stderr);
    let dry = api.take_calls();
    assert!(
        !dry.iter().any(|c| c.is_write()),
        "a dry run wrote: {dry:?}"
    );

    api.set_fault_rate(fault_rate);
    let r = kops_on(
        &api,
        &["update", "cluster", &name, "--state", &state, "--yes"],
    );
    assert_eq!(r.code, 0, "apply: {}\n{}", r.stderr, r.stdout);
    let apply = api.take_calls();
    api.set_fault_rate(0.0);
    let r = kops_on(
        &api,
        &["update", "cluster", &name, "--state", &state, "--yes"],
    );
    assert_eq!(r.code, 0, "re-apply: {}", r.stderr);
    let noop = api.take_calls();
    let writes: Vec<_> = noop.iter().filter(|c| c.is_write()).collect();
    assert!(writes.is_empty(), "the second apply wrote: {writes:?}");
    // A list is its first page (later pages carry pageToken).
    let first_pages: Vec<_> = noop
        .iter()
        .filter(|c| !c.query.contains("pageToken"))
        .cloned()
        .collect();
    let lists: BTreeMap<String, usize> = by_method(&first_pages)
        .into_iter()
        .filter(|(m, _)| m.ends_with(".list") || m.ends_with(".aggregatedList"))
        .collect();
    assert!(lists.values().all(|n| *n <= 1), "lists per kind: {lists:?}");
    let created: Vec<String> = api
        .paths()
        .into_iter()
        .filter(|p| !before.contains(p))
        .collect();
    println!(
        "{case_name}: apply {} calls ({} writes, fault rate {fault_rate}), no-op {} calls, {} resources; no-op lists {lists:?}",
        apply.len(),
        apply.iter().filter(|c| c.is_write()).count(),
        noop.len(),
        created.len()
    );
    assert!(
        created
            .iter()
            .any(|p| p.contains("/instanceGroupManagers/")),
        "{created:?}"
    );
}

#[test]
fn minimal_gce_applies_and_reapplies_with_no_change() {
    lifecycle("minimal_gce", 0.0);
}

#[test]
fn ha_gce_applies_and_reapplies_with_no_change() {
    lifecycle("ha_gce", 0.0);
}

#[test]
fn minimal_gce_ilb_applies_and_reapplies_with_no_change() {
    lifecycle("minimal_gce_ilb", 0.0);
}

#[test]
fn minimal_gce_converges_with_a_fifth_of_calls_failing() {
    lifecycle("minimal_gce", 0.2);
}
