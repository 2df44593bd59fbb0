//! Where Allocations are decided when several replicas run: only the leader decides.
//!
//! Every replica serves the webhook, and the API server may send an Allocation's review to
//! any of them. A replica that does not lead passes the review on, unchanged, to the leader,
//! which it finds on the leader Lease: the leader keeps there the address its webhook
//! listens on, the name its serving certificate is checked against, and the CA that signed
//! it. The leader's answer is returned as it is. So every claim is decided by one ledger,
//! which sees every claim decided before it, admitted or not yet watched. The replica
//! presents its own serving certificate when it passes a review on, so a leader that
//! requires client certificates (`--webhook-client-ca`) accepts it: the leader also trusts
//! the CA that signs the replicas' certificates.
//!
//! A new leader decides nothing until it counts every claim its predecessor decided: it holds
//! its predecessor's record of claims in flight, read from the lease it took, then lists the
//! Allocations from the API server and waits until its store holds every one of them. A
//! review that arrives meanwhile, or while no replica leads, waits for a replica that decides
//! ([`WAIT_FOR_DECIDER`]); only past that is it refused, as a refusal to retry (429 with
//! `Retry-After`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio_rustls::TlsConnector;

use crate::controllers::lease::Recording;
use crate::serving::certs::{self, CertResolver};

/// The leader's webhook address (`HOST:PORT`), on the Lease.
pub const ADDRESS_ANNOTATION: &str = "claims.kubeplace.io/address";
/// The name the leader's serving certificate is checked against, on the Lease.
pub const SERVER_NAME_ANNOTATION: &str = "claims.kubeplace.io/server-name";
/// The PEM of the CA that signed the leader's serving certificate, on the Lease.
pub const CA_ANNOTATION: &str = "claims.kubeplace.io/ca";
/// Marks a review passed on by another replica: it is not passed on again.
pub const FORWARDED_HEADER: &str = "x-kubeplace-forwarded";

/// Longest a passed-on review may take: less than the API server's webhook timeout, so the
/// replica can still answer with a reason.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(8);

/// Longest a review waits for a replica that decides claims: a leader lost and another
/// elected (the lease's duration and a few retries), and the new one caught up. Together with
/// the forward it stays within the webhook's own deadline.
pub(crate) const WAIT_FOR_DECIDER: Duration = Duration::from_secs(5);
/// Longest a review passed on waits at a leader still catching up: with the wait of the
/// replica that passed it on and the forward, within the webhook's own deadline.
pub(crate) const WAIT_AT_LEADER: Duration = Duration::from_secs(3);
/// The largest answer read from the leader.
const MAX_ANSWER: usize = 1024 * 1024;

/// Returns when `rx` changes; never once its sender is gone (a stopped elector says no more),
/// so a wait on it does not spin.
async fn changed<T>(rx: &mut watch::Receiver<T>) {
    if rx.changed().await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Where the leader decides claims.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub address: String,
    pub server_name: String,
    pub ca_pem: String,
}

impl Endpoint {
    /// The endpoint a lease's annotations name, if they name one.
    pub fn from_annotations(annotations: &BTreeMap<String, String>) -> Option<Endpoint> {
        Some(Endpoint {
            address: annotations.get(ADDRESS_ANNOTATION)?.clone(),
            server_name: annotations.get(SERVER_NAME_ANNOTATION)?.clone(),
            ca_pem: annotations.get(CA_ANNOTATION)?.clone(),
        })
    }

    /// The annotations that name this endpoint.
    pub fn annotations(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (ADDRESS_ANNOTATION.to_string(), self.address.clone()),
            (SERVER_NAME_ANNOTATION.to_string(), self.server_name.clone()),
            (CA_ANNOTATION.to_string(), self.ca_pem.clone()),
        ])
    }
}

/// What a replica knows to route claims: whether it leads, whether (leading) it may decide
/// yet, and the lease's annotations while another replica leads.
#[derive(Clone)]
pub struct ClaimsRoute {
    pub leading: watch::Receiver<bool>,
    pub fenced: watch::Receiver<bool>,
    pub other: watch::Receiver<Option<BTreeMap<String, String>>>,
    /// The certificate presented to a leader that asks for one (`--webhook-client-ca`):
    /// this replica's serving certificate, signed by the CA the leader shares.
    identity: Option<Arc<CertResolver>>,
    /// The TLS client for the leader's CA, made once per CA rather than once per claim.
    connector: Arc<Mutex<Option<(String, TlsConnector)>>>,
    /// Writes the leader's record of claims in flight on its lease.
    recording: Option<Recording>,
}

/// Where one Allocation review is decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// Here.
    Decide,
    /// By the leader at this endpoint.
    Forward(Endpoint),
    /// Nowhere now: refuse with this reason.
    Refuse(String),
}

