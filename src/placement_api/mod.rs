//! Placement's REST API (OpenStack Placement 16, microversions 1.0–1.39) served from
//! kubeplace's in-memory store: `kubeplace placement serve`.
//!
//! A request's token is checked from its headers first; only then is its body read (with a
//! size limit and a deadline), and the request answered synchronously under one lock around
//! the [`State`]: reads share it, writes take it alone, so every write (and every claim) is
//! decided at one serialized point that sees every earlier one. A request that fails on an
//! internal error (a panic) fails alone: what it changed is undone under the same lock, it
//! gets a 500 whose body says nothing of the fault, and the next request is answered as if it
//! had not been sent. Kubeplace objects are
//! written through `kubeplace_policy::admission`, so the API, `kubeplace apply` and the
//! webhook hold the same capacity and validity rules. docs/placement-api.md lists what is
//! served and every difference from Placement.

mod accept;
mod allocations;
mod auth;
mod body;
mod classes;
pub(crate) mod cluster;
mod extensions;
mod in_flight;
mod in_place;
mod intake;
mod inventories;
mod kept_answers;
pub mod keystone;
pub mod policy;
mod providers;
mod remembered;
mod reshaper;
mod router;
mod routes;
mod searches;
mod traits;
mod version;
mod whole_writes;
mod wire;

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock};

use bytes::Bytes;
use http::{HeaderMap, Method, Request};
use hyper::body::Incoming;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::cache::SharedStore;
use kubeplace_core::placement::weighers::Weighers;
use kubeplace_policy::claims::Ledger;
use kubeplace_policy::status::Reach;
use kubeplace_policy::store::Store;

use auth::Caller;
pub use auth::{Auth, KubernetesAuth};
pub use cluster::Cluster;
pub(crate) use inventories::inventory_json;
pub use keystone::KeystoneAuth;
use kubeplace_core::placement::candidates::Stop;
pub use kubeplace_policy::placement_records::{
    Backing, Book, CONSUMER_TYPE_ANNOTATION, PROJECT_ANNOTATION, USER_ANNOTATION,
};
use kubeplace_policy::placement_records::{Guard, Journal, State};
pub use searches::{DEFAULT_DEADLINE as DEFAULT_SEARCH_DEADLINE, SearchLimits};
use searches::{Searches, StopOnDrop};
pub use wire::ReplyBody;
use wire::{ApiError, Reply};

/// A request, read whole: what the handlers see.
pub(crate) struct Call {
    pub method: Method,
    pub path: String,
    pub query: String,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// Asked for when the request is cancelled or runs past its deadline: a search stops.
    pub stop: Stop,
    /// Who sent it, as its token says: what Placement's policies judge.
    pub caller: Caller,
    /// Set while it is tried on the thread that read it ([`in_place`]).
    pub in_place: in_place::InPlace,
}

impl Call {
    fn new(parts: http::request::Parts, body: Bytes, caller: Caller) -> Call {
        Call {
            method: parts.method,
            path: parts.uri.path().to_string(),
            query: parts.uri.query().unwrap_or("").to_string(),
            headers: parts.headers,
            body,
            stop: Stop::new(),
            caller,
            in_place: in_place::InPlace::default(),
        }
    }
}

