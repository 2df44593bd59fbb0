//! `/healthz`, `/readyz` and `/metrics` over plain HTTP.

use std::sync::Arc;

use http::{Request, StatusCode, header};
use hyper::body::Incoming;
use tokio::sync::watch;

use crate::controllers::watch::Synced;
use crate::metrics::Metrics;
use crate::placement_api::Soundness;
use crate::serving::http::{Reply, text};

/// What the health endpoints report on.
#[derive(Clone)]
pub(crate) struct Health {
    pub metrics: Arc<Metrics>,
    pub ready: watch::Receiver<bool>,
    pub synced: Arc<Synced>,
    /// True from the shutdown signal on: not ready, though still serving.
    pub stopping: watch::Receiver<bool>,
    /// Whether the Placement API (when served) can vouch for its state.
    pub placement: Soundness,
}

/// Answers `/healthz` (alive), `/readyz` (every kind listed, and a Placement API that can
/// vouch for its state) and `/metrics`.
pub async fn handle(health: Health, request: Request<Incoming>) -> Reply {
    match request.uri().path() {
        "/healthz" | "/livez" => text(StatusCode::OK, "ok\n"),
        // Without a Placement API the flag stays sound.
        "/readyz" => readiness(&health, &health.placement),
        "/metrics" => {
            let mut reply = text(StatusCode::OK, health.metrics.encode());
            reply.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static(
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                ),
            );
            reply
        }
        _ => text(StatusCode::NOT_FOUND, "try /healthz, /readyz or /metrics\n"),
    }
}

/// `/readyz`: not ready while shutting down, once the Placement API stopped answering (a
/// Service then sends its clients to the other replicas), and until every kind is listed.
fn readiness(health: &Health, placement: &Soundness) -> Reply {
    if *health.stopping.borrow() {
        text(
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: shutting down\n",
        )
    } else if !placement.is_sound() {
        text(
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: the Placement API stopped answering after an internal error it could not undo (its log says which); restart this replica\n",
        )
    } else if *health.ready.borrow() {
        text(StatusCode::OK, "ok\n")
    } else {
        let pending = health.synced.pending();
        text(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "not ready: waiting for the first list of {}\n",
                pending.join(", ")
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;

    use super::*;
    use crate::placement_api::PlacementApi;

    fn health(ready: bool) -> Health {
        let (synced, _) = Synced::new(1);
        Health {
            metrics: Arc::new(Metrics::new()),
            ready: watch::channel(ready).1,
            synced,
            stopping: watch::channel(false).1,
            placement: Soundness::new(),
        }
    }

    async fn said(reply: Reply) -> (StatusCode, String) {
        let status = reply.status();
        let body = reply.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    #[tokio::test]
    async fn not_ready_once_the_placement_api_stops() {
        let health = health(true);
        let (status, _) = said(readiness(&health, &health.placement)).await;
        assert_eq!(status, StatusCode::OK);
        // What an API that could not undo a failed write does to the flag it reports to.
        let api = PlacementApi::new(Default::default(), "admin".into())
            .reporting_to(health.placement.clone());
        api.stop_answering_for_test();
        let (status, text) = said(readiness(&health, &health.placement)).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(text.contains("Placement API"), "{text}");
    }
}
