//! `kubeplace run`: the operator. Watches every kubeplace kind into one in-memory store,
//! serves the admission webhook from it, and, while it holds the leader lease, writes the
//! statuses the reconcile seam computes.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clap::{ArgAction, ValueEnum};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use crate::cache::{SharedStore, resource_version};
use crate::controllers::headroom::{HeadroomCounter, HeadroomSettings, SharedHeadroomFigures};
use crate::controllers::lease::{Elector, LeaseSettings};
use crate::controllers::reconciler::{Pacing, Reconciler, Retries, recorder};
use crate::controllers::trigger::Trigger;
use crate::controllers::watch::{self as kind_watches, Synced, kind_watch};
use crate::health::{self, Health};
use crate::metrics::Metrics;
use crate::placement_api::{self, Auth, Cluster, KubernetesAuth, PlacementApi};
use crate::webhook::claims_route::{ClaimsRoute, Endpoint};
use crate::webhook::server::Lifecycle;
use crate::webhook::tls_secret::{self, Lifetimes, TlsSecret};
use crate::webhook::{Webhook, certs, config, server};
use kubeplace_api::Kind;
use kubeplace_core::placement::weighers::Weighers;

/// Log formats.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    /// One line per event for people.
    Text,
    /// One JSON object per event for log collectors.
    Json,
}

