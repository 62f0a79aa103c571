//! A cluster of 100 managed instance groups through the binary, against
//! the GCE API test server with Compute Engine's rate quotas on at their
//! documented defaults (1,500 calls a minute per project in each group,
//! per region for zonal and regional methods; IAM's 6,000 reads and 600
//! writes): apply, a no-op and delete each succeed, leave nothing behind
//! and let no throttle reach the user; each step prints its calls, its
//! time, the time kops-rs waited on its own mirror of the quotas and the
//! calls Google (the server) throttled (`--no-capture` shows them).
//!
//! The quotas are not scaled: at the documented defaults every step takes
//! seconds, far from the 3 minutes that would call for scaling. Two more
//! runs put the project under a tenth of those quotas, with time sped up
//! tenfold (150 calls per 6-second "minute" in each Compute group): one
//! where kops-rs assumes the documented quotas, is throttled and must wait
//! the throttles out, and one where `KOPS_GCE_RATE_LIMITS` tells it the
//! project's quotas, so that it waits instead of being throttled.

use std::time::{Duration, Instant};

use kops_testkit::GceApi;

use crate::common::{command, file_url, Run};
use crate::gce_lifecycle::{cluster_name, seed};

/// Managed instance groups in the cluster: the control plane's, the case's
/// `nodes` group in two zones, and node groups spread over the region's
/// three zones.
const GROUPS: usize = 100;

fn kops_on(api: &GceApi, limits: Option<&str>, args: &[&str]) -> Run {
    let mut c = command(args);
    for (k, v) in api.env() {
        c.env(k, v);
    }
    match limits {
        Some(limits) => c.env("KOPS_GCE_RATE_LIMITS", limits),
        None => c.env_remove("KOPS_GCE_RATE_LIMITS"),
    };
    c.output().expect("run kops").into()
}

/// kops' `minimal_gce` case with node groups added until the cluster has
/// [`GROUPS`] managed instance groups (a group makes one per zone).
fn manifest(case: &str, name: &str) -> String {
    let mut manifest = case.trim_end().to_string();
    let mut groups = 3; // master-us-test1-a; nodes in us-test1-a and -b
    let mut n = 0;
    while groups < GROUPS {
        let zones: &[&str] = if GROUPS - groups >= 3 {
            &["us-test1-a", "us-test1-b", "us-test1-c"]
        } else {
            &["us-test1-c"]
        };
        n += 1;
        groups += zones.len();
        manifest.push_str(&format!(
            "\n\n---\napiVersion: kops.k8s.io/v1alpha2\nkind: InstanceGroup\nmetadata:\n  labels:\n    kops.k8s.io/cluster: {name}\n  name: pool-{n:02}\nspec:\n  image: ubuntu-os-cloud/ubuntu-2604-resolute-amd64-v20221018\n  machineType: e2-medium\n  maxSize: {size}\n  minSize: {size}\n  role: Node\n  subnets:\n  - us-test1\n  zones:\n{zones}\n",
            size = zones.len(),
            zones = zones
                .iter()
                .map(|z| format!("  - {z}\n"))
                .collect::<String>()
        ));
    }
    manifest
}

/// What one step cost, from its output and the server's record.
struct Step {
    name: &'static str,
    /// Calls kops-rs counted (its summary line) and the server answered.
    calls: u64,
    answered: usize,
    writes: usize,
    wall: Duration,
    /// Time waited on limits, calls held back, throttled answers: as the
    /// run reported them.
    waited: f64,
    paced: u64,
    throttled: u64,
    /// Throttled answers the server gave (403/429 `rateLimitExceeded`).
    refused: usize,
}

/// The number just before `marker` in `text` (`12 Google Cloud calls`).
fn number_before(text: &str, marker: &str) -> Option<f64> {
    let at = text.find(marker)?;
    let head = text[..at].trim_end();
    let start = head
        .rfind(|c: char| !(c.is_ascii_digit() || c == '.'))
        .map_or(0, |i| i + 1);
    head[start..].parse().ok()
}

fn step(run_name: &str, name: &'static str, api: &GceApi, run: &Run, wall: Duration) -> Step {
    let calls = api.take_calls();
    let out = &run.stderr;
    let step = Step {
        name,
        calls: number_before(out, " Google Cloud calls").unwrap_or(0.0) as u64,
        answered: calls.len(),
        writes: calls.iter().filter(|c| c.is_write()).count(),
        wall,
        waited: number_before(out, "s waiting on rate limits").unwrap_or(0.0),
        paced: number_before(out, " calls paced").unwrap_or(0.0) as u64,
        throttled: number_before(out, " throttled)").unwrap_or(0.0) as u64,
        refused: calls
            .iter()
            .filter(|c| matches!(c.status, 403 | 429))
            .count(),
    };
    eprintln!(
        "{run_name}, {GROUPS} MIGs, {:<6} {:>5} calls ({} answered, {} writes), {:>6.1}s wall, {:.1}s waiting on limits ({} calls paced), {} throttled ({} refused by the server)",
        step.name,
        step.calls,
        step.answered,
        step.writes,
        step.wall.as_secs_f64(),
        step.waited,
        step.paced,
        step.throttled,
        step.refused
    );
    step
}

/// No throttle reached the user, whatever the step printed.
fn assert_no_throttle_shown(run: &Run) {
    for shown in ["rateLimitExceeded", "Quota exceeded", "RESOURCE_EXHAUSTED"] {
        assert!(
            !run.stderr.contains(shown) && !run.stdout.contains(shown),
            "{shown} reached the user:\n{}\n{}",
            run.stderr,
            run.stdout
        );
    }
}

