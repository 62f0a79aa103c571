//! Every input of kops' `update cluster` golden cases (kops accepts them
//! all) must pass the checks kops-rs adds for quantities, volume types,
//! egress values, port ranges and subnet references: a check stricter than
//! kops would refuse a cluster kops runs.

use std::path::Path;

use kops_api::manifest::{parse_objects, Object};
use kops_api::validation::{validate_cluster, validate_instance_group};

#[test]
fn kops_update_cluster_inputs_pass_the_added_checks() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/conformance/kops/update_cluster");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        println!("skipped: {} is absent", dir.display());
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
    let mut checked = 0;
    let mut wrong = Vec::new();
    for entry in entries.flatten() {
        let Ok(text) = std::fs::read_to_string(entry.path().join("in-v1alpha2.yaml")) else {
            continue;
        };
        let Ok(objects) = parse_objects("in-v1alpha2.yaml", &text) else {
            continue;
        };
        let cluster = objects.iter().find_map(|o| match o {
            Object::Cluster(c) => Some(c.as_ref()),
            _ => None,
        });
        let mut errors = cluster.map(validate_cluster).unwrap_or_default();
        for o in &objects {
            if let Object::InstanceGroup(ig) = o {
                errors.extend(validate_instance_group(ig, cluster));
            }
        }
        checked += 1;
        for e in errors {
            let text = e.to_string();
            if added.iter().any(|a| text.contains(a)) {
                wrong.push(format!("{}: {text}", entry.file_name().to_string_lossy()));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    println!("{checked} cases pass the added checks");
}

/// kops' GCE update cases are GCE clusters kops runs: the GCE rules
/// (regional subnets, zones of groups, machine types, fields of other
/// clouds) must accept every one of them.
#[test]
fn kops_gce_inputs_pass_the_gce_checks() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/conformance/kops/update_cluster");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        println!("skipped: {} is absent", dir.display());
        return;
    };
    let mut checked = 0;
    let mut wrong = Vec::new();
    for entry in entries.flatten() {
        let Ok(text) = std::fs::read_to_string(entry.path().join("in-v1alpha2.yaml")) else {
            continue;
        };
        let Ok(objects) = parse_objects("in-v1alpha2.yaml", &text) else {
            continue;
        };
        let Some(cluster) = objects.iter().find_map(|o| match o {
            Object::Cluster(c) => Some(c.as_ref()),
            _ => None,
        }) else {
            continue;
        };
        if cluster.spec.cloud_provider.as_deref() != Some("gce") {
            continue;
        }
        let mut errors = validate_cluster(cluster);
        for o in &objects {
            if let Object::InstanceGroup(ig) = o {
                errors.extend(validate_instance_group(ig, Some(cluster)));
            }
        }
        checked += 1;
        for e in errors {
            wrong.push(format!("{}: {e}", entry.file_name().to_string_lossy()));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    println!("{checked} GCE cases are valid");
}
