//! The Kubernetes versions a kops channel recommends, as `upgrade cluster`
//! proposes them (kops' stable/alpha lists compiled in, or a channel file).

use anyhow::{bail, Result};
use kops_api::version::KubernetesVersion;
use kops_ops::OpsError;

/// The kops release whose channel data is compiled in: a minor upgrade is
/// proposed only up to its own minor version (as kops does).
const KOPS_VERSION: (u64, u64, u64) = (1, 37, 0);

/// kops' release is a pre-release of 1.37.0, so 1.37.0 itself is newer.
const KOPS_IS_PRERELEASE: bool = true;

/// `kubernetesVersions` of kops' `channels/stable` (`channels/alpha` has the
/// same list): the lowest version of each range and the recommended release.
const CHANNEL_KUBERNETES_VERSIONS: &[((u64, u64, u64), &str)] = &[
    ((1, 36, 0), "1.36.3"),
    ((1, 35, 0), "1.35.7"),
    ((1, 34, 0), "1.34.10"),
    ((1, 33, 0), "1.33.13"),
    ((1, 32, 0), "1.32.13"),
    ((1, 31, 0), "1.31.14"),
    ((1, 30, 0), "1.30.14"),
    ((1, 29, 0), "1.29.15"),
    ((1, 28, 0), "1.28.15"),
    ((1, 27, 0), "1.27.16"),
    ((1, 26, 0), "1.26.15"),
    ((1, 25, 0), "1.25.16"),
    ((1, 24, 0), "1.24.17"),
    ((1, 23, 0), "1.23.17"),
    ((1, 22, 0), "1.22.17"),
    ((1, 21, 0), "1.21.14"),
    ((1, 20, 0), "1.20.15"),
    ((1, 19, 0), "1.19.16"),
    ((1, 18, 0), "1.18.20"),
    ((1, 17, 0), "1.17.17"),
    ((1, 16, 0), "1.16.15"),
    ((1, 15, 0), "1.15.12"),
    ((1, 14, 0), "1.14.10"),
    ((1, 13, 0), "1.13.12"),
    ((1, 12, 0), "1.12.10"),
    ((1, 11, 0), "1.11.10"),
];

pub type Triple = (u64, u64, u64);

pub fn triple(v: &KubernetesVersion) -> Triple {
    (v.major, v.minor, v.patch)
}

/// One `kubernetesVersions` entry: a range and its recommended version.
pub struct VersionSpec {
    pub range: Vec<(String, Triple)>,
    pub recommended: String,
}

impl VersionSpec {
    pub fn matches(&self, v: Triple) -> bool {
        self.range.iter().all(|(op, bound)| match op.as_str() {
            ">=" => v >= *bound,
            ">" => v > *bound,
            "<=" => v <= *bound,
            "<" => v < *bound,
            _ => v == *bound,
        })
    }
}

/// Parses a semver range as kops' channels write them (`>=1.36.0`,
/// `>=1.4.0 <1.5.0`); pre-release suffixes of bounds are ignored.
pub fn parse_range(text: &str) -> Option<Vec<(String, Triple)>> {
    text.split_whitespace()
        .map(|part| {
            let op_len = part
                .chars()
                .take_while(|c| matches!(c, '<' | '>' | '='))
                .count();
            let (op, rest) = part.split_at(op_len);
            let v = KubernetesVersion::parse(rest)?;
            Some((op.to_string(), triple(&v)))
        })
        .collect()
}

