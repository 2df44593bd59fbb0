//! The operator (`kubeplace run`): every kubeplace kind watched into one in-memory store;
//! the admission webhook, health and metrics, and Placement's REST API served from it; and,
//! while this replica leads, claims decided, headroom counted and statuses written.
//!
//! `flags.rs` holds its flags by concern; `certificate.rs` the serving certificate;
//! `leader.rs` the election and the claims endpoint on the Lease; `fence.rs` the wait a new
//! leader makes before deciding claims; `placement.rs` the Placement API over the cluster;
//! `shutdown.rs` the signals and the drain. `standalone.rs` is the assembly of
//! `kubeplace placement serve`: the Placement API over a store of its own.

mod certificate;
mod error;
mod fence;
pub mod flags;
mod leader;
mod placement;
pub(crate) mod shutdown;
pub mod standalone;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

pub use error::Error;
pub use flags::Flags;

use crate::cache::SharedStore;
use crate::controllers::headroom::{HeadroomCounter, HeadroomSettings, SharedHeadroomFigures};
use crate::controllers::reconciler::{Pacing, Reconciler, Retries, recorder};
use crate::controllers::trigger::Trigger;
use crate::controllers::watch::{self as kind_watches, Synced, kind_watch};
use crate::health::{self, Health};
use crate::metrics::Metrics;
use crate::placement_api::Soundness;
use crate::serving::certs;
use crate::serving::client_auth::{self, ClientCas};
use crate::serving::http::{self, Lifecycle};
use crate::webhook::claims_route::ClaimsRoute;
use crate::webhook::{Webhook, config, endpoint};
use flags::ClusterFlags;
use kubeplace_api::Kind;
use kubeplace_api::cluster_source::SourceKind;
use leader::Candidacy;
use placement::PlacementOverCluster;
use shutdown::Stop;

/// What every part of a running operator shares.
struct Shared {
    client: Client,
    /// How `client` reaches the cluster, for clients of their own (the Placement API's).
    config: kube::Config,
    identity: String,
    store: SharedStore,
    trigger: Arc<Trigger>,
    metrics: Arc<Metrics>,
    /// Each kind marks its first list here.
    synced: Arc<Synced>,
    /// True once every kind was listed.
    ready: watch::Receiver<bool>,
    /// Whether the Placement API can vouch for its state, for `/readyz`.
    placement: Soundness,
    /// The claims ledger the webhook decides claims with, beside which the Placement API
    /// decides its own.
    claims: Arc<std::sync::Mutex<kubeplace_policy::claims::Ledger>>,
}

/// How the parts stop. `serving` stops the servers; `cancel`, its child, stops everything
/// else, first. Between the two the servers drain: they close each connection after its
/// response.
struct Stopping {
    serving: CancellationToken,
    cancel: CancellationToken,
    lifecycle: Lifecycle,
    /// True once not ready (`/readyz` answers 503).
    not_ready: watch::Sender<bool>,
}

