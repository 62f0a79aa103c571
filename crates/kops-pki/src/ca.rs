//! Certificate authorities and the certificates they issue, with kops'
//! choices: RSA 2048 keys, SHA-256 signatures, serial numbers built from the
//! time in nanoseconds and 32 random bits (so a larger id is newer), validity
//! starting 48 hours in the past and lasting ten years unless asked otherwise.

use std::net::IpAddr;
use std::time::Duration;

use ::time::OffsetDateTime;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, PublicKeyData, RsaKeySize, SanType, SerialNumber,
    SubjectPublicKeyInfo, PKCS_RSA_SHA256,
};
use x509_parser::prelude::{FromDer, GeneralName, X509Certificate, X509Name};

use crate::der::{pkcs1_to_pkcs8, pkcs8_to_pkcs1, random_bytes};
use crate::PkiError;

/// How long a certificate lasts when the request does not say: ten years.
pub const DEFAULT_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// How far in the past a certificate's validity starts (clock skew).
const BACKDATE: Duration = Duration::from_secs(48 * 3600);

/// What a certificate may be used for (kops' certificate types).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CertificateUsage {
    /// A client certificate (`ExtKeyUsageClientAuth`, digital signature).
    Client,
    /// A serving certificate (`ExtKeyUsageServerAuth`, digital signature, key encipherment).
    Server,
    /// Both client and server.
    ClientServer,
}

/// A request for a certificate signed by a [`CertificateAuthority`].
#[derive(Debug, Clone)]
pub struct IssueRequest {
    /// The subject's common name (`CN`).
    pub common_name: String,
    /// The subject's organization (`O`), e.g. `system:masters`; at most one.
    pub organizations: Vec<String>,
    /// Subject alternative names: IP addresses become IP SANs, anything else
    /// a DNS name.
    pub alternate_names: Vec<String>,
    pub usage: CertificateUsage,
    /// How long the certificate is valid from now; `None` is ten years.
    pub validity: Option<Duration>,
}

impl IssueRequest {
    /// A client certificate request for `common_name` in `organization`.
    pub fn client(common_name: &str, organization: Option<&str>) -> Self {
        IssueRequest {
            common_name: common_name.to_string(),
            organizations: organization.map(str::to_string).into_iter().collect(),
            alternate_names: Vec::new(),
            usage: CertificateUsage::Client,
            validity: None,
        }
    }

    /// A serving certificate request for `common_name` valid for `names`.
    pub fn server(common_name: &str, names: &[String]) -> Self {
        IssueRequest {
            common_name: common_name.to_string(),
            organizations: Vec::new(),
            alternate_names: names.to_vec(),
            usage: CertificateUsage::Server,
            validity: None,
        }
    }
}

/// A certificate and its new private key, PEM encoded.
#[derive(Clone, PartialEq, Eq)]
pub struct IssuedCertificate {
    /// `-----BEGIN CERTIFICATE-----` ...
    pub certificate_pem: String,
    /// `-----BEGIN RSA PRIVATE KEY-----` ... (PKCS#1, as kops writes keys).
    pub private_key_pem: String,
    /// The serial number in decimal: the id kops gives the keypair.
    pub serial: String,
}

impl std::fmt::Debug for IssuedCertificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IssuedCertificate")
            .field("serial", &self.serial)
            .field("private_key_pem", &"[secret]")
            .finish()
    }
}

/// A CA: its certificate and the private key that signs with it.
pub struct CertificateAuthority {
    certificate_pem: String,
    certificate_der: Vec<u8>,
    private_key_pem: String,
    key: KeyPair,
}

impl std::fmt::Debug for CertificateAuthority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertificateAuthority")
            .field(
                "subject",
                &self.info().map(|i| i.subject).unwrap_or_default(),
            )
            .finish_non_exhaustive()
    }
}

fn cert_error(action: &str) -> impl FnOnce(rcgen::Error) -> PkiError + '_ {
    move |source| PkiError::Certificate {
        action: action.to_string(),
        source,
    }
}

/// A kops serial number: nanoseconds since the epoch shifted left 32 bits,
/// or'ed with 32 random bits. Returns (decimal, big-endian DER-ready bytes).
pub fn kops_serial() -> Result<(String, Vec<u8>), PkiError> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let random = random_bytes(4)?;
    let random = u32::from_be_bytes([random[0], random[1], random[2], random[3]]);
    let serial: u128 = (nanos << 32) | random as u128;
    let mut bytes: Vec<u8> = serial
        .to_be_bytes()
        .into_iter()
        .skip_while(|b| *b == 0)
        .collect();
    if bytes.first().is_none_or(|b| b & 0x80 != 0) {
        bytes.insert(0, 0);
    }
    Ok((serial.to_string(), bytes))
}

