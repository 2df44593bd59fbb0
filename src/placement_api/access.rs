//! The request log: one line a request answered, at INFO under the target
//! `kubeplace::placement_api::access` — method, path, status, microversion, bytes, time
//! taken, the request id answered in `x-openstack-request-id`, the caller's global request
//! id (Nova's `X-OpenStack-Request-ID`, taken only in Placement's `req-<uuid>` form, as
//! oslo.middleware takes it), and the user and project of a Keystone caller. A caller's
//! global request id is logged, never answered: the answer carries this server's own id.

use std::time::Duration;

use http::{HeaderMap, Method};

use crate::placement_api::caller::Caller;
use crate::placement_api::request::wire::Reply;

/// The header a caller's global request id comes in.
const INBOUND: &str = "x-openstack-request-id";

/// Who called, as far as the token says (a Keystone token names its user and project).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Who {
    pub user: Option<String>,
    pub project: Option<String>,
}

impl Who {
    pub(crate) fn of(caller: &Caller) -> Who {
        match caller {
            Caller::Roles(c) => Who {
                user: c.user_id.clone(),
                project: c.project_id.clone(),
            },
            Caller::Unrestricted(user) => Who {
                user: user.clone(),
                project: None,
            },
        }
    }
}

/// The caller's global request id, when it has Placement's form `req-<uuid>` (lower-case
/// hex); anything else is ignored, as Placement ignores it.
pub(crate) fn global_request_id(headers: &HeaderMap) -> Option<&str> {
    let id = headers.get(INBOUND)?.to_str().ok()?;
    let uuid = id.strip_prefix("req-")?;
    let groups: Vec<&str> = uuid.split('-').collect();
    let shaped = groups.len() == 5
        && groups.iter().zip([8, 4, 4, 4, 12]).all(|(g, n)| {
            g.len() == n && g.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        });
    shaped.then_some(id)
}

/// What one line says.
pub(crate) struct Line<'a> {
    pub method: &'a Method,
    pub path: &'a str,
    pub reply: &'a Reply,
    pub global_request_id: Option<&'a str>,
    pub took: Duration,
}

/// Writes the line.
pub(crate) fn log(line: &Line<'_>) {
    let header = |name: &str| {
        line.reply
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("-")
    };
    let who = line.reply.extensions().get::<Who>();
    let named = |f: fn(&Who) -> &Option<String>| who.and_then(|w| f(w).as_deref()).unwrap_or("-");
    tracing::info!(
        target: "kubeplace::placement_api::access",
        method = %line.method,
        path = line.path,
        status = line.reply.status().as_u16(),
        microversion = header("openstack-api-version"),
        bytes = hyper::body::Body::size_hint(line.reply.body()).exact(),
        took_ms = line.took.as_secs_f64() * 1000.0,
        request_id = header("x-openstack-request-id"),
        global_request_id = line.global_request_id.unwrap_or("-"),
        user = named(|w| &w.user),
        project = named(|w| &w.project),
        "answered"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(id: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(INBOUND, id.parse().unwrap());
        h
    }

    #[test]
    fn only_placements_form_is_a_global_request_id() {
        let good = "req-0f1e2d3c-4b5a-4968-8776-655443322110";
        assert_eq!(global_request_id(&with(good)), Some(good));
        for bad in [
            "0f1e2d3c-4b5a-4968-8776-655443322110",
            "req-0F1E2D3C-4B5A-4968-8776-655443322110",
            "req-0f1e2d3c-4b5a-4968-8776-65544332211",
            "req-0f1e2d3c4b5a-4968-8776-655443322110",
            "req-zzzzzzzz-4b5a-4968-8776-655443322110",
            "",
        ] {
            assert_eq!(global_request_id(&with(bad)), None, "{bad:?}");
        }
        assert_eq!(global_request_id(&HeaderMap::new()), None);
    }
}
