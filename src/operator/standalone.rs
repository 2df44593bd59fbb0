//! The assembly of `kubeplace placement serve`: Placement's REST API over a store of its own
//! (seeded from manifests), on one address until a signal, its callers checked by a static
//! token, by Keystone, or (in tests) by the roles their headers claim.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::keystone::config::KeystoneConfig;
use crate::placement_api::{self, Auth, KeystoneAuth, PlacementApi, SearchLimits};
use crate::serving::http::Lifecycle;
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
    pub listen: SocketAddr,
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
    let mut api =
        PlacementApi::new(standalone.store, String::new()).limiting_searches(standalone.searches);
    api = match standalone.callers {
        Callers::Token(token) => api.authenticating_with(Auth::Token(token)),
        Callers::Keystone(config) => {
            let keystone = KeystoneAuth::new(*config, runtime.handle().clone())
                .map_err(StandaloneError::Settings)?;
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
        let mut out = std::io::stdout().lock();
        let _ = writeln!(
            out,
            "kubeplace placement serve: {providers} providers; listening on http://{bound}"
        );
        let _ = out.flush();
        drop(out);
        let cancel = CancellationToken::new();
        let server = tokio::spawn(placement_api::serve(
            api,
            listener,
            None,
            Lifecycle::stop_at(cancel.clone()),
        ));
        let _ = super::shutdown::signal().await;
        cancel.cancel();
        let _ = server.await;
        Ok(())
    })
}
