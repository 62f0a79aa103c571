//! Pacing calls to a cloud's request-rate limits on the client side.
//!
//! Clouds meter their APIs with token buckets: EC2 per action and account
//! (a bucket of N requests refilled at R a second), Compute Engine per API
//! group and project. A client that sends past an empty bucket is answered
//! with a throttling error, and a client that retries at once only empties
//! it again. [`Pacer`] keeps a mirror of each bucket: a call takes a token
//! before it is sent and, when there is none, waits for the refill in the
//! order the calls came (a reservation, so a burst never wakes all waiters
//! at once). When the cloud throttles a call anyway (other clients share
//! the account, or its limits are lower than documented) the mirror is
//! told: it forgets the tokens it thought it had and slows its refill, then
//! recovers it call by call ("additive increase, multiplicative decrease").
//! It knows no cloud: the caller names each bucket and its defaults.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

/// A bucket's documented size and refill rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BucketLimit {
    /// Tokens when full: the burst the cloud allows.
    pub size: f64,
    /// Tokens added a second.
    pub refill: f64,
}

impl BucketLimit {
    pub const fn new(size: f64, refill: f64) -> Self {
        Self { size, refill }
    }
}

/// What a run spent on request-rate limits, for the user.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LimitWaits {
    /// Wall-clock time during which at least one call waited for its
    /// bucket (not the sum over calls waiting side by side).
    pub waited: Duration,
    /// Calls that waited before they were sent.
    pub paced: u64,
    /// Answers in which the cloud throttled a call (each was retried).
    pub throttled: u64,
}

impl fmt::Display for LimitWaits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:.1}s waiting on rate limits ({} calls paced, {} throttled)",
            self.waited.as_secs_f64(),
            self.paced,
            self.throttled
        )
    }
}

/// Mirrors of a cloud's token buckets, shared by every client of a run.
#[derive(Debug, Clone, Default)]
pub struct Pacer {
    inner: Arc<Mutex<State>>,
    /// Off: calls are never held back (throttles are still counted).
    disabled: bool,
}

#[derive(Debug, Default)]
struct State {
    buckets: HashMap<String, Bucket>,
    /// Calls waiting now, and since when the first of them waits.
    waiting: u64,
    waiting_since: Option<Instant>,
    waits: LimitWaits,
}

#[derive(Debug)]
struct Bucket {
    limit: BucketLimit,
    /// The refill rate in use: the limit's, or less after throttles.
    rate: f64,
    /// May go below zero: tokens already promised to waiting calls.
    tokens: f64,
    at: Instant,
    /// When the refill was last slowed.
    slowed: Option<Instant>,
}

impl Bucket {
    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate).min(self.limit.size);
        self.at = now;
    }
}

/// A token promised to a waiting call.
struct Reservation<'a> {
    pacer: &'a Pacer,
    key: &'a str,
    /// The call waited its turn and goes out: the token is spent.
    kept: bool,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        self.pacer.stop_waiting(self.key, self.kept);
    }
}

/// The slowest a throttled bucket is refilled, as a share of its limit.
const SLOWEST: f64 = 0.1;
/// After a throttle the refill rate is multiplied by this, at most once
/// per [`SLOW_ONCE_PER`]: the calls in flight when the cloud's bucket ran
/// dry are throttled together, and are one sign, not one each (as TCP
/// halves its window once per round trip, not once per lost packet).
const BACKOFF: f64 = 0.7;
const SLOW_ONCE_PER: Duration = Duration::from_secs(1);
/// Each call that is not throttled gives back this share of the limit's
/// rate, up to the limit.
const RECOVERY: f64 = 0.02;

impl Pacer {
    /// A pacer that holds calls back to their buckets.
    pub fn new() -> Self {
        Self::default()
    }

    /// A pacer that never holds a call back but still counts throttles
    /// (`KOPS_*_RATE_LIMITS=off`: the account's limits are raised).
    pub fn disabled() -> Self {
        Self {
            disabled: true,
            ..Self::default()
        }
    }

