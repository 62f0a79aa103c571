//! Sprig's `semverCompare` (Masterminds/semver v3 constraints), common in cluster
//! templates as `{{ if semverCompare ">=1.28" .kubernetesVersion }}`.
//!
//! Constraints: `,` or space for AND, `||` for OR; operators `= != > < >= <= ~ ~> ^`;
//! `x`/`X`/`*` wildcards and missing parts (`1.28`) make a constraint "dirty", which widens
//! `=`, `>` and `<=` to the whole range. A pre-release version only matches a constraint
//! that itself names a pre-release.

use std::cmp::Ordering;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Version {
    major: u64,
    minor: u64,
    patch: u64,
    pre: String,
}

impl Version {
    /// Masterminds' loose parse: optional `v`, 1 to 3 numeric parts, `-pre`, `+meta`.
    fn parse(s: &str) -> Option<Version> {
        let s = s.trim();
        let s = s.strip_prefix('v').unwrap_or(s);
        let s = s.split('+').next().unwrap_or(s);
        let (nums, pre) = match s.split_once('-') {
            Some((n, p)) => (n, p.to_string()),
            None => (s, String::new()),
        };
        let parts: Vec<&str> = nums.split('.').collect();
        if parts.is_empty() || parts.len() > 3 {
            return None;
        }
        let mut v = [0u64; 3];
        for (i, p) in parts.iter().enumerate() {
            v[i] = p.parse().ok()?;
        }
        Some(Version {
            major: v[0],
            minor: v[1],
            patch: v[2],
            pre,
        })
    }

    fn cmp(&self, o: &Version) -> Ordering {
        (self.major, self.minor, self.patch)
            .cmp(&(o.major, o.minor, o.patch))
            .then_with(|| cmp_pre(&self.pre, &o.pre))
    }
}

