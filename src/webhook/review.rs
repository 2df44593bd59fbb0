//! An AdmissionReview answered: the request read, the objects it carries, the verdict of
//! kubeplace's admission over the operator's shared store (claims at the ledger, passed to
//! the leader with several replicas), and the response, refused with the Status code and
//! reason of its kind.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::core::DynamicObject;
use kube::core::admission::{self as k8s, AdmissionRequest, AdmissionResponse, AdmissionReview};
use tokio::sync::watch;

use super::claims_route::{self, ClaimsRoute, Route};
use super::event_budget::EventBudget;
use super::read_through;
use crate::cache::{SharedStore, to_object};
use crate::metrics::Metrics;
use kubeplace_api::{API_VERSION, GROUP, Kind, Object};
use kubeplace_policy::admission::Refusal;
use kubeplace_policy::admission::{Operation, Verdict, admit};
use kubeplace_policy::claims::Ledger;

/// The largest request body read (the API server's own limit on objects is 3 MiB).
pub(crate) const MAX_BODY: usize = 3 * 1024 * 1024;

/// How long one request may take, reading included; the webhook configuration gives the
/// API server 10 s.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(9);

/// The `apiVersion` of the AdmissionReviews served.
pub(crate) const ADMISSION_API_VERSION: &str = "admission.k8s.io/v1";

/// The webhook's state: the store it answers from and whether it is synced.
pub struct Webhook {
    pub(super) store: SharedStore,
    ready: watch::Receiver<bool>,
    pub(super) metrics: Arc<Metrics>,
    /// How long a request waits for the store's initial sync before it is refused.
    pub sync_wait: Duration,
    /// How long to wait before reviewing a denial again (see [`Webhook::review`]).
    pub recheck_after: Duration,
    /// Where a Warning Event goes for each object kubeplace's admission rejects.
    pub events: Option<kube::runtime::events::Recorder>,
    /// How many of those Events may still be published (see [`event_budget`]).
    event_budget: Mutex<EventBudget>,
    /// The decision point for Allocations: one claim at a time, each seeing the claims
    /// admitted before it that the watches have not delivered yet. The replica's Placement
    /// API decides its own claims beside the same ledger.
    pub claims: Arc<Mutex<Ledger>>,
    /// The API server, read on a cache miss (see [`read_through`]); none, none is read.
    pub client: Option<kube::Client>,
    /// How long a denial waits for the watches to deliver referenced objects that the API
    /// server has but the store lacks.
    pub read_through_wait: Duration,
    /// With several replicas: Allocations are decided by the leader only (see
    /// [`claims_route`]). None: this replica decides every claim it receives.
    pub claims_route: Option<ClaimsRoute>,
}

/// How long an admitted claim that the watch has not shown holds its capacity.
const CLAIM_HOLD: Duration = Duration::from_secs(30);

/// A replica's claims ledger, shared by its webhook and its Placement API.
pub fn claims_ledger() -> Arc<Mutex<Ledger>> {
    Arc::new(Mutex::new(Ledger::new(CLAIM_HOLD)))
}

/// An answer and how to count it.
pub(crate) struct Answer {
    pub(super) kind: String,
    pub(super) verdict: &'static str,
    pub(super) response: AdmissionResponse,
}

impl Answer {
    pub(super) fn new(kind: &str, verdict: &'static str, response: AdmissionResponse) -> Answer {
        Answer {
            kind: kind.to_string(),
            verdict,
            response,
        }
    }
}

/// Why a review is refused while the store has not listed every object yet.
pub(crate) const NOT_SYNCED: &str =
    "kubeplace is starting and has not listed every object yet; try again in a few seconds";

/// A response for a request that cannot be read; `uid` when it could be found.
pub fn invalid(message: impl Into<String>, uid: Option<String>) -> AdmissionResponse {
    let mut r = AdmissionResponse::invalid(message.into());
    r.result.code = 400;
    r.result.reason = "BadRequest".into();
    if let Some(uid) = uid {
        r.uid = uid;
    }
    r
}