    /// Waits until the bucket `key` (`limit` when first seen) has a token
    /// for one call, and takes it.
    pub async fn acquire(&self, key: &str, limit: BucketLimit) {
        if self.disabled {
            return;
        }
        let now = Instant::now();
        let wait = {
            let Ok(mut state) = self.inner.lock() else {
                return;
            };
            let bucket = state
                .buckets
                .entry(key.to_string())
                .or_insert_with(|| Bucket {
                    limit,
                    rate: limit.refill,
                    tokens: limit.size,
                    at: now,
                    slowed: None,
                });
            bucket.refill(now);
            bucket.tokens -= 1.0;
            if bucket.tokens >= 0.0 {
                return;
            }
            let wait = Duration::from_secs_f64(-bucket.tokens / bucket.rate.max(f64::EPSILON));
            state.waits.paced += 1;
            state.waiting += 1;
            if state.waiting == 1 {
                state.waiting_since = Some(now);
            }
            wait
        };
        // A call given up while it waits (its future dropped) hands its
        // token back: otherwise the calls after it would wait for tokens
        // nobody uses.
        let mut reservation = Reservation {
            pacer: self,
            key,
            kept: false,
        };
        tokio::time::sleep(wait).await;
        reservation.kept = true;
    }

    /// A waiting call is done waiting (sent, or given up).
    fn stop_waiting(&self, key: &str, kept: bool) {
        let Ok(mut state) = self.inner.lock() else {
            return;
        };
        if !kept {
            if let Some(bucket) = state.buckets.get_mut(key) {
                bucket.tokens += 1.0;
            }
        }
        state.waiting = state.waiting.saturating_sub(1);
        if state.waiting == 0 {
            if let Some(since) = state.waiting_since.take() {
                state.waits.waited += Instant::now().saturating_duration_since(since);
            }
        }
    }

    /// The cloud answered a call of bucket `key` without throttling it.
    pub fn answered(&self, key: &str) {
        if let Ok(mut state) = self.inner.lock() {
            if let Some(bucket) = state.buckets.get_mut(key) {
                bucket.rate =
                    (bucket.rate + bucket.limit.refill * RECOVERY).min(bucket.limit.refill);
            }
        }
    }

    /// The cloud throttled a call of bucket `key`: its bucket is empty
    /// whatever the mirror thought, and it refills slower than assumed.
    pub fn throttled(&self, key: &str) {
        if let Ok(mut state) = self.inner.lock() {
            state.waits.throttled += 1;
            let now = Instant::now();
            if let Some(bucket) = state.buckets.get_mut(key) {
                bucket.refill(now);
                bucket.tokens = bucket.tokens.min(0.0);
                if bucket
                    .slowed
                    .is_none_or(|at| now.saturating_duration_since(at) >= SLOW_ONCE_PER)
                {
                    bucket.rate = (bucket.rate * BACKOFF).max(bucket.limit.refill * SLOWEST);
                    bucket.slowed = Some(now);
                }
            }
        }
    }