fn cmp_pre(a: &str, b: &str) -> Ordering {
    match (a.is_empty(), b.is_empty()) {
        (true, true) => return Ordering::Equal,
        (true, false) => return Ordering::Greater,
        (false, true) => return Ordering::Less,
        _ => {}
    }
    let (ap, bp): (Vec<&str>, Vec<&str>) = (a.split('.').collect(), b.split('.').collect());
    for (x, y) in ap.iter().zip(bp.iter()) {
        let o = match (x.parse::<u64>(), y.parse::<u64>()) {
            (Ok(i), Ok(j)) => i.cmp(&j),
            (Ok(_), Err(_)) => Ordering::Less,
            (Err(_), Ok(_)) => Ordering::Greater,
            _ => x.cmp(y),
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    ap.len().cmp(&bp.len())
}

struct Constraint {
    op: String,
    con: Version,
    /// How many leading parts were given as numbers (3 = clean).
    given: usize,
}

impl Constraint {
    fn parse(s: &str) -> Result<Constraint, String> {
        let s = s.trim();
        let ops = ["!=", ">=", "=>", "<=", "=<", "~>", "=", ">", "<", "~", "^"];
        let op = ops
            .iter()
            .find(|o| s.starts_with(**o))
            .copied()
            .unwrap_or("");
        let rest = s[op.len()..].trim();
        let rest = rest.strip_prefix('v').unwrap_or(rest);
        let base = rest.split('+').next().unwrap_or(rest);
        let (nums, pre) = match base.split_once('-') {
            Some((n, p)) => (n, p.to_string()),
            None => (base, String::new()),
        };
        let mut v = [0u64; 3];
        let mut given = 0;
        for (i, p) in nums.split('.').enumerate() {
            if i >= 3 {
                return Err(format!("improper constraint: {s}"));
            }
            if matches!(p, "x" | "X" | "*") {
                break;
            }
            v[i] = p.parse().map_err(|_| format!("improper constraint: {s}"))?;
            given = i + 1;
        }
        let op = match op {
            "=>" => ">=",
            "=<" => "<=",
            "~>" => "~",
            "" => "=",
            o => o,
        };
        Ok(Constraint {
            op: op.to_string(),
            con: Version {
                major: v[0],
                minor: v[1],
                patch: v[2],
                pre,
            },
            given,
        })
    }

    fn check(&self, v: &Version) -> bool {
        // Pre-releases only satisfy constraints that carry one.
        if !v.pre.is_empty() && self.con.pre.is_empty() {
            return false;
        }
        let c = &self.con;
        let dirty = self.given < 3;
        let cmp = v.cmp(c);
        match self.op.as_str() {
            "=" if !dirty => cmp == Ordering::Equal,
            "=" | "~" => self.tilde(v),
            "!=" => {
                if dirty {
                    !self.tilde(v)
                } else {
                    cmp != Ordering::Equal
                }
            }
            ">" => {
                if !dirty {
                    cmp == Ordering::Greater
                } else if v.major != c.major {
                    v.major > c.major
                } else if self.given <= 1 {
                    false
                } else {
                    v.minor > c.minor
                }
            }
            "<" => cmp == Ordering::Less,
            ">=" => cmp != Ordering::Less,
            "<=" => {
                if !dirty {
                    cmp != Ordering::Greater
                } else if v.major != c.major {
                    v.major < c.major
                } else {
                    self.given <= 1 || v.minor <= c.minor
                }
            }
            "^" => {
                if cmp == Ordering::Less {
                    return false;
                }
                if c.major > 0 || self.given <= 1 {
                    v.major == c.major
                } else if c.minor > 0 || self.given <= 2 {
                    v.major == 0 && v.minor == c.minor
                } else {
                    v.major == 0 && v.minor == 0 && v.patch == c.patch
                }
            }
            _ => false,
        }
    }

    /// `~1.2.3` is `>=1.2.3 <1.3.0`; `~1` is `>=1.0.0 <2.0.0`.
    fn tilde(&self, v: &Version) -> bool {
        let c = &self.con;
        if v.cmp(c) == Ordering::Less {
            return false;
        }
        if self.given <= 1 {
            return v.major == c.major;
        }
        v.major == c.major && v.minor == c.minor
    }
}

/// `semverCompare constraint version`.
pub fn compare(constraint: &str, version: &str) -> Result<bool, String> {
    let v = Version::parse(version).ok_or_else(|| "Invalid Semantic Version".to_string())?;
    for alt in constraint.split("||") {
        let mut all = true;
        let tokens: Vec<&str> = alt
            .split([',', ' '])
            .filter(|t| !t.trim().is_empty())
            .collect();
        // Rejoin an operator written apart from its version (">= 1.2").
        let mut parts: Vec<String> = Vec::new();
        for t in tokens {
            match parts.last_mut() {
                Some(last) if last.chars().all(|c| "=<>!~^".contains(c)) => last.push_str(t),
                _ => parts.push(t.to_string()),
            }
        }
        if parts.is_empty() {
            return Err(format!("improper constraint: {constraint}"));
        }
        for p in parts {
            if !Constraint::parse(&p)?.check(&v) {
                all = false;
            }
        }
        if all {
            return Ok(true);
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::compare;

    #[test]
    fn constraints() {
        let yes = [
            (">=1.28", "1.30.2"),
            (">= 1.28.0", "v1.28.0"),
            ("<1.30", "1.29.9"),
            ("~1.29", "1.29.4"),
            ("^1.2.3", "1.9.0"),
            ("1.29.x", "1.29.7"),
            ("=1.29", "1.29.1"),
            (">1.28", "1.29.0"),
            ("<=1.29", "1.29.5"),
            (">=1.27, <1.30", "1.28.1"),
            ("<1.20 || >=1.29", "1.30.0"),
            ("!=1.29.1", "1.29.2"),
        ];
        for (c, v) in yes {
            assert!(compare(c, v).unwrap(), "{c} {v}");
        }
        let no = [
            (">=1.28", "1.27.9"),
            (">1.28", "1.28.5"),
            ("~1.29", "1.30.0"),
            ("^0.2.3", "0.3.0"),
            (">=1.28", "1.30.0-beta.1"),
            ("<=1.29", "1.30.0"),
            (">=1.27, <1.30", "1.30.0"),
        ];
        for (c, v) in no {
            assert!(!compare(c, v).unwrap(), "{c} {v}");
        }
        assert!(compare(">=1.28", "not-a-version").is_err());
    }
}
