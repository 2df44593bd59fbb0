//! What a handler sees of a request: the request read whole.

use bytes::Bytes;
use http::{HeaderMap, Method};

use crate::placement_api::caller::Caller;
use crate::placement_api::origin::Origin;
use crate::placement_api::request::in_place;
use kubeplace_core::placement::candidates::Stop;

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
    /// How it reached the server: what its answer's URLs say.
    pub origin: Origin,
}

impl Call {
    pub(crate) fn new(parts: http::request::Parts, body: Bytes, caller: Caller) -> Call {
        Call {
            method: parts.method,
            path: parts.uri.path().to_string(),
            query: parts.uri.query().unwrap_or("").to_string(),
            headers: parts.headers,
            body,
            stop: Stop::new(),
            caller,
            in_place: in_place::InPlace::default(),
            origin: Origin::default(),
        }
    }
}
