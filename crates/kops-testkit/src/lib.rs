//! Test support for the kops-rs workspace: starts `moto_server` (a local AWS
//! emulator) and fake-gcs-server (the Cloud Storage emulator, see
//! [`fake_gcs`]) on free loopback ports, and locates the `../shared` directory
//! next to the workspace. Standard library only.
//!
//! Typical use in a test:
//!
//! ```no_run
//! let Some(moto) = kops_testkit::require_moto() else { return };
//! let endpoint = moto.endpoint(); // http://127.0.0.1:PORT
//! ```

pub mod aws_limits;
pub mod cloud_init;
pub mod fake_gcs;
pub mod fault_proxy;
pub mod file_server;
pub mod gce_api;
pub mod gce_metadata;
pub mod kube_api;
pub mod logs;
pub mod sshd;
pub mod swtpm;
pub mod vcsim;

pub use fake_gcs::{require_fake_gcs, FakeGcs};
pub use gce_api::{require_gce_api, GceApi};
pub use vcsim::{require_vcsim, Vcsim};

use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How long `moto_server` may take to answer after being started.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// How many ports to try when `moto_server` exits right after starting
/// (e.g. because another process took the port in the meantime).
const PORT_ATTEMPTS: usize = 5;

/// The workspace root (the directory holding the top-level `Cargo.toml`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// True when running under CI (`CI` set to anything but empty, `0` or `false`).
pub fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "0" && v != "false")
}

/// A test's missing tool: under [`in_ci`] a panic (CI must not silently
/// skip `tests`), else `skipping: <reason>` on stderr; the caller then
/// skips.
///
/// # Panics
///
/// Under CI.
pub fn skip(tests: &str, reason: &str) {
    if in_ci() {
        panic!("{reason}; CI is set, so {tests} tests must not be skipped");
    }
    eprintln!("skipping: {reason}");
}

/// The `../shared` directory next to the workspace root, if it exists.
/// When it does not, prints `skipping: ../shared not found at <path>` to
/// stderr and returns `None`.
pub fn shared_dir() -> Option<PathBuf> {
    let root = workspace_root();
    let root = root.canonicalize().unwrap_or(root);
    let shared = root.parent().unwrap_or(&root).join("shared");
    if shared.is_dir() {
        Some(shared)
    } else {
        eprintln!("skipping: ../shared not found at {}", shared.display());
        None
    }
}

/// One of kops' own `update cluster` cases (`conformance/kops/update_cluster/<name>`
/// in `../shared`), when it is there.
pub fn update_cluster_case(name: &str) -> Option<PathBuf> {
    let dir = shared_dir()?
        .join("conformance/kops/update_cluster")
        .join(name);
    dir.is_dir().then_some(dir)
}

/// Where `moto_server` is: `$MOTO_SERVER` if set, else
/// `<workspace>/.venv/bin/moto_server` if it exists, else `moto_server` on
/// `PATH`. `None` when none of these exists.
pub fn moto_server_path() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("MOTO_SERVER").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    let venv = workspace_root().join(".venv/bin/moto_server");
    if venv.is_file() {
        return Some(venv);
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join("moto_server"))
        .find(|candidate| candidate.is_file())
}

/// The process-wide moto server for tests that need AWS, or `None` (after
/// printing why) when `moto_server` is not installed and the tests should be
/// skipped.
///
/// # Panics
///
/// When `moto_server` is not installed and [`in_ci`] (CI must not silently
/// skip), or when it is installed but does not start.
pub fn require_moto() -> Option<&'static Moto> {
    if moto_server_path().is_none() {
        skip(
            "AWS",
            "moto_server not found (set MOTO_SERVER, run scripts/setup-venv, \
             or put moto_server on PATH)",
        );
        return None;
    }
    Some(Moto::shared())
}

/// `../shared/tools/moto_patched.py` when the shared tree is there: moto
/// with fixes for more of its bugs (among them DescribeLaunchTemplates
/// paged with `NextToken`, which plain moto cuts at 15 templates). It is
/// read from the shared tree at run time, never copied into the repo; the
/// test server runs it as moto's entry point (see [`with_patches`]).
/// `None`, silently, without the shared tree or the script.
pub fn moto_patched_script() -> Option<PathBuf> {
    let root = workspace_root();
    let root = root.canonicalize().unwrap_or(root);
    let script = root
        .parent()
        .unwrap_or(&root)
        .join("shared/tools/moto_patched.py");
    script.is_file().then_some(script)
}

/// Fixes for moto bugs (see the file), run before moto's `main` (or before
/// [`moto_patched_script`], named by `KOPS_TESTKIT_MOTO_PATCHED`).
const MOTO_PATCHES: &str = include_str!("moto_patches.py");

