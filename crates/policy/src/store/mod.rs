//! The in-memory object store: what `kubeplace apply` runs against, and what the
//! operator's watches fill. It keeps the provider index in step with every change, so
//! admission and reconcile read one consistent view.

use kubeplace_api::Kind;
use kubeplace_api::ServerRef;

pub mod charges;
mod counts;
mod gate;
pub use gate::Relisted;
mod config_merge;
pub mod generations;
mod records;
pub mod writes;

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use config_merge::{changes_merge, note_merge_change};
use generations::GenerationsKept;

use kubeplace_api::manifest::CustomNames;
use kubeplace_api::{Object, Server, Status};
use kubeplace_core::extra_specs::registry::{Registry, Rejected};

use crate::translate;
use kubeplace_core::placement::ProviderIndex;
use kubeplace_core::placement::trait_rows::TraitRows;
use kubeplace_core::provider_config::{MergeResult, ProviderFacts};

/// Where an object lives: kind, namespace (empty for cluster-scoped kinds) and name. Keys
/// order by kind, then namespace, then name.
#[derive(Debug, Clone)]
pub struct ObjectKey {
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
}

// Compared by hand, in the order a derive gives, only to keep empty strings away from
// `memcmp`: an empty `String` points at a dangling address, and glibc's AVX-512 `memcmp`
// loads from it under an all-zero mask, which costs a fault-suppression assist of about
// 150 ns a call on AMD EPYC processors. A cluster-scoped key's namespace is empty in every
// comparison: applying 45,000 providers spent about half a second of CPU (more than half of
// all) in the store's searches.
impl Ord for ObjectKey {
    fn cmp(&self, other: &ObjectKey) -> Ordering {
        let kind = if self.kind == other.kind {
            Ordering::Equal
        } else {
            self.kind.cmp(&other.kind)
        };
        kind.then_with(|| text_cmp(&self.namespace, &other.namespace))
            .then_with(|| text_cmp(&self.name, &other.name))
    }
}

impl PartialOrd for ObjectKey {
    fn partial_cmp(&self, other: &ObjectKey) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for ObjectKey {
    fn eq(&self, other: &ObjectKey) -> bool {
        self.kind == other.kind
            && text_eq(&self.namespace, &other.namespace)
            && text_eq(&self.name, &other.name)
    }
}

impl Eq for ObjectKey {}

impl Hash for ObjectKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.kind.hash(state);
        self.namespace.hash(state);
        self.name.hash(state);
    }
}

/// `a.cmp(b)`, without a call to `memcmp` when either is empty.
fn text_cmp(a: &str, b: &str) -> Ordering {
    match (a.is_empty(), b.is_empty()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        (false, false) => a.cmp(b),
    }
}

/// `a == b`, without a call to `memcmp` when either is empty.
fn text_eq(a: &str, b: &str) -> bool {
    a.len() == b.len() && (a.is_empty() || a == b)
}

impl ObjectKey {
    /// The key of an object.
    pub fn of(object: &Object) -> ObjectKey {
        ObjectKey {
            kind: object.kind(),
            namespace: object.meta().namespace.clone().unwrap_or_default(),
            name: object.name().to_string(),
        }
    }

    /// The key of a Server.
    pub fn server(server: &ServerRef) -> ObjectKey {
        ObjectKey {
            kind: Kind::Server,
            namespace: server.namespace.clone(),
            name: server.name.clone(),
        }
    }

    /// The key of a cluster-scoped object.
    pub fn cluster(kind: Kind, name: &str) -> ObjectKey {
        ObjectKey {
            kind,
            namespace: String::new(),
            name: name.to_string(),
        }
    }
}

/// One change to the store, for [`Store::apply_changes`].
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// Put an object in exactly as given.
    Put(Box<Object>),
    /// Delete an object.
    Delete(ObjectKey),
    /// Delete the object of this uid: not another object made under its name since (a
    /// watch's late deletion of an earlier object).
    DeleteOf { key: ObjectKey, uid: String },
    /// Take away a mirrored object (the cluster object it was mirrored from changed or went):
    /// the store's object when it is that mirrored one, never a written one of its name.
    Unmirror(ObjectKey),
}

impl Change {
    /// The object it changes.
    pub fn key(&self) -> ObjectKey {
        match self {
            Change::Put(o) => ObjectKey::of(o),
            Change::Delete(k) | Change::DeleteOf { key: k, .. } | Change::Unmirror(k) => k.clone(),
        }
    }

    /// Whether the store is past it, holding `held` under its key: a put of a version no
    /// newer than the one held, or the deletion of an earlier object of the name.
    pub fn is_past(&self, held: Option<&Object>) -> bool {
        match (self, held) {
            (Change::Put(new), Some(held)) => newer_or_same(held, new),
            (Change::DeleteOf { uid, .. }, Some(held)) => {
                held.meta().uid.as_deref().is_some_and(|h| h != uid)
            }
            _ => false,
        }
    }
}

