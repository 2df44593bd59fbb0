//! The served API's state and its one point of decision: the store it answers from, the book
//! beside it, who may call it and where writes are committed. Reads share the state; writes
//! are decided one at a time, each seeing every earlier one, and what a failed or panicking
//! write changed is undone before anyone reads it.

use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use crate::cache::SharedStore;
use crate::cluster_writer::Cluster;
use crate::cluster_writer::in_flight;
use crate::metrics::PlacementMetrics;
use crate::placement_api::auth::Auth;
use crate::placement_api::cors::Cors;
use crate::placement_api::origin::Origin;
use crate::placement_api::request::intake;
use crate::placement_api::request::searches::{SearchLimits, Searches};
use crate::placement_api::request::wire::{self, ApiError};
use crate::placement_api::{kept_answers, panics};
use kubeplace_core::placement::candidates::choice::Choosing;
use kubeplace_core::placement::weighers::Weighers;
use kubeplace_policy::claims::Ledger;
use kubeplace_policy::placement_records::{Backing, Book, Guard, Journal, State};
use kubeplace_policy::status::Reach;
use kubeplace_policy::store::Store;

/// Whether an API can still vouch for its state. It stops being sound, for good, when an
/// internal error left a change it could not undo (or a lock poisoned by someone else); it
/// then answers every request but `GET /` with a 503. Clones share the flag, so that what
/// runs beside the API (the operator's `/readyz`) can read it.
#[derive(Debug, Clone)]
pub struct Soundness(Arc<AtomicBool>);

impl Default for Soundness {
    fn default() -> Self {
        Soundness(Arc::new(AtomicBool::new(true)))
    }
}

impl Soundness {
    /// A flag of its own, sound.
    pub fn new() -> Soundness {
        Soundness::default()
    }

    /// Whether the API still answers from a state it can vouch for.
    pub fn is_sound(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    fn lose(&self) -> bool {
        self.0.swap(false, Ordering::AcqRel)
    }
}

/// The served API: the store it answers from, the book beside it, who may call it, and
/// where writes are committed.
pub struct PlacementApi {
    pub(crate) store: SharedStore,
    /// How the scheduler weighs candidates, for the headroom `/kubeplace/headroom` counts.
    pub(crate) weighers: Weighers,
    pub(crate) book: RwLock<Book>,
    pub(crate) backing: Backing,
    pub(crate) auth: Auth,
    pub(crate) cluster: Option<Cluster>,
    /// Held by a write while it is decided: the API's writes on one server are decided one
    /// at a time. It guards no data, so a panic while it was held leaves nothing to repair.
    pub(crate) writes: Mutex<()>,
    /// Writes decided and being committed to the cluster.
    pub(crate) in_flight: in_flight::InFlight,
    /// Taken by readers before the state, and by a write from its first change until a failed
    /// write is undone: no reader of the API sees a write that did not happen. It guards no
    /// data either.
    pub(crate) gate: RwLock<()>,
    pub(crate) requests: AtomicU64,
    pub(crate) soundness: Soundness,
    pub(crate) searches: Searches,
    pub(crate) bodies: intake::BodyRoom,
    /// Called after a write reached the cluster, with the statuses it can move. The write
    /// is already in the store when the watch brings it back, so the watch sees nothing
    /// new: this is how the status writer learns what to look at.
    pub(crate) committed: Option<Box<dyn Fn(Reach) + Send + Sync>>,
    /// The admission webhook's claims ledger on this replica: the API's claims are decided
    /// beside the claims it admitted that the store does not show yet. Taken before the
    /// store's lock, as the webhook takes them.
    pub(crate) ledger: Option<Arc<Mutex<Ledger>>>,
    /// Whole answers kept for the index they were made from.
    pub(crate) answers: Arc<kept_answers::Answers>,
    /// What its serving layer counts: requests, latency, searches refused and queued.
    pub(crate) metrics: Arc<PlacementMetrics>,
    /// How it chooses among the candidates found (Placement's `[placement]` options).
    pub(crate) choosing: Choosing,
    /// Which other origins' pages may call it (off unless an origin is allowed).
    pub(crate) cors: Arc<Cors>,
    /// How callers reach it: the scheme and host of the URLs it answers with.
    pub(crate) origin: Origin,
}

impl PlacementApi {
    /// An API over a store of its own (seeded from manifests, or empty), accepting `token`.
    pub fn new(mut store: Store, token: String) -> PlacementApi {
        let book = Book::new(&store, Backing::Memory);
        book.order_traits_of(&mut store);
        panics::note_panics_of_requests();
        PlacementApi {
            store: Arc::new(RwLock::new(store)),
            weighers: Weighers::default(),
            book: RwLock::new(book),
            backing: Backing::Memory,
            auth: Auth::Token(token),
            cluster: None,
            writes: Mutex::new(()),
            in_flight: in_flight::InFlight::default(),
            gate: RwLock::new(()),
            requests: AtomicU64::new(0),
            soundness: Soundness::new(),
            searches: Searches::new(SearchLimits::default()),
            bodies: intake::BodyRoom::new(intake::BODIES_IN_FLIGHT),
            committed: None,
            ledger: None,
            answers: Arc::new(kept_answers::Answers::new()),
            metrics: Arc::default(),
            choosing: Choosing::default(),
            cors: Arc::default(),
            origin: Origin::default(),
        }
    }

