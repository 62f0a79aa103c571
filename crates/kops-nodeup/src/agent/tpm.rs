//! The shielded VM's vTPM, as a GCE node signs its bootstrap token with
//! it: Google's attestation key (AK) is recreated from the template the
//! firmware stores in NV index `0x01c10001` (a primary key in the
//! endorsement hierarchy: the same template gives the same key, the one
//! Compute reports as the instance's `signingKey`), the token is hashed by
//! the TPM (a restricted key signs only digests the TPM made, which it
//! proves with a hash-check ticket) and signed with RSASSA-PKCS1-v1_5
//! SHA-256, then the key is flushed.
//!
//! The TPM 2.0 commands are written out here (TPM 2.0 Library, part 3):
//! `NV_ReadPublic`, `NV_Read`, `CreatePrimary`, `Hash`, `Sign`,
//! `FlushContext`, with an empty password session where one is needed. The
//! transport is the kernel's resource manager (`/dev/tpmrm0`), or a Unix
//! socket speaking raw TPM commands (`unix:PATH`, swtpm's server socket),
//! which the tests use.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;

use kops_bootstrap::gce::token::Signer;

/// Where the kernel's TPM resource manager is.
pub const DEFAULT_DEVICE: &str = "/dev/tpmrm0";
/// The NV index holding Google's RSA attestation key template.
pub const GCE_AK_TEMPLATE_RSA: u32 = 0x01c1_0001;

const ST_NO_SESSIONS: u16 = 0x8001;
const ST_SESSIONS: u16 = 0x8002;
const RS_PW: u32 = 0x4000_0009;
const RH_OWNER: u32 = 0x4000_0001;
const RH_ENDORSEMENT: u32 = 0x4000_000B;
const RH_PLATFORM: u32 = 0x4000_000C;
const ALG_RSA: u16 = 0x0001;
const ALG_SHA256: u16 = 0x000B;
const ALG_NULL: u16 = 0x0010;
const ALG_RSASSA: u16 = 0x0014;
const NV_AUTHREAD: u32 = 1 << 18;
const NV_OWNERREAD: u32 = 1 << 17;
/// The largest buffer `TPM2_Hash` takes (`MAX_DIGEST_BUFFER`).
const MAX_HASH_INPUT: usize = 1024;
/// NV reads in chunks no TPM refuses.
const NV_CHUNK: u16 = 512;

/// TPM command codes.
mod cc {
    pub const NV_READ_PUBLIC: u32 = 0x0000_0169;
    pub const NV_READ: u32 = 0x0000_014E;
    pub const CREATE_PRIMARY: u32 = 0x0000_0131;
    pub const HASH: u32 = 0x0000_017D;
    pub const SIGN: u32 = 0x0000_015D;
    pub const FLUSH_CONTEXT: u32 = 0x0000_0165;
}

/// A TPM command being written: handles, then (with `sessions`) an empty
/// password authorization, then parameters.
pub struct Command {
    code: u32,
    handles: Vec<u32>,
    sessions: bool,
    params: Vec<u8>,
}

impl Command {
    pub fn new(code: u32, handles: &[u32], sessions: bool) -> Self {
        Command {
            code,
            handles: handles.to_vec(),
            sessions,
            params: Vec::new(),
        }
    }

    pub fn u16(mut self, value: u16) -> Self {
        self.params.extend(value.to_be_bytes());
        self
    }

    pub fn u32(mut self, value: u32) -> Self {
        self.params.extend(value.to_be_bytes());
        self
    }

    /// Raw bytes (an already marshalled structure).
    pub fn raw(mut self, bytes: &[u8]) -> Self {
        self.params.extend(bytes);
        self
    }

    /// A `TPM2B_*`: a u16 size, then the bytes.
    pub fn sized(self, bytes: &[u8]) -> Self {
        self.u16(bytes.len() as u16).raw(bytes)
    }

    fn bytes(&self) -> Vec<u8> {
        let mut body = Vec::new();
        for handle in &self.handles {
            body.extend(handle.to_be_bytes());
        }
        if self.sessions {
            // One password session with an empty password: the handle, an
            // empty nonce, no attributes, an empty HMAC.
            let mut auth = Vec::new();
            auth.extend(RS_PW.to_be_bytes());
            auth.extend(0u16.to_be_bytes());
            auth.push(0);
            auth.extend(0u16.to_be_bytes());
            body.extend((auth.len() as u32).to_be_bytes());
            body.extend(auth);
        }
        body.extend(&self.params);
        let tag = if self.sessions {
            ST_SESSIONS
        } else {
            ST_NO_SESSIONS
        };
        let mut out = Vec::with_capacity(10 + body.len());
        out.extend(tag.to_be_bytes());
        out.extend(((10 + body.len()) as u32).to_be_bytes());
        out.extend(self.code.to_be_bytes());
        out.extend(body);
        out
    }
}