/// Flags of `kubeplace run`.
#[derive(clap::Args, Debug, Clone)]
pub struct RunArgs {
    /// Kubeconfig file to reach the API server. Without it: $KUBECONFIG, then
    /// ~/.kube/config, then the in-cluster service account.
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// How servers are weighed: NAME=MULTIPLIER items, comma-separated, over the
    /// default spread=1. Weighers: spread (the smallest share of capacity left free),
    /// ram, cpu, disk (free MEMORY_MB, VCPU, DISK_GB on the host tree, as Nova's);
    /// negative packs, 0 turns one off. Nova's defaults: spread=0,ram=1,cpu=1,disk=1.
    #[arg(
        long,
        env = "KUBEPLACE_WEIGHERS",
        value_name = "NAME=MULTIPLIER,...",
        default_value = "spread=1"
    )]
    pub weighers: Weighers,
    /// Servers each Flavor's `status.headroom` counts at most (placing them one by one as
    /// the scheduler would); 0 turns headroom off. Counted by the leader in the background.
    #[arg(long, value_name = "SERVERS", allow_hyphen_values = true,
          value_parser = super::headroom_cap,
          default_value_t = kubeplace_policy::scheduling::headroom::STATUS_CAP)]
    pub headroom_cap: usize,
    /// Least seconds between the starts of two headroom rounds over every Flavor; a round
    /// starts only when something other than a status changed since the last one.
    #[arg(long, value_name = "SECONDS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub headroom_interval: u64,
    /// Status writes the leader keeps in flight at once (server-side applies of the status
    /// subresource); with fewer, a cloud applied in a hurry gets its statuses long after the
    /// objects, since the API server shares itself among the requests in flight.
    #[arg(long, value_name = "N", default_value_t = 32,
          value_parser = clap::value_parser!(u16).range(1..=256))]
    pub status_writes_in_flight: u16,
    /// Namespace kubeplace runs in; the leader Lease lives here.
    #[arg(long, env = "POD_NAMESPACE", default_value = "kubeplace-system")]
    pub namespace: String,
    /// Address of the admission webhook's HTTPS server.
    #[arg(long, value_name = "ADDR:PORT", default_value = "0.0.0.0:8443")]
    pub webhook_addr: SocketAddr,
    /// Address of the plain-HTTP server for /healthz, /readyz and /metrics.
    #[arg(long, value_name = "ADDR:PORT", default_value = "0.0.0.0:8080")]
    pub metrics_addr: SocketAddr,
    /// The webhook's serving certificate (PEM, chain first); re-read when it changes.
    /// Use with --tls-key-file, e.g. from cert-manager.
    #[arg(
        long,
        value_name = "PATH",
        requires = "tls_key_file",
        conflicts_with = "self_signed"
    )]
    pub tls_cert_file: Option<PathBuf>,
    /// The private key of --tls-cert-file (PEM); re-read when it changes.
    #[arg(long, value_name = "PATH", requires = "tls_cert_file")]
    pub tls_key_file: Option<PathBuf>,
    /// Generate a CA and a serving certificate for --webhook-host at start, and create or
    /// update the ValidatingWebhookConfiguration to call https://HOST:PORT/validate/<plural>
    /// with that CA. For running outside a cluster.
    #[arg(long, requires = "webhook_host")]
    pub self_signed: bool,
    /// The IP address or DNS name the API server reaches the webhook at (with --self-signed).
    #[arg(long, value_name = "HOST")]
    pub webhook_host: Option<String>,
    /// Keep the webhook's CA and serving certificate in this Secret of --namespace: made
    /// when missing, renewed before it expires, shared by every replica (the one whose
    /// write loses serves the winner's), re-read every 10 s; the caBundle of the webhooks
    /// of --webhook-config-name is kept equal to its CA. The certificate is for the names
    /// of --webhook-service and for --webhook-host.
    #[arg(
        long,
        value_name = "NAME",
        conflicts_with_all = ["self_signed", "tls_cert_file"]
    )]
    pub tls_secret: Option<String>,
    /// The webhook's Service in --namespace (with --tls-secret): the certificate is for
    /// NAME, NAME.NAMESPACE, NAME.NAMESPACE.svc and NAME.NAMESPACE.svc.cluster.local.
    #[arg(long, value_name = "NAME")]
    pub webhook_service: Option<String>,
    /// Validity of the serving certificate --tls-secret makes, in days; it is renewed when a
    /// third is left. Its CA lasts ten times as long.
    #[arg(long, value_name = "DAYS", default_value_t = 365,
          value_parser = clap::value_parser!(u32).range(1..=36500))]
    pub tls_validity_days: u32,
    /// Name of the ValidatingWebhookConfiguration --self-signed manages, and whose caBundle
    /// --tls-secret keeps.
    #[arg(long, value_name = "NAME", default_value = "kubeplace")]
    pub webhook_config_name: String,
    /// Elect a leader on a Lease so that only one replica writes status
    /// (--leader-elect=false: this replica always writes).
    #[arg(long, value_name = "BOOL", default_value_t = true, action = ArgAction::Set,
          num_args = 0..=1, default_missing_value = "true")]
    pub leader_elect: bool,
    /// Name of the leader Lease in --namespace.
    #[arg(long, value_name = "NAME", default_value = "kubeplace-leader")]
    pub lease_name: String,
    /// The address (HOST:PORT) other replicas reach this one's webhook at, to pass it the
    /// claims to decide while it leads. Default: $POD_IP, else --webhook-host, with the
    /// webhook's port.
    #[arg(long, value_name = "HOST:PORT")]
    pub claims_address: Option<String>,
    /// The name this replica's serving certificate is checked against when other replicas
    /// pass it claims (e.g. the webhook Service's DNS name). Default: --webhook-host.
    #[arg(long, value_name = "NAME")]
    pub claims_server_name: Option<String>,
    /// The CA (PEM) that signed --tls-cert-file, given to the other replicas to check this
    /// one. Default: ca.crt beside --tls-cert-file, when there is one.
    #[arg(long, value_name = "PATH")]
    pub ca_file: Option<PathBuf>,
    /// Serve Placement's REST API at this address (off without it): reads from the watched
    /// objects, writes made as Kubernetes objects, callers checked with TokenReview and
    /// SubjectAccessReview (docs/placement-api.md).
    #[arg(long, value_name = "ADDR:PORT")]
    pub placement_addr: Option<SocketAddr>,
    /// Serve the Placement API over HTTPS with the webhook's serving certificate.
    #[arg(long, requires = "placement_addr")]
    pub placement_tls: bool,
    /// On SIGTERM, report not ready at once, keep serving the webhook and the Placement API
    /// for this many seconds (each response closing its connection, so clients reconnect to
    /// a ready replica), then stop: long enough for the Service's endpoints to drop this
    /// replica, so rollouts refuse no request. A second signal, or Ctrl-C, stops at once.
    #[arg(long, value_name = "SECONDS", default_value_t = 10)]
    pub drain_seconds: u64,
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Which logs to write: a level (error, warn, info, debug, trace), or directives such as
    /// `info,kubeplace=debug`.
    #[arg(long, env = "RUST_LOG", default_value = "info", value_parser = log_filter)]
    pub log_level: String,
}

