//! One request's view of the store and the book, with the journal of what a write changed.

use std::collections::BTreeMap;
use std::ops::Deref;
use std::sync::{RwLockReadGuard, RwLockWriteGuard};

use kubeplace_api::{Allocation, Kind, Object, ResourceProvider};
use kubeplace_core::placement::ProviderRecord;
use kubeplace_core::placement::ids::ProviderId;
use kubeplace_core::placement::query::CandidatesQuery;

use super::consumers::{Consumer, consumer_from_objects};
use super::{Backing, Book, CustomNameSet, RecordError, Registry, RegistryChange};
use crate::admission::{PendingUsage, admit_and_store, admit_and_store_beside};
use crate::claims::Ledger;
use crate::store::generations::{
    Record, allocation_records, counted_spec_generation, set_allocation_records,
    set_provider_record, set_uncounted, uncounted,
};
use crate::store::{ObjectKey, Store};

/// A lock guard of either kind: reads share the lock, writes hold it alone.
pub enum Guard<'a, T> {
    Read(RwLockReadGuard<'a, T>),
    Write(RwLockWriteGuard<'a, T>),
}

impl<T> Deref for Guard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        match self {
            Guard::Read(g) => g,
            Guard::Write(g) => g,
        }
    }
}

impl<T> Guard<'_, T> {
    /// The guarded value for writing; only a write guard gives it.
    fn get_mut(&mut self) -> Result<&mut T, RecordError> {
        match self {
            Guard::Write(g) => Ok(g),
            Guard::Read(_) => Err(RecordError::ReadOnly),
        }
    }
}

/// The API's state for one request: the store, the book, and (when writing) the journal of
/// the objects the request changed, each with what it was before the request.
pub struct State<'a> {
    store: Guard<'a, Store>,
    book: Guard<'a, Book>,
    backing: Backing,
    journal: Vec<(ObjectKey, Option<Object>)>,
    /// Provider generations (in memory) before their first change in this request.
    generations_before: Vec<(String, Option<u64>)>,
    /// Consumers' records (in memory) before their first change in this request.
    consumers_before: Vec<(String, Option<Consumer>)>,
    /// Over a cluster: each provider's generation before the request first changed it or
    /// an Allocation on it, and how many times the request moved it.
    started_at: BTreeMap<String, u64>,
    bumps: BTreeMap<String, u64>,
    registry_changes: Vec<RegistryChange>,
    /// Whether the store holds back watch events of the changed objects until the write is
    /// committed or undone ([`State::hold_until_committed`]).
    decided_held: bool,
    /// The claims decided at admission that the store does not show yet, which the
    /// request's own claims are decided beside ([`State::beside_ledger`]).
    ledger: Option<&'a mut Ledger>,
}

/// What a write changed: every object touched, before and after, in the order first
/// touched; and the custom traits and classes it created or deleted, in order.
pub struct Journal {
    pub changes: Vec<(ObjectKey, Option<Object>, Option<Object>)>,
    pub generations_before: Vec<(String, Option<u64>)>,
    /// Consumers' records (in memory) before the write changed them.
    pub consumers_before: Vec<(String, Option<Consumer>)>,
    pub registry_changes: Vec<RegistryChange>,
    /// The store holds back watch events of the changed objects: release them
    /// ([`Store::release_decided`]) once the write is committed or undone.
    pub decided_held: bool,
}

impl<'a> State<'a> {
    pub fn new(store: Guard<'a, Store>, book: Guard<'a, Book>, backing: Backing) -> Self {
        State {
            store,
            book,
            backing,
            journal: Vec::new(),
            generations_before: Vec::new(),
            consumers_before: Vec::new(),
            started_at: BTreeMap::new(),
            bumps: BTreeMap::new(),
            registry_changes: Vec::new(),
            decided_held: false,
            ledger: None,
        }
    }

    /// Decides the request's claims beside the claims `ledger` admitted and the store does
    /// not show yet, as a review of them would be: every claim of a replica is decided at
    /// one point, whether it came through admission or through this API.
    pub fn beside_ledger(mut self, ledger: &'a mut Ledger) -> Self {
        self.ledger = Some(ledger);
        self
    }

