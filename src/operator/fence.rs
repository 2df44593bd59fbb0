//! The claims fence: a replica that starts leading decides no claim until it counts every
//! claim the previous leader decided.
//!
//! A claim the previous leader answered `allowed` is either in etcd already or in the record
//! of claims in flight it kept on the lease, which the new leader read in the version of the
//! lease it took and holds in its ledger ([`crate::controllers::lease`]). The record also
//! says how far the previous leader's store had come ([`SeenThrough`]): every claim it no
//! longer records was seen by then. So the new leader waits for nothing but its own store
//! to come as far, which it usually has already, and decides. Without such a point (no
//! predecessor, or one that did not keep it), or when its store does not get there soon, it
//! lists the Allocations and waits until its store holds each at least as new.

use std::future::Future;
use std::time::Duration;

use kube::Client;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::cache::SharedStore;
use kubeplace_api::Kind;
use kubeplace_policy::claims::SeenThrough;
use kubeplace_policy::store::{ObjectKey, resource_version};

/// Longest the new leader waits for its store to come as far as its predecessor's had,
/// before it lists the Allocations instead.
const POINT_CATCH_UP: Duration = Duration::from_secs(5);
/// How often the store is looked at while it comes to the predecessor's point.
const POINT_POLL: Duration = Duration::from_millis(10);
/// Longest the new leader waits for its store to hold every Allocation the API server
/// listed, before it lists again.
const CLAIMS_CATCH_UP: Duration = Duration::from_secs(30);
/// After how long a catch-up that still waits is worth a warning at each list.
const SLOW_CATCH_UP: Duration = Duration::from_secs(5);
/// How soon the Allocations are listed again while the store lacks one the last list had.
const ABSENT_RELIST: Duration = Duration::from_secs(1);
/// Wait before listing again after a failed list.
const LIST_RETRY: Duration = Duration::from_secs(1);
/// How often the store is looked at while it catches up.
const STORE_POLL: Duration = Duration::from_millis(100);

/// The Allocations the API server holds, by name with their resourceVersion.
pub(crate) trait Allocations: Send + Sync + 'static {
    fn list(&self) -> impl Future<Output = Result<Vec<(String, u64)>, kube::Error>> + Send;
}

/// The cluster's Allocations, listed from the API server.
pub(crate) struct Listed(pub Client);

impl Allocations for Listed {
    async fn list(&self) -> Result<Vec<(String, u64)>, kube::Error> {
        let api: kube::Api<kube::api::DynamicObject> =
            kube::Api::all_with(self.0.clone(), &Kind::Allocation.api_resource());
        let listed = api.list(&kube::api::ListParams::default()).await?;
        Ok(listed
            .items
            .into_iter()
            .map(|a| {
                let version = resource_version(&a.metadata).unwrap_or(0);
                (a.metadata.name.unwrap_or_default(), version)
            })
            .collect())
    }
}

/// Opens the claims decision point (`open` true) when this replica starts leading, once it
/// is sure it sees every claim the previous leader decided; closes it when it stops
/// leading. `taken_over` is the point the predecessor's store had come to, as read from the
/// lease this replica took. Returns at `cancel`.
pub(crate) async fn fence_claims(
    allocations: impl Allocations,
    store: SharedStore,
    (mut leading, taken_over): (watch::Receiver<bool>, watch::Receiver<Option<SeenThrough>>),
    open: watch::Sender<bool>,
    cancel: CancellationToken,
) {
    loop {
        let now_leading = *leading.borrow_and_update();
        open.send_replace(false);
        if now_leading {
            let point = *taken_over.borrow();
            let started = tokio::time::Instant::now();
            let caught_up = tokio::select! {
                _ = cancel.cancelled() => return,
                _ = leading.changed() => continue,
                caught_up = catch_up(&allocations, &store, point) => caught_up,
            };
            open.send_replace(true);
            info!(by = ?caught_up, waited_ms = started.elapsed().as_millis() as u64,
                "deciding claims: every claim the previous leader decided is counted");
        }
        tokio::select! {
            _ = cancel.cancelled() => return,
            changed = leading.changed() => if changed.is_err() { return },
        }
    }
}

/// How a new leader came to count every claim its predecessor decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CaughtUp {
    /// Its store came as far as the predecessor's had.
    AtPredecessorsPoint,
    /// Its store held every Allocation a list showed.
    Listed,
}

