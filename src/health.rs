//! `/healthz`, `/readyz` and `/metrics` over plain HTTP.

use std::sync::Arc;

use http::{Request, StatusCode, header};
use hyper::body::Incoming;
use tokio::sync::watch;

use crate::controllers::watch::Synced;
use crate::metrics::Metrics;
use crate::serving::http::{Reply, text};

/// What the health endpoints report on.
#[derive(Clone)]
pub(crate) struct Health {
    pub metrics: Arc<Metrics>,
    pub ready: watch::Receiver<bool>,
    pub synced: Arc<Synced>,
    /// True from the shutdown signal on: not ready, though still serving.
    pub stopping: watch::Receiver<bool>,
}

/// Answers `/healthz` (alive), `/readyz` (every kind listed) and `/metrics`.
pub async fn handle(health: Health, request: Request<Incoming>) -> Reply {
    match request.uri().path() {
        "/healthz" | "/livez" => text(StatusCode::OK, "ok\n"),
        "/readyz" => {
            if *health.stopping.borrow() {
                text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "not ready: shutting down\n",
                )
            } else if *health.ready.borrow() {
                text(StatusCode::OK, "ok\n")
            } else {
                let pending = health.synced.pending(&kubeplace_api::Kind::ALL);
                text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!(
                        "not ready: waiting for the first list of {}\n",
                        pending
                            .iter()
                            .map(|k| k.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
            }
        }
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
