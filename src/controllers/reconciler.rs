//! The reconcile loop: while this replica leads and the store is synced, each settled
//! batch of changes becomes one pass that computes desired statuses and writes those that
//! changed.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::headroom::SharedHeadroomFigures;
use super::status::{self, StatusWrite};
use super::trigger::{Pending, Trigger};
use crate::cache::SharedStore;
use crate::metrics::{Metrics, kind_label};
use kubeplace_api::API_VERSION;
use kubeplace_core::placement::weighers::Weighers;
use kubeplace_policy::scheduling::HeadroomFigures;
use kubeplace_policy::store::{ObjectKey, Store};

/// How the loop paces itself.
#[derive(Debug, Clone)]
pub(crate) struct Pacing {
    /// Quiet time after the last change before a pass starts.
    pub quiet: Duration,
    /// Longest a change waits while changes keep coming.
    pub max_delay: Duration,
    /// Status writes in flight at once.
    pub concurrency: usize,
    /// A failed write is first tried again after this long; each further failure of the
    /// same object doubles the wait, up to `retry_max`.
    pub retry_after: Duration,
    /// The longest wait before a failed write is tried again.
    pub retry_max: Duration,
    /// Every object is reconciled at least this often.
    pub resync: Duration,
}

impl Default for Pacing {
    fn default() -> Self {
        Pacing {
            // Short enough that one change is written well within a second or two; a
            // burst still becomes few passes, each planning only what it reaches.
            quiet: Duration::from_millis(100),
            max_delay: Duration::from_secs(5),
            concurrency: 32,
            retry_after: Duration::from_secs(1),
            // Watches relist after an outage and so trigger a full pass: a long wait here
            // does not hold statuses back once the API server is back.
            retry_max: Duration::from_secs(120),
            resync: Duration::from_secs(600),
        }
    }
}

/// The status writer's loop and what it needs.
pub(crate) struct Reconciler {
    pub client: Client,
    pub store: SharedStore,
    /// The Flavors' headroom as last counted, which their statuses show.
    pub headroom: SharedHeadroomFigures,
    /// How the scheduler weighs candidates for the servers a pass places.
    pub weighers: Weighers,
    pub trigger: Arc<Trigger>,
    pub leader: watch::Receiver<bool>,
    pub ready: watch::Receiver<bool>,
    pub metrics: Arc<Metrics>,
    pub recorder: Recorder,
    pub pacing: Pacing,
    pub retries: Retries,
}

/// How often each object's status write has failed in a row, for exponential backoff: an
/// object the API server keeps refusing (or an API server that is down) is not hammered
/// every few seconds.
#[derive(Debug, Default)]
pub(crate) struct Retries {
    failures: Mutex<BTreeMap<ObjectKey, u32>>,
}

impl Retries {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<ObjectKey, u32>> {
        crate::locks::lock(&self.failures)
    }

    /// Counts a failure; how long to wait before trying again: `first`, doubled for each
    /// failure before it in a row, at most `max`.
    pub(crate) fn failed(&self, key: &ObjectKey, first: Duration, max: Duration) -> Duration {
        let mut failures = self.lock();
        let n = failures.entry(key.clone()).or_default();
        *n = n.saturating_add(1);
        let factor = 1u32.checked_shl(*n - 1).unwrap_or(u32::MAX);
        first.saturating_mul(factor).min(max)
    }

    /// Forgets the failures of an object written (or gone).
    pub(crate) fn succeeded(&self, key: &ObjectKey) {
        self.lock().remove(key);
    }

    /// Forgets objects no longer in the store.
    pub(crate) fn retain(&self, exists: impl Fn(&ObjectKey) -> bool) {
        self.lock().retain(|k, _| exists(k));
    }
}

/// What planning a pass hands to the writer, as soon as it is known.
enum Step {
    /// What the scheduler decided; comes first.
    Decided {
        /// Allocations the scheduler chose for waiting servers.
        placements: Vec<kubeplace_api::Allocation>,
        releases: kubeplace_policy::scheduling::release::Releases,
    },
    /// Statuses to write, in key order.
    Writes(Vec<StatusWrite>),
}