/// Waits until the store has come to the predecessor's `point`, or else holds every
/// Allocation a fresh list shows (at least as new).
async fn catch_up(
    allocations: &impl Allocations,
    store: &SharedStore,
    point: Option<SeenThrough>,
) -> CaughtUp {
    let started = tokio::time::Instant::now();
    if let Some(point) = point {
        while started.elapsed() < POINT_CATCH_UP {
            if point.reached_by(&crate::locks::read(store)) {
                return CaughtUp::AtPredecessorsPoint;
            }
            tokio::time::sleep(POINT_POLL).await;
        }
        warn!(
            ?point,
            waited_s = started.elapsed().as_secs(),
            "the store has not come as far as the previous leader's; listing the Allocations instead"
        );
    }
    loop {
        let listed = match allocations.list().await {
            Ok(l) => l,
            Err(e) => {
                warn!(error = %e, "cannot list Allocations to take over claims; retrying");
                tokio::time::sleep(LIST_RETRY).await;
                continue;
            }
        };
        let listed_at = tokio::time::Instant::now();
        loop {
            let missing = not_held(store, &listed);
            if missing.is_empty() {
                return CaughtUp::Listed;
            }
            // An Allocation the store lacks may have been deleted since the list (a server
            // deleted, a consumer released): no event will bring it back, a new list leaves it
            // out. One the store holds at an older version is on its way.
            let absent = missing.iter().any(|(_, _, version)| version.is_none());
            let wait = if absent {
                ABSENT_RELIST
            } else {
                CLAIMS_CATCH_UP
            };
            if listed_at.elapsed() >= wait {
                if !absent || started.elapsed() >= SLOW_CATCH_UP {
                    warn!(count = missing.len(), first = ?missing.first(), waited_s = started.elapsed().as_secs(),
                        "the store does not hold every Allocation listed yet; listing again");
                }
                break;
            }
            tokio::time::sleep(STORE_POLL).await;
        }
    }
}

