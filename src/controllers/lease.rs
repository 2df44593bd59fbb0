//! Leader election on a `coordination.k8s.io/v1` Lease, as client-go does it: the holder
//! renews the lease every retry period; another replica takes it over when the holder
//! leaves it empty or its record has not changed for a lease duration (judged by the
//! replica's own clock, so clocks need not agree); a leader that cannot renew within the
//! renew deadline steps down; a leader that shuts down releases the lease.
//!
//! The holder keeps on the lease the record of the claims it admitted that the API server
//! may not show yet ([`IN_FLIGHT_ANNOTATION`]), and answers a claim `allowed` only once a
//! write of the lease holding it has succeeded ([`Recording::durable`]). Every write is made
//! from the version read (optimistic concurrency), so a holder that lost the lease cannot
//! write it, and the replica that takes the lease over reads its predecessor's record in the
//! version it replaces ([`Recorder::adopt`]).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Client;
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// How the lease is held.
#[derive(Debug, Clone)]
pub(crate) struct LeaseSettings {
    pub name: String,
    pub namespace: String,
    /// This replica's name in `holderIdentity`.
    pub identity: String,
    /// How long a lease that is not renewed stays held.
    pub lease_duration: Duration,
    /// How long a leader keeps leading while renewals fail.
    pub renew_deadline: Duration,
    /// How often the lease is renewed or tried.
    pub retry_period: Duration,
    /// Annotations the holder keeps on the lease: where the other replicas reach it. They
    /// may change (a renewed CA); every renewal writes the latest.
    pub annotations: watch::Receiver<BTreeMap<String, String>>,
}

impl LeaseSettings {
    /// kubeplace's defaults (`kubeplace run`'s `--leader-elect-*` flags): a 2 s lease, a
    /// 1.5 s renew deadline, a 250 ms retry period, so that a leader that dies is replaced
    /// within seconds (client-go's defaults, 15 s, 10 s and 2 s, would leave claims waiting
    /// half a minute).
    pub fn new(name: &str, namespace: &str, identity: &str) -> LeaseSettings {
        LeaseSettings {
            name: name.to_string(),
            namespace: namespace.to_string(),
            identity: identity.to_string(),
            lease_duration: Duration::from_secs(2),
            renew_deadline: Duration::from_millis(1500),
            retry_period: Duration::from_millis(250),
            annotations: watch::channel(BTreeMap::new()).1,
        }
    }
}

/// The prefix of the annotations that say where the leader decides claims.
pub(crate) const CLAIMS_ANNOTATION_PREFIX: &str = "claims.kubeplace.io/";

/// The holder's record of the claims it admitted that the API server may not show yet.
pub(crate) const IN_FLIGHT_ANNOTATION: &str = "kubeplace.io/claims-in-flight";

/// What the holder keeps on the lease of its claims in flight, and what a new holder does
/// with its predecessor's.
pub(crate) struct Recorder {
    /// The record as it is now (the claims ledger's, as text).
    pub current: Box<dyn Fn() -> String + Send + Sync>,
    /// Takes over a predecessor's record, read from the lease this replica takes, before it
    /// starts leading; `None` when the lease it takes or creates carries none.
    pub adopt: Adopt,
}

/// What takes a predecessor's record over ([`Recorder::adopt`]).
pub(crate) type Adopt = Box<dyn Fn(Option<&str>) + Send + Sync>;

/// A wait for the record to be written: answered once a write of the lease that started
/// after the request has succeeded, or failed.
type Durable = tokio::sync::oneshot::Sender<Result<(), String>>;

/// Why a record of claims in flight could not be written.
const NOT_HOLDING: &str = "this kubeplace replica does not hold the leader lease";

/// Asks the elector to write the lease with the record as it is now, and waits.
#[derive(Clone)]
pub(crate) struct Recording(tokio::sync::mpsc::UnboundedSender<Durable>);

impl Recording {
    /// Waits until the record as it is now is on the lease; an error when this replica does
    /// not hold the lease, or could not write it.
    pub async fn durable(&self) -> Result<(), String> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.0
            .send(tx)
            .map_err(|_| "the leader election has stopped".to_string())?;
        rx.await
            .map_err(|_| "the leader election has stopped".to_string())?
    }
}

