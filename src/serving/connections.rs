//! The connections one server holds, and who may hold them.
//!
//! A server holds at most [`ConnectionLimits::max`] connections, and at most
//! [`ConnectionLimits::per_peer`] from one peer (an IPv4 address, or an IPv6 /64: one host's
//! addresses). A connection is *busy* from the moment a request's headers are read until its
//! response has been written whole; otherwise it is idle (waiting for a request, reading one's
//! headers, or still in its TLS handshake). Idle connections cost the server a slot and
//! nothing else, so they give way:
//! - one idle for [`ConnectionLimits::idle`] is closed;
//! - a new connection from a peer at its bound takes the slot of that peer's connection idle
//!   longest, and is closed at once when all of that peer's are busy;
//! - a new connection to a full server takes the slot of the connection idle longest, and
//!   waits in the listener's backlog while every connection is busy.
//!
//! So no client holds slots with keep-alive requests sent now and then, or with handshakes or
//! headers that never end: a new client (a kubelet's probe, the API server calling the
//! webhook) always finds a slot unless the server is busy answering that many requests.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How many connections a server holds, from whom, and for how long when idle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Connections held at once.
    pub max: usize,
    /// Connections held at once from one peer.
    pub per_peer: usize,
    /// How long a connection may stay idle before it is closed.
    pub idle: Duration,
    /// How long a TLS handshake may take.
    pub handshake: Duration,
}

impl ConnectionLimits {
    /// A thousand connections (each costs some KiB of buffers and a task), a quarter of them
    /// from one peer, closed after five idle seconds; handshakes within five seconds.
    pub const DEFAULT: ConnectionLimits = ConnectionLimits {
        max: 1024,
        per_peer: 256,
        idle: Duration::from_secs(5),
        handshake: Duration::from_secs(5),
    };
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits::DEFAULT
    }
}

/// Where a peer's connections are counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Peer {
    V4(u32),
    /// The first 64 bits: a host is given a /64, and picks any address in it.
    V6(u64),
}

impl Peer {
    fn of(addr: SocketAddr) -> Peer {
        match addr.ip() {
            IpAddr::V4(v4) => Peer::V4(u32::from(v4)),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Peer::V4(u32::from(v4)),
                None => Peer::V6((u128::from(v6) >> 64) as u64),
            },
        }
    }
}

/// One connection's slot, shared by the server's table and the connection's task.
pub(crate) struct Slot {
    peer: Peer,
    /// Requests being answered (at most one on HTTP/1).
    busy: AtomicU32,
    /// When it last became idle, in milliseconds since the table's start.
    idle_since: AtomicU64,
    /// Cancelled when the slot is taken from the connection: it is then closed.
    evicted: AtomicBool,
    leave: CancellationToken,
    table: Arc<Table>,
}

impl Slot {
    /// Cancelled when the connection must close to make room for another.
    pub(crate) fn evicted(&self) -> &CancellationToken {
        &self.leave
    }

    /// How long the connection has been idle at `now`; zero while busy.
    pub(crate) fn idle_for(&self, now: Instant) -> Duration {
        if self.busy.load(Ordering::Acquire) > 0 {
            return Duration::ZERO;
        }
        let since = self.idle_since.load(Ordering::Acquire);
        self.table
            .millis(now)
            .checked_sub(since)
            .map_or(Duration::ZERO, Duration::from_millis)
    }

    /// Marks a request begun; it ends when the guard is dropped.
    pub(crate) fn begin(self: &Arc<Slot>) -> Busy {
        self.busy.fetch_add(1, Ordering::AcqRel);
        Busy(self.clone())
    }
}

/// A request being answered on a connection; dropped when its response is written (or the
/// connection is gone), which makes the connection idle again.
pub(crate) struct Busy(Arc<Slot>);

impl Drop for Busy {
    fn drop(&mut self) {
        let slot = &self.0;
        let now = slot.table.millis(Instant::now());
        slot.idle_since.store(now, Ordering::Release);
        slot.busy.fetch_sub(1, Ordering::AcqRel);
        // The accept loop may be waiting for an idle connection to take the place of.
        slot.table.changed.notify_one();
    }
}

/// A connection's hold on its slot, given back when dropped.
pub(crate) struct Held {
    id: u64,
    slot: Arc<Slot>,
}