/// A new RSA 2048 private key for a node's certificate: the key PEM as kops
/// stores keys (PKCS#1) and its public key as DER SubjectPublicKeyInfo (what
/// the node sends to kops-controller to be certified).
pub fn new_private_key() -> Result<(String, Vec<u8>), PkiError> {
    let key = new_rsa_key()?;
    Ok((key_to_pem(&key), key.subject_public_key_info()))
}

fn new_rsa_key() -> Result<KeyPair, PkiError> {
    KeyPair::generate_rsa_for(&PKCS_RSA_SHA256, RsaKeySize::_2048)
        .map_err(cert_error("generate an RSA private key"))
}

/// The key as kops stores it: PKCS#1 for RSA keys, PKCS#8 otherwise.
fn key_to_pem(key: &KeyPair) -> String {
    let der = key.serialize_der();
    match pkcs8_to_pkcs1(&der) {
        Some(pkcs1) => pem_encode("RSA PRIVATE KEY", pkcs1),
        None => pem_encode("PRIVATE KEY", der),
    }
}

pub(crate) fn pem_encode(tag: &str, contents: Vec<u8>) -> String {
    ::pem::encode_config(
        &::pem::Pem::new(tag, contents),
        ::pem::EncodeConfig::new().set_line_ending(::pem::LineEnding::LF),
    )
}

/// Reads a private key in any PEM form kops accepts (PKCS#1, PKCS#8, SEC1).
pub fn parse_private_key(text: &str) -> Result<KeyPair, PkiError> {
    let bad = |reason: String| PkiError::BadPem {
        what: "private key".to_string(),
        reason,
    };
    let block = ::pem::parse(text.trim()).map_err(|e| bad(e.to_string()))?;
    let der = match block.tag() {
        "RSA PRIVATE KEY" => pkcs1_to_pkcs8(block.contents()),
        "PRIVATE KEY" | "EC PRIVATE KEY" => block.contents().to_vec(),
        other => {
            return Err(bad(format!(
            "a `{other}` block is not a private key; expected `RSA PRIVATE KEY` or `PRIVATE KEY`"
        )))
        }
    };
    KeyPair::try_from(der.as_slice()).map_err(|e| bad(e.to_string()))
}

/// The DER of the first certificate in a PEM text.
pub fn parse_certificate_pem(text: &str) -> Result<Vec<u8>, PkiError> {
    let bad = |reason: String| PkiError::BadPem {
        what: "certificate".to_string(),
        reason,
    };
    let blocks = ::pem::parse_many(text.trim()).map_err(|e| bad(e.to_string()))?;
    let block = blocks
        .into_iter()
        .find(|b| b.tag() == "CERTIFICATE")
        .ok_or_else(|| bad("no `CERTIFICATE` block".to_string()))?;
    let der = block.into_contents();
    X509Certificate::from_der(&der).map_err(|e| bad(e.to_string()))?;
    Ok(der)
}

fn validity(params: &mut CertificateParams, lifetime: Option<Duration>) {
    let now = OffsetDateTime::now_utc();
    params.not_before = now - BACKDATE;
    params.not_after = now + lifetime.unwrap_or(DEFAULT_VALIDITY);
}

impl CertificateAuthority {
    /// A new self-signed CA with subject `CN=<common_name>`, like the
    /// keypairs `kops update cluster` creates.
    pub fn generate(common_name: &str) -> Result<Self, PkiError> {
        Self::self_signed(common_name, None, false)
    }

    /// A new CA for rotation (`kops create keypair`): the subject also holds
    /// the serial number (`CN=<name>,SERIALNUMBER=<serial>`), so it differs
    /// from every earlier CA of the keyset. Signs with `private_key_pem` when
    /// given, else with a new RSA 2048 key.
    pub fn generate_rotation(
        common_name: &str,
        private_key_pem: Option<&str>,
    ) -> Result<Self, PkiError> {
        Self::self_signed(common_name, private_key_pem, true)
    }

