//! The cluster mirror's watches (`kubeplace run --mirror-cluster`): Nodes, Pods,
//! ResourceSlices, ResourceClaims and DeviceClasses watched and read by
//! [`kubeplace_policy::mirror::Mirror`] into the shared store, as providers and
//! allocations that are never written back.
//!
//! A device's DeviceClass is picked by evaluating CEL, which may take up to its budgets: a
//! batch of ResourceSlices or DeviceClasses is picked on a blocking thread, with no lock
//! held (the mirror's lock only to copy what picking needs), and mirrored with the picks
//! after. A DeviceClass that does not compile or exhausts a budget is logged and reported
//! as a Warning Event on it, once for each version of the class.

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event as KubeEvent, EventType, Recorder, Reporter};

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use super::trigger::Trigger;
use super::watch::Synced;
use crate::cache::SharedStore;
use kubeplace_api::cluster_source::{
    ClusterSource, DeviceClass, Node, Pod, ResourceClaim, ResourceSlice, SourceKey, SourceKind,
};
use kubeplace_policy::mirror::{
    ClassProblem, Mirror, Picked, SelectorProblem, SlicePicks, TraitTable,
};
use kubeplace_policy::status::Reach;
use kubeplace_policy::store::{Change, ObjectKey};

/// Most watch events applied at once.
const BATCH: usize = 1024;

/// The mirror every watch of the cluster's kinds feeds, and where its changes go.
struct Mirroring {
    /// Taken before the store's lock and held while the changes are applied, so that the
    /// store sees the mirror's changes in the order the mirror made them.
    mirror: Mutex<Mirror>,
    /// Held from picking a batch of ResourceSlices' or DeviceClasses' devices' classes to
    /// mirroring it, so that the classes and slices it picked with are the mirror's when
    /// it is mirrored.
    picking: tokio::sync::Mutex<()>,
    store: SharedStore,
    trigger: Arc<Trigger>,
    synced: Arc<Synced>,
    /// Where a DeviceClass's problems are published (none in tests).
    events: Option<Recorder>,
}

/// The classes of a batch's devices, picked before it is mirrored.
enum Prepared {
    /// Nothing picked: the mirror picks what it needs.
    Nothing,
    /// A ResourceSlice batch: each event's slice's picks, by its place in the batch.
    Slices(Vec<Option<SlicePicks>>),
    /// A DeviceClass batch: the classes after it, and every slice picked with them.
    Classes(Picked),
}

/// Starts a watch of every kind the mirror reads.
pub(crate) fn start(
    client: &Client,
    store: &SharedStore,
    trigger: &Arc<Trigger>,
    synced: &Arc<Synced>,
    traits: TraitTable,
) -> Vec<JoinHandle<()>> {
    let reporter = Reporter {
        controller: "kubeplace".into(),
        instance: std::env::var("POD_NAME").ok().filter(|n| !n.is_empty()),
    };
    let shared = Arc::new(Mirroring {
        mirror: Mutex::new(Mirror::new(traits)),
        picking: tokio::sync::Mutex::new(()),
        store: store.clone(),
        trigger: trigger.clone(),
        synced: synced.clone(),
        events: Some(Recorder::new(client.clone(), reporter)),
    });
    SourceKind::ALL
        .into_iter()
        .map(|kind| {
            let (client, shared) = (client.clone(), shared.clone());
            tokio::spawn(async move {
                match kind {
                    SourceKind::Node => {
                        run::<Node>(client, kind, shared, |o| ClusterSource::Node(Box::new(o)))
                            .await
                    }
                    SourceKind::Pod => {
                        run::<Pod>(client, kind, shared, |o| ClusterSource::Pod(Box::new(o))).await
                    }
                    SourceKind::ResourceSlice => {
                        run::<ResourceSlice>(client, kind, shared, |o| {
                            ClusterSource::ResourceSlice(Box::new(o))
                        })
                        .await
                    }
                    SourceKind::ResourceClaim => {
                        run::<ResourceClaim>(client, kind, shared, |o| {
                            ClusterSource::ResourceClaim(Box::new(o))
                        })
                        .await
                    }
                    SourceKind::DeviceClass => {
                        run::<DeviceClass>(client, kind, shared, |o| {
                            ClusterSource::DeviceClass(Box::new(o))
                        })
                        .await
                    }
                }
            })
        })
        .collect()
}