impl Held {
    pub(crate) fn slot(&self) -> &Arc<Slot> {
        &self.slot
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.slot.table.release(self.id, &self.slot);
    }
}

/// Every connection of one server.
pub(crate) struct Connections {
    table: Arc<Table>,
}

struct Table {
    limits: ConnectionLimits,
    started: Instant,
    inner: Mutex<Inner>,
    /// Notified when a connection closes or becomes idle.
    changed: Notify,
}

#[derive(Default)]
struct Inner {
    slots: HashMap<u64, Arc<Slot>>,
    /// Connections per peer, evicted ones included until they close.
    per_peer: HashMap<Peer, usize>,
    /// Connections not evicted: those the bound counts.
    held: usize,
    next: u64,
}

/// What becomes of a connection just accepted.
pub(crate) enum Admission {
    /// It holds a slot.
    Admitted(Held),
    /// Every connection of its peer is busy: it is closed.
    PeerFull,
    /// Every connection of the server is busy: it waits for one to close or become idle.
    Full,
}

impl Connections {
    pub(crate) fn new(limits: ConnectionLimits) -> Connections {
        Connections {
            table: Arc::new(Table {
                limits,
                started: Instant::now(),
                inner: Mutex::new(Inner::default()),
                changed: Notify::new(),
            }),
        }
    }

    pub(crate) fn limits(&self) -> ConnectionLimits {
        self.table.limits
    }

    /// Whether a new connection could be given a slot now: one is free, or one is idle.
    pub(crate) fn has_room(&self) -> bool {
        let inner = self.table.lock();
        inner.held < self.table.limits.max || self.table.oldest_idle(&inner, None).is_some()
    }

    /// Waits until a connection closes or becomes idle.
    pub(crate) async fn changed(&self) {
        self.table.changed.notified().await
    }

    /// Gives a slot to a connection from `peer`, taking it from an idle connection where a
    /// bound is reached.
    pub(crate) fn admit(&self, peer: SocketAddr) -> Admission {
        let table = &self.table;
        let peer = Peer::of(peer);
        let mut inner = table.lock();
        let from_peer = inner.per_peer.get(&peer).copied().unwrap_or(0);
        if from_peer >= table.limits.per_peer {
            match table.oldest_idle(&inner, Some(peer)) {
                Some(slot) => table.evict(&mut inner, &slot),
                None => return Admission::PeerFull,
            }
        }
        if inner.held >= table.limits.max {
            match table.oldest_idle(&inner, None) {
                Some(slot) => table.evict(&mut inner, &slot),
                None => return Admission::Full,
            }
        }
        let id = inner.next;
        inner.next += 1;
        let slot = Arc::new(Slot {
            peer,
            busy: AtomicU32::new(0),
            idle_since: AtomicU64::new(table.millis(Instant::now())),
            evicted: AtomicBool::new(false),
            leave: CancellationToken::new(),
            table: table.clone(),
        });
        inner.slots.insert(id, slot.clone());
        *inner.per_peer.entry(peer).or_default() += 1;
        inner.held += 1;
        Admission::Admitted(Held { id, slot })
    }

    /// Connections held and not evicted.
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.table.lock().held
    }
}