/// What planning a pass did, once it is done.
struct Planned {
    /// Objects whose statuses were computed.
    checked: usize,
    /// Whether every object was checked (a full pass, or a refused claim).
    every_key: bool,
    /// Whether the pass decided over a copy of the store.
    copied: bool,
}

/// Plans one pass, handing each [`Step`] to `steps` as soon as it is known, except the
/// writes of a pass planned under the store's read lock, which are returned. A pass with
/// something to decide (a claim to release or settle, a server to place) or many statuses
/// to plan decides over a copy of the store, so that the watches and the webhook are not
/// held up meanwhile; one with only the statuses of a few objects to plan plans them over
/// the store itself, under its read lock, without copying tens of thousands of objects.
/// Servers are placed weighing candidates by `weighers`; Flavors show the `headroom`.
fn plan_pass(
    store: &SharedStore,
    weighers: &Weighers,
    headroom: &HeadroomFigures,
    pending: Pending,
    now: &str,
    metrics: &Metrics,
    steps: &tokio::sync::mpsc::UnboundedSender<Step>,
) -> (Planned, Vec<StatusWrite>) {
    let shared = crate::locks::read(store);
    let full = pending.full();
    // What the changes reach, and the keys asked for (a server the pass places or a claim
    // it releases moves statuses through its Allocation's watch event, in the next pass).
    let reached: Vec<ObjectKey> = if full {
        Vec::new()
    } else {
        let mut keys: std::collections::BTreeSet<ObjectKey> =
            pending.reach.keys(&shared).into_iter().collect();
        keys.extend(pending.keys);
        keys.into_iter().collect()
    };
    let in_place = (!full && reached.len() <= IN_PLACE_KEYS_AT_MOST)
        .then(|| kubeplace_policy::pass::decide_in_place(&shared, weighers))
        .flatten();
    let copied = in_place.is_none();
    let mut copy;
    let (store, decisions): (&Store, _) = match in_place {
        Some(decisions) => (&shared, decisions),
        None => {
            // The copy is made under the read lock, which is let go before deciding.
            copy = shared.clone();
            drop(shared);
            let decisions = kubeplace_policy::pass::decide(&mut copy, weighers);
            (&copy, decisions)
        }
    };
    for (name, why) in &decisions.refused {
        warn!(allocation = %name, reason = %why, "refused a claim that bypassed admission");
    }
    // A refused claim changes its providers' usages and every status that reads them.
    let every_key = full || decisions.refused_any();
    // The writer stops listening only when it is gone, and then nothing is left to write.
    let _ = steps.send(Step::Decided {
        placements: decisions.placements,
        releases: decisions.releases,
    });
    let keys: Vec<ObjectKey> = if every_key {
        let mut counts: BTreeMap<kubeplace_api::Kind, i64> =
            kubeplace_api::Kind::ALL.iter().map(|k| (*k, 0)).collect();
        for k in store.keys() {
            *counts.entry(k.kind).or_default() += 1;
        }
        for (kind, n) in counts {
            metrics
                .index_objects
                .get_or_create(&kind_label(kind))
                .set(n);
        }
        store.keys().cloned().collect()
    } else {
        reached
    };
    let mut held = Vec::new();
    if copied {
        status::plan_streamed(store, headroom, &keys, now, Some(metrics), |run| {
            let _ = steps.send(Step::Writes(run));
        });
    } else {
        // Planned under the store's read lock: a status written now would come back through
        // the watch, whose wait for the write lock would hold every reader (the webhook's)
        // until planning is done. Handed over once the lock is let go instead.
        status::plan_streamed(store, headroom, &keys, now, Some(metrics), |run| {
            held.extend(run)
        });
    }
    let planned = Planned {
        checked: keys.len(),
        every_key,
        copied,
    };
    (planned, held)
}