/// Watches one kind until the stream ends (it does not: errors are retried with backoff).
async fn run<K>(
    client: Client,
    kind: SourceKind,
    shared: Arc<Mirroring>,
    source: fn(K) -> ClusterSource,
) where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let api: Api<K> = Api::all(client);
    let events = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut batches = events.ready_chunks(BATCH);
    let mut listing: Option<BTreeSet<SourceKey>> = None;
    while let Some(batch) = batches.next().await {
        let mut ok = Vec::with_capacity(batch.len());
        for event in batch {
            match event {
                Ok(event) => ok.push(match event {
                    Event::Apply(o) => Event::Apply(source(o)),
                    Event::Delete(o) => Event::Delete(source(o)),
                    Event::Init => Event::Init,
                    Event::InitApply(o) => Event::InitApply(source(o)),
                    Event::InitDone => Event::InitDone,
                }),
                Err(e) => warn!(kind = %kind, error = %e, "mirror watch failed; retrying"),
            }
        }
        shared.handle(kind, ok, &mut listing).await;
    }
}

impl Mirroring {
    /// Mirrors a batch of one kind's events and reports the DeviceClass problems found. A
    /// batch of ResourceSlices or DeviceClasses is picked and mirrored on a blocking thread,
    /// one batch at a time; the other kinds pick nothing and are mirrored here.
    async fn handle(
        self: &Arc<Self>,
        kind: SourceKind,
        events: Vec<Event<ClusterSource>>,
        listing: &mut Option<BTreeSet<SourceKey>>,
    ) {
        if !matches!(kind, SourceKind::ResourceSlice | SourceKind::DeviceClass) {
            let problems = self.mirror_batch(kind, events, listing, Prepared::Nothing);
            self.report(problems);
            return;
        }
        let _picking = self.picking.lock().await;
        let shared = self.clone();
        let mut state = listing.take();
        let done = tokio::task::spawn_blocking(move || {
            let problems = shared.pick_and_mirror(kind, events, &mut state);
            (state, problems)
        })
        .await;
        match done {
            Ok((state, problems)) => {
                *listing = state;
                self.report(problems);
            }
            // The list under way is lost with it: the watch's next list replaces it.
            Err(e) => warn!(kind = %kind, error = %e, "mirroring a batch failed"),
        }
    }

