//! Every input of kops' `update cluster` golden cases (kops accepts them
//! all) must pass the checks kops-rs adds for quantities, volume types,
//! egress values, port ranges and subnet references: a check stricter than
//! kops would refuse a cluster kops runs. The GCE inputs must pass every
//! check.

use std::path::Path;

use kops_api::manifest::{parse_objects, Object};
use kops_api::validation::{validate_cluster, validate_instance_group};
use kops_api::{Cluster, FieldError};

/// Each case's name, cluster, and what validation says of the cluster and
/// its groups; `None` when kops' cases are absent.
fn validated_cases() -> Option<Vec<(String, Cluster, Vec<FieldError>)>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/conformance/kops/update_cluster");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        println!("skipped: {} is absent", dir.display());
        return None;
    };
    let mut cases = Vec::new();
    for entry in entries.flatten() {
        let Ok(text) = std::fs::read_to_string(entry.path().join("in-v1alpha2.yaml")) else {
            continue;
        };
        let Ok(objects) = parse_objects("in-v1alpha2.yaml", &text) else {
            continue;
        };
        let Some(cluster) = objects.iter().find_map(|o| match o {
            Object::Cluster(c) => Some(c.as_ref().clone()),
            _ => None,
        }) else {
            continue;
        };
        let mut errors = validate_cluster(&cluster);
        for o in &objects {
            if let Object::InstanceGroup(ig) = o {
                errors.extend(validate_instance_group(ig, Some(&cluster)));
            }
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        cases.push((name, cluster, errors));
    }
    Some(cases)
}

#[test]
fn kops_update_cluster_inputs_pass_the_added_checks() {
    let Some(cases) = validated_cases() else {
        return;
    };
    let added = [
        "Kubernetes quantity",
        "EBS volume type",
        "egress",
        "serviceNodePortRange",
        "loadBalancer.subnets",
        "spec.volumes",
        "spec.iam.profile",
        "applies to",
        "gossip DNS",
        "prefix lists",
    ];
    let mut wrong = Vec::new();
    for (name, _, errors) in &cases {
        for e in errors {
            let text = e.to_string();
            if added.iter().any(|a| text.contains(a)) {
                wrong.push(format!("{name}: {text}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    println!("{} cases pass the added checks", cases.len());
}

/// kops' GCE update cases are GCE clusters kops runs: the GCE rules
/// (regional subnets, zones of groups, machine types, fields of other
/// clouds) must accept every one of them.
#[test]
fn kops_gce_inputs_pass_the_gce_checks() {
    let Some(cases) = validated_cases() else {
        return;
    };
    let gce: Vec<_> = cases
        .iter()
        .filter(|(_, c, _)| c.spec.cloud_provider.as_deref() == Some("gce"))
        .collect();
    let wrong: Vec<String> = gce
        .iter()
        .flat_map(|(name, _, errors)| errors.iter().map(move |e| format!("{name}: {e}")))
        .collect();
    assert!(!gce.is_empty(), "no GCE cases");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    println!("{} GCE cases are valid", gce.len());
}
