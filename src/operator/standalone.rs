//! The assembly of `kubeplace placement serve`: Placement's REST API over a store of its own
//! (seeded from manifests), on one address until a signal, its callers checked by a static
//! token, by Keystone, or (in tests) by the roles their headers claim.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::controllers::watch::Synced;
use crate::health::{self, Health};
use crate::keystone::config::KeystoneConfig;
use crate::metrics::{CapacitySettings, Metrics};
use crate::placement_api::origin::Origin;
use crate::placement_api::{self, Auth, KeystoneAuth, PlacementApi, SearchLimits};
use crate::serving::http::Lifecycle;
use kubeplace_core::placement::candidates::choice::Choosing;
use kubeplace_policy::store::Store;

/// Who may call the API.
pub enum Callers {
    /// One static token.
    Token(String),
    /// Keystone's tokens, judged by Placement's policies.
    Keystone(Box<KeystoneConfig>),
    /// Any token, with the roles its headers claim: for tests only.
    RolesFromHeaders,
}

/// What `placement serve` serves, and where.
pub struct Standalone {
    pub store: Store,
    pub callers: Callers,
    pub searches: SearchLimits,
    /// How it chooses among the candidates found (Placement's `[placement]` options).
    pub choosing: Choosing,
    /// Which other origins' pages may call it.
    pub cors: crate::placement_api::cors::Cors,
    /// Whether a proxy's headers say how callers reached it.
    pub proxy_headers: bool,
    pub listen: SocketAddr,
    /// Where `/metrics` is served, if anywhere.
    pub metrics: Option<SocketAddr>,
    /// Which capacity it reports.
    pub capacity: CapacitySettings,
}

/// Why it stopped before serving.
#[derive(Debug, thiserror::Error)]
pub enum StandaloneError {
    /// Its settings cannot be honoured.
    #[error("{0}")]
    Settings(String),
    /// The runtime or the listener could not be had.
    #[error("{0}")]
    Failed(String),
}

/// Serves until SIGTERM or SIGINT, after printing the address listened on (tests and
/// scripts read that line).
pub fn serve(standalone: Standalone) -> Result<(), StandaloneError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| StandaloneError::Failed(format!("cannot start the runtime: {e}")))?;
    let providers = standalone.store.index().len();
    let metrics = Arc::new(Metrics::new());
    let mut api = PlacementApi::new(standalone.store, String::new())
        .limiting_searches(standalone.searches)
        .choosing_candidates(standalone.choosing)
        .allowing_origins(standalone.cors)
        .served_as(Origin {
            https: false,
            proxy_headers: standalone.proxy_headers,
        })
        .measured_by(metrics.placement.clone());
    // The one decider of its own store: it reports the capacity it serves.
    metrics.leader.set(1);
    metrics.report_capacity(api.store.clone(), standalone.capacity);
    api = match standalone.callers {
        Callers::Token(token) => api.authenticating_with(Auth::Token(token)),
        Callers::Keystone(config) => {
            let keystone = KeystoneAuth::new(*config, runtime.handle().clone())
                .map_err(StandaloneError::Settings)?
                .counting_in(metrics.placement.keystone.clone());
            tracing::info!(
                cache_seconds = keystone.cache_time().as_secs(),
                ignored = %keystone.ignored_keys().join(","),
                "tokens are validated by Keystone; --token is not taken"
            );
            api.authenticating_with(Auth::Keystone {
                keystone: Box::new(keystone),
                kubernetes: None,
            })
        }
        Callers::RolesFromHeaders => api.authenticating_with(Auth::RoleHeaders),
    };
    let api = Arc::new(api);
    let listen = standalone.listen;
    runtime.block_on(async move {
        let (listener, bound) = placement_api::bind(listen)
            .await
            .map_err(|e| StandaloneError::Failed(format!("cannot listen on {listen}: {e}")))?;
        let cancel = CancellationToken::new();
        // Its metrics are named before the API's address, which scripts read last on the line.
        let mut metrics_at = String::new();
        let mut health = None;
        if let Some(addr) = standalone.metrics {
            let (metrics_listener, metrics_bound) = placement_api::bind(addr).await.map_err(|e| {
                StandaloneError::Failed(format!("cannot listen on {addr} for metrics: {e}"))
            })?;
            metrics_at = format!("metrics on http://{metrics_bound}/metrics; ");
            let (synced, ready) = Synced::new(0);
            let (_, stopping) = tokio::sync::watch::channel(false);
            let state = Health {
                metrics,
                ready,
                synced,
                stopping,
                placement: api.soundness(),
            };
            health = Some(tokio::spawn(crate::serving::http::serve(
                metrics_listener,
                None,
                move |req| health::handle(state.clone(), req),
                Lifecycle::stop_at(cancel.clone()),
            )));
        }
        let mut out = std::io::stdout().lock();
        let _ = writeln!(
            out,
            "kubeplace placement serve: {providers} providers; {metrics_at}listening on http://{bound}"
        );
        let _ = out.flush();
        drop(out);
        let server = tokio::spawn(placement_api::serve(
            api,
            listener,
            None,
            Lifecycle::stop_at(cancel.clone()),
        ));
        let _ = super::shutdown::signal().await;
        cancel.cancel();
        let _ = server.await;
        if let Some(health) = health {
            let _ = health.await;
        }
        Ok(())
    })
}