impl ClaimsRoute {
    /// A route from what the election says, presenting `identity` to the leader.
    pub fn new(
        leading: watch::Receiver<bool>,
        fenced: watch::Receiver<bool>,
        other: watch::Receiver<Option<BTreeMap<String, String>>>,
        identity: Option<Arc<CertResolver>>,
    ) -> ClaimsRoute {
        ClaimsRoute {
            leading,
            fenced,
            other,
            identity,
            connector: Arc::default(),
            recording: None,
        }
    }

    /// Claims this replica decides are `allowed` only once `recording` has written them on
    /// the lease.
    pub(crate) fn recording_on(mut self, recording: Recording) -> ClaimsRoute {
        self.recording = Some(recording);
        self
    }

    /// Waits until the claims decided here so far are on the lease (at once without a lease);
    /// an error when they could not be written there (this replica no longer leads).
    pub async fn durable(&self) -> Result<(), String> {
        match &self.recording {
            Some(recording) => recording.durable().await,
            None => Ok(()),
        }
    }

    /// Where a review is decided; `forwarded` when another replica passed it on.
    pub fn route(&self, forwarded: bool) -> Route {
        let leading = *self.leading.borrow();
        if leading {
            return if *self.fenced.borrow() {
                Route::Decide
            } else {
                Route::Refuse(
                    "kubeplace's leader changed a moment ago and is making sure it sees every claim its predecessor decided; retry in a few seconds".into(),
                )
            };
        }
        if forwarded {
            return Route::Refuse(
                "the kubeplace replica this claim was passed to no longer leads; retry".into(),
            );
        }
        match self.other.borrow().as_ref().map(Endpoint::from_annotations) {
            Some(Some(endpoint)) => Route::Forward(endpoint),
            Some(None) => Route::Refuse(
                "the kubeplace leader does not say where it decides claims (its lease has no claims.kubeplace.io/ annotations); upgrade every replica".into(),
            ),
            None => Route::Refuse(
                "no kubeplace replica leads at the moment, and only the leader decides claims; retry in a few seconds".into(),
            ),
        }
    }

    /// [`ClaimsRoute::route`], waiting until `deadline` while no replica decides claims (no
    /// leader, or one still catching up) for one that does.
    pub async fn route_within(&self, forwarded: bool, deadline: tokio::time::Instant) -> Route {
        let (mut leading, mut fenced, mut other) = (
            self.leading.clone(),
            self.fenced.clone(),
            self.other.clone(),
        );
        loop {
            let route = self.route(forwarded);
            // A review passed on waits only at a leader catching up, which decides it as soon
            // as it has caught up; one passed to a replica that does not lead goes back at
            // once, to be passed to whoever does.
            let waits = match &route {
                Route::Refuse(_) => !forwarded || *self.leading.borrow(),
                _ => false,
            };
            if !waits || tokio::time::Instant::now() >= deadline {
                return route;
            }
            tokio::select! {
                _ = changed(&mut leading) => {}
                _ = changed(&mut fenced) => {}
                _ = changed(&mut other) => {}
                _ = tokio::time::sleep_until(deadline) => {}
            }
        }
    }

    /// Waits until the lease names another leader than the one at `endpoint`, or `deadline`.
    pub async fn leader_changed(&self, endpoint: &Endpoint, deadline: tokio::time::Instant) {
        let (mut leading, mut other) = (self.leading.clone(), self.other.clone());
        let still = |other: &watch::Receiver<Option<BTreeMap<String, String>>>| {
            other
                .borrow()
                .as_ref()
                .and_then(Endpoint::from_annotations)
                .as_ref()
                == Some(endpoint)
        };
        while still(&other) && !*leading.borrow() {
            tokio::select! {
                _ = changed(&mut leading) => {}
                changed = other.changed() => if changed.is_err() { return },
                _ = tokio::time::sleep_until(deadline) => return,
            }
        }
    }

    /// Passes an AdmissionReview body to the leader's `/validate/<plural>`; the answer's
    /// body.
    pub async fn forward(
        &self,
        endpoint: &Endpoint,
        plural: &str,
        body: Bytes,
    ) -> Result<Bytes, String> {
        let connector = self.connector(&endpoint.ca_pem)?;
        tokio::time::timeout(FORWARD_TIMEOUT, send(connector, endpoint, plural, body))
            .await
            .map_err(|_| format!("the leader at {} did not answer in time", endpoint.address))?
    }

    /// The TLS client for the leader's CA, presenting this replica's certificate.
    fn connector(&self, ca_pem: &str) -> Result<TlsConnector, String> {
        let mut made = crate::locks::lock(&self.connector);
        if let Some((ca, connector)) = made.as_ref()
            && ca == ca_pem
        {
            return Ok(connector.clone());
        }
        let config = match &self.identity {
            Some(identity) => certs::client_config_presenting(ca_pem, identity.clone()),
            None => certs::client_config(ca_pem),
        }
        .map_err(|e| format!("the leader's CA: {e}"))?;
        let connector = TlsConnector::from(config);
        *made = Some((ca_pem.to_string(), connector.clone()));
        Ok(connector)
    }
}

