//! govmomi's vCenter simulator (vcsim) on a free loopback port: the VPX
//! model plus a template VM `kops-template` with a snapshot (see
//! `vcsim/main.go`), built once by `scripts/setup-vcsim` into
//! `<workspace>/.vcsim/vcsim-kops`. One per test process, started on first
//! use like moto; a test wanting its own inventory starts its own.

use std::io::{self, BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use crate::{spawn_watchdog, stop_server, workspace_root};

/// The user name the simulator accepts.
pub const USER: &str = "vcsim-admin-4d1e";
/// Its password.
pub const PASSWORD: &str = "vcsim-secret-93b7f2";
/// What the model holds, for specs and flags.
pub const DATACENTER: &str = "DC0";
pub const CLUSTER: &str = "DC0_C0";
pub const DATASTORE: &str = "LocalDS_0";
pub const NETWORK: &str = "VM Network";
pub const TEMPLATE: &str = "kops-template";

/// How long the simulator may take to print its URL.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

/// Where the simulator binary is: `$VCSIM_KOPS` if set, else
/// `<workspace>/.vcsim/vcsim-kops` if built.
pub fn vcsim_path() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("VCSIM_KOPS").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    let built = workspace_root().join(".vcsim/vcsim-kops");
    built.is_file().then_some(built)
}

/// The process-wide simulator, or `None` (after printing why) when it is
/// not built and the test should be skipped.
///
/// # Panics
///
/// When it is not built and [`in_ci`], or when it does not start.
pub fn require_vcsim() -> Option<&'static Vcsim> {
    vcsim_available().then(Vcsim::shared)
}

/// Whether the simulator is built; prints why not (and panics under CI).
pub fn vcsim_available() -> bool {
    if vcsim_path().is_some() {
        return true;
    }
    crate::skip(
        "vSphere",
        "vcsim-kops not built (run scripts/setup-vcsim, or set VCSIM_KOPS)",
    );
    false
}

/// A running simulator, killed on drop (or by a watchdog when the process
/// exits, for the shared one).
#[derive(Debug)]
pub struct Vcsim {
    url: String,
    child: Child,
    watchdog: Option<Child>,
    tls: Option<Tls>,
    /// The simulator's temporary directory (its datastores' files live
    /// there), removed once it is stopped.
    _scratch: tempfile::TempDir,
}

/// The certificates of a simulator serving HTTPS, as a vCenter's VMCA
/// issues them: a CA of its own (the operator's machine does not trust
/// it) and a server certificate it signed for 127.0.0.1.
#[derive(Debug)]
pub struct Tls {
    /// Holds the PEM files for as long as the simulator runs.
    dir: tempfile::TempDir,
    /// The server certificate (DER).
    pub certificate_der: Vec<u8>,
}

impl Tls {
    /// Makes the CA and the server certificate into a new directory.
    fn generate() -> io::Result<Tls> {
        use rcgen::{
            BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose,
        };
        let fail = |e: rcgen::Error| io::Error::other(format!("making a test certificate: {e}"));
        let ca_key = KeyPair::generate().map_err(fail)?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(fail)?;
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "vcsim test VMCA");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca = ca_params.self_signed(&ca_key).map_err(fail)?;
        let issuer = Issuer::new(ca_params, ca_key);
        let key = KeyPair::generate().map_err(fail)?;
        let mut params = CertificateParams::new(vec!["127.0.0.1".to_string()]).map_err(fail)?;
        params
            .distinguished_name
            .push(DnType::CommonName, "127.0.0.1");
        params.is_ca = IsCa::ExplicitNoCa;
        let cert = params.signed_by(&key, &issuer).map_err(fail)?;
        let dir = tempfile::tempdir()?;
        std::fs::write(dir.path().join("ca.pem"), ca.pem())?;
        std::fs::write(dir.path().join("server.pem"), cert.pem())?;
        std::fs::write(dir.path().join("server-key.pem"), key.serialize_pem())?;
        Ok(Tls {
            dir,
            certificate_der: cert.der().to_vec(),
        })
    }

    /// The PEM file of the CA that signed the server certificate.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// The server certificate's SHA-1 fingerprint as govc prints it
    /// (upper-case hex pairs joined by colons).
    pub fn thumbprint(&self) -> String {
        let digest = aws_lc_rs::digest::digest(
            &aws_lc_rs::digest::SHA1_FOR_LEGACY_USE_ONLY,
            &self.certificate_der,
        );
        digest
            .as_ref()
            .iter()
            .map(|b| format!("{b:02X}"))
            .collect::<Vec<_>>()
            .join(":")
    }
}

