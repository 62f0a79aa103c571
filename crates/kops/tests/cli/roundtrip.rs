//! Every kops integration input (AWS and other clouds) loads with
//! `kops create -f` and reads back with `kops get all -o yaml` unchanged.

use crate::common;

use std::path::Path;

use common::{file_url, kops};

fn docs(text: &str) -> Vec<serde_json::Value> {
    serde_yaml_ng::Deserializer::from_str(text)
        .map(|d| serde::Deserialize::deserialize(d).expect("yaml"))
        .filter(|v: &serde_json::Value| !v.is_null())
        .collect()
}

fn key(v: &serde_json::Value) -> (String, String) {
    (
        v["kind"].as_str().unwrap_or("").to_string(),
        v["metadata"]["name"].as_str().unwrap_or("").to_string(),
    )
}

fn check_case(case: &Path) -> Result<usize, String> {
    let input = case.join("in-v1alpha2.yaml");
    let text = std::fs::read_to_string(&input).map_err(|e| e.to_string())?;
    let expected = docs(&text);
    let tmp = tempfile::tempdir().unwrap();
    let state = file_url(tmp.path());
    let r = kops(&["create", "-f", input.to_str().unwrap(), "--state", &state]);
    if r.code != 0 {
        return Err(format!("create -f failed:\n{}", r.stderr));
    }
    let mut compared = 0;
    for cluster in expected.iter().filter(|d| d["kind"] == "Cluster") {
        let name = cluster["metadata"]["name"].as_str().unwrap();
        let r = kops(&["get", "all", name, "-o", "yaml", "--state", &state]);
        if r.code != 0 {
            return Err(format!("get all {name} failed:\n{}", r.stderr));
        }
        let got = docs(&r.stdout);
        for want in expected
            .iter()
            .filter(|d| d["kind"] == "Cluster" || d["kind"] == "InstanceGroup")
        {
            let belongs = want["kind"] == "Cluster" && want["metadata"]["name"] == name
                || want["metadata"]["labels"]["kops.k8s.io/cluster"] == name;
            if !belongs {
                continue;
            }
            let found = got.iter().find(|g| key(g) == key(want));
            match found {
                Some(g) if g == want => compared += 1,
                Some(g) => {
                    return Err(format!(
                        "{:?} differs:\n--- input\n{}\n--- read back\n{}",
                        key(want),
                        serde_yaml_ng::to_string(want).unwrap(),
                        serde_yaml_ng::to_string(g).unwrap()
                    ))
                }
                None => return Err(format!("{:?} missing from `get all -o yaml`", key(want))),
            }
        }
        // Objects of other kinds are kept beside the cluster.
        let others: Vec<&serde_json::Value> = expected
            .iter()
            .filter(|d| d["kind"] != "Cluster" && d["kind"] != "InstanceGroup")
            .collect();
        if !others.is_empty() {
            let stored =
                std::fs::read_to_string(tmp.path().join(name).join("clusteraddons/default"))
                    .map_err(|e| format!("additional objects not stored: {e}"))?;
            let stored = docs(&stored);
            for o in others {
                if !stored.contains(o) {
                    return Err(format!("additional object {:?} not kept", key(o)));
                }
                compared += 1;
            }
        }
    }
    Ok(compared)
}

#[test]
fn update_cluster_inputs_round_trip() {
    let Some(shared) = kops_testkit::shared_dir() else {
        return;
    };
    let dir = shared.join("conformance/kops/update_cluster");
    let mut cases: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("in-v1alpha2.yaml").exists())
        .collect();
    cases.sort();
    assert!(!cases.is_empty(), "no cases under {}", dir.display());
    let mut failures = Vec::new();
    let mut objects = 0;
    for case in &cases {
        match check_case(case) {
            Ok(n) => objects += n,
            Err(e) => failures.push(format!(
                "{}: {e}",
                case.file_name().unwrap().to_string_lossy()
            )),
        }
    }
    eprintln!(
        "round-trip: {} cases, {objects} objects, {} failures",
        cases.len(),
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