    fn self_signed(
        common_name: &str,
        private_key_pem: Option<&str>,
        serial_in_subject: bool,
    ) -> Result<Self, PkiError> {
        let key = match private_key_pem {
            Some(pem) => parse_private_key(pem)?,
            None => new_rsa_key()?,
        };
        let (serial_text, serial) = kops_serial()?;
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        if serial_in_subject {
            let printable = rcgen::string::PrintableString::try_from(serial_text.as_str())
                .map_err(cert_error("encode the serial number"))?;
            dn.push(
                DnType::CustomDnType(vec![2, 5, 4, 5]),
                rcgen::DnValue::PrintableString(printable),
            );
        }
        dn.push(DnType::CommonName, common_name);
        params.distinguished_name = dn;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        params.serial_number = Some(SerialNumber::from_slice(&serial));
        validity(&mut params, None);
        let cert = params
            .self_signed(&key)
            .map_err(cert_error("sign the CA certificate"))?;
        Ok(CertificateAuthority {
            certificate_pem: pem_encode("CERTIFICATE", cert.der().to_vec()),
            certificate_der: cert.der().to_vec(),
            private_key_pem: match private_key_pem {
                Some(pem) => pem.to_string(),
                None => key_to_pem(&key),
            },
            key,
        })
    }

    /// A CA from its PEM certificate and private key (as a keyset stores them).
    pub fn from_pem(certificate_pem: &str, private_key_pem: &str) -> Result<Self, PkiError> {
        let certificate_der = parse_certificate_pem(certificate_pem)?;
        let key = parse_private_key(private_key_pem)?;
        Ok(CertificateAuthority {
            certificate_pem: pem_encode("CERTIFICATE", certificate_der.clone()),
            certificate_der,
            private_key_pem: private_key_pem.to_string(),
            key,
        })
    }

    pub fn certificate_pem(&self) -> &str {
        &self.certificate_pem
    }

    /// The CA's private key (PEM). Secret: never print it unless asked.
    pub fn private_key_pem(&self) -> &str {
        &self.private_key_pem
    }

    /// What the CA certificate says (subject, serial, validity, ...).
    pub fn info(&self) -> Result<CertificateInfo, PkiError> {
        certificate_info_der(&self.certificate_der)
    }

    /// Issues a certificate with a new RSA 2048 key.
    pub fn issue(&self, request: &IssueRequest) -> Result<IssuedCertificate, PkiError> {
        let key = new_rsa_key()?;
        let (certificate_pem, serial) = self.sign(request, &key)?;
        Ok(IssuedCertificate {
            certificate_pem,
            private_key_pem: key_to_pem(&key),
            serial,
        })
    }

    /// Issues a certificate for a public key someone else holds (a node
    /// asking kops-controller): `public_key_der` is its DER
    /// SubjectPublicKeyInfo. Returns the certificate PEM.
    pub fn issue_for_public_key(
        &self,
        request: &IssueRequest,
        public_key_der: &[u8],
    ) -> Result<String, PkiError> {
        let key =
            SubjectPublicKeyInfo::from_der(public_key_der).map_err(|e| PkiError::BadRequest {
                reason: format!("the public key does not parse: {e}"),
            })?;
        Ok(self.sign(request, &key)?.0)
    }

    /// Signs a certificate for `key` as `request` asks: its PEM and serial.
    fn sign(
        &self,
        request: &IssueRequest,
        key: &impl PublicKeyData,
    ) -> Result<(String, String), PkiError> {
        if request.common_name.trim().is_empty() {
            return Err(PkiError::BadRequest {
                reason: "the common name is empty".to_string(),
            });
        }
        if request.organizations.len() > 1 {
            return Err(PkiError::BadRequest {
                reason: format!(
                    "at most one organization is supported, got {:?}",
                    request.organizations
                ),
            });
        }
        let issuer = Issuer::from_ca_cert_der(&self.certificate_der.as_slice().into(), &self.key)
            .map_err(cert_error("read the CA certificate"))?;
        let (serial_text, serial) = kops_serial()?;
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        for o in &request.organizations {
            dn.push(DnType::OrganizationName, o.as_str());
        }
        dn.push(DnType::CommonName, request.common_name.as_str());
        params.distinguished_name = dn;
        params.is_ca = IsCa::ExplicitNoCa;
        params.use_authority_key_identifier_extension = true;
        params.serial_number = Some(SerialNumber::from_slice(&serial));
        let (usages, extended) = match request.usage {
            CertificateUsage::Client => (
                vec![KeyUsagePurpose::DigitalSignature],
                vec![ExtendedKeyUsagePurpose::ClientAuth],
            ),
            CertificateUsage::Server => (
                vec![
                    KeyUsagePurpose::DigitalSignature,
                    KeyUsagePurpose::KeyEncipherment,
                ],
                vec![ExtendedKeyUsagePurpose::ServerAuth],
            ),
            CertificateUsage::ClientServer => (
                vec![
                    KeyUsagePurpose::DigitalSignature,
                    KeyUsagePurpose::KeyEncipherment,
                ],
                vec![
                    ExtendedKeyUsagePurpose::ClientAuth,
                    ExtendedKeyUsagePurpose::ServerAuth,
                ],
            ),
        };
        params.key_usages = usages;
        params.extended_key_usages = extended;
        for name in request
            .alternate_names
            .iter()
            .map(|n| n.trim())
            .filter(|n| !n.is_empty())
        {
            let san = match name.parse::<IpAddr>() {
                Ok(ip) => SanType::IpAddress(ip),
                Err(_) => SanType::DnsName(name.try_into().map_err(|e| PkiError::BadRequest {
                    reason: format!("`{name}` is not a DNS name: {e}"),
                })?),
            };
            params.subject_alt_names.push(san);
        }
        validity(&mut params, request.validity);
        let cert = params
            .signed_by(key, &issuer)
            .map_err(cert_error("sign the certificate"))?;
        Ok((pem_encode("CERTIFICATE", cert.der().to_vec()), serial_text))
    }
}

