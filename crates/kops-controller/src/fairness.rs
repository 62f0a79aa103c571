//! Who may spend a verification, and in what order, before any verifier
//! runs (STS, Compute reads, vCenter calls, `Host` reads).
//!
//! Only the cloud can tell a forged token from a real one, and each
//! verification costs a call the cloud limits. So a caller without
//! credentials must not be able to take every call. Each peer address (an
//! IPv6 peer by its /64) has one verification at a time, and at most
//! [`PER_PEER_QUEUE`] requests waiting or verified (more are refused at
//! once, 429); each claimed identity (the credential an AWS token names)
//! one request at once. A peer's current request then waits in one
//! first-come first-served line for [`CONCURRENCY`] verifications at once
//! and [`RATE`] a second. As each peer holds at most one place in that
//! line, an honest node waits behind at most one request per other peer:
//! with 50 attacking addresses, about 50 / [`RATE`] seconds. The server
//! bounds the whole wait and verification by [`VERIFY_DEADLINE`].

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore, SemaphorePermit};

/// Requests of one peer address waiting or being verified at once.
pub const PER_PEER_QUEUE: usize = 8;
/// Verifications running at once, all peers together.
pub const CONCURRENCY: usize = 8;
/// Verifications started per second, all peers together (the AWS
/// verifier's STS limit, so this line, not STS's refusal, decides who
/// goes first).
pub const RATE: f64 = 10.0;
/// Verifications that may start at once after a quiet period.
pub const BURST: f64 = 40.0;
/// How long a request may wait in line and be verified, all together.
pub const VERIFY_DEADLINE: Duration = Duration::from_secs(20);

/// Why a request was not let in.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum Turned {
    /// This peer has as many requests waiting as it may.
    PeerBusy,
    /// The identity the token claims is being verified already.
    ClaimBusy,
}

impl std::fmt::Display for Turned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Turned::PeerBusy => "this address has too many requests being verified",
            Turned::ClaimBusy => "the identity this token claims is being verified already",
        })
    }
}

struct Peer {
    queued: usize,
    one_at_a_time: Arc<Semaphore>,
}

/// The per-peer limits and the common line.
pub struct Gate {
    per_peer_queue: usize,
    peers: Mutex<HashMap<IpAddr, Peer>>,
    claims: Mutex<HashMap<String, usize>>,
    line: Semaphore,
    bucket: Mutex<(f64, Instant)>,
    rate: f64,
    burst: f64,
}

impl Default for Gate {
    fn default() -> Self {
        Gate::new(PER_PEER_QUEUE, CONCURRENCY, RATE, BURST)
    }
}

/// A request's place: dropping it frees the peer's and the claim's share.
pub struct Pass<'a> {
    gate: &'a Gate,
    peer: IpAddr,
    claim: Option<String>,
    one_at_a_time: Arc<Semaphore>,
    own_turn: Option<OwnedSemaphorePermit>,
    permit: Option<SemaphorePermit<'a>>,
}

/// An IPv6 peer's /64 (one host or subnet), an IPv4 peer's address.
fn key(peer: IpAddr) -> IpAddr {
    match peer.to_canonical() {
        IpAddr::V6(v6) => {
            let s = v6.segments();
            IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
        }
        v4 => v4,
    }
}

impl Gate {
    pub fn new(per_peer_queue: usize, concurrency: usize, rate: f64, burst: f64) -> Gate {
        Gate {
            per_peer_queue,
            peers: Mutex::new(HashMap::new()),
            claims: Mutex::new(HashMap::new()),
            line: Semaphore::new(concurrency),
            bucket: Mutex::new((burst, Instant::now())),
            rate,
            burst,
        }
    }

