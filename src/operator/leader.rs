//! Leadership: the Lease this replica runs for, the address on it that other replicas pass
//! claims to, and the fence a new leader waits behind before it decides claims.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use kube::Client;
use kubeplace_policy::claims::{InFlight, Ledger, SeenThrough};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::certificate::Serving;
use super::fence::{Listed, fence_claims};
use super::flags::Flags;
use crate::cache::SharedStore;
use crate::controllers::lease::{Elector, LeaseSettings, Recorder};
use crate::webhook::claims_route::{ClaimsRoute, Endpoint};

/// A replica that runs for leader: the elector to run, and the route claims take.
pub(crate) struct Candidacy {
    pub elector: Elector,
    pub claims_route: ClaimsRoute,
}

/// Sets up the election on `--lease-name` and the claims fence (started at once, closed
/// until this replica leads and has caught up). The Lease carries this replica's claims
/// endpoint and `serving`'s CA, kept up to date as the CA is renewed; `serving`'s
/// certificate is presented to the leader when claims are passed to it.
pub(crate) fn run_for_leader(
    flags: &Flags,
    identity: &str,
    client: &Client,
    (store, ledger): (&SharedStore, &Arc<Mutex<Ledger>>),
    (webhook_port, serving): (u16, &Serving),
    cancel: CancellationToken,
) -> Candidacy {
    let ca_pem = serving.ca_pem.as_deref().map_err(String::as_str);
    let mut ca_changes = serving.ca_changes.clone();
    let mut settings =
        LeaseSettings::new(&flags.leader.lease_name, &flags.cluster.namespace, identity);
    settings.lease_duration = flags.leader.leader_elect_lease_duration;
    settings.renew_deadline = flags.leader.leader_elect_renew_deadline;
    settings.retry_period = flags.leader.leader_elect_retry_period;
    match claims_endpoint(flags, webhook_port, ca_pem) {
        Ok(endpoint) => {
            let (annotations, rx) = watch::channel(endpoint.annotations());
            settings.annotations = rx;
            // A renewed CA goes on the Lease, so followers keep trusting this leader.
            ca_changes.mark_unchanged();
            tokio::spawn(async move {
                while ca_changes.changed().await.is_ok() {
                    let ca_pem = ca_changes.borrow_and_update().clone();
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
    let (elector, leading) = Elector::new(client.clone(), settings);
    let (takeover, taken_over) = watch::channel(None);
    let elector = elector.recording(recorder(ledger, store, takeover));
    let recording = elector.recording_handle();
    let (fence, fenced) = watch::channel(false);
    tokio::spawn(fence_claims(
        Listed(client.clone()),
        store.clone(),
        (leading.clone(), taken_over),
        fence,
        cancel,
    ));
    let claims_route = ClaimsRoute::new(
        leading,
        fenced,
        elector.other_leader(),
        Some(serving.resolver.clone()),
    )
    .recording_on(recording);
    Candidacy {
        elector,
        claims_route,
    }
}

/// Where other replicas reach this one to pass it claims.
pub(crate) fn claims_endpoint(
    flags: &Flags,
    webhook_port: u16,
    ca_pem: Result<&str, &str>,
) -> Result<Endpoint, String> {
    let leader = &flags.leader;
    let webhook_host = &flags.webhook.webhook_host;
    let address = match &leader.claims_address {
        Some(a) => a.clone(),
        None => {
            let host = std::env::var("POD_IP")
                .ok()
                .filter(|h| !h.is_empty())
                .or_else(|| webhook_host.clone())
                .ok_or("give --claims-address (or set POD_IP, or --webhook-host)")?;
            if host.contains(':') {
                format!("[{host}]:{webhook_port}")
            } else {
                format!("{host}:{webhook_port}")
            }
        }
    };
    let server_name = leader
        .claims_server_name
        .clone()
        .or_else(|| webhook_host.clone())
        .ok_or("give --claims-server-name (or --webhook-host)")?;
    let ca_pem = ca_pem?.to_string();
    Ok(Endpoint {
        address,
        server_name,
        ca_pem,
    })
}

/// The record of claims in flight the lease carries: the ledger's, with how far the store
/// had come; the predecessor's taken into the ledger, and the point its store had come to
/// sent to the fence (`None` when the lease taken carries no such point).
fn recorder(
    ledger: &Arc<Mutex<Ledger>>,
    store: &SharedStore,
    takeover: watch::Sender<Option<SeenThrough>>,
) -> Recorder {
    let (mine, theirs, store) = (ledger.clone(), ledger.clone(), store.clone());
    Recorder {
        current: Box::new(move || {
            let mut record = crate::locks::lock(&mine).in_flight(Instant::now());
            // Read after the ledger: every claim it no longer records was seen by then.
            record.seen_through = Some(SeenThrough::of(&crate::locks::read(&store)));
            record.to_text()
        }),
        adopt: Box::new(move |text| {
            let point = match text.map(InFlight::from_text) {
                None => None,
                Some(Ok(record)) => {
                    let (claims, writes) = (record.claims.len(), record.writes.len());
                    let point = record.seen_through;
                    crate::locks::lock(&theirs).adopt(record, Instant::now());
                    tracing::info!(
                        claims,
                        writes,
                        seen_through = ?point,
                        "took over the previous leader's claims in flight"
                    );
                    point
                }
                Some(Err(e)) => {
                    warn!(error = %e, "the previous leader's record of claims in flight is not readable; its claims not yet in the store are not counted");
                    None
                }
            };
            takeover.send_replace(point);
        }),
    }
}