/// What a handler knows about the request besides its body.
#[derive(Debug, Clone)]
pub(crate) struct Ctx {
    pub mv: version::Version,
    pub request_id: String,
}

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
    store: SharedStore,
    /// How the scheduler weighs candidates, for the headroom `/kubeplace/headroom` counts.
    weighers: Weighers,
    book: RwLock<Book>,
    backing: Backing,
    auth: Auth,
    cluster: Option<Cluster>,
    /// Held by a write while it is decided: the API's writes on one server are decided one
    /// at a time. It guards no data, so a panic while it was held leaves nothing to repair.
    writes: Mutex<()>,
    /// Writes decided and being committed to the cluster.
    in_flight: in_flight::InFlight,
    /// Taken by readers before the state, and by a write from its first change until a failed
    /// write is undone: no reader of the API sees a write that did not happen. It guards no
    /// data either.
    gate: RwLock<()>,
    requests: AtomicU64,
    soundness: Soundness,
    searches: Searches,
    bodies: intake::BodyRoom,
    /// Called after a write reached the cluster, with the statuses it can move. The write
    /// is already in the store when the watch brings it back, so the watch sees nothing
    /// new: this is how the status writer learns what to look at.
    committed: Option<Box<dyn Fn(Reach) + Send + Sync>>,
    /// The admission webhook's claims ledger on this replica: the API's claims are decided
    /// beside the claims it admitted that the store does not show yet. Taken before the
    /// store's lock, as the webhook takes them.
    ledger: Option<Arc<Mutex<Ledger>>>,
    /// Whole answers kept for the index they were made from.
    answers: Arc<kept_answers::Answers>,
}

