//! Why a caller was refused, and the reply that says so: Placement's error shape for a 403,
//! the shape of the authentication in front of it for a 401, 429 or 503.

use http::StatusCode;

use super::keystone;
use crate::placement_api::request::version;
use crate::placement_api::request::wire::{self, Reply};

/// Why a caller was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub(super) status: StatusCode,
    /// What the caller is told. A 503's is fixed text: what failed is in `detail`, logged.
    pub(super) message: String,
    /// Why a token could not be checked (a 503): for the log only, as it may name Keystone's
    /// or the API server's address and what kubeplace's own login got.
    pub(super) detail: Option<String>,
    /// Keystone's refusals: the `WWW-Authenticate` of a 401 (`Keystone uri="…"`), and
    /// keystonemiddleware's body shape.
    pub(super) keystone: Option<String>,
}

impl Refusal {
    /// The reply that refuses the request. A 403 (a caller known but not allowed) is in
    /// Placement's error shape, as its policy's refusals are; a 401 and a 429 in the shape
    /// of the authentication in front of it.
    pub(crate) fn reply(&self, request_id: &str, headers: &http::HeaderMap) -> Reply {
        if let Some(detail) = &self.detail {
            tracing::warn!(request_id, reason = %detail, "a caller's token could not be checked");
        }
        if self.status == StatusCode::FORBIDDEN {
            let ctx = crate::placement_api::request::ctx::Ctx {
                mv: version::requested(headers).unwrap_or(version::MIN),
                request_id: request_id.to_string(),
            };
            return wire::error(&ctx, wire::ApiError::new(self.status, &self.message));
        }
        if let Some(challenge) = &self.keystone {
            let mut reply =
                wire::with_request_id(wire::keystone_error(self.status, &self.message), request_id);
            if self.status == StatusCode::UNAUTHORIZED
                && let Ok(v) = http::HeaderValue::from_str(challenge)
            {
                reply
                    .headers_mut()
                    .insert(http::header::WWW_AUTHENTICATE, v);
            }
            return reply;
        }
        let mut reply =
            wire::with_request_id(wire::auth_error(self.status, &self.message), request_id);
        if self.status == StatusCode::TOO_MANY_REQUESTS
            || self.status == StatusCode::SERVICE_UNAVAILABLE
        {
            reply.headers_mut().insert(
                http::header::RETRY_AFTER,
                http::HeaderValue::from_static("1"),
            );
        }
        reply
    }
    fn of(status: StatusCode, message: impl Into<String>) -> Refusal {
        Refusal {
            status,
            message: message.into(),
            detail: None,
            keystone: None,
        }
    }
    pub(super) fn too_many(message: impl Into<String>) -> Refusal {
        Refusal::of(StatusCode::TOO_MANY_REQUESTS, message)
    }
    pub(super) fn unauthorized(message: impl Into<String>) -> Refusal {
        Refusal::of(StatusCode::UNAUTHORIZED, message)
    }
    pub(super) fn forbidden(message: impl Into<String>) -> Refusal {
        Refusal::of(StatusCode::FORBIDDEN, message)
    }
    /// Keystone's refusal of a token, or its being unreachable.
    pub(super) fn keystone(refused: keystone::Refused, challenge: &str) -> Refusal {
        let mut refusal = match refused {
            keystone::Refused::Invalid(why) => Refusal::unauthorized(why),
            keystone::Refused::Unavailable(why) => Refusal::unavailable(why),
        };
        refusal.keystone = Some(challenge.to_string());
        refusal
    }
    /// The token could not be checked, for `detail`'s reason (logged, not sent).
    pub(super) fn unavailable(detail: impl Into<String>) -> Refusal {
        Refusal {
            detail: Some(detail.into()),
            ..Refusal::of(
                StatusCode::SERVICE_UNAVAILABLE,
                "The token could not be checked just now; retry in a moment. The server's log says why, under this request's id.",
            )
        }
    }
}