/// Checks a log filter, so a typo is refused at start instead of silently logging at info.
fn log_filter(text: &str) -> Result<String, String> {
    tracing_subscriber::EnvFilter::try_new(text)
        .map(|_| text.to_string())
        .map_err(|e| {
            format!(
                "{text:?} is not a log filter ({e}); give a level (error, warn, info, debug, trace) or directives such as info,kubeplace=debug"
            )
        })
}

fn init_logging(format: LogFormat, level: &str) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_new(level).unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .try_init(),
    };
}

/// Runs the operator until SIGTERM or Ctrl-C; the process's exit code.
pub fn main(args: RunArgs) -> ExitCode {
    init_logging(args.log_format, &args.log_level);
    // The one TLS crypto provider in the build; kube's client uses it too.
    let _ = rustls::crypto::ring::default_provider().install_default();
    if args.tls_cert_file.is_none() && !args.self_signed && args.tls_secret.is_none() {
        eprintln!(
            "kubeplace run: the webhook needs a certificate: give --tls-secret NAME --webhook-service SERVICE, --tls-cert-file and --tls-key-file, or --self-signed --webhook-host HOST"
        );
        return ExitCode::from(2);
    }
    if args.tls_secret.is_some() && certificate_names(&args).is_empty() {
        eprintln!(
            "kubeplace run: --tls-secret needs the names the API server calls the webhook by: give --webhook-service SERVICE (and/or --webhook-host HOST)"
        );
        return ExitCode::from(2);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("kubeplace run: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            error!("{e}");
            eprintln!("kubeplace run: {e}");
            ExitCode::from(1)
        }
    }
}

async fn client(args: &RunArgs) -> Result<Client, String> {
    let config = match &args.kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path)
                .map_err(|e| format!("--kubeconfig {}: {e}", path.display()))?;
            Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .map_err(|e| format!("--kubeconfig {}: {e}", path.display()))?
        }
        None => Config::infer()
            .await
            .map_err(|e| format!("no kubeconfig and not in a cluster: {e}"))?,
    };
    Client::try_from(config).map_err(|e| format!("cannot build the API client: {e}"))
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

/// The signal that asked the process to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// SIGTERM, as the kubelet sends: drain first.
    Terminate,
    /// Ctrl-C: stop at once.
    Interrupt,
}

pub(crate) async fn shutdown_signal() -> Stop {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => Stop::Interrupt,
                    _ = term.recv() => Stop::Terminate,
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
                Stop::Interrupt
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        Stop::Interrupt
    }
}

/// The names the certificate of --tls-secret is for.
fn certificate_names(args: &RunArgs) -> Vec<String> {
    let mut names = args
        .webhook_service
        .as_deref()
        .map(|s| tls_secret::service_names(s, &args.namespace))
        .unwrap_or_default();
    names.extend(args.webhook_host.clone());
    names
}

async fn bind(addr: SocketAddr, what: &str) -> Result<TcpListener, String> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr} for {what}: {e}"))
}