impl PlacementApi {
    /// An API over a store of its own (seeded from manifests, or empty), accepting `token`.
    pub fn new(store: Store, token: String) -> PlacementApi {
        let book = Book::new(&store, Backing::Memory);
        note_panics_of_requests();
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
        }
    }

    /// An API over the operator's watched store, committing writes to the cluster. Give it
    /// the flag the operator's `/readyz` reads with [`PlacementApi::reporting_to`].
    pub fn over_cluster(store: SharedStore, cluster: Cluster, auth: Auth) -> PlacementApi {
        let book = match store.read() {
            Ok(s) => Book::new(&s, Backing::Cluster),
            Err(_) => Book::default(),
        };
        note_panics_of_requests();
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
        let store = self
            .store
            .read()
            .map_err(|_| self.lose_soundness("the store's lock is poisoned").detail)?;
        if let Some((traits, classes)) = kept
            && book.may_set_registries(epoch)
        {
            book.set_registries(traits, classes);
        }
        book.learn_registries(&store);
        Ok(())
    }

    /// Answers one request whose body has been read whole: what the server does with every
    /// request once it is read, usable without a listener. The token is checked here.
    pub fn answer_request(&self, request: Request<Bytes>) -> http::Response<ReplyBody> {
        let request_id = self.next_request_id();
        let (parts, body) = request.into_parts();
        let caller = if needs_token(&parts.method, parts.uri.path()) {
            match self.auth.check(&parts.method, &parts.headers) {
                Ok(caller) => caller,
                Err(refused) => return refused.reply(&request_id, &parts.headers),
            }
        } else {
            Caller::Unrestricted
        };
        self.answer(&Call::new(parts, body, caller), request_id)
    }

    /// What the server answers a request from its headers alone, before any of its body is
    /// read (its token, then its version, route, method, media type and the caller's policy):
    /// `None` when the body must be read to answer. Whatever it answers is what the request
    /// would be answered once read whole.
    pub fn answer_from_headers(
        &self,
        parts: &http::request::Parts,
    ) -> Option<http::Response<ReplyBody>> {
        let request_id = self.next_request_id();
        let caller = if needs_token(&parts.method, parts.uri.path()) {
            match self.auth.check(&parts.method, &parts.headers) {
                Ok(caller) => caller,
                Err(refused) => return Some(refused.reply(&request_id, &parts.headers)),
            }
        } else {
            Caller::Unrestricted
        };
        let call = Call::new(parts.clone(), Bytes::new(), caller);
        self.refusal_before_body(&call, &request_id)
    }

    /// A request id in Placement's form, new for each request.
    fn next_request_id(&self) -> String {
        wire::request_id(self.requests.fetch_add(1, Ordering::Relaxed))
    }

    /// Answers one request, read whole, whose caller was checked.
    pub(crate) fn answer(&self, call: &Call, request_id: String) -> Reply {
        accept::error_for(&call.headers, self.answer_json(call, request_id))
    }

    fn answer_json(&self, call: &Call, request_id: String) -> Reply {
        let ctx = match context(call, request_id) {
            Ok(ctx) => ctx,
            Err(reply) => return *reply,
        };
        if is_discovery(&call.method, &call.path) {
            return wire::finish(&ctx, version::discovery());
        }
        if !self.healthy() {
            return wire::error(&ctx, ApiError::unsound());
        }
        self.guarded(&ctx, call, || router::route(self, &ctx, call))
    }

    /// The answer to a request whose body is not read yet, when its headers decide it: a
    /// refusal of its version, route, method, media type or caller, exactly as it would be
    /// answered once the body is read. `None` when the body must be read first.
    fn refusal_before_body(&self, call: &Call, request_id: &str) -> Option<Reply> {
        let refused = match context(call, request_id.to_string()) {
            Err(reply) => *reply,
            Ok(_) if is_discovery(&call.method, &call.path) || !self.healthy() => return None,
            Ok(ctx) => match router::gate(&ctx, call) {
                Ok(()) => return None,
                Err(e) => wire::error(&ctx, e),
            },
        };
        Some(accept::error_for(&call.headers, refused))
    }

    /// Runs a request's work so that a panic in it fails that request alone: what a write
    /// changed was undone before the panic got here ([`PlacementApi::write`]); the panic's
    /// text and the request are logged under the request id, and the answer is a 500 with a
    /// fixed detail.
    fn guarded(
        &self,
        ctx: &Ctx,
        call: &Call,
        work: impl FnOnce() -> Result<Reply, ApiError>,
    ) -> Reply {
        let answered = {
            let _noting = Noting::start();
            panic::catch_unwind(AssertUnwindSafe(work))
        };
        match answered {
            Ok(Ok(reply)) => wire::finish(ctx, reply),
            Ok(Err(e)) => wire::error(ctx, e),
            Err(payload) => {
                let notes = Noting::take();
                let what = if notes.is_empty() {
                    panic_message(payload.as_ref())
                } else {
                    notes.join("; then ")
                };
                tracing::error!(
                    request_id = %ctx.request_id,
                    method = %call.method,
                    path = %call.path,
                    query = %call.query,
                    body_bytes = call.body.len(),
                    body = %body_excerpt(&call.body),
                    panic = %what,
                    "a Placement API request failed on an internal error; what it changed was undone"
                );
                // A lock a panic left poisoned means a change that was not undone.
                if self.book.is_poisoned() || self.store.is_poisoned() {
                    self.lose_soundness("a panic left the state's lock poisoned");
                }
                wire::error(ctx, ApiError::internal())
            }
        }
    }

    /// What an internal error that cannot be undone does, for the tests of what reads the flag.
    #[cfg(test)]
    pub(crate) fn stop_answering_for_test(&self) {
        let _ = self.lose_soundness("a test stopped it");
    }

    /// Marks the API unsound, logging why the first time; the error every request gets then.
    fn lose_soundness(&self, why: &str) -> ApiError {
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
    fn read<T>(&self, f: impl FnOnce(&State<'_>) -> Result<T, ApiError>) -> Result<T, ApiError> {
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
    fn write<T>(&self, f: impl Fn(&mut State<'_>) -> Result<T, ApiError>) -> Result<T, ApiError> {
        let Some(cluster) = &self.cluster else {
            let _serial = self.writes.lock().unwrap_or_else(PoisonError::into_inner);
            return self.decide(&f).map(|(value, _)| value);
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
                Err(e) => return Err(e),
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
                Err(e)
            }
            Err(panic) => {
                let _ = self.undo_or_lose(&journal);
                let _ = self.read_back(cluster, &journal);
                panic::resume_unwind(panic);
            }
        }
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
    fn undo_or_lose(&self, journal: &Journal) -> Result<(), ApiError> {
        match panic::catch_unwind(AssertUnwindSafe(|| self.undo(journal))) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => {
                Err(self
                    .lose_soundness(&format!("a failed write could not be undone: {}", e.detail)))
            }
            Err(payload) => Err(self.lose_soundness(&format!(
                "undoing a failed write panicked: {}",
                panic_message(payload.as_ref())
            ))),
        }
    }

    /// Puts back what a failed write changed, where nothing else changed it since.
    fn undo(&self, journal: &Journal) -> Result<(), ApiError> {
        if journal.changes.is_empty()
            && journal.generations_before.is_empty()
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
        let store = self
            .store
            .write()
            .map_err(|_| self.lose_soundness("the store's lock is poisoned"))?;
        let mut state = State::new(Guard::Write(store), Guard::Write(book), self.backing);
        state.restore_generations(&journal.generations_before)?;
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

/// What a handler knows of a request from its version header; the reply to a version that
/// cannot be served.
fn context(call: &Call, request_id: String) -> Result<Ctx, Box<Reply>> {
    match version::requested(&call.headers) {
        Ok(mv) => Ok(Ctx { mv, request_id }),
        Err(e) => {
            let max = version::MAX.to_string();
            Err(Box::new(wire::version_error(
                &request_id,
                e.into_api_error(),
                &max,
            )))
        }
    }
}

/// `GET /`, version discovery, which needs no token.
fn is_discovery(method: &Method, path: &str) -> bool {
    method == Method::GET && routes::Route::of(path) == Some(routes::Route::Root)
}

/// Whether a request must carry a token: all but version discovery, as Placement's auth
/// middleware runs before its microversion middleware.
fn needs_token(method: &Method, path: &str) -> bool {
    !is_discovery(method, path)
}

thread_local! {
    /// Set while this thread answers a request ([`PlacementApi::guarded`]).
    static ANSWERING: Cell<bool> = const { Cell::new(false) };
    /// What panicked (where, and its message) while this thread answered a request.
    static NOTES: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// Notes panics on this thread while it answers a request.
struct Noting;

impl Noting {
    fn start() -> Noting {
        NOTES.with(|n| n.borrow_mut().clear());
        ANSWERING.with(|a| a.set(true));
        Noting
    }

    /// What panicked since [`Noting::start`].
    fn take() -> Vec<String> {
        NOTES.with(|n| std::mem::take(&mut *n.borrow_mut()))
    }
}

impl Drop for Noting {
    fn drop(&mut self) {
        ANSWERING.with(|a| a.set(false));
    }
}

/// Installs, once per process, a panic hook that keeps a panic on a thread answering a
/// Placement request (with where it happened) for that request's log line, instead of
/// printing it apart from the request id; every other panic goes to the hook there was.
fn note_panics_of_requests() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if ANSWERING.with(Cell::get) {
                let note = info.to_string();
                NOTES.with(|n| n.borrow_mut().push(note));
            } else {
                previous(info);
            }
        }));
    });
}