/// `binary` (moto's Python entry script) wrapped so that
/// [`MOTO_PATCHES`] run first: the same interpreter and moto, with the
/// bugs fixed. A binary that is not a Python script is used as it is.
fn with_patches(binary: &Path) -> io::Result<PathBuf> {
    static SERIAL: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let head = std::fs::read(binary)?;
    let first = head.split(|b| *b == b'\n').next().unwrap_or_default();
    let first = String::from_utf8_lossy(first);
    if !(first.starts_with("#!") && first.contains("python")) {
        return Ok(binary.to_path_buf());
    }
    let path = std::env::temp_dir().join(format!(
        "kops-testkit-moto-server-{}-{}",
        std::process::id(),
        SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    std::fs::write(&path, format!("{first}\n{MOTO_PATCHES}"))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    Ok(path)
}

/// A running `moto_server`, killed on drop. Processes that never drop it
/// (see [`Moto::shared`]) are covered by a watchdog that stops moto once the
/// process that started it is gone.
#[derive(Debug)]
pub struct Moto {
    port: u16,
    child: Child,
    watchdog: Option<Child>,
    /// The shared tree's patched moto this server runs, if any.
    patched: Option<PathBuf>,
}

impl Moto {
    /// One moto per process, started on first call and never dropped (the
    /// watchdog stops it when the process exits).
    ///
    /// # Panics
    ///
    /// When moto cannot be started.
    pub fn shared() -> &'static Moto {
        static MOTO: OnceLock<Moto> = OnceLock::new();
        MOTO.get_or_init(|| Moto::start().unwrap_or_else(|e| panic!("failed to start moto: {e}")))
    }

    /// Starts a new `moto_server` on a free port and waits until it answers.
    pub fn start() -> io::Result<Moto> {
        let binary = moto_server_path().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "moto_server not found (set MOTO_SERVER or run scripts/setup-venv)",
            )
        })?;
        let wrapped = with_patches(&binary)?;
        // The shared patched moto runs only under our wrapper (a Python
        // entry script); a non-Python `MOTO_SERVER` is used as it is.
        let patched = moto_patched_script().filter(|_| wrapped != binary);
        let mut result = None;
        for _ in 0..PORT_ATTEMPTS {
            match free_port().and_then(|port| Self::start_on(&wrapped, port, patched.as_deref())) {
                Ok(moto) => {
                    result = Some(Ok(moto));
                    break;
                }
                Err(e) => result = Some(Err(e)),
            }
        }
        // moto has read its entry script once it answers.
        if wrapped != binary {
            let _ = std::fs::remove_file(&wrapped);
        }
        result.expect("at least one attempt")
    }

    fn start_on(binary: &Path, port: u16, patched: Option<&Path>) -> io::Result<Moto> {
        // moto's output goes to an unlinked temporary file: kept for the
        // error message if startup fails, never left behind.
        let log_path = std::env::temp_dir().join(format!(
            "kops-testkit-moto-{}-{port}.log",
            std::process::id()
        ));
        let log = File::create(&log_path)?;
        let mut command = Command::new(binary);
        match patched {
            Some(script) => command.env("KOPS_TESTKIT_MOTO_PATCHED", script),
            None => command.env_remove("KOPS_TESTKIT_MOTO_PATCHED"),
        };
        let spawned = command
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log.try_clone()?)
            .spawn();
        let mut child = match spawned {
            Ok(child) => child,
            Err(e) => {
                let _ = std::fs::remove_file(&log_path);
                return Err(io::Error::new(
                    e.kind(),
                    format!("failed to run `{}`: {e}", binary.display()),
                ));
            }
        };
        let read_log = |path: &Path| {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            let _ = std::fs::remove_file(path);
            text
        };
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            if let Some(status) = child.try_wait()? {
                return Err(io::Error::other(format!(
                    "`{}` on port {port} exited with {status}:\n{}",
                    binary.display(),
                    read_log(&log_path)
                )));
            }
            if http_request(port, "GET", "/moto-api/").is_ok() {
                break;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "`{}` did not answer on port {port} within {}s:\n{}",
                        binary.display(),
                        STARTUP_TIMEOUT.as_secs(),
                        read_log(&log_path)
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = std::fs::remove_file(&log_path);
        let watchdog = spawn_watchdog(child.id());
        Ok(Moto {
            port,
            child,
            watchdog,
            patched: patched.map(Path::to_path_buf),
        })
    }

    /// True when this server runs the shared tree's patched moto, which
    /// pages DescribeLaunchTemplates with `NextToken` (plain moto answers
    /// at most 15 templates and ignores the token). Tests of more than 15
    /// templates check this and skip those assertions, saying why, when
    /// it is false.
    pub fn pages_launch_templates(&self) -> bool {
        self.patched.is_some()
    }

    /// The port moto listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The endpoint URL, `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Drops every resource moto holds (`POST /moto-api/reset`).
    pub fn reset(&self) -> io::Result<()> {
        let (status, body) = http_request(self.port, "POST", "/moto-api/reset")?;
        if status == 200 {
            Ok(())
        } else {
            Err(io::Error::other(format!(
                "moto reset answered {status}: {}",
                String::from_utf8_lossy(&body)
            )))
        }
    }

    /// Creates an S3 bucket (in us-east-1). Moto does not check signatures, so
    /// a plain `PUT /<bucket>` is enough and needs no SDK here.
    pub fn create_bucket(&self, bucket: &str) -> io::Result<()> {
        let (status, body) = http_request(self.port, "PUT", &format!("/{bucket}"))?;
        if status == 200 {
            Ok(())
        } else {
            Err(io::Error::other(format!(
                "moto create bucket `{bucket}` answered {status}: {}",
                String::from_utf8_lossy(&body)
            )))
        }
    }

    /// Makes sure a public Route 53 hosted zone `name` exists (one per name,
    /// however many tests of the process ask) and returns its id. Plain
    /// HTTP against moto's Route 53 REST API, no SDK needed.
    pub fn ensure_hosted_zone(&self, name: &str) -> io::Result<String> {
        static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let name = name.trim_end_matches('.');
        let (_, listed) = http_request_with(
            self.port,
            "GET",
            "/2013-04-01/hostedzone",
            ROUTE53_HEADERS,
            "",
        )?;
        let listed = String::from_utf8_lossy(&listed).to_string();
        if let Some(id) = zone_id_named(&listed, name) {
            return Ok(id);
        }
        let body = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\
             <CreateHostedZoneRequest xmlns=\"https://route53.amazonaws.com/doc/2013-04-01/\">\
             <Name>{name}.</Name><CallerReference>kops-testkit-{name}</CallerReference>\
             </CreateHostedZoneRequest>"
        );
        let (status, created) = http_request_with(
            self.port,
            "POST",
            "/2013-04-01/hostedzone",
            ROUTE53_HEADERS,
            &body,
        )?;
        let created = String::from_utf8_lossy(&created).to_string();
        match zone_id_named(&created, name) {
            Some(id) if status < 300 => Ok(id),
            _ => Err(io::Error::other(format!(
                "moto create hosted zone `{name}` answered {status}: {created}"
            ))),
        }
    }

    /// Calls a query-protocol AWS API of moto (`Action=...&...` form body)
    /// for a service the tests have no SDK client of (classic ELB, say);
    /// returns the status and body.
    pub fn query_api(&self, service: &str, form: &str) -> io::Result<(u16, String)> {
        let headers = format!(
            "Content-Type: application/x-www-form-urlencoded\r\nAuthorization: AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/{service}/aws4_request, SignedHeaders=host, Signature=0\r\n"
        );
        let (status, body) = http_request_with(self.port, "POST", "/", &headers, form)?;
        Ok((status, String::from_utf8_lossy(&body).to_string()))
    }

    /// Calls a JSON-protocol AWS API of moto (`X-Amz-Target: <target>`),
    /// e.g. ACM's `CertificateManager.RequestCertificate`.
    pub fn json_api(&self, service: &str, target: &str, json: &str) -> io::Result<(u16, String)> {
        let headers = format!(
            "Content-Type: application/x-amz-json-1.1\r\nX-Amz-Target: {target}\r\nAuthorization: AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/{service}/aws4_request, SignedHeaders=host, Signature=0\r\n"
        );
        let (status, body) = http_request_with(self.port, "POST", "/", &headers, json)?;
        Ok((status, String::from_utf8_lossy(&body).to_string()))
    }

    /// Environment for child processes (e.g. the `kops` binary) so their AWS
    /// SDK talks to this moto with dummy credentials.
    pub fn env(&self) -> Vec<(String, String)> {
        [
            ("AWS_ENDPOINT_URL", self.endpoint().as_str()),
            ("AWS_ACCESS_KEY_ID", "testing"),
            ("AWS_SECRET_ACCESS_KEY", "testing"),
            ("AWS_REGION", "us-east-1"),
            ("AWS_EC2_METADATA_DISABLED", "true"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        stop_server(&mut self.child, &mut self.watchdog);
    }
}

/// Kills a test server and its watchdog and reaps both.
fn stop_server(child: &mut Child, watchdog: &mut Option<Child>) {
    let _ = child.kill();
    let _ = child.wait();
    if let Some(watchdog) = watchdog {
        let _ = watchdog.kill();
        let _ = watchdog.wait();
    }
}

/// The id of the hosted zone `name` in a Route 53 XML answer.
fn zone_id_named(xml: &str, name: &str) -> Option<String> {
    xml.split("<HostedZone>").skip(1).find_map(|zone| {
        let field = |tag: &str| {
            let start = zone.find(&format!("<{tag}>"))? + tag.len() + 2;
            let end = zone[start..].find(&format!("</{tag}>"))? + start;
            Some(zone[start..end].to_string())
        };
        (field("Name")?.trim_end_matches('.') == name)
            .then(|| field("Id"))
            .flatten()
            .map(|id| id.trim_start_matches("/hostedzone/").to_string())
    })
}

/// A port that was free a moment ago.
fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
        .local_addr()?
        .port())
}