async fn run(args: RunArgs) -> Result<(), String> {
    let client = client(&args).await?;
    let identity = identity();
    // `serving` stops the servers; `cancel`, its child, stops everything else, first.
    // Between the two the servers drain: they close each connection after its response.
    let serving = CancellationToken::new();
    let cancel = serving.child_token();
    let lifecycle = Lifecycle {
        draining: CancellationToken::new(),
        stop: serving.clone(),
    };
    let mut servers = Vec::new();
    let (stopping, stopping_rx) = watch::channel(false);
    let metrics = Arc::new(Metrics::new());
    let store = SharedStore::default();
    info!(weighers = %args.weighers, "servers are weighed");
    let trigger = Arc::new(Trigger::default());
    let resources = Kind::ALL.map(Kind::api_resource);
    let (synced, ready) = Synced::new(resources.len());

    // The serving certificate, and the CA other replicas check this one's with (`ca_pem`).
    let mut register_ca = None;
    // The CA as it changes (a renewal in the Secret), for the Lease.
    let (ca_tx, mut ca_rx) = watch::channel(String::new());
    let (resolver, ca_pem) = match (&args.tls_cert_file, &args.tls_key_file, &args.tls_secret) {
        (Some(cert), Some(key), _) => {
            let loaded = certs::load_files(cert, key).map_err(|e| e.to_string())?;
            let resolver = certs::CertResolver::new(loaded);
            tokio::spawn(certs::reload_on_change(
                resolver.clone(),
                cert.clone(),
                key.clone(),
                Duration::from_secs(5),
                cancel.clone(),
            ));
            (resolver, None)
        }
        (_, _, Some(secret)) => {
            let kept = TlsSecret::new(
                client.clone(),
                &args.namespace,
                secret,
                &args.webhook_config_name,
                certificate_names(&args),
                Lifetimes::days(args.tls_validity_days),
            );
            let material = kept.ensure().await.map_err(|e| e.to_string())?;
            let resolver =
                certs::CertResolver::new(material.certified_key().map_err(|e| e.to_string())?);
            let ca = material.ca_bundle.clone();
            ca_tx.send_replace(ca.clone());
            tokio::spawn(kept.keep(resolver.clone(), material, ca_tx, serving.clone()));
            (resolver, Some(ca))
        }
        _ => {
            let host = args.webhook_host.clone().unwrap_or_default();
            let generated = certs::self_signed(&host).map_err(|e| e.to_string())?;
            let resolver =
                certs::CertResolver::new(generated.certified_key().map_err(|e| e.to_string())?);
            register_ca = Some(generated.ca_pem.clone());
            (resolver, Some(generated.ca_pem))
        }
    };
    let tls = TlsAcceptor::from(certs::server_config(resolver).map_err(|e| e.to_string())?);
    let placement_tls = args.placement_tls.then(|| tls.clone());

    // Servers first, so the webhook answers as soon as it is registered.
    let webhook_listener = bind(args.webhook_addr, "the webhook").await?;
    let webhook_port = webhook_listener
        .local_addr()
        .map_err(|e| e.to_string())?
        .port();
    let metrics_listener = bind(args.metrics_addr, "health and metrics").await?;
    let placement_listener = match args.placement_addr {
        Some(addr) => Some(bind(addr, "the Placement API").await?),
        None => None,
    };
    // Leadership: only the leader decides claims; the others pass them to it.
    let mut elector = None;
    let mut claims_route = None;
    if args.leader_elect {
        let mut settings = LeaseSettings::new(&args.lease_name, &args.namespace, &identity);
        match claims_endpoint(&args, webhook_port, ca_pem.as_deref()) {
            Ok(endpoint) => {
                let (annotations, rx) = watch::channel(endpoint.annotations());
                settings.annotations = rx;
                // A renewed CA goes on the Lease, so followers keep trusting this leader.
                ca_rx.mark_unchanged();
                tokio::spawn(async move {
                    while ca_rx.changed().await.is_ok() {
                        let ca_pem = ca_rx.borrow_and_update().clone();
                        annotations.send_replace(
                            Endpoint {
                                ca_pem,
                                ..endpoint.clone()
                            }
                            .annotations(),
                        );
                    }
                });
            }
            Err(e) => warn!("other replicas cannot pass claims to this one: {e}"),
        }
        let (e, leading) = Elector::new(client.clone(), settings);
        let (fence, fenced) = watch::channel(false);
        tokio::spawn(fence_claims(
            client.clone(),
            store.clone(),
            leading.clone(),
            e.created_the_lease(),
            fence,
            cancel.clone(),
        ));
        claims_route = Some(ClaimsRoute {
            leading,
            fenced,
            other: e.other_leader(),
        });
        elector = Some(e);
    }
    let mut webhook = Webhook::new(store.clone(), ready.clone(), metrics.clone());
    webhook.events = Some(recorder(client.clone(), &identity));
    webhook.client = Some(client.clone());
    webhook.claims_route = claims_route.clone();
    let webhook = Arc::new(webhook);
    servers.push(
        server::serve_apart(
            "kubeplace-webhook",
            webhook_listener,
            Some(tls),
            move |req| server::handle(webhook.clone(), req),
            lifecycle.clone(),
        )
        .map_err(|e| format!("cannot start the webhook's server: {e}"))?,
    );
    let health = Health {
        metrics: metrics.clone(),
        ready: ready.clone(),
        synced: synced.clone(),
        stopping: stopping_rx,
    };
    servers.push(tokio::spawn(server::serve(
        metrics_listener,
        None,
        move |req| health::handle(health.clone(), req),
        lifecycle.clone(),
    )));

    // Watches: every replica keeps the whole store.
    let mut watches = Vec::new();
    for resource in resources {
        if let Some(state) = kind_watch(&resource, &store, &trigger, &synced, &metrics) {
            watches.push(tokio::spawn(kind_watches::run(
                client.clone(),
                resource,
                state,
            )));
        }
    }

    if let Some(ca) = &register_ca {
        let host = args.webhook_host.as_deref().unwrap_or_default();
        let url = config::base_url(host, webhook_port);
        let configuration = config::webhook_configuration(&args.webhook_config_name, &url, ca);
        config::apply(client.clone(), &configuration)
            .await
            .map_err(|e| {
                format!(
                    "cannot create or update ValidatingWebhookConfiguration {:?}: {e}",
                    args.webhook_config_name
                )
            })?;
        info!(name = %args.webhook_config_name, url = %url, "registered the webhook with a self-signed CA");
    }

    if let Some(listener) = placement_listener {
        servers.push(tokio::spawn(serve_placement(
            client.clone(),
            (store.clone(), args.weighers.clone()),
            trigger.clone(),
            ready.clone(),
            args.namespace.clone(),
            (listener, placement_tls),
            lifecycle.clone(),
        )));
    }

    // Leadership.
    let (always, leader) = watch::channel(!args.leader_elect);
    let mut elector_task = None;
    let leader = match (elector, claims_route) {
        (Some(elector), Some(route)) => {
            elector_task = Some(tokio::spawn(elector.run(cancel.clone())));
            route.leading
        }
        _ => leader,
    };
    {
        let mut leader = leader.clone();
        let metrics = metrics.clone();
        tokio::spawn(async move {
            loop {
                metrics.leader.set(i64::from(*leader.borrow_and_update()));
                if leader.changed().await.is_err() {
                    break;
                }
            }
        });
    }

    let headroom = SharedHeadroomFigures::default();
    tokio::spawn(
        HeadroomCounter {
            store: store.clone(),
            figures: headroom.clone(),
            weighers: args.weighers.clone(),
            trigger: trigger.clone(),
            leader: leader.clone(),
            ready: ready.clone(),
            settings: HeadroomSettings {
                cap: args.headroom_cap,
                interval: Duration::from_secs(args.headroom_interval),
            },
            metrics: metrics.clone(),
        }
        .run(cancel.clone()),
    );
    let reconciler = Reconciler {
        client: client.clone(),
        store: store.clone(),
        headroom,
        weighers: args.weighers.clone(),
        trigger: trigger.clone(),
        leader,
        ready: ready.clone(),
        metrics: metrics.clone(),
        recorder: recorder(client.clone(), &identity),
        pacing: Pacing {
            concurrency: usize::from(args.status_writes_in_flight),
            ..Pacing::default()
        },
        retries: Retries::default(),
    };
    let reconciling = tokio::spawn(reconciler.run(cancel.clone()));

    info!(
        identity = %identity,
        webhook = %args.webhook_addr,
        metrics = %args.metrics_addr,
        placement = ?args.placement_addr,
        leader_elect = args.leader_elect,
        "kubeplace is running"
    );
    let signal = shutdown_signal().await;
    let drain = match signal {
        Stop::Terminate => Duration::from_secs(args.drain_seconds),
        Stop::Interrupt => Duration::ZERO,
    };
    let drained = tokio::time::Instant::now() + drain;
    // Not ready at once, so the Service stops sending requests here; they are still
    // answered until the drain ends. Leadership goes now: another replica takes over.
    stopping.send_replace(true);
    lifecycle.draining.cancel();
    info!(
        drain_seconds = drain.as_secs(),
        "shutting down: not ready, serving until the drain ends"
    );
    cancel.cancel();
    if let Some(task) = elector_task
        && tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .is_err()
    {
        warn!("the leader lease was not released in time");
    }
    let _ = tokio::time::timeout(Duration::from_secs(5), reconciling).await;
    tokio::select! {
        _ = tokio::time::sleep_until(drained) => {}
        _ = shutdown_signal() => info!("a second signal: stopping without waiting out the drain"),
    }
    serving.cancel();
    // Requests in progress are answered before the process ends; every server returns
    // within its stop grace.
    let _ = tokio::time::timeout(server::STOP_GRACE + server::STOP_SLACK * 2, async {
        for s in servers {
            let _ = s.await;
        }
    })
    .await;
    for w in watches {
        w.abort();
    }
    drop(always);
    Ok(())
}

