//! Watches that keep the shared [`Store`] in step with the API server, one per kind.
//!
//! Objects are watched untyped and read as their kind one by one, so an object that does
//! not fit its kind's schema is logged and skipped and the watch goes on.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, DynamicObject};
use kube::core::ApiResource;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde_json::Value;
use tokio::sync::watch;
use tracing::{debug, info, warn};

use super::trigger::Trigger;
use crate::cache::{SharedStore, to_object};
use crate::metrics::{Metrics, kind_label};
use kubeplace_api::Kind;
use kubeplace_api::Object;
use kubeplace_api::cluster_source::SourceKind;
use kubeplace_policy::status::Reach;
use kubeplace_policy::store::{Change, ObjectKey, Store, resource_version};

/// Which kinds have their initial list in the store; ready when all have (kubeplace's
/// kinds, and the cluster's kinds the mirror reads when it runs).
pub(crate) struct Synced {
    kinds: Mutex<BTreeSet<Kind>>,
    sources: Mutex<BTreeSet<SourceKind>>,
    expected: usize,
    ready: watch::Sender<bool>,
}

impl Synced {
    /// Waits for `expected` kinds.
    pub fn new(expected: usize) -> (Arc<Synced>, watch::Receiver<bool>) {
        let (ready, rx) = watch::channel(expected == 0);
        (
            Arc::new(Synced {
                kinds: Mutex::new(BTreeSet::new()),
                sources: Mutex::new(BTreeSet::new()),
                expected,
                ready,
            }),
            rx,
        )
    }

    /// Marks a kind as listed.
    pub(crate) fn mark(&self, kind: Kind) {
        let newly = crate::locks::lock(&self.kinds).insert(kind);
        if newly {
            self.check();
        }
    }

    /// Marks a kind the mirror reads as listed.
    pub(crate) fn mark_source(&self, kind: SourceKind) {
        let newly = crate::locks::lock(&self.sources).insert(kind);
        if newly {
            self.check();
        }
    }

    fn check(&self) {
        let listed =
            crate::locks::lock(&self.kinds).len() + crate::locks::lock(&self.sources).len();
        if listed >= self.expected && !*self.ready.borrow() {
            info!(kinds = listed, "every kind is listed; the store is synced");
            self.ready.send_replace(true);
        }
    }

    /// The kinds not listed yet: kubeplace's, and the mirror's when it waits for them.
    pub(crate) fn pending(&self) -> Vec<&'static str> {
        let kinds = crate::locks::lock(&self.kinds);
        let mut pending: Vec<&'static str> = Kind::ALL
            .iter()
            .filter(|k| !kinds.contains(k))
            .map(|k| k.as_str())
            .collect();
        if self.expected > Kind::ALL.len() {
            let sources = crate::locks::lock(&self.sources);
            pending.extend(
                SourceKind::ALL
                    .iter()
                    .filter(|k| !sources.contains(k))
                    .map(|k| k.as_str()),
            );
        }
        pending
    }
}

/// What an object is, leaving out what only the API server's bookkeeping and the status
/// writer change: a change here can change other objects' statuses.
fn body(o: &Object) -> Value {
    let mut v = o.to_value();
    if let Some(map) = v.as_object_mut() {
        map.remove("status");
        if let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("resourceVersion");
            meta.remove("managedFields");
        }
    }
    v
}

/// One kind's watch state: the events of a (re)list are buffered and swapped in at once.
pub(crate) struct KindWatch {
    kind: Kind,
    relist: Option<Vec<Object>>,
    store: SharedStore,
    trigger: Arc<Trigger>,
    synced: Arc<Synced>,
    metrics: Arc<Metrics>,
}

impl KindWatch {
    pub fn new(
        kind: Kind,
        store: SharedStore,
        trigger: Arc<Trigger>,
        synced: Arc<Synced>,
        metrics: Arc<Metrics>,
    ) -> KindWatch {
        KindWatch {
            kind,
            relist: None,
            store,
            trigger,
            synced,
            metrics,
        }
    }