/// A denial with the Status code and reason of its kind ([`Refusal::code`],
/// [`Refusal::reason`]), which the API server passes to the client: kubectl prints
/// `Error from server (<reason>): … admission webhook "…" denied the request: <message>`,
/// and client-go retries a 429 after its `Retry-After`, which the API server sets from
/// `details.retryAfterSeconds`.
pub(crate) fn denied(
    response: AdmissionResponse,
    refusal: Refusal,
    message: impl Into<String>,
) -> AdmissionResponse {
    let mut r = response.deny(message.into());
    r.result.status = Some(kube::core::response::StatusSummary::Failure);
    r.result.code = refusal.code();
    r.result.reason = refusal.reason().into();
    if let Some(seconds) = refusal.retry_after_seconds() {
        r.result.details = Some(kube::core::response::StatusDetails {
            name: String::new(),
            group: String::new(),
            kind: String::new(),
            uid: String::new(),
            causes: Vec::new(),
            retry_after_seconds: seconds,
        });
    }
    r
}

/// Whether an answer is a refusal to retry because its replica could not decide.
fn unavailable(answer: &AdmissionResponse) -> bool {
    !answer.allowed
        && answer.result.code == Refusal::Unavailable.code()
        && answer.result.reason == Refusal::Unavailable.reason()
}

impl Webhook {
    pub fn new(store: SharedStore, ready: watch::Receiver<bool>, metrics: Arc<Metrics>) -> Webhook {
        Webhook {
            store,
            ready,
            metrics,
            sync_wait: Duration::from_secs(5),
            recheck_after: Duration::from_millis(250),
            events: None,
            event_budget: Mutex::default(),
            claims: claims_ledger(),
            client: None,
            read_through_wait: Duration::from_secs(3),
            claims_route: None,
        }
    }

    /// The operator's metrics.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Admission's verdict, worked out on a blocking thread: the async workers stay free
    /// meanwhile, and the request's deadline ([`REQUEST_TIMEOUT`]) can end the wait for a
    /// review that takes too long (a Flavor of tens of thousands of extra specs, a store
    /// held by a long write), where a review on the worker would run to its end first.
    async fn admit_now(
        &self,
        op: Operation,
        object: &Object,
        old: Option<&Object>,
        dry_run: bool,
    ) -> Verdict {
        let (store, claims) = (self.store.clone(), self.claims.clone());
        let (object, old) = (object.clone(), old.cloned());
        let review = tokio::task::spawn_blocking(move || {
            admit_in(&store, &claims, op, &object, old.as_ref(), dry_run)
        });
        match review.await {
            Ok(verdict) => verdict,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => Verdict::rejected("kubeplace is shutting down; retry"),
        }
    }

    /// Publishes a Warning Event `Rejected` about the object, without holding up the answer,
    /// unless the object or the webhook as a whole has used up its Events for the minute.
    fn report_rejection(&self, object: &kubeplace_api::Object, message: &str) {
        let Some(recorder) = self.events.clone() else {
            return;
        };
        let key = (
            object.kind().to_string(),
            object.meta().namespace.clone().unwrap_or_default(),
            object.name().to_string(),
        );
        if !crate::locks::lock(&self.event_budget).allow(&key, Instant::now()) {
            tracing::debug!(kind = %key.0, namespace = %key.1, name = %key.2,
                "no Event for this denial: too many in the last minute");
            return;
        }
        let reference = k8s_openapi::api::core::v1::ObjectReference {
            api_version: Some(API_VERSION.to_string()),
            kind: Some(object.kind().to_string()),
            name: Some(object.name().to_string()),
            namespace: object.meta().namespace.clone(),
            ..Default::default()
        };
        let event = kube::runtime::events::Event {
            type_: kube::runtime::events::EventType::Warning,
            reason: "Rejected".into(),
            note: Some(message.chars().take(1000).collect()),
            action: "Admit".into(),
            secondary: None,
        };
        tokio::spawn(async move {
            let _ = recorder.publish(&event, &reference).await;
        });
    }