/// Where other replicas reach this one to pass it claims.
fn claims_endpoint(
    args: &RunArgs,
    webhook_port: u16,
    generated_ca: Option<&str>,
) -> Result<Endpoint, String> {
    let address = match &args.claims_address {
        Some(a) => a.clone(),
        None => {
            let host = std::env::var("POD_IP")
                .ok()
                .filter(|h| !h.is_empty())
                .or_else(|| args.webhook_host.clone())
                .ok_or("give --claims-address (or set POD_IP, or --webhook-host)")?;
            if host.contains(':') {
                format!("[{host}]:{webhook_port}")
            } else {
                format!("{host}:{webhook_port}")
            }
        }
    };
    let server_name = args
        .claims_server_name
        .clone()
        .or_else(|| args.webhook_host.clone())
        .ok_or("give --claims-server-name (or --webhook-host)")?;
    let ca_pem = match (&args.ca_file, generated_ca, &args.tls_cert_file) {
        (Some(path), _, _) => std::fs::read_to_string(path)
            .map_err(|e| format!("--ca-file {}: {e}", path.display()))?,
        (None, Some(ca), _) => ca.to_string(),
        (None, None, Some(cert)) => {
            let beside = cert.with_file_name("ca.crt");
            std::fs::read_to_string(&beside)
                .map_err(|e| format!("give --ca-file ({} cannot be read: {e})", beside.display()))?
        }
        (None, None, None) => return Err("give --ca-file".into()),
    };
    Ok(Endpoint {
        address,
        server_name,
        ca_pem,
    })
}

