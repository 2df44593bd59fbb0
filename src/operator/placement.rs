//! Placement's REST API over the cluster: served once the store holds every kind's first
//! list, with its custom trait and class registries re-read whenever the registry
//! ConfigMap changes (another replica, or `placement import`, created or deleted a name).

use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kubeplace_core::placement::candidates::choice::Choosing;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;
use tracing::{info, warn};

use crate::cache::SharedStore;
use crate::cluster_writer::{Cluster, REGISTRY_CONFIGMAP};
use crate::controllers::trigger::Trigger;
use crate::keystone::config::KeystoneConfig;
use crate::metrics::PlacementMetrics;
use crate::placement_api::origin::Origin;
use crate::placement_api::{
    self, Auth, KeystoneAuth, KubernetesAuth, PlacementApi, SearchLimits, Soundness,
};
use crate::serving::http::{Lifecycle, run_apart};
use kubeplace_core::placement::weighers::Weighers;

/// How often the registries are re-read besides the ConfigMap's changes. The watch brings
/// every name saved in the ConfigMap; this re-read is for the CUSTOM_ names objects use
/// without them being saved there (a ResourceProvider applied with kubectl naming a new
/// trait: no event of the ConfigMap announces it), and it covers a watch that cannot run
/// (an install whose Role lacks list and watch on the ConfigMap).
const OBJECT_NAMES_REFRESH: Duration = Duration::from_secs(10);

/// What the Placement API over the cluster is made of.
pub(crate) struct PlacementOverCluster {
    /// How to reach the cluster: the API has a client of its own, on its own threads.
    pub config: kube::Config,
    pub store: SharedStore,
    pub trigger: Arc<Trigger>,
    pub ready: watch::Receiver<bool>,
    pub namespace: String,
    /// How its headroom (`/kubeplace/headroom`) weighs candidates.
    pub weighers: Weighers,
    /// Where it reports whether it can vouch for its state (read by `/readyz`).
    pub soundness: Soundness,
    /// How much search work it takes on at once.
    pub searches: SearchLimits,
    /// How it chooses among the candidates found (Placement's `[placement]` options).
    pub choosing: Choosing,
    /// Which other origins' pages may call it.
    pub cors: crate::placement_api::cors::Cors,
    /// Whether a proxy's headers say how callers reached it.
    pub proxy_headers: bool,
    /// The audience callers' tokens must be issued for (`None`: the API server's own).
    pub audience: Option<String>,
    /// Keystone's `[keystone_authtoken]`, when Keystone tokens are taken beside Kubernetes'.
    pub keystone: Option<KeystoneConfig>,
    /// This replica's identity, which its records of writes of several objects name.
    pub identity: String,
    /// The webhook's claims ledger, beside which the API decides its claims.
    pub claims: Arc<std::sync::Mutex<kubeplace_policy::claims::Ledger>>,
    /// Where it counts its requests, Keystone's validations and its writes.
    pub metrics: PlacementMetrics,
}

impl PlacementOverCluster {
    /// Serves the Placement API on `listener` until `lifecycle` stops; nothing is answered
    /// before the store holds every kind's first list (answers then would be wrong, not slow).
    pub(crate) async fn serve(
        mut self,
        (listener, tls): (TcpListener, Option<TlsAcceptor>),
        lifecycle: Lifecycle,
    ) {
        tokio::select! {
            synced = self.ready.wait_for(|r| *r) => if synced.is_err() { return },
            _ = lifecycle.stop.cancelled() => return,
        }
        // Its requests, and the writes they make to the API server, are answered and made
        // on threads of its own: never queued behind the watches' events and the status
        // writer's passes on the operator's runtime, which its tail latency was.
        match run_apart("placement-api", listener, move |listener| {
            self.serve_here(listener, tls, lifecycle)
        }) {
            Ok(task) => {
                let _ = task.await;
            }
            Err(e) => warn!(error = %e, "the Placement API cannot run on threads of its own"),
        }
    }