/// Runs the operator until SIGTERM or Ctrl-C.
pub async fn run(flags: Flags) -> Result<(), Error> {
    // Before anything connects: a wrong file is the caller's to fix.
    let client_cas = match &flags.webhook.webhook_client_ca {
        Some(path) => Some(client_cas(path)?),
        None => None,
    };
    let mirror_traits = if flags.mirror.mirror_cluster {
        Some(flags.mirror.traits.table().map_err(Error::MirrorTraits)?)
    } else {
        None
    };
    let config = config(&flags.cluster).await?;
    let client = Client::try_from(config.clone()).map_err(Error::Client)?;
    let store = SharedStore::default();
    info!(weighers = %flags.scheduling.weighing.weighers, "servers are weighed");
    let mirrored_kinds = if mirror_traits.is_some() {
        SourceKind::ALL.len()
    } else {
        0
    };
    let (synced, ready) = Synced::new(Kind::ALL.len() + mirrored_kinds);
    let shared = Shared {
        identity: identity(),
        client,
        config,
        store,
        trigger: Arc::new(Trigger::default()),
        metrics: Arc::new(Metrics::new()),
        synced,
        ready,
        placement: Soundness::new(),
        claims: crate::webhook::claims_ledger(),
    };
    shared
        .metrics
        .report_capacity(shared.store.clone(), flags.serving.capacity.settings());
    let serving = CancellationToken::new();
    let (not_ready, not_ready_rx) = watch::channel(false);
    let stopping = Stopping {
        cancel: serving.child_token(),
        lifecycle: Lifecycle {
            draining: CancellationToken::new(),
            stop: serving.clone(),
        },
        serving,
        not_ready,
    };

    let certificate = certificate::serving(
        &flags,
        &shared.client,
        stopping.cancel.clone(),
        stopping.serving.clone(),
    )
    .await?;
    shared
        .metrics
        .report_certificate(certificate.resolver.clone());
    // Servers first, so the webhook answers as soon as it is registered.
    let listeners = Listeners::bind(&flags).await?;
    let webhook_port = listeners.webhook_port;
    // Leadership: only the leader decides claims; the others pass them to it.
    let candidacy = flags.leader.leader_elect.then(|| {
        leader::run_for_leader(
            &flags,
            &shared.identity,
            &shared.client,
            (&shared.store, &shared.claims),
            (webhook_port, &certificate),
            stopping.cancel.clone(),
        )
    });
    let claims_route = candidacy.as_ref().map(|c| c.claims_route.clone());
    let webhook_tls = match client_cas {
        Some(cas) => webhook_tls_checking(&certificate, cas, stopping.cancel.clone())?,
        None => certificate.tls.clone(),
    };
    let mut servers = vec![
        serve_webhook(
            &shared,
            listeners.webhook,
            webhook_tls,
            claims_route,
            &stopping,
        )?,
        serve_health(&shared, listeners.metrics, not_ready_rx, &stopping),
    ];
    let mut watches = watch_every_kind(&shared);
    if let Some(traits) = mirror_traits {
        info!("the cluster's Nodes, Pods and DRA devices are mirrored");
        watches.extend(crate::controllers::mirror::start(
            &shared.client,
            &shared.store,
            &shared.trigger,
            &shared.synced,
            traits,
        ));
    }
    if let Some(ca) = &certificate.register_ca {
        // This replica's own configuration: the API server calls every configuration's
        // webhook, so one registered before the store is synced would hold every write
        // until it is. Registered once synced (or, should the sync not come, after a while).
        let mut synced = shared.ready.clone();
        if tokio::time::timeout(REGISTER_WAITS_FOR_SYNC, synced.wait_for(|s| *s))
            .await
            .is_err()
        {
            warn!(
                waited_s = REGISTER_WAITS_FOR_SYNC.as_secs(),
                "the store is not synced yet; registering the webhook anyway"
            );
        }
        register_webhook(&flags, &shared.client, webhook_port, ca).await?;
    }
    if let Some(listener) = listeners.placement {
        servers.push(serve_placement(
            &flags,
            &shared,
            listener,
            &certificate,
            &stopping,
        ));
    }
    let running = lead_and_reconcile(
        &flags,
        &shared,
        candidacy,
        &stopping.cancel,
        &stopping.serving,
    );
    info!(
        identity = %shared.identity,
        webhook = %flags.webhook.webhook_addr,
        metrics = %flags.serving.metrics_addr,
        placement = ?flags.placement.placement_addr,
        leader_elect = flags.leader.leader_elect,
        "kubeplace is running"
    );
    let signal = shutdown::signal().await;
    stop(&flags, signal, stopping, running, servers, watches).await;
    Ok(())
}

pub(crate) async fn client(flags: &ClusterFlags) -> Result<Client, Error> {
    Client::try_from(config(flags).await?).map_err(Error::Client)
}

/// How to reach the cluster: the kubeconfig given, or the one the environment names.
pub(crate) async fn config(flags: &ClusterFlags) -> Result<kube::Config, Error> {
    Ok(match &flags.kubeconfig {
        Some(path) => {
            let kubeconfig_error = |source| Error::Kubeconfig {
                path: path.clone(),
                source,
            };
            let kubeconfig = Kubeconfig::read_from(path).map_err(kubeconfig_error)?;
            Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .map_err(kubeconfig_error)?
        }
        None => Config::infer().await.map_err(Error::NoCluster)?,
    })
}