/// Objects by key, plus the provider index built from them.
#[derive(Debug, Clone, Default)]
pub struct Store {
    /// Shared, so that a copy of the store (a reconcile pass plans over one) shares every
    /// object with the original until either changes it.
    objects: BTreeMap<ObjectKey, Arc<Object>>,
    /// Shared too: a search takes the index as it is and lets go of the store's lock, and
    /// the next change copies the index only while such a search still holds it.
    index: Arc<ProviderIndex>,
    /// Provider config entries merged over the index; its additions are in the index.
    config_merge: MergeResult,
    /// Allocations refused when their claims were settled, whose verdict is not in their status
    /// yet, with the generation refused and why. They do not count against their providers.
    /// Kept by the store because a refusal decides what the index counts: it is taken into
    /// account in the same step, under the same lock, as every put of the Allocation.
    refused: BTreeMap<String, (Option<i64>, String)>,
    /// The uids of the Allocations deleted last, newest at the back: a claim admitted and
    /// deleted before anyone looked is not waited for by the claims ledger. Kept by the
    /// store because it decides what counts too: it is noted in the same step, under the
    /// same lock, as the delete that stops the index counting the Allocation, so the ledger
    /// stops holding the claim when the index stops counting it.
    deleted_claims: std::collections::VecDeque<String>,
    /// Grows with every change of an object other than its status alone.
    revision: u64,
    /// The provider generations Allocations record (shared like the index: a copy of the
    /// store copies them only when it changes them).
    generation_records: Arc<generations::GenerationRecords>,
    /// What each provider's own object says of its generation, by name (shared the same
    /// way; changed only when a provider's spec or generation record changes, not by a
    /// status write).
    own_generations: Arc<HashMap<String, generations::OwnGeneration>>,
    /// Grows whenever a provider's generation may change or the index's slots move: what
    /// [`Store::provider_generations`] keeps is good while it stays the same.
    generations_epoch: u64,
    /// Every provider's generation by slot, kept for large lists until the epoch moves.
    generations_kept: GenerationsKept,
    /// Allocation keys by consumer uuid (shared like the index): finding a consumer's
    /// objects is a lookup, not a walk over every object (which cost a claim 2.4 ms at 35k
    /// providers).
    by_consumer: Arc<HashMap<String, BTreeSet<ObjectKey>>>,
    /// What each project's counted claims hold (shared like the index), changed in the
    /// same step as the index's count of a claim.
    charges: Arc<charges::Charges>,
    /// ProjectQuotas by the projects they govern, so a claim finds its quota in one lookup.
    quotas: Arc<HashMap<String, BTreeSet<ObjectKey>>>,
    /// Every watch change held back, and why ([`gate`]).
    gate: gate::Gate,
    /// Custom traits and resource classes a manifest's registry ConfigMap lists, which
    /// exist whether or not an object uses them (shared like the index).
    seeded_names: Arc<CustomNames>,
    /// Per kind, the newest resourceVersion its watch has brought ([`Store::note_watched`]).
    watched_through: HashMap<Kind, u64>,
    /// Per kind, the newest resourceVersion put in directly ([`Store::put`]).
    put_through: HashMap<Kind, u64>,
}

/// How many deleted Allocations' uids the store remembers.
pub(super) const DELETED_CLAIMS_KEPT: usize = 4096;

impl Store {
    /// Notes that the watch of `kind` has brought, in order, every change of its objects up
    /// to `version` (an event's resourceVersion, or the newest of a list's objects). A
    /// listed object the store lacks whose version is at most this was deleted since.
    pub fn note_watched(&mut self, kind: Kind, version: u64) {
        let through = self.watched_through.entry(kind).or_insert(0);
        *through = (*through).max(version);
    }

    /// The newest resourceVersion the watch of `kind` has brought (0 before any).
    pub fn watched_through(&self, kind: Kind) -> u64 {
        self.watched_through.get(&kind).copied().unwrap_or(0)
    }

    /// The newest resourceVersion of `kind` the store has taken, by its watch or put in
    /// directly (0 before any).
    pub fn taken_through(&self, kind: Kind) -> u64 {
        let put = self.put_through.get(&kind).copied().unwrap_or(0);
        self.watched_through(kind).max(put)
    }

    /// Adds the custom names of a manifest's registry ConfigMap (each kept once).
    pub fn seed_custom_names(&mut self, names: &CustomNames) {
        let seeded = Arc::make_mut(&mut self.seeded_names);
        for name in &names.traits {
            if !seeded.traits.contains(name) {
                seeded.traits.push(name.clone());
            }
        }
        for name in &names.resource_classes {
            if !seeded.resource_classes.contains(name) {
                seeded.resource_classes.push(name.clone());
            }
        }
    }

    /// The custom names seeded from a manifest's registry ConfigMap.
    pub fn seeded_custom_names(&self) -> &CustomNames {
        &self.seeded_names
    }

    /// An object by key.
    pub fn get(&self, key: &ObjectKey) -> Option<&Object> {
        self.objects.get(key).map(|o| &**o)
    }

    /// The stored object itself, shared: it stays as it is now however the store changes.
    pub fn get_shared(&self, key: &ObjectKey) -> Option<Arc<Object>> {
        self.objects.get(key).cloned()
    }

    /// A cluster-scoped object by kind and name.
    pub fn get_cluster(&self, kind: Kind, name: &str) -> Option<&Object> {
        self.objects
            .get(&ObjectKey::cluster(kind, name))
            .map(|o| &**o)
    }

    /// Every object of a kind, in key order.
    pub fn list(&self, kind: Kind) -> impl Iterator<Item = &Object> {
        // Keys order by kind first: a kind's objects are one range, not a scan of every
        // object (which made applying 45,000 providers quadratic).
        let first = ObjectKey {
            kind,
            namespace: String::new(),
            name: String::new(),
        };
        self.objects
            .range(first..)
            .take_while(move |(k, _)| k.kind == kind)
            .map(|(_, o)| &**o)
    }

    /// Every key, in order.
    pub fn keys(&self) -> impl Iterator<Item = &ObjectKey> {
        self.objects.keys()
    }

    /// Every object with its key, in key order, shared: each stays as it is now however the
    /// store changes.
    pub fn iter_shared(&self) -> impl ExactSizeIterator<Item = (&ObjectKey, &Arc<Object>)> {
        self.objects.iter()
    }

    /// Number of objects.
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    /// Whether the store is empty.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// The provider index.
    pub fn index(&self) -> &ProviderIndex {
        &self.index
    }

    /// The provider index as it is now, to search without holding the store: changes
    /// after this call do not reach it.
    pub fn index_now(&self) -> Arc<ProviderIndex> {
        Arc::clone(&self.index)
    }

    /// The keys of a consumer's Allocations, in key order.
    pub fn allocations_of_consumer(&self, consumer: &str) -> impl Iterator<Item = &ObjectKey> {
        self.by_consumer.get(consumer).into_iter().flatten()
    }

    /// Lists traits in the order of `rows` from now on (a change of order is a change of
    /// the index: answers kept from it are not sent again).
    pub fn set_trait_rows(&mut self, rows: TraitRows) {
        if *self.index.trait_rows() != rows {
            self.index_mut().set_trait_rows(rows);
        }
    }

    /// The index to change: copied first when a search still holds it.
    fn index_mut(&mut self) -> &mut ProviderIndex {
        self.generations_epoch += 1;
        Arc::make_mut(&mut self.index)
    }