impl Vcsim {
    /// One simulator per process, started on first call.
    ///
    /// # Panics
    ///
    /// When it cannot be started.
    pub fn shared() -> &'static Vcsim {
        static SERVER: OnceLock<Vcsim> = OnceLock::new();
        SERVER
            .get_or_init(|| Vcsim::start().unwrap_or_else(|e| panic!("failed to start vcsim: {e}")))
    }

    /// Starts a new simulator (its own inventory) and waits for its URL.
    pub fn start() -> io::Result<Vcsim> {
        Vcsim::start_with(None, false)
    }

    /// Starts a new simulator whose datastore is a vSAN datastore: its
    /// top-level directories are namespaces that only the
    /// DatastoreNamespaceManager makes, as on vSAN (`vcsim/vsan.go`).
    pub fn start_vsan() -> io::Result<Vcsim> {
        Vcsim::start_with(None, true)
    }

    /// Starts a new simulator serving HTTPS with a certificate signed by a
    /// CA of its own ([`Vcsim::tls`]).
    pub fn start_tls() -> io::Result<Vcsim> {
        Vcsim::start_with(Some(Tls::generate()?), false)
    }

    fn start_with(tls: Option<Tls>, vsan: bool) -> io::Result<Vcsim> {
        let binary = vcsim_path().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "vcsim-kops not built (run scripts/setup-vcsim)",
            )
        })?;
        // The simulator makes its datastores' directories in the system's
        // temporary directory and leaves them when killed: a directory of
        // its own, removed with it, keeps /tmp clean.
        let scratch = tempfile::tempdir()?;
        let mut command = Command::new(&binary);
        command
            .env("TMPDIR", scratch.path())
            .args(["-user", USER, "-password", PASSWORD]);
        if vsan {
            command.arg("-vsan");
        }
        if let Some(tls) = &tls {
            command
                .arg("-tls-cert")
                .arg(tls.dir.path().join("server.pem"))
                .arg("-tls-key")
                .arg(tls.dir.path().join("server-key.pem"));
        }
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("failed to run `{}`: {e}", binary.display()),
                )
            })?;
        let stdout = child.stdout.take().expect("piped stdout");
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let first = lines.next();
            let _ = sender.send(first);
            // Keep reading so the simulator never blocks on a full pipe.
            for _ in lines {}
        });
        let url = match receiver.recv_timeout(STARTUP_TIMEOUT) {
            Ok(Some(Ok(line))) if line.starts_with("URL ") => line[4..].trim().to_string(),
            other => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(io::Error::other(format!(
                    "`{}` printed no URL: {other:?}",
                    binary.display()
                )));
            }
        };
        let watchdog = spawn_watchdog(child.id());
        Ok(Vcsim {
            url,
            child,
            watchdog,
            tls,
            _scratch: scratch,
        })
    }

    /// The certificates of a simulator started with [`Vcsim::start_tls`].
    pub fn tls(&self) -> Option<&Tls> {
        self.tls.as_ref()
    }

    /// The SOAP endpoint, `http://127.0.0.1:PORT/sdk` (`https` with TLS).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Environment for child processes (the `kops` binary): the credentials
    /// the simulator accepts.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("VSPHERE_USERNAME".to_string(), USER.to_string()),
            ("VSPHERE_PASSWORD".to_string(), PASSWORD.to_string()),
        ]
    }
}

impl Drop for Vcsim {
    fn drop(&mut self) {
        stop_server(&mut self.child, &mut self.watchdog);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_and_answers() {
        if !vcsim_available() {
            return;
        }
        let server = Vcsim::start().unwrap();
        let port: u16 = server
            .url()
            .trim_start_matches("http://127.0.0.1:")
            .trim_end_matches("/sdk")
            .parse()
            .unwrap();
        assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_ok());
    }

    #[test]
    fn serves_https_with_its_own_ca() {
        if !vcsim_available() {
            return;
        }
        let server = Vcsim::start_tls().unwrap();
        assert!(
            server.url().starts_with("https://127.0.0.1:"),
            "{}",
            server.url()
        );
        let tls = server.tls().unwrap();
        assert_eq!(tls.thumbprint().len(), 59, "{}", tls.thumbprint());
        let pem = std::fs::read_to_string(tls.ca_file()).unwrap();
        assert!(pem.starts_with("-----BEGIN CERTIFICATE-----"), "{pem}");
    }
}