    /// An API over the operator's watched store, committing writes to the cluster. Give it
    /// the flag the operator's `/readyz` reads with [`PlacementApi::reporting_to`].
    pub fn over_cluster(store: SharedStore, cluster: Cluster, auth: Auth) -> PlacementApi {
        let book = match store.write() {
            Ok(mut s) => {
                let book = Book::new(&s, Backing::Cluster);
                book.order_traits_of(&mut s);
                book
            }
            Err(_) => Book::default(),
        };
        panics::note_panics_of_requests();
        PlacementApi {
            store,
            weighers: Weighers::default(),
            book: RwLock::new(book),
            backing: Backing::Cluster,
            auth,
            cluster: Some(cluster),
            writes: Mutex::new(()),
            in_flight: in_flight::InFlight::default(),
            gate: RwLock::new(()),
            requests: AtomicU64::new(0),
            soundness: Soundness::new(),
            searches: Searches::new(SearchLimits::default()),
            bodies: intake::BodyRoom::new(intake::BODIES_IN_FLIGHT),
            committed: None,
            ledger: None,
            answers: Arc::new(kept_answers::Answers::new()),
            metrics: Arc::default(),
            choosing: Choosing::default(),
            cors: Arc::default(),
            origin: Origin::default(),
        }
    }

    /// Checks callers with `auth` instead.
    pub fn authenticating_with(mut self, auth: Auth) -> PlacementApi {
        self.auth = auth;
        self
    }

    /// Counts headroom weighing candidates by `weighers`, as the scheduler does.
    pub fn weighing_by(mut self, weighers: Weighers) -> PlacementApi {
        self.weighers = weighers;
        self
    }

    /// Chooses among the candidates found as Placement's `[placement]` options say.
    pub fn choosing_candidates(mut self, choosing: Choosing) -> PlacementApi {
        self.choosing = choosing;
        self
    }

    /// Answers cross-origin requests as these settings say.
    pub fn allowing_origins(mut self, cors: Cors) -> PlacementApi {
        self.cors = Arc::new(cors);
        self
    }

    /// Answers with URLs as callers reach it through `origin` (its scheme, and whether a
    /// proxy's headers are believed).
    pub fn served_as(mut self, origin: Origin) -> PlacementApi {
        self.origin = origin;
        self
    }

