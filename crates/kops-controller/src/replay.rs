//! What a token may cost the controller before STS has said who sent it:
//! a bounded replay cache and a limit on outbound STS calls.
//!
//! Anyone who can reach port 3988 can send tokens; only STS can tell a
//! real one from a forged one. So the cache holds a token's signature
//! (32 bytes) only while its STS call is in flight and, once STS accepted
//! it, until the token's time window closes; a token STS refused is
//! forgotten at once. Its size is capped ([`MAX_ENTRIES`]); when full, new
//! tokens wait (the node retries) instead of older ones being forgotten,
//! which would reopen them to replay. STS calls are limited in number at
//! once and per second, so forged requests cannot make the controller
//! flood STS (or be throttled by it, which would stop real nodes too).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::{Semaphore, SemaphorePermit};

/// Most signatures remembered at once (about 100 bytes each).
pub const MAX_ENTRIES: usize = 16_384;
/// STS calls in flight at once.
pub const STS_CONCURRENCY: usize = 8;
/// STS calls per second, sustained.
pub const STS_RATE: f64 = 10.0;
/// STS calls that may be made at once after a quiet period.
pub const STS_BURST: f64 = 40.0;
/// How long a request waits for an STS slot before the node is told to
/// come back later.
const STS_WAIT: Duration = Duration::from_secs(2);

/// Why a token was not let through.
#[derive(Debug, PartialEq, Eq)]
pub enum Denied {
    /// The signature is in the cache: a replay (or the same token twice at once).
    Replay,
    /// The cache is full or STS calls are at their limit: try again later.
    Busy,
}

/// Signatures of tokens being checked or accepted, with when each stops
/// being valid anyway.
pub struct ReplayCache {
    entries: Mutex<HashMap<[u8; 32], SystemTime>>,
    capacity: usize,
}

impl Default for ReplayCache {
    fn default() -> Self {
        ReplayCache::with_capacity(MAX_ENTRIES)
    }
}

impl ReplayCache {
    /// A cache of at most `capacity` signatures.
    pub fn with_capacity(capacity: usize) -> ReplayCache {
        ReplayCache {
            entries: Mutex::default(),
            capacity,
        }
    }

    /// Claims `signature` until `until`: refused when it is already held.
    pub fn claim(
        &self,
        signature: [u8; 32],
        until: SystemTime,
        now: SystemTime,
    ) -> Result<(), Denied> {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(expires) = entries.get(&signature) {
            if *expires > now {
                return Err(Denied::Replay);
            }
        }
        if entries.len() >= self.capacity {
            entries.retain(|_, expires| *expires > now);
            if entries.len() >= self.capacity {
                return Err(Denied::Busy);
            }
        }
        entries.insert(signature, until);
        Ok(())
    }

    /// Forgets a signature STS did not accept (forged, or not checked).
    pub fn release(&self, signature: &[u8; 32]) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.remove(signature);
    }

    /// How many signatures are held.
    pub fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A token bucket and a concurrency limit for outbound STS calls.
pub struct StsLimiter {
    slots: Semaphore,
    bucket: Mutex<(f64, Instant)>,
    rate: f64,
    burst: f64,
}

impl Default for StsLimiter {
    fn default() -> Self {
        StsLimiter::new(STS_CONCURRENCY, STS_RATE, STS_BURST)
    }
}

impl StsLimiter {
    pub fn new(concurrency: usize, rate: f64, burst: f64) -> StsLimiter {
        StsLimiter {
            slots: Semaphore::new(concurrency),
            bucket: Mutex::new((burst, Instant::now())),
            rate,
            burst,
        }
    }

    /// A slot for one STS call, or `Busy` when none comes within a short wait.
    pub async fn acquire(&self) -> Result<SemaphorePermit<'_>, Denied> {
        let permit = tokio::time::timeout(STS_WAIT, self.slots.acquire())
            .await
            .map_err(|_| Denied::Busy)?
            .map_err(|_| Denied::Busy)?;
        let mut bucket = self.bucket.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let refill = now.duration_since(bucket.1).as_secs_f64() * self.rate;
        bucket.0 = (bucket.0 + refill).min(self.burst);
        bucket.1 = now;
        if bucket.0 < 1.0 {
            return Err(Denied::Busy);
        }
        bucket.0 -= 1.0;
        Ok(permit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_is_held_until_released_or_expired() {
        let cache = ReplayCache::default();
        let now = SystemTime::now();
        let later = now + Duration::from_secs(60);
        cache.claim([1; 32], later, now).unwrap();
        assert_eq!(cache.claim([1; 32], later, now), Err(Denied::Replay));
        cache.release(&[1; 32]);
        cache.claim([1; 32], later, now).unwrap();
        // Expired: claimable again.
        assert!(cache.claim([1; 32], later, later).is_ok());
    }

    #[test]
    fn the_cache_is_bounded() {
        let cache = ReplayCache::default();
        let now = SystemTime::now();
        let later = now + Duration::from_secs(60);
        for i in 0..MAX_ENTRIES {
            let mut sig = [0; 32];
            sig[..8].copy_from_slice(&(i as u64).to_le_bytes());
            cache.claim(sig, later, now).unwrap();
        }
        assert_eq!(cache.claim([0xff; 32], later, now), Err(Denied::Busy));
        assert_eq!(cache.len(), MAX_ENTRIES);
        // Once their window is over, the old ones make room.
        assert!(cache.claim([0xff; 32], later, later).is_ok());
        assert_eq!(cache.len(), 1);
    }

    #[tokio::test]
    async fn sts_calls_are_rate_limited() {
        let limiter = StsLimiter::new(2, 0.0, 3.0);
        for _ in 0..3 {
            drop(limiter.acquire().await.unwrap());
        }
        assert_eq!(limiter.acquire().await.err(), Some(Denied::Busy));
    }
}
