//! `update cluster`'s choices on a GCE cluster, through the binary,
//! against the GCE API test server on kops' `minimal_gce` case:
//! `--instance-group` and `--instance-group-roles` change only the chosen
//! groups' instance templates; `--phase network|security|cluster` changes
//! only that phase's kinds (kops' GCE phases), the cluster phase refusing
//! to run while a security resource is missing; a state store last written
//! by a newer kops refuses the update, before any Google call, unless
//! `--allow-kops-downgrade`.

use std::collections::BTreeMap;

use crate::gce_lifecycle::by_method;
use crate::gce_roll::{applied, Case};

/// The project's instance templates: name → machine type.
fn templates(case: &Case) -> BTreeMap<String, String> {
    case.api
        .paths()
        .into_iter()
        .filter(|p| p.contains("/global/instanceTemplates/"))
        .filter_map(|p| {
            let t = case.api.get(&p)?;
            let name = p.rsplit('/').next()?.to_string();
            Some((name, t["properties"]["machineType"].as_str()?.to_string()))
        })
        .collect()
}

/// The machine types of the templates whose names start with `group`.
fn machine_types(case: &Case, group: &str) -> Vec<String> {
    let mut out: Vec<String> = templates(case)
        .into_iter()
        .filter(|(n, _)| n.starts_with(&format!("{group}-")))
        .map(|(_, m)| m)
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The writes of the calls since the last look, by method (the number of
/// calls in all is printed).
fn writes(case: &Case) -> BTreeMap<String, usize> {
    let calls = case.api.take_calls();
    let writes: Vec<_> = calls.iter().filter(|c| c.is_write()).cloned().collect();
    println!("{} calls, {} writes", calls.len(), writes.len());
    by_method(&writes)
}

#[test]
fn gce_update_chooses_groups_and_phases_and_refuses_a_downgrade() {
    let Some(case) = applied() else {
        return;
    };
    let name = case.name.clone();
    assert_eq!(machine_types(&case, "nodes"), ["e2-medium"]);
    assert_eq!(machine_types(&case, "master-us-test1-a"), ["e2-medium"]);

    // Both groups change; --instance-group nodes applies the nodes' only.
    case.replace_machine_type("nodes", "e2-medium", "e2-standard-2");
    case.replace_machine_type("master-us-test1-a", "e2-medium", "e2-standard-4");
    case.api.take_calls();
    case.kops_ok(&[
        "update",
        "cluster",
        &name,
        "--instance-group",
        "nodes",
        "--yes",
    ]);
    let w = writes(&case);
    println!("--instance-group nodes --yes: writes {w:?}");
    assert_eq!(w.get("compute.instanceTemplates.insert"), Some(&1), "{w:?}");
    assert!(machine_types(&case, "nodes").contains(&"e2-standard-2".to_string()));
    assert_eq!(machine_types(&case, "master-us-test1-a"), ["e2-medium"]);

    // --instance-group-roles control-plane: now the control plane's.
    case.kops_ok(&[
        "update",
        "cluster",
        &name,
        "--instance-group-roles",
        "control-plane",
        "--yes",
    ]);
    let w = writes(&case);
    println!("--instance-group-roles control-plane --yes: writes {w:?}");
    assert_eq!(w.get("compute.instanceTemplates.insert"), Some(&1), "{w:?}");
    assert!(machine_types(&case, "master-us-test1-a").contains(&"e2-standard-4".to_string()));
    let r = case.kops_ok(&["update", "cluster", &name]);
    assert!(
        r.stderr.contains("No changes need to be applied"),
        "{}",
        r.stderr
    );

    // Phases: a firewall rule goes missing (security) and the nodes change
    // again (cluster).
    let firewall = case
        .api
        .paths()
        .into_iter()
        .find(|p| p.contains("/global/firewalls/") && p.contains("ssh-external-to-node"))
        .expect("the nodes' SSH firewall rule");
    assert!(case.api.remove(&firewall));
    case.replace_machine_type("nodes", "e2-standard-2", "e2-standard-8");
    case.api.take_calls();

    // The network phase: nothing of the rest is touched.
    case.kops_ok(&["update", "cluster", &name, "--phase", "network", "--yes"]);
    let w = writes(&case);
    println!("--phase network --yes: writes {w:?}");
    assert!(w.is_empty(), "--phase network wrote {w:?}");
    assert!(case.api.get(&firewall).is_none());

    // The security phase puts the rule back, and only that.
    case.kops_ok(&["update", "cluster", &name, "--phase", "security", "--yes"]);
    let w = writes(&case);
    println!("--phase security --yes: writes {w:?}");
    assert_eq!(
        w,
        BTreeMap::from([("compute.firewalls.insert".to_string(), 1)])
    );
    assert!(case.api.get(&firewall).is_some());
    assert!(!machine_types(&case, "nodes").contains(&"e2-standard-8".to_string()));

    // The cluster phase needs the security phase's resources: with the
    // rule gone again, the run fails naming it (the tasks that do not
    // need it may have run, as in kops) and changes no firewall rule.
    assert!(case.api.remove(&firewall));
    let r = case.kops(&["update", "cluster", &name, "--phase", "cluster", "--yes"]);
    assert_ne!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("ssh-external-to-node"), "{}", r.stderr);
    let w = writes(&case);
    assert!(
        w.keys().all(|m| !m.starts_with("compute.firewalls.")),
        "the cluster phase changed a firewall rule: {w:?}"
    );
    case.kops_ok(&["update", "cluster", &name, "--phase", "security", "--yes"]);
    case.api.take_calls();

    // Now the cluster phase applies the nodes' template.
    case.kops_ok(&["update", "cluster", &name, "--phase", "cluster", "--yes"]);
    let w = writes(&case);
    println!("--phase cluster --yes: writes {w:?}");
    assert!(
        w.keys().all(|m| !m.starts_with("compute.firewalls.")),
        "{w:?}"
    );
    assert!(machine_types(&case, "nodes").contains(&"e2-standard-8".to_string()));

    // A newer kops last wrote the store: refused before any Google call.
    let version = case
        .dir
        .path()
        .join(format!("state/{name}/kops-version.txt"));
    std::fs::write(&version, "1.99.0").unwrap();
    let r = case.kops(&["update", "cluster", &name, "--yes"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("last updated by kops 1.99.0"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("--allow-kops-downgrade"), "{}", r.stderr);
    assert!(
        case.api.take_calls().is_empty(),
        "a refused update called Google"
    );
    // Allowed with the flag. (The case's configBase, memfs://, is not this
    // store, so kops-version.txt is not kops-rs' to rewrite here: as on
    // AWS, the addons, channel and version file go to the config base only.)
    let r = case.kops_ok(&["update", "cluster", &name, "--allow-kops-downgrade"]);
    assert!(!r.stderr.contains("last updated by"), "{}", r.stderr);
    assert!(r.stderr.contains("Google Cloud calls"), "{}", r.stderr);
}