/// Most objects whose statuses a pass plans under the store's read lock; more are planned
/// over a copy, since a watch waiting to write holds the webhook's reads back meanwhile.
const IN_PLACE_KEYS_AT_MOST: usize = 256;

/// Longest Event note the API server takes.
const NOTE_MAX: usize = 1024;

/// The Event recorder kubeplace reports as.
pub(crate) fn recorder(client: Client, identity: &str) -> Recorder {
    Recorder::new(
        client,
        Reporter {
            controller: "kubeplace".into(),
            instance: Some(identity.to_string()),
        },
    )
}

impl Reconciler {
    /// Runs until `cancel`.
    pub async fn run(mut self, cancel: CancellationToken) {
        let mut leader = self.leader.clone();
        let trigger = self.trigger.clone();
        let resync = self.pacing.resync;
        // A new leader, and the periodic resync, reconcile everything.
        let watcher = tokio::spawn(async move {
            let mut tick = tokio::time::interval(resync);
            tick.tick().await;
            loop {
                tokio::select! {
                    changed = leader.changed() => {
                        if changed.is_err() { break; }
                        if *leader.borrow() { trigger.full(); }
                    }
                    _ = tick.tick() => trigger.full(),
                }
            }
        });
        loop {
            tokio::select! {
                _ = cancel.cancelled() => break,
                ok = super::leading::leading_and_ready(&mut self.leader, &mut self.ready) => if !ok { break },
            }
            let pending = tokio::select! {
                _ = cancel.cancelled() => break,
                p = self.trigger.settle(self.pacing.quiet, self.pacing.max_delay) => p,
            };
            if !*self.leader.borrow() {
                self.trigger.requeue(pending);
                continue;
            }
            self.pass(pending).await;
        }
        watcher.abort();
    }

    /// One pass: plans (see [`plan_pass`]) and writes, each status as soon as it is planned.
    pub async fn pass(&self, pending: Pending) {
        let started = Instant::now();
        let now = status::now_rfc3339();
        // Planning is synchronous work that can take seconds on a large cloud: it runs on a
        // blocking thread, so that the runtime's workers stay free for the webhook and the
        // Placement API.
        let (store, metrics) = (self.store.clone(), self.metrics.clone());
        // Taken before planning takes the store's lock, and held by the pass alone: the
        // counter goes on recording meanwhile.
        let headroom = self.headroom.snapshot();
        let weighers = self.weighers.clone();
        let full = pending.full();
        let (steps, mut planned_steps) = tokio::sync::mpsc::unbounded_channel();
        let planning = tokio::task::spawn_blocking(move || {
            let (planned, held) = plan_pass(
                &store, &weighers, &headroom, pending, &now, &metrics, &steps,
            );
            if !held.is_empty() {
                let _ = steps.send(Step::Writes(held));
            }
            (planned, started.elapsed())
        });
        let Some(Step::Decided {
            placements,
            releases,
        }) = planned_steps.recv().await
        else {
            warn!("planning a reconcile pass failed; everything is reconciled again");
            self.trigger.full();
            return;
        };
        if !releases.is_empty() {
            super::finalizer::release(&self.client, &releases).await;
        }
        self.write_placements(placements).await;
        let writes = futures::stream::poll_fn(|cx| planned_steps.poll_recv(cx)).flat_map(|step| {
            futures::stream::iter(match step {
                Step::Writes(writes) => writes,
                Step::Decided { .. } => Vec::new(),
            })
        });
        // A replica that stops leading mid-pass stops writing; the next leader starts with a
        // full pass.
        let results: Vec<(StatusWrite, Option<Result<(), kube::Error>>)> = writes
            .map(|w| async move {
                if !*self.leader.borrow() {
                    return (w, None);
                }
                let r = status::write(&self.client, &w).await;
                (w, Some(r))
            })
            .buffer_unordered(self.pacing.concurrency.max(1))
            .collect()
            .await;
        // Planning that failed midway still had its first statuses written: those are kept
        // below, and the next pass plans everything again.
        let (
            Planned {
                checked,
                every_key,
                copied,
            },
            planned,
        ) = self.planned(planning, started).await;
        if every_key {
            let store = crate::locks::read(&self.store);
            self.retries.retain(|k| store.get(k).is_some());
        }
        let total = results.len();
        let (failed, skipped) = self.record(results).await;
        let took = started.elapsed();
        self.metrics.pass_duration.observe(took.as_secs_f64());
        if total > 0 {
            info!(
                full,
                checked,
                written = total - failed - skipped,
                failed,
                skipped,
                copied,
                plan_ms = planned.as_millis() as u64,
                took_ms = took.as_millis() as u64,
                "reconciled"
            );
        } else {
            debug!(
                full,
                checked,
                copied,
                took_ms = took.as_millis() as u64,
                "reconciled; every status is current"
            );
        }
    }