    /// Picks the classes of a batch's devices (no lock held but the mirror's, briefly, to
    /// copy what picking needs), then mirrors the batch with them.
    fn pick_and_mirror(
        &self,
        kind: SourceKind,
        events: Vec<Event<ClusterSource>>,
        listing: &mut Option<BTreeSet<SourceKey>>,
    ) -> Vec<ClassProblem> {
        let mut problems = Vec::new();
        let prepared = match kind {
            SourceKind::ResourceSlice => {
                let classes = crate::locks::lock(&self.mirror).device_classes();
                let picks = events
                    .iter()
                    .map(|event| match event {
                        Event::Apply(ClusterSource::ResourceSlice(s))
                        | Event::InitApply(ClusterSource::ResourceSlice(s)) => {
                            let picks = classes.pick(s);
                            problems.extend(picks.problems.iter().cloned());
                            Some(picks)
                        }
                        _ => None,
                    })
                    .collect();
                Prepared::Slices(picks)
            }
            SourceKind::DeviceClass => {
                let mut picking = crate::locks::lock(&self.mirror).picking();
                // The batch as the mirror will take it, on a copy of the classes.
                let mut listed = listing.clone();
                for event in &events {
                    match event {
                        Event::Apply(ClusterSource::DeviceClass(c)) => {
                            problems.extend(picking.put_class(c))
                        }
                        Event::InitApply(source @ ClusterSource::DeviceClass(c)) => {
                            listed
                                .get_or_insert_with(BTreeSet::new)
                                .insert(source.key());
                            problems.extend(picking.put_class(c));
                        }
                        Event::Delete(source) => picking.remove_class(&source.key().name),
                        Event::Init => listed = Some(BTreeSet::new()),
                        Event::InitDone => {
                            let listed: BTreeSet<String> = listed
                                .take()
                                .unwrap_or_default()
                                .into_iter()
                                .map(|k| k.name)
                                .collect();
                            for name in picking.class_names() {
                                if !listed.contains(&name) {
                                    picking.remove_class(&name);
                                }
                            }
                        }
                        Event::Apply(_) | Event::InitApply(_) => {}
                    }
                }
                if picking.changed() {
                    let picked = picking.pick_all();
                    problems.extend(picked.problems.iter().cloned());
                    Prepared::Classes(picked)
                } else {
                    Prepared::Nothing
                }
            }
            _ => Prepared::Nothing,
        };
        problems.extend(self.mirror_batch(kind, events, listing, prepared));
        problems
    }

    /// Mirrors a batch of one kind's events into the store, under one lock, with what was
    /// picked for it, and asks for the statuses they reach. A list replaces what the mirror
    /// had of the kind. The DeviceClass problems found on the way are returned.
    fn mirror_batch(
        &self,
        kind: SourceKind,
        events: Vec<Event<ClusterSource>>,
        listing: &mut Option<BTreeSet<SourceKey>>,
        prepared: Prepared,
    ) -> Vec<ClassProblem> {
        let mut mirror = crate::locks::lock(&self.mirror);
        let mut changes = Vec::new();
        let mut problems = Vec::new();
        let mut listed_now = false;
        let mut slice_picks = Vec::new();
        // DeviceClasses whose batch was adopted whole: its events are only recorded.
        let mut adopted = false;
        match prepared {
            Prepared::Nothing => {}
            Prepared::Slices(picks) => slice_picks = picks,
            Prepared::Classes(picked) => {
                if let Some(taken) = mirror.adopt(picked) {
                    adopted = true;
                    changes.extend(taken.changes);
                    problems.extend(taken.problems);
                }
            }
        }
        let mut slice_picks = slice_picks.into_iter();
        let mut observed = |mirror: &mut Mirror, source: &ClusterSource, picks| {
            if adopted {
                mirror.note_adopted(&source.key(), true);
                return Vec::new();
            }
            observe(mirror, source, picks, &mut problems)
        };
        let forgotten = |mirror: &mut Mirror, key: &SourceKey| {
            if adopted {
                mirror.note_adopted(key, false);
                return Vec::new();
            }
            mirror.forget(key)
        };
        for event in events {
            let picks = slice_picks.next().flatten();
            match event {
                Event::Apply(s) => changes.extend(observed(&mut mirror, &s, picks)),
                Event::Delete(s) => changes.extend(forgotten(&mut mirror, &s.key())),
                Event::Init => *listing = Some(BTreeSet::new()),
                Event::InitApply(s) => {
                    listing.get_or_insert_with(BTreeSet::new).insert(s.key());
                    changes.extend(observed(&mut mirror, &s, picks));
                }
                Event::InitDone => {
                    let listed = listing.take().unwrap_or_default();
                    for gone in mirror.seen(kind) {
                        if !listed.contains(&gone) {
                            changes.extend(forgotten(&mut mirror, &gone));
                        }
                    }
                    info!(kind = %kind, objects = listed.len(), mirrored = mirror.mirrored_count(), "mirrored");
                    listed_now = true;
                }
            }
        }
        if !changes.is_empty() {
            let mut store = crate::locks::write(&self.store);
            // A pod's or Node's status moves often (conditions, IPs) and leaves what it is
            // mirrored as alone: such a put changes nothing and reaches no status.
            changes.retain(|change| match change {
                Change::Put(o) => store.get(&ObjectKey::of(o)) != Some(&**o),
                _ => true,
            });
            let mut reach = Reach::default();
            for change in &changes {
                let (key, new) = match change {
                    Change::Put(o) => (ObjectKey::of(o), Some(&**o)),
                    other => (other.key(), None),
                };
                reach.add(Reach::of_change(&store, store.get(&key), new));
            }
            reach.add(Reach::of_merge(store.apply_changes(changes)));
            drop(store);
            drop(mirror);
            if !reach.is_empty() {
                self.trigger.reach(reach);
            }
        }
        if listed_now {
            self.synced.mark_source(kind);
        }
        problems
    }

