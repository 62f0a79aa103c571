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
//! its own CAs; user data: the CAs it carries and `NodeupConfigHash`, the
//! hash of the node config, which holds them: the test checks instead that
//! the hash is the node config's) and with kops' test-harness values aside
//! (addons: the mock kops version and hosted zone); the kops-controller
//! addon differs by design (kops-rs runs it as a host service, as on AWS).
//! The user data pins the nodeup URLs and hashes kops' file names, as
//! `user_data_golden` does on AWS: where nodes fetch nodeup is an input of
//! the render (kops' harness mocks it), not the script. Prints a table per
//! kind and asserts the floors below. Skips when ../shared is not there.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kops_api::manifest::{parse_objects, Object};
use kops_model::Model;
use kops_nodeup::bootstrap::{NodeupBinary, NodeupSources};
use kops_nodeup::Arch;
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
        } else if line.starts_with("NodeupConfigHash: ") {
            out.push("NodeupConfigHash: <hash of the node config>".into());
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
    // Only a version (kops' side already reads `<kops version>` there).
    let text = match own {
        Some(v) if v.starts_with(|c: char| c.is_ascii_digit()) => {
            text.replace(&v, "<kops version>")
        }
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

/// The value of a `NAME=value` line of kops' script.
fn variable<'a>(script: &'a str, name: &str) -> &'a str {
    let prefix = format!("{name}=");
    script
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_default()
}

/// The nodeup URLs and hashes kops' user data names (every group of a case
/// names the same ones).
fn kops_nodeup_sources(case: &Path) -> Result<NodeupSources, String> {
    let data = std::fs::read_dir(case.join("data")).map_err(|e| e.to_string())?;
    let script = data
        .flatten()
        .find(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            name.ends_with("_metadata_user-data") || name.ends_with("_metadata_startup-script")
        })
        .map(|e| std::fs::read_to_string(e.path()))
        .transpose()
        .map_err(|e| e.to_string())?
        .unwrap_or_default();
    let binaries = Arch::ALL
        .into_iter()
        .filter_map(|arch| {
            let a = arch.as_str().to_ascii_uppercase();
            let urls = variable(&script, &format!("NODEUP_URL_{a}"));
            (!urls.is_empty()).then(|| NodeupBinary {
                arch,
                urls: urls.split(',').map(str::to_string).collect(),
                sha256: Some(variable(&script, &format!("NODEUP_HASH_{a}")).to_string()),
            })
        })
        .collect();
    Ok(NodeupSources {
        binaries,
        state_store_prefix: None,
    })
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
    let nodeup = kops_nodeup_sources(case)?;
    kops_ops::pki::ensure_cluster_pki(&registry, &cluster)
        .await
        .map_err(|e| e.to_string())?;
    let mut inputs = kops_ops::pki::node_inputs(&registry, &cluster, &groups)
        .await
        .map_err(|e| e.to_string())?;
    inputs.nodeup = Some(nodeup);
    let resolved = kops_api::populate::with_api_access(&cluster, Some(&groups));
    let model = Model {
        cluster: &resolved,
        groups: &groups,
        ssh_public_key: Some(key.trim()),
        node_inputs: Some(&inputs),
        account_id: None,
        config_base: &config_base,
    };
    let completed = kops_ops::spec::completed_spec(&resolved, &config_base);
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
        // The hash it pins is the hash of the group's node config.
        let config = out
            .get(&format!(
                "aws_s3_object_nodeupconfig-{}_content",
                group.name()
            ))
            .ok_or_else(|| format!("no node config for {}", group.name()))?;
        let pinned = user_data
            .lines()
            .find_map(|l| l.strip_prefix("NodeupConfigHash: "))
            .unwrap_or_default();
        if pinned != kops_nodeup::config_hash(config.as_bytes()) {
            return Err(format!(
                "{}: NodeupConfigHash {pinned} is not the node config's",
                group.name()
            ));
        }
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
    let total = |prefix: &str, except: Option<&str>| {
        kinds
            .iter()
            .filter(|(k, _)| k.starts_with(prefix) && except.is_none_or(|e| !k.ends_with(e)))
            .fold(Tally::default(), |mut a, (_, t)| {
                a.files += t.files;
                a.exact += t.exact;
                a.similarity += t.similarity;
                a
            })
    };
    let addons = total("addon ", None);
    let aside = total("mocks aside: ", None);
    // kops-controller's addon differs by design (see the module docs).
    let aside_but_kops_controller = total("mocks aside: ", Some("kops-controller.addons.k8s.io"));
    for (label, t) in [
        ("ADDONS", &addons),
        ("ADDONS-MOCKS-ASIDE", &aside),
        (
            "ADDONS-MOCKS-ASIDE-BUT-KOPS-CONTROLLER",
            &aside_but_kops_controller,
        ),
    ] {
        println!(
            "{label} files={} exact={} similarity={:.3}",
            t.files,
            t.exact,
            t.mean()
        );
    }
    for failure in &failures {
        println!("FAILED {failure}");
    }
    assert!(
        failures.is_empty(),
        "cases that did not build: {failures:?}"
    );
    // The floors: what differs is key material, kops' harness values and
    // kops-controller's addon (by design); kops' mock hosted zone id (`1`)
    // in the control plane's node configs is the one line left there.
    let user_data = &kinds["user data (keys aside)"];
    assert_eq!(user_data.exact, user_data.files, "user data, keys aside");
    assert!(kinds["nodeupconfig (keys aside)"].mean() >= 0.99);
    assert_eq!(
        aside_but_kops_controller.exact, aside_but_kops_controller.files,
        "addons but kops-controller, kops' mock values aside"
    );
    for kind in [
        "cluster-completed.spec",
        "etcd-cluster-spec",
        "manifests-etcdmanager",
    ] {
        assert!(
            kinds[kind].mean() >= 0.99,
            "{kind}: {:.3}",
            kinds[kind].mean()
        );
    }
}