    /// Lets `peer`'s request (claiming `claim`, when the token names one)
    /// wait for its turn, or says at once why not.
    pub fn admit(&self, peer: IpAddr, claim: Option<&str>) -> Result<Pass<'_>, Turned> {
        let peer = key(peer);
        let one_at_a_time = {
            let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
            let entry = peers.entry(peer).or_insert_with(|| Peer {
                queued: 0,
                one_at_a_time: Arc::new(Semaphore::new(1)),
            });
            if entry.queued >= self.per_peer_queue {
                return Err(Turned::PeerBusy);
            }
            entry.queued += 1;
            entry.one_at_a_time.clone()
        };
        let mut pass = Pass {
            gate: self,
            peer,
            claim: None,
            one_at_a_time,
            own_turn: None,
            permit: None,
        };
        if let Some(claim) = claim {
            let mut claims = self.claims.lock().unwrap_or_else(|e| e.into_inner());
            let held = claims.entry(claim.to_string()).or_insert(0);
            if *held >= 1 {
                return Err(Turned::ClaimBusy);
            }
            *held += 1;
            pass.claim = Some(claim.to_string());
        }
        Ok(pass)
    }

    /// Peers with a request waiting or verified now.
    pub fn peers(&self) -> usize {
        self.peers.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

impl Pass<'_> {
    /// Waits for this request's turn: its peer's earlier requests first,
    /// then first come, first served among peers, within the common
    /// concurrency and rate.
    pub async fn turn(&mut self) {
        let Ok(own) = self.one_at_a_time.clone().acquire_owned().await else {
            return;
        };
        self.own_turn = Some(own);
        let Ok(permit) = self.gate.line.acquire().await else {
            return;
        };
        self.permit = Some(permit);
        loop {
            let wait = {
                let mut bucket = self.gate.bucket.lock().unwrap_or_else(|e| e.into_inner());
                let now = Instant::now();
                let refill = now.duration_since(bucket.1).as_secs_f64() * self.gate.rate;
                bucket.0 = (bucket.0 + refill).min(self.gate.burst);
                bucket.1 = now;
                if bucket.0 >= 1.0 {
                    bucket.0 -= 1.0;
                    return;
                }
                Duration::from_secs_f64((1.0 - bucket.0) / self.gate.rate.max(0.001))
            };
            tokio::time::sleep(wait).await;
        }
    }
}

impl Drop for Pass<'_> {
    fn drop(&mut self) {
        self.permit.take();
        self.own_turn.take();
        {
            let mut peers = self.gate.peers.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(p) = peers.get_mut(&self.peer) {
                p.queued = p.queued.saturating_sub(1);
                if p.queued == 0 {
                    peers.remove(&self.peer);
                }
            }
        }
        if let Some(claim) = &self.claim {
            let mut claims = self.gate.claims.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(held) = claims.get_mut(claim) {
                *held -= 1;
                if *held == 0 {
                    claims.remove(claim);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn few_requests_per_peer_and_one_per_claim() {
        let gate = Gate::new(2, 1, 100.0, 100.0);
        let first = gate.admit(ip("10.0.0.1"), Some("i-1")).unwrap();
        let second = gate.admit(ip("10.0.0.1"), None).unwrap();
        assert_eq!(
            gate.admit(ip("10.0.0.1"), None).err(),
            Some(Turned::PeerBusy)
        );
        assert_eq!(
            gate.admit(ip("10.0.0.2"), Some("i-1")).err(),
            Some(Turned::ClaimBusy)
        );
        // The same /64 is one peer.
        let _a = gate.admit(ip("2001:db8::1"), None).unwrap();
        let _b = gate.admit(ip("2001:db8::2"), None).unwrap();
        assert_eq!(
            gate.admit(ip("2001:db8::3"), None).err(),
            Some(Turned::PeerBusy)
        );
        drop((first, second));
        assert!(gate.admit(ip("10.0.0.1"), Some("i-1")).is_ok());
        assert_eq!(gate.peers(), 1);
    }

    #[tokio::test]
    async fn the_line_is_first_come_first_served() {
        let gate = std::sync::Arc::new(Gate::new(8, 1, 1000.0, 1000.0));
        let mut first = gate.admit(ip("10.0.0.1"), None).unwrap();
        first.turn().await;
        let order = std::sync::Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for i in 2..6 {
            let (gate, order) = (gate.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                let mut pass = gate.admit(ip(&format!("10.0.0.{i}")), None).unwrap();
                pass.turn().await;
                order.lock().unwrap().push(i);
            }));
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        drop(first);
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![2, 3, 4, 5]);
    }
}