/// Apply, a no-op and delete of the 100-group cluster on `api` (its quotas
/// set), kops-rs given `limits` as `KOPS_GCE_RATE_LIMITS`; each step's
/// cost. `None` when the case or the server is missing.
fn lifecycle(run_name: &str, api: &GceApi, limits: Option<&str>) -> Option<[Step; 3]> {
    let case = kops_testkit::update_cluster_case("minimal_gce")?;
    let case_manifest = std::fs::read_to_string(case.join("in-v1alpha2.yaml")).unwrap();
    let name = cluster_name(&case_manifest);
    seed(api, &case_manifest, &name);
    let before = api.paths();
    let work = tempfile::tempdir().unwrap();
    let state = file_url(&work.path().join("state"));
    let input = work.path().join("cluster.yaml");
    std::fs::write(&input, manifest(&case_manifest, &name)).unwrap();
    let args = ["create", "-f", input.to_str().unwrap(), "--state", &state];
    kops_on(api, limits, &args).expect_ok(&args);
    let key = case.join("id_rsa.pub");
    let args = [
        "create",
        "sshpublickey",
        &name,
        "-i",
        key.to_str().unwrap(),
        "--state",
        &state,
    ];
    kops_on(api, limits, &args).expect_ok(&args);
    api.take_calls();

    let args = ["update", "cluster", &name, "--state", &state, "--yes"];
    let started = Instant::now();
    let run = kops_on(api, limits, &args).expect_ok(&args);
    let apply = step(run_name, "apply", api, &run, started.elapsed());
    assert_no_throttle_shown(&run);
    let groups = api
        .paths()
        .iter()
        .filter(|p| p.contains("/instanceGroupManagers/"))
        .count();
    assert_eq!(groups, GROUPS);

    let args = ["update", "cluster", &name, "--state", &state];
    let started = Instant::now();
    let run = kops_on(api, limits, &args).expect_ok(&args);
    let noop = step(run_name, "no-op", api, &run, started.elapsed());
    assert_no_throttle_shown(&run);
    assert!(
        run.stderr.contains("No changes need to be applied"),
        "{}",
        run.stderr
    );
    assert_eq!(noop.writes, 0);

    let args = [
        "delete",
        "cluster",
        &name,
        "--state",
        &state,
        "--yes",
        "--interval",
        "1s",
    ];
    let started = Instant::now();
    let run = kops_on(api, limits, &args).expect_ok(&args);
    let delete = step(run_name, "delete", api, &run, started.elapsed());
    assert_no_throttle_shown(&run);
    // Cloud DNS keeps a zone's change history; kops leaves the project's
    // IAM bindings.
    let kept = |p: &String| !p.contains("/changes/") && !p.ends_with("/iamPolicy");
    let left: Vec<String> = api
        .paths()
        .into_iter()
        .filter(|p| kept(p) && !before.contains(p))
        .collect();
    assert!(left.is_empty(), "delete left: {left:?}");
    for s in [&apply, &noop, &delete] {
        // What kops-rs counted is what the server answered, and every
        // throttle it reported is one the server gave.
        assert_eq!(s.calls as usize, s.answered, "{}", s.name);
        assert_eq!(s.throttled as usize, s.refused, "{}", s.name);
    }
    Some([apply, noop, delete])
}

#[test]
fn a_hundred_managed_instance_groups_under_the_documented_quotas() {
    let Some(api) = kops_testkit::require_gce_api() else {
        return;
    };
    api.set_documented_quotas();
    let Some(steps) = lifecycle("documented quotas", &api, None) else {
        return;
    };
    // Alone in its project, kops-rs stays under every quota.
    for s in &steps {
        assert_eq!(s.refused, 0, "{}: the server throttled calls", s.name);
    }
}

/// A tenth of each documented quota, counted in 6-second windows: the
/// same rates as the documented quotas, a tenth of their bursts.
fn tenth_of_the_quotas(api: &GceApi) -> Vec<(&'static str, u32)> {
    let mut set = Vec::new();
    for group in kops_testkit::gce_api::QUOTA_GROUPS {
        if let Some(per_minute) = group.per_minute {
            let limit = (per_minute / 10).max(1);
            api.set_rate_quota(group.name, limit, Duration::from_secs(6));
            set.push((group.name, limit));
        }
    }
    set
}

#[test]
fn a_hundred_managed_instance_groups_wait_out_quotas_lower_than_they_assume() {
    let Some(api) = kops_testkit::require_gce_api() else {
        return;
    };
    tenth_of_the_quotas(&api);
    let Some(steps) = lifecycle("a tenth of the quotas, unknown", &api, None) else {
        return;
    };
    // The apply's bursts go past the project's quotas: throttled, and
    // waited out.
    assert!(steps[0].refused > 0, "the apply was never throttled");
}

#[test]
fn a_hundred_managed_instance_groups_paced_to_quotas_they_are_told() {
    let Some(api) = kops_testkit::require_gce_api() else {
        return;
    };
    // The project's quotas, as the user tells kops-rs: for N calls per
    // 6 s, a bucket of N/4 refilled at 3N/4 per 6 s.
    let limits = tenth_of_the_quotas(&api)
        .iter()
        .map(|(group, n)| {
            let n = f64::from(*n);
            format!("{group}={}/{}", (n / 4.0).max(1.0), n * 0.75 / 6.0)
        })
        .collect::<Vec<_>>()
        .join(",");
    let Some(steps) = lifecycle("a tenth of the quotas, told", &api, Some(&limits)) else {
        return;
    };
    for s in &steps {
        assert_eq!(s.refused, 0, "{}: the server throttled calls", s.name);
    }
    assert!(steps[0].paced > 0, "the apply never waited");
}
