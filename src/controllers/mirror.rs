//! The cluster mirror's watches (`kubeplace run --mirror-cluster`): Nodes, Pods,
//! ResourceSlices, ResourceClaims and DeviceClasses watched and read by
//! [`kubeplace_policy::mirror::Mirror`] into the shared store, as providers and
//! allocations that are never written back.

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};

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
use kubeplace_policy::mirror::{Mirror, TraitTable};
use kubeplace_policy::status::Reach;
use kubeplace_policy::store::{Change, ObjectKey};

/// Most watch events applied at once.
const BATCH: usize = 1024;

/// The mirror every watch of the cluster's kinds feeds, and where its changes go.
struct Mirroring {
    /// Taken before the store's lock and held while the changes are applied, so that the
    /// store sees the mirror's changes in the order the mirror made them.
    mirror: Mutex<Mirror>,
    store: SharedStore,
    trigger: Arc<Trigger>,
    synced: Arc<Synced>,
}

/// Starts a watch of every kind the mirror reads.
pub(crate) fn start(
    client: &Client,
    store: &SharedStore,
    trigger: &Arc<Trigger>,
    synced: &Arc<Synced>,
    traits: TraitTable,
) -> Vec<JoinHandle<()>> {
    let shared = Arc::new(Mirroring {
        mirror: Mutex::new(Mirror::new(traits)),
        store: store.clone(),
        trigger: trigger.clone(),
        synced: synced.clone(),
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
        shared.handle(kind, ok, &mut listing);
    }
}

impl Mirroring {
    /// Mirrors a batch of one kind's events into the store, under one lock, and asks for
    /// the statuses they reach. A list replaces what the mirror had of the kind.
    fn handle(
        &self,
        kind: SourceKind,
        events: Vec<Event<ClusterSource>>,
        listing: &mut Option<BTreeSet<SourceKey>>,
    ) {
        let mut mirror = crate::locks::lock(&self.mirror);
        let mut changes = Vec::new();
        let mut listed_now = false;
        for event in events {
            match event {
                Event::Apply(s) => changes.extend(observe(&mut mirror, &s)),
                Event::Delete(s) => changes.extend(mirror.forget(&s.key())),
                Event::Init => *listing = Some(BTreeSet::new()),
                Event::InitApply(s) => {
                    listing.get_or_insert_with(BTreeSet::new).insert(s.key());
                    changes.extend(observe(&mut mirror, &s));
                }
                Event::InitDone => {
                    let listed = listing.take().unwrap_or_default();
                    for gone in mirror.seen(kind) {
                        if !listed.contains(&gone) {
                            changes.extend(mirror.forget(&gone));
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
    }
}

/// One object mirrored; a failure is logged, and the object is mirrored as nothing.
fn observe(mirror: &mut Mirror, source: &ClusterSource) -> Vec<Change> {
    let observed = mirror.observe(source);
    if let Err(e) = &observed.outcome {
        warn!(object = %source.key(), error = %e, "cannot mirror");
    }
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

    #[test]
    fn a_list_replaces_what_the_mirror_had_and_marks_the_kind() {
        let (synced, ready) = Synced::new(SourceKind::ALL.len());
        let shared = Mirroring {
            mirror: Mutex::new(Mirror::default()),
            store: SharedStore::default(),
            trigger: Arc::new(Trigger::default()),
            synced,
        };
        let mut listing = None;
        shared.handle(
            SourceKind::Node,
            vec![Event::Apply(node("n1", "4")), Event::Apply(node("n2", "4"))],
            &mut listing,
        );
        assert!(!shared.trigger.take().reach.is_empty());
        shared.handle(
            SourceKind::Node,
            vec![
                Event::Init,
                Event::InitApply(node("n2", "8")),
                Event::InitDone,
            ],
            &mut listing,
        );
        let store = shared.store.read().unwrap();
        let names: Vec<&str> = store
            .list(Kind::ResourceProvider)
            .map(|o| o.name())
            .collect();
        assert_eq!(names, ["n2"]);
        assert_eq!(store.index().inventory("n2", "VCPU").unwrap().total, 8);
        assert!(!*ready.borrow(), "four kinds are not listed yet");
        drop(store);
        // The same Node again (a status heartbeat): nothing to reconcile.
        shared.trigger.take();
        shared.handle(
            SourceKind::Node,
            vec![Event::Apply(node("n2", "8"))],
            &mut listing,
        );
        assert!(shared.trigger.take().reach.is_empty());
    }
}