    /// Answers a review of one of kubeplace's kinds, sent to `/validate/<plural>`.
    pub(super) async fn answer_kind(&self, plural: &str, body: &[u8], forwarded: bool) -> Answer {
        let label = Kind::from_plural(plural)
            .map(|k| k.as_str().to_string())
            .unwrap_or_else(|| plural.to_string());
        let (kind, request) = match read_request(plural, body) {
            Ok(read) => read,
            Err((message, uid)) => {
                return Answer {
                    kind: label,
                    verdict: "invalid",
                    response: invalid(message, uid),
                };
            }
        };
        let response = AdmissionResponse::from(&request);
        let deny = |refusal: Refusal, message: String| Answer {
            kind: label.clone(),
            verdict: "denied",
            response: denied(response.clone(), refusal, message),
        };
        let (op, object, old) = match reviewed_objects(kind, &request) {
            Ok(Some(objects)) => objects,
            // CONNECT is not a change to review.
            Ok(None) => {
                return Answer {
                    kind: label,
                    verdict: "allowed",
                    response,
                };
            }
            Err(message) => return deny(Refusal::Invalid, message),
        };
        if !self.wait_until_synced().await {
            return deny(Refusal::Unavailable, NOT_SYNCED.into());
        }
        if matches!(kind, Kind::Allocation | Kind::PlacementWrite)
            && let Some(answer) = self
                .routed(&label, plural, body, forwarded, &response)
                .await
        {
            return answer;
        }
        let mut verdict = self
            .decide(op, &object, old.as_ref(), request.dry_run)
            .await;
        if verdict.allowed && !request.dry_run {
            verdict = self.recorded(&object, verdict).await;
        }
        if matches!(kind, Kind::Allocation | Kind::PlacementWrite) && !request.dry_run {
            self.metrics
                .claim(&label, (!verdict.allowed).then_some(verdict.refusal));
        }
        let mut answer = if verdict.allowed {
            Answer {
                kind: label,
                verdict: "allowed",
                response,
            }
        } else {
            // A dry run must change nothing (the webhook registers `sideEffects: None`),
            // and an Event is a write.
            if !request.dry_run && !verdict.refusal.is_retryable() {
                self.report_rejection(&object, &verdict.message);
            }
            deny(verdict.refusal, verdict.message)
        };
        if !verdict.warnings.is_empty() {
            answer.response.warnings = Some(verdict.warnings);
        }
        answer
    }

    /// With several replicas, a claim is decided by the leader only: `None` when this
    /// replica decides it, else the answer (the leader's, or a refusal when there is none to
    /// ask). While no replica decides claims (a leader being elected, a new one catching up,
    /// one the lease still names that cannot be reached) the review waits, up to
    /// [`claims_route::WAIT_FOR_DECIDER`], and is refused as [`Refusal::Unavailable`] after.
    pub(super) async fn routed(
        &self,
        label: &str,
        plural: &str,
        body: &[u8],
        forwarded: bool,
        response: &AdmissionResponse,
    ) -> Option<Answer> {
        let route = self.claims_route.as_ref()?;
        // Refused here for want of a replica that decides: counted as this replica's.
        let deny = |message: String| {
            self.metrics.claim(label, Some(Refusal::Unavailable));
            Answer::new(
                label,
                "denied",
                denied(response.clone(), Refusal::Unavailable, message),
            )
        };
        let started = tokio::time::Instant::now();
        let deadline = started
            + if forwarded {
                claims_route::WAIT_AT_LEADER
            } else {
                claims_route::WAIT_FOR_DECIDER
            };
        loop {
            let route_taken = route.route_within(forwarded, deadline).await;
            tracing::debug!(kind = label, forwarded, waited_ms = started.elapsed().as_millis() as u64, route = ?route_taken, "routed a claim");
            let endpoint = match route_taken {
                Route::Decide => return None,
                Route::Refuse(reason) => return Some(deny(reason)),
                Route::Forward(endpoint) => endpoint,
            };
            match self.forwarded(route, &endpoint, plural, body).await {
                // It no longer leads, or cannot decide yet (a handover under way): ask whoever
                // the lease names next, within the deadline, rather than refuse at once.
                Ok(leader) if unavailable(&leader) && tokio::time::Instant::now() < deadline => {
                    tracing::debug!(
                        kind = label,
                        waited_ms = started.elapsed().as_millis() as u64,
                        "the leader asked cannot decide now"
                    );
                    route.leader_changed(&endpoint, deadline).await;
                }
                Ok(mut leader) => {
                    // The answer is to this request: its uid and its types (which are not
                    // part of a response's JSON).
                    leader.uid = response.uid.clone();
                    leader.types = response.types.clone();
                    let verdict = if leader.allowed { "allowed" } else { "denied" };
                    return Some(Answer::new(label, verdict, leader));
                }
                // The lease may still name a leader that is gone: wait for it to name another.
                Err(e) if tokio::time::Instant::now() < deadline => {
                    tracing::debug!(kind = label, error = %e, waited_ms = started.elapsed().as_millis() as u64, "the leader could not be asked");
                    route.leader_changed(&endpoint, deadline).await;
                }
                Err(e) => {
                    return Some(deny(format!(
                        "claims are decided by kubeplace's leader, and it could not be asked: {e}; retry"
                    )));
                }
            }
        }
    }

