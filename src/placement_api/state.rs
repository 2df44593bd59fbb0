//! What a request sees: the store (the operator's watched cache, or the store `kubeplace
//! placement serve` loaded) and the [`Book`] of what Placement keeps that kubeplace's objects
//! do not: provider generations, the custom trait and resource class registries, and
//! consumers' projects, users and generations.
//!
//! In memory, generations are counters in the book, keyed by provider uuid: 0 when the
//! provider is seeded or created, one more on each change Placement counts (inventories,
//! traits, aggregates, allocations put on it; not a rename or a new parent). They live as
//! long as the process, as the store does.
//!
//! Over a cluster, the objects are the record, so that every replica and every restart sees
//! the same answers: a provider's generation is its object's `metadata.generation` less one
//! (the API server moves it on every spec change, and refuses a write made from a stale
//! `resourceVersion`), a consumer's project, user and type are annotations on its Allocation
//! objects and its generation is theirs. Every write is recorded in a journal of the objects
//! it touched, which the caller commits to the API server (see `cluster.rs`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Deref;
use std::sync::{RwLockReadGuard, RwLockWriteGuard};

use http::StatusCode;

use kubeplace_api::{Allocation, Kind, Object, ResourceProvider};
use kubeplace_core::placement::{ProviderRecord, standard_resource_classes, standard_traits};
use kubeplace_policy::admission::admit_and_store;
use kubeplace_policy::store::{ObjectKey, Store};

use super::wire::ApiError;

/// Placement's project for consumers it did not learn one for (its
/// `incomplete_consumer_project_id` default); the same zero uuid serves as the user.
pub(crate) const UNKNOWN_PROJECT: &str = "00000000-0000-0000-0000-000000000000";

/// The annotations that keep a consumer's attributes on its Allocation objects.
pub const PROJECT_ANNOTATION: &str = "placement.kubeplace.io/project-id";
/// See [`PROJECT_ANNOTATION`].
pub const USER_ANNOTATION: &str = "placement.kubeplace.io/user-id";
/// See [`PROJECT_ANNOTATION`].
pub const CONSUMER_TYPE_ANNOTATION: &str = "placement.kubeplace.io/consumer-type";

/// A consumer's attributes Placement keeps beside its allocations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Consumer {
    pub project_id: String,
    pub user_id: String,
    pub consumer_type: String,
    pub generation: u64,
}

/// Where the objects live, which decides where Placement's records are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backing {
    /// `kubeplace placement serve`: the store is the only copy; the book keeps the rest.
    Memory,
    /// `kubeplace run`: the API server holds the objects; the store is its watched cache.
    Cluster,
}

/// What Placement keeps beside the objects.
#[derive(Debug, Default)]
pub struct Book {
    generations: HashMap<String, u64>,
    pub(crate) custom_traits: BTreeSet<String>,
    pub(crate) custom_classes: BTreeSet<String>,
    consumers: HashMap<String, Consumer>,
    /// Allocation object keys by consumer uuid (in memory): finding a consumer's objects is
    /// a lookup, not a walk over every object of the store (which cost a claim 2.4 ms at
    /// 35k providers).
    by_consumer: HashMap<String, BTreeSet<ObjectKey>>,
}

impl Book {
    /// The book over a seeded store: every CUSTOM_ trait and class the objects use counts
    /// as created, and (in memory) every consumer with allocations exists (generation 1).
    pub fn new(store: &Store, backing: Backing) -> Book {
        let mut book = Book::default();
        book.learn_registries(store);
        if backing == Backing::Memory {
            for o in store.list(Kind::Allocation) {
                let Object::Allocation(a) = o else { continue };
                book.by_consumer
                    .entry(a.spec.consumer.clone())
                    .or_default()
                    .insert(ObjectKey::of(o));
                book.consumers
                    .entry(a.spec.consumer.clone())
                    .or_insert_with(|| consumer_of(std::slice::from_ref(a), 1));
            }
        }
        book
    }