    /// Holds back packing provider trees for the search until [`Store::finish_repacks`]:
    /// a run of providers written one after the other (a file of thousands, in order) then
    /// packs each tree once, not again as each child joins. Nothing may search meanwhile.
    pub fn defer_repacks(&mut self) {
        self.index_mut().defer_repacks();
    }

    /// Packs every tree changed since [`Store::defer_repacks`]; nothing when not deferred.
    pub fn finish_repacks(&mut self) {
        self.index_mut().finish_repacks();
    }

    /// A number that grows whenever an object is added, deleted or changed in more than its
    /// status: equal revisions of one store hold the same specs.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// The ExtraSpecDefinitions in the store, in name order, compiled; those that do not
    /// compile are returned apart.
    pub fn custom_definitions(&self) -> (Registry, Vec<Rejected>) {
        translate::custom_definitions(self.list(Kind::ExtraSpecDefinition).filter_map(
            |o| match o {
                Object::ExtraSpecDefinition(d) => Some(d),
                _ => None,
            },
        ))
    }

    /// The service profile a server uses: the one it names, else its flavor's first enabled
    /// one.
    pub(crate) fn chosen_profile(&self, server: &Server) -> Option<String> {
        let flavor = match self.get_cluster(Kind::Flavor, &server.spec.flavor) {
            Some(Object::Flavor(f)) => Some(f),
            _ => None,
        };
        translate::chosen_profile(server, flavor, |p| {
            matches!(self.get_cluster(Kind::ServiceProfile, p),
                     Some(Object::ServiceProfile(sp)) if sp.spec.enabled)
        })
    }

    /// Creates or updates an object as the API server would on apply: the status is kept,
    /// and `metadata.generation` starts at 1 and grows when anything but the status changes.
    pub fn apply(&mut self, mut object: Object) -> Option<Object> {
        let key = ObjectKey::of(&object);
        let Some(old) = self.objects.get(&key).map(|o| &**o) else {
            self.create(key, object);
            return None;
        };
        // The stored status is kept; the generation moves when anything else changed.
        if let Some(status) = old.status() {
            object.set_status(status);
        }
        let old_gen = old.meta().generation.unwrap_or(1);
        let mut old_body = old.clone();
        old_body.meta_mut().generation = None;
        let mut new_body = object.clone();
        new_body.meta_mut().generation = None;
        let generation = if old_body == new_body {
            old_gen
        } else {
            old_gen + 1
        };
        if object.meta().generation.is_none() {
            object.meta_mut().generation = Some(generation);
        }
        let kind = object.kind();
        self.index_object(&object);
        self.revision += 1;
        let new = Arc::new(object);
        let old = self.objects.insert(key, new.clone());
        self.note_records(old.as_deref(), Some(&new));
        self.after_change(kind);
        old.map(Arc::unwrap_or_clone)
    }

    /// Stores an object the caller found absent under `key` (its generation 1, unless it
    /// has one): [`Store::apply`] without looking for an old object a second time, which in
    /// a store of tens of thousands is most of what storing costs.
    pub fn create(&mut self, key: ObjectKey, mut object: Object) {
        debug_assert!(key == ObjectKey::of(&object) && !self.objects.contains_key(&key));
        if object.meta().generation.is_none() {
            object.meta_mut().generation = Some(1);
        }
        let kind = object.kind();
        self.index_object(&object);
        self.revision += 1;
        self.note_records(None, Some(&object));
        self.objects.insert(key, Arc::new(object));
        self.after_change(kind);
    }

    /// Puts an object in exactly as given (an operator's watch event), keeping the index in step.
    pub fn put(&mut self, object: Object) -> Option<Object> {
        let kind = object.kind();
        if self.gate.holds_deletions() {
            // Put back (an undone deletion), or put under a name held for any object.
            let key = ObjectKey::of(&object);
            if self.gate.deletion_held(&key, &object) {
                self.gate.release_deletion(&key);
            }
        }
        self.gate
            .writes
            .put_directly(&ObjectKey::of(&object), &object);
        if let Some(version) = resource_version(object.meta()) {
            let through = self.put_through.entry(kind).or_insert(0);
            *through = (*through).max(version);
        }
        self.index_object(&object);
        self.revision += 1;
        let key = ObjectKey::of(&object);
        let new = Arc::new(object);
        let old = self.objects.insert(key, new.clone());
        self.note_records(old.as_deref(), Some(&new));
        self.after_change(kind);
        old.map(Arc::unwrap_or_clone)
    }

    /// Deletes an object; a mirrored object it stood in place of comes back.
    pub fn delete(&mut self, key: &ObjectKey) -> Option<Object> {
        let old = self.remove_unmerged(key)?;
        self.after_change(key.kind);
        if let Some(mirrored) = self.gate.take_aside(key) {
            self.put(mirrored);
        }
        Some(old)
    }

    fn remove_unmerged(&mut self, key: &ObjectKey) -> Option<Object> {
        let old = Arc::unwrap_or_clone(self.objects.remove(key)?);
        self.revision += 1;
        self.note_records(Some(&old), None);
        match &old {
            Object::ResourceProvider(_) => {
                self.index_mut().remove_provider(&key.name);
            }
            Object::Allocation(a) => {
                self.stop_counting(&key.name);
                self.refused.remove(&key.name);
                if let Some(uid) = &a.metadata.uid {
                    if self.deleted_claims.len() == DELETED_CLAIMS_KEPT {
                        self.deleted_claims.pop_front();
                    }
                    self.deleted_claims.push_back(uid.clone());
                }
            }
            _ => {}
        }
        Some(old)
    }

    /// Applies changes in order, as [`Store::put`] and [`Store::delete`] would, but merges
    /// provider configs once at the end: a burst of watch events, or a relist of thousands of
    /// providers, costs one merge instead of one per provider. The providers whose provider
    /// config outcome the changes moved: their statuses move with it.
    ///
    /// These are the watches' changes: PlacementWrites among them open and close writes,
    /// and changes of the objects they write are taken as [`writes`] says.
    pub fn apply_changes(&mut self, changes: impl IntoIterator<Item = Change>) -> Vec<String> {
        self.apply_batch(changes, true)
    }