/// A TPM response being read.
pub struct Response<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Response<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.at + n;
        let slice = self
            .bytes
            .get(self.at..end)
            .ok_or_else(|| "the TPM's response is shorter than its contents".to_string())?;
        self.at = end;
        Ok(slice)
    }

    pub fn u16(&mut self) -> Result<u16, String> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    pub fn u32(&mut self) -> Result<u32, String> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A `TPM2B_*`'s bytes.
    pub fn sized(&mut self) -> Result<&'a [u8], String> {
        let n = self.u16()? as usize;
        self.take(n)
    }
}

/// A TPM's non-zero response code.
struct ResponseCode(u32);

/// A connection to a TPM.
pub struct Tpm {
    io: Box<dyn ReadWrite>,
    name: String,
}

trait ReadWrite: Read + Write + Send {}
impl<T: Read + Write + Send> ReadWrite for T {}

impl Tpm {
    /// `/dev/tpmrm0` (or another character device), or `unix:PATH`.
    pub fn open(path: &str) -> Result<Tpm, String> {
        let io: Box<dyn ReadWrite> = match path.strip_prefix("unix:") {
            Some(socket) => Box::new(
                UnixStream::connect(socket)
                    .map_err(|e| format!("cannot reach the TPM at {path}: {e}"))?,
            ),
            None => Box::new(
                std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(path)
                    .map_err(|e| format!("cannot open the TPM {path}: {e}"))?,
            ),
        };
        Ok(Tpm {
            io,
            name: path.to_string(),
        })
    }

    /// Sends `command`; the response's bytes after its header (response
    /// handles, then parameters), or the TPM's error code. A TPM busy
    /// with something else (`TPM_RC_RETRY`, `TPM_RC_YIELDED`,
    /// `TPM_RC_TESTING`) is asked again, as TPM software stacks do.
    pub fn run(&mut self, command: &Command) -> Result<Vec<u8>, String> {
        const BUSY: [u32; 3] = [0x0922, 0x0908, 0x090A];
        let mut attempt = 0;
        loop {
            match self.run_once(command) {
                Err(ResponseCode(code)) if BUSY.contains(&code) && attempt < 20 => {
                    attempt += 1;
                    std::thread::sleep(std::time::Duration::from_millis(20 * attempt));
                }
                Err(ResponseCode(code)) => {
                    return Err(format!(
                        "the TPM {} refused command 0x{:08x} with response code 0x{code:08x}",
                        self.name, command.code
                    ))
                }
                Ok(result) => return result,
            }
        }
    }

    /// One exchange: the response (or why there is none), or the TPM's
    /// non-zero response code.
    fn run_once(&mut self, command: &Command) -> Result<Result<Vec<u8>, String>, ResponseCode> {
        let name = &self.name;
        if let Err(e) = self.io.write_all(&command.bytes()) {
            return Ok(Err(format!("writing to the TPM {name}: {e}")));
        }
        // A character device answers in one read; a socket may need more.
        let mut response = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let n = match self.io.read(&mut buf) {
                Ok(n) => n,
                Err(e) => return Ok(Err(format!("reading from the TPM {name}: {e}"))),
            };
            if n == 0 {
                return Ok(Err(format!(
                    "the TPM {name} closed the connection mid-response"
                )));
            }
            response.extend_from_slice(&buf[..n]);
            if response.len() >= 10 {
                let size = u32::from_be_bytes([response[2], response[3], response[4], response[5]])
                    as usize;
                if !(10..=64 * 1024).contains(&size) {
                    return Ok(Err(format!(
                        "the TPM {name} answered a response of {size} bytes"
                    )));
                }
                if response.len() >= size {
                    response.truncate(size);
                    break;
                }
            }
        }
        let code = u32::from_be_bytes([response[6], response[7], response[8], response[9]]);
        if code != 0 {
            return Err(ResponseCode(code));
        }
        Ok(Ok(response.split_off(10)))
    }

    /// The contents of the NV index `index`, read with the authorization
    /// its attributes allow (its own, else the owner's, else the
    /// platform's; all with empty passwords, as a VM's firmware leaves
    /// them).
    pub fn nv_read(&mut self, index: u32) -> Result<Vec<u8>, String> {
        let public = self.run(&Command::new(cc::NV_READ_PUBLIC, &[index], false))?;
        let mut r = Response {
            bytes: &public,
            at: 0,
        };
        let mut nv = Response {
            bytes: r.sized()?,
            at: 0,
        };
        nv.u32()?; // the index
        nv.u16()?; // its name algorithm
        let attributes = nv.u32()?;
        nv.sized()?; // its policy
        let size = nv.u16()?;
        let auth = if attributes & NV_AUTHREAD != 0 {
            index
        } else if attributes & NV_OWNERREAD != 0 {
            RH_OWNER
        } else {
            RH_PLATFORM
        };
        let mut out = Vec::with_capacity(size as usize);
        while out.len() < size as usize {
            let offset = out.len() as u16;
            let chunk = NV_CHUNK.min(size - offset);
            let answer = self.run(
                &Command::new(cc::NV_READ, &[auth, index], true)
                    .u16(chunk)
                    .u16(offset),
            )?;
            let mut r = Response {
                bytes: &answer,
                at: 0,
            };
            r.u32()?; // the parameters' size
            out.extend_from_slice(r.sized()?);
        }
        Ok(out)
    }
}