/// The verifier of the webhook's clients, from the `--webhook-client-ca` bundle at `path`.
fn client_cas(path: &Path) -> Result<Arc<ClientCas>, Error> {
    let bad = |reason: String| Error::WebhookClientCa {
        path: path.to_path_buf(),
        reason,
    };
    let pem = std::fs::read_to_string(path).map_err(|e| {
        bad(format!(
            "cannot be read ({e}); expected a PEM file of CA certificates"
        ))
    })?;
    ClientCas::new(client_auth::ca_certificates(&pem).map_err(bad)?).map_err(bad)
}

/// The webhook's TLS, requiring client certificates of `cas` or of the replicas' own CA
/// (followers present theirs when they pass claims on), which is followed as it is renewed
/// until `cancel`.
fn webhook_tls_checking(
    certificate: &certificate::Serving,
    cas: Arc<ClientCas>,
    cancel: CancellationToken,
) -> Result<tokio_rustls::TlsAcceptor, Error> {
    // Without a CA of its own (files and no --ca-file) only the bundle is trusted; the
    // Lease's setup already says that replicas cannot pass claims here.
    if let Ok(own) = &certificate.ca_pem
        && let Err(e) = cas.trust_own(own)
    {
        warn!("replicas cannot pass claims to this one: its CA: {e}");
    }
    let mut changes = certificate.ca_changes.clone();
    changes.mark_unchanged();
    let following = cas.clone();
    tokio::spawn(async move {
        loop {
            let changed = tokio::select! {
                _ = cancel.cancelled() => return,
                changed = changes.changed() => changed,
            };
            if changed.is_err() {
                return;
            }
            let own = changes.borrow_and_update().clone();
            if let Err(e) = following.trust_own(&own) {
                warn!("the renewed CA cannot check replicas: {e}");
            }
        }
    });
    info!("the webhook requires client certificates (--webhook-client-ca)");
    Ok(tokio_rustls::TlsAcceptor::from(
        certs::server_config_checking(certificate.resolver.clone(), cas)?,
    ))
}

/// This replica's name in the Lease: the pod (or host) name, the process and start time.
fn identity() -> String {
    let host = std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|h| h.trim().to_string())
        })
        .unwrap_or_else(|| "kubeplace".into());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    format!("{host}_{}_{nanos:08x}", std::process::id())
}

async fn bind(addr: SocketAddr, what: &'static str) -> Result<TcpListener, Error> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| Error::Listen { addr, what, source })
}

/// Every address the operator serves on, bound before anything is served.
struct Listeners {
    webhook: TcpListener,
    /// The webhook's port, as bound (the flag may give 0).
    webhook_port: u16,
    metrics: TcpListener,
    placement: Option<TcpListener>,
}

impl Listeners {
    async fn bind(flags: &Flags) -> Result<Listeners, Error> {
        let addr = flags.webhook.webhook_addr;
        let webhook = bind(addr, "the webhook").await?;
        let webhook_port = webhook
            .local_addr()
            .map_err(|source| Error::Listen {
                addr,
                what: "the webhook",
                source,
            })?
            .port();
        let metrics = bind(flags.serving.metrics_addr, "health and metrics").await?;
        let placement = match flags.placement.placement_addr {
            Some(addr) => Some(bind(addr, "the Placement API").await?),
            None => None,
        };
        Ok(Listeners {
            webhook,
            webhook_port,
            metrics,
            placement,
        })
    }
}

/// Serves /healthz, /readyz and /metrics.
fn serve_health(
    shared: &Shared,
    listener: TcpListener,
    not_ready: watch::Receiver<bool>,
    stopping: &Stopping,
) -> JoinHandle<()> {
    let health = Health {
        metrics: shared.metrics.clone(),
        ready: shared.ready.clone(),
        synced: shared.synced.clone(),
        stopping: not_ready,
        placement: shared.placement.clone(),
    };
    tokio::spawn(http::serve(
        listener,
        None,
        move |req| health::handle(health.clone(), req),
        stopping.lifecycle.clone(),
    ))
}

/// Serves the admission webhook on threads of its own.
fn serve_webhook(
    shared: &Shared,
    listener: TcpListener,
    tls: tokio_rustls::TlsAcceptor,
    claims_route: Option<ClaimsRoute>,
    stopping: &Stopping,
) -> Result<JoinHandle<()>, Error> {
    let mut webhook = Webhook::new(
        shared.store.clone(),
        shared.ready.clone(),
        shared.metrics.clone(),
    );
    webhook.events = Some(recorder(shared.client.clone(), &shared.identity));
    webhook.client = Some(shared.client.clone());
    webhook.claims_route = claims_route;
    webhook.claims = shared.claims.clone();
    let webhook = Arc::new(webhook);
    http::serve_apart(
        "kubeplace-webhook",
        listener,
        Some(tls),
        move |req| endpoint::handle(webhook.clone(), req),
        stopping.lifecycle.clone(),
    )
    .map_err(Error::WebhookServer)
}

