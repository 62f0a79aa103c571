//! Retries as `update cluster --yes` shows them, through
//! ../shared/tools/awsproxy.py in front of moto injecting faults (throttling,
//! 500s, dropped connections). The SDK's own retries are turned off
//! (`AWS_MAX_ATTEMPTS=1`) so that each fault becomes a retry of the task.
//! At the default verbosity stderr is not a terminal here: retries print
//! nothing (the status line is for terminals); at `-v 1` each prints one
//! short line. A run may also fail on a fault outside the tasks (a lookup
//! before the apply); the next update finishes the work, as a user would.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use crate::common::{command, kops_on, Run, IMAGE};

/// awsproxy.py in front of moto, stopped on drop.
struct Proxy {
    child: Child,
    port: u16,
    log: std::path::PathBuf,
}

impl Proxy {
    fn start(upstream: &str, dir: &std::path::Path) -> Option<Proxy> {
        Proxy::failing(upstream, dir, "0.05")
    }

    /// A proxy failing the share `fail` of calls.
    fn failing(upstream: &str, dir: &std::path::Path, fail: &str) -> Option<Proxy> {
        let script = kops_testkit::shared_dir()?.join("tools/awsproxy.py");
        if !script.exists() {
            return None;
        }
        let log = dir.join("calls.jsonl");
        let mut child = Command::new("python3")
            .arg(&script)
            .args(["--upstream", upstream, "--port", "0", "--fail", fail])
            .args(["--seed", "15", "--log"])
            .arg(&log)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let mut line = String::new();
        BufReader::new(child.stdout.take()?)
            .read_line(&mut line)
            .ok()?;
        let port = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(Proxy { child, port, log })
    }

    fn faults(&self) -> usize {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("\"fault\": \"") || l.contains("\"fault\":\""))
            .count()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `update cluster --yes` through the proxy until it succeeds (at most
/// eight runs); the stderr of every run.
fn apply(
    moto: &kops_testkit::Moto,
    proxy: &Proxy,
    cluster: &str,
    state: &str,
    v: &str,
) -> Vec<String> {
    let mut outputs = Vec::new();
    for _ in 0..8 {
        let r = through(
            moto,
            proxy,
            &[
                "update", "cluster", cluster, "--state", state, "--yes", "-v", v,
            ],
        );
        outputs.push(r.stderr);
        if r.code == 0 {
            return outputs;
        }
    }
    panic!(
        "no update succeeded in 8 runs:\n{}",
        outputs.join("\n----\n")
    );
}

fn create(moto: &kops_testkit::Moto, cluster: &str, state: &str) {
    let r = kops_on(
        moto,
        &[
            "create",
            "cluster",
            cluster,
            "--zones",
            "us-east-1a",
            "--networking",
            "cilium",
            "--state",
            state,
            "--image",
            IMAGE,
            "--dns",
            "none",
        ],
    );
    assert_eq!(r.code, 0, "create: {}", r.stderr);
}

#[test]
fn retries_are_quiet_at_v0_and_one_line_each_at_v1() {
    let Some(moto) = kops_testkit::require_moto() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let Some(proxy) = Proxy::start(&moto.endpoint(), tmp.path()) else {
        eprintln!("skipped: ../shared/tools/awsproxy.py (or python3) is absent");
        return;
    };
    let state = crate::common::file_url(&tmp.path().join("state"));

    create(moto, "quiet.example.com", &state);
    let runs = apply(moto, &proxy, "quiet.example.com", &state, "0");
    let faults = proxy.faults();
    assert!(faults > 0, "the proxy injected no fault");
    for stderr in &runs {
        // The summary's "waiting on rate limits" clause is not a retry line.
        for line in stderr
            .lines()
            .filter(|l| !l.contains("waiting on rate limits"))
        {
            assert!(
                !line.contains("waiting") && !line.starts_with("  retry"),
                "a retry line at -v 0 ({faults} faults): {line}\n{stderr}"
            );
        }
    }
    assert!(
        runs.last().unwrap().contains("  created "),
        "{}",
        runs.last().unwrap()
    );

    create(moto, "chatty.example.com", &state);
    let runs = apply(moto, &proxy, "chatty.example.com", &state, "1");
    let retries: Vec<&str> = runs
        .iter()
        .flat_map(|s| s.lines())
        .filter(|l| l.starts_with("  retry    "))
        .collect();
    assert!(
        !retries.is_empty(),
        "no retry line at -v 1 ({} faults in all):\n{}",
        proxy.faults(),
        runs.join("\n----\n")
    );
    for line in retries {
        assert!(line.chars().count() <= 160, "{line}");
        assert!(line.contains("(attempt "), "{line}");
    }

    for cluster in ["quiet.example.com", "chatty.example.com"] {
        let r = kops_on(moto, &crate::common::delete_args(cluster, &state));
        assert_eq!(r.code, 0, "delete {cluster}: {}", r.stderr);
    }
}

/// `kops ARGS` through the proxy with the SDK's own retries off, so that
/// every fault reaches kops-rs.
fn through(moto: &kops_testkit::Moto, proxy: &Proxy, args: &[&str]) -> Run {
    let mut c = command(args);
    for (k, val) in moto.env() {
        c.env(k, val);
    }
    c.env(
        "AWS_ENDPOINT_URL",
        format!("http://127.0.0.1:{}", proxy.port),
    )
    .env("AWS_MAX_ATTEMPTS", "1");
    c.output().expect("run kops").into()
}

/// One run suffices even when a fifth of the calls fail and the SDK does
/// not retry: the reads before the graph (the API load balancer's listing
/// and, with `--dns none`, its interfaces' addresses) are retried as the
/// tasks are, so `update --yes` and `delete --yes` each succeed at once and
/// the plan after the apply is empty.
#[test]
fn one_run_suffices_when_a_fifth_of_the_calls_fail() {
    let Some(moto) = kops_testkit::require_moto() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let Some(proxy) = Proxy::failing(&moto.endpoint(), tmp.path(), "0.2") else {
        eprintln!("skipped: ../shared/tools/awsproxy.py (or python3) is absent");
        return;
    };
    let state = crate::common::file_url(&tmp.path().join("state"));
    let cluster = "onerun.example.com";
    create(moto, cluster, &state);
    let r = through(
        moto,
        &proxy,
        &["update", "cluster", cluster, "--state", &state, "--yes"],
    );
    assert_eq!(r.code, 0, "apply ({} faults): {}", proxy.faults(), r.stderr);
    let r = through(
        moto,
        &proxy,
        &["update", "cluster", cluster, "--state", &state],
    );
    assert_eq!(r.code, 0, "plan: {}", r.stderr);
    assert!(
        format!("{}{}", r.stdout, r.stderr)
            .to_lowercase()
            .contains("no changes"),
        "the plan after the apply is not empty:\n{}{}",
        r.stdout,
        r.stderr
    );
    let r = through(moto, &proxy, &crate::common::delete_args(cluster, &state));
    assert_eq!(r.code, 0, "delete: {}", r.stderr);
    for line in r.stderr.lines() {
        assert!(line.chars().count() < 300, "{line}");
    }
    assert!(proxy.faults() > 20, "only {} faults", proxy.faults());
}