    /// What planning found and how long it took; when it failed, a full pass is asked for.
    async fn planned(
        &self,
        planning: tokio::task::JoinHandle<(Planned, Duration)>,
        started: Instant,
    ) -> (Planned, Duration) {
        match planning.await {
            Ok(done) => done,
            Err(e) => {
                warn!(error = %e, "planning a reconcile pass failed; everything is reconciled again");
                self.trigger.full();
                let unknown = Planned {
                    checked: 0,
                    every_key: false,
                    copied: false,
                };
                (unknown, started.elapsed())
            }
        }
    }

    /// Creates the Allocations of the servers the pass placed (server-side apply); one that
    /// fails (the claims ledger refused it: a device or core was taken a moment before) has
    /// its Server planned again after a backoff, as a failed status write is.
    async fn write_placements(&self, placements: Vec<kubeplace_api::Allocation>) {
        for allocation in placements {
            let name = allocation.metadata.name.clone().unwrap_or_default();
            let server =
                kubeplace_api::allocation_server(&allocation).map(|s| ObjectKey::server(&s));
            let api: kube::Api<kubeplace_api::Allocation> = kube::Api::all(self.client.clone());
            let params = kube::api::PatchParams::apply(status::FIELD_MANAGER).force();
            match api
                .patch(&name, &params, &kube::api::Patch::Apply(&allocation))
                .await
            {
                Ok(_) => {
                    if let Some(key) = &server {
                        self.retries.succeeded(key);
                    }
                    info!(allocation = %name, "placed a server")
                }
                Err(e) => {
                    warn!(allocation = %name, error = %e, "cannot write a server's allocation; will retry");
                    if let Some(key) = server {
                        let after = self.retries.failed(
                            &key,
                            self.pacing.retry_after,
                            self.pacing.retry_max,
                        );
                        let trigger = self.trigger.clone();
                        tokio::spawn(async move {
                            tokio::time::sleep(after).await;
                            trigger.key(key);
                        });
                    }
                }
            }
        }
    }

