//! The bootstrap channel (`addons/bootstrap-channel.yaml`) kops-rs writes
//! against the one kops writes, per AWS case of kops' suite in ../shared
//! (read at run time; skipped with a reason when absent): the same addons in
//! the same order, each with the same id, manifest, selector, `needsPKI`,
//! `needsRollingUpdate` and `prune` kinds. A channel that differs only there
//! makes kops-rs plan a rewrite of the channel on every cluster kops made
//! with that shape (and kops one on kops-rs' clusters).
//!
//! Manifest hashes are left out here: they follow the addon manifests, whose
//! conformance `bench/addon_conformance.py` measures (kops' goldens carry
//! its mock account, partition and version); kops-controller's differs by
//! design.

use serde_json::Value;

use kops_model::Model;

use crate::common::{self, SSH_KEY};

/// The channel's addon entries without their manifest hashes.
fn entries(channel: &str) -> Vec<Value> {
    let channel: Value = serde_yaml_ng::from_str(channel).expect("a channel");
    channel["spec"]["addons"]
        .as_array()
        .expect("spec.addons")
        .iter()
        .cloned()
        .map(|mut entry| {
            entry
                .as_object_mut()
                .expect("an addon")
                .remove("manifestHash");
            entry
        })
        .collect()
}

/// What differs between two addon lists, one line per addon.
fn differences(kops: &[Value], ours: &[Value]) -> Vec<String> {
    let names = |list: &[Value]| -> Vec<String> {
        list.iter()
            .map(|e| e["name"].as_str().unwrap_or("?").to_string())
            .collect()
    };
    if names(kops) != names(ours) {
        return vec![format!(
            "addons: kops {:?}, kops-rs {:?}",
            names(kops),
            names(ours)
        )];
    }
    kops.iter()
        .zip(ours)
        .filter(|(k, o)| k != o)
        .map(|(k, o)| {
            let (k, o) = (k.as_object().unwrap(), o.as_object().unwrap());
            let fields: Vec<String> = k
                .keys()
                .chain(o.keys())
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .filter(|f| k.get(*f) != o.get(*f))
                .map(|f| format!("{f}: kops {:?}, kops-rs {:?}", k.get(f), o.get(f)))
                .collect();
            format!(
                "{}: {}",
                k["name"].as_str().unwrap_or("?"),
                fields.join("; ")
            )
        })
        .collect()
}

#[test]
fn channel_entries_are_kops_in_every_aws_case() {
    let cases = common::kops_aws_cases();
    if cases.is_empty() {
        return;
    }
    let (mut compared, mut differ) = (0, Vec::new());
    for case in &cases {
        let Some(golden) = std::fs::read_dir(case.dir.join("data"))
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .find(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().ends_with("-addons-bootstrap_content"))
            })
        else {
            continue;
        };
        let golden = std::fs::read_to_string(golden).unwrap();
        let cluster = kops_api::populate::with_api_access(&case.cluster, Some(&case.groups));
        let config_base = cluster.spec.config_base.clone().unwrap_or_default();
        let model = Model {
            cluster: &cluster,
            groups: &case.groups,
            ssh_public_key: Some(SSH_KEY),
            node_inputs: None,
            account_id: Some("123456789012"),
            config_base: &config_base,
        };
        let files = match kops_model::files::state_files(&model, "", Vec::new()) {
            Ok(files) => files,
            Err(e) => {
                differ.push(format!("{}: no state files: {e}", case.name));
                continue;
            }
        };
        let ours = files
            .iter()
            .find(|f| f.path == "addons/bootstrap-channel.yaml")
            .expect("a bootstrap channel");
        compared += 1;
        for d in differences(
            &entries(&golden),
            &entries(&String::from_utf8_lossy(&ours.contents)),
        ) {
            differ.push(format!("{}: {d}", case.name));
        }
    }
    eprintln!(
        "bootstrap channel entries as kops' in {}/{compared} cases",
        compared
            - differ
                .iter()
                .map(|d| d.split(':').next())
                .collect::<std::collections::BTreeSet<_>>()
                .len()
    );
    for d in &differ {
        eprintln!("  {d}");
    }
    assert!(compared >= 30, "only {compared} cases compared");
    assert!(differ.is_empty(), "{differ:#?}");
}