    /// What was spent on limits so far (a wait going on counts to now).
    pub fn waits(&self) -> LimitWaits {
        let Ok(state) = self.inner.lock() else {
            return LimitWaits::default();
        };
        let mut waits = state.waits;
        if let Some(since) = state.waiting_since {
            waits.waited += Instant::now().saturating_duration_since(since);
        }
        waits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: BucketLimit = BucketLimit::new(10.0, 5.0);

    #[tokio::test(start_paused = true)]
    async fn a_full_bucket_lets_its_burst_through_then_paces_at_the_refill_rate() {
        let pacer = Pacer::new();
        let start = Instant::now();
        for _ in 0..10 {
            pacer.acquire("ec2:DescribeVpcs", LIMIT).await;
        }
        assert_eq!(start.elapsed(), Duration::ZERO);
        // 10 more at 5 a second: 2 s.
        for _ in 0..10 {
            pacer.acquire("ec2:DescribeVpcs", LIMIT).await;
        }
        let elapsed = start.elapsed().as_secs_f64();
        assert!((1.99..2.01).contains(&elapsed), "{elapsed}");
        let waits = pacer.waits();
        assert_eq!(waits.paced, 10);
        assert!((1.99..2.01).contains(&waits.waited.as_secs_f64()));
        // Another bucket is full still.
        let before = Instant::now();
        pacer.acquire("ec2:CreateTags", LIMIT).await;
        assert_eq!(before.elapsed(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn calls_waiting_side_by_side_are_served_in_order_and_counted_once() {
        let pacer = Pacer::new();
        for _ in 0..10 {
            pacer.acquire("k", LIMIT).await;
        }
        let start = Instant::now();
        let mut set = tokio::task::JoinSet::new();
        for n in 0..20u32 {
            let pacer = pacer.clone();
            set.spawn(async move {
                pacer.acquire("k", LIMIT).await;
                (n, start.elapsed())
            });
            tokio::task::yield_now().await;
        }
        let mut done = set.join_all().await;
        done.sort();
        // The n-th waiter goes at (n+1)/5 s.
        for (n, at) in &done {
            let expected = f64::from(n + 1) / 5.0;
            assert!((at.as_secs_f64() - expected).abs() < 0.01, "{n}: {at:?}");
        }
        // Twenty calls waited over 4 s of wall time, not 42 s of summed waits.
        let waited = pacer.waits().waited.as_secs_f64();
        assert!((3.99..4.01).contains(&waited), "{waited}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_throttle_empties_the_mirror_and_slows_it_until_calls_succeed() {
        let pacer = Pacer::new();
        pacer.acquire("k", LIMIT).await;
        pacer.throttled("k");
        let start = Instant::now();
        pacer.acquire("k", LIMIT).await;
        // Empty, and refilled at 0.7 x 5 a second.
        let elapsed = start.elapsed().as_secs_f64();
        assert!((elapsed - 1.0 / 3.5).abs() < 0.01, "{elapsed}");
        for _ in 0..100 {
            pacer.answered("k");
        }
        // Throttles together are one sign: slowed once.
        tokio::time::advance(SLOW_ONCE_PER).await;
        pacer.throttled("k");
        pacer.throttled("k");
        assert_eq!(pacer.waits().throttled, 3);
        // Recovered to the limit before them: 5 x 0.7.
        let start = Instant::now();
        pacer.acquire("k", LIMIT).await;
        let elapsed = start.elapsed().as_secs_f64();
        assert!((elapsed - 1.0 / 3.5).abs() < 0.01, "{elapsed}");
    }

    #[tokio::test(start_paused = true)]
    async fn throttles_never_slow_a_bucket_below_a_tenth_of_its_rate() {
        let pacer = Pacer::new();
        pacer.acquire("k", LIMIT).await;
        for _ in 0..50 {
            tokio::time::advance(SLOW_ONCE_PER).await;
            pacer.throttled("k");
        }
        let start = Instant::now();
        pacer.acquire("k", LIMIT).await;
        let elapsed = start.elapsed().as_secs_f64();
        assert!((elapsed - 2.0).abs() < 0.01, "{elapsed}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_given_up_while_it_waits_hands_its_token_back() {
        let pacer = Pacer::new();
        for _ in 0..10 {
            pacer.acquire("k", LIMIT).await;
        }
        // Ten calls queue up (2 s of refill) and are given up at once.
        for _ in 0..10 {
            let given_up =
                tokio::time::timeout(Duration::from_millis(1), pacer.acquire("k", LIMIT)).await;
            assert!(given_up.is_err());
        }
        // The next call waits for one token, not for eleven.
        let start = Instant::now();
        pacer.acquire("k", LIMIT).await;
        let elapsed = start.elapsed().as_secs_f64();
        assert!(elapsed < 0.25, "{elapsed}");
        assert_eq!(pacer.inner.lock().unwrap().waiting, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_disabled_pacer_never_waits_but_counts_throttles() {
        let pacer = Pacer::disabled();
        let start = Instant::now();
        for _ in 0..100 {
            pacer.acquire("k", LIMIT).await;
        }
        pacer.throttled("k");
        assert_eq!(start.elapsed(), Duration::ZERO);
        assert_eq!(
            pacer.waits(),
            LimitWaits {
                waited: Duration::ZERO,
                paced: 0,
                throttled: 1
            }
        );
    }
}
