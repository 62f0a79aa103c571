//! Conformance with kops' own Terraform golden files: for every AWS and GCE case of
//! kops' `update_cluster` integration suite (in ../shared), runs the `kops`
//! binary exactly as a user would —
//!
//! ```text
//! kops create -f in-v1alpha2.yaml --state file://T
//! kops create sshpublickey NAME -i id_rsa.pub --state file://T
//! kops update cluster NAME --state file://T --target terraform --out OUT
//! ```
//!
//! — then scores OUT against the case with `../shared/tools/tfconform.py`
//! (python-hcl2 from the project's .venv) and prints a table and totals.
//! Every case must render and parse; the totals must stay above the floors
//! below. Skips with a reason when ../shared (or, outside CI, the venv) is
//! missing.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Share of the reference resources the totals must reach (the issue asks
/// for 0.90; the totals stand at 0.999 over kops' 47 AWS cases).
const FLOOR_RESOURCES: f64 = 0.98;
/// Share of the reference attributes the totals must reach (asked: 0.80,
/// next goal 0.95; reached: 0.988).
const FLOOR_ATTRIBUTES: f64 = 0.95;
/// The GCE floors: every resource and attribute of kops' 11 GCE cases
/// (`google_*` and the state-file objects alike) is reproduced, 100% / 100%
/// measured (issue 23 asks 0.99 / 0.98), so a single miss fails the run.
const FLOOR_GCE_RESOURCES: f64 = 1.0;
const FLOOR_GCE_ATTRIBUTES: f64 = 1.0;

struct Row {
    case: String,
    result: Result<Score, String>,
    render: Duration,
    /// For a case that did not render: the reference's totals (scored
    /// against an empty directory), so the totals count it as all missed.
    reference: Score,
}

#[derive(Default, Clone)]
struct Score {
    ref_resources: u64,
    resources: u64,
    ref_attributes: u64,
    attributes: u64,
    data_similarity: f64,
    data_files: u64,
    extra: u64,
    /// The reference's `google_*` resources not rendered (GCE cases).
    missing_google: u64,
}

fn kops() -> &'static str {
    env!("CARGO_BIN_EXE_kops")
}

fn python() -> Option<PathBuf> {
    let venv = kops_testkit::workspace_root().join(".venv/bin/python");
    let ok = venv.is_file()
        && Command::new(&venv)
            .args(["-c", "import hcl2"])
            .status()
            .is_ok_and(|s| s.success());
    ok.then_some(venv)
}

/// The AWS cases: those whose golden kubernetes.tf declares AWS resources
/// beyond the state-store objects every cloud's case has.
pub fn aws_cases(shared: &Path) -> Vec<PathBuf> {
    let root = shared.join("conformance/kops/update_cluster");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&root)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    cases.retain(|case| {
        let Ok(tf) = std::fs::read_to_string(case.join("kubernetes.tf")) else {
            return false;
        };
        case.join("in-v1alpha2.yaml").is_file()
            && tf.lines().any(|l| {
                l.starts_with("resource \"aws_") && !l.starts_with("resource \"aws_s3_object\"")
            })
    });
    cases.sort();
    cases
}

/// The GCE cases: those whose golden kubernetes.tf declares `google_*`
/// resources.
pub fn gce_cases(shared: &Path) -> Vec<PathBuf> {
    let root = shared.join("conformance/kops/update_cluster");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&root)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    cases.retain(|case| {
        let Ok(tf) = std::fs::read_to_string(case.join("kubernetes.tf")) else {
            return false;
        };
        case.join("in-v1alpha2.yaml").is_file()
            && tf.lines().any(|l| l.starts_with("resource \"google_"))
    });
    cases.sort();
    cases
}

/// The cluster's name: the `metadata.name` of the `kind: Cluster` document.
fn cluster_name(manifest: &str) -> Option<String> {
    for doc in manifest.split("\n---") {
        if doc.lines().any(|l| l.trim() == "kind: Cluster") {
            let mut in_meta = false;
            for line in doc.lines() {
                if line.starts_with("metadata:") {
                    in_meta = true;
                } else if in_meta && line.starts_with("  name:") {
                    return Some(line["  name:".len()..].trim().trim_matches('"').to_string());
                } else if !line.starts_with(' ') && !line.is_empty() {
                    in_meta = false;
                }
            }
        }
    }
    None
}

fn run(args: &[&str], dir: &Path) -> Result<(), String> {
    let out = Command::new(kops())
        .args(args)
        .current_dir(dir)
        .env_remove("KOPS_STATE_STORE")
        .env_remove("KOPS_CLUSTER_NAME")
        .env_remove("AWS_PROFILE")
        .output()
        .map_err(|e| format!("cannot run kops: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        Err(format!(
            "`kops {}` failed: {}",
            args.first().copied().unwrap_or(""),
            err.lines().next().unwrap_or("").trim()
        ))
    }
}