    /// [`Store::apply_changes`] for a list of a kind: a snapshot, in which nothing is held
    /// for a write not seen yet (a write listed as closed, or one whose record arrives next,
    /// which then shows whole).
    pub fn apply_listed(&mut self, changes: impl IntoIterator<Item = Change>) -> Vec<String> {
        self.apply_batch(changes, false)
    }

    fn apply_batch(
        &mut self,
        changes: impl IntoIterator<Item = Change>,
        live: bool,
    ) -> Vec<String> {
        let mut batch = Batch {
            remerge: false,
            changed_providers: Some(Vec::new()),
            live,
        };
        // Each changed tree is packed for the search once, after every change is in.
        self.index_mut().defer_repacks();
        // Changes held too long for a write's record are taken first, in their order.
        let due = if self.gate.writes.any_due() {
            self.gate.writes.release(None)
        } else {
            Vec::new()
        };
        for change in due.into_iter().chain(changes) {
            self.take_change(change, &mut batch);
        }
        let moved = match (batch.remerge, batch.changed_providers) {
            (false, _) => Vec::new(),
            (true, Some(changed)) => self.refresh_config_merge_for(&changed),
            (true, None) => self.refresh_config_merge(),
        };
        self.index_mut().finish_repacks();
        moved
    }

    /// One watch change, as the [`gate`] decides: taken, held or skipped.
    fn take_change(&mut self, change: Change, batch: &mut Batch) {
        let current = self.objects.get(&change.key()).cloned();
        match self.gate.judge(change, current.as_deref(), batch.live) {
            gate::Verdict::Skip | gate::Verdict::Held => {}
            gate::Verdict::Unmirror(key) => self.delete_in_batch(key, batch),
            gate::Verdict::Open(record) => self.put_write(*record, batch),
            gate::Verdict::Close(key) => {
                self.remove_unmerged(&key);
                self.gate.writes.close(&key.name);
                for change in self.gate.writes.release(Some(&key.name)) {
                    self.take_change(change, batch);
                }
            }
            gate::Verdict::Take(Change::Put(object)) => self.put_in_batch(*object, batch),
            gate::Verdict::Take(delete) => {
                let key = delete.key();
                self.delete_in_batch(key.clone(), batch);
                if let Some(mirrored) = self.gate.take_aside(&key) {
                    self.put_in_batch(mirrored, batch);
                }
            }
        }
    }

    /// A PlacementWrite's record: the first time, the write opens and every object it
    /// changes shows as the write leaves it; changes held for it are then taken.
    fn put_write(&mut self, object: Object, batch: &mut Batch) {
        let key = ObjectKey::of(&object);
        let opens = !self.gate.writes.is_open(&key.name) && !self.gate.writes.is_closed(&key.name);
        let planned = match (&object, opens) {
            // A record admission would refuse shows nothing.
            (Object::PlacementWrite(w), true) => writes::planned(w).unwrap_or_default(),
            _ => Vec::new(),
        };
        let version = resource_version(object.meta());
        self.put_in_batch(object, batch);
        if !opens {
            return;
        }
        self.gate
            .writes
            .open(&key.name, planned.iter().map(|c| c.key.clone()).collect());
        for change in planned {
            let current = self.objects.get(&change.key);
            match change.after {
                Some(mut after) => {
                    // The object's own event, marked by the write, came first.
                    let arrived = current.is_some_and(|c| {
                        writes::mark_of(c) == Some(key.name.as_str())
                            && resource_version(c.meta()) > version
                    });
                    if arrived {
                        continue;
                    }
                    // Older than the write's own event, newer than anything before it.
                    after.meta_mut().resource_version = version.map(|v| v.to_string());
                    if let Some(current) = current {
                        if after.meta().uid.is_none() {
                            after.meta_mut().uid = current.meta().uid.clone();
                        }
                        if let Some(status) = current.status() {
                            after.set_status(status);
                        }
                    }
                    self.gate.release_deletion(&change.key);
                    self.gate.writes.overlay(change.key.clone(), &key.name);
                    self.put_in_batch(after, batch);
                }
                None => {
                    // Held whether it is here yet or not: a list of its kind may bring it
                    // after this record. Only that object: one made since under its name is
                    // another.
                    if current.is_some() {
                        self.delete_in_batch(change.key.clone(), batch);
                    }
                    let uid = change.before.and_then(|b| b.uid);
                    self.gate
                        .hold_deletion(change.key, uid, std::time::Instant::now());
                }
            }
        }
        for change in self.gate.writes.release(Some(&key.name)) {
            self.take_change(change, batch);
        }
    }

    fn put_in_batch(&mut self, object: Object, batch: &mut Batch) {
        let key = ObjectKey::of(&object);
        // A provider's index record and the merge are read from names and specs only: a
        // provider or provider config whose spec is unchanged (a status written back, a
        // label) changes neither. Watches deliver every status write, so with thousands of
        // providers this skips a merge over all of them per written status.
        let old = self.objects.get(&key);
        let same_spec = old.is_some_and(|old| old.same_spec(&object));
        if !same_spec {
            self.revision += 1;
        }
        let unchanged = changes_merge(object.kind()) && same_spec;
        if !unchanged && changes_merge(object.kind()) {
            batch.remerge = true;
            note_merge_change(&mut batch.changed_providers, &key, old.map(|o| &**o));
        }
        if !unchanged {
            self.index_object(&object);
        }
        let new: Arc<Object> = Arc::new(object);
        let old = self.objects.insert(key, new.clone());
        self.note_records(old.as_deref(), Some(&new));
    }

    fn delete_in_batch(&mut self, key: ObjectKey, batch: &mut Batch) {
        self.gate.release_deletion(&key);
        if let Some(old) = self.remove_unmerged(&key)
            && changes_merge(key.kind)
        {
            batch.remerge = true;
            note_merge_change(&mut batch.changed_providers, &key, Some(&old));
        }
    }

    /// Sets an object's status; returns whether it changed.
    pub fn set_status(&mut self, key: &ObjectKey, status: Status) -> bool {
        let Some(object) = self.objects.get_mut(key) else {
            return false;
        };
        if object.has_status(&status) {
            return false;
        }
        // Copied first when a copy of the store shares it.
        Arc::make_mut(object).set_status(status);
        // An Allocation's status carries its claim's verdict, which decides whether it counts.
        if let Object::Allocation(_) = &**object {
            let object = Arc::clone(object);
            self.index_object(&object);
        }
        true
    }

