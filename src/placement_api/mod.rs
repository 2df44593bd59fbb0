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
mod body;
mod classes;
mod inventories;
mod providers;
mod router;
mod state;
mod traits;
mod version;
mod wire;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use bytes::Bytes;
use http::{HeaderMap, Method, Request};
use hyper::body::Incoming;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use kubeplace_policy::store::Store;

pub use state::State;
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

/// The served API: its state, the token it accepts and a request counter.
pub struct PlacementApi {
    state: RwLock<State>,
    token: String,
    requests: AtomicU64,
}

impl PlacementApi {
    /// An API over a store (seeded from manifests, or empty), accepting `token`.
    pub fn new(store: Store, token: String) -> PlacementApi {
        PlacementApi {
            state: RwLock::new(State::new(store)),
            token,
            requests: AtomicU64::new(0),
        }
    }

    /// Answers one request whose body has been read whole: what the server does with every
    /// request once it is read, usable without a listener.
    pub fn answer_request(
        &self,
        request: Request<Bytes>,
    ) -> http::Response<http_body_util::Full<Bytes>> {
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
        if !discovery && let Some(refused) = self.refuse_token(&call.headers) {
            return refused;
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

    /// 401 without a token, 403 with another one (Placement's noauth2 answers a token other
    /// than `admin` with 403).
    fn refuse_token(&self, headers: &HeaderMap) -> Option<Reply> {
        match headers.get("x-auth-token").map(|v| v.to_str()) {
            None => Some(wire::auth_error(
                http::StatusCode::UNAUTHORIZED,
                "The request you have made requires authentication: send X-Auth-Token with the token given to `kubeplace placement serve --token`.",
            )),
            Some(Ok(t)) if t == self.token => None,
            Some(_) => Some(wire::auth_error(
                http::StatusCode::FORBIDDEN,
                "The X-Auth-Token sent is not the token this server accepts.",
            )),
        }
    }

    /// Runs `f` over the state for reading.
    fn read<T>(&self, f: impl FnOnce(&State) -> Result<T, ApiError>) -> Result<T, ApiError> {
        let state = self.state.read().map_err(|_| ApiError::poisoned())?;
        f(&state)
    }

    /// Runs `f` over the state alone: the one serialized write path.
    fn write<T>(&self, f: impl FnOnce(&mut State) -> Result<T, ApiError>) -> Result<T, ApiError> {
        let mut state = self.state.write().map_err(|_| ApiError::poisoned())?;
        f(&mut state)
    }
}

/// Reads a request whole and answers it.
async fn handle(api: Arc<PlacementApi>, request: Request<Incoming>) -> Reply {
    let (parts, body) = request.into_parts();
    let body = match crate::webhook::server::read_body(body, MAX_BODY).await {
        Ok(b) => b,
        Err(message) => {
            let ctx = Ctx {
                mv: version::MIN,
                request_id: wire::request_id(0),
            };
            return wire::error(
                &ctx,
                ApiError::new(http::StatusCode::PAYLOAD_TOO_LARGE, message),
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

/// Serves the API on `listener` until `cancel`.
pub async fn serve(api: Arc<PlacementApi>, listener: TcpListener, cancel: CancellationToken) {
    let handler = move |request: Request<Incoming>| handle(api.clone(), request);
    crate::webhook::server::serve(listener, None, handler, cancel).await;
}

/// Binds `addr` and returns the listener with the address actually bound (port 0 picks one).
pub async fn bind(addr: SocketAddr) -> std::io::Result<(TcpListener, SocketAddr)> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    Ok((listener, bound))
}
