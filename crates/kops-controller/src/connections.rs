//! How many connections the controller holds, and which one gives way.
//!
//! When all are held, the one to close is chosen among those not serving
//! a verified node, past their grace: an idle one before one reading or
//! waiting on a request (busy but unverified), one of the peer address
//! holding the most slots before others, the oldest first. So a flood of
//! slow or idle connections from a few addresses gives way to a node, and
//! a node whose request is being answered is never cut off.
//!
//! Port 3988 is reachable by every machine in the cluster's network, and
//! on clusters without DNS it sits on the API load balancer, which may
//! face the internet. Each connection costs a file descriptor and a task,
//! so they are capped ([`MAX_CONNECTIONS`]). A connection that holds a
//! slot without sending a request (an idle TLS connection, a slow-loris
//! dribbling its headers) is the one to give way: when the table is full,
//! a new connection closes the oldest idle one that has had at least
//! [`GRACE`] to send its request; when none has, the new connection is
//! closed at once. So a real node, whose request follows its handshake
//! within milliseconds, gets through however many idle connections an
//! attacker holds; the timeouts in [`crate::server`] end the rest.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// Most connections held at once (nodeup sets kops-controller's
/// `LimitNOFILE` well above it, leaving room for its own AWS and
/// Kubernetes calls).
pub const MAX_CONNECTIONS: usize = 1024;

/// How long a new connection has to send its request before a newer one
/// may take its slot.
pub const GRACE: Duration = Duration::from_secs(1);

struct Entry {
    opened: Instant,
    peer: IpAddr,
    /// Reading or verifying a request: gives way after idle ones.
    busy: bool,
    /// Serving a verified node: never the one to give way.
    verified: bool,
    close: Arc<Notify>,
}

/// The open connections.
pub struct Connections {
    max: usize,
    grace: Duration,
    table: Mutex<(u64, BTreeMap<u64, Entry>)>,
}

/// A connection's slot; dropping it frees the slot.
pub struct Slot {
    id: u64,
    connections: Arc<Connections>,
    close: Arc<Notify>,
}

impl Connections {
    pub fn new(max: usize, grace: Duration) -> Arc<Connections> {
        Arc::new(Connections {
            max,
            grace,
            table: Mutex::new((0, BTreeMap::new())),
        })
    }

    /// A slot for a new connection from `peer`, taking one from another
    /// connection past its grace when all are held (see the module
    /// text); `None`: close it.
    pub fn admit(self: &Arc<Self>, peer: IpAddr) -> Option<Slot> {
        let mut guard = self.table.lock().unwrap_or_else(|e| e.into_inner());
        let (next, table) = &mut *guard;
        if table.len() >= self.max {
            let now = Instant::now();
            let mut held: HashMap<IpAddr, usize> = HashMap::new();
            for entry in table.values() {
                *held.entry(entry.peer).or_default() += 1;
            }
            let victim = table
                .iter()
                .filter(|(_, e)| !e.verified && now.duration_since(e.opened) >= self.grace)
                .min_by_key(|(id, e)| {
                    (
                        e.busy,
                        std::cmp::Reverse(held.get(&e.peer).copied().unwrap_or(0)),
                        **id,
                    )
                })
                .map(|(id, _)| *id)?;
            if let Some(entry) = table.remove(&victim) {
                entry.close.notify_one();
            }
        }
        *next += 1;
        let close = Arc::new(Notify::new());
        table.insert(
            *next,
            Entry {
                opened: Instant::now(),
                peer: peer.to_canonical(),
                busy: false,
                verified: false,
                close: close.clone(),
            },
        );
        Some(Slot {
            id: *next,
            connections: self.clone(),
            close,
        })
    }

    /// How many connections are held.
    pub fn len(&self) -> usize {
        self.table.lock().unwrap_or_else(|e| e.into_inner()).1.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Slot {
    /// Marks the connection as reading and verifying a request, or idle
    /// again (no longer verified either).
    pub fn set_busy(&self, busy: bool) {
        self.update(|entry| {
            entry.busy = busy;
            entry.verified = false;
        });
    }

    /// Marks the connection as serving a node whose request verified.
    pub fn set_verified(&self) {
        self.update(|entry| entry.verified = true);
    }

    fn update(&self, change: impl FnOnce(&mut Entry)) {
        let mut guard = self
            .connections
            .table
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(entry) = guard.1.get_mut(&self.id) {
            change(entry);
        }
    }

    /// Completes when the connection must give its slot away.
    pub async fn closed(&self) {
        self.close.notified().await;
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut guard = self
            .connections
            .table
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        guard.1.remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    #[tokio::test]
    async fn idle_then_unverified_connections_give_way() {
        let connections = Connections::new(3, Duration::ZERO);
        let idle = connections.admit(ip(2)).unwrap();
        let busy = connections.admit(ip(2)).unwrap();
        busy.set_busy(true);
        let node = connections.admit(ip(3)).unwrap();
        node.set_busy(true);
        node.set_verified();
        // The idle one goes first.
        let fourth = connections.admit(ip(4)).unwrap();
        tokio::time::timeout(Duration::from_secs(1), idle.closed())
            .await
            .unwrap();
        assert_eq!(connections.len(), 3);
        // Then the busy, unverified one; never the verified node.
        fourth.set_busy(true);
        let fifth = connections.admit(ip(5)).unwrap();
        tokio::time::timeout(Duration::from_secs(1), busy.closed())
            .await
            .unwrap();
        fourth.set_verified();
        fifth.set_verified();
        assert!(connections.admit(ip(6)).is_none());
        drop(node);
        assert!(connections.admit(ip(6)).is_some());
    }

    #[tokio::test]
    async fn the_peer_holding_most_slots_gives_way() {
        let connections = Connections::new(3, Duration::ZERO);
        let node = connections.admit(ip(1)).unwrap();
        node.set_busy(true);
        let a = connections.admit(ip(2)).unwrap();
        let b = connections.admit(ip(2)).unwrap();
        a.set_busy(true);
        b.set_busy(true);
        let _new = connections.admit(ip(3)).unwrap();
        // The node's connection is the oldest, but 127.0.0.2 holds two.
        tokio::time::timeout(Duration::from_secs(1), a.closed())
            .await
            .unwrap();
        drop(b);
        drop(node);
    }

    #[test]
    fn a_fresh_connection_keeps_its_slot() {
        let connections = Connections::new(1, Duration::from_secs(60));
        let _first = connections.admit(ip(1)).unwrap();
        assert!(connections.admit(ip(1)).is_none());
    }
}
