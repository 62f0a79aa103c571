//! A machine reached over SSH with the system `ssh` client (OpenSSH): the
//! user's agent, keys and `~/.ssh/config` apply, and one connection is
//! shared by every command (a control master in a private temporary
//! directory, closed on drop). As kops, any host key is accepted (the
//! machine is usually new) and a user other than root runs commands
//! through `sudo`.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;

use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use super::EnrollError;

/// Exit status a file read uses for "no such file" (any other failure is
/// an error).
const MISSING: i32 = 44;

/// Where a command's output goes as it comes, when it is echoed (the
/// binary copies it to stderr, as kops shows a script's progress).
pub type Echo = Arc<dyn Fn(&[u8]) + Send + Sync>;

/// An SSH connection to one machine.
pub struct SshHost {
    echo: Echo,
    host: String,
    port: u16,
    user: String,
    sudo: bool,
    /// Holds the control socket; removed with the connection.
    control_dir: tempfile::TempDir,
}

/// What a command printed.
#[derive(Debug, Default)]
pub struct CommandOutput {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl SshHost {
    /// Connects to `user@host:port` (authenticating once; later commands
    /// reuse the connection).
    pub async fn connect(
        host: &str,
        port: u16,
        user: &str,
        echo: Echo,
    ) -> Result<SshHost, EnrollError> {
        let control_dir = tempfile::Builder::new()
            .prefix("kops-ssh-")
            .tempdir()
            .map_err(|e| EnrollError::Local(format!("creating a temporary directory: {e}")))?;
        let target = SshHost {
            echo,
            host: host.to_string(),
            port,
            user: user.to_string(),
            sudo: user != "root",
            control_dir,
        };
        // The master forks into the background once authenticated and keeps
        // the connection; its stderr goes to a file (a pipe would stay open
        // in the background process).
        let log_path = target.control_dir.path().join("connect.log");
        let log = std::fs::File::create(&log_path)
            .map_err(|e| EnrollError::Local(format!("creating {}: {e}", log_path.display())))?;
        let status = target
            .ssh(&[
                "-o",
                "ControlMaster=yes",
                "-o",
                "ControlPersist=yes",
                "-N",
                "-f",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .status()
            .await
            .map_err(|e| EnrollError::Local(format!("running `ssh`: {e}")))?;
        if !status.success() {
            let stderr = std::fs::read(&log_path).unwrap_or_default();
            return Err(EnrollError::Connect {
                host: host.to_string(),
                user: user.to_string(),
                reason: last_line(&stderr),
            });
        }
        Ok(target)
    }

    fn control_path(&self) -> PathBuf {
        self.control_dir.path().join("control")
    }

    /// `ssh` with the options every call shares, then `extra` options, then
    /// the destination (a remote command goes after it).
    fn ssh(&self, extra: &[&str]) -> Command {
        let mut c = Command::new("ssh");
        c.arg("-p")
            .arg(self.port.to_string())
            .arg("-l")
            .arg(&self.user)
            .args([
                "-o",
                "BatchMode=yes",
                "-o",
                "StrictHostKeyChecking=no",
                "-o",
                "UserKnownHostsFile=/dev/null",
                "-o",
                "LogLevel=ERROR",
                "-o",
                "ConnectTimeout=30",
                "-o",
            ])
            .arg(format!("ControlPath={}", self.control_path().display()))
            .args(extra)
            .arg("--")
            .arg(&self.host)
            .kill_on_drop(true);
        c
    }

    /// The remote form of a shell command: through `sudo sh -c` for a user
    /// other than root.
    fn remote(&self, command: &str) -> String {
        if self.sudo {
            format!("sudo sh -c {}", quote(command))
        } else {
            command.to_string()
        }
    }

    /// Runs `command` on the machine. With `echo`, what it prints is also
    /// handed to the connection's [`Echo`] as it comes.
    pub async fn run(
        &self,
        command: &str,
        input: Option<&[u8]>,
        echo: bool,
    ) -> Result<CommandOutput, EnrollError> {
        let remote = self.remote(command);
        let mut child = self
            .ssh(&[])
            .arg(&remote)
            .stdin(if input.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| EnrollError::Local(format!("running `ssh`: {e}")))?;
        let mut stdin = child.stdin.take();
        let feed = async {
            if let (Some(stdin), Some(bytes)) = (stdin.as_mut(), input) {
                stdin.write_all(bytes).await?;
                stdin.shutdown().await?;
            }
            drop(stdin);
            Ok::<_, std::io::Error>(())
        };
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let echo = echo.then_some(&self.echo);
        let (fed, out, err) = tokio::join!(feed, drain(stdout, echo), drain(stderr, echo));
        let status = child
            .wait()
            .await
            .map_err(|e| EnrollError::Local(format!("waiting for `ssh`: {e}")))?;
        let output = CommandOutput {
            stdout: out,
            stderr: err,
        };
        if let Err(e) = fed {
            return Err(EnrollError::Command {
                command: remote,
                reason: format!("sending its input: {e}"),
            });
        }
        match status.code() {
            Some(0) => Ok(output),
            Some(MISSING) if command.starts_with(READ_PREFIX) => Err(EnrollError::Missing),
            code => Err(EnrollError::Command {
                command: remote,
                reason: match code {
                    Some(255) => format!("ssh failed: {}", last_line(&output.stderr)),
                    Some(c) => format!("exit status {c}: {}", last_line(&output.stderr)),
                    None => "ssh was killed by a signal".into(),
                },
            }),
        }
    }

    /// A file's contents; `None` when there is no such file.
    pub async fn read_file(&self, path: &str) -> Result<Option<Vec<u8>>, EnrollError> {
        let p = quote(path);
        let command = format!("{READ_PREFIX}{p} ]; then cat {p}; else exit {MISSING}; fi");
        match self.run(&command, None, false).await {
            Ok(out) => Ok(Some(out.stdout)),
            Err(EnrollError::Missing) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Writes a file (its directory made first), replacing it whole: the
    /// bytes go to a temporary file beside it, renamed into place.
    pub async fn write_file(&self, path: &str, bytes: &[u8]) -> Result<(), EnrollError> {
        let dir = path.rsplit_once('/').map(|(d, _)| d).unwrap_or(".");
        let dir = if dir.is_empty() { "/" } else { dir };
        let (p, tmp) = (quote(path), quote(&format!("{path}.kops-tmp")));
        let command = format!("mkdir -p {} && cat > {tmp} && mv -f {tmp} {p}", quote(dir));
        self.run(&command, Some(bytes), false).await.map(|_| ())
    }

    /// Runs a bash script: written to a new private directory under /tmp,
    /// run with `/bin/bash`, the directory removed afterwards.
    pub async fn run_script(&self, script: &str, echo: bool) -> Result<CommandOutput, EnrollError> {
        let dir = self
            .run("mktemp -d /tmp/kops-enroll.XXXXXXXXXX", None, false)
            .await?;
        let dir = String::from_utf8_lossy(&dir.stdout).trim().to_string();
        if !dir.starts_with("/tmp/kops-enroll.") {
            return Err(EnrollError::Command {
                command: "mktemp -d".into(),
                reason: format!("unexpected directory `{dir}`"),
            });
        }
        let path = format!("{dir}/script.sh");
        let result = async {
            self.write_file(&path, script.as_bytes()).await?;
            self.run(&format!("/bin/bash {}", quote(&path)), None, echo)
                .await
        }
        .await;
        // Best effort, as kops: a failed clean-up does not hide the result.
        let _ = self
            .run(&format!("rm -rf {}", quote(&dir)), None, false)
            .await;
        result
    }

    /// The machine's host name (the node's name once enrolled).
    pub async fn hostname(&self) -> Result<String, EnrollError> {
        let out = self.run("hostname", None, false).await?;
        let name = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if name.is_empty() {
            return Err(EnrollError::Command {
                command: "hostname".into(),
                reason: "it printed no host name".into(),
            });
        }
        Ok(name)
    }
}

impl Drop for SshHost {
    fn drop(&mut self) {
        // Closes the shared connection; the socket's directory goes with
        // `control_dir`.
        let _ = std::process::Command::new("ssh")
            .arg("-o")
            .arg(format!("ControlPath={}", self.control_path().display()))
            .args(["-O", "exit"])
            .arg(&self.host)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

const READ_PREFIX: &str = "if [ -e ";

/// Reads a child's stream to its end, handing each piece to `echo`.
async fn drain<R: tokio::io::AsyncRead + Unpin>(stream: Option<R>, echo: Option<&Echo>) -> Vec<u8> {
    use tokio::io::AsyncReadExt;
    let Some(mut stream) = stream else {
        return Vec::new();
    };
    let mut all = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                all.extend_from_slice(&buf[..n]);
                if let Some(echo) = echo {
                    echo(&buf[..n]);
                }
            }
        }
    }
    all
}

/// The last non-empty line of a command's stderr (ssh's reason).
fn last_line(stderr: &[u8]) -> String {
    String::from_utf8_lossy(stderr)
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("no message")
        .trim()
        .to_string()
}

/// Single-quotes a word for a POSIX shell.
pub fn quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_words_for_the_remote_shell() {
        assert_eq!(quote("/etc/a b"), "'/etc/a b'");
        assert_eq!(quote("it's"), r"'it'\''s'");
    }
}
