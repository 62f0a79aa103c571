//! The node-side files of kops' GCE cases (`../shared/conformance/kops/
//! update_cluster/*gce*`), built by the same functions `update cluster
//! --target terraform` calls, scored per kind against kops' `data/` files.
//!
//! For each case: the manifest goes into a memory state store with its SSH
//! key, the cluster's keysets are made, and then, as the render does, the
//! completed spec, the etcd specs and manifests, the static pods, the
//! bootstrap channel with every addon, the node configs
//! (`kops_model::files::state_files`) and each group's user data
//! (`kops_model::compute::user_data`). Each file is compared with kops'
//! by tfconform's line similarity (the share of lines both have, as a
//! multiset), raw, with key material aside (node configs: each cluster has
//! its own CAs) and with kops' test-harness values aside (addons: the mock
//! kops version); the kops-controller addon differs by design (kops-rs
//! runs it as a host service, as on AWS). Prints a table per kind and
//! asserts the floors below. Skips when ../shared is not there.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kops_api::manifest::{parse_objects, Object};
use kops_model::Model;
use kops_nodeup::bootstrap::NodeupEnv;
use kops_ops::Registry;
use kops_state::MemoryStore;

/// kops' version in its test harness, which its addons name.
const MOCK_VERSION: &str = "1.34.0-beta.1";

fn gce_cases(shared: &Path) -> Vec<PathBuf> {
    let root = shared.join("conformance/kops/update_cluster");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&root)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    cases.retain(|case| {
        std::fs::read_to_string(case.join("in-v1alpha2.yaml"))
            .is_ok_and(|t| t.contains("cloudProvider: gce") && case.join("data").is_dir())
    });
    cases.sort();
    cases
}

/// tfconform's measure: lines common to both (as multisets) over all lines.
fn similarity(a: &str, b: &str) -> f64 {
    fn count(text: &str) -> BTreeMap<&str, i64> {
        let mut m: BTreeMap<&str, i64> = BTreeMap::new();
        for line in text.lines() {
            *m.entry(line).or_default() += 1;
        }
        m
    }
    let (ca, cb) = (count(a), count(b));
    let mut union = 0;
    let mut common = 0;
    for key in ca.keys().chain(cb.keys().filter(|k| !ca.contains_key(*k))) {
        let (x, y) = (
            ca.get(key).copied().unwrap_or(0),
            cb.get(key).copied().unwrap_or(0),
        );
        union += x.max(y);
        common += x.min(y);
    }
    if union == 0 {
        1.0
    } else {
        common as f64 / union as f64
    }
}

/// The kind of a `data/` file, as data-conformance.py groups them.
fn kind(name: &str) -> String {
    if name.ends_with("addons-bootstrap_content") {
        return "bootstrap-channel".into();
    }
    if let Some((_, rest)) = name.split_once("-addons-") {
        let key = rest.trim_end_matches("_content");
        let key = match key.find("-k8s-").or_else(|| key.find("-v1.")) {
            Some(i) => &key[..i],
            None => key,
        };
        return format!("addon {key}");
    }
    if name.contains("nodeupconfig-") {
        return "nodeupconfig".into();
    }
    if name.ends_with("_metadata_user-data") || name.ends_with("_metadata_startup-script") {
        return "user data".into();
    }
    let bare = name
        .trim_start_matches("aws_s3_object_")
        .trim_end_matches("_content");
    for prefix in ["manifests-etcdmanager", "etcd-cluster-spec"] {
        if bare.starts_with(prefix) {
            return prefix.into();
        }
    }
    bare.to_string()
}

/// PEM blocks, SSH keys and keypair ids aside (data-conformance.py's rule).
fn keys_aside(text: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut in_pem = false;
    for line in text.lines() {
        if line.contains("-----BEGIN") {
            in_pem = true;
        }
        let ssh = line
            .split_once("ssh-rsa ")
            .is_some_and(|(_, k)| k.split_whitespace().next().unwrap_or("").len() >= 40);
        if in_pem || ssh {
            if line.contains("-----END") {
                in_pem = false;
            }
            if out.last().map(String::as_str) != Some("<key material>") {
                out.push("<key material>".into());
            }
            continue;
        }
        let trimmed = line.trim_start();
        let keypair_id = line.len() > trimmed.len()
            && trimmed.split_once(": \"").is_some_and(|(k, v)| {
                !k.contains(' ')
                    && v.strip_suffix('"')
                        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
            });
        if keypair_id {
            let key = trimmed.split_once(':').map_or("", |(k, _)| k);
            out.push(format!(
                "{}{key}: \"<keypair id>\"",
                &line[..line.len() - trimmed.len()]
            ));
        } else if line.starts_with("DNSZone: ") {
            out.push("DNSZone: <zone>".into());
        } else {
            out.push(line.to_string());
        }
    }
    out.join("\n")
}