    /// Bounds the searches run at once, queued, and their deadline (see [`SearchLimits`]).
    pub fn limiting_searches(mut self, limits: SearchLimits) -> PlacementApi {
        self.searches = Searches::new(limits);
        self
    }

    /// Calls `f` after each write that reached the cluster, with the statuses it can move.
    pub fn on_commit(mut self, f: impl Fn(Reach) + Send + Sync + 'static) -> PlacementApi {
        self.committed = Some(Box::new(f));
        self
    }

    /// Decides the API's claims beside `ledger`, the admission webhook's on this replica.
    pub fn deciding_beside(mut self, ledger: Arc<Mutex<Ledger>>) -> PlacementApi {
        self.ledger = Some(ledger);
        self
    }

    /// Counts its requests and searches into `metrics` (the operator's, registered).
    pub fn measured_by(mut self, metrics: PlacementMetrics) -> PlacementApi {
        self.metrics = Arc::new(metrics);
        self
    }

    /// Reports soundness to `soundness` instead.
    pub fn reporting_to(mut self, soundness: Soundness) -> PlacementApi {
        self.soundness = soundness;
        self
    }

    /// Whether the API answers from a state it can vouch for (see [`Soundness`]).
    pub fn healthy(&self) -> bool {
        self.soundness.is_sound()
    }

    /// The flag [`PlacementApi::healthy`] reads, shared.
    pub fn soundness(&self) -> Soundness {
        self.soundness.clone()
    }

    /// Brings the custom trait and class registries up to date with the cluster: those
    /// kept by the cluster (created by any replica) and those the watched objects use.
    pub fn refresh_registries(&self) -> Result<(), String> {
        // A write that changes the registries while they are read saves its change after
        // this read: what was read is then older than the book, and only learning follows.
        let epoch = self
            .book
            .read()
            .map_err(|_| self.lose_soundness("the book's lock is poisoned").detail)?
            .registry_epoch();
        let kept = match &self.cluster {
            Some(c) => Some(c.load_registries()?),
            None => None,
        };
        // The book before the store, as every request takes them.
        let mut book = self
            .book
            .write()
            .map_err(|_| self.lose_soundness("the book's lock is poisoned").detail)?;
        let poisoned = || self.lose_soundness("the store's lock is poisoned").detail;
        let store = self.store.read().map_err(|_| poisoned())?;
        if let Some((traits, classes)) = kept
            && book.may_set_registries(epoch)
        {
            book.set_registries(traits, classes);
        }
        book.learn_registries(&store);
        // The store is written only when the order of traits changed (rarely: a trait
        // created or deleted), so a re-read holds up no admission.
        let rows = book.trait_rows();
        if *store.index().trait_rows() != rows {
            drop(store);
            self.store
                .write()
                .map_err(|_| poisoned())?
                .set_trait_rows(rows);
        }
        Ok(())
    }
    /// A request id in Placement's form, new for each request.
    pub(crate) fn next_request_id(&self) -> String {
        wire::request_id(self.requests.fetch_add(1, Ordering::Relaxed))
    }

    /// What an internal error that cannot be undone does, for the tests of what reads the flag.
    #[cfg(test)]
    pub(crate) fn stop_answering_for_test(&self) {
        let _ = self.lose_soundness("a test stopped it");
    }

    /// Marks the API unsound, logging why the first time; the error every request gets then.
    pub(crate) fn lose_soundness(&self, why: &str) -> ApiError {
        if self.soundness.lose() {
            tracing::error!(
                reason = why,
                "the Placement API stops answering: its state may not be what its requests left; restart the server"
            );
        }
        ApiError::unsound()
    }