    /// Keeps each status written in the store and publishes its Events; schedules a retry
    /// of each write that failed. Returns how many failed and how many were skipped (this
    /// replica stopped leading).
    async fn record(
        &self,
        results: Vec<(StatusWrite, Option<Result<(), kube::Error>>)>,
    ) -> (usize, usize) {
        let mut failed = 0;
        let mut skipped = 0;
        for (w, result) in results {
            let Some(result) = result else {
                skipped += 1;
                continue;
            };
            match result {
                Ok(()) => {
                    self.metrics
                        .status_writes
                        .get_or_create(&kind_label(w.key.kind))
                        .inc();
                    crate::locks::write(&self.store).set_status(&w.key, w.status.clone());
                    self.retries.succeeded(&w.key);
                    self.publish(&w).await;
                }
                Err(kube::Error::Api(s)) if s.is_not_found() => {
                    self.retries.succeeded(&w.key);
                    debug!(kind = %w.key.kind, name = %w.key.name, "gone before its status was written");
                }
                Err(e) => {
                    failed += 1;
                    let after =
                        self.retries
                            .failed(&w.key, self.pacing.retry_after, self.pacing.retry_max);
                    warn!(kind = %w.key.kind, name = %w.key.name, error = %e,
                      retry_in_ms = after.as_millis() as u64, "cannot write status; will retry");
                    self.metrics
                        .reconcile_errors
                        .get_or_create(&kind_label(w.key.kind))
                        .inc();
                    let trigger = self.trigger.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(after).await;
                        trigger.key(w.key);
                    });
                }
            }
        }
        (failed, skipped)
    }

    /// A Warning Event for each condition that turned False, a Normal one for each that
    /// turned True and is worth telling.
    async fn publish(&self, w: &StatusWrite) {
        let reference = event_reference(w);
        let events = w
            .turned_false
            .iter()
            .map(|c| (EventType::Warning, c))
            .chain(w.turned_true.iter().map(|c| (EventType::Normal, c)));
        for (type_, c) in events {
            let note = if c.message.is_empty() {
                format!("{} is {}", c.type_, c.status)
            } else {
                format!("{}: {}", c.type_, c.message)
            };
            let event = Event {
                type_,
                reason: c.reason.clone(),
                note: Some(kubeplace_core::text::truncated(&note, NOTE_MAX)),
                action: "Reconcile".into(),
                secondary: None,
            };
            if let Err(e) = self.recorder.publish(&event, &reference).await {
                debug!(error = %e, kind = %w.key.kind, name = %w.key.name, "cannot publish an Event");
            }
        }
    }
}