/// What to do with the lease as it is now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Action {
    /// There is no lease: create it, held by us.
    Create,
    /// We hold it: renew it.
    Renew,
    /// It is free or expired: take it.
    Acquire,
    /// Someone else holds it.
    Follow { holder: String },
}

/// The holder of a lease; an empty identity is no holder.
pub fn holder(spec: &LeaseSpec) -> Option<&str> {
    spec.holder_identity.as_deref().filter(|h| !h.is_empty())
}

/// Decides on a lease as read; `expired` says whether its record has gone unchanged for
/// longer than its duration.
pub(crate) fn decide(spec: Option<&LeaseSpec>, identity: &str, expired: bool) -> Action {
    let Some(spec) = spec else {
        return Action::Create;
    };
    match holder(spec) {
        Some(h) if h == identity => Action::Renew,
        None => Action::Acquire,
        Some(_) if expired => Action::Acquire,
        Some(h) => Action::Follow {
            holder: h.to_string(),
        },
    }
}

/// The last lease record seen and when it was first seen, by this replica's clock.
#[derive(Debug, Default, Clone)]
pub(crate) struct Observed {
    record: Option<(Option<String>, Option<MicroTime>)>,
    since: Option<Instant>,
}

impl Observed {
    /// Records what was read at `now`; returns whether the record has not changed for
    /// longer than the lease's duration (`default` when the lease names none).
    pub(crate) fn expired(&mut self, spec: &LeaseSpec, now: Instant, default: Duration) -> bool {
        let record = (spec.holder_identity.clone(), spec.renew_time.clone());
        if self.record.as_ref() != Some(&record) {
            self.record = Some(record);
            self.since = Some(now);
        }
        let duration = spec
            .lease_duration_seconds
            .and_then(|s| u64::try_from(s).ok())
            .map(Duration::from_secs)
            .unwrap_or(default);
        self.since
            .is_some_and(|since| now.saturating_duration_since(since) > duration)
    }
}

/// Runs for one replica: tries, renews and releases the lease, and publishes whether this
/// replica leads.
pub(crate) struct Elector {
    api: Api<Lease>,
    settings: LeaseSettings,
    observed: Observed,
    last_renewed: Option<Instant>,
    /// The lease as this replica last wrote it while holding it: a release starts from it.
    held: Option<Lease>,
    leader: watch::Sender<bool>,
    /// The annotations of the lease while another replica holds it.
    other: watch::Sender<Option<BTreeMap<String, String>>>,
    /// The record of claims in flight, when this replica decides claims.
    recorder: Option<Recorder>,
    /// Requests for the record to be written.
    requests: tokio::sync::mpsc::UnboundedReceiver<Durable>,
    requester: tokio::sync::mpsc::UnboundedSender<Durable>,
}

fn conflict_or_exists(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.is_conflict() || s.is_already_exists())
}

impl Elector {
    /// An elector and the receiver that says whether this replica leads.
    pub fn new(client: Client, settings: LeaseSettings) -> (Elector, watch::Receiver<bool>) {
        let (leader, rx) = watch::channel(false);
        let (requester, requests) = tokio::sync::mpsc::unbounded_channel();
        let elector = Elector {
            api: Api::namespaced(client, &settings.namespace),
            settings,
            observed: Observed::default(),
            last_renewed: None,
            held: None,
            leader,
            other: watch::channel(None).0,
            recorder: None,
            requests,
            requester,
        };
        (elector, rx)
    }

    /// Keeps `recorder`'s record of claims in flight on the lease while this replica holds it.
    pub fn recording(mut self, recorder: Recorder) -> Elector {
        self.recorder = Some(recorder);
        self
    }

    /// What asks for the record to be written.
    pub fn recording_handle(&self) -> Recording {
        Recording(self.requester.clone())
    }

    /// The annotations of the lease whenever another replica holds it (none while this
    /// one does, or nobody does).
    pub fn other_leader(&self) -> watch::Receiver<Option<BTreeMap<String, String>>> {
        self.other.subscribe()
    }

    fn seconds(&self) -> i32 {
        i32::try_from(self.settings.lease_duration.as_secs()).unwrap_or(i32::MAX)
    }