/// The channel's Kubernetes versions: compiled in for `stable` and `alpha`,
/// read from the file for a path or `file://` URL.
pub fn channel_versions(channel: &str) -> Result<Vec<VersionSpec>> {
    let builtin = |_: ()| {
        CHANNEL_KUBERNETES_VERSIONS
            .iter()
            .map(|(low, rec)| VersionSpec {
                range: vec![(">=".to_string(), *low)],
                recommended: rec.to_string(),
            })
            .collect::<Vec<_>>()
    };
    let name = channel
        .trim_start_matches("https://raw.githubusercontent.com/kubernetes/kops/master/channels/");
    match name {
        "stable" | "alpha" => return Ok(builtin(())),
        _ => {}
    }
    let path = channel.strip_prefix("file://").unwrap_or(channel);
    if !(path.starts_with('/') || path.starts_with('.')) {
        bail!("channel `{channel}` is not known\nhint: use `stable`, `alpha`, or a channel file as a path or file:// URL");
    }
    let text = std::fs::read_to_string(path).map_err(|source| OpsError::ReadFile {
        path: path.to_string(),
        source,
    })?;
    let doc: serde_json::Value = serde_yaml_ng::from_str(&text)
        .map_err(|e| anyhow::anyhow!("channel file `{path}` is not YAML: {e}"))?;
    let mut out = Vec::new();
    for entry in doc
        .pointer("/spec/kubernetesVersions")
        .and_then(|v| v.as_array())
        .into_iter()
        .flatten()
    {
        let (Some(range), Some(rec)) = (
            entry.get("range").and_then(|r| r.as_str()),
            entry.get("recommendedVersion").and_then(|r| r.as_str()),
        ) else {
            continue;
        };
        let Some(range) = parse_range(range) else {
            bail!("channel file `{path}`: cannot read the range `{range}`");
        };
        out.push(VersionSpec {
            range,
            recommended: rec.to_string(),
        });
    }
    if out.is_empty() {
        bail!("channel file `{path}` lists no spec.kubernetesVersions\nhint: a channel file is kops' channel format (see kops' channels/stable)");
    }
    Ok(out)
}

pub fn find_spec(specs: &[VersionSpec], v: Triple) -> Option<&VersionSpec> {
    specs.iter().find(|s| s.matches(v))
}

/// The version kops proposes: the recommended release of the current
/// version's range, or of the next minor version when the compiled-in kops
/// release is at least that new; never a downgrade.
pub fn proposed_version(
    specs: &[VersionSpec],
    current: &KubernetesVersion,
) -> Option<KubernetesVersion> {
    let recommended = KubernetesVersion::parse(&find_spec(specs, triple(current))?.recommended)?;
    let mut proposed = recommended.clone();
    let next = (recommended.major, recommended.minor + 1, 0);
    let kops_ok = if KOPS_IS_PRERELEASE {
        next < KOPS_VERSION
    } else {
        next <= KOPS_VERSION
    };
    if kops_ok {
        if let Some(v) =
            find_spec(specs, next).and_then(|s| KubernetesVersion::parse(&s.recommended))
        {
            proposed = v;
        }
    }
    if triple(current) > triple(&proposed) {
        return Some(current.clone());
    }
    Some(proposed)
}

/// kops' test for images it may replace: those of the distributions its
/// channels name (a custom image is left alone).
pub fn upstream_image(image: &str) -> bool {
    [
        "kope.io/k8s-",
        "099720109477/ubuntu/images/hvm-ssd-gp3/ubuntu-noble-24.04-",
        "099720109477/ubuntu/images/hvm-ssd/ubuntu-jammy-22.04-",
        "099720109477/ubuntu/images/hvm-ssd/ubuntu-focal-20.04-",
    ]
    .iter()
    .any(|p| image.starts_with(p))
}

pub fn semver_text(v: &KubernetesVersion) -> String {
    v.to_string().trim_start_matches('v').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(text: &str) -> KubernetesVersion {
        KubernetesVersion::parse(text).unwrap()
    }

    #[test]
    fn proposes_as_kops_stable_channel() {
        let specs = channel_versions("stable").unwrap();
        // Next minor when kops (1.37 pre-release) is at least that new.
        assert_eq!(
            semver_text(&proposed_version(&specs, &v("1.34.1")).unwrap()),
            "1.35.7"
        );
        assert_eq!(
            semver_text(&proposed_version(&specs, &v("1.35.0")).unwrap()),
            "1.36.3"
        );
        // 1.37.0 is newer than kops 1.37.0-alpha.1: stay on 1.36.
        assert_eq!(
            semver_text(&proposed_version(&specs, &v("1.36.0")).unwrap()),
            "1.36.3"
        );
        // Never a downgrade.
        assert_eq!(
            semver_text(&proposed_version(&specs, &v("1.36.9")).unwrap()),
            "1.36.9"
        );
    }

    #[test]
    fn ranges() {
        let r = parse_range(">=1.4.0 <1.5.0").unwrap();
        let s = VersionSpec {
            range: r,
            recommended: String::new(),
        };
        assert!(s.matches((1, 4, 7)));
        assert!(!s.matches((1, 5, 0)));
        assert!(channel_versions("beta").is_err());
    }
}