    /// Adds every CUSTOM_ trait and resource class the stored objects use to the registries.
    pub fn learn_registries(&mut self, store: &Store) {
        let index = store.index();
        let custom = |n: &&str| n.starts_with("CUSTOM_");
        self.custom_classes
            .extend(index.classes_in_use().filter(custom).map(str::to_string));
        self.custom_traits
            .extend(index.traits_in_use().filter(custom).map(str::to_string));
        for o in store.list(Kind::Allocation) {
            let Object::Allocation(a) = o else { continue };
            self.custom_classes.extend(
                a.spec
                    .allocations
                    .iter()
                    .flat_map(|pa| pa.resources.keys())
                    .filter(|c| c.starts_with("CUSTOM_"))
                    .cloned(),
            );
        }
    }

    /// Applies registry changes to this book, or undoes them.
    pub(crate) fn apply_registry_changes(&mut self, changes: &[RegistryChange], undo: bool) {
        apply_registry_changes(
            &mut self.custom_traits,
            &mut self.custom_classes,
            changes,
            undo,
        );
    }
}

/// Applies registry changes to a pair of trait and class sets (the book's, or the ones kept
/// in the cluster), or undoes them.
pub(crate) fn apply_registry_changes(
    traits: &mut BTreeSet<String>,
    classes: &mut BTreeSet<String>,
    changes: &[RegistryChange],
    undo: bool,
) {
    for change in changes {
        let set = match change.registry {
            Registry::Traits => &mut *traits,
            Registry::ResourceClasses => &mut *classes,
        };
        if change.added != undo {
            set.insert(change.name.clone());
        } else {
            set.remove(&change.name);
        }
    }
}

/// A registry of custom names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Registry {
    Traits,
    ResourceClasses,
}

/// A custom trait or resource class a write created (`added`) or deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RegistryChange {
    pub registry: Registry,
    pub name: String,
    pub added: bool,
}

/// A consumer's attributes from its Allocation objects: the annotations of the first that
/// has them, and `generation`.
fn consumer_of(objects: &[Allocation], generation: u64) -> Consumer {
    let annotation = |key: &str| {
        objects.iter().find_map(|a| {
            a.metadata
                .annotations
                .as_ref()
                .and_then(|m| m.get(key))
                .cloned()
        })
    };
    Consumer {
        project_id: annotation(PROJECT_ANNOTATION).unwrap_or_else(|| UNKNOWN_PROJECT.to_string()),
        user_id: annotation(USER_ANNOTATION).unwrap_or_else(|| UNKNOWN_PROJECT.to_string()),
        consumer_type: annotation(CONSUMER_TYPE_ANNOTATION)
            .unwrap_or_else(|| "INSTANCE".to_string()),
        generation,
    }
}

/// A consumer's attributes from its Allocation objects over a cluster: its generation is
/// theirs (summed, for a consumer with several); none without objects.
fn consumer_from_objects(objects: &[Allocation]) -> Option<Consumer> {
    if objects.is_empty() {
        return None;
    }
    let generation = objects
        .iter()
        .map(|a| a.metadata.generation.unwrap_or(1).max(0) as u64)
        .sum();
    Some(consumer_of(objects, generation))
}

/// A lock guard of either kind: reads share the lock, writes hold it alone.
pub(crate) enum Guard<'a, T> {
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
    fn get_mut(&mut self) -> Result<&mut T, ApiError> {
        match self {
            Guard::Write(g) => Ok(g),
            Guard::Read(_) => Err(ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "a write was attempted under a read lock",
            )),
        }
    }
}

/// The API's state for one request: the store, the book, and (when writing) the journal of
/// the objects the request changed, each with what it was before the request.
pub struct State<'a> {
    pub(crate) store: Guard<'a, Store>,
    book: Guard<'a, Book>,
    backing: Backing,
    journal: Vec<(ObjectKey, Option<Object>)>,
    /// Provider generations (in memory) before their first change in this request.
    generations_before: Vec<(String, Option<u64>)>,
    registry_changes: Vec<RegistryChange>,
}

