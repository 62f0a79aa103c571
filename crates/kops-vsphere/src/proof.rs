//! How a vSphere VM proves who it is to kops-controller (no instance
//! identity document exists on vSphere).
//!
//! `update cluster` puts a fresh random token in each VM's guestinfo
//! ([`crate::TOKEN_KEY`]) when it clones it; only that VM (its guest
//! reads guestinfo through VMware Tools) and vCenter administrators can
//! read it. The node sends its BIOS UUID and an HMAC-SHA256 of the request
//! body keyed with the token, never the token itself. kops-controller
//! finds the VM by BIOS UUID in vCenter, requires the cluster's marker,
//! reads the token from the VM's extraConfig, checks the MAC, then removes
//! the token from the VM before answering: a second request with the same
//! token (a replay) finds none. See docs/vsphere.md for why this is safe.

use aws_lc_rs::{constant_time, hmac};

/// The scheme of the `Authorization` header.
pub const SCHEME: &str = "x-kops-vsphere";

/// The MAC of `body` keyed with `token`, hex.
pub fn mac(token: &str, body: &[u8]) -> String {
    let key = hmac::Key::new(hmac::HMAC_SHA256, token.as_bytes());
    let tag = hmac::sign(&key, body);
    tag.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// The `Authorization` header a node sends with `body`.
pub fn authorization(uuid: &str, token: &str, body: &[u8]) -> String {
    format!("{SCHEME} {uuid} {}", mac(token, body))
}

/// The (BIOS UUID, MAC) of an `Authorization` header.
pub fn parse(header: &str) -> Option<(&str, &str)> {
    let rest = header.strip_prefix(SCHEME)?.strip_prefix(' ')?;
    let (uuid, mac) = rest.split_once(' ')?;
    let hex_ok = mac.len() == 64 && mac.bytes().all(|b| b.is_ascii_hexdigit());
    let uuid_ok = !uuid.is_empty()
        && uuid.len() <= 64
        && uuid.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-');
    (hex_ok && uuid_ok).then_some((uuid, mac))
}

/// Whether `mac` is the MAC of `body` keyed with `token` (constant time).
pub fn matches(token: &str, body: &[u8], mac_hex: &str) -> bool {
    constant_time::verify_slices_are_equal(
        mac(token, body).as_bytes(),
        mac_hex.to_ascii_lowercase().as_bytes(),
    )
    .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip() {
        let header = authorization("4212-abcd", "secret", b"{}");
        let (uuid, mac) = parse(&header).unwrap();
        assert_eq!(uuid, "4212-abcd");
        assert!(matches("secret", b"{}", mac));
        assert!(!matches("other", b"{}", mac));
        assert!(!matches("secret", b"{ }", mac));
        assert!(parse("x-kops-vsphere a b").is_none());
        assert!(parse("Bearer x").is_none());
    }
}
