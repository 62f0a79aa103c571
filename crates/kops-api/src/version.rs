//! Kubernetes versions: parsing and the range kops-rs supports.

use std::fmt;

/// A Kubernetes release version such as `v1.34.2` (pre-release suffixes kept).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct KubernetesVersion {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
    pub pre: String,
}

impl KubernetesVersion {
    /// Parses `1.34.2`, `v1.34.2` or `v1.35.0-alpha.1`. Returns `None` when the
    /// text is not a version.
    pub fn parse(text: &str) -> Option<KubernetesVersion> {
        let t = text.trim().strip_prefix('v').unwrap_or(text.trim());
        let (core, pre) = match t.split_once(['-', '+']) {
            Some((c, p)) => (c, p.to_string()),
            None => (t, String::new()),
        };
        let mut parts = core.split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        let patch = parts.next().map(|p| p.parse().ok()).unwrap_or(Some(0))?;
        if parts.next().is_some() {
            return None;
        }
        Some(KubernetesVersion {
            major,
            minor,
            patch,
            pre,
        })
    }

    pub const fn new(major: u64, minor: u64, patch: u64) -> Self {
        KubernetesVersion {
            major,
            minor,
            patch,
            pre: String::new(),
        }
    }

    fn minor_key(&self) -> (u64, u64) {
        (self.major, self.minor)
    }
}

impl fmt::Display for KubernetesVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}.{}.{}", self.major, self.minor, self.patch)?;
        if !self.pre.is_empty() {
            write!(f, "-{}", self.pre)?;
        }
        Ok(())
    }
}

/// The oldest Kubernetes minor version kops-rs deploys (as kops 1.37 does).
pub const OLDEST_SUPPORTED: KubernetesVersion = KubernetesVersion::new(1, 32, 0);
/// The newest Kubernetes minor version kops-rs deploys.
pub const NEWEST_SUPPORTED: KubernetesVersion = KubernetesVersion::new(1, 38, 0);

/// Why a version cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VersionProblem {
    Unparsable,
    TooOld,
    TooNew,
}

/// Checks that `text` is a Kubernetes version in the supported range.
pub fn check_supported(text: &str) -> Result<KubernetesVersion, VersionProblem> {
    let v = KubernetesVersion::parse(text).ok_or(VersionProblem::Unparsable)?;
    if v.minor_key() < OLDEST_SUPPORTED.minor_key() {
        return Err(VersionProblem::TooOld);
    }
    if v.minor_key() > NEWEST_SUPPORTED.minor_key() {
        return Err(VersionProblem::TooNew);
    }
    Ok(v)
}

/// The patch release the stable channel recommends for a minor version, and
/// the version `create cluster` uses when none is given.
pub fn recommended(minor: Option<(u64, u64)>) -> KubernetesVersion {
    const RECOMMENDED: &[(u64, u64, u64)] = &[
        (1, 36, 3),
        (1, 35, 7),
        (1, 34, 10),
        (1, 33, 13),
        (1, 32, 13),
    ];
    // The default for new clusters: kops' stable channel recommends 1.34.
    let wanted = minor.unwrap_or((1, 34));
    RECOMMENDED
        .iter()
        .find(|(ma, mi, _)| (*ma, *mi) == wanted)
        .map(|&(ma, mi, p)| KubernetesVersion::new(ma, mi, p))
        .unwrap_or(KubernetesVersion::new(wanted.0, wanted.1, 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_ranges() {
        assert_eq!(
            KubernetesVersion::parse("v1.32.0"),
            Some(KubernetesVersion::new(1, 32, 0))
        );
        assert_eq!(
            KubernetesVersion::parse("1.35"),
            Some(KubernetesVersion::new(1, 35, 0))
        );
        assert_eq!(
            KubernetesVersion::parse("v1.35.0-alpha.1").unwrap().pre,
            "alpha.1"
        );
        assert_eq!(KubernetesVersion::parse("latest"), None);
        assert_eq!(check_supported("v1.31.9"), Err(VersionProblem::TooOld));
        assert_eq!(check_supported("v1.39.0"), Err(VersionProblem::TooNew));
        assert!(check_supported("v1.36.0").is_ok());
        assert_eq!(recommended(None).to_string(), "v1.34.10");
    }
}