    /// The store as this request sees it.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The objects this request changed (before and after, unchanged ones left out).
    pub fn into_journal(mut self) -> Journal {
        // Saved (or undone) by the caller, who then settles them in the book.
        if self.backing == Backing::Cluster
            && !self.registry_changes.is_empty()
            && let Ok(book) = self.book.get_mut()
        {
            book.registry_unsaved += 1;
        }
        let changes = self
            .journal
            .iter()
            .filter_map(|(key, before)| {
                let after = self.store.get(key).cloned();
                (after != *before).then(|| (key.clone(), before.clone(), after))
            })
            .collect();
        Journal {
            changes,
            generations_before: self.generations_before,
            consumers_before: self.consumers_before,
            registry_changes: self.registry_changes,
            decided_held: self.decided_held,
        }
    }

    /// Notes an object's state before its first change in this request; an object a
    /// write of several objects holds (open, or its change shown and its own event not
    /// arrived) is not changed until that write is finished.
    fn touch(&mut self, key: &ObjectKey) -> Result<(), RecordError> {
        if let Some(write) = self.store.write_on(key) {
            return Err(RecordError::Busy {
                key: key.clone(),
                write: write.to_string(),
            });
        }
        if let Some(from) = self.store.get(key).and_then(|o| o.mirrored_from()) {
            return Err(RecordError::Mirrored {
                key: key.clone(),
                from: from.to_string(),
            });
        }
        if !self.journal.iter().any(|(k, _)| k == key) {
            let before = self.store.get(key).cloned();
            if let Some(before) = &before {
                self.note_start(before);
            }
            self.journal.push((key.clone(), before));
        }
        Ok(())
    }

    /// Over a cluster, notes the generation of every provider `object` bears on (a
    /// provider, or those an Allocation holds) before the request changes it.
    fn note_start(&mut self, object: &Object) {
        if self.backing != Backing::Cluster {
            return;
        }
        let names: Vec<&str> = match object {
            Object::ResourceProvider(rp) => rp.metadata.name.as_deref().into_iter().collect(),
            Object::Allocation(a) => a
                .spec
                .allocations
                .iter()
                .map(|pa| pa.provider.as_str())
                .collect(),
            _ => return,
        };
        for name in names {
            if let Some(uuid) = self.uuid_of(name) {
                self.note_start_of(&uuid);
            }
        }
    }

    fn note_start_of(&mut self, uuid: &str) {
        if self.backing == Backing::Cluster && !self.started_at.contains_key(uuid) {
            let generation = self.generation(uuid);
            self.started_at.insert(uuid.to_string(), generation);
        }
    }

    /// Puts an object in as it is, noting the change.
    pub fn put(&mut self, object: Object) -> Result<(), RecordError> {
        let key = ObjectKey::of(&object);
        self.touch(&key)?;
        self.note_start(&object);
        self.store.get_mut()?.put(object);
        Ok(())
    }

    /// Deletes an object, noting the change; the object deleted.
    pub fn delete(&mut self, key: &ObjectKey) -> Result<Option<Object>, RecordError> {
        self.touch(key)?;
        Ok(self.store.get_mut()?.delete(key))
    }

    /// The name of the provider with this uuid, or Placement's 404.
    pub fn provider_name(&self, uuid: &str) -> Result<String, RecordError> {
        self.store
            .index()
            .names_with_uuid(uuid)
            .into_iter()
            .next()
            .ok_or_else(|| RecordError::NoProviderWithUuid(uuid.to_string()))
    }

    /// A provider's own record by name (the index has every stored provider).
    pub fn record(&self, name: &str) -> Result<ProviderRecord, RecordError> {
        self.store
            .index()
            .provider(name)
            .ok_or_else(|| RecordError::NoProviderNamed(name.to_string()))
    }

    /// The stored ResourceProvider object of a provider.
    pub fn provider_object(&self, name: &str) -> Result<ResourceProvider, RecordError> {
        match self.store.get_cluster(Kind::ResourceProvider, name) {
            Some(Object::ResourceProvider(rp)) => Ok(rp.clone()),
            _ => Err(RecordError::NoProviderNamed(name.to_string())),
        }
    }

    /// A provider's Placement name by object name.
    pub fn placement_name(&self, object: &str) -> String {
        match self.store.get_cluster(Kind::ResourceProvider, object) {
            Some(Object::ResourceProvider(rp)) => kubeplace_api::provider_name::placement_name(rp),
            _ => object.to_string(),
        }
    }