    /// Logs each DeviceClass problem and publishes it as a Warning Event on the class (each
    /// is found once for a version of its class, so they are few).
    fn report(&self, problems: Vec<ClassProblem>) {
        for p in problems {
            warn!(device_class = %p.class, problem = %p.problem, "a DeviceClass's selectors cannot be evaluated as written");
            let Some(recorder) = self.events.clone() else {
                continue;
            };
            let reference = ObjectReference {
                api_version: Some("resource.k8s.io/v1".into()),
                kind: Some("DeviceClass".into()),
                name: Some(p.class.clone()),
                ..ObjectReference::default()
            };
            let reason = match p.problem {
                SelectorProblem::DoesNotCompile { .. } | SelectorProblem::NoExpression { .. } => {
                    "SelectorInvalid"
                }
                SelectorProblem::UnknownFunctions { .. } => "SelectorUnsupported",
                SelectorProblem::CostExceeded { .. } | SelectorProblem::TimeExceeded { .. } => {
                    "SelectorBudgetExceeded"
                }
                SelectorProblem::NotEvaluated { .. } => "SelectorNotEvaluated",
            };
            let event = KubeEvent {
                type_: EventType::Warning,
                reason: reason.into(),
                note: Some(p.problem.to_string().chars().take(1000).collect()),
                action: "Mirror".into(),
                secondary: None,
            };
            tokio::spawn(async move {
                if let Err(e) = recorder.publish(&event, &reference).await {
                    tracing::debug!(error = %e, "cannot publish an Event");
                }
            });
        }
    }
}

