//! The little DER kops' key format needs: RSA private keys are stored as
//! PKCS#1 (`RSA PRIVATE KEY`) like kops writes them, while the signing
//! library hands out PKCS#8 (`PRIVATE KEY`). Also the operating system's
//! random bytes.

use std::io::Read;

use crate::PkiError;

/// One DER element: (tag, contents, rest of the input).
fn element(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (first as usize, rest)
    } else {
        let n = (first & 0x7f) as usize;
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | *b as usize);
        (len, &rest[n..])
    };
    if rest.len() < len {
        return None;
    }
    Some((tag, &rest[..len], &rest[len..]))
}

const SEQUENCE: u8 = 0x30;
const INTEGER: u8 = 0x02;
const OCTET_STRING: u8 = 0x04;
/// 1.2.840.113549.1.1.1, rsaEncryption.
const RSA_ENCRYPTION_OID: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];

/// The PKCS#1 `RSAPrivateKey` inside a PKCS#8 `PrivateKeyInfo`, or `None`
/// when the input is not a PKCS#8 RSA key.
pub fn pkcs8_to_pkcs1(pkcs8: &[u8]) -> Option<Vec<u8>> {
    let (tag, body, _) = element(pkcs8)?;
    if tag != SEQUENCE {
        return None;
    }
    let (tag, _version, rest) = element(body)?;
    if tag != INTEGER {
        return None;
    }
    let (tag, algorithm, rest) = element(rest)?;
    if tag != SEQUENCE {
        return None;
    }
    let (tag, oid, _) = element(algorithm)?;
    if tag != 0x06 || oid != RSA_ENCRYPTION_OID {
        return None;
    }
    let (tag, key, _) = element(rest)?;
    (tag == OCTET_STRING).then(|| key.to_vec())
}

fn encode_length(len: usize, out: &mut Vec<u8>) {
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes: Vec<u8> = len
            .to_be_bytes()
            .iter()
            .copied()
            .skip_while(|b| *b == 0)
            .collect();
        out.push(0x80 | bytes.len() as u8);
        out.extend(bytes);
    }
}

fn encode(tag: u8, contents: &[u8], out: &mut Vec<u8>) {
    out.push(tag);
    encode_length(contents.len(), out);
    out.extend_from_slice(contents);
}

/// Wraps a PKCS#1 `RSAPrivateKey` in a PKCS#8 `PrivateKeyInfo`.
pub fn pkcs1_to_pkcs8(pkcs1: &[u8]) -> Vec<u8> {
    let mut algorithm = Vec::new();
    encode(0x06, RSA_ENCRYPTION_OID, &mut algorithm);
    encode(0x05, &[], &mut algorithm);
    let mut body = Vec::new();
    encode(INTEGER, &[0], &mut body);
    encode(SEQUENCE, &algorithm, &mut body);
    encode(OCTET_STRING, pkcs1, &mut body);
    let mut out = Vec::new();
    encode(SEQUENCE, &body, &mut out);
    out
}

/// `n` bytes from the operating system's random source.
pub fn random_bytes(n: usize) -> Result<Vec<u8>, PkiError> {
    let mut buf = vec![0u8; n];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut buf))
        .map_err(PkiError::Random)?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrap_and_unwrap() {
        let inner = vec![0x30, 0x03, 0x02, 0x01, 0x00];
        let outer = pkcs1_to_pkcs8(&inner);
        assert_eq!(pkcs8_to_pkcs1(&outer), Some(inner));
        let long = vec![7u8; 1200];
        assert_eq!(pkcs8_to_pkcs1(&pkcs1_to_pkcs8(&long)), Some(long));
        assert_eq!(pkcs8_to_pkcs1(&[0x30, 0x01]), None);
        assert_eq!(pkcs8_to_pkcs1(&[]), None);
    }

    #[test]
    fn random() {
        let a = random_bytes(16).unwrap();
        let b = random_bytes(16).unwrap();
        assert_ne!(a, b);
    }
}