/// How long a claim admitted by the old leader may still be on its way to the API server:
/// the webhook timeout the API server gives every review.
const CLAIMS_FENCE: Duration = Duration::from_secs(10);
/// Longest the new leader waits for its store to hold every Allocation the API server
/// listed, before it tries again.
const CLAIMS_CATCH_UP: Duration = Duration::from_secs(30);

/// Opens the claims decision point when this replica starts leading, once it is sure it
/// sees every claim the previous leader decided; closes it when it stops leading. When
/// this replica created the lease (a fresh install), there was no previous leader and no
/// fence to wait out.
async fn fence_claims(
    client: Client,
    store: SharedStore,
    mut leading: watch::Receiver<bool>,
    created_the_lease: Arc<AtomicBool>,
    fence: watch::Sender<bool>,
    cancel: CancellationToken,
) {
    loop {
        let now_leading = *leading.borrow_and_update();
        fence.send_replace(false);
        if now_leading {
            let first_leader = created_the_lease.swap(false, Ordering::SeqCst);
            let opened = tokio::select! {
                _ = cancel.cancelled() => return,
                _ = leading.changed() => false,
                caught_up = catch_up(&client, &store, first_leader) => caught_up,
            };
            if opened {
                fence.send_replace(true);
                info!("deciding claims: every claim the previous leader decided is in the store");
            } else {
                continue;
            }
        }
        tokio::select! {
            _ = cancel.cancelled() => return,
            changed = leading.changed() => if changed.is_err() { return },
        }
    }
}