fn render_case(case: &Path, work: &Path) -> Result<(PathBuf, Duration), String> {
    let manifest =
        std::fs::read_to_string(case.join("in-v1alpha2.yaml")).map_err(|e| e.to_string())?;
    let name = cluster_name(&manifest).ok_or("no Cluster in in-v1alpha2.yaml")?;
    let state = work.join("state");
    let out = work.join("out");
    let state_url = format!("file://{}", state.display());
    let input = case.join("in-v1alpha2.yaml");
    let key = case.join("id_rsa.pub");
    let started = Instant::now();
    run(
        &[
            "create",
            "-f",
            input.to_str().unwrap_or(""),
            "--state",
            &state_url,
        ],
        work,
    )?;
    if key.is_file() {
        run(
            &[
                "create",
                "sshpublickey",
                &name,
                "-i",
                key.to_str().unwrap_or(""),
                "--state",
                &state_url,
            ],
            work,
        )?;
    }
    let render_started = Instant::now();
    run(
        &crate::common::terraform_args(&name, &state_url, out.to_str().unwrap_or("")),
        work,
    )?;
    let _ = started;
    let elapsed = render_started.elapsed();
    terraform_fmt_check(&out.join("kubernetes.tf"))?;
    Ok((out, elapsed))
}

/// When `terraform` is on PATH (no provider needed): the file must be
/// valid HCL laid out exactly as `terraform fmt` writes it.
fn terraform_fmt_check(file: &Path) -> Result<(), String> {
    let checked = Command::new("terraform")
        .args(["fmt", "-check", "-diff"])
        .arg(file)
        .env("TF_CLI_CONFIG_FILE", "/dev/null")
        .output();
    match checked {
        Err(_) => Ok(()), // not installed
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(format!(
            "terraform fmt -check: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )),
    }
}

fn score(python: &Path, tool: &Path, case: &Path, out: &Path) -> Result<Score, String> {
    let result = Command::new(python)
        .arg(tool)
        .arg(case)
        .arg(out)
        .arg("--json")
        .output()
        .map_err(|e| format!("cannot run tfconform: {e}"))?;
    if !result.status.success() {
        let err = String::from_utf8_lossy(&result.stderr);
        return Err(format!(
            "does not parse: {}",
            err.lines().last().unwrap_or("").trim()
        ));
    }
    let v: serde_json::Value =
        serde_json::from_slice(&result.stdout).map_err(|e| format!("tfconform output: {e}"))?;
    let n = |k: &str| v[k].as_u64().unwrap_or(0);
    Ok(Score {
        ref_resources: n("reference_resources"),
        resources: n("resources_matched"),
        ref_attributes: n("attributes_total"),
        attributes: n("attributes_matched"),
        data_similarity: v["data_similarity"].as_f64().unwrap_or(0.0),
        data_files: n("data_files"),
        extra: v["extra_resources"]
            .as_array()
            .map_or(0, |a| a.len() as u64),
        missing_google: v["missing_resources"].as_array().map_or(0, |a| {
            a.iter()
                .filter(|r| r.as_str().is_some_and(|r| r.contains("google_")))
                .count() as u64
        }),
    })
}

fn pct(a: u64, b: u64) -> f64 {
    if b == 0 {
        100.0
    } else {
        100.0 * a as f64 / b as f64
    }
}

#[test]
fn terraform_output_matches_kops_golden_files() {
    let Some(shared) = kops_testkit::shared_dir() else {
        return;
    };
    let cases = aws_cases(&shared);
    assert!(cases.len() >= 40, "only {} AWS cases found", cases.len());
    run_suite(&shared, cases, FLOOR_RESOURCES, FLOOR_ATTRIBUTES);
}

/// kops' 11 GCE cases (issue 23 asks for resources >= 99% and attributes
/// >= 98% over them; see the floors).
#[test]
fn gce_terraform_output_matches_kops_golden_files() {
    let Some(shared) = kops_testkit::shared_dir() else {
        return;
    };
    let cases = gce_cases(&shared);
    assert!(cases.len() >= 11, "only {} GCE cases found", cases.len());
    run_suite(&shared, cases, FLOOR_GCE_RESOURCES, FLOOR_GCE_ATTRIBUTES);
}

/// Renders every case, scores it and prints the table; asserts every
/// case rendered and the totals reach the floors.
fn run_suite(shared: &Path, cases: Vec<PathBuf>, floor_resources: f64, floor_attributes: f64) {
    let Some(python) = python() else {
        assert!(
            !kops_testkit::in_ci(),
            "CI: .venv/bin/python with python-hcl2 is missing (run ./scripts/setup-venv)"
        );
        eprintln!(
            "skipping: .venv/bin/python with python-hcl2 not found (run ./scripts/setup-venv)"
        );
        return;
    };
    let tool = shared.join("tools/tfconform.py");
    let only = std::env::var("KOPS_CONFORMANCE_CASE").ok();

    let rows = Mutex::new(Vec::new());
    let queue = Mutex::new(cases.clone());
    let started = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let Some(case) = queue.lock().unwrap().pop() else {
                    break;
                };
                let name = case.file_name().unwrap().to_string_lossy().to_string();
                if only.as_ref().is_some_and(|o| *o != name) {
                    continue;
                }
                let work = tempfile::tempdir().expect("temp dir");
                let empty = work.path().join("empty");
                let _ = std::fs::create_dir_all(&empty);
                let reference = score(&python, &tool, &case, &empty).unwrap_or_default();
                let (result, render) = match render_case(&case, work.path()) {
                    Ok((out, render)) => {
                        if std::env::var_os("KOPS_CONFORMANCE_KEEP").is_some() {
                            let keep = std::env::temp_dir().join("kops-conformance").join(&name);
                            let _ = std::fs::remove_dir_all(&keep);
                            let _ = copy_dir(&out, &keep);
                        }
                        (score(&python, &tool, &case, &out), render)
                    }
                    Err(e) => (Err(e), Duration::ZERO),
                };
                rows.lock().unwrap().push(Row {
                    case: name,
                    result,
                    render,
                    reference,
                });
            });
        }
    });
    let wall = started.elapsed();
    let mut rows = rows.into_inner().unwrap();
    rows.sort_by(|a, b| a.case.cmp(&b.case));

    let mut table = String::new();
    table.push_str(&format!(
        "{:<34} {:>15} {:>17} {:>6} {:>5} {:>8}\n",
        "case", "resources", "attributes", "data", "extra", "render"
    ));
    let mut total = Score::default();
    let mut sims = Vec::new();
    let mut failures = Vec::new();
    let mut render_total = Duration::ZERO;
    for row in &rows {
        render_total += row.render;
        match &row.result {
            Ok(s) => {
                table.push_str(&format!(
                    "{:<34} {:>4}/{:<4} {:>5.1}% {:>5}/{:<5} {:>5.1}% {:>6.3} {:>5} {:>6}ms\n",
                    row.case,
                    s.resources,
                    s.ref_resources,
                    pct(s.resources, s.ref_resources),
                    s.attributes,
                    s.ref_attributes,
                    pct(s.attributes, s.ref_attributes),
                    s.data_similarity,
                    s.extra,
                    row.render.as_millis()
                ));
                total.ref_resources += s.ref_resources;
                total.resources += s.resources;
                total.ref_attributes += s.ref_attributes;
                total.attributes += s.attributes;
                total.extra += s.extra;
                total.missing_google += s.missing_google;
                total.data_files += s.data_files;
                sims.push(s.data_similarity);
            }
            Err(e) => {
                let r = &row.reference;
                table.push_str(&format!(
                    "{:<34} {:>4}/{:<4} {:>5.1}% {:>5}/{:<5} {:>5.1}%  ERROR {e}\n",
                    row.case, 0, r.ref_resources, 0.0, 0, r.ref_attributes, 0.0
                ));
                total.ref_resources += r.ref_resources;
                total.ref_attributes += r.ref_attributes;
                sims.push(0.0);
                failures.push(format!("{}: {e}", row.case));
            }
        }
    }
    let mean_sim = if sims.is_empty() {
        0.0
    } else {
        sims.iter().sum::<f64>() / sims.len() as f64
    };
    let res_pct = pct(total.resources, total.ref_resources);
    let attr_pct = pct(total.attributes, total.ref_attributes);
    table.push_str(&format!(
        "{:<34} {:>4}/{:<4} {:>5.1}% {:>5}/{:<5} {:>5.1}% {:>6.3} {:>5}\n",
        format!("TOTAL ({} cases)", rows.len()),
        total.resources,
        total.ref_resources,
        res_pct,
        total.attributes,
        total.ref_attributes,
        attr_pct,
        mean_sim,
        total.extra
    ));
    table.push_str(&format!(
        "render (kops update cluster --target terraform, one process per case): total {:.2}s, mean {:.0}ms; whole run incl. create and scoring: {:.1}s wall on 2 workers\n",
        render_total.as_secs_f64(),
        render_total.as_secs_f64() * 1000.0 / rows.len().max(1) as f64,
        wall.as_secs_f64()
    ));
    eprintln!("{table}");
    println!("{table}");

    assert!(
        failures.is_empty(),
        "cases that did not render or parse:\n{}",
        failures.join("\n")
    );
    assert_eq!(
        total.missing_google, 0,
        "google_* resources of kops' golden files not rendered"
    );
    if only.is_none() {
        assert!(
            res_pct >= floor_resources * 100.0,
            "resources {res_pct:.1}% < floor {:.0}%",
            floor_resources * 100.0
        );
        assert!(
            attr_pct >= floor_attributes * 100.0,
            "attributes {attr_pct:.1}% < floor {:.0}%",
            floor_attributes * 100.0
        );
    }
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}
