//! Finishing Placement writes their writers left open. A write of several objects is
//! recorded (a PlacementWrite) before any of its objects changes, and deleted once all of
//! them have; a record still there well after it was made is of a writer that died or lost
//! the API server on the way. The leader finishes it from the cluster as it is
//! ([`Cluster::finish`]): every replica already shows the write whole, and other writes of
//! its objects wait until it is finished.

use std::time::{Duration, SystemTime};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::cache::SharedStore;
use crate::cluster_writer::Cluster;
use kubeplace_api::{Kind, Object, PlacementWrite};
use kubeplace_policy::store::writes::decided_at;

/// How often the leader looks for writes left open.
const LOOK_EVERY: Duration = Duration::from_secs(1);
/// How old a write's record is before the leader takes it as left: a writer applies its
/// write in a few round trips to the API server.
pub(crate) const LEFT_AFTER: Duration = Duration::from_secs(3);

/// The loop and what it needs.
pub(crate) struct OpenWrites {
    pub store: SharedStore,
    pub cluster: Cluster,
    pub leader: watch::Receiver<bool>,
    pub ready: watch::Receiver<bool>,
}

impl OpenWrites {
    /// Runs until `cancel`, finishing left writes while this replica leads.
    pub async fn run(self, cancel: CancellationToken) {
        let (leader, ready) = (self.leader.clone(), self.ready.clone());
        super::leading::every_while_leading(leader, ready, &cancel, LOOK_EVERY, || {
            self.finish_left()
        })
        .await;
    }

    /// Finishes the writes left open.
    async fn finish_left(&self) {
        for write in self.left(SystemTime::now()) {
            let name = write.metadata.name.clone().unwrap_or_default();
            match self.cluster.finish(&write).await {
                Ok(()) => {
                    info!(write = %name, writer = %write.spec.writer, "finished a Placement write its writer left open")
                }
                Err(e) => {
                    warn!(write = %name, error = %e, "a Placement write left open could not be finished yet; trying again")
                }
            }
        }
    }

    /// The open writes older than [`LEFT_AFTER`].
    fn left(&self, now: SystemTime) -> Vec<PlacementWrite> {
        let store = crate::locks::read(&self.store);
        store
            .list(Kind::PlacementWrite)
            .filter_map(|o| match o {
                Object::PlacementWrite(w) => Some(w),
                _ => None,
            })
            .filter(|w| {
                let name = w.metadata.name.as_deref().unwrap_or("");
                store.open_write(name).is_some()
                    && decided_at(name)
                        .and_then(|at| now.duration_since(at).ok())
                        .is_none_or(|age| age >= LEFT_AFTER)
            })
            .cloned()
            .collect()
    }
}