    /// Runs `f` over the state for reading. A panic in `f` poisons nothing: only a writer's
    /// guard poisons a lock.
    pub(crate) fn read<T>(
        &self,
        f: impl FnOnce(&State<'_>) -> Result<T, ApiError>,
    ) -> Result<T, ApiError> {
        let _gate = self.gate.read().unwrap_or_else(PoisonError::into_inner);
        let book = self
            .book
            .read()
            .map_err(|_| self.lose_soundness("the book's lock is poisoned"))?;
        let store = self
            .store
            .read()
            .map_err(|_| self.lose_soundness("the store's lock is poisoned"))?;
        let state = State::new(Guard::Read(store), Guard::Read(book), self.backing);
        f(&state)
    }

    /// Runs `f` over the state alone, then commits what it changed to the cluster (when
    /// there is one). Writes are decided one at a time, each seeing every earlier one; their
    /// commits run side by side ([`in_flight`]): a write whose decision rests on one still
    /// being committed is taken back, waits for it and is decided again, so `f` may run more
    /// than once. A write that fails, here or in the cluster, or panics, leaves the state as
    /// it was; a panic goes on to [`PlacementApi::guarded`] once it is undone.
    pub(crate) fn write<T>(
        &self,
        f: impl Fn(&mut State<'_>) -> Result<T, ApiError>,
    ) -> Result<T, ApiError> {
        let Some(cluster) = &self.cluster else {
            let _serial = self.writes.lock().unwrap_or_else(PoisonError::into_inner);
            // Alone, the API decides every claim itself.
            return match self.decide(&f) {
                Ok((value, journal)) => {
                    if let Some(kind) = claimed(&journal) {
                        self.metrics.claims.claim(kind, None);
                    }
                    Ok(value)
                }
                Err(e) => Err(self.counted_refusal(e)),
            };
        };
        let waiting_since = std::time::Instant::now();
        let (value, journal, _ticket) = loop {
            let serial = self.writes.lock().unwrap_or_else(PoisonError::into_inner);
            let (value, journal) = match self.decide(&f) {
                Ok(decided) => decided,
                // An object another replica's write of several objects holds: decided
                // again once that write is finished, for a while.
                Err(e) if e.held.is_some() && waiting_since.elapsed() < HELD_WAIT => {
                    drop(serial);
                    if let Some(key) = &e.held {
                        self.wait_until_free(key, waiting_since + HELD_WAIT);
                    }
                    continue;
                }
                // Refused here, the claim never reaches the webhook: counted here. One
                // allowed is counted where the webhook decides it.
                Err(e) => return Err(self.counted_refusal(e)),
            };
            match self.in_flight.enter(journal.footprint()) {
                Ok(ticket) => break (value, journal, ticket),
                Err(earlier) => {
                    self.undo_or_lose(&journal)?;
                    drop(serial);
                    self.in_flight.wait_for(&earlier);
                }
            }
        };
        let committed = panic::catch_unwind(AssertUnwindSafe(|| {
            cluster.commit(&journal.changes).and_then(|written| {
                if !journal.registry_changes.is_empty() {
                    cluster.save_registry_changes(&journal.registry_changes)?;
                }
                Ok(written)
            })
        }));
        match committed {
            Ok(Ok(committed)) => {
                // Read-your-writes: the objects as the API server stored them (resource
                // version, uid, generation) replace the ones decided here, unless the
                // watch already brought something newer.
                let mut store = self
                    .store
                    .write()
                    .map_err(|_| self.lose_soundness("the store's lock is poisoned"))?;
                if let Some(write) = &committed.finished_write {
                    store.close_finished_write(write);
                }
                for object in committed.objects {
                    put_unless_older(&mut store, object);
                }
                if journal.decided_held {
                    store.release_decided(journal.changes.iter().map(|(key, _, _)| key));
                }
                // The statuses the write can move: what the watch would have found, had its
                // events not come after the write was already in the store.
                let reach = journal_reach(&store, &journal);
                drop(store);
                if !journal.registry_changes.is_empty() {
                    self.book
                        .write()
                        .map_err(|_| self.lose_soundness("the book's lock is poisoned"))?
                        .registry_settled();
                }
                self.report(reach);
                Ok(value)
            }
            Ok(Err(e)) => {
                self.undo_or_lose(&journal)?;
                // The events held back meanwhile may have brought what made the write
                // fail (another writer's change): the objects are read again.
                self.read_back(cluster, &journal)?;
                // A status reconciled while the store showed the decision (a quota's usage,
                // say) is reconciled again now that it is undone.
                let store = self
                    .store
                    .read()
                    .map_err(|_| self.lose_soundness("the store's lock is poisoned"))?;
                let reach = journal_reach(&store, &journal);
                drop(store);
                self.report(reach);
                Err(e.into())
            }
            Err(panic) => {
                let _ = self.undo_or_lose(&journal);
                let _ = self.read_back(cluster, &journal);
                panic::resume_unwind(panic);
            }
        }
    }

    /// Counts a claim refused before it was written, then gives the error back.
    fn counted_refusal(&self, e: ApiError) -> ApiError {
        if let Some(refusal) = e.refused_claim {
            self.metrics.claims.claim("Allocation", Some(refusal));
        }
        e
    }

    /// Asks for the statuses a write reached to be reconciled (over a cluster).
    fn report(&self, reach: Reach) {
        if let Some(committed) = &self.committed
            && !reach.is_empty()
        {
            committed(reach);
        }
    }

    /// Puts the objects of an undone write in the store as the API server has them now,
    /// where the store has nothing newer.
    fn read_back(&self, cluster: &Cluster, journal: &Journal) -> Result<(), ApiError> {
        if !journal.decided_held {
            return Ok(());
        }
        let keys: Vec<_> = journal
            .changes
            .iter()
            .map(|(key, _, _)| key.clone())
            .collect();
        let found = cluster.read_back(&keys);
        let mut store = self
            .store
            .write()
            .map_err(|_| self.lose_soundness("the store's lock is poisoned"))?;
        for (key, current) in found {
            match current {
                Some(object) => put_unless_older(&mut store, object),
                None => {
                    store.delete(&key);
                }
            }
        }
        Ok(())
    }

    /// Waits until no write of several objects holds `key` in the store, or `deadline`.
    fn wait_until_free(
        &self,
        key: &kubeplace_policy::store::ObjectKey,
        deadline: std::time::Instant,
    ) {
        while std::time::Instant::now() < deadline {
            let free = self
                .store
                .read()
                .map(|s| s.write_on(key).is_none())
                .unwrap_or(true);
            if free {
                return;
            }
            std::thread::sleep(HELD_POLL);
        }
    }

    /// Decides a write: runs `f` over the state alone and records the generations it
    /// moved; what it changed, or nothing changed when it fails or panics.
    fn decide<T>(
        &self,
        f: &impl Fn(&mut State<'_>) -> Result<T, ApiError>,
    ) -> Result<(T, Journal), ApiError> {
        let gate = self.gate.write().unwrap_or_else(PoisonError::into_inner);
        let mut ledger = self
            .ledger
            .as_ref()
            .map(|l| l.lock().unwrap_or_else(PoisonError::into_inner));
        let (decided, journal) = {
            let book = self
                .book
                .write()
                .map_err(|_| self.lose_soundness("the book's lock is poisoned"))?;
            let store = self
                .store
                .write()
                .map_err(|_| self.lose_soundness("the store's lock is poisoned"))?;
            let mut state = State::new(Guard::Write(store), Guard::Write(book), self.backing);
            if let Some(ledger) = ledger.as_deref_mut() {
                state = state.beside_ledger(ledger);
            }
            // The guards live in `state`, outside the closure: a panic in `f` is caught
            // before they are dropped, so it poisons no lock, and the journal of what `f`
            // changed is still there to undo it.
            let decided = panic::catch_unwind(AssertUnwindSafe(|| {
                let value = f(&mut state)?;
                state.record_generations()?;
                state.hold_until_committed()?;
                Ok(value)
            }));
            (decided, state.into_journal())
        };
        match decided {
            Ok(Ok(v)) => Ok((v, journal)),
            Ok(Err(e)) => {
                self.undo_or_lose(&journal)?;
                Err(e)
            }
            Err(panic) => {
                // Undone or not, the panic is what the request answers with; the ledger
                // and the gate are let go first, so neither is poisoned by it.
                let _ = self.undo_or_lose(&journal);
                drop(ledger);
                drop(gate);
                panic::resume_unwind(panic);
            }
        }
    }

    /// [`PlacementApi::undo`], or the API marked unsound when it cannot be done.
    pub(crate) fn undo_or_lose(&self, journal: &Journal) -> Result<(), ApiError> {
        match panic::catch_unwind(AssertUnwindSafe(|| self.undo(journal))) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => {
                Err(self
                    .lose_soundness(&format!("a failed write could not be undone: {}", e.detail)))
            }
            Err(payload) => Err(self.lose_soundness(&format!(
                "undoing a failed write panicked: {}",
                panics::panic_message(payload.as_ref())
            ))),
        }
    }

    /// Puts back what a failed write changed, where nothing else changed it since.
    fn undo(&self, journal: &Journal) -> Result<(), ApiError> {
        if journal.changes.is_empty()
            && journal.generations_before.is_empty()
            && journal.consumers_before.is_empty()
            && journal.registry_changes.is_empty()
        {
            return Ok(());
        }
        let mut book = self
            .book
            .write()
            .map_err(|_| self.lose_soundness("the book's lock is poisoned"))?;
        let undone: Vec<_> = journal.registry_changes.iter().rev().cloned().collect();
        book.apply_registry_changes(&undone, true);
        if !undone.is_empty() && self.backing == Backing::Cluster {
            book.registry_settled();
        }
        let mut store = self
            .store
            .write()
            .map_err(|_| self.lose_soundness("the store's lock is poisoned"))?;
        book.order_traits_of(&mut store);
        let mut state = State::new(Guard::Write(store), Guard::Write(book), self.backing);
        state.restore_generations(&journal.generations_before)?;
        state.restore_consumers(&journal.consumers_before)?;
        if journal.decided_held {
            state.release_decided(journal.changes.iter().map(|(key, _, _)| key))?;
        }
        for (key, before, after) in journal.changes.iter().rev() {
            if state.store().get(key) != after.as_ref() {
                continue;
            }
            match before {
                Some(o) => state.put(o.clone())?,
                None => {
                    state.delete(key)?;
                }
            }
        }
        Ok(())
    }
}

/// Puts an object as the API server has it in the store, unless the store holds it at the
/// same resourceVersion or a later one (the watch brought something newer).
/// The statuses a write's changes reach, made or undone alike.
fn journal_reach(store: &Store, journal: &Journal) -> Reach {
    let mut reach = Reach::default();
    for (_, before, after) in &journal.changes {
        reach.add(Reach::of_change(store, before.as_ref(), after.as_ref()));
    }
    reach
}

fn put_unless_older(store: &mut Store, object: kubeplace_api::Object) {
    let key = kubeplace_policy::store::ObjectKey::of(&object);
    let newer = store
        .get(&key)
        .is_some_and(|o| kubeplace_policy::store::newer_or_same(o, &object));
    if !newer {
        store.put(object);
    }
}

/// How long a write waits for an object another write holds before it is answered 409.
const HELD_WAIT: std::time::Duration = std::time::Duration::from_secs(8);
/// How often it looks.
const HELD_POLL: std::time::Duration = std::time::Duration::from_millis(5);

/// The kind of claim a decided write made, if it made one: an Allocation made or replaced
/// (one deleted claims nothing).
fn claimed(journal: &Journal) -> Option<&'static str> {
    journal
        .changes
        .iter()
        .any(|(key, _, after)| key.kind == kubeplace_api::Kind::Allocation && after.is_some())
        .then_some("Allocation")
}
