//! A software TPM 2.0 (Debian's `swtpm`, libtpms: the TPM reference
//! implementation) serving raw TPM commands on a Unix socket in the test's
//! temporary directory, with its own empty state: a freshly manufactured
//! TPM, started (`TPM2_Startup(CLEAR)`), every hierarchy's password empty,
//! as a VM's vTPM is.
//!
//! Without `swtpm` [`Swtpm::start`] prints why and returns `None`, except
//! under CI, where it panics (scripts/test installs it).

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running software TPM.
pub struct Swtpm {
    child: Child,
    dir: tempfile::TempDir,
}

fn skip(reason: &str) -> Option<Swtpm> {
    crate::skip("TPM", &format!("{reason} (scripts/test installs swtpm)"));
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
        // The socket file appears when swtpm binds it, before it listens:
        // ready is when a connection is accepted (closing it frees swtpm
        // for the next one).
        let deadline = Instant::now() + Duration::from_secs(10);
        while UnixStream::connect(&socket).is_err() {
            if Instant::now() > deadline {
                panic!(
                    "swtpm did not accept connections on {} in 10 s",
                    socket.display()
                );
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

/// The NV index where a shielded VM's firmware leaves Google's RSA
/// attestation key template.
pub const GCE_AK_TEMPLATE_RSA: u32 = 0x01c1_0001;

/// Google's RSA attestation key template (a `TPMT_PUBLIC`): RSA 2048, a
/// restricted signing key (fixedTPM, fixedParent, sensitiveDataOrigin,
/// userWithAuth, restricted, sign), RSASSA with SHA-256, the default
/// exponent, no policy, an empty unique field.
pub fn gce_ak_template() -> Vec<u8> {
    let mut t = Vec::new();
    t.extend(0x0001u16.to_be_bytes()); // TPM_ALG_RSA
    t.extend(0x000Bu16.to_be_bytes()); // name algorithm SHA-256
    t.extend(0x0005_0072u32.to_be_bytes()); // the attributes above
    t.extend(0u16.to_be_bytes()); // no policy
    t.extend(0x0010u16.to_be_bytes()); // no symmetric algorithm
    t.extend(0x0014u16.to_be_bytes()); // RSASSA
    t.extend(0x000Bu16.to_be_bytes()); // with SHA-256
    t.extend(2048u16.to_be_bytes());
    t.extend(0u32.to_be_bytes()); // exponent 65537
    t.extend(0u16.to_be_bytes()); // empty unique
    t
}

/// One TPM command with an empty password session on `handles`.
fn command(stream: &mut UnixStream, code: u32, handles: &[u32], params: &[u8]) {
    let mut body = Vec::new();
    for h in handles {
        body.extend(h.to_be_bytes());
    }
    body.extend(9u32.to_be_bytes());
    body.extend(0x4000_0009u32.to_be_bytes()); // TPM_RS_PW
    body.extend([0, 0, 0, 0, 0]); // no nonce, no attributes, no HMAC
    body.extend(params);
    let mut out = Vec::new();
    out.extend(0x8002u16.to_be_bytes());
    out.extend(((10 + body.len()) as u32).to_be_bytes());
    out.extend(code.to_be_bytes());
    out.extend(body);
    stream.write_all(&out).expect("a TPM command");
    let mut header = [0u8; 10];
    stream.read_exact(&mut header).expect("a TPM response");
    let size = u32::from_be_bytes(header[2..6].try_into().unwrap()) as usize;
    let mut rest = vec![0u8; size - 10];
    stream.read_exact(&mut rest).expect("a TPM response");
    let rc = u32::from_be_bytes(header[6..10].try_into().unwrap());
    assert_eq!(rc, 0, "TPM command 0x{code:08x} answered 0x{rc:08x}");
}

impl Swtpm {
    /// What a shielded VM's firmware does: defines NV index
    /// [`GCE_AK_TEMPLATE_RSA`] (owner authorization; readable with its own
    /// or the owner's) and writes [`gce_ak_template`] there.
    pub fn provision_gce_ak_template(&self) {
        const OWNER: u32 = 0x4000_0001;
        let template = gce_ak_template();
        let mut public = Vec::new();
        public.extend(GCE_AK_TEMPLATE_RSA.to_be_bytes());
        public.extend(0x000Bu16.to_be_bytes());
        // OWNERWRITE | AUTHWRITE | OWNERREAD | AUTHREAD | NO_DA
        public.extend((0x2 | 0x4 | (1u32 << 17) | (1u32 << 18) | (1u32 << 25)).to_be_bytes());
        public.extend(0u16.to_be_bytes());
        public.extend((template.len() as u16).to_be_bytes());
        let mut define = Vec::new();
        define.extend(0u16.to_be_bytes()); // no auth value
        define.extend((public.len() as u16).to_be_bytes());
        define.extend(public);
        let mut stream = self.connect();
        command(&mut stream, 0x0000_012A, &[OWNER], &define); // NV_DefineSpace
        let mut write = Vec::new();
        write.extend((template.len() as u16).to_be_bytes());
        write.extend(&template);
        write.extend(0u16.to_be_bytes()); // offset
        command(
            &mut stream,
            0x0000_0137,
            &[OWNER, GCE_AK_TEMPLATE_RSA],
            &write,
        ); // NV_Write
    }
}

impl Drop for Swtpm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