/// The listed Allocations the store does not hold at their listed version: name, listed
/// version, the store's.
fn not_held(store: &SharedStore, listed: &[(String, u64)]) -> Vec<(String, u64, Option<u64>)> {
    let store = crate::locks::read(store);
    let watched = store.watched_through(Kind::Allocation);
    listed
        .iter()
        .filter_map(|(name, want)| {
            let version = store
                .get_cluster(Kind::Allocation, name)
                .map(|o| resource_version(o.meta()).unwrap_or(0));
            // Held at its listed version or newer; or gone from a store whose watch has
            // brought every change past that version (deleted since the list), unless its
            // change waits for a write's record; or shown as a write holds it: an open write
            // of several objects (its record counted as one claim) whose own change of it has
            // not reached the API server yet, because it waits for this very fence.
            let key = ObjectKey::cluster(Kind::Allocation, name);
            let held = match version {
                Some(v) => v >= *want,
                None => watched >= *want && !store.holds_for_record(&key),
            } || store.holds_back(&key);
            (!held).then(|| (name.clone(), *want, version))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use kubeplace_api::Object;

    /// What a list answers: the Allocations by name and version, or `None` for a failure.
    type Answer = Option<Vec<(String, u64)>>;

    /// Allocations as a test sets them.
    #[derive(Clone, Default)]
    struct Fixed(Arc<Mutex<Answer>>);

    impl Allocations for Fixed {
        async fn list(&self) -> Result<Vec<(String, u64)>, kube::Error> {
            crate::locks::lock(&self.0)
                .clone()
                .ok_or_else(|| kube::Error::LinesCodecMaxLineLengthExceeded)
        }
    }

    fn allocation(name: &str, version: u64) -> Object {
        Object::from_value(
            Kind::Allocation,
            serde_json::json!({
                "apiVersion": "kubeplace.io/v1alpha1",
                "kind": "Allocation",
                "metadata": {"name": name, "resourceVersion": version.to_string()},
                "spec": {"consumer": "4f6b2b9e-0000-4000-8000-000000000001", "allocations": []},
            }),
        )
        .unwrap()
    }

    struct Running {
        store: SharedStore,
        listed: Fixed,
        leading: watch::Sender<bool>,
        taken_over: watch::Sender<Option<SeenThrough>>,
        open: watch::Receiver<bool>,
        cancel: CancellationToken,
    }

    fn start() -> Running {
        let store = SharedStore::default();
        let listed = Fixed::default();
        *crate::locks::lock(&listed.0) = Some(Vec::new());
        let (leading, leading_rx) = watch::channel(false);
        let (taken_over, taken_over_rx) = watch::channel(None);
        let (open_tx, open) = watch::channel(false);
        let cancel = CancellationToken::new();
        tokio::spawn(fence_claims(
            listed.clone(),
            store.clone(),
            (leading_rx, taken_over_rx),
            open_tx,
            cancel.clone(),
        ));
        Running {
            store,
            listed,
            leading,
            taken_over,
            open,
            cancel,
        }
    }

    /// Taking over a lease that says how far the predecessor's store had come, the new
    /// leader lists nothing: it decides once its own store has come as far.
    #[tokio::test(start_paused = true)]
    async fn a_new_leader_decides_once_its_store_comes_to_its_predecessors_point() {
        let r = start();
        // A list would fail: only the point can open the fence.
        *crate::locks::lock(&r.listed.0) = None;
        crate::locks::write(&r.store).note_watched(Kind::Allocation, 40);
        r.taken_over.send_replace(Some(SeenThrough {
            allocations: 42,
            writes: 3,
        }));
        r.leading.send_replace(true);
        pass(Duration::from_secs(1)).await;
        assert!(
            !*r.open.borrow(),
            "the store is at 40, the predecessor's at 42"
        );
        crate::locks::write(&r.store).note_watched(Kind::Allocation, 42);
        pass(Duration::from_secs(1)).await;
        assert!(
            !*r.open.borrow(),
            "its PlacementWrite records are not as far yet"
        );
        crate::locks::write(&r.store).note_watched(Kind::PlacementWrite, 5);
        pass(POINT_POLL * 2).await;
        assert!(*r.open.borrow());
        r.cancel.cancel();
    }

    /// A store that does not come to the predecessor's point soon (a relist that left out
    /// the newest object, deleted since) is judged by a list instead.
    #[tokio::test(start_paused = true)]
    async fn a_point_not_reached_soon_falls_back_to_a_list() {
        let r = start();
        *crate::locks::lock(&r.listed.0) = Some(vec![("kept".into(), 30)]);
        crate::locks::write(&r.store).put(allocation("kept", 30));
        r.taken_over.send_replace(Some(SeenThrough {
            allocations: 99,
            writes: 0,
        }));
        r.leading.send_replace(true);
        pass(POINT_CATCH_UP - Duration::from_millis(100)).await;
        assert!(!*r.open.borrow(), "still waiting for the point");
        pass(Duration::from_millis(400)).await;
        assert!(
            *r.open.borrow(),
            "the list shows the store holds every claim"
        );
        r.cancel.cancel();
    }

    /// Lets the fence's task run for `d` of (paused) time.
    async fn pass(d: Duration) {
        tokio::time::sleep(d).await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_new_leader_decides_as_soon_as_its_store_holds_what_is_listed() {
        let r = start();
        r.leading.send_replace(true);
        pass(Duration::from_millis(200)).await;
        assert!(*r.open.borrow(), "the store holds every (no) claim: open");
        r.cancel.cancel();
    }

    #[tokio::test(start_paused = true)]
    async fn the_fence_stays_closed_until_the_store_holds_each_claim_as_new_as_listed() {
        let r = start();
        *crate::locks::lock(&r.listed.0) = Some(vec![("a".into(), 7), ("b".into(), 3)]);
        crate::locks::write(&r.store).put(allocation("a", 5));
        crate::locks::write(&r.store).put(allocation("b", 3));
        r.leading.send_replace(true);
        pass(Duration::from_secs(5)).await;
        assert!(!*r.open.borrow(), "a is at 5 in the store, listed at 7");
        crate::locks::write(&r.store).put(allocation("a", 7));
        pass(Duration::from_millis(200)).await;
        assert!(*r.open.borrow());
        r.cancel.cancel();
    }

    /// A write of this replica holds a claim whose new version waits for this fence: the
    /// store shows the write's decision, and the fence opens (else each waits for the other).
    #[tokio::test(start_paused = true)]
    async fn a_claim_a_write_here_holds_counts_as_held() {
        let r = start();
        *crate::locks::lock(&r.listed.0) = Some(vec![("moved".into(), 7)]);
        crate::locks::write(&r.store).put(allocation("moved", 5));
        r.leading.send_replace(true);
        pass(Duration::from_secs(5)).await;
        assert!(!*r.open.borrow(), "moved is at 5 in the store, listed at 7");
        let key = ObjectKey::cluster(Kind::Allocation, "moved");
        let before = allocation("moved", 5);
        crate::locks::write(&r.store).hold_decided([(&key, Some(&before))]);
        pass(Duration::from_millis(200)).await;
        assert!(
            *r.open.borrow(),
            "the write that holds it is counted as its claim"
        );
        r.cancel.cancel();
    }

    /// An Allocation listed and deleted before the store saw it never arrives: a new list,
    /// within a second or two, leaves it out.
    #[tokio::test(start_paused = true)]
    async fn an_allocation_deleted_since_the_list_is_listed_again_soon() {
        let r = start();
        *crate::locks::lock(&r.listed.0) = Some(vec![("gone".into(), 4)]);
        r.leading.send_replace(true);
        pass(Duration::from_millis(300)).await;
        assert!(!*r.open.borrow(), "listed, and not in the store");
        *crate::locks::lock(&r.listed.0) = Some(Vec::new());
        pass(ABSENT_RELIST + Duration::from_millis(300)).await;
        assert!(*r.open.borrow(), "the next list leaves it out");
        r.cancel.cancel();
    }

    /// Once the store's watch has brought a change newer than an absent Allocation's listed
    /// version, its deletion was among them: nothing is waited for, no list is needed.
    #[tokio::test(start_paused = true)]
    async fn an_allocation_the_watch_has_seen_deleted_is_not_waited_for() {
        let r = start();
        *crate::locks::lock(&r.listed.0) = Some(vec![("gone".into(), 4), ("kept".into(), 6)]);
        crate::locks::write(&r.store).put(allocation("kept", 6));
        crate::locks::write(&r.store).note_watched(Kind::Allocation, 3);
        r.leading.send_replace(true);
        pass(Duration::from_millis(300)).await;
        assert!(
            !*r.open.borrow(),
            "the watch is behind the listed version: it may yet bring it"
        );
        crate::locks::write(&r.store).note_watched(Kind::Allocation, 5);
        pass(Duration::from_millis(200)).await;
        assert!(*r.open.borrow(), "the watch is past it: it was deleted");
        r.cancel.cancel();
    }

    /// An absent Allocation whose change waits for a write's record is waited for, however
    /// far the watch has gone: the store does not count it yet.
    #[tokio::test(start_paused = true)]
    async fn an_allocation_held_for_a_write_record_is_waited_for() {
        let r = start();
        *crate::locks::lock(&r.listed.0) = Some(vec![("marked".into(), 4)]);
        let mut marked = allocation("marked", 4);
        let mark = kubeplace_policy::store::writes::write_name(std::time::SystemTime::now(), 7);
        marked.meta_mut().annotations =
            Some([(kubeplace_api::WRITE_ANNOTATION.to_string(), mark)].into());
        {
            let mut store = crate::locks::write(&r.store);
            store.apply_changes([kubeplace_policy::store::Change::Put(Box::new(
                marked.clone(),
            ))]);
            store.note_watched(Kind::Allocation, 9);
            assert!(store.holds_for_record(&ObjectKey::cluster(Kind::Allocation, "marked")));
        }
        r.leading.send_replace(true);
        pass(Duration::from_millis(300)).await;
        assert!(!*r.open.borrow(), "held for its record: not counted yet");
        crate::locks::write(&r.store).put(allocation("marked", 4));
        pass(Duration::from_millis(200)).await;
        assert!(*r.open.borrow());
        r.cancel.cancel();
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_list_is_tried_again() {
        let r = start();
        *crate::locks::lock(&r.listed.0) = None;
        r.leading.send_replace(true);
        pass(Duration::from_secs(3)).await;
        assert!(!*r.open.borrow(), "nothing listed: nothing known");
        *crate::locks::lock(&r.listed.0) = Some(vec![]);
        pass(LIST_RETRY * 2).await;
        assert!(*r.open.borrow());
        r.cancel.cancel();
    }

    #[tokio::test(start_paused = true)]
    async fn losing_the_lead_closes_the_fence_and_leading_again_waits_again() {
        let r = start();
        r.leading.send_replace(true);
        pass(Duration::from_millis(200)).await;
        assert!(*r.open.borrow());
        r.leading.send_replace(false);
        pass(Duration::from_millis(10)).await;
        assert!(!*r.open.borrow(), "a follower decides no claim");
        // Leading again, it lists again: a claim listed that the store lacks keeps it closed.
        *crate::locks::lock(&r.listed.0) = Some(vec![("late".into(), 9)]);
        r.leading.send_replace(true);
        pass(Duration::from_secs(5)).await;
        assert!(!*r.open.borrow());
        crate::locks::write(&r.store).put(allocation("late", 9));
        pass(Duration::from_millis(200)).await;
        assert!(*r.open.borrow());
        r.cancel.cancel();
    }
}