    /// [`PlacementOverCluster::serve`] on the runtime it runs on.
    async fn serve_here(
        self,
        listener: TcpListener,
        tls: Option<TlsAcceptor>,
        lifecycle: Lifecycle,
    ) {
        let client = match Client::try_from(self.config.clone()) {
            Ok(client) => client,
            Err(e) => {
                warn!(error = %e, "the Placement API cannot make its client: it is not served");
                return;
            }
        };
        let runtime = tokio::runtime::Handle::current();
        let registry: Api<ConfigMap> = Api::namespaced(client.clone(), &self.namespace);
        let cluster = Cluster::new(client.clone(), runtime.clone(), self.namespace)
            .writing_as(&self.identity)
            .counting_in(self.metrics.cluster.clone());
        if tls.is_none() {
            warn!(
                "the Placement API serves plain HTTP (no --placement-tls): callers' tokens travel in clear text"
            );
        }
        match &self.audience {
            Some(audience) => {
                info!(%audience, "the Placement API takes tokens for its audience only")
            }
            None => warn!(
                "the Placement API takes tokens for the API server's own audience (--placement-token-audience is empty): each token sent to it is also a credential for the Kubernetes API"
            ),
        }
        let kubernetes = KubernetesAuth::new(client, runtime.clone(), self.audience);
        let keystone_metrics = self.metrics.keystone.clone();
        let auth = match self
            .keystone
            .map(|c| KeystoneAuth::new(c, runtime).map(|k| k.counting_in(keystone_metrics)))
        {
            None => Auth::Kubernetes(kubernetes),
            Some(Ok(keystone)) => {
                info!(
                    cache_seconds = keystone.cache_time().as_secs(),
                    ignored = %keystone.ignored_keys().join(","),
                    "the Placement API takes Keystone tokens (Placement's default policies) and Kubernetes tokens (JWTs, RBAC)"
                );
                Auth::Keystone {
                    keystone: Box::new(keystone),
                    kubernetes: Some(kubernetes),
                }
            }
            Some(Err(e)) => {
                warn!(error = %e, "the Placement API cannot reach Keystone as configured: it is not served");
                return;
            }
        };
        let trigger = self.trigger;
        // The API's writes are in the store before the watch sees them: what each reaches
        // is reconciled.
        let api = Arc::new(
            PlacementApi::over_cluster(self.store, cluster, auth)
                .weighing_by(self.weighers)
                .limiting_searches(self.searches)
                .choosing_candidates(self.choosing)
                .allowing_origins(self.cors)
                .served_as(Origin {
                    https: tls.is_some(),
                    proxy_headers: self.proxy_headers,
                })
                .reporting_to(self.soundness)
                .deciding_beside(self.claims)
                .measured_by(self.metrics)
                .on_commit(move |reach| trigger.reach(reach)),
        );
        refresh(api.clone()).await;
        info!(addr = ?listener.local_addr().ok(), "serving the Placement API");
        let server = tokio::spawn(placement_api::serve(
            api.clone(),
            listener,
            tls,
            lifecycle.clone(),
        ));
        // The one ConfigMap, by name (which RBAC's resourceNames can grant list and watch
        // on); errors are retried with backoff.
        let mut changes = watcher::watcher(
            registry,
            watcher::Config::default().fields(&format!("metadata.name={REGISTRY_CONFIGMAP}")),
        )
        .default_backoff()
        .boxed();
        let mut every = tokio::time::interval(OBJECT_NAMES_REFRESH);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        every.reset();
        let mut watching = true;
        loop {
            tokio::select! {
                _ = lifecycle.stop.cancelled() => break,
                event = changes.next(), if watching => {
                    // Retried with backoff, the watch does not end; if it did, the periodic
                    // re-read would go on alone.
                    let Some(event) = event else {
                        watching = false;
                        continue;
                    };
                    // Events already arrived are one re-read.
                    let mut changed = registry_changed(event);
                    while let Some(Some(event)) = changes.next().now_or_never() {
                        changed |= registry_changed(event);
                    }
                    if changed {
                        refresh(api.clone()).await;
                        every.reset();
                    }
                }
                _ = every.tick() => refresh(api.clone()).await,
            }
        }
        let _ = server.await;
    }
}

/// Whether a watch event of the registry ConfigMap calls for a re-read: a change, or the
/// end of a (re-)list, after which what was missed is read.
fn registry_changed(event: Result<Event<ConfigMap>, watcher::Error>) -> bool {
    match event {
        Ok(Event::Apply(_) | Event::Delete(_) | Event::InitDone) => true,
        Ok(Event::Init | Event::InitApply(_)) => false,
        Err(e) => {
            warn!(
                error = %e,
                "cannot watch ConfigMap {REGISTRY_CONFIGMAP}: custom traits and classes other replicas create arrive only with the periodic re-read (the operator's Role needs list and watch on it)"
            );
            false
        }
    }
}

/// Re-reads the custom trait and class registries, off the async workers.
async fn refresh(api: Arc<PlacementApi>) {
    match tokio::task::spawn_blocking(move || api.refresh_registries()).await {
        Ok(Err(e)) => warn!(error = %e, "could not read the Placement registries"),
        Err(e) => warn!(error = %e, "could not read the Placement registries"),
        Ok(Ok(())) => {}
    }
}