    /// A provider's uuid by name.
    pub fn uuid_of(&self, name: &str) -> Option<String> {
        self.store.index().uuid(name).map(str::to_string)
    }

    /// A provider's generation: in memory the book's count; over a cluster what its object
    /// and the Allocations on it record (`crate::store::generations`).
    pub fn generation(&self, uuid: &str) -> u64 {
        match self.backing {
            Backing::Memory => self.book.generations.get(uuid).copied().unwrap_or(0),
            Backing::Cluster => {
                let Ok(name) = self.provider_name(uuid) else {
                    return 0;
                };
                self.store.provider_generation(&name).unwrap_or(0)
            }
        }
    }

    /// A count that moves whenever any provider's generation may have changed: with the
    /// index itself, what a provider list answer is made from. It only grows, for the
    /// life of the store or book it counts.
    pub fn generations_mark(&self) -> u64 {
        match self.backing {
            Backing::Memory => self.book.generations_moved,
            Backing::Cluster => self.store.generations_epoch(),
        }
    }

    /// Each of `providers` of the store's index with its [`State::generation`], in order.
    /// Over a cluster a list of a quarter of the providers or more reads them from the
    /// table the store keeps ([`Store::provider_generations`]; made first if the store
    /// changed since), a shorter one looks each up unless that table is made already.
    pub fn with_generations(&self, providers: &[ProviderId]) -> Vec<(ProviderId, u64)> {
        let store = &self.store;
        let index = store.index();
        fn paired(
            providers: &[ProviderId],
            generation: impl Fn(ProviderId) -> u64,
        ) -> Vec<(ProviderId, u64)> {
            providers.iter().map(|p| (*p, generation(*p))).collect()
        }
        match self.backing {
            // The book counts only providers changed since they were made: where fewer
            // changed than are asked for, those few go in a table by slot and the rest
            // read 0, rather than every provider's uuid being looked up.
            Backing::Memory if self.book.generations.len() < providers.len() => {
                let mut table = vec![0; index.slot_count()];
                for (uuid, generation) in &self.book.generations {
                    for id in index.ids_with_uuid(uuid) {
                        table[id.slot()] = *generation;
                    }
                }
                paired(providers, |p| table[p.slot()])
            }
            Backing::Memory => paired(providers, |p| self.generation(index.uuid_at(p))),
            Backing::Cluster
                if providers.len().saturating_mul(4) >= index.len()
                    || store.provider_generations_kept() =>
            {
                let table = store.provider_generations();
                paired(providers, |p| table[p.slot()])
            }
            Backing::Cluster => paired(providers, |p| {
                store.provider_generation(index.name_at(p)).unwrap_or(0)
            }),
        }
    }

    /// Checks the generation a client sent against the current one.
    pub fn check_generation(&self, uuid: &str, sent: i64) -> Result<(), RecordError> {
        let current = self.generation(uuid);
        if u64::try_from(sent).ok() == Some(current) {
            Ok(())
        } else {
            Err(RecordError::StaleGeneration { sent, current })
        }
    }

    /// One more change to a provider. Over a cluster it is counted, and
    /// [`State::record_generations`] makes the objects carry it.
    pub fn bump(&mut self, uuid: &str) -> Result<(), RecordError> {
        match self.backing {
            Backing::Memory => {
                let book = self.book.get_mut()?;
                if !self.generations_before.iter().any(|(u, _)| u == uuid) {
                    let before = book.generations.get(uuid).copied();
                    self.generations_before.push((uuid.to_string(), before));
                }
                *book.generations_mut().entry(uuid.to_string()).or_insert(0) += 1;
            }
            Backing::Cluster => {
                self.note_start_of(uuid);
                *self.bumps.entry(uuid.to_string()).or_insert(0) += 1;
            }
        }
        Ok(())
    }

