//! The VM's BIOS UUID as vSphere writes it (`config.uuid`, what vCenter's
//! `FindByUuid` and the node's provider ID use), read inside the guest.
//!
//! Linux shows the same 16 bytes in two files, and they disagree on VM
//! hardware version 13 and later:
//!
//! - `product_serial` is `VMware-` and the bytes in vSphere's order
//!   (`VMware-42 1c 4b 0e 6f 2b 6d 4b-8a 6c 3e 27 bb 9f e0 1a`) on every
//!   hardware version: it is read first.
//! - `product_uuid` is the SMBIOS system UUID as the kernel decodes it.
//!   From SMBIOS 2.6 on (which hardware version 13 brought to vSphere
//!   VMs) the kernel reads the first three fields as little-endian, so
//!   they come out byte-swapped against vSphere's order; below 2.6 it
//!   prints the bytes in order. When the serial is not VMware's (a VM whose
//!   `SMBIOS.reflectHost` shows the host's), the UUID is taken from
//!   `product_uuid` and swapped back when the SMBIOS entry point says 2.6
//!   or later. No entry point: taken as it is (an old kernel, old BIOS).

use super::Guest;

/// Where Linux shows the serial number (root only).
pub const PRODUCT_SERIAL: &str = "/sys/class/dmi/id/product_serial";
/// Where Linux shows the system UUID (root only).
pub const PRODUCT_UUID: &str = "/sys/class/dmi/id/product_uuid";
/// The SMBIOS entry point, which holds the SMBIOS version.
pub const ENTRY_POINT: &str = "/sys/firmware/dmi/tables/smbios_entry_point";

/// The BIOS UUID in vSphere's order, lower case.
pub fn bios_uuid(guest: &dyn Guest) -> Result<String, String> {
    if let Some(serial) = guest.firmware(PRODUCT_SERIAL)? {
        if let Some(uuid) = from_vmware_serial(&String::from_utf8_lossy(&serial)) {
            return Ok(uuid);
        }
    }
    let text = guest
        .firmware(PRODUCT_UUID)?
        .ok_or_else(|| format!("this VM shows neither {PRODUCT_SERIAL} nor {PRODUCT_UUID}"))?;
    let text = String::from_utf8_lossy(&text);
    let bytes = parse_uuid(text.trim())
        .ok_or_else(|| format!("{PRODUCT_UUID} holds no UUID: `{}`", text.trim()))?;
    let little_endian = match guest.firmware(ENTRY_POINT)? {
        Some(entry) => smbios_version(&entry).is_some_and(|v| v >= (2, 6)),
        None => false,
    };
    Ok(format_uuid(&if little_endian {
        swap_fields(bytes)
    } else {
        bytes
    }))
}

/// The UUID in VMware's serial number, `None` when it is not one.
fn from_vmware_serial(serial: &str) -> Option<String> {
    let hex: String = serial
        .trim()
        .strip_prefix("VMware-")?
        .chars()
        .filter(|c| *c != ' ' && *c != '-')
        .collect();
    parse_hex(&hex).map(|bytes| format_uuid(&bytes))
}

/// `8-4-4-4-12` hexadecimal digits.
fn parse_uuid(text: &str) -> Option<[u8; 16]> {
    let groups: Vec<&str> = text.split('-').collect();
    let lengths: Vec<usize> = groups.iter().map(|g| g.len()).collect();
    if lengths != [8, 4, 4, 4, 12] {
        return None;
    }
    parse_hex(&groups.concat())
}

fn parse_hex(hex: &str) -> Option<[u8; 16]> {
    if hex.len() != 32 || !hex.is_ascii() {
        return None;
    }
    let mut bytes = [0u8; 16];
    for (i, byte) in bytes.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(bytes)
}

fn format_uuid(b: &[u8; 16]) -> String {
    let hex =
        |r: std::ops::Range<usize>| -> String { b[r].iter().map(|x| format!("{x:02x}")).collect() };
    format!(
        "{}-{}-{}-{}-{}",
        hex(0..4),
        hex(4..6),
        hex(6..8),
        hex(8..10),
        hex(10..16)
    )
}

/// The first three fields (4, 2 and 2 bytes) reversed each: the swap
/// between big- and little-endian readings; its own inverse.
pub fn swap_fields(mut b: [u8; 16]) -> [u8; 16] {
    b[0..4].reverse();
    b[4..6].reverse();
    b[6..8].reverse();
    b
}

