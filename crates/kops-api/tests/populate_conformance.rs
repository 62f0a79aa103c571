//! The completed spec against kops' own (`cluster-completed.spec` of every
//! AWS case in `shared/conformance/kops/update_cluster`). Each case's input
//! carries its config base (`memfs://...`, kops' test store) and the
//! hosted zone is the one kops' mock Route 53 holds, so the outputs are
//! comparable line for line.
//!
//! Prints each case's line similarity and the mean, and fails when the mean
//! drops below the level reached, so the populate step cannot regress.
//! Set `POPULATE_OUT=<dir>` to write kops-rs' spec for each case there.

use std::path::{Path, PathBuf};

use kops_api::manifest::to_yaml;
use kops_api::populate::{completed_spec, PopulateOptions};
use kops_api::{Cluster, InstanceGroup, Object};

/// The zone kops' test harness puts in its mock Route 53 for `example.com`.
const MOCK_ZONE_ID: &str = "Z1AFAKE1ZON3YO";

/// The mean similarity reached; the test fails below it.
const MEAN_FLOOR: f64 = 0.999;
/// Cases identical to kops' (the others: a Go quantity `3140m` our typed
/// field keeps as `3.14` (2), a 64-zero hash the YAML writer single-quotes
/// (1), a subnet zone kops looks up by id in the cloud (1)).
const EXACT_FLOOR: usize = 43;

fn cases_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance/kops/update_cluster")
}

/// difflib-style ratio over lines: 2 * (lines in a longest common
/// subsequence) / (lines of both).
fn line_similarity(a: &str, b: &str) -> f64 {
    let a: Vec<&str> = a.lines().collect();
    let b: Vec<&str> = b.lines().collect();
    if a.is_empty() && b.is_empty() {
        return 1.0;
    }
    let mut prev = vec![0usize; b.len() + 1];
    for x in &a {
        let mut cur = vec![0usize; b.len() + 1];
        for (j, y) in b.iter().enumerate() {
            cur[j + 1] = if x == y {
                prev[j] + 1
            } else {
                cur[j].max(prev[j + 1])
            };
        }
        prev = cur;
    }
    2.0 * prev[b.len()] as f64 / (a.len() + b.len()) as f64
}

fn load(path: &Path) -> Option<(Cluster, Vec<InstanceGroup>)> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut cluster = None;
    let mut groups = Vec::new();
    for object in kops_api::parse_objects(&path.display().to_string(), &text).ok()? {
        match object {
            Object::Cluster(c) => cluster = Some(*c),
            Object::InstanceGroup(g) => groups.push(*g),
            _ => {}
        }
    }
    Some((cluster?, groups))
}

#[test]
fn populate_matches_kops_completed_spec() {
    let dir = cases_dir();
    let Ok(entries) = std::fs::read_dir(&dir) else {
        eprintln!("skipped: {} is absent", dir.display());
        return;
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let out_dir = std::env::var_os("POPULATE_OUT").map(PathBuf::from);
    let mut scores = Vec::new();
    let mut exact = 0;
    for name in names {
        let case = dir.join(&name);
        let golden = case.join("data/aws_s3_object_cluster-completed.spec_content");
        let Ok(kops) = std::fs::read_to_string(&golden) else {
            continue;
        };
        let Some((cluster, groups)) = load(&case.join("in-v1alpha2.yaml")) else {
            panic!("{name}: cannot read in-v1alpha2.yaml");
        };
        if cluster.spec.cloud_provider.as_deref() != Some("aws") {
            continue;
        }
        let config_base = cluster.spec.config_base.clone().unwrap_or_default();
        let options = PopulateOptions {
            config_base: &config_base,
            instance_groups: Some(&groups),
            dns_zone_id: Some(MOCK_ZONE_ID),
        };
        let completed = completed_spec(&cluster, &options);
        assert_eq!(
            completed_spec(&completed, &options),
            completed,
            "{name}: populating the completed spec again changes it"
        );
        let ours = to_yaml(&completed);
        if let Some(out) = &out_dir {
            std::fs::create_dir_all(out).unwrap();
            std::fs::write(out.join(format!("{name}.yaml")), &ours).unwrap();
            std::fs::write(out.join(format!("{name}.kops.yaml")), &kops).unwrap();
        }
        // As `update` calls it: no instance groups at hand.
        let without_groups = to_yaml(&completed_spec(
            &cluster,
            &PopulateOptions {
                instance_groups: None,
                ..options.clone()
            },
        ));
        if without_groups != ours {
            println!("{name}: differs without instance groups");
        }
        let score = line_similarity(&ours, &kops);
        if ours == kops {
            exact += 1;
        }
        println!("{name:40} {score:.3}");
        scores.push(score);
    }
    assert!(!scores.is_empty(), "no AWS case with a completed spec");
    let mean = scores.iter().sum::<f64>() / scores.len() as f64;
    println!(
        "mean line similarity {mean:.4} over {} cases, {exact} identical",
        scores.len()
    );
    assert!(
        mean >= MEAN_FLOOR,
        "mean similarity {mean:.4} fell below {MEAN_FLOOR}"
    );
    assert!(
        exact >= EXACT_FLOOR,
        "{exact} identical cases, fewer than {EXACT_FLOOR}"
    );
}