/// What a certificate says, in the form `kops get keypairs` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificateInfo {
    /// As Go prints a `pkix.Name`: `CN=kubecfg,O=system:masters`.
    pub subject: String,
    pub issuer: String,
    /// The serial number in decimal.
    pub serial: String,
    /// Seconds since the Unix epoch.
    pub not_before: i64,
    pub not_after: i64,
    pub is_ca: bool,
    /// DNS names and IP addresses, sorted.
    pub alternate_names: Vec<String>,
    /// RSA modulus size in bits, if the key is RSA.
    pub key_bits: Option<usize>,
}

fn name_string(name: &X509Name<'_>) -> String {
    // Go prints the RDNs last first; certificates list them C, O, OU, ..., CN.
    let mut parts = Vec::new();
    for rdn in name.iter().collect::<Vec<_>>().into_iter().rev() {
        for attr in rdn.iter() {
            let short = match attr.attr_type().to_id_string().as_str() {
                "2.5.4.3" => "CN",
                "2.5.4.10" => "O",
                "2.5.4.11" => "OU",
                "2.5.4.6" => "C",
                "2.5.4.7" => "L",
                "2.5.4.8" => "ST",
                "2.5.4.5" => "SERIALNUMBER",
                other => {
                    parts.push(format!("{other}={}", attr.as_str().unwrap_or("<binary>")));
                    continue;
                }
            };
            parts.push(format!("{short}={}", attr.as_str().unwrap_or("<binary>")));
        }
    }
    parts.join(",")
}

fn certificate_info_der(der: &[u8]) -> Result<CertificateInfo, PkiError> {
    let (_, cert) = X509Certificate::from_der(der).map_err(|e| PkiError::BadPem {
        what: "certificate".to_string(),
        reason: e.to_string(),
    })?;
    let mut alternate_names = Vec::new();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for name in &san.value.general_names {
            match name {
                GeneralName::DNSName(d) => alternate_names.push(d.to_string()),
                GeneralName::RFC822Name(e) => alternate_names.push(e.to_string()),
                GeneralName::IPAddress(bytes) => {
                    let ip = match bytes.len() {
                        4 => <[u8; 4]>::try_from(*bytes).ok().map(IpAddr::from),
                        16 => <[u8; 16]>::try_from(*bytes).ok().map(IpAddr::from),
                        _ => None,
                    };
                    if let Some(ip) = ip {
                        alternate_names.push(ip.to_string());
                    }
                }
                _ => {}
            }
        }
    }
    alternate_names.sort();
    let key_bits = match cert.public_key().parsed() {
        Ok(x509_parser::public_key::PublicKey::RSA(rsa)) => Some(rsa.key_size()),
        _ => None,
    };
    Ok(CertificateInfo {
        subject: name_string(cert.subject()),
        issuer: name_string(cert.issuer()),
        serial: cert.serial.to_str_radix(10),
        not_before: cert.validity().not_before.timestamp(),
        not_after: cert.validity().not_after.timestamp(),
        is_ca: cert.is_ca(),
        alternate_names,
        key_bits,
    })
}

/// Reads the first certificate of a PEM text.
pub fn certificate_info(pem_text: &str) -> Result<CertificateInfo, PkiError> {
    certificate_info_der(&parse_certificate_pem(pem_text)?)
}