    /// Takes a claim admitted here to the lease's record of claims in flight before it is
    /// answered `allowed` (with several replicas): a replica that takes the lease over then
    /// counts it. Refused as [`Refusal::Unavailable`], and taken back from the ledger, when it
    /// cannot be written there (this replica no longer leads).
    pub(super) async fn recorded(&self, object: &Object, verdict: Verdict) -> Verdict {
        let Some(route) = &self.claims_route else {
            return verdict;
        };
        if !matches!(object, Object::Allocation(_) | Object::PlacementWrite(_)) {
            return verdict;
        }
        match route.durable().await {
            Ok(()) => verdict,
            Err(why) => {
                let mut ledger = crate::locks::lock(&self.claims);
                match object {
                    Object::PlacementWrite(_) => ledger.withdraw_write(object.name()),
                    _ => ledger.withdraw(
                        object.name(),
                        object.meta().uid.as_deref(),
                        object.meta().generation,
                    ),
                }
                Verdict::refused(
                    Refusal::Unavailable,
                    format!(
                        "the claim could not be recorded where the next leader reads it ({why}); retry"
                    ),
                )
            }
        }
    }

    /// The leader's answer to a review passed on to it.
    async fn forwarded(
        &self,
        route: &ClaimsRoute,
        endpoint: &claims_route::Endpoint,
        plural: &str,
        body: &[u8],
    ) -> Result<AdmissionResponse, String> {
        let answer = route
            .forward(endpoint, plural, bytes::Bytes::copy_from_slice(body))
            .await?;
        let review: AdmissionReview<DynamicObject> = serde_json::from_slice(&answer)
            .map_err(|e| format!("the leader's answer is not an AdmissionReview: {e}"))?;
        review
            .response
            .ok_or_else(|| "the leader's answer has no response".to_string())
    }

