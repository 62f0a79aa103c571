//! The user data kops-rs writes against kops' own (issue 17): for every AWS
//! case of kops' `update_cluster` tests, the script rendered with kops'
//! nodeup URLs and hashes (read from kops' file) and kops' boot config is
//! compared with kops' file, line by line. Prints each launch template's
//! similarity and how many are identical; asserts a floor.

use std::path::Path;

use kops_api::{Cluster, InstanceGroup, Object};
use kops_nodeup::bootstrap::{self, BootConfig, NodeupBinary};
use kops_nodeup::Arch;

fn load(case: &Path) -> Option<(Cluster, Vec<InstanceGroup>)> {
    let text = std::fs::read_to_string(case.join("in-v1alpha2.yaml")).ok()?;
    let mut cluster = None;
    let mut groups = Vec::new();
    for object in kops_api::parse_objects("in-v1alpha2.yaml", &text).ok()? {
        match object {
            Object::Cluster(c) if cluster.is_none() => cluster = Some(*c),
            Object::InstanceGroup(g) => groups.push(*g),
            _ => {}
        }
    }
    Some((cluster?, groups))
}

/// The value of a `NAME=value` line of kops' script.
fn variable<'a>(script: &'a str, name: &str) -> &'a str {
    let prefix = format!("{name}=");
    script
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_default()
}

/// kops' boot config: the heredoc, or the gzipped base64 line.
fn kops_boot_config(script: &str) -> Option<BootConfig> {
    if let Some(text) = bootstrap::boot_config_text(script) {
        return BootConfig::parse(text).ok();
    }
    use base64::Engine;
    use std::io::Read;
    let line = script
        .lines()
        .find(|l| l.ends_with("| base64 -d | gzip -d > conf/kube_env.yaml"))?;
    let encoded = line.strip_prefix("echo \"")?.split('"').next()?;
    let gz = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .ok()?;
    let mut text = String::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_string(&mut text)
        .ok()?;
    BootConfig::parse(&text).ok()
}

/// Line similarity: twice the longest common subsequence of lines over
/// the total number of lines.
fn similarity(a: &str, b: &str) -> f64 {
    let a: Vec<&str> = a.lines().collect();
    let b: Vec<&str> = b.lines().collect();
    if a.is_empty() && b.is_empty() {
        return 1.0;
    }
    let mut row = vec![0usize; b.len() + 1];
    for x in &a {
        let mut diag = 0;
        for (j, y) in b.iter().enumerate() {
            let up = row[j + 1];
            row[j + 1] = if x == y {
                diag + 1
            } else {
                row[j + 1].max(row[j])
            };
            diag = up;
        }
    }
    2.0 * row[b.len()] as f64 / (a.len() + b.len()) as f64
}

#[test]
fn user_data_matches_kops_for_the_same_nodeup() {
    let Some(shared) = kops_testkit::shared_dir() else {
        return;
    };
    let root = shared.join("conformance/kops/update_cluster");
    let Ok(entries) = std::fs::read_dir(&root) else {
        eprintln!("skipping: {} not found", root.display());
        return;
    };
    let mut cases: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    cases.sort();
    let (mut total, mut identical, mut sum) = (0usize, 0usize, 0.0f64);
    for case in cases {
        let Some((cluster, groups)) = load(&case) else {
            continue;
        };
        let Ok(files) = std::fs::read_dir(case.join("data")) else {
            continue;
        };
        let mut files: Vec<_> = files.flatten().map(|e| e.path()).collect();
        files.sort();
        for file in files {
            let name = file.file_name().unwrap().to_string_lossy().to_string();
            let Some(template) = name
                .strip_prefix("aws_launch_template_")
                .and_then(|n| n.strip_suffix("_user_data"))
            else {
                continue;
            };
            // The group whose name starts the launch template's name.
            let Some(group) = groups
                .iter()
                .filter(|g| template.starts_with(&format!("{}.", g.name())))
                .max_by_key(|g| g.name().len())
            else {
                continue;
            };
            let expected = std::fs::read_to_string(&file)
                .unwrap()
                .replace("\r\n", "\n");
            let Some(boot) = kops_boot_config(&expected) else {
                // Bastions: kops writes only their additional user data.
                continue;
            };
            let binaries: Vec<NodeupBinary> = Arch::ALL
                .into_iter()
                .filter_map(|arch| {
                    let a = arch.as_str().to_ascii_uppercase();
                    let urls = variable(&expected, &format!("NODEUP_URL_{a}"));
                    (!urls.is_empty()).then(|| NodeupBinary {
                        arch,
                        urls: urls.split(',').map(str::to_string).collect(),
                        sha256: Some(variable(&expected, &format!("NODEUP_HASH_{a}")).to_string())
                            .filter(|h| !h.is_empty()),
                    })
                })
                .collect();
            let actual =
                bootstrap::group_user_data(&cluster, group, &binaries, &boot).replace("\r\n", "\n");
            let score = similarity(&actual, &expected);
            total += 1;
            sum += score;
            if actual == expected {
                identical += 1;
            }
            let case_name = case.file_name().unwrap().to_string_lossy();
            println!("{case_name}/{template}: {score:.3}");
            if actual != expected && std::env::var_os("USER_DATA_DIFF").is_some() {
                let dir = std::env::temp_dir().join("user-data-golden");
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(dir.join(format!("{case_name}_{template}")), &actual).unwrap();
            }
        }
    }
    if total == 0 {
        eprintln!("skipping: no AWS user data in {}", root.display());
        return;
    }
    let mean = sum / total as f64;
    println!("identical: {identical}/{total}, mean line similarity {mean:.3}");
    assert!(mean > 0.95, "mean line similarity {mean:.3}");
    assert!(identical * 10 >= total * 8, "identical {identical}/{total}");
}
