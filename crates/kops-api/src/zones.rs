//! Zone to region, once for the crate and the crates above it. Each cloud
//! names its zones its own way, so each has its own rule; both say `None`
//! for a name that is not one of their zones, which is how a cloud is
//! guessed from `--zones` and how validation refuses a wrong zone.

/// The region of an AWS availability zone (`us-east-1a` → `us-east-1`,
/// Local Zones such as `us-west-2-lax-1a` → `us-west-2`), or `None` when the
/// name is not an AWS zone.
pub fn aws_region(zone: &str) -> Option<String> {
    if zone.is_empty()
        || !zone
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        return None;
    }
    let parts: Vec<&str> = zone.split('-').collect();
    let at = parts
        .iter()
        .position(|p| p.starts_with(|c: char| c.is_ascii_digit()))?;
    if at < 2
        || parts[..at]
            .iter()
            .any(|p| p.is_empty() || !p.chars().all(|c| c.is_ascii_lowercase()))
    {
        return None;
    }
    let part = parts[at];
    let digits = part.chars().take_while(|c| c.is_ascii_digit()).count();
    let suffix = &part[digits..];
    let rest = &parts[at + 1..];
    let standard =
        rest.is_empty() && !suffix.is_empty() && suffix.chars().all(|c| c.is_ascii_lowercase());
    let local = suffix.is_empty() && !rest.is_empty() && rest.iter().all(|p| !p.is_empty());
    if !(standard || local) {
        return None;
    }
    Some(format!("{}-{}", parts[..at].join("-"), &part[..digits]))
}

/// The region of a Compute Engine zone: `us-central1-a` → `us-central1`,
/// kops' test zone `us-test1-a` → `us-test1`. `None` when the name does not
/// have that shape (an AWS zone such as `us-east-1a`, a bare region).
pub fn gce_region(zone: &str) -> Option<String> {
    let parts: Vec<&str> = zone.split('-').collect();
    let [area, place, letter] = parts.as_slice() else {
        return None;
    };
    let lower = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_lowercase());
    let letters = place.chars().take_while(|c| c.is_ascii_lowercase()).count();
    let digits = &place[letters..];
    let place_ok = letters > 0 && !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit());
    (lower(area) && place_ok && letter.len() == 1 && lower(letter))
        .then(|| format!("{area}-{place}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aws_zones() {
        assert_eq!(aws_region("us-east-1a").as_deref(), Some("us-east-1"));
        assert_eq!(
            aws_region("us-gov-west-1b").as_deref(),
            Some("us-gov-west-1")
        );
        assert_eq!(aws_region("us-west-2-lax-1a").as_deref(), Some("us-west-2"));
        assert_eq!(aws_region("us-test-1a").as_deref(), Some("us-test-1"));
        for bad in ["us-east-1", "us-central1-a", "fsn1", "nozone", ""] {
            assert_eq!(aws_region(bad), None, "{bad}");
        }
    }

    #[test]
    fn gce_zones() {
        assert_eq!(gce_region("us-central1-a").as_deref(), Some("us-central1"));
        assert_eq!(gce_region("us-test1-b").as_deref(), Some("us-test1"));
        assert_eq!(
            gce_region("northamerica-northeast1-c").as_deref(),
            Some("northamerica-northeast1")
        );
        assert_eq!(
            gce_region("europe-west10-a").as_deref(),
            Some("europe-west10")
        );
        for bad in [
            "us-east-1a",
            "us-central1",
            "us-central1-ab",
            "US-central1-a",
            "a-b-c",
            "",
        ] {
            assert_eq!(gce_region(bad), None, "{bad}");
        }
    }
}