    /// [`Store::set_status`] for many objects: in key order, each key once, they are set in
    /// one walk through the store instead of a lookup each (any other is looked up after
    /// the walk). Returns the kinds whose objects changed, one entry a change.
    pub fn set_statuses(
        &mut self,
        updates: impl IntoIterator<Item = (ObjectKey, Status)>,
    ) -> Vec<Kind> {
        let mut changed = Vec::new();
        let mut reindex = Vec::new();
        let mut missed = Vec::new();
        let mut stored = self.objects.iter_mut().peekable();
        for (key, status) in updates {
            let object = loop {
                match stored.peek().map(|(k, _)| (*k).cmp(&key)) {
                    Some(std::cmp::Ordering::Less) => {
                        stored.next();
                    }
                    Some(std::cmp::Ordering::Equal) => break stored.next().map(|(_, o)| o),
                    Some(std::cmp::Ordering::Greater) | None => break None,
                }
            };
            let Some(object) = object else {
                // Absent, or out of order: looked up once the walk is done.
                missed.push((key, status));
                continue;
            };
            if !object.has_status(&status) {
                // Copied first when a copy of the store shares it.
                Arc::make_mut(object).set_status(status);
                changed.push(key.kind);
                if let Object::Allocation(_) = &**object {
                    reindex.push(Arc::clone(object));
                }
            }
        }
        // An Allocation's status carries its claim's verdict, which decides whether it counts.
        for object in reindex {
            self.index_object(&object);
        }
        for (key, status) in missed {
            if self.set_status(&key, status) {
                changed.push(key.kind);
            }
        }
        changed
    }
}

/// What a run of [`Store::apply_changes`] has to merge at its end.
struct Batch {
    remerge: bool,
    /// The providers changed and what the merge read of them before, while only providers
    /// change; `None` once a ProviderConfig changed (every provider re-merged).
    changed_providers: Option<Vec<(String, Option<ProviderFacts>)>>,
    /// Watch events, not a list: a change marked by a write not seen yet is held.
    live: bool,
}

/// An object's resourceVersion as a number (etcd's revision, which the API server increases
/// on every write); none when it has none or it is not a number.
pub fn resource_version(meta: &kubeplace_api::ObjectMeta) -> Option<u64> {
    meta.resource_version.as_deref()?.parse().ok()
}

