//! kops' name shortening and the names kops gives a cluster's objects on
//! Google Cloud, where names and labels allow no dots (`a.example.com`
//! becomes `a-example-com`) and are length-limited.

/// kops' name shortening: unchanged when it fits, else cut and followed by
/// `-` and six characters of the FNV-1a hash of the whole name (base32hex,
/// lower case).
pub fn truncate_with_hash(name: &str, max: usize) -> String {
    if name.len() <= max {
        return name.to_string();
    }
    let encoded = hash6(name);
    let mut base_len = max - encoded.len() - 1;
    while !name.is_char_boundary(base_len) {
        base_len -= 1;
    }
    format!("{}-{encoded}", &name[..base_len])
}

/// Six characters of the FNV-1a hash of `name` (base32hex, lower case),
/// the suffix kops adds to names it shortens.
pub fn hash6(name: &str) -> String {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in name.bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    const ALPHABET: &[u8; 32] = b"0123456789abcdefghijklmnopqrstuv";
    let bits = u64::from(hash) << 8; // 32 bits, padded to 40 = 8 groups of 5
    (0..6)
        .map(|i| ALPHABET[((bits >> (35 - 5 * i)) & 0x1f) as usize] as char)
        .collect()
}

/// The cluster's name as Google Cloud accepts it: dots become dashes.
pub fn gce_safe_cluster_name(cluster: &str) -> String {
    cluster.replace('.', "-")
}

/// `<cluster>-<object>` within `max` characters: the cluster part (dots
/// as dashes) is shortened with kops' hash when the whole does not fit.
pub fn gce_cluster_prefixed_name(object: &str, cluster: &str, max: usize) -> String {
    let suffix = format!("-{object}");
    let room = max.saturating_sub(suffix.len()).max(1);
    format!(
        "{}{suffix}",
        truncate_with_hash(&gce_safe_cluster_name(cluster), room)
    )
}

/// The network tag of the instances of a role (`node`, `control-plane`,
/// `bastion`): `<cluster>-k8s-io-role-<role>`, at most 63 characters.
pub fn gce_tag_for_role(cluster: &str, role: &str) -> String {
    gce_cluster_prefixed_name(&format!("k8s-io-role-{role}"), cluster, 63)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_tags_as_kops() {
        assert_eq!(
            gce_tag_for_role("minimal-gce.example.com", "node"),
            "minimal-gce-example-com-k8s-io-role-node"
        );
        // kops' long-name case: the cluster part cut to fit 63 characters.
        assert_eq!(
            gce_tag_for_role(
                "minimal-gce-with-a-very-very-very-very-very-long-name.example.com",
                "node"
            ),
            "minimal-gce-with-a-very-very-very-very--96dqvi-k8s-io-role-node"
        );
    }
}