impl Table {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // Counts only: what a panicking holder left is still a table of counts.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn millis(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.started).as_millis() as u64
    }

    /// The connection idle longest (of `peer`, when given) that still holds its slot.
    fn oldest_idle(&self, inner: &Inner, peer: Option<Peer>) -> Option<Arc<Slot>> {
        inner
            .slots
            .values()
            .filter(|s| peer.is_none_or(|p| s.peer == p))
            .filter(|s| !s.evicted.load(Ordering::Acquire) && s.busy.load(Ordering::Acquire) == 0)
            .min_by_key(|s| s.idle_since.load(Ordering::Acquire))
            .cloned()
    }

    /// Takes the slot from a connection, which is told to close: it no longer counts against
    /// either bound. It closes at once unless a request arrived meanwhile, which is answered
    /// first.
    fn evict(&self, inner: &mut Inner, slot: &Slot) {
        if !slot.evicted.swap(true, Ordering::AcqRel) {
            inner.held -= 1;
            if let Some(n) = inner.per_peer.get_mut(&slot.peer) {
                *n -= 1;
                if *n == 0 {
                    inner.per_peer.remove(&slot.peer);
                }
            }
            slot.leave.cancel();
        }
    }

    fn release(&self, id: u64, slot: &Slot) {
        let mut inner = self.lock();
        inner.slots.remove(&id);
        if !slot.evicted.swap(true, Ordering::AcqRel) {
            inner.held -= 1;
            if let Some(n) = inner.per_peer.get_mut(&slot.peer) {
                *n -= 1;
                if *n == 0 {
                    inner.per_peer.remove(&slot.peer);
                }
            }
        }
        drop(inner);
        self.changed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(ip: &str) -> SocketAddr {
        SocketAddr::new(ip.parse().unwrap(), 40000)
    }

    fn limits(max: usize, per_peer: usize) -> ConnectionLimits {
        ConnectionLimits {
            max,
            per_peer,
            ..ConnectionLimits::DEFAULT
        }
    }

    fn admitted(c: &Connections, ip: &str) -> Held {
        match c.admit(addr(ip)) {
            Admission::Admitted(held) => held,
            Admission::PeerFull => panic!("refused: its peer is full"),
            Admission::Full => panic!("refused: the server is full"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_server_takes_the_slot_of_the_connection_idle_longest() {
        let c = Connections::new(limits(2, 2));
        let first = admitted(&c, "192.0.2.1");
        tokio::time::advance(Duration::from_millis(10)).await;
        let second = admitted(&c, "192.0.2.2");
        assert!(c.has_room(), "idle connections make room");
        let third = admitted(&c, "192.0.2.3");
        assert!(first.slot().evicted().is_cancelled());
        assert!(!second.slot().evicted().is_cancelled());
        assert_eq!(c.held(), 2);
        // Busy connections are never taken: with both busy, the next is refused.
        let _b2 = second.slot().begin();
        let _b3 = third.slot().begin();
        assert!(!c.has_room());
        assert!(matches!(c.admit(addr("192.0.2.4")), Admission::Full));
        // The evicted one closing changes no count the bound reads.
        drop(first);
        assert_eq!(c.held(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_peer_at_its_bound_gives_up_its_own_idle_connection_first() {
        let c = Connections::new(limits(10, 2));
        let other = admitted(&c, "192.0.2.9");
        tokio::time::advance(Duration::from_millis(10)).await;
        let a = admitted(&c, "192.0.2.1");
        tokio::time::advance(Duration::from_millis(10)).await;
        let b = admitted(&c, "192.0.2.1");
        let _c = admitted(&c, "192.0.2.1");
        assert!(a.slot().evicted().is_cancelled(), "its own oldest goes");
        assert!(
            !other.slot().evicted().is_cancelled(),
            "another peer's stays"
        );
        // With every one of its connections busy, a peer's next is refused.
        let _bb = b.slot().begin();
        let _bc = _c.slot().begin();
        assert!(matches!(c.admit(addr("192.0.2.1")), Admission::PeerFull));
        // Another peer is still let in.
        let _d = admitted(&c, "192.0.2.2");
    }

    #[tokio::test(start_paused = true)]
    async fn an_ipv6_host_is_one_peer_across_its_64() {
        let c = Connections::new(limits(10, 1));
        let a = admitted(&c, "2001:db8::1");
        let _b = admitted(&c, "2001:db8::ffff:2");
        assert!(a.slot().evicted().is_cancelled());
        let _other = admitted(&c, "2001:db8:0:1::1");
        // An IPv4-mapped address is its IPv4 peer.
        let v4 = admitted(&c, "192.0.2.7");
        let _mapped = admitted(&c, "::ffff:192.0.2.7");
        assert!(v4.slot().evicted().is_cancelled());
    }

    #[tokio::test(start_paused = true)]
    async fn idle_time_counts_from_the_end_of_the_last_response() {
        let c = Connections::new(limits(10, 10));
        let held = admitted(&c, "192.0.2.1");
        let slot = held.slot().clone();
        tokio::time::advance(Duration::from_secs(3)).await;
        assert_eq!(slot.idle_for(Instant::now()), Duration::from_secs(3));
        let busy = slot.begin();
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(slot.idle_for(Instant::now()), Duration::ZERO);
        drop(busy);
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(slot.idle_for(Instant::now()), Duration::from_secs(1));
    }
}