/// One object mirrored, with its devices' classes if they were picked; a failure is
/// logged, and the object is mirrored as nothing.
fn observe(
    mirror: &mut Mirror,
    source: &ClusterSource,
    picks: Option<SlicePicks>,
    problems: &mut Vec<ClassProblem>,
) -> Vec<Change> {
    let observed = match picks {
        Some(picks) => mirror.observe_picked(source, picks),
        None => mirror.observe(source),
    };
    if let Err(e) = &observed.outcome {
        warn!(object = %source.key(), error = %e, "cannot mirror");
    }
    problems.extend(observed.problems);
    observed.changes
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubeplace_api::Kind;

    fn node(name: &str, cpu: &str) -> ClusterSource {
        ClusterSource::Node(Box::new(
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name},
                "status": {"capacity": {"cpu": cpu}},
            }))
            .unwrap(),
        ))
    }

    #[test]
    fn readiness_waits_for_the_mirrors_kinds_and_names_them() {
        let (synced, ready) = Synced::new(Kind::ALL.len() + SourceKind::ALL.len());
        for kind in Kind::ALL {
            synced.mark(kind);
        }
        assert!(!*ready.borrow());
        assert_eq!(
            synced.pending(),
            [
                "DeviceClass",
                "Node",
                "ResourceSlice",
                "Pod",
                "ResourceClaim"
            ]
        );
        for kind in SourceKind::ALL {
            synced.mark_source(kind);
        }
        assert!(*ready.borrow());
        assert!(synced.pending().is_empty());
    }

    fn mirroring(synced: Arc<Synced>) -> Arc<Mirroring> {
        Arc::new(Mirroring {
            mirror: Mutex::new(Mirror::default()),
            picking: tokio::sync::Mutex::new(()),
            store: SharedStore::default(),
            trigger: Arc::new(Trigger::default()),
            synced,
            events: None,
        })
    }

    #[tokio::test]
    async fn a_list_replaces_what_the_mirror_had_and_marks_the_kind() {
        let (synced, ready) = Synced::new(SourceKind::ALL.len());
        let shared = mirroring(synced);
        let mut listing = None;
        shared
            .handle(
                SourceKind::Node,
                vec![Event::Apply(node("n1", "4")), Event::Apply(node("n2", "4"))],
                &mut listing,
            )
            .await;
        assert!(!shared.trigger.take().reach.is_empty());
        shared
            .handle(
                SourceKind::Node,
                vec![
                    Event::Init,
                    Event::InitApply(node("n2", "8")),
                    Event::InitDone,
                ],
                &mut listing,
            )
            .await;
        {
            let store = shared.store.read().unwrap();
            let names: Vec<&str> = store
                .list(Kind::ResourceProvider)
                .map(|o| o.name())
                .collect();
            assert_eq!(names, ["n2"]);
            assert_eq!(store.index().inventory("n2", "VCPU").unwrap().total, 8);
        }
        assert!(!*ready.borrow(), "four kinds are not listed yet");
        // The same Node again (a status heartbeat): nothing to reconcile.
        shared.trigger.take();
        shared
            .handle(
                SourceKind::Node,
                vec![Event::Apply(node("n2", "8"))],
                &mut listing,
            )
            .await;
        assert!(shared.trigger.take().reach.is_empty());
    }

    fn device_class(name: &str, expressions: &[String]) -> ClusterSource {
        let selectors: Vec<_> = expressions
            .iter()
            .map(|e| serde_json::json!({"cel": {"expression": e}}))
            .collect();
        ClusterSource::DeviceClass(Box::new(
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name}, "spec": {"selectors": selectors},
            }))
            .unwrap(),
        ))
    }

    /// A DeviceClass of 32 selectors, each three comprehensions nested over 20 numbers (each
    /// well within the cost kube-apiserver admits).
    fn heavy_class() -> ClusterSource {
        let l = format!(
            "[{}]",
            (1..=20)
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(",")
        );
        let selector = format!("{l}.all(a, {l}.all(b, {l}.all(c, a + b + c > 0)))");
        device_class("heavy", &vec![selector; 32])
    }

    fn slice_of_eight() -> ClusterSource {
        let devices: Vec<_> = (0..8)
            .map(|d| serde_json::json!({"name": format!("gpu-{d}")}))
            .collect();
        ClusterSource::ResourceSlice(Box::new(
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "node1-gpu"},
                "spec": {"driver": "gpu.example.com", "nodeName": "node1",
                         "pool": {"name": "node1", "generation": 1, "resourceSliceCount": 1},
                         "devices": devices},
            }))
            .unwrap(),
        ))
    }

    /// The resource classes of the store's device providers.
    fn device_classes(shared: &Mirroring) -> Vec<String> {
        let store = shared.store.read().unwrap();
        let mut classes: Vec<String> = store
            .list(Kind::ResourceProvider)
            .filter_map(|o| match o {
                kubeplace_api::Object::ResourceProvider(rp) => {
                    rp.spec.inventories.keys().next().cloned()
                }
                _ => None,
            })
            .collect();
        classes.dedup();
        classes
    }

    /// One runtime worker, as a loaded operator may have: a request to a server on the
    /// runtime (as `/healthz`'s is: its handler takes no lock and answers at once, so what
    /// could hold it up is a runtime with no worker free) is answered while a slice's
    /// devices' classes are picked, since they are picked on a thread apart.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn health_is_answered_while_a_slices_device_classes_are_picked() {
        use std::io::{Read, Write};
        let (synced, _) = Synced::new(SourceKind::ALL.len());
        let shared = mirroring(synced);
        shared
            .handle(
                SourceKind::DeviceClass,
                vec![Event::Apply(heavy_class())],
                &mut None,
            )
            .await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(crate::serving::http::serve(
            listener,
            None,
            |_| async { crate::serving::http::text(http::StatusCode::OK, "ok\n") },
            Default::default(),
        ));
        let handling = {
            let shared = shared.clone();
            tokio::spawn(async move {
                let batch = vec![Event::Apply(slice_of_eight())];
                shared
                    .handle(SourceKind::ResourceSlice, batch, &mut None)
                    .await
            })
        };
        // The request is made from this thread, not a worker of the runtime.
        std::thread::sleep(std::time::Duration::from_millis(50));
        let asked = std::time::Instant::now();
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(std::time::Duration::from_secs(600)))
            .unwrap();
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut reply = String::new();
        stream.read_to_string(&mut reply).unwrap();
        let waited = asked.elapsed();
        assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
        assert!(
            !handling.is_finished(),
            "answered while the classes were being picked"
        );
        // It waited 52 s where the classes were picked on the runtime's worker.
        assert!(
            waited < std::time::Duration::from_millis(500),
            "/healthz waited {waited:?}"
        );
        handling.await.unwrap();
        assert_eq!(
            device_classes(&shared),
            ["CUSTOM_GPU_EXAMPLE_COM"],
            "a class past its time budget selects nothing"
        );
    }

    /// DeviceClasses picked apart and taken by the mirror whole: the devices renamed, and a
    /// class that does not compile reported.
    #[tokio::test]
    async fn a_batch_of_device_classes_is_picked_apart_and_reported() {
        let (synced, _) = Synced::new(SourceKind::ALL.len());
        let shared = mirroring(synced);
        shared
            .handle(
                SourceKind::ResourceSlice,
                vec![Event::Apply(slice_of_eight())],
                &mut None,
            )
            .await;
        assert_eq!(device_classes(&shared), ["CUSTOM_GPU_EXAMPLE_COM"]);
        let gpu = device_class("gpu", &[r#"device.driver == "gpu.example.com""#.into()]);
        let broken = device_class("aaa", &["device.driver ==".into()]);
        let mut listing = None;
        let batch = vec![
            Event::Init,
            Event::InitApply(broken.clone()),
            Event::InitApply(gpu.clone()),
            Event::InitDone,
        ];
        let (problems, classes_before) = {
            let shared = shared.clone();
            let classes_before = crate::locks::lock(&shared.mirror).device_classes().id();
            let problems = tokio::task::spawn_blocking(move || {
                shared.pick_and_mirror(SourceKind::DeviceClass, batch, &mut listing)
            })
            .await
            .unwrap();
            (problems, classes_before)
        };
        assert_eq!(device_classes(&shared), ["CUSTOM_GPU"]);
        assert!(
            matches!(&problems[..], [ClassProblem { class, problem: SelectorProblem::DoesNotCompile { index: 0, .. } }] if class == "aaa"),
            "{problems:?}"
        );
        {
            let mirror = crate::locks::lock(&shared.mirror);
            assert_ne!(mirror.device_classes().id(), classes_before);
            assert_eq!(mirror.seen(SourceKind::DeviceClass).len(), 2);
        }
        // The next list leaves `gpu` out: it goes, and the devices fall to their driver.
        let mut listing = None;
        shared
            .handle(
                SourceKind::DeviceClass,
                vec![Event::Init, Event::InitApply(broken), Event::InitDone],
                &mut listing,
            )
            .await;
        assert_eq!(device_classes(&shared), ["CUSTOM_GPU_EXAMPLE_COM"]);
        assert_eq!(
            crate::locks::lock(&shared.mirror)
                .seen(SourceKind::DeviceClass)
                .len(),
            1
        );
    }

    /// A batch holding a class's versions one after the other ends with its last.
    #[tokio::test]
    async fn a_batch_with_a_class_twice_ends_as_its_last_event_leaves_it() {
        let (synced, _) = Synced::new(SourceKind::ALL.len());
        let shared = mirroring(synced);
        let picked = |shared: &Arc<Mirroring>, events| {
            let shared = shared.clone();
            tokio::task::spawn_blocking(move || {
                shared.pick_and_mirror(SourceKind::DeviceClass, events, &mut None)
            })
        };
        let slice = vec![Event::Apply(slice_of_eight())];
        shared
            .handle(SourceKind::ResourceSlice, slice, &mut None)
            .await;
        let other = device_class("gpu", &[r#"device.driver == "x""#.into()]);
        let gpu = device_class("gpu", &[r#"device.driver == "gpu.example.com""#.into()]);
        let broken = device_class("gpu", &["device.driver ==".into()]);
        let problems = picked(
            &shared,
            vec![Event::Apply(other), Event::Apply(gpu.clone())],
        )
        .await
        .unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(device_classes(&shared), ["CUSTOM_GPU"]);
        let problems = picked(&shared, vec![Event::Delete(gpu), Event::Apply(broken)])
            .await
            .unwrap();
        assert_eq!(problems.len(), 1, "reported once: {problems:?}");
        assert_eq!(device_classes(&shared), ["CUSTOM_GPU_EXAMPLE_COM"]);
        assert_eq!(
            crate::locks::lock(&shared.mirror)
                .seen(SourceKind::DeviceClass)
                .len(),
            1
        );
    }

    /// A class that does not compile is published as a Warning Event on it, once.
    #[tokio::test]
    async fn a_class_that_does_not_compile_is_an_event_on_it() {
        use http::{Request, Response};
        use kube::client::Body;
        use tower_test::mock;
        let (service, mut api_server) = mock::pair::<Request<Body>, Response<Body>>();
        let client = kube::Client::new(service, "default");
        let (synced, _) = Synced::new(SourceKind::ALL.len());
        let shared = Arc::new(Mirroring {
            events: Some(crate::controllers::reconciler::recorder(client, "test")),
            ..Arc::into_inner(mirroring(synced)).unwrap()
        });
        let broken = device_class("aaa", &["device.driver ==".into()]);
        for _ in 0..2 {
            shared
                .handle(
                    SourceKind::DeviceClass,
                    vec![Event::Apply(broken.clone())],
                    &mut None,
                )
                .await;
        }
        let mut events = Vec::new();
        while let Ok(Some((request, send))) = tokio::time::timeout(
            std::time::Duration::from_millis(300),
            api_server.next_request(),
        )
        .await
        {
            let path = request.uri().path().to_string();
            let body: serde_json::Value =
                serde_json::from_slice(&request.into_body().collect_bytes().await.unwrap())
                    .unwrap();
            send.send_response(
                Response::builder()
                    .body(Body::from(serde_json::to_vec(&body).unwrap()))
                    .unwrap(),
            );
            events.push((path, body));
        }
        assert_eq!(events.len(), 1, "{events:?}");
        let (path, event) = &events[0];
        assert_eq!(path, "/apis/events.k8s.io/v1/namespaces/default/events");
        assert_eq!(event["type"], "Warning");
        assert_eq!(event["reason"], "SelectorInvalid");
        assert_eq!(event["regarding"]["kind"], "DeviceClass");
        assert_eq!(event["regarding"]["name"], "aaa");
        let note = event["note"].as_str().unwrap();
        assert!(
            note.starts_with("selector 0 does not compile, so the class selects no device: "),
            "{note}"
        );
    }
}