    /// Whether the store has listed every kind, waiting up to [`Webhook::sync_wait`].
    pub(super) async fn wait_until_synced(&self) -> bool {
        let mut ready = self.ready.clone();
        tokio::time::timeout(self.sync_wait, ready.wait_for(|r| *r))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Admission's verdict; a denial is reviewed once more after [`Webhook::recheck_after`],
    /// when the watches have caught up with objects created just before this one.
    async fn decide(
        &self,
        op: Operation,
        object: &Object,
        old: Option<&Object>,
        dry_run: bool,
    ) -> Verdict {
        let verdict = self.admit_now(op, object, old, dry_run).await;
        if verdict.allowed || self.recheck_after.is_zero() {
            return verdict;
        }
        tokio::time::sleep(self.recheck_after).await;
        let verdict = self.admit_now(op, object, old, dry_run).await;
        if verdict.allowed {
            return verdict;
        }
        self.read_through(op, object, old, dry_run)
            .await
            .unwrap_or(verdict)
    }

    /// A review again once the watches have delivered the objects this one names that the
    /// store lacks but the API server has; `None` when there are none, or when they did not
    /// arrive within [`Webhook::read_through_wait`].
    async fn read_through(
        &self,
        op: Operation,
        object: &Object,
        old: Option<&Object>,
        dry_run: bool,
    ) -> Option<Verdict> {
        let client = self.client.as_ref()?;
        let missing = {
            let store = crate::locks::read(&self.store);
            read_through::missing_references(object, &store)
        };
        if missing.is_empty() {
            return None;
        }
        let found = read_through::existing(client, &missing).await;
        if found.is_empty() {
            return None;
        }
        let deadline = tokio::time::Instant::now() + self.read_through_wait;
        loop {
            let arrived = {
                let store = crate::locks::read(&self.store);
                found
                    .iter()
                    .all(|(kind, name)| store.get_cluster(*kind, name).is_some())
            };
            if arrived {
                return Some(self.admit_now(op, object, old, dry_run).await);
            }
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(read_through::POLL).await;
        }
    }
}

/// Admission's verdict on one object over the replica's store: claims, and writes of several
/// objects, are decided at one point (the ledger taken before the store, as the Placement
/// API takes them); any other object is judged against the store.
fn admit_in(
    store: &SharedStore,
    claims: &Mutex<Ledger>,
    op: Operation,
    object: &Object,
    old: Option<&Object>,
    dry_run: bool,
) -> Verdict {
    match object {
        Object::Allocation(_) | Object::PlacementWrite(_) => {
            let mut claims = crate::locks::lock(claims);
            let store = crate::locks::read(store);
            claims.decide(op, object, old, &store, Instant::now(), dry_run)
        }
        _ => admit(op, object, old, &crate::locks::read(store)),
    }
}

/// Reads the AdmissionReview posted to `/validate/<plural>`: the kind served there and the
/// request, or why the body is not one (with the request's uid when it could be found).
fn read_request(
    plural: &str,
    body: &[u8],
) -> Result<(Kind, AdmissionRequest<DynamicObject>), (String, Option<String>)> {
    let Some(kind) = Kind::from_plural(plural) else {
        return Err((
            format!("kubeplace serves no kind at /validate/{plural}"),
            None,
        ));
    };
    read_review(body).map(|request| (kind, request))
}

/// An object of a review read as the Kubernetes type `T` (a `kind`), or why it cannot be.
pub(crate) fn read_object<T: serde::de::DeserializeOwned>(
    object: Option<&DynamicObject>,
    kind: &str,
) -> Result<Option<T>, String> {
    object
        .map(|o| {
            serde_json::to_value(o)
                .and_then(serde_json::from_value)
                .map_err(|e| format!("the {kind} cannot be read: {e}"))
        })
        .transpose()
}

/// The request of an AdmissionReview v1, or why it cannot be read (with its uid when found).
pub(crate) fn read_review(
    body: &[u8],
) -> Result<AdmissionRequest<DynamicObject>, (String, Option<String>)> {
    let review: AdmissionReview<DynamicObject> = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(e) => {
            // Echo the uid if there is one, so the API server can match the answer.
            let uid = serde_json::from_slice::<serde_json::Value>(body)
                .ok()
                .and_then(|v| v.pointer("/request/uid")?.as_str().map(str::to_string));
            return Err((
                format!("the request body is not an AdmissionReview: {e}"),
                uid,
            ));
        }
    };
    let uid = review.request.as_ref().map(|r| r.uid.clone());
    if review.types.api_version != ADMISSION_API_VERSION || review.types.kind != "AdmissionReview" {
        return Err((
            format!(
                "expected apiVersion {ADMISSION_API_VERSION}, kind AdmissionReview; got apiVersion {:?}, kind {:?}",
                review.types.api_version, review.types.kind
            ),
            uid,
        ));
    }
    review
        .try_into()
        .map_err(|_| ("the AdmissionReview has no request".to_string(), None))
}