/// An RSA public key as `TPMT_PUBLIC` holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RsaPublic {
    pub modulus: Vec<u8>,
    pub exponent: u32,
}

impl RsaPublic {
    /// The `unique` of an RSA `TPMT_PUBLIC` (with its exponent).
    pub fn parse(public: &[u8]) -> Result<RsaPublic, String> {
        let mut r = Response {
            bytes: public,
            at: 0,
        };
        if r.u16()? != ALG_RSA {
            return Err("the attestation key is not an RSA key".into());
        }
        r.u16()?; // name algorithm
        r.u32()?; // attributes
        r.sized()?; // policy
        if r.u16()? != ALG_NULL {
            // A symmetric definition: key bits and mode.
            r.u16()?;
            r.u16()?;
        }
        if r.u16()? != ALG_NULL {
            r.u16()?; // the scheme's hash
        }
        r.u16()?; // key bits
        let exponent = match r.u32()? {
            0 => 65537,
            e => e,
        };
        let modulus = r.sized()?.to_vec();
        Ok(RsaPublic { modulus, exponent })
    }

    /// The key as a `PUBLIC KEY` PEM (SubjectPublicKeyInfo), the form
    /// Compute reports a shielded VM's keys in.
    pub fn to_pem(&self) -> String {
        let exponent: Vec<u8> = self
            .exponent
            .to_be_bytes()
            .into_iter()
            .skip_while(|b| *b == 0)
            .collect();
        let rsa_key = der(
            0x30,
            &[der_integer(&self.modulus), der_integer(&exponent)].concat(),
        );
        // rsaEncryption (1.2.840.113549.1.1.1) with NULL parameters.
        let algorithm = der(
            0x30,
            &[
                der(
                    0x06,
                    &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01],
                ),
                der(0x05, &[]),
            ]
            .concat(),
        );
        let bits = der(0x03, &[&[0u8][..], &rsa_key].concat());
        let spki = der(0x30, &[algorithm, bits].concat());
        pem::encode_config(
            &pem::Pem::new("PUBLIC KEY", spki),
            pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF),
        )
    }
}

fn der(tag: u8, contents: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let n = contents.len();
    if n < 0x80 {
        out.push(n as u8);
    } else {
        let len: Vec<u8> = (n as u32)
            .to_be_bytes()
            .into_iter()
            .skip_while(|b| *b == 0)
            .collect();
        out.push(0x80 | len.len() as u8);
        out.extend(len);
    }
    out.extend_from_slice(contents);
    out
}

/// A positive DER INTEGER from big-endian magnitude bytes.
fn der_integer(magnitude: &[u8]) -> Vec<u8> {
    let trimmed: Vec<u8> = magnitude.iter().copied().skip_while(|b| *b == 0).collect();
    let mut value = Vec::with_capacity(trimmed.len() + 1);
    if trimmed.first().is_none_or(|b| b & 0x80 != 0) {
        value.push(0);
    }
    value.extend(trimmed);
    der(0x02, &value)
}

/// The attestation key loaded in a TPM, flushed when dropped.
pub struct AttestationKey {
    tpm: Tpm,
    handle: u32,
    pub public: RsaPublic,
}

