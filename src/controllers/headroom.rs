//! Headroom counting: every Flavor's `status.headroom`, counted on the leader apart from
//! the status passes.
//!
//! One count places up to the cap's servers one at a time, each a candidate search and a
//! claim, so counting a thousand Flavors takes far longer than a status pass, which must
//! stay in proportion to what changed. Counting therefore runs in rounds beside the passes:
//! a round copies the store once ([`HeadroomRound`]), counts the Flavors one by one on a
//! blocking thread, rests after each for as long as it took (so it takes at most about
//! half of one core), records each count in the figures shared with the status writer
//! ([`SharedHeadroomFigures`]), and queues each Flavor whose count changed for the next
//! status pass, which writes it. A round starts once the interval has passed since the last
//! one and something other than a status has changed since it began.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use super::trigger::Trigger;
use crate::cache::SharedStore;
use crate::metrics::Metrics;
use kubeplace_api::Kind;
use kubeplace_core::placement::weighers::Weighers;
use kubeplace_policy::scheduling::{HeadroomFigures, HeadroomRound};
use kubeplace_policy::store::ObjectKey;

/// The Flavors' headroom figures, held beside the store: the counter writes them and every
/// status pass reads them. A pass reads a snapshot, so that it holds no lock while it plans
/// and the counter never waits for one to finish. Clones share the figures.
#[derive(Debug, Clone, Default)]
pub(crate) struct SharedHeadroomFigures(Arc<RwLock<Arc<HeadroomFigures>>>);

impl SharedHeadroomFigures {
    /// The figures as they are now; they stay so however the counter changes them.
    pub fn snapshot(&self) -> Arc<HeadroomFigures> {
        Arc::clone(&self.0.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Changes the figures: copied first when a pass still reads the ones it changes.
    pub fn update<T>(&self, change: impl FnOnce(&mut HeadroomFigures) -> T) -> T {
        let mut figures = self.0.write().unwrap_or_else(|e| e.into_inner());
        change(Arc::make_mut(&mut figures))
    }
}

/// How headroom is counted (`kubeplace run --headroom-cap`, `--headroom-interval`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct HeadroomSettings {
    /// Servers counted at most per Flavor; 0 turns counting off.
    pub cap: usize,
    /// Least time from the start of one round to the start of the next.
    pub interval: Duration,
}

/// The counting loop and what it needs.
pub(crate) struct HeadroomCounter {
    pub store: SharedStore,
    /// Where the counts go, for the status passes.
    pub figures: SharedHeadroomFigures,
    /// How the scheduler weighs candidates, which the counts place as it would.
    pub weighers: Weighers,
    pub trigger: Arc<Trigger>,
    pub leader: watch::Receiver<bool>,
    pub ready: watch::Receiver<bool>,
    pub settings: HeadroomSettings,
    pub metrics: Arc<Metrics>,
}

impl HeadroomCounter {
    /// Runs until `cancel`; does nothing with a cap of 0.
    pub async fn run(mut self, cancel: CancellationToken) {
        if self.settings.cap == 0 {
            self.figures.update(HeadroomFigures::turn_off);
            return;
        }
        let mut counted_at: Option<u64> = None;
        loop {
            let started = Instant::now();
            tokio::select! {
                _ = cancel.cancelled() => return,
                ok = super::leading::leading_and_ready(&mut self.leader, &mut self.ready) => if !ok { return },
            }
            let revision = crate::locks::read(&self.store).revision();
            if counted_at != Some(revision) {
                self.metrics.headroom_counting.set(1);
                let counted = self.round(&cancel).await;
                self.metrics.headroom_counting.set(0);
                if counted {
                    self.metrics.headroom_rounds.inc();
                    counted_at = Some(revision);
                }
            }
            let next = self.settings.interval.saturating_sub(started.elapsed());
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(next.max(Duration::from_secs(1))) => {}
            }
        }
    }

    /// One round over every Flavor; false when it stopped early (no longer leading, or
    /// cancelled).
    async fn round(&self, cancel: &CancellationToken) -> bool {
        let started = Instant::now();
        let store = self.store.clone();
        let weighers = self.weighers.clone();
        let Ok(mut round) = tokio::task::spawn_blocking(move || {
            HeadroomRound::new(&crate::locks::read(&store), &weighers)
        })
        .await
        else {
            return false;
        };
        let flavors = round.flavors();
        let mut changed = 0;
        let cap = self.settings.cap;
        for flavor in &flavors {
            if cancel.is_cancelled() || !*self.leader.borrow() {
                return false;
            }
            let began = Instant::now();
            let name = flavor.clone();
            let Ok((back, headroom)) = tokio::task::spawn_blocking(move || {
                let h = round.count(&name, cap);
                (round, h)
            })
            .await
            else {
                return false;
            };
            round = back;
            let took = began.elapsed();
            let is_new = self.figures.update(|f| f.set(flavor, headroom));
            if is_new {
                changed += 1;
                self.trigger.key(ObjectKey::cluster(Kind::Flavor, flavor));
            }
            // Rest as long as the count took: the webhook and the passes keep a core.
            tokio::select! {
                _ = cancel.cancelled() => return false,
                _ = tokio::time::sleep(took) => {}
            }
        }
        {
            // The figures' lock is taken under the store's; a pass takes its snapshot before
            // the store's lock, never under it, so the two never wait for each other.
            let store = crate::locks::read(&self.store);
            self.figures.update(|f| f.forget_deleted_flavors(&store));
        }
        let took_ms = started.elapsed().as_millis() as u64;
        if changed > 0 {
            info!(
                flavors = flavors.len(),
                changed, took_ms, "counted headroom"
            );
        } else {
            debug!(
                flavors = flavors.len(),
                took_ms, "counted headroom; none changed"
            );
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubeplace_api::HeadroomStatus;
    use kubeplace_policy::store::Store;

    fn counted(servers: i64) -> Option<HeadroomStatus> {
        Some(HeadroomStatus {
            servers,
            capped: false,
            stopped_by: None,
            within_quota: Vec::new(),
        })
    }

    /// A pass's snapshot keeps the figures it was taken with while the counter records;
    /// the next snapshot, and every clone of the shared figures, sees what was recorded.
    #[test]
    fn a_snapshot_keeps_its_figures_while_the_counter_records() {
        let store = Store::default();
        let shared = SharedHeadroomFigures::default();
        let reader = shared.clone();
        assert!(shared.update(|f| f.set("f1", counted(3))));
        let before = reader.snapshot();
        assert!(shared.update(|f| f.set("f1", counted(5))));
        assert!(!shared.update(|f| f.set("f1", counted(5))), "unchanged");
        assert_eq!(before.of("f1", &store).map(|h| h.servers), Some(3));
        assert_eq!(
            reader.snapshot().of("f1", &store).map(|h| h.servers),
            Some(5)
        );
        shared.update(HeadroomFigures::turn_off);
        assert_eq!(reader.snapshot().of("f1", &store), None);
    }
}