/// Serves Placement's REST API over the cluster (`--placement-addr`), over TLS with the
/// serving certificate when `--placement-tls` is given.
fn serve_placement(
    flags: &Flags,
    shared: &Shared,
    listener: TcpListener,
    certificate: &certificate::Serving,
    stopping: &Stopping,
) -> JoinHandle<()> {
    let tls = flags
        .placement
        .placement_tls
        .then(|| certificate.tls.clone());
    let api = PlacementOverCluster {
        config: shared.config.clone(),
        store: shared.store.clone(),
        trigger: shared.trigger.clone(),
        ready: shared.ready.clone(),
        namespace: flags.cluster.namespace.clone(),
        weighers: flags.scheduling.weighing.weighers.clone(),
        soundness: shared.placement.clone(),
        searches: flags.placement.searching.limits(),
        choosing: flags.placement.choosing.choosing(),
        cors: flags.placement.cors.cors(),
        proxy_headers: flags.placement.proxy.proxy_headers,
        audience: flags.placement_audience().map(str::to_string),
        keystone: flags.placement.keystone.config().ok().flatten(),
        identity: shared.identity.clone(),
        claims: shared.claims.clone(),
        metrics: shared.metrics.placement.clone(),
    };
    tokio::spawn(api.serve((listener, tls), stopping.lifecycle.clone()))
}

/// Watches every kind: every replica keeps the whole store.
fn watch_every_kind(shared: &Shared) -> Vec<JoinHandle<()>> {
    let mut watches = Vec::new();
    for resource in Kind::ALL.map(Kind::api_resource) {
        if let Some(state) = kind_watch(
            &resource,
            &shared.store,
            &shared.trigger,
            &shared.synced,
            &shared.metrics,
        ) {
            watches.push(tokio::spawn(kind_watches::run(
                shared.client.clone(),
                resource,
                state,
            )));
        }
    }
    watches
}

/// Longest a replica that registers its own webhook waits for its store to sync first.
const REGISTER_WAITS_FOR_SYNC: std::time::Duration = std::time::Duration::from_secs(30);

/// Points the ValidatingWebhookConfiguration at this replica with a CA made at start.
async fn register_webhook(
    flags: &Flags,
    client: &Client,
    webhook_port: u16,
    ca: &str,
) -> Result<(), Error> {
    let name = &flags.webhook.webhook_config_name;
    let host = flags.webhook.webhook_host.as_deref().unwrap_or_default();
    let url = config::base_url(host, webhook_port);
    let mut configuration = config::webhook_configuration(name, &url, ca);
    if flags.mirror.mirror_cluster {
        configuration.webhooks.get_or_insert_with(Vec::new).extend([
            config::device_claims_webhook(&url, ca),
            config::reservations_webhook(&url, ca),
        ]);
    }
    config::apply(client.clone(), &configuration)
        .await
        .map_err(|source| Error::Register {
            name: name.clone(),
            source,
        })?;
    info!(name = %name, url = %url, "registered the webhook with a self-signed CA");
    Ok(())
}

/// The tasks that run while leading, for the stop to wait on.
struct Running {
    /// Says when the lease is let go (the elector then follows it until serving ends).
    released: Option<tokio::sync::oneshot::Receiver<()>>,
    reconciling: JoinHandle<()>,
    /// Held so that a replica without election stays the leader until the end.
    _always: watch::Sender<bool>,
}

