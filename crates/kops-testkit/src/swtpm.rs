//! A software TPM 2.0 (Debian's `swtpm`, libtpms: the TPM reference
//! implementation) serving raw TPM commands on a Unix socket in the test's
//! temporary directory, with its own empty state: a freshly manufactured
//! TPM, started (`TPM2_Startup(CLEAR)`), every hierarchy's password empty,
//! as a VM's vTPM is.
//!
//! Without `swtpm` [`Swtpm::start`] prints why and returns `None`, except
//! under CI, where it panics (scripts/test installs it).

use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::in_ci;

/// A running software TPM.
pub struct Swtpm {
    child: Child,
    dir: tempfile::TempDir,
}

fn skip(reason: &str) -> Option<Swtpm> {
    if in_ci() {
        panic!(
            "{reason}; CI is set, so TPM tests must not be skipped (scripts/test installs swtpm)"
        );
    }
    eprintln!("skipping: {reason}");
    None
}

fn find(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .chain([PathBuf::from("/usr/bin")])
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

impl Swtpm {
    /// Starts a TPM, or `None` (printed why) when `swtpm` is not here.
    pub fn start() -> Option<Swtpm> {
        let Some(swtpm) = find("swtpm") else {
            return skip("swtpm not found (apt-get install swtpm)");
        };
        let dir = tempfile::tempdir().expect("a temporary directory");
        let state = dir.path().join("state");
        std::fs::create_dir_all(&state).expect("the TPM's state directory");
        let socket = dir.path().join("tpm.sock");
        let child = Command::new(swtpm)
            .arg("socket")
            .arg("--tpm2")
            .arg("--tpmstate")
            .arg(format!("dir={}", state.display()))
            .arg("--server")
            .arg(format!("type=unixio,path={}", socket.display()))
            .arg("--ctrl")
            .arg(format!(
                "type=unixio,path={}",
                dir.path().join("ctrl.sock").display()
            ))
            .arg("--flags")
            .arg("not-need-init,startup-clear")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn();
        let child = match child {
            Ok(c) => c,
            Err(e) => return skip(&format!("swtpm did not start: {e}")),
        };
        let tpm = Swtpm { child, dir };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !socket.exists() {
            if Instant::now() > deadline {
                panic!("swtpm did not open {} in 10 s", socket.display());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(tpm)
    }

    /// The socket path (raw TPM commands, one connection at a time).
    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("tpm.sock")
    }

    /// The address nodeup takes (`unix:PATH`).
    pub fn address(&self) -> String {
        format!("unix:{}", self.socket().display())
    }

    /// A connection for a test's own commands.
    pub fn connect(&self) -> UnixStream {
        UnixStream::connect(self.socket()).expect("the swtpm socket")
    }

    /// The TPM's temporary directory.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Swtpm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
