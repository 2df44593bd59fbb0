//! Placement's REST API (OpenStack Placement 16, microversions 1.0–1.39) served from
//! kubeplace's in-memory store: `kubeplace placement serve`.
//!
//! Every request is read whole, then answered synchronously under one lock around the
//! [`State`]: reads share it, writes take it alone, so every write (and every claim) is
//! decided at one serialized point that sees every earlier one. Kubeplace objects are
//! written through `kubeplace_policy::admission`, so the API, `kubeplace apply` and the
//! webhook hold the same capacity and validity rules. docs/placement-api.md lists what is
//! served and every difference from Placement.

mod allocations;
mod auth;
mod body;
mod classes;
mod cluster;
mod extensions;
mod inventories;
mod providers;
mod reshaper;
mod router;
mod traits;
mod version;
mod wire;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use bytes::Bytes;
use http::{HeaderMap, Method, Request};
use hyper::body::Incoming;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::cache::SharedStore;
use kubeplace_core::placement::weighers::Weighers;
use kubeplace_policy::store::Store;

pub use auth::{Auth, KubernetesAuth};
pub use cluster::Cluster;
pub use kubeplace_policy::placement_records::{
    Backing, Book, CONSUMER_TYPE_ANNOTATION, PROJECT_ANNOTATION, USER_ANNOTATION,
};
use kubeplace_policy::placement_records::{Guard, Journal, State};
pub use wire::ReplyBody;
use wire::{ApiError, Reply};

/// The largest request body read: a full inventory or allocation set is a few KiB.
const MAX_BODY: usize = 4 * 1024 * 1024;

/// A request, read whole: what the handlers see.
pub(crate) struct Call {
    pub method: Method,
    pub path: String,
    pub query: String,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// What a handler knows about the request besides its body.
#[derive(Debug, Clone)]
pub(crate) struct Ctx {
    pub mv: version::Version,
    pub request_id: String,
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
    /// Held by a write from its first look at the state until its commit: the API's writes
    /// on one server are decided one at a time.
    writes: Mutex<()>,
    requests: AtomicU64,
    /// Called after a write reached the cluster. The write is already in the store when
    /// the watch brings it back, so the watch sees nothing new: this is how the status
    /// writer learns that usages and statuses that read them may have changed.
    committed: Option<Box<dyn Fn() + Send + Sync>>,
}

impl PlacementApi {
    /// An API over a store of its own (seeded from manifests, or empty), accepting `token`.
    pub fn new(store: Store, token: String) -> PlacementApi {
        let book = Book::new(&store, Backing::Memory);
        PlacementApi {
            store: Arc::new(RwLock::new(store)),
            weighers: Weighers::default(),
            book: RwLock::new(book),
            backing: Backing::Memory,
            auth: Auth::Token(token),
            cluster: None,
            writes: Mutex::new(()),
            requests: AtomicU64::new(0),
            committed: None,
        }
    }

    /// An API over the operator's watched store, committing writes to the cluster.
    pub fn over_cluster(store: SharedStore, cluster: Cluster, auth: Auth) -> PlacementApi {
        let book = match store.read() {
            Ok(s) => Book::new(&s, Backing::Cluster),
            Err(_) => Book::default(),
        };
        PlacementApi {
            store,
            weighers: Weighers::default(),
            book: RwLock::new(book),
            backing: Backing::Cluster,
            auth,
            cluster: Some(cluster),
            writes: Mutex::new(()),
            requests: AtomicU64::new(0),
            committed: None,
        }
    }

    /// Counts headroom weighing candidates by `weighers`, as the scheduler does.
    pub fn weighing_by(mut self, weighers: Weighers) -> PlacementApi {
        self.weighers = weighers;
        self
    }

    /// Calls `f` after each write that reached the cluster.
    pub fn on_commit(mut self, f: impl Fn() + Send + Sync + 'static) -> PlacementApi {
        self.committed = Some(Box::new(f));
        self
    }

    /// Brings the custom trait and class registries up to date with the cluster: those
    /// kept by the cluster (created by any replica) and those the watched objects use.
    pub fn refresh_registries(&self) -> Result<(), String> {
        let kept = match &self.cluster {
            Some(c) => Some(c.load_registries()?),
            None => None,
        };
        let store = self
            .store
            .read()
            .map_err(|_| "the store lock is poisoned")?;
        let mut book = self.book.write().map_err(|_| "the book lock is poisoned")?;
        if let Some((traits, classes)) = kept {
            book.set_registries(traits, classes);
        }
        book.learn_registries(&store);
        Ok(())
    }

    /// Answers one request whose body has been read whole: what the server does with every
    /// request once it is read, usable without a listener.
    pub fn answer_request(&self, request: Request<Bytes>) -> http::Response<ReplyBody> {
        let (parts, body) = request.into_parts();
        let call = Call {
            method: parts.method,
            path: parts.uri.path().to_string(),
            query: parts.uri.query().unwrap_or("").to_string(),
            headers: parts.headers,
            body,
        };
        self.answer(&call)
    }