impl AttestationKey {
    /// Recreates the key from the template in NV index `template_index`
    /// as a primary key of the endorsement hierarchy.
    pub fn load(mut tpm: Tpm, template_index: u32) -> Result<AttestationKey, String> {
        let template = tpm.nv_read(template_index).map_err(|e| {
            format!("reading the attestation key template (NV index 0x{template_index:08x}): {e}")
        })?;
        let answer = tpm.run(
            &Command::new(cc::CREATE_PRIMARY, &[RH_ENDORSEMENT], true)
                // inSensitive: an empty auth and no data.
                .sized(&[0, 0, 0, 0])
                .sized(&template)
                .sized(&[]) // outsideInfo
                .u32(0), // no PCRs in the creation data
        )?;
        let mut r = Response {
            bytes: &answer,
            at: 0,
        };
        let handle = r.u32()?;
        let public = r.u32().and_then(|_| r.sized()).and_then(RsaPublic::parse);
        match public {
            Ok(public) => Ok(AttestationKey {
                tpm,
                handle,
                public,
            }),
            Err(e) => {
                let _ = tpm.run(&Command::new(cc::FLUSH_CONTEXT, &[], false).u32(handle));
                Err(e)
            }
        }
    }

    /// The RSASSA-PKCS1-v1_5 SHA-256 signature over `data`.
    pub fn sign(&mut self, data: &[u8]) -> Result<Vec<u8>, String> {
        if data.len() > MAX_HASH_INPUT {
            return Err(format!(
                "{} bytes are more than the TPM hashes at once ({MAX_HASH_INPUT})",
                data.len()
            ));
        }
        let hashed = self.tpm.run(
            &Command::new(cc::HASH, &[], false)
                .sized(data)
                .u16(ALG_SHA256)
                .u32(RH_ENDORSEMENT),
        )?;
        let mut r = Response {
            bytes: &hashed,
            at: 0,
        };
        let digest = r.sized()?.to_vec();
        // The hash-check ticket, passed back as it came.
        let ticket = &hashed[r.at..];
        let answer = self.tpm.run(
            &Command::new(cc::SIGN, &[self.handle], true)
                .sized(&digest)
                .u16(ALG_NULL) // the key's own scheme
                .raw(ticket),
        )?;
        let mut r = Response {
            bytes: &answer,
            at: 0,
        };
        r.u32()?; // the parameters' size
        let algorithm = r.u16()?;
        let hash = r.u16()?;
        if (algorithm, hash) != (ALG_RSASSA, ALG_SHA256) {
            return Err(format!(
                "the attestation key signs with algorithm 0x{algorithm:04x}/0x{hash:04x}, not RSASSA SHA-256"
            ));
        }
        Ok(r.sized()?.to_vec())
    }
}

impl Drop for AttestationKey {
    fn drop(&mut self) {
        let _ = self
            .tpm
            .run(&Command::new(cc::FLUSH_CONTEXT, &[], false).u32(self.handle));
    }
}

/// Signs tokens with the vTPM's attestation key, opening the TPM for each
/// token (nodeup signs one or two).
pub struct TpmSigner {
    pub device: String,
}

impl Signer for TpmSigner {
    fn sign(&self, data: &[u8]) -> Result<Vec<u8>, String> {
        let tpm = Tpm::open(&self.device)?;
        let mut key = AttestationKey::load(tpm, GCE_AK_TEMPLATE_RSA)?;
        key.sign(data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_session_command_is_framed_as_the_spec_says() {
        let bytes = Command::new(cc::NV_READ, &[0x0100_0001, 0x0100_0001], true)
            .u16(8)
            .u16(0)
            .bytes();
        assert_eq!(&bytes[..2], &[0x80, 0x02]);
        assert_eq!(
            u32::from_be_bytes(bytes[2..6].try_into().unwrap()) as usize,
            bytes.len()
        );
        assert_eq!(&bytes[6..10], &cc::NV_READ.to_be_bytes());
        // handles, then the authorization area of 9 bytes, then 4 bytes
        assert_eq!(bytes.len(), 10 + 8 + 4 + 9 + 4);
        assert_eq!(&bytes[18..22], &9u32.to_be_bytes());
        assert_eq!(&bytes[22..26], &RS_PW.to_be_bytes());
    }

    #[test]
    fn public_keys_are_spki_pem() {
        let key = RsaPublic {
            modulus: vec![0xc3; 256],
            exponent: 65537,
        };
        let pem = key.to_pem();
        let block = pem::parse(pem.as_bytes()).unwrap();
        assert_eq!(block.tag(), "PUBLIC KEY");
        // SEQUENCE (long form), the algorithm, a BIT STRING holding
        // SEQUENCE { INTEGER (257 bytes: a leading zero), INTEGER 65537 }.
        let der = block.contents();
        assert_eq!(&der[..2], &[0x30, 0x82]);
        assert!(der.ends_with(&[0x02, 0x03, 0x01, 0x00, 0x01]));
        assert!(der.windows(4).any(|w| w == [0x02, 0x82, 0x01, 0x01]));
    }
}