/// What an Event is about. A Server's Event lives in its namespace, where `kubectl
/// describe server` looks for it.
fn event_reference(w: &StatusWrite) -> ObjectReference {
    ObjectReference {
        api_version: Some(API_VERSION.to_string()),
        kind: Some(w.key.kind.to_string()),
        name: Some(w.key.name.clone()),
        namespace: (!w.key.namespace.is_empty()).then(|| w.key.namespace.clone()),
        uid: w.uid.clone(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use kubeplace_api::Kind;
    use std::collections::BTreeMap;

    use http::{Method, Request, Response};
    use kube::client::Body;
    use serde_json::{Value, json};
    use tower_test::mock;

    use super::*;
    use kubeplace_api::{Flavor, FlavorSpec, Object};

    fn flavor(name: &str) -> Object {
        let mut f = Flavor::new(
            name,
            FlavorSpec {
                vcpus: 1,
                memory_mb: 512,
                disk_gb: 1,
                ephemeral_gb: 0,
                swap_mb: 0,
                description: None,
                is_public: true,
                extra_specs: BTreeMap::new(),
                service_profiles: vec![],
            },
        );
        f.metadata.generation = Some(1);
        f.metadata.uid = Some(format!("uid-{name}"));
        Object::Flavor(f)
    }

    /// A pass writes the one status that changed, records an Event for its new False
    /// condition, keeps the written status in the store, and the next pass writes nothing.
    #[tokio::test]
    async fn a_pass_writes_only_what_changed() {
        let (service, mut handle) = mock::pair::<Request<Body>, Response<Body>>();
        let client = Client::new(service, "default");
        let store = SharedStore::default();
        {
            let mut s = store.write().unwrap();
            s.put(flavor("current"));
            s.put(flavor("stale"));
            // "current" already has the status `status::desired_status` computes.
            let key = ObjectKey::cluster(Kind::Flavor, "current");
            let figures = HeadroomFigures::default();
            let writes = status::plan(&s, &figures, [&key], "2026-01-01T00:00:00Z", None);
            s.set_status(&key, writes[0].status.clone());
        }
        let (_leader_tx, leader) = watch::channel(true);
        let (_ready_tx, ready) = watch::channel(true);
        let reconciler = Reconciler {
            client: client.clone(),
            store: store.clone(),
            headroom: SharedHeadroomFigures::default(),
            weighers: Weighers::default(),
            trigger: Arc::new(Trigger::default()),
            leader,
            ready,
            metrics: Arc::new(Metrics::new()),
            recorder: recorder(client, "test"),
            pacing: Pacing::default(),
            retries: Retries::default(),
        };
        let api = tokio::spawn(async move {
            let mut seen = Vec::new();
            for _ in 0..2 {
                let (request, send) = handle.next_request().await.expect("a request");
                let (method, path) = (request.method().clone(), request.uri().path().to_string());
                let body: Value =
                    serde_json::from_slice(&request.into_body().collect_bytes().await.unwrap())
                        .unwrap();
                let reply = if method == Method::PATCH {
                    assert_eq!(path, "/apis/kubeplace.io/v1alpha1/flavors/stale/status");
                    json!({"apiVersion": "kubeplace.io/v1alpha1", "kind": "Flavor",
                           "metadata": {"name": "stale"}, "spec": {"vcpus": 1, "memoryMb": 512},
                           "status": body["status"]})
                } else {
                    assert_eq!(method, Method::POST);
                    assert_eq!(path, "/apis/events.k8s.io/v1/namespaces/default/events");
                    assert_eq!(body["reason"], "NoCandidates");
                    assert_eq!(body["type"], "Warning");
                    assert_eq!(body["regarding"]["name"], "stale");
                    body.clone()
                };
                seen.push(method);
                send.send_response(
                    Response::builder()
                        .body(Body::from(serde_json::to_vec(&reply).unwrap()))
                        .unwrap(),
                );
            }
            let next =
                tokio::time::timeout(Duration::from_millis(200), handle.next_request()).await;
            assert!(matches!(next, Err(_) | Ok(None)), "nothing else is written");
            seen
        });
        reconciler.pass(Pending::every()).await;
        // Statuses now match: a second pass sends nothing.
        reconciler.pass(Pending::every()).await;
        assert_eq!(api.await.unwrap(), [Method::PATCH, Method::POST]);
        let s = store.read().unwrap();
        let stale = s.get(&ObjectKey::cluster(Kind::Flavor, "stale")).unwrap();
        assert!(stale.status().is_some());
    }

    /// A full pass plans over a copy and hands its writes over while it plans; a pass of a
    /// few keys planned under the store's read lock returns them, to be handed over once
    /// the lock is let go (a write sent earlier would come back through the watch, whose
    /// wait for the write lock would stall the webhook's reads behind the planning).
    #[test]
    fn writes_planned_under_the_read_lock_wait_for_it_to_be_let_go() {
        let store = SharedStore::default();
        store.write().unwrap().put(flavor("f1"));
        let metrics = Metrics::new();
        let now = "2026-01-01T00:00:00Z";
        let (weighers, figures) = (Weighers::default(), HeadroomFigures::default());
        let received = |rx: &mut tokio::sync::mpsc::UnboundedReceiver<Step>| {
            let mut writes = Vec::new();
            while let Ok(step) = rx.try_recv() {
                match step {
                    Step::Decided { .. } => assert!(writes.is_empty(), "decisions come first"),
                    Step::Writes(w) => writes.extend(w),
                }
            }
            writes
        };
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let (planned, held) = plan_pass(
            &store,
            &weighers,
            &figures,
            Pending::every(),
            now,
            &metrics,
            &tx,
        );
        assert!(planned.copied && planned.every_key);
        assert!(held.is_empty());
        assert_eq!(received(&mut rx).len(), 1);

        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let few = Pending {
            keys: [ObjectKey::cluster(Kind::Flavor, "f1")].into(),
            ..Default::default()
        };
        let (planned, held) = plan_pass(&store, &weighers, &figures, few, now, &metrics, &tx);
        assert!(!planned.copied && !planned.every_key);
        assert_eq!(held.len(), 1);
        assert_eq!(held[0].key.name, "f1");
        assert!(
            received(&mut rx).is_empty(),
            "nothing handed over under the lock"
        );
        // Let go: the lock is free for a writer.
        assert!(store.try_write().is_ok());
    }

    /// A pass writes the headroom the counter recorded beside the store; a Flavor it has
    /// not counted keeps the headroom its status shows, and one without shows none.
    #[test]
    fn a_pass_writes_the_headroom_counted_beside_the_store() {
        let counted = |servers| kubeplace_api::HeadroomStatus {
            servers,
            capped: true,
            stopped_by: None,
            within_quota: Vec::new(),
        };
        let store = SharedStore::default();
        {
            let mut s = store.write().unwrap();
            for name in ["f1", "f2", "f3"] {
                s.put(flavor(name));
            }
            // Written by an earlier leader.
            let earlier = kubeplace_api::Status::Flavor(kubeplace_api::FlavorStatus {
                headroom: Some(counted(2)),
                ..Default::default()
            });
            for name in ["f1", "f2"] {
                s.set_status(&ObjectKey::cluster(Kind::Flavor, name), earlier.clone());
            }
        }
        let mut figures = HeadroomFigures::default();
        figures.set("f1", Some(counted(7)));
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let weighers = Weighers::default();
        plan_pass(
            &store,
            &weighers,
            &figures,
            Pending::every(),
            "2026-01-01T00:00:00Z",
            &Metrics::new(),
            &tx,
        );
        let mut shown = BTreeMap::new();
        while let Ok(step) = rx.try_recv() {
            if let Step::Writes(writes) = step {
                for w in writes {
                    let kubeplace_api::Status::Flavor(st) = w.status else {
                        panic!("not a flavor status");
                    };
                    shown.insert(w.key.name, st.headroom);
                }
            }
        }
        assert_eq!(shown["f1"], Some(counted(7)));
        assert_eq!(shown["f2"], Some(counted(2)));
        assert_eq!(shown["f3"], None);
    }

    #[test]
    fn a_servers_event_is_in_its_namespace_a_flavors_in_none() {
        let write = |kind, namespace: &str| StatusWrite {
            key: ObjectKey {
                kind,
                namespace: namespace.into(),
                name: "x".into(),
            },
            uid: Some("u".into()),
            status: kubeplace_api::Status::Flavor(Default::default()),
            turned_false: Vec::new(),
            turned_true: Vec::new(),
        };
        let server = event_reference(&write(Kind::Server, "shop"));
        assert_eq!(server.namespace.as_deref(), Some("shop"));
        assert_eq!(server.kind.as_deref(), Some("Server"));
        assert_eq!(event_reference(&write(Kind::Flavor, "")).namespace, None);
    }

    #[test]
    fn retries_double_up_to_the_maximum_and_reset_on_success() {
        let retries = Retries::default();
        let (a, b) = (
            ObjectKey::cluster(Kind::Flavor, "a"),
            ObjectKey::cluster(Kind::Flavor, "b"),
        );
        let (first, max) = (Duration::from_secs(1), Duration::from_secs(10));
        let waits: Vec<u64> = (0..6)
            .map(|_| retries.failed(&a, first, max).as_secs())
            .collect();
        assert_eq!(waits, [1, 2, 4, 8, 10, 10]);
        // Each object counts its own failures.
        assert_eq!(retries.failed(&b, first, max), first);
        retries.succeeded(&a);
        assert_eq!(retries.failed(&a, first, max), first);
        // No overflow however long it fails.
        for _ in 0..100 {
            assert!(retries.failed(&b, first, max) <= max);
        }
        retries.retain(|k| k == &a);
        assert_eq!(retries.failed(&b, first, max), first);
    }

    /// A status write the API server keeps refusing is tried again after 1, 2, 4, then 4 s
    /// (the maximum here), not at a fixed interval; once written, nothing more is sent.
    #[tokio::test(start_paused = true)]
    async fn failed_writes_back_off_exponentially() {
        let (service, mut handle) = mock::pair::<Request<Body>, Response<Body>>();
        let client = Client::new(service, "default");
        let store = SharedStore::default();
        store.write().unwrap().put(flavor("stale"));
        let (_leader_tx, leader) = watch::channel(true);
        let (_ready_tx, ready) = watch::channel(true);
        let quiet = Duration::from_millis(10);
        let reconciler = Reconciler {
            client: client.clone(),
            store: store.clone(),
            headroom: SharedHeadroomFigures::default(),
            weighers: Weighers::default(),
            trigger: Arc::new(Trigger::default()),
            leader,
            ready,
            metrics: Arc::new(Metrics::new()),
            recorder: recorder(client, "test"),
            pacing: Pacing {
                quiet,
                max_delay: Duration::from_millis(100),
                concurrency: 1,
                retry_after: Duration::from_secs(1),
                retry_max: Duration::from_secs(4),
                resync: Duration::from_secs(86_400),
            },
            retries: Retries::default(),
        };
        let trigger = reconciler.trigger.clone();
        let cancel = CancellationToken::new();
        let running = tokio::spawn(reconciler.run(cancel.clone()));
        trigger.full();
        let mut patches = Vec::new();
        while patches.len() < 6 {
            let (request, send) = handle.next_request().await.expect("a request");
            let method = request.method().clone();
            let body = request.into_body().collect_bytes().await.unwrap();
            if method == Method::POST {
                // The Event for the written status.
                send.send_response(Response::builder().body(Body::from(body)).unwrap());
                continue;
            }
            assert_eq!(method, Method::PATCH);
            patches.push(tokio::time::Instant::now());
            let response = if patches.len() < 6 {
                let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                    "message": "etcdserver: request timed out", "reason": "InternalError",
                    "code": 500});
                Response::builder()
                    .status(500)
                    .body(Body::from(serde_json::to_vec(&status).unwrap()))
                    .unwrap()
            } else {
                let body: Value = serde_json::from_slice(&body).unwrap();
                let flavor = json!({"apiVersion": "kubeplace.io/v1alpha1", "kind": "Flavor",
                    "metadata": {"name": "stale"}, "spec": {"vcpus": 1, "memoryMb": 512},
                    "status": body["status"]});
                Response::builder()
                    .body(Body::from(serde_json::to_vec(&flavor).unwrap()))
                    .unwrap()
            };
            send.send_response(response);
        }
        // Each wait is the backoff plus the quiet time the trigger settles for.
        let waits: Vec<Duration> = patches.windows(2).map(|w| w[1] - w[0] - quiet).collect();
        let secs: Vec<u64> = [1, 2, 4, 4, 4].into();
        assert_eq!(
            waits,
            secs.iter()
                .map(|s| Duration::from_secs(*s))
                .collect::<Vec<_>>()
        );
        // Written: the Event, then nothing more, however long we wait.
        while let Ok(Some((request, send))) =
            tokio::time::timeout(Duration::from_secs(600), handle.next_request()).await
        {
            assert_eq!(request.method(), Method::POST, "only the Event is left");
            let body = request.into_body().collect_bytes().await.unwrap();
            send.send_response(Response::builder().body(Body::from(body)).unwrap());
        }
        cancel.cancel();
        running.await.unwrap();
    }

    #[tokio::test]
    async fn a_replica_that_does_not_lead_writes_nothing() {
        let (service, mut handle) = mock::pair::<Request<Body>, Response<Body>>();
        let client = Client::new(service, "default");
        let store = SharedStore::default();
        store.write().unwrap().put(flavor("stale"));
        let (_leader_tx, leader) = watch::channel(false);
        let (_ready_tx, ready) = watch::channel(true);
        let reconciler = Reconciler {
            client: client.clone(),
            store: store.clone(),
            headroom: SharedHeadroomFigures::default(),
            weighers: Weighers::default(),
            trigger: Arc::new(Trigger::default()),
            leader,
            ready,
            metrics: Arc::new(Metrics::new()),
            recorder: recorder(client, "test"),
            pacing: Pacing::default(),
            retries: Retries::default(),
        };
        reconciler.pass(Pending::every()).await;
        let next = tokio::time::timeout(Duration::from_millis(100), handle.next_request()).await;
        assert!(matches!(next, Err(_) | Ok(None)), "a follower wrote");
        let s = store.read().unwrap();
        assert!(
            s.get(&ObjectKey::cluster(Kind::Flavor, "stale"))
                .unwrap()
                .status()
                .is_none()
        );
    }
}