/// A panic's message, from its payload.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    match (
        payload.downcast_ref::<&str>(),
        payload.downcast_ref::<String>(),
    ) {
        (Some(s), _) => (*s).to_string(),
        (_, Some(s)) => s.clone(),
        _ => "a panic without a message".to_string(),
    }
}

/// The start of a body, for a log line.
fn body_excerpt(body: &[u8]) -> String {
    const SHOWN: usize = 4096;
    let shown = body.get(..SHOWN).unwrap_or(body);
    let mut text = String::from_utf8_lossy(shown).into_owned();
    if body.len() > SHOWN {
        text.push('…');
    }
    text
}

/// Checks the caller from the headers, then reads the body and answers.
async fn handle(api: Arc<PlacementApi>, request: Request<Incoming>) -> Reply {
    let request_id = api.next_request_id();
    let (parts, body) = request.into_parts();
    // The token is checked before any of the body is read: a caller without a valid token
    // never makes the server hold a body, or wait for one.
    let caller = if needs_token(&parts.method, parts.uri.path()) {
        match api.auth.check_async(&parts.method, &parts.headers).await {
            Ok(caller) => caller,
            Err(refused) => {
                let reply = refused.reply(&request_id, &parts.headers);
                return if intake::has_body(&parts.headers) {
                    wire::closing(reply)
                } else {
                    reply
                };
            }
        }
    } else {
        Caller::Unrestricted
    };
    let mut call = Call::new(parts, Bytes::new(), caller);
    // Nor does a caller the route's policy refuses, or a request the route would refuse
    // from its headers alone: the same answer as after reading the body, sent before it.
    if intake::has_body(&call.headers)
        && let Some(refused) = api.refusal_before_body(&call, &request_id)
    {
        return wire::closing(refused);
    }
    let share = match api
        .bodies
        .take(&call.headers, intake::MAX_BODY, intake::BODY_DEADLINE)
        .await
    {
        Ok(share) => share,
        Err(e) => return wire::closing(early_error(&call.headers, request_id, e)),
    };
    call.body =
        match intake::read_body(&call.headers, body, intake::MAX_BODY, intake::BODY_DEADLINE).await
        {
            Ok(b) => b,
            Err(e) => return wire::closing(early_error(&call.headers, request_id, e)),
        };
    let turn = if searches::is_search(&call.method, &call.path) {
        match api.searches.turn().await {
            Ok(turn) => Some(turn),
            Err(e) => return early_error(&call.headers, request_id, e),
        }
    } else {
        None
    };
    // Short work is answered here, on the runtime's thread; the rest on a thread apart.
    match in_place::place(&call.method, &call.path, &call.query) {
        in_place::Place::Here => {
            let _held = (turn, share);
            return api.answer(&call, request_id);
        }
        in_place::Place::HereWithin(steps) => {
            call.in_place = in_place::InPlace::within(steps);
            let reply = api.answer(&call, request_id.clone());
            if !call.in_place.outgrown() {
                return reply;
            }
            call.in_place = in_place::InPlace::default();
        }
        in_place::Place::Apart => {}
    }
    // Dropped with this future, as when the caller goes away: the search stops.
    let stop = StopOnDrop(call.stop.clone());
    let deadline = api.searches.limits().deadline;
    let id = request_id.clone();
    // Candidate searches over large clouds take a while: keep them off the reactor.
    // The turn is given back when the work ends, not when the caller goes away: the
    // searches running are the ones using a core.
    let mut task = tokio::task::spawn_blocking(move || {
        let _held = (turn, share);
        api.answer(&call, id)
    });
    let joined = match tokio::time::timeout(deadline, &mut task).await {
        Ok(joined) => joined,
        Err(_) => {
            // A search sees the stop within a few thousand steps and answers that it ran
            // past its deadline; any other request is answered when its work ends.
            stop.0.stop();
            task.await
        }
    };
    match joined {
        Ok(reply) => reply,
        Err(e) => {
            // Not a panic in the request's work (answer catches those): the task itself.
            tracing::error!(request_id = %request_id, error = %e, "a Placement API request's task failed");
            let ctx = Ctx {
                mv: version::MIN,
                request_id,
            };
            wire::error(&ctx, ApiError::internal())
        }
    }
}

/// The answer to a request refused before its work starts, at the version it asked for.
fn early_error(headers: &HeaderMap, request_id: String, e: ApiError) -> Reply {
    let ctx = Ctx {
        mv: version::requested(headers).unwrap_or(version::MIN),
        request_id,
    };
    wire::error(&ctx, e)
}

/// Serves the API on `listener` until `cancel`, over TLS when `tls` is given.
pub async fn serve(
    api: Arc<PlacementApi>,
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    lifecycle: crate::serving::http::Lifecycle,
) {
    let handler = move |request: Request<Incoming>| handle(api.clone(), request);
    crate::serving::http::serve(listener, tls, handler, lifecycle).await;
}

/// Binds `addr` and returns the listener with the address actually bound (port 0 picks one).
pub async fn bind(addr: SocketAddr) -> std::io::Result<(TcpListener, SocketAddr)> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    Ok((listener, bound))
}

#[cfg(test)]
mod panic_tests;