/// What a write changed: every object touched, before and after, in the order first
/// touched; and the custom traits and classes it created or deleted, in order.
pub(crate) struct Journal {
    pub changes: Vec<(ObjectKey, Option<Object>, Option<Object>)>,
    pub generations_before: Vec<(String, Option<u64>)>,
    pub registry_changes: Vec<RegistryChange>,
}

impl<'a> State<'a> {
    pub(crate) fn new(store: Guard<'a, Store>, book: Guard<'a, Book>, backing: Backing) -> Self {
        State {
            store,
            book,
            backing,
            journal: Vec::new(),
            generations_before: Vec::new(),
            registry_changes: Vec::new(),
        }
    }

    /// The objects this request changed (before and after, unchanged ones left out).
    pub(crate) fn into_journal(self) -> Journal {
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
            registry_changes: self.registry_changes,
        }
    }

    /// Notes an object's state before its first change in this request.
    fn touch(&mut self, key: &ObjectKey) {
        if !self.journal.iter().any(|(k, _)| k == key) {
            let before = self.store.get(key).cloned();
            self.journal.push((key.clone(), before));
        }
    }

    /// Puts an object in as it is, noting the change.
    pub(crate) fn put(&mut self, object: Object) -> Result<(), ApiError> {
        let key = ObjectKey::of(&object);
        self.touch(&key);
        if let Object::Allocation(a) = &object {
            self.book
                .get_mut()?
                .by_consumer
                .entry(a.spec.consumer.clone())
                .or_default()
                .insert(key.clone());
        }
        self.store.get_mut()?.put(object);
        Ok(())
    }

    /// Deletes an object, noting the change; the object deleted.
    pub(crate) fn delete(&mut self, key: &ObjectKey) -> Result<Option<Object>, ApiError> {
        self.touch(key);
        let old = self.store.get_mut()?.delete(key);
        if let Some(Object::Allocation(a)) = &old {
            let book = self.book.get_mut()?;
            if let Some(keys) = book.by_consumer.get_mut(&a.spec.consumer) {
                keys.remove(key);
                if keys.is_empty() {
                    book.by_consumer.remove(&a.spec.consumer);
                }
            }
        }
        Ok(old)
    }

    /// The name of the provider with this uuid, or Placement's 404.
    pub(crate) fn provider_name(&self, uuid: &str) -> Result<String, ApiError> {
        self.store
            .index()
            .names_with_uuid(uuid)
            .into_iter()
            .next()
            .ok_or_else(|| {
                ApiError::not_found(format!("No resource provider with uuid {uuid} found"))
            })
    }

    /// A provider's own record by name (the index has every stored provider).
    pub(crate) fn record(&self, name: &str) -> Result<ProviderRecord, ApiError> {
        self.store.index().provider(name).ok_or_else(|| {
            ApiError::not_found(format!("No resource provider named {name:?} found"))
        })
    }

    /// The stored ResourceProvider object of a provider.
    pub(crate) fn provider_object(&self, name: &str) -> Result<ResourceProvider, ApiError> {
        match self.store.get_cluster(Kind::ResourceProvider, name) {
            Some(Object::ResourceProvider(rp)) => Ok(rp.clone()),
            _ => Err(ApiError::not_found(format!(
                "No resource provider named {name:?} found"
            ))),
        }
    }

    /// A provider's Placement name by object name.
    pub(crate) fn placement_name(&self, object: &str) -> String {
        match self.store.get_cluster(Kind::ResourceProvider, object) {
            Some(Object::ResourceProvider(rp)) => kubeplace_api::provider_name::placement_name(rp),
            _ => object.to_string(),
        }
    }

    /// A provider's uuid by name.
    pub(crate) fn uuid_of(&self, name: &str) -> Option<String> {
        self.store.index().provider(name).map(|r| r.uuid)
    }

    /// A provider's generation.
    pub(crate) fn generation(&self, uuid: &str) -> u64 {
        match self.backing {
            Backing::Memory => self.book.generations.get(uuid).copied().unwrap_or(0),
            Backing::Cluster => self
                .provider_name(uuid)
                .ok()
                .and_then(|name| self.store.get_cluster(Kind::ResourceProvider, &name))
                .and_then(|o| o.meta().generation)
                .and_then(|g| u64::try_from(g - 1).ok())
                .unwrap_or(0),
        }
    }

    /// Checks the generation a client sent against the current one.
    pub(crate) fn check_generation(&self, uuid: &str, sent: i64) -> Result<(), ApiError> {
        let current = self.generation(uuid);
        if u64::try_from(sent).ok() == Some(current) {
            Ok(())
        } else {
            Err(ApiError::stale("resource provider", sent, current))
        }
    }

    /// One more change to a provider. Over a cluster the API server moves the generation
    /// when the spec changes; allocations do not move it there.
    pub(crate) fn bump(&mut self, uuid: &str) -> Result<(), ApiError> {
        if self.backing == Backing::Memory {
            let book = self.book.get_mut()?;
            if !self.generations_before.iter().any(|(u, _)| u == uuid) {
                let before = book.generations.get(uuid).copied();
                self.generations_before.push((uuid.to_string(), before));
            }
            *book.generations.entry(uuid.to_string()).or_insert(0) += 1;
        }
        Ok(())
    }

    /// Puts provider generations back as they were before a failed write.
    pub(crate) fn restore_generations(
        &mut self,
        before: &[(String, Option<u64>)],
    ) -> Result<(), ApiError> {
        let book = self.book.get_mut()?;
        for (uuid, generation) in before {
            match generation {
                Some(g) => book.generations.insert(uuid.clone(), *g),
                None => book.generations.remove(uuid),
            };
        }
        Ok(())
    }

    /// Forgets a deleted provider's generation.
    pub(crate) fn forget(&mut self, uuid: &str) -> Result<(), ApiError> {
        self.book.get_mut()?.generations.remove(uuid);
        Ok(())
    }

    /// Writes a ResourceProvider through admission; a rejection is a 400 with admission's
    /// message.
    pub(crate) fn write_provider(&mut self, mut rp: ResourceProvider) -> Result<(), ApiError> {
        if self.backing == Backing::Cluster {
            // The API server moves `metadata.generation` when the spec changes. The answer
            // is made before the write is committed, and a client takes the generation it
            // gives for its next write (Nova's report client does), so the stored copy
            // carries the generation the API server will give it.
            if let Some(Object::ResourceProvider(current)) = self.store.get_cluster(
                Kind::ResourceProvider,
                rp.metadata.name.as_deref().unwrap_or(""),
            ) {
                rp.metadata.generation = if current.spec == rp.spec {
                    current.metadata.generation
                } else {
                    current.metadata.generation.map(|g| g + 1)
                };
            }
        }
        let object = Object::ResourceProvider(rp);
        self.touch(&ObjectKey::of(&object));
        let verdict = admit_and_store(self.store.get_mut()?, object);
        if verdict.allowed {
            Ok(())
        } else {
            Err(ApiError::bad_request(verdict.message))
        }
    }

    /// Writes an Allocation through admission; a rejection is Placement's 409.
    pub(crate) fn write_allocation(&mut self, a: Allocation) -> Result<(), ApiError> {
        let consumer = a.spec.consumer.clone();
        let object = Object::Allocation(a);
        let key = ObjectKey::of(&object);
        self.touch(&key);
        let verdict = admit_and_store(self.store.get_mut()?, object);
        if !verdict.allowed {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                format!("Unable to allocate inventory: {}", verdict.message),
            ));
        }
        self.book
            .get_mut()?
            .by_consumer
            .entry(consumer)
            .or_default()
            .insert(key);
        Ok(())
    }

    /// The Allocation objects of a consumer, by key.
    pub(crate) fn consumer_allocations(&self, consumer: &str) -> Vec<(ObjectKey, Allocation)> {
        match self.backing {
            Backing::Memory => self
                .book
                .by_consumer
                .get(consumer)
                .into_iter()
                .flatten()
                .filter_map(|key| match self.store.get(key) {
                    Some(Object::Allocation(a)) => Some((key.clone(), a.clone())),
                    _ => None,
                })
                .collect(),
            Backing::Cluster => self
                .store
                .list(Kind::Allocation)
                .filter_map(|o| match o {
                    Object::Allocation(a) if a.spec.consumer == consumer => {
                        Some((ObjectKey::of(o), a.clone()))
                    }
                    _ => None,
                })
                .collect(),
        }
    }

    /// A consumer's attributes, if it exists (it has allocations).
    pub(crate) fn consumer(&self, consumer: &str) -> Option<Consumer> {
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
    pub(crate) fn consumers(&self) -> BTreeMap<String, Consumer> {
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
    pub(crate) fn set_consumer(
        &mut self,
        consumer: &str,
        record: Option<Consumer>,
    ) -> Result<(), ApiError> {
        let book = self.book.get_mut()?;
        match record {
            Some(r) => book.consumers.insert(consumer.to_string(), r),
            None => book.consumers.remove(consumer),
        };
        Ok(())
    }

    /// Whether a trait exists: standard, or a custom one created (or seeded).
    pub(crate) fn trait_exists(&self, name: &str) -> bool {
        standard_traits().binary_search(&name).is_ok() || self.book.custom_traits.contains(name)
    }

    /// Whether a resource class exists: standard, or a custom one created (or seeded).
    pub(crate) fn class_exists(&self, name: &str) -> bool {
        standard_resource_classes().contains(&name) || self.book.custom_classes.contains(name)
    }

    /// The custom traits created.
    pub(crate) fn custom_traits(&self) -> &BTreeSet<String> {
        &self.book.custom_traits
    }

    /// The custom resource classes created.
    pub(crate) fn custom_classes(&self) -> &BTreeSet<String> {
        &self.book.custom_classes
    }

    /// Adds a custom trait; whether it is new.
    pub(crate) fn add_custom_trait(&mut self, name: &str) -> Result<bool, ApiError> {
        self.change_registry(Registry::Traits, name, true)
    }

    /// Removes a custom trait.
    pub(crate) fn remove_custom_trait(&mut self, name: &str) -> Result<(), ApiError> {
        self.change_registry(Registry::Traits, name, false)
            .map(|_| ())
    }

    /// Adds a custom resource class; whether it is new.
    pub(crate) fn add_custom_class(&mut self, name: &str) -> Result<bool, ApiError> {
        self.change_registry(Registry::ResourceClasses, name, true)
    }

    /// Removes a custom resource class.
    pub(crate) fn remove_custom_class(&mut self, name: &str) -> Result<(), ApiError> {
        self.change_registry(Registry::ResourceClasses, name, false)
            .map(|_| ())
    }

    /// Adds or removes a name; whether that changed the registry (and was journalled).
    fn change_registry(
        &mut self,
        registry: Registry,
        name: &str,
        added: bool,
    ) -> Result<bool, ApiError> {
        let book = self.book.get_mut()?;
        let set = match registry {
            Registry::Traits => &mut book.custom_traits,
            Registry::ResourceClasses => &mut book.custom_classes,
        };
        let changed = if added {
            set.insert(name.to_string())
        } else {
            set.remove(name)
        };
        if changed {
            self.registry_changes.push(RegistryChange {
                registry,
                name: name.to_string(),
                added,
            });
        }
        Ok(changed)
    }
}
