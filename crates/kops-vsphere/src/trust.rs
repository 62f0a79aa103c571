//! Which vCenter certificate the client accepts.
//!
//! A vCenter serves HTTPS with a certificate from its own CA (VMCA), which
//! the operator's machine usually does not trust. The operator either pins
//! the certificate by its SHA-1 fingerprint (`spec.cloudConfig.vSphereThumbprint`,
//! `--vsphere-thumbprint`, the form govc prints: `AB:CD:...`) or names the CA
//! (`spec.cloudConfig.vSphereCACertificate`, the PEM `--vsphere-ca-file`
//! read at create time). Without either, the OS store decides. A refused
//! certificate is never retried: the error names its fingerprint and both
//! ways to trust it.

use std::sync::{Arc, Mutex};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};

/// The spec field pinning the certificate.
pub const THUMBPRINT_FIELD: &str = "spec.cloudConfig.vSphereThumbprint";
/// The spec field holding the CA certificates (PEM).
pub const CA_FIELD: &str = "spec.cloudConfig.vSphereCACertificate";

/// What the client trusts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trust {
    /// The operating system's certificate store.
    System,
    /// Only certificates issued by these CAs (PEM).
    Ca(String),
    /// Only the certificate with this SHA-1 fingerprint.
    Thumbprint([u8; 20]),
}

impl Trust {
    /// The trust the spec's fields give: at most one of the thumbprint and
    /// the CA; an error naming the field when it does not parse.
    pub fn from_spec(thumbprint: Option<&str>, ca_pem: Option<&str>) -> Result<Trust, String> {
        let thumbprint = thumbprint.map(str::trim).filter(|t| !t.is_empty());
        let ca_pem = ca_pem.map(str::trim).filter(|c| !c.is_empty());
        match (thumbprint, ca_pem) {
            (Some(_), Some(_)) => Err(format!(
                "{THUMBPRINT_FIELD} and {CA_FIELD} are both set: keep one (a pinned certificate, or its CA)"
            )),
            (Some(text), None) => parse_thumbprint(text)
                .map(Trust::Thumbprint)
                .map_err(|e| format!("{THUMBPRINT_FIELD} {e}")),
            (None, Some(pem)) => {
                ca_certificates(pem).map_err(|e| format!("{CA_FIELD} {e}"))?;
                Ok(Trust::Ca(format!("{pem}\n")))
            }
            (None, None) => Ok(Trust::System),
        }
    }
}

/// Reads a SHA-1 fingerprint: 20 bytes in hex, in pairs joined by colons
/// (govc's form) or not, any case.
pub fn parse_thumbprint(text: &str) -> Result<[u8; 20], String> {
    let hex: String = text.trim().chars().filter(|c| *c != ':').collect();
    let bad = || {
        format!("`{}` is not a SHA-1 fingerprint: write 20 bytes in hex, e.g. as `govc about.cert -thumbprint` prints them (AB:CD:...)", text.trim())
    };
    if hex.len() != 40 || !hex.is_ascii() {
        return Err(bad());
    }
    let mut out = [0u8; 20];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
    }
    Ok(out)
}

/// The SHA-1 fingerprint of a certificate (DER) in govc's form.
pub fn fingerprint(der: &[u8]) -> String {
    format_thumbprint(&sha1(der))
}

/// 20 bytes as upper-case hex pairs joined by colons.
pub fn format_thumbprint(bytes: &[u8; 20]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

fn sha1(der: &[u8]) -> [u8; 20] {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA1_FOR_LEGACY_USE_ONLY, der);
    let mut out = [0u8; 20];
    out.copy_from_slice(digest.as_ref());
    out
}

/// The certificates of a PEM text; an error when it holds none.
pub fn ca_certificates(pem: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| format!("is not PEM: {e}"))?;
    if certs.is_empty() {
        return Err("holds no PEM certificate (-----BEGIN CERTIFICATE-----)".into());
    }
    Ok(certs)
}

/// Where the verifier writes the fingerprint of a certificate it refused.
pub(crate) type RefusedSlot = Arc<Mutex<Option<String>>>;

/// The TLS settings of a client trusting `trust`, and the slot where a
/// refused certificate's fingerprint is written.
pub(crate) fn client_config(trust: &Trust) -> Result<(rustls::ClientConfig, RefusedSlot), String> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let inner = match trust {
        Trust::Thumbprint(_) => None,
        Trust::Ca(pem) => {
            let mut roots = RootCertStore::empty();
            for cert in ca_certificates(pem)? {
                roots
                    .add(cert)
                    .map_err(|e| format!("{CA_FIELD} holds a certificate rustls refuses: {e}"))?;
            }
            Some(roots)
        }
        Trust::System => {
            let mut roots = RootCertStore::empty();
            let found = rustls_native_certs::load_native_certs();
            roots.add_parsable_certificates(found.certs);
            Some(roots)
        }
    };
    let inner = match inner {
        None => None,
        Some(roots) if roots.is_empty() => None,
        Some(roots) => Some(
            WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                .build()
                .map_err(|e| format!("cannot set up certificate checks: {e}"))?,
        ),
    };
    let refused = Arc::new(Mutex::new(None));
    let verifier = Verifier {
        inner,
        pin: match trust {
            Trust::Thumbprint(pin) => Some(*pin),
            _ => None,
        },
        refused: refused.clone(),
        provider: provider.clone(),
    };
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("cannot set up TLS: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    Ok((config, refused))
}

/// Accepts the pinned certificate, or one the roots vouch for; records the
/// fingerprint of a certificate it refuses.
#[derive(Debug)]
struct Verifier {
    /// The roots' checks (none with a pin, or when there are no roots).
    inner: Option<Arc<WebPkiServerVerifier>>,
    pin: Option<[u8; 20]>,
    refused: Arc<Mutex<Option<String>>>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let digest = sha1(end_entity.as_ref());
        let outcome = match (&self.pin, &self.inner) {
            (Some(pin), _) if *pin == digest => Ok(ServerCertVerified::assertion()),
            (Some(_), _) | (None, None) => Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::ApplicationVerificationFailure,
            )),
            (None, Some(inner)) => {
                inner.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
            }
        };
        if outcome.is_err() {
            if let Ok(mut refused) = self.refused.lock() {
                *refused = Some(format_thumbprint(&digest));
            }
        }
        outcome
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thumbprints_read_in_govc_form_or_bare_hex() {
        let text = "0A:1B:2C:3D:4E:5F:60:71:82:93:A4:B5:C6:D7:E8:F9:00:11:22:33";
        let bytes = parse_thumbprint(text).unwrap();
        assert_eq!(format_thumbprint(&bytes), text);
        assert_eq!(
            parse_thumbprint(&text.replace(':', "").to_lowercase()).unwrap(),
            bytes
        );
        assert!(parse_thumbprint("0A:1B").is_err());
        assert!(parse_thumbprint(&"zz".repeat(20)).is_err());
        assert!(Trust::from_spec(Some(text), Some("x")).is_err());
        assert_eq!(Trust::from_spec(None, Some("  ")), Ok(Trust::System));
        assert!(Trust::from_spec(None, Some("not pem"))
            .unwrap_err()
            .starts_with(CA_FIELD));
    }
}
