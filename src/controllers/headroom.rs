//! Headroom counting: every Flavor's `status.headroom`, counted on the leader apart from
//! the status passes.
//!
//! One count places up to the cap's servers one at a time, each a candidate search and a
//! claim, so counting a thousand Flavors takes far longer than a status pass, which must
//! stay in proportion to what changed. Counting therefore runs in rounds beside the passes:
//! a round copies the store once ([`HeadroomRound`]), counts the Flavors one by one on a
//! blocking thread, rests after each for as long as it took (so it takes at most about
//! half of one core), and queues each Flavor whose count changed for the next status pass,
//! which writes it. A round starts once the interval has passed since the last one and
//! something other than a status has changed since it began.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use super::trigger::Trigger;
use crate::cache::SharedStore;
use crate::metrics::Metrics;
use kubeplace_api::Kind;
use kubeplace_policy::scheduling::HeadroomRound;
use kubeplace_policy::store::ObjectKey;

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
            crate::locks::write(&self.store).turn_headroom_off();
            return;
        }
        let mut counted_at: Option<u64> = None;
        loop {
            let started = Instant::now();
            tokio::select! {
                _ = cancel.cancelled() => return,
                ok = super::leading_and_ready(&mut self.leader, &mut self.ready) => if !ok { return },
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
        let Ok(mut round) =
            tokio::task::spawn_blocking(move || HeadroomRound::new(&crate::locks::read(&store)))
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
            let is_new = crate::locks::write(&self.store).set_headroom(flavor, headroom);
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
        crate::locks::write(&self.store).forget_headroom_of_deleted_flavors();
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
