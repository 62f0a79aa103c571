//! Checks of DNS names: a cluster's name and whether it is a gossip
//! (`*.k8s.local`) name.

/// Why a `.k8s.local` cluster with DNS records is refused (kops 1.37).
pub const GOSSIP_REMOVED: &str =
    "gossip DNS (a cluster name ending in `.k8s.local`) was removed in kops 1.37";
/// What to do instead of gossip DNS.
pub const GOSSIP_HINT: &str = "use DNS type `None` (nodes reach the API through its load balancer), or name the cluster in a DNS zone you own";

/// Whether `name` is a gossip cluster name (`*.k8s.local`).
pub fn is_gossip_name(name: &str) -> bool {
    name.trim_end_matches('.').ends_with(".k8s.local")
}

/// Checks a DNS subdomain name (RFC 1123): lowercase labels of letters,
/// digits and `-`, separated by dots.
pub fn dns_name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        return Some("is required");
    }
    if name.len() > 253 {
        return Some("is longer than 253 characters");
    }
    for label in name.split('.') {
        if label.is_empty() {
            return Some("has an empty label (two dots in a row, or a leading or trailing dot)");
        }
        if label.len() > 63 {
            return Some("has a label longer than 63 characters");
        }
        if !label
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        {
            return Some("may only hold lowercase letters, digits, `-` and `.`");
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Some("has a label that starts or ends with `-`");
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_names() {
        assert!(dns_name_problem("a.example.com").is_none());
        assert!(dns_name_problem("A.example.com").is_some());
        assert!(dns_name_problem("a..b").is_some());
        assert!(dns_name_problem("-a.b").is_some());
    }
}