    /// One round: reads the lease and creates, renews, takes or follows it. Returns
    /// whether this replica holds the lease afterwards. A write that loses a race (409) is
    /// a follow, not an error.
    pub(crate) async fn try_acquire_or_renew(&mut self) -> Result<bool, kube::Error> {
        let me = self.settings.identity.clone();
        let now = MicroTime(jiff::Timestamp::now());
        let current = self.api.get_opt(&self.settings.name).await?;
        let expired = current
            .as_ref()
            .and_then(|l| l.spec.as_ref())
            .is_some_and(|s| {
                self.observed
                    .expired(s, Instant::now(), self.settings.lease_duration)
            });
        let spec = current.as_ref().map(|l| l.spec.clone().unwrap_or_default());
        let action = decide(spec.as_ref(), &me, expired);
        let others = match &action {
            Action::Follow { .. } => current
                .as_ref()
                .map(|l| l.metadata.annotations.clone().unwrap_or_default()),
            _ => None,
        };
        self.publish_other(others);
        let result = match action {
            Action::Follow { .. } => return Ok(false),
            Action::Create => {
                let mut annotations = self.settings.annotations.borrow().clone();
                if let Some(recorder) = &self.recorder {
                    (recorder.adopt)(None);
                    annotations.insert(IN_FLIGHT_ANNOTATION.to_string(), (recorder.current)());
                }
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.settings.name.clone()),
                        namespace: Some(self.settings.namespace.clone()),
                        annotations: Some(annotations),
                        ..Default::default()
                    },
                    spec: Some(LeaseSpec {
                        holder_identity: Some(me.clone()),
                        lease_duration_seconds: Some(self.seconds()),
                        acquire_time: Some(now.clone()),
                        renew_time: Some(now),
                        lease_transitions: Some(0),
                        ..Default::default()
                    }),
                };
                self.api.create(&PostParams::default(), &lease).await
            }
            action @ (Action::Renew | Action::Acquire) => {
                let mut lease = current.unwrap_or_default();
                // Taken over: the predecessor's claims in flight are counted from now on,
                // and go on the lease again with this replica's record, in the write that
                // takes it (should the write fail, they are counted a while longer than
                // needed, never less).
                if action == Action::Acquire
                    && let Some(recorder) = &self.recorder
                {
                    let record = lease
                        .metadata
                        .annotations
                        .as_ref()
                        .and_then(|a| a.get(IN_FLIGHT_ANNOTATION));
                    (recorder.adopt)(record.map(String::as_str));
                }
                let mut spec = spec.unwrap_or_default();
                if action == Action::Acquire {
                    spec.holder_identity = Some(me.clone());
                    spec.acquire_time = Some(now.clone());
                    spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
                }
                spec.lease_duration_seconds = Some(self.seconds());
                spec.renew_time = Some(now);
                lease.spec = Some(spec);
                // The holder's annotations replace its predecessor's.
                let annotations = lease.metadata.annotations.get_or_insert_with(BTreeMap::new);
                annotations.retain(|k, _| !k.starts_with(CLAIMS_ANNOTATION_PREFIX));
                annotations.extend(self.settings.annotations.borrow().clone());
                if let Some(recorder) = &self.recorder {
                    annotations.insert(IN_FLIGHT_ANNOTATION.to_string(), (recorder.current)());
                }
                self.api
                    .replace(&self.settings.name, &PostParams::default(), &lease)
                    .await
            }
        };
        match result {
            Ok(written) => {
                self.held = Some(written);
                Ok(true)
            }
            Err(e) if conflict_or_exists(&e) => {
                self.held = None;
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// Releases the lease if this replica holds it: no holder, a one-second duration, and the
    /// record of claims in flight as it is now. Whether it was written so. One write, from
    /// the lease as last written here; read again only when another changed it since.
    pub async fn release(&mut self) -> Result<bool, kube::Error> {
        self.leader.send_replace(false);
        if let Some(held) = self.held.take() {
            match self.write_released(held).await {
                Err(e) if conflict_or_exists(&e) => {}
                written => return written,
            }
        }
        let Some(lease) = self.api.get_opt(&self.settings.name).await? else {
            return Ok(false);
        };
        match self.write_released(lease).await {
            Err(e) if conflict_or_exists(&e) => Ok(false),
            written => written,
        }
    }

    /// Writes `lease` released, if this replica is its holder; whether it was written.
    async fn write_released(&self, mut lease: Lease) -> Result<bool, kube::Error> {
        let mut spec = lease.spec.clone().unwrap_or_default();
        if holder(&spec) != Some(self.settings.identity.as_str()) {
            return Ok(false);
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(jiff::Timestamp::now()));
        lease.spec = Some(spec);
        // What is still in flight goes to whoever takes the lease next.
        if let Some(recorder) = &self.recorder {
            lease
                .metadata
                .annotations
                .get_or_insert_with(BTreeMap::new)
                .insert(IN_FLIGHT_ANNOTATION.to_string(), (recorder.current)());
        }
        self.api
            .replace(&self.settings.name, &PostParams::default(), &lease)
            .await
            .map(|_| true)
    }

    /// Publishes the lease's annotations while another replica holds it (none otherwise);
    /// only a change wakes the receivers.
    fn publish_other(&self, others: Option<BTreeMap<String, String>>) {
        self.other
            .send_if_modified(|o| std::mem::replace(o, others.clone()) != others);
    }

    fn set_leader(&self, leading: bool) {
        // Only a change wakes the receivers: a renewal is not news.
        if self
            .leader
            .send_if_modified(|l| std::mem::replace(l, leading) != leading)
        {
            if leading {
                info!(lease = %self.settings.name, identity = %self.settings.identity, "became the leader");
            } else {
                info!(lease = %self.settings.name, identity = %self.settings.identity, "stopped leading");
            }
        }
    }

    /// One round ([`Elector::try_acquire_or_renew`]) and what it means for leading; whether
    /// this replica holds the lease afterwards.
    async fn round(&mut self) -> bool {
        let started = Instant::now();
        match self.try_acquire_or_renew().await {
            Ok(true) => {
                // Counted from before the write: the lease may have been renewed later, never
                // earlier.
                self.last_renewed = Some(started);
                self.set_leader(true);
                true
            }
            Ok(false) => {
                self.set_leader(false);
                false
            }
            Err(e) => {
                warn!(error = %e, lease = %self.settings.name, "cannot read or renew the leader lease");
                let overdue = self
                    .last_renewed
                    .is_none_or(|t| t.elapsed() > self.settings.renew_deadline);
                if overdue {
                    self.set_leader(false);
                }
                false
            }
        }
    }

    /// Leads as [`Elector::lead_until`] says, then says on `released` that the lease is let go, and follows it
    /// (reads only, never taking it) until `serving` ends: a replica that stops serves
    /// reviews through its drain, and passes them on to whoever takes the lease as soon as
    /// it is taken, instead of waiting for a leader it can no longer see.
    pub async fn run_then_follow(
        mut self,
        cancel: CancellationToken,
        serving: CancellationToken,
        released: tokio::sync::oneshot::Sender<()>,
    ) {
        self.lead_until(cancel).await;
        let _ = released.send(());
        let mut next_round = tokio::time::Instant::now();
        loop {
            tokio::select! {
                _ = serving.cancelled() => break,
                _ = tokio::time::sleep_until(next_round) => {
                    self.follow_round().await;
                    next_round = tokio::time::Instant::now() + self.settings.retry_period;
                }
                Some(w) = self.requests.recv() => {
                    let _ = w.send(Err(NOT_HOLDING.to_string()));
                }
            }
        }
    }

    /// Reads the lease and publishes its annotations when another replica holds it.
    async fn follow_round(&mut self) {
        match self.api.get_opt(&self.settings.name).await {
            Ok(current) => {
                let me = self.settings.identity.as_str();
                let others = current
                    .filter(|l| l.spec.as_ref().and_then(holder).is_some_and(|h| h != me))
                    .map(|l| l.metadata.annotations.unwrap_or_default());
                self.publish_other(others);
            }
            Err(e) => {
                warn!(error = %e, lease = %self.settings.name, "cannot read the leader lease")
            }
        }
    }

    /// Holds the lease while it can until `cancel`, then releases it. Requests for the
    /// record of claims in flight are answered by a write of the lease that started after
    /// them: every request waiting when a write starts is answered by it.
    async fn lead_until(&mut self, cancel: CancellationToken) {
        let mut next_round = tokio::time::Instant::now();
        loop {
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = tokio::time::sleep_until(next_round) => {
                    self.round().await;
                    next_round = tokio::time::Instant::now() + self.settings.retry_period;
                }
                Some(first) = self.requests.recv() => {
                    let mut waiting = vec![first];
                    while let Ok(more) = self.requests.try_recv() {
                        waiting.push(more);
                    }
                    let answer = if *self.leader.borrow() && self.round().await {
                        next_round = tokio::time::Instant::now() + self.settings.retry_period;
                        Ok(())
                    } else {
                        Err(NOT_HOLDING.to_string())
                    };
                    for w in waiting {
                        let _ = w.send(answer.clone());
                    }
                }
            }
        }
        // Claims decided before the release wait for their record: the release writes it.
        let mut waiting = Vec::new();
        while let Ok(w) = self.requests.try_recv() {
            waiting.push(w);
        }
        let leading = *self.leader.borrow();
        let recorded = leading
            && match self.release().await {
                Ok(written) => {
                    info!(lease = %self.settings.name, "released the leader lease");
                    written
                }
                Err(e) => {
                    warn!(error = %e, "cannot release the leader lease");
                    false
                }
            };
        self.leader.send_replace(false);
        let answer = if recorded {
            Ok(())
        } else {
            Err(NOT_HOLDING.to_string())
        };
        for w in waiting {
            let _ = w.send(answer.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use http::{Method, Request, Response, StatusCode};
    use kube::client::Body;
    use serde_json::{Value, json};
    use tower_test::mock;

    use super::*;

    fn spec(holder: Option<&str>) -> LeaseSpec {
        LeaseSpec {
            holder_identity: holder.map(str::to_string),
            lease_duration_seconds: Some(15),
            renew_time: Some(MicroTime(jiff::Timestamp::UNIX_EPOCH)),
            ..Default::default()
        }
    }

    #[test]
    fn decides_on_each_kind_of_lease() {
        assert_eq!(decide(None, "me", false), Action::Create);
        assert_eq!(decide(Some(&spec(Some("me"))), "me", true), Action::Renew);
        assert_eq!(decide(Some(&spec(None)), "me", false), Action::Acquire);
        assert_eq!(decide(Some(&spec(Some(""))), "me", false), Action::Acquire);
        assert_eq!(
            decide(Some(&spec(Some("other"))), "me", false),
            Action::Follow {
                holder: "other".into()
            }
        );
        assert_eq!(
            decide(Some(&spec(Some("other"))), "me", true),
            Action::Acquire
        );
    }

    #[test]
    fn expiry_is_judged_by_how_long_the_record_stays_the_same() {
        let mut observed = Observed::default();
        let t0 = Instant::now();
        let held = spec(Some("other"));
        let default = Duration::from_secs(99);
        assert!(!observed.expired(&held, t0, default));
        assert!(!observed.expired(&held, t0 + Duration::from_secs(15), default));
        assert!(observed.expired(&held, t0 + Duration::from_secs(16), default));
        // A renewal restarts the clock.
        let mut renewed = held.clone();
        renewed.renew_time = Some(MicroTime(jiff::Timestamp::from_second(60).unwrap()));
        assert!(!observed.expired(&renewed, t0 + Duration::from_secs(17), default));
        assert!(observed.expired(&renewed, t0 + Duration::from_secs(33), default));
    }

    type Handle = mock::Handle<Request<Body>, Response<Body>>;

    async fn expect(
        handle: &mut Handle,
        method: Method,
        path: &str,
        code: u16,
        reply: Value,
    ) -> Value {
        let (request, send) = handle.next_request().await.expect("a request");
        assert_eq!(request.method(), method);
        assert_eq!(request.uri().path(), path);
        let body = request.into_body().collect_bytes().await.unwrap();
        let sent: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        send.send_response(
            Response::builder()
                .status(StatusCode::from_u16(code).unwrap())
                .body(Body::from(serde_json::to_vec(&reply).unwrap()))
                .unwrap(),
        );
        sent
    }

    async fn assert_no_request(handle: &mut Handle) {
        let next = tokio::time::timeout(Duration::from_millis(200), handle.next_request()).await;
        assert!(matches!(next, Err(_) | Ok(None)), "an unexpected request");
    }

    const PATH: &str =
        "/apis/coordination.k8s.io/v1/namespaces/kubeplace-system/leases/kubeplace-leader";
    const COLLECTION: &str = "/apis/coordination.k8s.io/v1/namespaces/kubeplace-system/leases";

    fn not_found() -> Value {
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404, "message": "not found"})
    }

    fn conflict() -> Value {
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Conflict", "code": 409, "message": "the object has been modified"})
    }

    fn lease(holder: Option<&str>, transitions: i32) -> Value {
        json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "kubeplace-leader", "namespace": "kubeplace-system", "resourceVersion": "41"},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15,
                     "renewTime": "2026-01-01T00:00:00.000000Z", "leaseTransitions": transitions},
        })
    }

    fn elector() -> (Elector, watch::Receiver<bool>, Handle) {
        let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
        let client = Client::new(service, "default");
        let (e, rx) = Elector::new(
            client,
            LeaseSettings::new("kubeplace-leader", "kubeplace-system", "me"),
        );
        (e, rx, handle)
    }

    #[tokio::test]
    async fn creates_a_missing_lease_and_holds_it() {
        let (mut e, _rx, mut handle) = elector();
        let api = tokio::spawn(async move {
            expect(&mut handle, Method::GET, PATH, 404, not_found()).await;
            let sent = expect(
                &mut handle,
                Method::POST,
                COLLECTION,
                201,
                lease(Some("me"), 0),
            )
            .await;
            assert_eq!(sent["spec"]["holderIdentity"], "me");
            assert_eq!(sent["spec"]["leaseDurationSeconds"], 2);
            assert!(sent["spec"]["renewTime"].is_string());
        });
        assert!(e.try_acquire_or_renew().await.unwrap());
        api.await.unwrap();
    }

    #[tokio::test]
    async fn follows_a_lease_someone_else_holds_and_writes_nothing() {
        let (mut e, _rx, mut handle) = elector();
        let api = tokio::spawn(async move {
            expect(&mut handle, Method::GET, PATH, 200, lease(Some("other"), 3)).await;
            handle
        });
        assert!(!e.try_acquire_or_renew().await.unwrap());
        let mut handle = api.await.unwrap();
        // No write followed the read.
        assert_no_request(&mut handle).await;
        drop(e);
    }

    #[tokio::test]
    async fn takes_a_released_lease_and_counts_the_transition() {
        let (mut e, _rx, mut handle) = elector();
        let api = tokio::spawn(async move {
            expect(&mut handle, Method::GET, PATH, 200, lease(None, 3)).await;
            let sent = expect(&mut handle, Method::PUT, PATH, 200, lease(Some("me"), 4)).await;
            assert_eq!(sent["spec"]["holderIdentity"], "me");
            assert_eq!(sent["spec"]["leaseTransitions"], 4);
            assert_eq!(
                sent["metadata"]["resourceVersion"], "41",
                "optimistic concurrency"
            );
            assert!(sent["spec"]["acquireTime"].is_string());
        });
        assert!(e.try_acquire_or_renew().await.unwrap());
        api.await.unwrap();
    }

    /// Each lease taken hands its record (or that it has none) to the new holder, before
    /// the write that takes it.
    #[tokio::test]
    async fn taking_a_lease_hands_over_its_record_or_its_lack_of_one() {
        let (e, _rx, mut handle) = elector();
        let adopted: Arc<Mutex<Vec<Option<String>>>> = Arc::default();
        let seen = adopted.clone();
        let mut e = e.recording(Recorder {
            current: Box::new(|| "mine".to_string()),
            adopt: Box::new(move |record| {
                seen.lock().unwrap().push(record.map(str::to_string));
            }),
        });
        let api = tokio::spawn(async move {
            let mut released = lease(None, 3);
            released["metadata"]["annotations"] = json!({ (IN_FLIGHT_ANNOTATION): "theirs" });
            expect(&mut handle, Method::GET, PATH, 200, released).await;
            let sent = expect(&mut handle, Method::PUT, PATH, 200, lease(Some("me"), 4)).await;
            assert_eq!(
                sent["metadata"]["annotations"][IN_FLIGHT_ANNOTATION],
                "mine"
            );
            expect(&mut handle, Method::GET, PATH, 200, lease(Some("me"), 4)).await;
            expect(&mut handle, Method::PUT, PATH, 200, lease(Some("me"), 4)).await;
            expect(&mut handle, Method::GET, PATH, 200, lease(None, 4)).await;
            expect(&mut handle, Method::PUT, PATH, 200, lease(Some("me"), 5)).await;
        });
        assert!(e.try_acquire_or_renew().await.unwrap());
        assert!(e.try_acquire_or_renew().await.unwrap(), "renewed");
        assert!(e.try_acquire_or_renew().await.unwrap(), "taken again");
        api.await.unwrap();
        assert_eq!(
            *adopted.lock().unwrap(),
            vec![Some("theirs".to_string()), None],
            "a renewal hands nothing over; a lease taken without a record says so"
        );
    }

    #[tokio::test]
    async fn renews_its_own_lease_and_loses_a_race_quietly() {
        let (mut e, _rx, mut handle) = elector();
        let api = tokio::spawn(async move {
            expect(&mut handle, Method::GET, PATH, 200, lease(Some("me"), 1)).await;
            let sent = expect(&mut handle, Method::PUT, PATH, 200, lease(Some("me"), 1)).await;
            assert_eq!(sent["spec"]["holderIdentity"], "me");
            assert_eq!(
                sent["spec"]["leaseTransitions"], 1,
                "a renewal is no transition"
            );
            assert_ne!(sent["spec"]["renewTime"], "2026-01-01T00:00:00.000000Z");
            // Next round another replica wrote first: 409, so we do not lead.
            expect(&mut handle, Method::GET, PATH, 200, lease(None, 1)).await;
            expect(&mut handle, Method::PUT, PATH, 409, conflict()).await;
        });
        assert!(e.try_acquire_or_renew().await.unwrap());
        assert!(!e.try_acquire_or_renew().await.unwrap());
        api.await.unwrap();
    }

    #[tokio::test]
    async fn each_renewal_writes_the_latest_claims_annotations() {
        let (service, mut handle) = mock::pair::<Request<Body>, Response<Body>>();
        let mut settings = LeaseSettings::new("kubeplace-leader", "kubeplace-system", "me");
        let ca = |pem: &str| {
            BTreeMap::from([(format!("{CLAIMS_ANNOTATION_PREFIX}ca"), pem.to_string())])
        };
        let (annotations, rx) = watch::channel(ca("old CA"));
        settings.annotations = rx;
        let (mut e, _rx) = Elector::new(Client::new(service, "default"), settings);
        let api = tokio::spawn(async move {
            let mut sent = Vec::new();
            for _ in 0..2 {
                expect(&mut handle, Method::GET, PATH, 200, lease(Some("me"), 1)).await;
                let put = expect(&mut handle, Method::PUT, PATH, 200, lease(Some("me"), 1)).await;
                sent.push(put["metadata"]["annotations"]["claims.kubeplace.io/ca"].clone());
            }
            sent
        });
        assert!(e.try_acquire_or_renew().await.unwrap());
        // The CA was renewed in the Secret: followers must trust the new one.
        annotations.send_replace(ca("new CA"));
        assert!(e.try_acquire_or_renew().await.unwrap());
        assert_eq!(api.await.unwrap(), ["old CA", "new CA"]);
    }

    #[tokio::test]
    async fn release_empties_the_holder() {
        let (mut e, rx, mut handle) = elector();
        let api = tokio::spawn(async move {
            expect(&mut handle, Method::GET, PATH, 200, lease(Some("me"), 2)).await;
            let sent = expect(&mut handle, Method::PUT, PATH, 200, lease(None, 2)).await;
            assert!(sent["spec"].get("holderIdentity").is_none(), "{sent}");
            assert_eq!(sent["spec"]["leaseDurationSeconds"], 1);
            // Someone else's lease is left alone.
            expect(&mut handle, Method::GET, PATH, 200, lease(Some("other"), 3)).await;
            handle
        });
        e.release().await.unwrap();
        assert!(!*rx.borrow());
        e.release().await.unwrap();
        let mut handle = api.await.unwrap();
        assert_no_request(&mut handle).await;
        drop(e);
    }

    #[tokio::test]
    async fn once_released_follows_the_lease_until_serving_ends() {
        let (e, mut rx, mut handle) = elector();
        let other = e.other_leader();
        let (cancel, serving) = (CancellationToken::new(), CancellationToken::new());
        let (released, was_released) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(e.run_then_follow(cancel.clone(), serving.clone(), released));
        expect(&mut handle, Method::GET, PATH, 200, lease(Some("me"), 0)).await;
        expect(&mut handle, Method::PUT, PATH, 200, lease(Some("me"), 0)).await;
        rx.wait_for(|l| *l).await.unwrap();
        cancel.cancel();
        // Released in one write, from the lease as last written.
        expect(&mut handle, Method::PUT, PATH, 200, lease(None, 0)).await;
        was_released.await.unwrap();
        assert!(!*rx.borrow());
        // Released, it reads the lease and learns who took it; it never writes.
        let mut taken = lease(Some("them"), 1);
        taken["metadata"]["annotations"] = json!({"claims.kubeplace.io/address": "10.0.0.2:8443"});
        expect(&mut handle, Method::GET, PATH, 200, taken).await;
        let mut seen = other.clone();
        seen.wait_for(|o| o.is_some()).await.unwrap();
        assert_eq!(
            other
                .borrow()
                .as_ref()
                .unwrap()
                .get("claims.kubeplace.io/address")
                .map(String::as_str),
            Some("10.0.0.2:8443")
        );
        serving.cancel();
        // A read already on its way is answered; nothing but reads comes.
        let mut task = task;
        loop {
            tokio::select! {
                done = &mut task => { done.unwrap(); break; }
                request = handle.next_request() => {
                    let Some((request, send)) = request else { break };
                    assert_eq!(request.method(), Method::GET, "a released replica wrote the lease");
                    let body = serde_json::to_vec(&lease(Some("them"), 1)).unwrap();
                    send.send_response(Response::builder().status(200).body(Body::from(body)).unwrap());
                }
            }
        }
        assert_no_request(&mut handle).await;
    }

    #[tokio::test]
    async fn run_leads_then_releases_on_cancel() {
        let (e, mut rx, mut handle) = elector();
        let cancel = CancellationToken::new();
        let until = cancel.clone();
        let task = tokio::spawn(async move {
            let mut e = e;
            e.lead_until(until).await;
        });
        expect(&mut handle, Method::GET, PATH, 200, lease(Some("me"), 0)).await;
        expect(&mut handle, Method::PUT, PATH, 200, lease(Some("me"), 0)).await;
        rx.wait_for(|l| *l).await.unwrap();
        cancel.cancel();
        let sent = expect(&mut handle, Method::PUT, PATH, 200, lease(None, 0)).await;
        assert!(sent["spec"].get("holderIdentity").is_none());
        task.await.unwrap();
        assert!(!*rx.borrow());
    }

    /// A release whose write from the lease last written meets a change (409) reads the
    /// lease again and releases it from there.
    #[tokio::test]
    async fn a_release_that_meets_a_change_reads_the_lease_again() {
        let (mut e, mut rx, mut handle) = elector();
        let cancel = CancellationToken::new();
        let until = cancel.clone();
        let task = tokio::spawn(async move {
            e.lead_until(until).await;
            e
        });
        expect(&mut handle, Method::GET, PATH, 200, lease(Some("me"), 0)).await;
        expect(&mut handle, Method::PUT, PATH, 200, lease(Some("me"), 0)).await;
        rx.wait_for(|l| *l).await.unwrap();
        cancel.cancel();
        let conflict = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Conflict", "code": 409});
        expect(&mut handle, Method::PUT, PATH, 409, conflict).await;
        expect(&mut handle, Method::GET, PATH, 200, lease(Some("me"), 1)).await;
        let sent = expect(&mut handle, Method::PUT, PATH, 200, lease(None, 1)).await;
        assert!(sent["spec"].get("holderIdentity").is_none());
        let _ = task.await.unwrap();
        assert!(!*rx.borrow());
    }
}