    fn read(&self, object: &DynamicObject) -> Option<Object> {
        match to_object(self.kind, object) {
            Ok(o) => Some(o),
            Err(e) => {
                warn!(kind = %self.kind, name = object.metadata.name.as_deref().unwrap_or(""), error = %e, "skipping an object that does not fit its kind");
                self.metrics
                    .watch_skipped
                    .get_or_create(&kind_label(self.kind))
                    .inc();
                None
            }
        }
    }

    fn store(&self) -> std::sync::RwLockWriteGuard<'_, Store> {
        crate::locks::write(&self.store)
    }

    /// What a watch event's change does, judged over the store before it under one lock.
    fn judge(&self, change: &Change) -> Effect {
        let store = crate::locks::read(&self.store);
        let key = change.key();
        let held = store.get(&key);
        if change.is_past(held) {
            return Effect::Past;
        }
        let new = match change {
            Change::Put(o) => Some(&**o),
            _ => None,
        };
        match (held, new) {
            (Some(held), Some(new)) if body(held) == body(new) => Effect::StatusOnly,
            _ => Effect::Reaches(Reach::of_change(&store, held, new)),
        }
    }

    /// Applies the changes gathered; what the provider config merge moved in doing so. The
    /// store judges each again as it takes it ([`Change::is_past`]): a write of this process
    /// may have put a newer object since the event was judged here.
    fn flush(&self, changes: &mut Vec<Change>) -> Reach {
        if changes.is_empty() {
            return Reach::default();
        }
        Reach::of_merge(self.store().apply_changes(std::mem::take(changes)))
    }

    /// Applies one watch event to the store.
    #[cfg(test)]
    fn handle(&mut self, event: Event<DynamicObject>) {
        self.handle_batch([event]);
    }

    /// Applies watch events to the store, in order, as one change of the store (one lock,
    /// one provider config merge). Asks for the statuses the changes reach to be
    /// reconciled, and for the objects whose status alone changed.
    pub(crate) fn handle_batch(&mut self, events: impl IntoIterator<Item = Event<DynamicObject>>) {
        let mut changes = Vec::new();
        let mut reach = Reach::default();
        let mut status_only = Vec::new();
        let mut listed_now = false;
        // The newest resourceVersion among the events taken, noted once they are applied.
        let mut newest: Option<u64> = None;
        for event in events {
            match event {
                Event::Apply(o) => {
                    newest = newest.max(version_of(&o));
                    self.metrics.watch_event(self.kind, "apply");
                    if let Some(object) = self.read(&o) {
                        let change = Change::Put(Box::new(object));
                        match self.judge(&change) {
                            Effect::Past => continue,
                            Effect::StatusOnly => status_only.push(change.key()),
                            Effect::Reaches(r) => reach.add(r),
                        }
                        debug!(kind = %self.kind, key = ?change.key(), "applied");
                        changes.push(change);
                    }
                }
                Event::Delete(o) => {
                    newest = newest.max(version_of(&o));
                    self.metrics.watch_event(self.kind, "delete");
                    let key = ObjectKey {
                        kind: self.kind,
                        namespace: o.metadata.namespace.clone().unwrap_or_default(),
                        name: o.metadata.name.clone().unwrap_or_default(),
                    };
                    let change = match o.metadata.uid.clone() {
                        Some(uid) => Change::DeleteOf { key, uid },
                        None => Change::Delete(key),
                    };
                    match self.judge(&change) {
                        Effect::Past => continue,
                        Effect::StatusOnly => {}
                        Effect::Reaches(r) => reach.add(r),
                    }
                    debug!(kind = %self.kind, key = ?change.key(), "deleted");
                    changes.push(change);
                }
                Event::Init => {
                    self.metrics.watch_event(self.kind, "relist");
                    self.relist = Some(Vec::new());
                }
                Event::InitApply(o) => {
                    if let Some(object) = self.read(&o) {
                        self.relist.get_or_insert_with(Vec::new).push(object);
                    }
                }
                Event::InitDone => {
                    reach.add(self.flush(&mut changes));
                    let listed = self.relist.take().unwrap_or_default();
                    // A list shows every change up to its newest object's version.
                    let listed_through = listed
                        .iter()
                        .filter_map(|o| resource_version(o.meta()))
                        .max();
                    newest = newest.max(listed_through);
                    let relisted = self.store().apply_relist(self.kind, listed);
                    let (count, removed) = (relisted.taken, relisted.removed);
                    info!(kind = %self.kind, objects = count, removed, "listed");
                    reach = Reach::every();
                    listed_now = true;
                }
            }
        }
        reach.add(self.flush(&mut changes));
        if let Some(newest) = newest {
            self.store().note_watched(self.kind, newest);
        }
        if !reach.is_empty() {
            self.trigger.reach(reach);
        }
        for key in status_only {
            self.trigger.key(key);
        }
        if listed_now {
            self.synced.mark(self.kind);
        }
    }
}