    /// Over a cluster, once a write is decided: makes every provider it touched read the
    /// generation it started at plus the moves it made. Where the objects as written give
    /// less (a claim changes no provider object; a spec left as it was is not moved by the
    /// API server; an Allocation that held the highest record was removed), a record is
    /// added: to an Allocation this write made that holds the provider, else to the
    /// provider itself (an annotation, which no reader takes for a spec change). Where they
    /// give more (a new parent), the provider, written anyway, counts the change as one
    /// Placement does not.
    pub fn record_generations(&mut self) -> Result<(), RecordError> {
        if self.backing != Backing::Cluster {
            return Ok(());
        }
        let wanted: Vec<(String, u64)> = self
            .started_at
            .iter()
            .map(|(uuid, start)| (uuid.clone(), start + self.bumps.get(uuid).unwrap_or(&0)))
            .collect();
        for (uuid, wanted) in wanted {
            // A provider this write deleted has no generation left to keep.
            let Ok(name) = self.provider_name(&uuid) else {
                continue;
            };
            let now = self.generation(&uuid);
            let mut rp = self.provider_object(&name)?;
            if now > wanted {
                self.uncount_spec_changes(rp, now - wanted)?;
                continue;
            }
            if now == wanted {
                continue;
            }
            let record = Record {
                generation: i64::try_from(wanted).unwrap_or(i64::MAX),
                spec_generation: counted_spec_generation(&rp),
            };
            let holder = self
                .journal
                .iter()
                .find_map(|(key, _)| match self.store.get(key) {
                    Some(Object::Allocation(a))
                        if a.spec.allocations.iter().any(|pa| pa.provider == name) =>
                    {
                        Some(a.clone())
                    }
                    _ => None,
                });
            match holder {
                Some(mut a) => {
                    let mut records = allocation_records(&a);
                    records.insert(name, record);
                    set_allocation_records(&mut a, &records);
                    self.store.get_mut()?.put(Object::Allocation(a));
                }
                None => {
                    set_provider_record(&mut rp, record);
                    let object = Object::ResourceProvider(rp);
                    self.touch(&ObjectKey::of(&object))?;
                    self.store.get_mut()?.put(object);
                }
            }
        }
        Ok(())
    }

    /// Over a cluster, once a write is decided: the store holds back watch events of what it
    /// changed until it is committed or undone ([`Store::hold_decided`]), so no late event
    /// undoes part of the decision in a reader's view; and holds the deletions it made
    /// ([`Store::hold_deletion`]), so no late event of a deleted object brings it back while
    /// the deletion travels to the API server and back.
    pub fn hold_until_committed(&mut self) -> Result<(), RecordError> {
        if self.backing != Backing::Cluster {
            return Ok(());
        }
        let now = std::time::Instant::now();
        let changed: Vec<(ObjectKey, Option<Object>)> = self
            .journal
            .iter()
            .filter(|(key, before)| self.store.get(key) != before.as_ref())
            .map(|(key, before)| (key.clone(), before.clone()))
            .collect();
        let store = self.store.get_mut()?;
        store.hold_decided(changed.iter().map(|(key, before)| (key, before.as_ref())));
        for (key, before) in changed {
            if let Some(before) = before.filter(|_| store.get(&key).is_none()) {
                store.hold_deletion_of_object(key, &before, now);
            }
        }
        self.decided_held = true;
        Ok(())
    }

