//! How many connections the controller holds, and which one gives way.
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

use std::collections::BTreeMap;
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
    /// Serving a request: never the one to give way.
    busy: bool,
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

    /// A slot for a new connection, taking one from the oldest idle
    /// connection past its grace when all are held; `None`: close it.
    pub fn admit(self: &Arc<Self>) -> Option<Slot> {
        let mut guard = self.table.lock().unwrap_or_else(|e| e.into_inner());
        let (next, table) = &mut *guard;
        if table.len() >= self.max {
            let now = Instant::now();
            // Ids grow with time: the first idle one is the oldest.
            let victim = table
                .iter()
                .find(|(_, e)| !e.busy && now.duration_since(e.opened) >= self.grace)
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
                busy: false,
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
    /// Marks the connection as serving a request (or idle again).
    pub fn set_busy(&self, busy: bool) {
        let mut guard = self
            .connections
            .table
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(entry) = guard.1.get_mut(&self.id) {
            entry.busy = busy;
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

    #[tokio::test]
    async fn the_oldest_idle_connection_gives_way() {
        let connections = Connections::new(2, Duration::ZERO);
        let first = connections.admit().unwrap();
        let second = connections.admit().unwrap();
        second.set_busy(true);
        let third = connections.admit().unwrap();
        // The first was idle: told to close, its slot taken.
        tokio::time::timeout(Duration::from_secs(1), first.closed())
            .await
            .unwrap();
        assert_eq!(connections.len(), 2);
        // Both held ones busy: a new connection is refused.
        third.set_busy(true);
        assert!(connections.admit().is_none());
        drop(second);
        assert!(connections.admit().is_some());
    }

    #[test]
    fn a_fresh_connection_keeps_its_slot() {
        let connections = Connections::new(1, Duration::from_secs(60));
        let _first = connections.admit().unwrap();
        assert!(connections.admit().is_none());
    }
}