/// An event's object's resourceVersion.
fn version_of(o: &DynamicObject) -> Option<u64> {
    o.metadata.resource_version.as_deref()?.parse().ok()
}

/// What a watch event does to the store ([`KindWatch::judge`]).
enum Effect {
    /// The store is past it: nothing to do.
    Past,
    /// The object differs from the stored one in its status alone.
    StatusOnly,
    /// It changes the object; what that can reach.
    Reaches(Reach),
}

/// Most watch events applied to the store at once.
const BATCH: usize = 1024;

/// Watches one kind until the stream ends (it does not: errors are retried with backoff).
pub async fn run(client: Client, resource: ApiResource, mut state: KindWatch) {
    let api: Api<DynamicObject> = Api::all_with(client, &resource);
    let events = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut batches = events.ready_chunks(BATCH);
    while let Some(batch) = batches.next().await {
        let mut ok = Vec::with_capacity(batch.len());
        for event in batch {
            match event {
                Ok(event) => ok.push(event),
                Err(e) => {
                    state.metrics.watch_error(state.kind);
                    warn!(kind = %resource.kind, error = %e, "watch failed; retrying")
                }
            }
        }
        state.handle_batch(ok);
    }
}

/// A watch for a kubeplace kind; `None` for any other resource.
pub(crate) fn kind_watch(
    resource: &ApiResource,
    store: &SharedStore,
    trigger: &Arc<Trigger>,
    synced: &Arc<Synced>,
    metrics: &Arc<Metrics>,
) -> Option<KindWatch> {
    Some(KindWatch::new(
        Kind::from_name(&resource.kind)?,
        store.clone(),
        trigger.clone(),
        synced.clone(),
        metrics.clone(),
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn dynamic(v: Value) -> DynamicObject {
        serde_json::from_value(v).unwrap()
    }

    fn provider(name: &str, vcpu: i64) -> DynamicObject {
        dynamic(json!({
            "apiVersion": "kubeplace.io/v1alpha1", "kind": "ResourceProvider",
            "metadata": {"name": name, "resourceVersion": "1", "generation": 1},
            "spec": {"inventories": {"VCPU": {"total": vcpu}}},
        }))
    }

    fn setup() -> (KindWatch, SharedStore, Arc<Trigger>, watch::Receiver<bool>) {
        let store = SharedStore::default();
        let trigger = Arc::new(Trigger::default());
        let (synced, ready) = Synced::new(1);
        let w = KindWatch::new(
            Kind::ResourceProvider,
            store.clone(),
            trigger.clone(),
            synced,
            Arc::new(Metrics::new()),
        );
        (w, store, trigger, ready)
    }

    #[test]
    fn a_bad_object_is_skipped_and_the_rest_is_kept() {
        let (mut w, store, _trigger, ready) = setup();
        w.handle(Event::Init);
        w.handle(Event::InitApply(provider("cn1", 8)));
        w.handle(Event::InitApply(dynamic(json!({
            "apiVersion": "kubeplace.io/v1alpha1", "kind": "ResourceProvider",
            "metadata": {"name": "broken"}, "spec": {"inventories": {"VCPU": {"total": "many"}}},
        }))));
        w.handle(Event::InitApply(provider("cn2", 4)));
        assert!(!*ready.borrow());
        w.handle(Event::InitDone);
        assert!(*ready.borrow());
        let names: Vec<String> = store
            .read()
            .unwrap()
            .keys()
            .map(|k| k.name.clone())
            .collect();
        assert_eq!(names, ["cn1", "cn2"]);
        w.handle(Event::Apply(dynamic(json!({"apiVersion": "kubeplace.io/v1alpha1", "kind": "ResourceProvider", "metadata": {"name": "cn3"}, "spec": 7}))));
        w.handle(Event::Apply(provider("cn3", 2)));
        assert_eq!(store.read().unwrap().len(), 3);
    }

    #[test]
    fn a_relist_replaces_the_kind_and_drops_what_is_gone() {
        let (mut w, store, _trigger, _ready) = setup();
        w.handle(Event::Apply(provider("cn1", 8)));
        w.handle(Event::Apply(provider("cn2", 8)));
        w.handle(Event::Init);
        let mut cn2 = provider("cn2", 16);
        cn2.metadata.resource_version = Some("2".into());
        w.handle(Event::InitApply(cn2));
        w.handle(Event::InitDone);
        let s = store.read().unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!(s.index().inventory("cn2", "VCPU").unwrap().total, 16);
    }

    #[test]
    fn a_relist_keeps_what_was_written_after_the_list() {
        let (mut w, store, _trigger, _ready) = setup();
        let at = |name: &str, vcpu: i64, rv: &str| {
            let mut p = provider(name, vcpu);
            p.metadata.resource_version = Some(rv.into());
            p
        };
        w.handle(Event::Apply(at("old", 1, "3")));
        w.handle(Event::Apply(at("cn1", 8, "4")));
        // Written (and stored) by this process after the list below was taken.
        w.handle(Event::Apply(at("new", 2, "9")));
        w.handle(Event::Apply(at("cn1", 16, "8")));
        w.handle(Event::Init);
        w.handle(Event::InitApply(at("cn1", 8, "4")));
        w.handle(Event::InitApply(at("other", 4, "5")));
        w.handle(Event::InitDone);
        let s = store.read().unwrap();
        let has = |name: &str| s.get_cluster(Kind::ResourceProvider, name).is_some();
        assert!(!has("old"), "gone from the list, and older than it");
        assert!(
            has("new"),
            "newer than anything listed: written after the list"
        );
        assert!(has("other"));
        assert_eq!(
            s.index().inventory("cn1", "VCPU").unwrap().total,
            16,
            "the newer copy stays"
        );
    }

    /// How far the watch has brought the kind: the newest event's version once applied, a
    /// relist's newest object only once the relist is taken.
    #[test]
    fn the_store_knows_how_far_the_watch_has_brought_the_kind() {
        let (mut w, store, _trigger, _ready) = setup();
        let at = |name: &str, rv: &str| {
            let mut p = provider(name, 1);
            p.metadata.resource_version = Some(rv.into());
            p
        };
        let through = || {
            store
                .read()
                .unwrap()
                .watched_through(Kind::ResourceProvider)
        };
        assert_eq!(through(), 0);
        w.handle_batch([Event::Apply(at("a", "7")), Event::Delete(at("b", "9"))]);
        assert_eq!(through(), 9, "a deletion's version counts");
        w.handle_batch([Event::Init, Event::InitApply(at("a", "12"))]);
        assert_eq!(through(), 9, "a relist not yet taken shows nothing");
        w.handle_batch([Event::InitApply(at("c", "11")), Event::InitDone]);
        assert_eq!(through(), 12);
        w.handle(Event::Apply(at("a", "10")));
        assert_eq!(through(), 12, "never goes back");
    }

    #[test]
    fn a_late_deletion_of_an_earlier_object_of_the_name_leaves_the_new_one() {
        let (mut w, store, _trigger, _ready) = setup();
        let with_uid = |vcpu: i64, uid: &str, rv: &str| {
            let mut p = provider("cn1", vcpu);
            p.metadata.uid = Some(uid.into());
            p.metadata.resource_version = Some(rv.into());
            p
        };
        // The object made again (a write's answer, stored before the watch's events).
        w.handle(Event::Apply(with_uid(16, "second", "7")));
        // The deletion of the first object of that name comes late.
        w.handle(Event::Delete(with_uid(8, "first", "5")));
        assert!(
            store
                .read()
                .unwrap()
                .get_cluster(Kind::ResourceProvider, "cn1")
                .is_some(),
            "the new object stays"
        );
        w.handle(Event::Delete(with_uid(16, "second", "9")));
        assert!(
            store
                .read()
                .unwrap()
                .get_cluster(Kind::ResourceProvider, "cn1")
                .is_none()
        );
    }

    #[test]
    fn an_event_older_than_the_stored_object_leaves_it() {
        let (mut w, store, _trigger, _ready) = setup();
        let mut decided = provider("cn1", 16);
        decided.metadata.resource_version = Some("5".into());
        w.handle(Event::Apply(decided));
        // A late event of the object as it was before (resourceVersion 1): the store holds
        // something newer, e.g. a write decided on top of it and not yet committed.
        w.handle(Event::Apply(provider("cn1", 8)));
        let total = |s: &SharedStore| {
            s.read()
                .unwrap()
                .index()
                .inventory("cn1", "VCPU")
                .unwrap()
                .total
        };
        assert_eq!(total(&store), 16);
        // A newer one replaces it.
        let mut later = provider("cn1", 4);
        later.metadata.resource_version = Some("6".into());
        w.handle(Event::Apply(later));
        assert_eq!(total(&store), 4);
    }

    #[test]
    fn status_only_changes_ask_for_that_object_alone() {
        let (mut w, store, trigger, _ready) = setup();
        let cn1 = ObjectKey::cluster(Kind::ResourceProvider, "cn1");
        let cn2 = ObjectKey::cluster(Kind::ResourceProvider, "cn2");
        w.handle(Event::Apply(provider("cn2", 4)));
        w.handle(Event::Apply(provider("cn1", 8)));
        // A new provider reaches itself (and the objects that read every provider), not
        // the other providers.
        let pending = trigger.take();
        assert!(!pending.full());
        let reached = pending.reach.keys(&store.read().unwrap());
        assert!(
            reached.contains(&cn1) && reached.contains(&cn2),
            "{reached:?}"
        );
        let mut with_status = provider("cn1", 8);
        with_status.metadata.resource_version = Some("2".into());
        with_status.data["status"] = json!({"root": "cn1"});
        w.handle(Event::Apply(with_status));
        let pending = trigger.take();
        assert!(pending.reach.is_empty());
        assert_eq!(pending.keys, [cn1.clone()].into());
        let mut newer = provider("cn1", 9);
        newer.metadata.resource_version = Some("3".into());
        w.handle(Event::Apply(newer));
        let pending = trigger.take();
        assert_eq!(
            pending.reach.keys(&store.read().unwrap()),
            std::slice::from_ref(&cn1)
        );
        w.handle(Event::Delete(provider("cn1", 9)));
        let pending = trigger.take();
        assert!(!pending.reach.is_empty() && !pending.full());
        // A relist reaches every object.
        w.handle(Event::Init);
        w.handle(Event::InitApply(provider("cn2", 4)));
        w.handle(Event::InitDone);
        assert!(trigger.take().full());
    }
}
