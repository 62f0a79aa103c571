//! The checks kops makes on every signed claim (the GCE vTPM's token, an
//! enrolled machine's), before the signature itself is checked.

use std::time::SystemTime;

use crate::refusal::Refusal;

/// kops' checks of the fields every signed claim has, in kops' order: the
/// audience, a signing time within `skew` of `now` either way, and the
/// hash of the body the token came with. The signing time.
pub fn check_claim(
    audience: &str,
    want_audience: &str,
    timestamp: i64,
    request_hash: &[u8],
    body: &[u8],
    now: SystemTime,
    skew: std::time::Duration,
) -> Result<SystemTime, Refusal> {
    use kops_bootstrap::text::escape;
    use sha2::{Digest, Sha256};
    if audience != want_audience {
        return Err(Refusal::WrongAudience {
            got: escape(audience),
            want: want_audience.to_string(),
        });
    }
    let signed = u64::try_from(timestamp)
        .ok()
        .map(|s| SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(s));
    let in_window = signed.is_some_and(|t| {
        let ahead = t.duration_since(now).unwrap_or_default();
        let behind = now.duration_since(t).unwrap_or_default();
        ahead <= skew && behind <= skew
    });
    let Some(signed) = signed.filter(|_| in_window) else {
        return Err(Refusal::Expired {
            signed: timestamp.to_string(),
            window: skew.as_secs() / 60,
        });
    };
    if request_hash != Sha256::digest(body).as_slice() {
        return Err(Refusal::BodyMismatch);
    }
    Ok(signed)
}