/// Runs the election (when on), and the headroom counter and the reconciler, which act
/// while this replica leads.
fn lead_and_reconcile(
    flags: &Flags,
    shared: &Shared,
    candidacy: Option<Candidacy>,
    cancel: &CancellationToken,
    serving: &CancellationToken,
) -> Running {
    let (always, mut leader) = watch::channel(!flags.leader.leader_elect);
    let mut released = None;
    if let Some(c) = candidacy {
        let (tx, rx) = tokio::sync::oneshot::channel();
        tokio::spawn(
            c.elector
                .run_then_follow(cancel.clone(), serving.clone(), tx),
        );
        released = Some(rx);
        leader = c.claims_route.leading;
    }
    {
        let mut leader = leader.clone();
        let metrics = shared.metrics.clone();
        tokio::spawn(async move {
            loop {
                metrics.leader.set(i64::from(*leader.borrow_and_update()));
                if leader.changed().await.is_err() {
                    break;
                }
            }
        });
    }
    let scheduling = &flags.scheduling;
    // Each Flavor's headroom as last counted: the counter writes it, status passes read it.
    let headroom = SharedHeadroomFigures::default();
    tokio::spawn(
        HeadroomCounter {
            store: shared.store.clone(),
            figures: headroom.clone(),
            weighers: scheduling.weighing.weighers.clone(),
            trigger: shared.trigger.clone(),
            leader: leader.clone(),
            ready: shared.ready.clone(),
            settings: HeadroomSettings {
                cap: scheduling.headroom.headroom_cap,
                interval: Duration::from_secs(scheduling.headroom_interval),
            },
            metrics: shared.metrics.clone(),
        }
        .run(cancel.clone()),
    );
    tokio::spawn(
        crate::controllers::open_writes::OpenWrites {
            store: shared.store.clone(),
            cluster: crate::cluster_writer::Cluster::new(
                shared.client.clone(),
                tokio::runtime::Handle::current(),
                flags.cluster.namespace.clone(),
            )
            .writing_as(&shared.identity),
            leader: leader.clone(),
            ready: shared.ready.clone(),
        }
        .run(cancel.clone()),
    );
    if flags.mirror.mirror_cluster {
        tokio::spawn(
            crate::controllers::reservations::Reservations {
                client: shared.client.clone(),
                store: shared.store.clone(),
                image: flags.mirror.reservation_image.clone(),
                leader: leader.clone(),
                ready: shared.ready.clone(),
                recorder: crate::controllers::reconciler::recorder(
                    shared.client.clone(),
                    &shared.identity,
                ),
            }
            .run(cancel.clone()),
        );
    }
    let reconciler = Reconciler {
        client: shared.client.clone(),
        store: shared.store.clone(),
        headroom,
        weighers: scheduling.weighing.weighers.clone(),
        trigger: shared.trigger.clone(),
        leader,
        ready: shared.ready.clone(),
        metrics: shared.metrics.clone(),
        recorder: recorder(shared.client.clone(), &shared.identity),
        pacing: Pacing {
            concurrency: usize::from(scheduling.status_writes_in_flight),
            ..Pacing::default()
        },
        retries: Retries::default(),
    };
    Running {
        released,
        reconciling: tokio::spawn(reconciler.run(cancel.clone())),
        _always: always,
    }
}

/// Not ready at once, so the Service stops sending requests here; they are still answered
/// until the drain ends. Leadership goes now: another replica takes over. Then the servers
/// stop, answering the requests in progress first.
async fn stop(
    flags: &Flags,
    signal: Stop,
    stopping: Stopping,
    running: Running,
    servers: Vec<JoinHandle<()>>,
    watches: Vec<JoinHandle<()>>,
) {
    let drain = match signal {
        Stop::Terminate => Duration::from_secs(flags.serving.drain_seconds),
        Stop::Interrupt => Duration::ZERO,
    };
    let drained = tokio::time::Instant::now() + drain;
    stopping.not_ready.send_replace(true);
    stopping.lifecycle.draining.cancel();
    info!(
        drain_seconds = drain.as_secs(),
        "shutting down: not ready, serving until the drain ends"
    );
    stopping.cancel.cancel();
    if let Some(task) = running.released
        && tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .is_err()
    {
        warn!("the leader lease was not released in time");
    }
    let _ = tokio::time::timeout(Duration::from_secs(5), running.reconciling).await;
    tokio::select! {
        _ = tokio::time::sleep_until(drained) => {}
        _ = shutdown::signal() => info!("a second signal: stopping without waiting out the drain"),
    }
    stopping.serving.cancel();
    // Every server returns within its stop grace.
    let _ = tokio::time::timeout(http::STOP_GRACE + http::STOP_SLACK * 2, async {
        for s in servers {
            let _ = s.await;
        }
    })
    .await;
    for w in watches {
        w.abort();
    }
}
