//! A request read whole, answered: its token (when it was not checked before), its version,
//! version discovery, an API that can no longer vouch for its state, then its route, with a
//! panic in the route's work caught and answered as a 500 for that request alone.

use std::panic::{self, AssertUnwindSafe};

use bytes::Bytes;
use http::{Method, Request};

use crate::placement_api::api::PlacementApi;
use crate::placement_api::caller::Caller;
use crate::placement_api::panics::{Noting, body_excerpt, panic_message};
use crate::placement_api::request::call::Call;
use crate::placement_api::request::ctx::Ctx;
use crate::placement_api::request::routes::Route;
use crate::placement_api::request::wire::{self, ApiError, Reply, ReplyBody};
use crate::placement_api::request::{accept, version};
use crate::placement_api::router;

impl PlacementApi {
    /// A request as this server takes it: its caller checked, and how it reached the server
    /// (what its answer's URLs say).
    pub(crate) fn call(&self, parts: http::request::Parts, body: Bytes, caller: Caller) -> Call {
        let mut call = Call::new(parts, body, caller);
        call.origin = self.origin;
        call
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
            Caller::Unrestricted(None)
        };
        let call = self.call(parts, body, caller);
        self.answer(&call, request_id)
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
            Caller::Unrestricted(None)
        };
        let call = self.call(parts.clone(), Bytes::new(), caller);
        self.refusal_before_body(&call, &request_id)
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
    pub(crate) fn refusal_before_body(&self, call: &Call, request_id: &str) -> Option<Reply> {
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
    pub(crate) fn guarded(
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
}

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
    method == Method::GET && Route::of(path) == Some(Route::Root)
}

/// Whether a request must carry a token: all but version discovery, as Placement's auth
/// middleware runs before its microversion middleware.
pub(crate) fn needs_token(method: &Method, path: &str) -> bool {
    !is_discovery(method, path)
}