/// A Unix time as `YYYY-MM-DD` (UTC), as kops' tables show dates.
pub fn format_date(unix_seconds: i64) -> String {
    match OffsetDateTime::from_unix_timestamp(unix_seconds) {
        Ok(t) => format!("{:04}-{:02}-{:02}", t.year(), u8::from(t.month()), t.day()),
        Err(_) => String::new(),
    }
}

/// Whether `certificate_pem` is signed by the CA certificate `ca_pem`
/// (signature check only; a test and diagnostics helper).
pub fn verify_signed_by(certificate_pem: &str, ca_pem: &str) -> Result<bool, PkiError> {
    let der = parse_certificate_pem(certificate_pem)?;
    let ca_der = parse_certificate_pem(ca_pem)?;
    let bad = |e: String| PkiError::BadPem {
        what: "certificate".to_string(),
        reason: e,
    };
    let (_, cert) = X509Certificate::from_der(&der).map_err(|e| bad(e.to_string()))?;
    let (_, ca) = X509Certificate::from_der(&ca_der).map_err(|e| bad(e.to_string()))?;
    Ok(cert.issuer() == ca.subject() && cert.verify_signature(Some(ca.public_key())).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serials_grow_and_are_positive() {
        let (a, bytes) = kops_serial().unwrap();
        let (b, _) = kops_serial().unwrap();
        assert_eq!(bytes[0] & 0x80, 0);
        let (a, b): (u128, u128) = (a.parse().unwrap(), b.parse().unwrap());
        assert!(b >> 32 >= a >> 32);
    }

    #[test]
    fn ca_issues_certificates_that_chain() {
        let ca = CertificateAuthority::generate("kubernetes-ca").unwrap();
        let info = ca.info().unwrap();
        assert_eq!(info.subject, "CN=kubernetes-ca");
        assert_eq!(info.issuer, "CN=kubernetes-ca");
        assert!(info.is_ca);
        assert_eq!(info.key_bits, Some(2048));
        assert!(ca
            .private_key_pem()
            .starts_with("-----BEGIN RSA PRIVATE KEY-----\n"));

        let mut request = IssueRequest::client("kubecfg-alice", Some("system:masters"));
        request.validity = Some(Duration::from_secs(18 * 3600));
        let issued = ca.issue(&request).unwrap();
        let info = certificate_info(&issued.certificate_pem).unwrap();
        assert_eq!(info.subject, "CN=kubecfg-alice,O=system:masters");
        assert_eq!(info.issuer, "CN=kubernetes-ca");
        assert_eq!(info.serial, issued.serial);
        assert!(!info.is_ca);
        let lifetime = info.not_after - info.not_before;
        assert_eq!(lifetime, (48 + 18) * 3600);
        assert!(verify_signed_by(&issued.certificate_pem, ca.certificate_pem()).unwrap());

        let other = CertificateAuthority::generate("other-ca").unwrap();
        assert!(!verify_signed_by(&issued.certificate_pem, other.certificate_pem()).unwrap());

        let server = ca
            .issue(&IssueRequest::server(
                "kubernetes-master",
                &["api.internal.x.example.com".into(), "100.64.0.1".into()],
            ))
            .unwrap();
        let info = certificate_info(&server.certificate_pem).unwrap();
        assert_eq!(
            info.alternate_names,
            vec!["100.64.0.1", "api.internal.x.example.com"]
        );
    }

    #[test]
    fn reloaded_ca_keeps_signing() {
        let ca = CertificateAuthority::generate("etcd-clients-ca").unwrap();
        let again =
            CertificateAuthority::from_pem(ca.certificate_pem(), ca.private_key_pem()).unwrap();
        let issued = again
            .issue(&IssueRequest::client("etcd-client", None))
            .unwrap();
        assert!(verify_signed_by(&issued.certificate_pem, ca.certificate_pem()).unwrap());
        assert!(parse_private_key(&issued.private_key_pem).is_ok());
    }

    #[test]
    fn bad_input_is_an_error() {
        assert!(parse_private_key("not a key").is_err());
        assert!(parse_certificate_pem(
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
        )
        .is_err());
        let ca = CertificateAuthority::generate("x").unwrap();
        let mut r = IssueRequest::client("", None);
        assert!(ca.issue(&r).is_err());
        r.common_name = "a".into();
        r.organizations = vec!["a".into(), "b".into()];
        assert!(ca.issue(&r).is_err());
    }

    #[test]
    fn dates() {
        assert_eq!(format_date(0), "1970-01-01");
        assert_eq!(format_date(1_700_000_000), "2023-11-14");
    }
}