/// Waits out [`CLAIMS_FENCE`] (unless `first_leader`), then until the store holds every
/// Allocation a fresh list of the API server shows (at least as new); true once it does.
async fn catch_up(client: &Client, store: &SharedStore, first_leader: bool) -> bool {
    if !first_leader {
        tokio::time::sleep(CLAIMS_FENCE).await;
    }
    let api: kube::Api<kube::api::DynamicObject> =
        kube::Api::all_with(client.clone(), &Kind::Allocation.api_resource());
    loop {
        let listed = match api.list(&kube::api::ListParams::default()).await {
            Ok(l) => l.items,
            Err(e) => {
                warn!(error = %e, "cannot list Allocations to take over claims; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let deadline = tokio::time::Instant::now() + CLAIMS_CATCH_UP;
        loop {
            let missing = {
                let store = store.read().unwrap_or_else(|e| e.into_inner());
                listed.iter().any(|a| {
                    let name = a.metadata.name.as_deref().unwrap_or_default();
                    let want = resource_version(&a.metadata).unwrap_or(0);
                    store
                        .get_cluster(Kind::Allocation, name)
                        .is_none_or(|o| resource_version(o.meta()).unwrap_or(0) < want)
                })
            };
            if !missing {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// How often the Placement API re-reads the custom registries other replicas may have
/// added to.
const REGISTRY_REFRESH: Duration = Duration::from_secs(10);

/// Serves the Placement API once the store holds every kind's first list (answers before
/// then would be wrong, not slow), and keeps its registries up to date. Its headroom
/// weighs candidates by `weighers`.
async fn serve_placement(
    client: Client,
    (store, weighers): (SharedStore, Weighers),
    trigger: Arc<Trigger>,
    mut ready: watch::Receiver<bool>,
    namespace: String,
    (listener, tls): (TcpListener, Option<TlsAcceptor>),
    lifecycle: Lifecycle,
) {
    tokio::select! {
        synced = ready.wait_for(|r| *r) => if synced.is_err() { return },
        _ = lifecycle.stop.cancelled() => return,
    }
    let runtime = tokio::runtime::Handle::current();
    let cluster = Cluster::new(client.clone(), runtime.clone(), namespace);
    let auth = Auth::Kubernetes(KubernetesAuth::new(client, runtime));
    // The API's writes are in the store before the watch sees them: reconcile after each.
    let api = Arc::new(
        PlacementApi::over_cluster(store, cluster, auth)
            .weighing_by(weighers)
            .on_commit(move || trigger.full()),
    );
    let refresh = |api: Arc<PlacementApi>| async move {
        match tokio::task::spawn_blocking(move || api.refresh_registries()).await {
            Ok(Err(e)) => warn!(error = %e, "could not read the Placement registries"),
            Err(e) => warn!(error = %e, "could not read the Placement registries"),
            Ok(Ok(())) => {}
        }
    };
    refresh(api.clone()).await;
    info!(addr = ?listener.local_addr().ok(), "serving the Placement API");
    let server = tokio::spawn(placement_api::serve(
        api.clone(),
        listener,
        tls,
        lifecycle.clone(),
    ));
    loop {
        tokio::select! {
            _ = lifecycle.stop.cancelled() => break,
            _ = tokio::time::sleep(REGISTRY_REFRESH) => refresh(api.clone()).await,
        }
    }
    let _ = server.await;
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::cli::{Cli, Command};

    fn parse(args: &[&str]) -> super::RunArgs {
        let mut argv = vec!["kubeplace", "run"];
        argv.extend_from_slice(args);
        match Cli::try_parse_from(argv).unwrap().command {
            Command::Run(a) => *a,
            _ => unreachable!(),
        }
    }

    #[test]
    fn defaults_and_the_leader_elect_forms() {
        let a = parse(&["--self-signed", "--webhook-host", "127.0.0.1"]);
        assert!(a.leader_elect);
        assert_eq!(a.webhook_addr.to_string(), "0.0.0.0:8443");
        assert_eq!(a.metrics_addr.to_string(), "0.0.0.0:8080");
        assert_eq!(a.lease_name, "kubeplace-leader");
        assert_eq!(a.webhook_config_name, "kubeplace");
        assert!(
            !parse(&[
                "--leader-elect=false",
                "--self-signed",
                "--webhook-host",
                "h"
            ])
            .leader_elect
        );
        assert!(parse(&["--leader-elect", "--self-signed", "--webhook-host", "h"]).leader_elect);
    }

    #[test]
    fn self_signed_needs_a_host_and_excludes_files() {
        let bad = |args: &[&str]| {
            let mut argv = vec!["kubeplace", "run"];
            argv.extend_from_slice(args);
            Cli::try_parse_from(argv).is_err()
        };
        assert!(bad(&["--self-signed"]));
        assert!(bad(&["--tls-cert-file", "c.pem"]));
        assert!(bad(&[
            "--self-signed",
            "--webhook-host",
            "h",
            "--tls-cert-file",
            "c",
            "--tls-key-file",
            "k"
        ]));
        assert!(!bad(&["--tls-cert-file", "c", "--tls-key-file", "k"]));
        assert!(bad(&[
            "--tls-secret",
            "s",
            "--self-signed",
            "--webhook-host",
            "h"
        ]));
        assert!(bad(&[
            "--tls-secret",
            "s",
            "--tls-cert-file",
            "c",
            "--tls-key-file",
            "k"
        ]));
        assert!(bad(&["--tls-secret", "s", "--tls-validity-days", "0"]));
    }

    #[test]
    fn the_secrets_certificate_is_for_the_service_and_the_host() {
        let a = parse(&[
            "--tls-secret",
            "kubeplace-webhook-tls",
            "--webhook-service",
            "kubeplace-webhook",
            "--namespace",
            "ops",
            "--webhook-host",
            "10.0.0.5",
        ]);
        assert_eq!(a.tls_validity_days, 365);
        assert_eq!(a.drain_seconds, 10);
        assert_eq!(
            super::certificate_names(&a),
            [
                "kubeplace-webhook.ops.svc",
                "kubeplace-webhook",
                "kubeplace-webhook.ops",
                "kubeplace-webhook.ops.svc.cluster.local",
                "10.0.0.5"
            ]
        );
        assert!(super::certificate_names(&parse(&["--tls-secret", "s"])).is_empty());
    }
}