    /// Lets the store take watch events of these objects again (a write undone).
    pub fn release_decided<'k>(
        &mut self,
        keys: impl IntoIterator<Item = &'k ObjectKey>,
    ) -> Result<(), RecordError> {
        self.store.get_mut()?.release_decided(keys);
        Ok(())
    }

    /// Counts up to `excess` of the spec changes this write made to a provider as ones
    /// Placement does not count; changes made before the write are left as they were.
    fn uncount_spec_changes(
        &mut self,
        mut rp: ResourceProvider,
        excess: u64,
    ) -> Result<(), RecordError> {
        let key = ObjectKey::cluster(
            Kind::ResourceProvider,
            rp.metadata.name.as_deref().unwrap_or(""),
        );
        let before = self.journal.iter().find_map(|(k, before)| match before {
            Some(Object::ResourceProvider(b)) if *k == key => {
                Some(b.metadata.generation.unwrap_or(1))
            }
            _ => None,
        });
        let Some(before) = before else {
            return Ok(());
        };
        let made = rp.metadata.generation.unwrap_or(1) - before;
        let n = i64::try_from(excess).unwrap_or(0).min(made);
        if n > 0 {
            let total = uncounted(&rp) + n;
            set_uncounted(&mut rp, total);
            self.store.get_mut()?.put(Object::ResourceProvider(rp));
        }
        Ok(())
    }

    /// Puts provider generations back as they were before a failed write.
    pub fn restore_generations(
        &mut self,
        before: &[(String, Option<u64>)],
    ) -> Result<(), RecordError> {
        let generations = self.book.get_mut()?.generations_mut();
        for (uuid, generation) in before {
            match generation {
                Some(g) => generations.insert(uuid.clone(), *g),
                None => generations.remove(uuid),
            };
        }
        Ok(())
    }

    /// Forgets a deleted provider's generation.
    pub fn forget(&mut self, uuid: &str) -> Result<(), RecordError> {
        self.book.get_mut()?.generations_mut().remove(uuid);
        Ok(())
    }

    /// Writes a ResourceProvider through admission; a rejection is a 400 with admission's
    /// message.
    pub fn write_provider(&mut self, mut rp: ResourceProvider) -> Result<(), RecordError> {
        if self.backing == Backing::Cluster {
            // The API server moves `metadata.generation` when the spec changes. The answer
            // is made before the write is committed, and a client takes the generation it
            // gives for its next write (Nova's report client does), so the stored copy
            // carries the generation the API server will give it.
            // The API server sees one write of the object per request, from what it held
            // before the request to what the request leaves: a provider written twice in
            // one request (the reshaper's interim inventories, then the final ones) moves
            // once, or not at all when it ends as it began.
            let name = rp.metadata.name.as_deref().unwrap_or("");
            let key = ObjectKey::cluster(Kind::ResourceProvider, name);
            let committed = match self.journal.iter().find(|(k, _)| *k == key) {
                Some((_, before)) => before.as_ref(),
                None => self.store.get(&key),
            };
            match committed {
                Some(Object::ResourceProvider(current)) => {
                    rp.metadata.generation = if current.spec == rp.spec {
                        current.metadata.generation
                    } else {
                        current.metadata.generation.map(|g| g + 1)
                    };
                }
                // Made earlier in this request: the API server creates it once.
                None => {
                    if let Some(Object::ResourceProvider(made)) = self.store.get(&key) {
                        rp.metadata.generation = made.metadata.generation;
                    }
                }
                Some(_) => {}
            }
        }
        let object = Object::ResourceProvider(rp);
        self.touch(&ObjectKey::of(&object))?;
        self.note_start(&object);
        let verdict = admit_and_store(self.store.get_mut()?, object);
        if verdict.allowed {
            Ok(())
        } else {
            Err(RecordError::ProviderRefused(
                verdict.refusal,
                verdict.message,
            ))
        }
    }

    /// Writes an Allocation through admission; a rejection is Placement's 409.
    pub fn write_allocation(&mut self, a: Allocation) -> Result<(), RecordError> {
        let object = Object::Allocation(a);
        let key = ObjectKey::of(&object);
        self.touch(&key)?;
        self.note_start(&object);
        let store = self.store.get_mut()?;
        let pending = match self.ledger.as_deref_mut() {
            Some(ledger) => ledger.beside(store, object.name(), std::time::Instant::now()),
            None => PendingUsage::default(),
        };
        let verdict = admit_and_store_beside(store, object, &pending);
        if !verdict.allowed {
            return Err(RecordError::AllocationRefused(
                verdict.refusal,
                verdict.message,
            ));
        }
        Ok(())
    }

    /// The Allocation objects of a consumer, by key.
    pub fn consumer_allocations(&self, consumer: &str) -> Vec<(ObjectKey, Allocation)> {
        self.store
            .allocations_of_consumer(consumer)
            .filter_map(|key| match self.store.get(key) {
                Some(Object::Allocation(a)) => Some((key.clone(), a.clone())),
                _ => None,
            })
            .collect()
    }

    /// A consumer's attributes, if it exists (it has allocations).
    pub fn consumer(&self, consumer: &str) -> Option<Consumer> {
        match self.backing {
            Backing::Memory => self.book.consumers.get(consumer).cloned(),
            Backing::Cluster => {
                let objects: Vec<Allocation> = self
                    .consumer_allocations(consumer)
                    .into_iter()
                    .map(|(_, a)| a)
                    .collect();
                consumer_from_objects(&objects)
            }
        }
    }

    /// Every consumer with its attributes.
    pub fn consumers(&self) -> BTreeMap<String, Consumer> {
        match self.backing {
            Backing::Memory => self
                .book
                .consumers
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            Backing::Cluster => {
                // One pass over the Allocations, grouped by consumer.
                let mut by_consumer: BTreeMap<String, Vec<Allocation>> = BTreeMap::new();
                for o in self.store.list(Kind::Allocation) {
                    if let Object::Allocation(a) = o {
                        by_consumer
                            .entry(a.spec.consumer.clone())
                            .or_default()
                            .push(a.clone());
                    }
                }
                by_consumer
                    .into_iter()
                    .filter_map(|(u, objects)| consumer_from_objects(&objects).map(|c| (u, c)))
                    .collect()
            }
        }
    }

    /// Keeps a consumer's record after a write (in memory; over a cluster the Allocation
    /// objects carry it), or forgets it.
    pub fn set_consumer(
        &mut self,
        consumer: &str,
        record: Option<Consumer>,
    ) -> Result<(), RecordError> {
        let book = self.book.get_mut()?;
        if !self.consumers_before.iter().any(|(c, _)| c == consumer) {
            let before = book.consumers.get(consumer).cloned();
            self.consumers_before.push((consumer.to_string(), before));
        }
        match record {
            Some(r) => book.consumers.insert(consumer.to_string(), r),
            None => book.consumers.remove(consumer),
        };
        Ok(())
    }

    /// Puts consumers' records back as they were before a failed write.
    pub fn restore_consumers(
        &mut self,
        before: &[(String, Option<Consumer>)],
    ) -> Result<(), RecordError> {
        let book = self.book.get_mut()?;
        for (consumer, record) in before {
            match record {
                Some(r) => book.consumers.insert(consumer.clone(), r.clone()),
                None => book.consumers.remove(consumer),
            };
        }
        Ok(())
    }

    /// Whether a trait exists: standard, or a custom one created (or seeded).
    pub fn trait_exists(&self, name: &str) -> bool {
        self.book.trait_exists(name)
    }

    /// Whether a resource class exists: standard, or a custom one created (or seeded).
    pub fn class_exists(&self, name: &str) -> bool {
        self.book.class_exists(name)
    }

    /// See [`Book::unknown_names`].
    pub fn unknown_names(&self, q: &CandidatesQuery) -> Option<String> {
        self.book.unknown_names(q)
    }

    /// The custom traits created.
    pub fn custom_traits(&self) -> &CustomNameSet {
        &self.book.custom_traits
    }

    /// The custom resource classes created.
    pub fn custom_classes(&self) -> &CustomNameSet {
        &self.book.custom_classes
    }

    /// Adds a custom trait; whether it is new.
    pub fn add_custom_trait(&mut self, name: &str) -> Result<bool, RecordError> {
        self.change_registry(Registry::Traits, name, true)
    }

    /// Removes a custom trait.
    pub fn remove_custom_trait(&mut self, name: &str) -> Result<(), RecordError> {
        self.change_registry(Registry::Traits, name, false)
            .map(|_| ())
    }

    /// Adds a custom resource class; whether it is new.
    pub fn add_custom_class(&mut self, name: &str) -> Result<bool, RecordError> {
        self.change_registry(Registry::ResourceClasses, name, true)
    }

    /// Removes a custom resource class.
    pub fn remove_custom_class(&mut self, name: &str) -> Result<(), RecordError> {
        self.change_registry(Registry::ResourceClasses, name, false)
            .map(|_| ())
    }

    /// Adds or removes a name; whether that changed the registry (and was journalled).
    fn change_registry(
        &mut self,
        registry: Registry,
        name: &str,
        added: bool,
    ) -> Result<bool, RecordError> {
        // Both taken before anything changes: a trait created or deleted changes the order
        // the store's index lists traits in.
        let store = self.store.get_mut()?;
        let book = self.book.get_mut()?;
        let set = match registry {
            Registry::Traits => &mut book.custom_traits,
            Registry::ResourceClasses => &mut book.custom_classes,
        };
        let (changed, was_at) = if added {
            (set.insert(name.to_string()), None)
        } else {
            match set.shift_remove_full(name) {
                Some((at, _)) => (true, Some(at)),
                None => (false, None),
            }
        };
        if changed {
            book.registry_epoch += 1;
            self.registry_changes.push(RegistryChange {
                registry,
                name: name.to_string(),
                added,
                was_at,
            });
            if registry == Registry::Traits {
                book.order_traits_of(store);
            }
        }
        Ok(changed)
    }
}

#[cfg(test)]
mod tests;