/// The operation, the object under review and (for an update) the stored one, read as
/// kubeplace objects; `None` for CONNECT, or the reason for a denial.
fn reviewed_objects(
    kind: Kind,
    request: &AdmissionRequest<DynamicObject>,
) -> Result<Option<(Operation, Object, Option<Object>)>, String> {
    if request.kind.group != GROUP || request.kind.kind != kind.as_str() {
        return Err(format!(
            "this webhook reviews {kind}.{GROUP}; the request is for {:?} in group {:?}",
            request.kind.kind, request.kind.group
        ));
    }
    let op = match request.operation {
        k8s::Operation::Create => Operation::Create,
        k8s::Operation::Update => Operation::Update,
        k8s::Operation::Delete => Operation::Delete,
        k8s::Operation::Connect => return Ok(None),
    };
    let sent = if op == Operation::Delete {
        request.old_object.as_ref()
    } else {
        request.object.as_ref()
    };
    let Some(sent) = sent else {
        return Err(format!(
            "the {:?} request carries no object to review",
            request.operation
        ));
    };
    let name = sent
        .metadata
        .name
        .clone()
        .unwrap_or_else(|| request.name.clone());
    if let Some(types) = &sent.types
        && types.api_version != API_VERSION
    {
        return Err(format!(
            "{kind} {name:?}: apiVersion is {:?}; kubeplace serves {API_VERSION}",
            types.api_version
        ));
    }
    if let Err(why) = kubeplace_api::manifest::check_object_name(&name) {
        return Err(format!("{kind} {name:?}: metadata.name: {why}"));
    }
    let object = to_object(kind, sent).map_err(|e| format!("{kind} {name:?} is invalid: {e}"))?;
    let old = match op {
        Operation::Update => request
            .old_object
            .as_ref()
            .and_then(|o| to_object(kind, o).ok()),
        _ => None,
    };
    Ok(Some((op, object, old)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::webhook::event_budget;

    /// Each kind of refusal is answered with its Status code and reason, and one that only
    /// time mends with a retry hint, which the API server turns into `Retry-After`.
    #[test]
    fn each_kind_of_refusal_is_its_status() {
        let request: AdmissionRequest<DynamicObject> = serde_json::from_value(serde_json::json!({
            "uid": "u", "kind": {"group": "", "version": "v1", "kind": "X"},
            "resource": {"group": "", "version": "v1", "resource": "xs"},
            "operation": "CREATE", "userInfo": {}, "name": "x",
            "dryRun": false, "options": null, "object": null, "oldObject": null
        }))
        .unwrap();
        for refusal in Refusal::ALL {
            let r = denied(AdmissionResponse::from(&request), refusal, "why");
            assert!(!r.allowed);
            assert_eq!(
                (r.result.code, r.result.reason.as_str()),
                (refusal.code(), refusal.reason()),
                "{refusal:?}"
            );
            assert_eq!(
                r.result.details.as_ref().map(|d| d.retry_after_seconds),
                refusal.retry_after_seconds(),
                "{refusal:?}"
            );
            assert_eq!(r.result.message, "why");
        }
    }
    use http::{Method, Request, Response};
    use kube::Client;
    use kube::client::Body;
    use serde_json::{Value, json};
    use tower_test::mock;

    use crate::controllers::reconciler::recorder;

    /// An AdmissionReview creating a Flavor that admission denies (a "preferred" trait).
    fn rejected_flavor(dry_run: bool) -> Vec<u8> {
        rejected_flavor_named("c1.preferred-avx", dry_run)
    }

    /// [`rejected_flavor`], of the Flavor `name`.
    fn rejected_flavor_named(name: &str, dry_run: bool) -> Vec<u8> {
        let flavor = json!({
            "apiVersion": API_VERSION, "kind": "Flavor",
            "metadata": {"name": name},
            "spec": {"vcpus": 2, "memoryMb": 2048,
                     "extraSpecs": {"trait:HW_CPU_X86_AVX2": "preferred"}},
        });
        let gvk = json!({"group": GROUP, "version": "v1alpha1", "kind": "Flavor"});
        let gvr = json!({"group": GROUP, "version": "v1alpha1", "resource": "flavors"});
        serde_json::to_vec(&json!({
            "apiVersion": ADMISSION_API_VERSION, "kind": "AdmissionReview",
            "request": {
                "uid": "uid-1", "kind": gvk, "resource": gvr,
                "requestKind": gvk, "requestResource": gvr,
                "name": name, "operation": "CREATE",
                "userInfo": {"username": "kubernetes-admin"},
                "object": flavor, "oldObject": null, "dryRun": dry_run, "options": null,
            }
        }))
        .expect("a JSON body")
    }

    /// Reviews the rejected flavor with an Event recorder on a mocked API server; the
    /// paths the webhook wrote to within a short wait.
    async fn writes_for(dry_run: bool) -> Vec<String> {
        let writes = writes_for_reviews(&[rejected_flavor(dry_run)]).await;
        for (method, _) in &writes {
            assert_eq!(method, Method::POST);
        }
        writes.into_iter().map(|(_, path)| path).collect()
    }

    /// Reviews each body (each a Flavor admission denies) in turn with an Event recorder on
    /// a mocked API server; the methods and paths the webhook wrote to within a short wait.
    async fn writes_for_reviews(bodies: &[Vec<u8>]) -> Vec<(Method, String)> {
        let (service, mut handle) = mock::pair::<Request<Body>, Response<Body>>();
        let client = Client::new(service, "default");
        let (_ready_tx, ready) = watch::channel(true);
        let mut webhook = Webhook::new(SharedStore::default(), ready, Arc::new(Metrics::new()));
        webhook.recheck_after = Duration::ZERO;
        webhook.events = Some(recorder(client, "test"));
        for body in bodies {
            let review = webhook.review("flavors", body).await;
            let response = review.response.expect("a response");
            assert!(!response.allowed, "the flavor is denied");
            assert_eq!(response.result.code, 422, "an invalid object");
            assert_eq!(response.result.reason, "Invalid");
        }
        let mut paths = Vec::new();
        while let Ok(Some((request, send))) =
            tokio::time::timeout(Duration::from_millis(300), handle.next_request()).await
        {
            paths.push((request.method().clone(), request.uri().path().to_string()));
            let body: Value =
                serde_json::from_slice(&request.into_body().collect_bytes().await.unwrap())
                    .unwrap();
            send.send_response(
                Response::builder()
                    .body(Body::from(serde_json::to_vec(&body).unwrap()))
                    .unwrap(),
            );
        }
        paths
    }

    /// An AdmissionReview creating Server `default/web-1` of flavor `m1` and image `img`.
    fn server_review() -> Vec<u8> {
        let server = json!({
            "apiVersion": API_VERSION, "kind": "Server",
            "metadata": {"name": "web-1", "namespace": "default"},
            "spec": {"flavor": "m1", "image": "img"},
        });
        let gvk = json!({"group": GROUP, "version": "v1alpha1", "kind": "Server"});
        let gvr = json!({"group": GROUP, "version": "v1alpha1", "resource": "servers"});
        serde_json::to_vec(&json!({
            "apiVersion": ADMISSION_API_VERSION, "kind": "AdmissionReview",
            "request": {
                "uid": "uid-2", "kind": gvk, "resource": gvr,
                "requestKind": gvk, "requestResource": gvr,
                "name": "web-1", "namespace": "default", "operation": "CREATE",
                "userInfo": {"username": "kubernetes-admin"},
                "object": server, "oldObject": null, "dryRun": false, "options": null,
            }
        }))
        .expect("a JSON body")
    }

    /// The Server's Flavor and Image as the API server returns them.
    fn referenced(path: &str) -> Option<Value> {
        match path {
            "/apis/kubeplace.io/v1alpha1/flavors/m1" => Some(json!({
                "apiVersion": API_VERSION, "kind": "Flavor", "metadata": {"name": "m1"},
                "spec": {"vcpus": 1, "memoryMb": 64}})),
            "/apis/kubeplace.io/v1alpha1/images/img" => Some(json!({
                "apiVersion": API_VERSION, "kind": "Image", "metadata": {"name": "img"},
                "spec": {}})),
            _ => None,
        }
    }

    fn webhook_reading_through(client: Client, store: SharedStore) -> Webhook {
        let (_ready_tx, ready) = watch::channel(true);
        // The sender is dropped: the channel keeps its last value, true.
        let mut webhook = Webhook::new(store, ready, Arc::new(Metrics::new()));
        webhook.recheck_after = Duration::from_millis(250);
        webhook.read_through_wait = Duration::from_secs(3);
        webhook.client = Some(client);
        webhook
    }

    /// A Server applied in one `kubectl apply` with its Flavor and Image: the API server has
    /// them, the store does not yet. The webhook reads them, waits for the watch to deliver
    /// them (here 2 s late, longer than the recheck), and admits the Server.
    #[tokio::test(start_paused = true)]
    async fn a_cache_miss_is_read_through_and_waits_for_the_watch() {
        let (service, mut handle) = mock::pair::<Request<Body>, Response<Body>>();
        let store = SharedStore::default();
        let webhook = webhook_reading_through(Client::new(service, "default"), store.clone());
        let watch = store.clone();
        let api = tokio::spawn(async move {
            let mut served = Vec::new();
            for _ in 0..2 {
                let (request, send) = handle.next_request().await.expect("a read");
                assert_eq!(request.method(), Method::GET);
                let path = request.uri().path().to_string();
                let object = referenced(&path).expect("a referenced object");
                send.send_response(
                    Response::builder()
                        .body(Body::from(serde_json::to_vec(&object).unwrap()))
                        .unwrap(),
                );
                served.push(object);
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
            for object in served {
                let kind = Kind::from_name(object["kind"].as_str().unwrap()).unwrap();
                watch
                    .write()
                    .unwrap()
                    .put(Object::from_value(kind, object).unwrap());
            }
        });
        let started = tokio::time::Instant::now();
        let review = webhook.review("servers", &server_review()).await;
        let response = review.response.expect("a response");
        assert!(response.allowed, "{:?}", response.result.message);
        assert!(started.elapsed() >= Duration::from_secs(2));
        api.await.unwrap();
    }

    /// A Flavor the API server does not have either: denied at once, no waiting.
    #[tokio::test(start_paused = true)]
    async fn a_reference_the_api_server_lacks_is_denied_without_waiting() {
        let (service, mut handle) = mock::pair::<Request<Body>, Response<Body>>();
        let webhook =
            webhook_reading_through(Client::new(service, "default"), SharedStore::default());
        let api = tokio::spawn(async move {
            for _ in 0..2 {
                let (_request, send) = handle.next_request().await.expect("a read");
                let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                    "reason": "NotFound", "code": 404, "message": "not found"});
                send.send_response(
                    Response::builder()
                        .status(404)
                        .body(Body::from(serde_json::to_vec(&status).unwrap()))
                        .unwrap(),
                );
            }
        });
        let started = tokio::time::Instant::now();
        let review = webhook.review("servers", &server_review()).await;
        let response = review.response.expect("a response");
        assert!(!response.allowed);
        assert!(
            response
                .result
                .message
                .contains("spec.flavor: Flavor \"m1\" does not exist"),
            "{}",
            response.result.message
        );
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );
        api.await.unwrap();
    }

    #[tokio::test]
    async fn a_denial_publishes_a_rejected_event() {
        assert_eq!(
            writes_for(false).await,
            ["/apis/events.k8s.io/v1/namespaces/default/events"]
        );
    }

    /// A denial repeated (kubectl retrying, or a client that forges reviews) publishes a few
    /// Events about its object a minute, not one per review; every review is still denied.
    #[tokio::test]
    async fn repeated_denials_of_one_object_publish_a_few_events() {
        let bodies = vec![rejected_flavor(false); 10];
        assert_eq!(
            writes_for_reviews(&bodies).await.len(),
            event_budget::PER_OBJECT
        );
    }

    /// Denials of ever new objects publish a bounded number of Events a minute in all.
    #[tokio::test]
    async fn denials_of_many_objects_publish_a_bounded_number_of_events() {
        let bodies: Vec<Vec<u8>> = (0..event_budget::TOTAL + 20)
            .map(|i| rejected_flavor_named(&format!("f{i}.preferred-avx"), false))
            .collect();
        assert_eq!(writes_for_reviews(&bodies).await.len(), event_budget::TOTAL);
    }

    /// The webhook registers `sideEffects: None`: a dry run (`kubectl apply
    /// --dry-run=server`) is denied as usual but writes nothing, not even an Event.
    #[tokio::test]
    async fn a_dry_run_denial_publishes_no_event() {
        assert_eq!(writes_for(true).await, Vec::<String>::new());
    }
}