/// kops' mock version aside in an addon (data-conformance.py's rule).
fn mocks_aside(text: &str) -> String {
    let text = text.replace(MOCK_VERSION, "<kops version>");
    let own = text
        .find("registry.k8s.io/kops/dns-controller:")
        .or_else(|| text.find("registry.k8s.io/kops/kops-controller:"))
        .map(|i| {
            let tag = &text[i..];
            let tag = &tag[tag.find(':').unwrap_or(0) + 1..];
            let end = tag
                .find(|c: char| c.is_whitespace() || c == '"' || c == '@')
                .unwrap_or(tag.len());
            tag[..end].trim_start_matches('v').to_string()
        });
    let text = match own {
        Some(v) if !v.is_empty() => text.replace(&v, "<kops version>"),
        _ => text,
    };
    text.lines()
        .map(|l| {
            if ["--zone=", "NODEUP_URL", "NODEUP_HASH"]
                .iter()
                .any(|m| l.contains(m))
            {
                "<masked>"
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The files kops-rs builds for a case, by kops' `data/` file names.
async fn build(case: &Path) -> Result<BTreeMap<String, String>, String> {
    let text = std::fs::read_to_string(case.join("in-v1alpha2.yaml")).map_err(|e| e.to_string())?;
    let registry = Registry::new(Arc::new(MemoryStore::new()));
    let mut cluster = None;
    let mut groups = Vec::new();
    for object in parse_objects("in-v1alpha2.yaml", &text).map_err(|e| e.to_string())? {
        match object {
            Object::Cluster(c) => cluster = Some(*c),
            Object::InstanceGroup(g) => groups.push(*g),
            _ => {}
        }
    }
    let cluster = cluster.ok_or("no Cluster")?;
    let name = cluster.name().to_string();
    registry
        .put_cluster(&cluster)
        .await
        .map_err(|e| e.to_string())?;
    for group in &groups {
        registry
            .put_instance_group(&name, group)
            .await
            .map_err(|e| e.to_string())?;
    }
    let key = std::fs::read_to_string(case.join("id_rsa.pub")).map_err(|e| e.to_string())?;
    registry
        .add_ssh_public_key(&name, key.trim())
        .await
        .map_err(|e| e.to_string())?;
    let config_base = cluster
        .spec
        .config_base
        .clone()
        .unwrap_or_else(|| registry.config_base(&name));
    // nodeup from kops' release location (what KOPS_BASE_URL-less kops writes).
    let env = NodeupEnv::from_lookup(|variable| {
        let arch = if variable.ends_with("AMD64") {
            "amd64"
        } else {
            "arm64"
        };
        match variable {
            v if v.starts_with("NODEUP_URL_") => Some(format!(
                "https://artifacts.k8s.io/binaries/kops/{MOCK_VERSION}/linux/{arch}/nodeup"
            )),
            v if v.starts_with("NODEUP_HASH_") => Some("0".repeat(64)),
            _ => None,
        }
    });
    let nodeup = kops_ops::update::nodeup::resolve(&registry, &cluster, &groups, &env, None)
        .await
        .map_err(|e| e.to_string())?;
    kops_ops::pki::ensure_cluster_pki(&registry, &cluster)
        .await
        .map_err(|e| e.to_string())?;
    let mut inputs = kops_ops::pki::node_inputs(&registry, &cluster, &groups)
        .await
        .map_err(|e| e.to_string())?;
    inputs.nodeup = Some(nodeup.sources.clone());
    let resolved = kops_api::populate::with_api_access(&cluster, Some(&groups));
    let model = Model {
        cluster: &resolved,
        groups: &groups,
        ssh_public_key: Some(key.trim()),
        node_inputs: Some(&inputs),
        account_id: None,
        config_base: &config_base,
    };
    let completed = kops_ops::update::completed_spec(&resolved, &config_base);
    let node_configs = kops_model::compute::node_configs(&Model {
        cluster: &completed,
        ..model.clone()
    })
    .map_err(|e| e.to_string())?
    .into_iter()
    .map(|r| kops_model::files::StateFile::new(format!("nodeupconfig-{}", r.group), r.path, r.yaml))
    .collect();
    let files = kops_model::files::state_files(
        &model,
        &kops_api::manifest::to_yaml(&completed),
        node_configs,
    )
    .map_err(|e| e.to_string())?;
    let mut out = BTreeMap::new();
    for file in files {
        out.insert(
            format!("aws_s3_object_{}_content", file.name),
            String::from_utf8_lossy(&file.contents).to_string(),
        );
    }
    let data = std::fs::read_dir(case.join("data")).map_err(|e| e.to_string())?;
    let templates: Vec<String> = data
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.ends_with("_metadata_user-data") || n.ends_with("_metadata_startup-script"))
        .collect();
    for (index, group) in groups.iter().enumerate() {
        // kops' template is `<group>-<cluster, dots as dashes>`, truncated.
        let prefix = format!("google_compute_instance_template_{}-", group.name());
        let Some(file) = templates
            .iter()
            .filter(|t| t.starts_with(&prefix))
            .find(|t| {
                !groups.iter().any(|g| {
                    g.name().len() > group.name().len()
                        && t.starts_with(&format!("google_compute_instance_template_{}-", g.name()))
                })
            })
        else {
            continue;
        };
        let user_data =
            kops_model::compute::user_data(&model, index, group).map_err(|e| e.to_string())?;
        out.insert(file.clone(), user_data);
    }
    Ok(out)
}

#[derive(Default)]
struct Tally {
    files: usize,
    exact: usize,
    similarity: f64,
}

impl Tally {
    fn add(&mut self, ours: Option<&str>, theirs: &str) {
        self.files += 1;
        if let Some(ours) = ours {
            self.exact += usize::from(ours == theirs);
            self.similarity += similarity(ours, theirs);
        }
    }

    fn mean(&self) -> f64 {
        self.similarity / self.files.max(1) as f64
    }
}

#[tokio::test]
async fn gce_data_files_against_kops() {
    let Some(shared) = kops_testkit::shared_dir() else {
        eprintln!("skipping: ../shared is not there");
        return;
    };
    let cases = gce_cases(&shared);
    if cases.is_empty() {
        eprintln!("skipping: no GCE case in ../shared");
        return;
    }
    let verbose = std::env::var_os("GCE_DATA_VERBOSE").is_some();
    let mut kinds: BTreeMap<String, Tally> = BTreeMap::new();
    let mut failures = Vec::new();
    for case in &cases {
        let label = case
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        let ours = match build(case).await {
            Ok(files) => files,
            Err(e) => {
                failures.push(format!("{label}: {e}"));
                BTreeMap::new()
            }
        };
        // GCE_DATA_OUT=DIR keeps the files built, as DIR/<case>/<file>.
        if let Some(out) = std::env::var_os("GCE_DATA_OUT") {
            let dir = PathBuf::from(out).join(&label);
            std::fs::create_dir_all(&dir).unwrap();
            for (name, text) in &ours {
                std::fs::write(dir.join(name), text).unwrap();
            }
        }
        let mut names: Vec<String> = std::fs::read_dir(case.join("data"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().to_string())
            .collect();
        names.sort();
        for name in names {
            let theirs = std::fs::read_to_string(case.join("data").join(&name)).unwrap();
            let mine = ours.get(&name).map(String::as_str);
            let kind = kind(&name);
            kinds.entry(kind.clone()).or_default().add(mine, &theirs);
            if kind == "nodeupconfig" || kind == "user data" {
                kinds
                    .entry(format!("{kind} (keys aside)"))
                    .or_default()
                    .add(mine.map(keys_aside).as_deref(), &keys_aside(&theirs));
            }
            if kind.starts_with("addon ") {
                kinds
                    .entry(format!("mocks aside: {kind}"))
                    .or_default()
                    .add(mine.map(mocks_aside).as_deref(), &mocks_aside(&theirs));
            }
            if verbose {
                let s = mine.map_or(0.0, |m| similarity(m, &theirs));
                if s < 1.0 {
                    println!("  {label:32} {name}: {s:.3}");
                }
            }
        }
    }
    println!(
        "{:60} {:>5} {:>5} {:>10}",
        "kind", "files", "exact", "similarity"
    );
    for (kind, t) in &kinds {
        println!("{kind:60} {:5} {:5} {:10.3}", t.files, t.exact, t.mean());
    }
    let addons = kinds.iter().filter(|(k, _)| k.starts_with("addon ")).fold(
        Tally::default(),
        |mut a, (_, t)| {
            a.files += t.files;
            a.exact += t.exact;
            a.similarity += t.similarity;
            a
        },
    );
    println!(
        "ADDONS files={} exact={} similarity={:.3}",
        addons.files,
        addons.exact,
        addons.mean()
    );
    for failure in &failures {
        println!("FAILED {failure}");
    }
    assert!(
        failures.is_empty(),
        "cases that did not build: {failures:?}"
    );
}