/// A `sh` loop that kills `moto_pid` once this process is gone, for when
/// [`Moto`] is never dropped (statics; nextest runs each test in its own
/// process). Its stdio is detached so test runners do not wait for it.
fn spawn_watchdog(moto_pid: u32) -> Option<Child> {
    let script = r#"while kill -0 "$1" 2>/dev/null && kill -0 "$2" 2>/dev/null; do sleep 1; done; kill "$2" 2>/dev/null"#;
    Command::new("sh")
        .args(["-c", script, "kops-testkit-watchdog"])
        .arg(std::process::id().to_string())
        .arg(moto_pid.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()
}

/// A minimal HTTP/1.1 request without a body to 127.0.0.1:`port`; returns
/// the status code and the raw response body.
fn http_request(port: u16, method: &str, path: &str) -> io::Result<(u16, Vec<u8>)> {
    http_request_with(port, method, path, "", "")
}

/// Headers that make moto route a request to Route 53 (it picks the
/// service from the credential scope of the Authorization header).
const ROUTE53_HEADERS: &str = "Content-Type: application/xml\r\nAuthorization: AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/route53/aws4_request, SignedHeaders=host, Signature=0\r\n";

pub(crate) fn http_request_with(
    port: u16,
    method: &str,
    path: &str,
    headers: &str,
    body: &str,
) -> io::Result<(u16, Vec<u8>)> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_millis(500))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.set_write_timeout(Some(Duration::from_secs(10)))?;
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    let invalid = || io::Error::new(io::ErrorKind::InvalidData, "not an HTTP response");
    let head_end = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(invalid)?;
    let status_line = response[..head_end]
        .split(|&b| b == b'\r')
        .next()
        .ok_or_else(invalid)?;
    let status = std::str::from_utf8(status_line)
        .ok()
        .filter(|line| line.starts_with("HTTP/1."))
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .ok_or_else(invalid)?;
    Ok((status, response[head_end + 4..].to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workspace_root_has_the_workspace_manifest() {
        let manifest = std::fs::read_to_string(workspace_root().join("Cargo.toml")).unwrap();
        assert!(manifest.contains("[workspace]"));
    }

    #[test]
    fn moto_starts_answers_and_resets() {
        let Some(moto) = require_moto() else { return };
        assert!(moto.endpoint().starts_with("http://127.0.0.1:"));
        moto.reset().unwrap();
        let (status, _) = http_request(moto.port(), "GET", "/moto-api/").unwrap();
        assert!(status < 500, "status {status}");
        let env = moto.env();
        assert!(env.contains(&("AWS_ENDPOINT_URL".to_string(), moto.endpoint())));
        assert!(env.contains(&("AWS_REGION".to_string(), "us-east-1".to_string())));
    }

    #[test]
    fn a_dropped_moto_is_stopped() {
        if require_moto().is_none() {
            return;
        }
        let moto = Moto::start().unwrap();
        let port = moto.port();
        drop(moto);
        assert!(http_request(port, "GET", "/moto-api/").is_err());
    }

    #[test]
    fn moto_runs_the_shared_patched_moto_when_present() {
        let Some(moto) = require_moto() else { return };
        assert_eq!(
            moto.pages_launch_templates(),
            moto_patched_script().is_some()
                && moto_server_path()
                    .and_then(|p| std::fs::read(p).ok())
                    .is_some_and(|b| b.starts_with(b"#!") && b.windows(6).any(|w| w == b"python"))
        );
    }

    #[test]
    fn hosted_zones_are_made_once() {
        let Some(moto) = require_moto() else {
            return;
        };
        let first = moto.ensure_hosted_zone("testkit.example.org").unwrap();
        let again = moto.ensure_hosted_zone("testkit.example.org.").unwrap();
        assert_eq!(first, again);
        assert!(!first.is_empty() && !first.contains('/'));
    }
}