/// Whether `stored` is as new as `written` or newer, by resourceVersion.
pub fn newer_or_same(stored: &Object, written: &Object) -> bool {
    match (
        resource_version(stored.meta()),
        resource_version(written.meta()),
    ) {
        (Some(s), Some(w)) => s >= w,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Keys compare, equal and hash as the tuple of their fields would, empty namespaces
        /// and names included: the store's order (and `list`'s ranges) are the derived ones.
        #[test]
        fn keys_order_as_their_fields(
            a in (0usize..10, "(|[a-c]{1,3})", "(|[a-c]{1,3})"),
            b in (0usize..10, "(|[a-c]{1,3})", "(|[a-c]{1,3})"),
        ) {
            let key = |(kind, namespace, name): &(usize, String, String)| ObjectKey {
                kind: Kind::ALL[*kind],
                namespace: namespace.clone(),
                name: name.clone(),
            };
            let fields = |k: &ObjectKey| (k.kind, k.namespace.clone(), k.name.clone());
            let (x, y) = (key(&a), key(&b));
            proptest::prop_assert_eq!(x.cmp(&y), fields(&x).cmp(&fields(&y)));
            proptest::prop_assert_eq!(x.partial_cmp(&y), Some(x.cmp(&y)));
            proptest::prop_assert_eq!(x == y, fields(&x) == fields(&y));
            use std::hash::BuildHasher;
            let state = std::collections::hash_map::RandomState::new();
            proptest::prop_assert_eq!(state.hash_one(&x), state.hash_one(fields(&x)));
        }
    }

    /// A claim of one VCPU named `name`, of `uid` at `version`.
    fn versioned_claim(name: &str, uid: &str, version: u64) -> Object {
        let mut o = crate::test_objects::object(&format!(
            "apiVersion: kubeplace.io/v1alpha1\nkind: Allocation\nmetadata:\n  name: {name}\n  uid: {uid}\n  resourceVersion: \"{version}\"\nspec:\n  consumer: 00000000-0000-0000-0000-000000000001\n  allocations:\n  - provider: cn1\n    resources:\n      VCPU: 1\n"
        ));
        o.meta_mut().uid = Some(uid.into());
        o
    }

    /// Changes taken late (a watch event judged before a write of this process put a newer
    /// object, or held for a write's record) do not undo what the store holds now: neither
    /// an older version of the object nor the deletion of an earlier object of its name.
    #[test]
    fn late_changes_do_not_undo_newer_objects() {
        let mut store = Store::default();
        let key = ObjectKey::cluster(Kind::Allocation, "c");
        store.apply_changes([Change::Put(Box::new(versioned_claim("c", "second", 20)))]);
        store.apply_changes([Change::DeleteOf {
            key: key.clone(),
            uid: "first".into(),
        }]);
        assert!(store.get(&key).is_some(), "an earlier object's deletion");
        store.apply_changes([Change::Put(Box::new(versioned_claim("c", "second", 12)))]);
        assert_eq!(
            store
                .get(&key)
                .and_then(|o| o.meta().resource_version.clone()),
            Some("20".to_string()),
            "an older version"
        );
        store.apply_changes([Change::DeleteOf {
            key: key.clone(),
            uid: "second".into(),
        }]);
        assert!(store.get(&key).is_none(), "its own deletion is taken");
    }

    /// A deletion a write made stays held while another write of this process puts an
    /// object of that name and is undone (decided, then taken back): a late event of the
    /// deleted object does not bring it back.
    #[test]
    fn a_held_deletion_outlives_a_write_put_and_undone() {
        let mut store = Store::default();
        let key = ObjectKey::cluster(Kind::Allocation, "c");
        let first = versioned_claim("c", "first", 10);
        store.apply_changes([Change::Put(Box::new(first.clone()))]);
        let now = std::time::Instant::now();
        store.delete(&key);
        store.hold_deletion_of_object(key.clone(), &first, now);
        let mut decided = versioned_claim("c", "first", 10);
        decided.meta_mut().uid = None;
        store.put(decided);
        store.delete(&key);
        store.apply_changes([Change::Put(Box::new(versioned_claim("c", "first", 11)))]);
        assert!(store.get(&key).is_none(), "the deleted object came back");
        store.apply_changes([Change::Put(Box::new(versioned_claim("c", "second", 12)))]);
        assert!(store.get(&key).is_some(), "an object made since is taken");
    }

    mod merged_in_batches {
        use super::*;
        use proptest::prelude::*;

        const NAMES: [&str; 4] = ["cn0", "cn1", "cn2", "cn3"];

        use crate::test_objects::object;

        /// A provider: a root or a child, a compute node or not, one of two uuids or its
        /// own, and sometimes an inventory of the class the configs add.
        fn provider() -> impl Strategy<Value = Object> {
            (0usize..4, proptest::option::of(0usize..4), any::<bool>(), 0u8..3, any::<bool>())
                .prop_map(|(n, parent, compute, uuid, llc)| {
                    let mut spec = String::new();
                    if let Some(p) = parent {
                        spec += &format!("  parent: {}\n", NAMES[p]);
                    }
                    if compute {
                        spec += "  traits: [COMPUTE_NODE]\n";
                    }
                    if uuid < 2 {
                        spec += &format!("  uuid: 6f3c1a52-1d8e-4c2b-9a57-00000000000{uuid}\n");
                    }
                    spec += "  inventories:\n    VCPU: {total: 8}\n";
                    if llc {
                        spec += "    CUSTOM_LLC: {total: 4}\n";
                    }
                    object(&format!(
                        "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata: {{name: {}}}\nspec:\n{spec}",
                        NAMES[n]
                    ))
                })
        }

        /// A ProviderConfig (one of two) adding the class and a trait to every compute node,
        /// a provider by name or one by uuid.
        fn config() -> impl Strategy<Value = Object> {
            (0usize..2, 0usize..3, any::<bool>()).prop_map(|(c, target, with_inventory)| {
                let identification = match target {
                    0 => "{uuid: $COMPUTE_NODE}".to_string(),
                    1 => "{name: cn1}".to_string(),
                    _ => "{uuid: 6f3c1a52-1d8e-4c2b-9a57-000000000000}".to_string(),
                };
                let inventories = if with_inventory {
                    "    inventories:\n      additional:\n      - CUSTOM_LLC: {total: 22}\n"
                } else {
                    ""
                };
                object(&format!(
                    "apiVersion: kubeplace.io/v1alpha1\nkind: ProviderConfig\nmetadata: {{name: pc{c}}}\nspec:\n  meta: {{schemaVersion: \"1.0\"}}\n  providers:\n  - identification: {identification}\n{inventories}    traits:\n      additional: [CUSTOM_P_STATE]\n"
                ))
            })
        }

        fn change() -> impl Strategy<Value = Change> {
            prop_oneof![
                6 => provider().prop_map(|o| Change::Put(Box::new(o))),
                1 => config().prop_map(|o| Change::Put(Box::new(o))),
                2 => (0usize..4).prop_map(|n| Change::Delete(ObjectKey::cluster(
                    Kind::ResourceProvider,
                    NAMES[n]
                ))),
                1 => (0usize..2).prop_map(|c| Change::Delete(ObjectKey::cluster(
                    Kind::ProviderConfig,
                    &format!("pc{c}")
                ))),
            ]
        }

        /// Each provider's effective inventories and traits, as the index has them.
        type Effectives = Vec<(
            String,
            Option<(
                BTreeMap<String, kubeplace_core::placement::Inventory>,
                std::collections::BTreeSet<String>,
            )>,
        )>;

        fn effective(s: &Store) -> Effectives {
            s.list(Kind::ResourceProvider)
                .map(|o| (o.name().to_string(), s.index().effective(o.name())))
                .collect()
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(400))]

            /// Batches of provider and config changes, merged for the changed providers
            /// alone where that gives a full merge's answer, leave the merge, the index's
            /// effective inventories and traits, and the report of what moved as merging
            /// everything again would.
            #[test]
            fn batches_merge_as_a_full_merge_does(
                batches in proptest::collection::vec(proptest::collection::vec(change(), 1..5), 1..6),
            ) {
                let mut store = Store::default();
                for batch in batches {
                    let before = store.config_merge().clone();
                    let moved = store.apply_changes(batch);
                    let mut rebuilt = Store::default();
                    rebuilt.apply_changes(store.iter_shared().map(|(_, o)| Change::Put(Box::new((**o).clone()))));
                    rebuilt.refresh_config_merge();
                    prop_assert_eq!(store.config_merge(), rebuilt.config_merge());
                    prop_assert_eq!(effective(&store), effective(&rebuilt));
                    let expected: Vec<String> = before
                        .providers
                        .keys()
                        .chain(store.config_merge().providers.keys())
                        .filter(|n| before.providers.get(*n) != store.config_merge().providers.get(*n))
                        .cloned()
                        .collect::<std::collections::BTreeSet<_>>()
                        .into_iter()
                        .collect();
                    prop_assert_eq!(moved, expected);
                }
            }
        }
    }

    mod kept_generations {
        use super::*;
        use crate::store::generations::{
            GENERATION_ANNOTATION, PROVIDER_GENERATIONS_ANNOTATION, UNCOUNTED_ANNOTATION,
            generation_of,
        };
        use proptest::prelude::*;

        const NAMES: [&str; 3] = ["cn0", "cn1", "cn2"];

        /// A provider at a `metadata.generation`, sometimes with a generation record of its
        /// own and spec changes not counted.
        fn provider() -> impl Strategy<Value = Object> {
            (0usize..3, 1i64..6, proptest::option::of((0u8..9, 1u8..6)), 0i64..3).prop_map(
                |(n, generation, record, uncounted)| {
                    let mut o = crate::test_objects::object(&format!(
                        "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata: {{name: {}}}\nspec:\n  inventories:\n    VCPU: {{total: 8}}\n",
                        NAMES[n]
                    ));
                    o.meta_mut().generation = Some(generation);
                    let annotations = o.meta_mut().annotations.get_or_insert_with(Default::default);
                    if let Some((g, m)) = record {
                        annotations.insert(GENERATION_ANNOTATION.into(), format!("{g}@{m}"));
                    }
                    if uncounted > 0 {
                        annotations.insert(UNCOUNTED_ANNOTATION.into(), uncounted.to_string());
                    }
                    o
                },
            )
        }

        /// An Allocation (one of two) recording generations for some providers.
        fn allocation() -> impl Strategy<Value = Object> {
            (0usize..2, proptest::collection::vec((0usize..3, 0u8..9, 1u8..6), 1..3)).prop_map(
                |(a, records)| {
                    let providers: Vec<String> = records
                        .iter()
                        .map(|(n, _, _)| format!("  - provider: {}\n    resources: {{VCPU: 1}}\n", NAMES[*n]))
                        .collect();
                    let mut o = crate::test_objects::object(&format!(
                        "apiVersion: kubeplace.io/v1alpha1\nkind: Allocation\nmetadata: {{name: a{a}}}\nspec:\n  consumer: 00000000-0000-0000-0000-00000000000{a}\n  allocations:\n{}",
                        providers.concat()
                    ));
                    let text: Vec<String> = records
                        .iter()
                        .map(|(n, g, m)| format!("{}={g}@{m}", NAMES[*n]))
                        .collect();
                    o.meta_mut()
                        .annotations
                        .get_or_insert_with(Default::default)
                        .insert(PROVIDER_GENERATIONS_ANNOTATION.into(), text.join(","));
                    o
                },
            )
        }

        fn change() -> impl Strategy<Value = Change> {
            prop_oneof![
                4 => provider().prop_map(|o| Change::Put(Box::new(o))),
                2 => allocation().prop_map(|o| Change::Put(Box::new(o))),
                1 => (0usize..3).prop_map(|n| Change::Delete(ObjectKey::cluster(
                    Kind::ResourceProvider,
                    NAMES[n]
                ))),
                1 => (0usize..2).prop_map(|a| Change::Delete(ObjectKey::cluster(
                    Kind::Allocation,
                    &format!("a{a}")
                ))),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(300))]

            /// After any changes, a provider's kept generation, by name and in the table by
            /// slot, is the one its object and its Allocations give, read afresh; a provider
            /// not stored has none. A copy of the store taken in between keeps what it had.
            #[test]
            fn a_kept_generation_is_the_one_the_objects_give(
                batches in proptest::collection::vec(proptest::collection::vec(change(), 1..5), 1..6),
            ) {
                let mut store = Store::default();
                for batch in batches {
                    // The table made before the changes must not answer after them.
                    let _ = store.provider_generations();
                    let copy = store.clone();
                    let before: Vec<Option<u64>> =
                        NAMES.iter().map(|n| copy.provider_generation(n)).collect();
                    store.apply_changes(batch);
                    let table = store.provider_generations();
                    prop_assert!(store.provider_generations_kept());
                    for name in NAMES {
                        let fresh = match store.get_cluster(Kind::ResourceProvider, name) {
                            Some(Object::ResourceProvider(rp)) => Some(generation_of(
                                rp,
                                store.generation_records().max_offset(name),
                            )),
                            _ => None,
                        };
                        prop_assert_eq!(store.provider_generation(name), fresh, "{}", name);
                        if let Some(id) = store.index().id(name) {
                            prop_assert_eq!(Some(table[id.slot()]), fresh, "{} by slot", name);
                        }
                    }
                    let after: Vec<Option<u64>> =
                        NAMES.iter().map(|n| copy.provider_generation(n)).collect();
                    prop_assert_eq!(before, after);
                }
            }
        }
    }

    fn cloud() -> Vec<Object> {
        // The workspace root holds examples/.
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/cloud");
        kubeplace_api::manifest::read_paths(&[dir], &mut std::io::empty())
            .unwrap()
            .into_iter()
            // The example's Namespaces are no kubeplace objects.
            .filter_map(|d| d.object())
            .map(Result::unwrap)
            .collect()
    }

    /// What admission and statuses read: objects, the merge, and each provider as the index has it.
    fn view(s: &Store) -> (Vec<Object>, MergeResult, Vec<String>) {
        let providers = s
            .list(Kind::ResourceProvider)
            .map(|o| format!("{:?}", s.index().provider(o.name())))
            .collect();
        (
            s.keys().filter_map(|k| s.get(k)).cloned().collect(),
            s.config_merge().clone(),
            providers,
        )
    }

    #[test]
    fn a_batch_of_changes_leaves_the_store_as_one_by_one_changes_do() {
        let objects = cloud();
        let gone = ObjectKey::cluster(Kind::ResourceProvider, "cn3-numa1");
        let mut one_by_one = Store::default();
        for o in objects.clone() {
            one_by_one.put(o);
        }
        one_by_one.delete(&gone);
        let mut batched = Store::default();
        // Providers before the config and after it, and a delete: order is kept.
        batched.apply_changes(
            objects
                .into_iter()
                .map(|o| Change::Put(Box::new(o)))
                .chain([Change::Delete(gone)]),
        );
        assert_eq!(view(&batched), view(&one_by_one));
        assert!(!batched.config_merge().providers.is_empty());
    }

    #[test]
    fn a_held_deletion_keeps_late_watch_events_out_until_the_deletion_comes() {
        let objects = cloud();
        let mut store = Store::default();
        store.apply_changes(objects.iter().cloned().map(|o| Change::Put(Box::new(o))));
        let object = objects[0].clone();
        let key = ObjectKey::of(&object);
        store.delete(&key);
        store.hold_deletion(key.clone(), std::time::Instant::now());
        // A late event of the object (its status written before the deletion).
        store.apply_changes([Change::Put(Box::new(object.clone()))]);
        assert!(store.get(&key).is_none(), "held out");
        // The deletion comes: later events are taken again.
        store.apply_changes([Change::Delete(key.clone())]);
        store.apply_changes([Change::Put(Box::new(object.clone()))]);
        assert!(
            store.get(&key).is_some(),
            "a new object of that name is taken"
        );
        // A write that puts the object back (a failed deletion undone) lets go of the hold.
        store.delete(&key);
        store.hold_deletion(key.clone(), std::time::Instant::now());
        store.put(object.clone());
        store.delete(&key);
        store.apply_changes([Change::Put(Box::new(object))]);
        assert!(store.get(&key).is_some());
    }

    #[test]
    fn providers_and_configs_put_again_with_the_same_spec_leave_the_store_as_a_rebuild_does() {
        // As the watches deliver them after a status write or a label: the spec unchanged.
        let relabel = |mut o: Object| {
            if changes_merge(o.kind()) {
                o.meta_mut()
                    .labels
                    .get_or_insert_default()
                    .insert("kubeplace.io/seen".into(), "again".into());
            }
            o
        };
        let objects = cloud();
        let mut store = Store::default();
        store.apply_changes(objects.iter().cloned().map(|o| Change::Put(Box::new(o))));
        store.apply_changes(
            objects
                .iter()
                .filter(|o| changes_merge(o.kind()))
                .cloned()
                .map(|o| Change::Put(Box::new(relabel(o)))),
        );
        let mut rebuilt = Store::default();
        rebuilt.apply_changes(
            objects
                .into_iter()
                .map(|o| Change::Put(Box::new(relabel(o)))),
        );
        assert_eq!(view(&store), view(&rebuilt));
        assert!(!store.config_merge().providers.is_empty());
    }

    /// A copy of the store (what a reconcile pass plans over) shares its objects with the
    /// original; a status set on one side is copied there first and the other side keeps
    /// what it had.
    #[test]
    fn a_copy_shares_objects_until_one_side_changes_them() {
        let mut store = Store::default();
        store.apply_changes(cloud().into_iter().map(|o| Change::Put(Box::new(o))));
        let copy = store.clone();
        let cn1 = ObjectKey::cluster(Kind::ResourceProvider, "cn1");
        let other = ObjectKey::cluster(Kind::ResourceProvider, "cn2");
        for key in [&cn1, &other] {
            assert!(std::ptr::eq(
                store.get(key).unwrap(),
                copy.get(key).unwrap()
            ));
        }
        let status = Status::ResourceProvider(kubeplace_api::ResourceProviderStatus {
            root: Some("cn1".into()),
            ..Default::default()
        });
        assert!(store.set_status(&cn1, status.clone()));
        assert!(store.get(&cn1).unwrap().has_status(&status));
        assert_eq!(copy.get(&cn1).unwrap().status(), None);
        assert!(!std::ptr::eq(
            store.get(&cn1).unwrap(),
            copy.get(&cn1).unwrap()
        ));
        assert!(std::ptr::eq(
            store.get(&other).unwrap(),
            copy.get(&other).unwrap()
        ));
        // Without a copy, a status is set in place.
        let before: *const Object = store.get(&other).unwrap();
        drop(copy);
        assert!(store.set_status(&other, status));
        assert!(std::ptr::eq(store.get(&other).unwrap(), before));
    }

    /// Statuses set together, in key order or not, with keys the store lacks and a key
    /// given twice, leave the store as setting them one at a time does, and name the same
    /// changes.
    #[test]
    fn statuses_set_together_equal_statuses_set_one_by_one() {
        let mut together = Store::default();
        together.apply_changes(cloud().into_iter().map(|o| Change::Put(Box::new(o))));
        let mut one_by_one = together.clone();
        let status = |root: &str| {
            Status::ResourceProvider(kubeplace_api::ResourceProviderStatus {
                root: Some(root.into()),
                ..Default::default()
            })
        };
        let provider = |name: &str| ObjectKey::cluster(Kind::ResourceProvider, name);
        let mut providers: Vec<ObjectKey> = together
            .keys()
            .filter(|k| k.kind == Kind::ResourceProvider)
            .cloned()
            .collect();
        assert!(providers.len() >= 3, "the example cloud has providers");
        // In order, then one out of order, one absent, one twice (the later status wins).
        let mut updates: Vec<(ObjectKey, Status)> =
            providers.iter().map(|k| (k.clone(), status("a"))).collect();
        let first = providers.remove(0);
        updates.push((first.clone(), status("b")));
        updates.push((provider("no-such-provider"), status("c")));
        updates.insert(1, (providers[0].clone(), status("d")));
        let mut expected = Vec::new();
        for (key, status) in updates.clone() {
            if one_by_one.set_status(&key, status) {
                expected.push(key.kind);
            }
        }
        let changed = together.set_statuses(updates);
        assert_eq!(changed.len(), expected.len());
        assert!(changed.iter().all(|k| *k == Kind::ResourceProvider));
        let statuses = |s: &Store| -> Vec<Option<Status>> {
            s.keys().map(|k| s.get(k).unwrap().status()).collect()
        };
        assert_eq!(statuses(&together), statuses(&one_by_one));
        assert!(together.get(&first).unwrap().has_status(&status("b")));
        assert!(
            together
                .get(&providers[0])
                .unwrap()
                .has_status(&status("a"))
        );
        assert!(together.get(&provider("no-such-provider")).is_none());
        // Nothing changes the second time.
        let again: Vec<(ObjectKey, Status)> =
            providers.iter().map(|k| (k.clone(), status("a"))).collect();
        assert!(together.set_statuses(again).is_empty());
    }

    #[test]
    fn list_gives_every_object_of_a_kind_and_no_other() {
        let objects = cloud();
        let mut store = Store::default();
        for o in objects.clone() {
            store.put(o);
        }
        for kind in &Kind::ALL {
            let mut expected: Vec<&str> = objects
                .iter()
                .filter(|o| o.kind() == *kind)
                .map(|o| o.name())
                .collect();
            expected.sort_unstable();
            let listed: Vec<&str> = store.list(*kind).map(|o| o.name()).collect();
            assert!(store.list(*kind).all(|o| o.kind() == *kind));
            let mut sorted = listed.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, expected, "{kind}");
        }
        assert!(store.list(Kind::ResourceProvider).count() > 3);
    }
}
