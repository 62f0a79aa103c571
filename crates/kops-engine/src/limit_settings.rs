//! The user's word on a cloud's request-rate limits: an environment
//! variable per cloud (`KOPS_AWS_RATE_LIMITS`, `KOPS_GCE_RATE_LIMITS`) in
//! one syntax, parsed here so that every cloud reads it alike. Which kinds
//! of bucket exist (`write`, an EC2 action, a Compute quota group) is the
//! cloud's business: this only splits the setting.
//!
//! The syntax: empty (the documented limits), `off` (never hold a call
//! back: the account's limits are raised), or a comma list of
//! `KIND=SIZE/REFILL`, a bucket of SIZE calls (at least 1) refilled at
//! REFILL a second (above 0).

use crate::BucketLimit;

/// A parsed `KOPS_*_RATE_LIMITS` setting.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LimitSettings {
    /// `off`: no call is held back.
    pub off: bool,
    /// The buckets the setting changes, by kind, in the order given (a
    /// kind given twice: the last wins when collected into a map).
    pub buckets: Vec<(String, BucketLimit)>,
}

impl LimitSettings {
    /// Reads `text`, the value of the variable `var` (named in errors).
    pub fn parse(var: &str, text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(Self::default());
        }
        if text == "off" {
            return Ok(Self {
                off: true,
                buckets: Vec::new(),
            });
        }
        let mut buckets = Vec::new();
        for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let parsed = item.split_once('=').and_then(|(kind, value)| {
                let (size, refill) = value.split_once('/')?;
                let size: f64 = size.trim().parse().ok()?;
                let refill: f64 = refill.trim().parse().ok()?;
                let kind = kind.trim();
                (!kind.is_empty() && size >= 1.0 && refill > 0.0 && size.is_finite())
                    .then(|| (kind.to_string(), BucketLimit::new(size, refill)))
            });
            match parsed {
                Some(bucket) => buckets.push(bucket),
                None => {
                    return Err(format!(
                        "{var}: `{item}` is not KIND=SIZE/REFILL (a bucket of SIZE calls, at least 1, refilled at REFILL a second, above 0), or `off`"
                    ))
                }
            }
        }
        Ok(Self {
            off: false,
            buckets,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_off_and_buckets() {
        assert_eq!(
            LimitSettings::parse("V", " ").unwrap(),
            LimitSettings::default()
        );
        assert!(LimitSettings::parse("V", "off").unwrap().off);
        let s = LimitSettings::parse("V", "read=50/10, CreateTags=9/0.5,").unwrap();
        assert!(!s.off);
        assert_eq!(
            s.buckets,
            vec![
                ("read".to_string(), BucketLimit::new(50.0, 10.0)),
                ("CreateTags".to_string(), BucketLimit::new(9.0, 0.5)),
            ]
        );
    }

    #[test]
    fn what_is_not_a_bucket_is_refused_naming_the_variable_and_the_item() {
        for bad in [
            "write",
            "write=200",
            "write=0/5",
            "write=200/0",
            "=1/1",
            "a=x/1",
            "a=inf/1",
        ] {
            let e = LimitSettings::parse("KOPS_X_RATE_LIMITS", bad).expect_err(bad);
            assert!(e.starts_with("KOPS_X_RATE_LIMITS: "), "{e}");
            assert!(e.contains(bad), "{e}");
        }
    }
}