async fn send(
    connector: TlsConnector,
    endpoint: &Endpoint,
    plural: &str,
    body: Bytes,
) -> Result<Bytes, String> {
    let at = &endpoint.address;
    let name = ServerName::try_from(endpoint.server_name.clone())
        .map_err(|e| format!("{:?} is not a server name: {e}", endpoint.server_name))?;
    let tcp = TcpStream::connect(at.as_str())
        .await
        .map_err(|e| format!("cannot reach the leader at {at}: {e}"))?;
    let tls = connector
        .connect(name, tcp)
        .await
        .map_err(|e| format!("TLS with the leader at {at} failed: {e}"))?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| format!("HTTP with the leader at {at} failed: {e}"))?;
    tokio::spawn(connection);
    let request = Request::builder()
        .method(Method::POST)
        .uri(format!("/validate/{plural}"))
        .header(header::HOST, endpoint.server_name.as_str())
        .header(header::CONTENT_TYPE, "application/json")
        .header(FORWARDED_HEADER, "1")
        .body(Full::new(body))
        .map_err(|e| e.to_string())?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| format!("the leader at {at} failed to answer: {}", with_causes(&e)))?;
    if !response.status().is_success() {
        return Err(format!("the leader at {at} answered {}", response.status()));
    }
    Limited::new(response.into_body(), MAX_ANSWER)
        .collect()
        .await
        .map(|b| b.to_bytes())
        .map_err(|e| format!("the leader's answer could not be read: {e}"))
}

/// An error and its causes: a refused client certificate shows only as the cause of
/// hyper's "connection error".
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(&format!(": {c}"));
        cause = c.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(leading: bool, fenced: bool, other: Option<BTreeMap<String, String>>) -> ClaimsRoute {
        ClaimsRoute::new(
            watch::channel(leading).1,
            watch::channel(fenced).1,
            watch::channel(other).1,
            None,
        )
    }

    fn endpoint() -> Endpoint {
        Endpoint {
            address: "10.0.0.7:8443".into(),
            server_name: "kubeplace-webhook.kubeplace-system.svc".into(),
            ca_pem: "-----BEGIN CERTIFICATE-----\n…".into(),
        }
    }

    #[test]
    fn only_a_fenced_leader_decides() {
        assert_eq!(route(true, true, None).route(false), Route::Decide);
        assert_eq!(route(true, true, None).route(true), Route::Decide);
        assert!(
            matches!(route(true, false, None).route(false), Route::Refuse(m) if m.contains("retry"))
        );
    }

    #[test]
    fn a_follower_passes_claims_to_the_leader_once() {
        let annotated = Some(endpoint().annotations());
        assert_eq!(
            route(false, false, annotated.clone()).route(false),
            Route::Forward(endpoint())
        );
        // A review passed on already is never passed on again: no loops between replicas
        // that disagree for a moment on who leads.
        assert!(matches!(
            route(false, false, annotated).route(true),
            Route::Refuse(_)
        ));
        assert!(
            matches!(route(false, false, None).route(false), Route::Refuse(m) if m.contains("no kubeplace replica leads"))
        );
        assert!(
            matches!(route(false, false, Some(BTreeMap::new())).route(false), Route::Refuse(m) if m.contains("annotations"))
        );
    }

    /// A review passed on to a leader still catching up waits there and is decided as soon
    /// as the fence opens (its sender would otherwise wait for a leader change that never
    /// comes); one passed to a replica that does not lead is sent back at once.
    #[tokio::test(start_paused = true)]
    async fn a_review_passed_on_waits_at_a_leader_catching_up_only() {
        let (leading, leading_rx) = watch::channel(true);
        let (fenced, fenced_rx) = watch::channel(false);
        let r = ClaimsRoute::new(leading_rx, fenced_rx, watch::channel(None).1, None);
        let deadline = tokio::time::Instant::now() + WAIT_AT_LEADER;
        let opening = async {
            tokio::time::sleep(Duration::from_millis(400)).await;
            fenced.send_replace(true);
        };
        let (route, ()) = tokio::join!(r.route_within(true, deadline), opening);
        assert_eq!(route, Route::Decide);
        fenced.send_replace(false);
        leading.send_replace(false);
        let asked = tokio::time::Instant::now();
        assert!(matches!(
            r.route_within(true, asked + WAIT_AT_LEADER).await,
            Route::Refuse(_)
        ));
        assert_eq!(asked.elapsed(), Duration::ZERO, "sent back without waiting");
    }

    #[test]
    fn endpoints_round_trip_through_annotations() {
        assert_eq!(
            Endpoint::from_annotations(&endpoint().annotations()),
            Some(endpoint())
        );
        let mut partial = endpoint().annotations();
        partial.remove(CA_ANNOTATION);
        assert_eq!(Endpoint::from_annotations(&partial), None);
    }
}