/// The SMBIOS version (major, minor) an entry point gives: the 64-bit
/// `_SM3_` one (version at bytes 7 and 8) or the 32-bit `_SM_` one (bytes
/// 6 and 7, with the two misprinted versions firmware is known to carry,
/// 2.31/2.33 for 2.3 and 2.51 for 2.6, read as meant); a bare `_DMI_` one
/// is older than 2.1.
fn smbios_version(entry: &[u8]) -> Option<(u8, u8)> {
    if entry.starts_with(b"_SM3_") {
        return Some((*entry.get(7)?, *entry.get(8)?));
    }
    if entry.starts_with(b"_SM_") {
        return Some(match (*entry.get(6)?, *entry.get(7)?) {
            (2, 31) | (2, 33) => (2, 3),
            (2, 51) => (2, 6),
            version => version,
        });
    }
    entry.starts_with(b"_DMI_").then_some((2, 0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[derive(Debug, Default)]
    struct Firmware(BTreeMap<&'static str, Vec<u8>>);

    impl Guest for Firmware {
        fn get(&self, _: &str) -> Result<Option<String>, String> {
            Ok(None)
        }
        fn set(&self, _: &str, _: &str) -> Result<(), String> {
            Ok(())
        }
        fn firmware(&self, path: &str) -> Result<Option<Vec<u8>>, String> {
            Ok(self.0.get(path).cloned())
        }
    }

    /// vSphere's `config.uuid` of the VM in these tests.
    const VSPHERE: &str = "421c4b0e-6f2b-6d4b-8a6c-3e27bb9fe01a";
    /// The same, as Linux shows it on hardware version 13 and later.
    const SWAPPED: &str = "0e4b1c42-2b6f-4b6d-8a6c-3e27bb9fe01a";

    fn entry(anchor: &[u8], at: usize, major: u8, minor: u8) -> Vec<u8> {
        let mut e = anchor.to_vec();
        e.resize(32, 0);
        e[at] = major;
        e[at + 1] = minor;
        e
    }

    #[test]
    fn the_serial_gives_vspheres_order_on_every_hardware_version() {
        let mut fw = Firmware::default();
        fw.0.insert(
            PRODUCT_SERIAL,
            b"VMware-42 1c 4b 0e 6f 2b 6d 4b-8a 6c 3e 27 bb 9f e0 1a\n".to_vec(),
        );
        fw.0.insert(PRODUCT_UUID, format!("{}\n", SWAPPED.to_uppercase()).into());
        fw.0.insert(ENTRY_POINT, entry(b"_SM_", 6, 2, 7));
        assert_eq!(bios_uuid(&fw).unwrap(), VSPHERE);
    }

    #[test]
    fn without_vmwares_serial_the_smbios_version_decides_the_swap() {
        let mut fw = Firmware::default();
        fw.0.insert(PRODUCT_SERIAL, b"CZ1234ABC\n".to_vec());
        // Hardware 13+: SMBIOS 2.7 (or a 3.x entry point), swapped back.
        fw.0.insert(PRODUCT_UUID, SWAPPED.into());
        for e in [
            entry(b"_SM_", 6, 2, 7),
            entry(b"_SM3_", 7, 3, 0),
            entry(b"_SM_", 6, 2, 51),
        ] {
            fw.0.insert(ENTRY_POINT, e);
            assert_eq!(bios_uuid(&fw).unwrap(), VSPHERE);
        }
        // Older hardware: SMBIOS 2.4, product_uuid is vSphere's order.
        fw.0.insert(PRODUCT_UUID, VSPHERE.into());
        for e in [
            entry(b"_SM_", 6, 2, 4),
            entry(b"_SM_", 6, 2, 33),
            b"_DMI_".to_vec(),
        ] {
            fw.0.insert(ENTRY_POINT, e);
            assert_eq!(bios_uuid(&fw).unwrap(), VSPHERE);
        }
        fw.0.remove(ENTRY_POINT);
        assert_eq!(bios_uuid(&fw).unwrap(), VSPHERE);
    }

    #[test]
    fn a_guest_without_either_file_says_which() {
        let fw = Firmware::default();
        assert!(bios_uuid(&fw).unwrap_err().contains("product_serial"));
        let mut fw = Firmware::default();
        fw.0.insert(PRODUCT_UUID, b"not-a-uuid".to_vec());
        assert!(bios_uuid(&fw).unwrap_err().contains("holds no UUID"));
    }

    #[test]
    fn the_swap_is_its_own_inverse() {
        let b = parse_uuid(VSPHERE).unwrap();
        assert_eq!(format_uuid(&swap_fields(b)), SWAPPED);
        assert_eq!(swap_fields(swap_fields(b)), b);
    }
}
