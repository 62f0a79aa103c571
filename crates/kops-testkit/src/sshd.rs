//! A real OpenSSH server (Debian's `openssh-server`) on a free loopback
//! port, for tests of commands that work over SSH (`toolbox enroll`).
//!
//! The server runs in a mount namespace of its own (`unshare --mount`)
//! where `/etc`, `/opt` and `/var` are overlays whose upper layers are in
//! the test's temporary directory and `/proc/sys` is read-only: whatever a
//! command does to "the machine" (files under `/etc/kubernetes`, nodeup
//! under `/opt/kops`) lands in those layers, where the test reads it
//! ([`Sshd::written`]), and the host running the tests is left as it was.
//! Logins use a key generated for the test, held by an `ssh-agent` of the
//! test's own ([`Sshd::agent_socket`]); the host key is generated too.
//!
//! Needs root (the mount namespace), `sshd`, `ssh-keygen`, `ssh-agent`,
//! `ssh-add` and `unshare`. Without them [`Sshd::start`] prints why and
//! returns `None`, except under CI, where it panics.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::in_ci;

/// A running test SSH server and its agent.
pub struct Sshd {
    sshd: Child,
    agent: Child,
    dir: tempfile::TempDir,
    port: u16,
}

/// The overlaid directories (the test reads what the machine wrote there).
const OVERLAID: [&str; 3] = ["etc", "opt", "var"];

fn skip(reason: &str) -> Option<Sshd> {
    crate::skip(
        "SSH",
        &format!("{reason} (scripts/test installs openssh-server)"),
    );
    None
}

fn sshd_path() -> Option<PathBuf> {
    let fixed = Path::new("/usr/sbin/sshd");
    if fixed.is_file() {
        return Some(fixed.to_path_buf());
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join("sshd"))
        .find(|p| p.is_file())
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let out = cmd
        .output()
        .map_err(|e| format!("{:?}: {e}", cmd.get_program()))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{:?} failed: {}",
            cmd.get_program(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Sshd {
    /// Starts the server and the agent (holding the login key), or `None`
    /// (printed why) when this machine cannot run them.
    pub fn start() -> Option<Sshd> {
        let Some(sshd) = sshd_path() else {
            return skip("sshd not found (apt-get install openssh-server)");
        };
        match Command::new("unshare")
            .args(["--mount", "true"])
            .stderr(Stdio::null())
            .status()
        {
            Ok(s) if s.success() => {}
            _ => return skip("`unshare --mount` is not allowed here (the test sshd needs root)"),
        }
        match Self::try_start(&sshd) {
            Ok(s) => Some(s),
            Err(e) => {
                if in_ci() {
                    panic!("the test sshd did not start: {e}");
                }
                skip(&format!("the test sshd did not start: {e}"))
            }
        }
    }

    fn try_start(sshd: &Path) -> Result<Sshd, String> {
        let dir = tempfile::Builder::new()
            .prefix("kops-sshd-")
            .tempdir()
            .map_err(|e| e.to_string())?;
        let d = dir.path();
        for key in ["host_key", "login_key"] {
            run(Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                .arg(d.join(key)))?;
        }
        std::fs::copy(d.join("login_key.pub"), d.join("authorized_keys"))
            .map_err(|e| e.to_string())?;
        let port = crate::free_port().map_err(|e| e.to_string())?;
        std::fs::write(
            d.join("sshd_config"),
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {host_key}\nPidFile {pid}\n\
                 AuthorizedKeysFile {keys}\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n\
                 UsePAM no\nPermitRootLogin prohibit-password\nStrictModes no\n\
                 Subsystem sftp internal-sftp\n",
                host_key = d.join("host_key").display(),
                pid = d.join("sshd.pid").display(),
                keys = d.join("authorized_keys").display(),
            ),
        )
        .map_err(|e| e.to_string())?;
        let mut script = String::from("set -e\n");
        for o in OVERLAID {
            script.push_str(&format!(
                "mkdir -p \"$T/{o}/upper\" \"$T/{o}/work\"\n\
                 mount -t overlay overlay -o \"lowerdir=/{o},upperdir=$T/{o}/upper,workdir=$T/{o}/work\" /{o}\n"
            ));
        }
        script.push_str(
            "mount -t tmpfs tmpfs /run\nmkdir -p /run/sshd\n\
             mount --bind /proc/sys /proc/sys\nmount -o remount,bind,ro /proc/sys\n\
             exec \"$SSHD\" -D -e -f \"$T/sshd_config\"\n",
        );
        let log = std::fs::File::create(d.join("sshd.log")).map_err(|e| e.to_string())?;
        let sshd_child = Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c", &script])
            .env("T", d)
            .env("SSHD", sshd)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("unshare: {e}"))?;
        let socket = d.join("agent.sock");
        let agent = Command::new("ssh-agent")
            .arg("-D")
            .arg("-a")
            .arg(&socket)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("ssh-agent: {e}"))?;
        let mut server = Sshd {
            sshd: sshd_child,
            agent,
            dir,
            port,
        };
        server.wait_ready()?;
        run(Command::new("ssh-add")
            .arg("-q")
            .arg(server.dir.path().join("login_key"))
            .env("SSH_AUTH_SOCK", &socket))?;
        Ok(server)
    }

    fn wait_ready(&mut self) -> Result<(), String> {
        let started = Instant::now();
        let socket = self.agent_socket();
        loop {
            if let Ok(Some(status)) = self.sshd.try_wait() {
                let log =
                    std::fs::read_to_string(self.dir.path().join("sshd.log")).unwrap_or_default();
                return Err(format!("sshd exited ({status}): {}", log.trim()));
            }
            let listening = TcpStream::connect(("127.0.0.1", self.port)).is_ok();
            if listening && socket.exists() {
                return Ok(());
            }
            if started.elapsed() > Duration::from_secs(20) {
                return Err("sshd or ssh-agent not ready after 20s".into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The server's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `SSH_AUTH_SOCK` for clients: the agent holding the login key.
    pub fn agent_socket(&self) -> PathBuf {
        self.dir.path().join("agent.sock")
    }

    /// The contents of `path` (under `/etc`, `/opt` or `/var`) as the
    /// machine wrote it during the test; `None` when it wrote no such file.
    pub fn written(&self, path: &str) -> Option<Vec<u8>> {
        let rest = path.trim_start_matches('/');
        let (top, inner) = rest.split_once('/')?;
        if !OVERLAID.contains(&top) {
            return None;
        }
        std::fs::read(self.dir.path().join(top).join("upper").join(inner)).ok()
    }

    /// Every file the machine wrote under `/<top>` (relative paths, sorted).
    pub fn written_under(&self, top: &str) -> Vec<String> {
        let base = self.dir.path().join(top.trim_matches('/')).join("upper");
        let mut out = Vec::new();
        let mut stack = vec![base.clone()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let p = entry.path();
                if p.is_dir() {
                    stack.push(p);
                } else if let Ok(rel) = p.strip_prefix(&base) {
                    out.push(rel.display().to_string());
                }
            }
        }
        out.sort();
        out
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.sshd.kill();
        let _ = self.sshd.wait();
        let _ = self.agent.kill();
        let _ = self.agent.wait();
    }
}
