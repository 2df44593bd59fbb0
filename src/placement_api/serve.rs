//! The API over HTTP: a request's caller is checked from its headers, then what else the
//! headers decide, and only then is its body read (bounded in size, time and room); a search
//! waits for its turn; short work is answered on the thread that read it, the rest apart.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::{HeaderMap, Request};
use hyper::body::Incoming;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::placement_api::access;
use crate::placement_api::answer::needs_token;
use crate::placement_api::api::PlacementApi;
use crate::placement_api::caller::Caller;
use crate::placement_api::request::ctx::Ctx;
use crate::placement_api::request::routes::Route;
use crate::placement_api::request::searches::{self, StopOnDrop};
use crate::placement_api::request::wire::{self, ApiError, Reply};
use crate::placement_api::request::{in_place, intake, version};

/// Answers a request, counts it (by its route's template, method, status and the
/// microversion answered, and its time until the answer's headers are ready) and logs it:
/// one line a request, as Placement's request log writes one.
async fn measured(api: Arc<PlacementApi>, request: Request<Incoming>) -> Reply {
    let started = Instant::now();
    let method = request.method().clone();
    let route = Route::of(request.uri().path()).map_or("unknown", |r| r.template());
    let path = request.uri().path().to_string();
    let global = access::global_request_id(request.headers()).map(str::to_string);
    let metrics = api.metrics.clone();
    // Cross-origin requests are judged outside everything else, as Placement's CORS layer
    // sits outside its authentication: a preflight needs no token.
    let cors = api.cors.clone();
    let ask = cors.ask(&method, request.headers());
    let reply = match &ask {
        Some(ask) if ask.is_preflight() => cors.preflight(ask),
        Some(ask) => cors.decorate(ask, handle(api, request).await),
        None => handle(api, request).await,
    };
    let took = started.elapsed();
    let microversion = reply
        .headers()
        .get("openstack-api-version")
        .and_then(|v| v.to_str().ok());
    metrics.request(route, &method, reply.status().as_u16(), microversion, took);
    access::log(&access::Line {
        method: &method,
        path: &path,
        reply: &reply,
        global_request_id: global.as_deref(),
        took,
    });
    reply
}

/// Checks the caller from the headers, then reads the body and answers; the answer carries
/// who the caller was, for the request's log line.
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
        Caller::Unrestricted(None)
    };
    let who = access::Who::of(&caller);
    let mut reply = answer_checked(api, parts, body, caller, request_id).await;
    reply.extensions_mut().insert(who);
    reply
}

/// Reads the body of a request whose caller was checked, and answers it.
async fn answer_checked(
    api: Arc<PlacementApi>,
    parts: http::request::Parts,
    body: Incoming,
    caller: Caller,
    request_id: String,
) -> Reply {
    let mut call = api.call(parts, Bytes::new(), caller);
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
            Ok(turn) => {
                if turn.queued {
                    api.metrics.searches_queued.inc();
                }
                Some(turn)
            }
            Err(e) => {
                api.metrics.searches_refused.inc();
                return early_error(&call.headers, request_id, e);
            }
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
    let handler = move |request: Request<Incoming>| measured(api.clone(), request);
    crate::serving::http::serve(listener, tls, handler, lifecycle).await;
}

/// Binds `addr` and returns the listener with the address actually bound (port 0 picks one).
pub async fn bind(addr: SocketAddr) -> std::io::Result<(TcpListener, SocketAddr)> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    Ok((listener, bound))
}