    /// Answers one request read whole.
    pub(crate) fn answer(&self, call: &Call) -> Reply {
        let n = self.requests.fetch_add(1, Ordering::Relaxed);
        let request_id = wire::request_id(n);
        let path = call.path.trim_end_matches('/');
        // Version discovery needs no token; everything else is checked for one first, as
        // Placement's auth middleware runs before its microversion middleware.
        let discovery = path.is_empty() && call.method == Method::GET;
        if !discovery && let Err(refused) = self.auth.check(&call.method, &call.headers) {
            return refused.reply();
        }
        let mv = match version::requested(&call.headers) {
            Ok(mv) => mv,
            Err(e) => {
                let max = version::MAX.to_string();
                return wire::version_error(&request_id, e.into_api_error(), &max);
            }
        };
        let ctx = Ctx { mv, request_id };
        if discovery {
            return wire::finish(&ctx, version::discovery());
        }
        match router::route(self, &ctx, call) {
            Ok(reply) => wire::finish(&ctx, reply),
            Err(e) => wire::error(&ctx, e),
        }
    }

    /// Runs `f` over the state for reading.
    fn read<T>(&self, f: impl FnOnce(&State<'_>) -> Result<T, ApiError>) -> Result<T, ApiError> {
        let book = self.book.read().map_err(|_| ApiError::poisoned())?;
        let store = self.store.read().map_err(|_| ApiError::poisoned())?;
        let state = State::new(Guard::Read(store), Guard::Read(book), self.backing);
        f(&state)
    }

    /// Runs `f` over the state alone, then commits what it changed to the cluster (when
    /// there is one): the one serialized write path. A write that fails, here or in the
    /// cluster, leaves the state as it was.
    fn write<T>(
        &self,
        f: impl FnOnce(&mut State<'_>) -> Result<T, ApiError>,
    ) -> Result<T, ApiError> {
        let _serial = self.writes.lock().map_err(|_| ApiError::poisoned())?;
        let (result, journal) = {
            let book = self.book.write().map_err(|_| ApiError::poisoned())?;
            let store = self.store.write().map_err(|_| ApiError::poisoned())?;
            let mut state = State::new(Guard::Write(store), Guard::Write(book), self.backing);
            let result = f(&mut state);
            (result, state.into_journal())
        };
        let value = match result {
            Ok(v) => v,
            Err(e) => {
                self.undo(&journal)?;
                return Err(e);
            }
        };
        let Some(cluster) = &self.cluster else {
            return Ok(value);
        };
        let committed = cluster.commit(&journal.changes).and_then(|written| {
            if !journal.registry_changes.is_empty() {
                cluster.save_registry_changes(&journal.registry_changes)?;
            }
            Ok(written)
        });
        match committed {
            Ok(written) => {
                // Read-your-writes: the objects as the API server stored them (resource
                // version, uid, generation) replace the ones decided here, unless the
                // watch already brought something newer.
                let mut store = self.store.write().map_err(|_| ApiError::poisoned())?;
                for object in written {
                    let key = kubeplace_policy::store::ObjectKey::of(&object);
                    let newer = store
                        .get(&key)
                        .is_some_and(|o| cluster::newer_or_same(o, &object));
                    if !newer {
                        store.put(object);
                    }
                }
                drop(store);
                if let Some(committed) = &self.committed
                    && !journal.changes.is_empty()
                {
                    committed();
                }
                Ok(value)
            }
            Err(e) => {
                self.undo(&journal)?;
                Err(e)
            }
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
        let mut book = self.book.write().map_err(|_| ApiError::poisoned())?;
        let undone: Vec<_> = journal.registry_changes.iter().rev().cloned().collect();
        book.apply_registry_changes(&undone, true);
        let store = self.store.write().map_err(|_| ApiError::poisoned())?;
        let mut state = State::new(Guard::Write(store), Guard::Write(book), self.backing);
        state.restore_generations(&journal.generations_before)?;
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

/// Reads a request whole and answers it.
async fn handle(api: Arc<PlacementApi>, request: Request<Incoming>) -> Reply {
    let (parts, body) = request.into_parts();
    let body = match crate::serving::http::read_body(body, MAX_BODY).await {
        Ok(b) => b,
        Err(message) => {
            let ctx = Ctx {
                mv: version::MIN,
                request_id: wire::request_id(0),
            };
            return wire::error(
                &ctx,
                ApiError::new(http::StatusCode::PAYLOAD_TOO_LARGE, message.to_string()),
            );
        }
    };
    let request = Request::from_parts(parts, body);
    // Candidate searches over large clouds take a while: keep them off the reactor.
    match tokio::task::spawn_blocking(move || api.answer_request(request)).await {
        Ok(reply) => reply,
        Err(e) => wire::plain_error(
            http::StatusCode::INTERNAL_SERVER_ERROR,
            &format!("the request failed: {e}"),
        ),
    }
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
