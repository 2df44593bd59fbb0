//! What needs reconciling, debounced: changes are gathered until the watches have been
//! quiet for a moment, so a burst of changes becomes one reconcile pass.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use kubeplace_policy::status::Reach;
use kubeplace_policy::store::ObjectKey;

/// The objects to reconcile: those the changes reach, and a few more by key.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Pending {
    /// The statuses the changes of objects can move (every status after a relist, for a
    /// new leader and at each resync).
    pub reach: Reach,
    /// These objects too (their own status changed, or a write of it is retried), when
    /// the reach is not every object.
    pub keys: BTreeSet<ObjectKey>,
}

impl Pending {
    /// Every object.
    #[cfg(test)]
    pub fn every() -> Pending {
        Pending {
            reach: Reach::every(),
            keys: BTreeSet::new(),
        }
    }

    /// Whether every object is pending.
    pub fn full(&self) -> bool {
        self.reach.is_every()
    }

    /// Whether nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.reach.is_empty() && self.keys.is_empty()
    }
}

/// Gathers pending work and wakes the reconciler.
#[derive(Debug, Default)]
pub(crate) struct Trigger {
    pending: Mutex<Pending>,
    notify: Notify,
}

impl Trigger {
    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        crate::locks::lock(&self.pending)
    }

    /// Asks for every object to be reconciled.
    pub(crate) fn full(&self) {
        self.reach(Reach::every());
    }

    /// Asks for the statuses some changes reach to be reconciled.
    pub(crate) fn reach(&self, reach: Reach) {
        let mut p = self.lock();
        p.reach.add(reach);
        if p.reach.is_every() {
            p.keys.clear();
        }
        drop(p);
        self.notify.notify_one();
    }

    /// Asks for one object to be reconciled.
    pub fn key(&self, key: ObjectKey) {
        let mut p = self.lock();
        if !p.full() {
            p.keys.insert(key);
        }
        drop(p);
        self.notify.notify_one();
    }

    /// Gives back work that could not be done now.
    pub(crate) fn requeue(&self, pending: Pending) {
        self.reach(pending.reach);
        for k in pending.keys {
            self.key(k);
        }
    }

    /// Takes what is pending now.
    pub fn take(&self) -> Pending {
        std::mem::take(&mut *self.lock())
    }

    /// Waits for work, then until no new work came for `quiet` (but at most `max` after
    /// the first), and takes it.
    pub(crate) async fn settle(&self, quiet: Duration, max: Duration) -> Pending {
        while self.lock().is_empty() {
            self.notify.notified().await;
        }
        let latest = Instant::now() + max;
        loop {
            let deadline = (Instant::now() + quiet).min(latest);
            tokio::select! {
                _ = self.notify.notified() => {
                    if Instant::now() >= latest {
                        break;
                    }
                }
                _ = tokio::time::sleep_until(deadline) => break,
            }
        }
        self.take()
    }
}

#[cfg(test)]
mod tests {
    use kubeplace_api::Kind;
    use std::sync::Arc;

    use super::*;

    fn key(n: &str) -> ObjectKey {
        ObjectKey::cluster(Kind::Flavor, n)
    }

    #[test]
    fn full_swallows_keys() {
        let t = Trigger::default();
        t.key(key("a"));
        t.full();
        t.key(key("b"));
        assert_eq!(t.take(), Pending::every());
        assert!(t.take().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_becomes_one_batch() {
        let t = Arc::new(Trigger::default());
        let feeder = {
            let t = t.clone();
            tokio::spawn(async move {
                for i in 0..1000 {
                    t.key(key(&format!("f{i}")));
                    if i % 100 == 0 {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            })
        };
        let started = Instant::now();
        let batch = t
            .settle(Duration::from_millis(300), Duration::from_secs(10))
            .await;
        feeder.await.unwrap();
        assert_eq!(batch.keys.len(), 1000);
        // The last event came at ~500 ms; the batch closed 300 ms of quiet later.
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(700) && took < Duration::from_millis(1000),
            "{took:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_steady_stream_is_cut_at_the_maximum_delay() {
        let t = Arc::new(Trigger::default());
        let feeder = {
            let t = t.clone();
            tokio::spawn(async move {
                for i in 0..100 {
                    t.key(key(&format!("f{i}")));
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            })
        };
        let started = Instant::now();
        let batch = t
            .settle(Duration::from_millis(300), Duration::from_secs(2))
            .await;
        let took = started.elapsed();
        assert!(took <= Duration::from_millis(2100), "{took:?}");
        assert!(
            batch.keys.len() >= 19 && batch.keys.len() <= 22,
            "{}",
            batch.keys.len()
        );
        feeder.abort();
    }
}
