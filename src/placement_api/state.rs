//! What the API serves from: the store, plus what Placement keeps and kubeplace's objects
//! do not: provider generations, the custom trait and resource class registries, and
//! consumers' projects, users and generations.
//!
//! Generations are counters beside the store, keyed by provider uuid: 0 when the provider
//! is seeded or created, one more on each change Placement counts (inventories, traits,
//! aggregates, allocations put on it; not a rename or a new parent). They live only as long
//! as the process, as the store does.

use std::collections::{BTreeSet, HashMap};

use http::StatusCode;

use kubeplace_api::{Allocation, Kind, Object, ResourceProvider};
use kubeplace_core::placement::{ProviderRecord, standard_resource_classes, standard_traits};
use kubeplace_policy::admission::admit_and_store;
use kubeplace_policy::store::{ObjectKey, Store};

use super::wire::ApiError;

/// Placement's project for consumers it did not learn one for (its
/// `incomplete_consumer_project_id` default); the same zero uuid serves as the user.
pub(crate) const UNKNOWN_PROJECT: &str = "00000000-0000-0000-0000-000000000000";

/// A consumer's attributes Placement keeps beside its allocations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Consumer {
    pub project_id: String,
    pub user_id: String,
    pub consumer_type: String,
    pub generation: u64,
}

/// The API's state: the store and the records kept beside it.
#[derive(Debug)]
pub struct State {
    pub(crate) store: Store,
    generations: HashMap<String, u64>,
    pub(crate) custom_traits: BTreeSet<String>,
    pub(crate) custom_classes: BTreeSet<String>,
    pub(crate) consumers: HashMap<String, Consumer>,
    /// Allocation object keys by consumer uuid: finding a consumer's objects is a lookup,
    /// not a walk over every object of the store (which cost a claim 2.4 ms at 35k
    /// providers).
    by_consumer: HashMap<String, BTreeSet<ObjectKey>>,
}

impl State {
    /// The state over a seeded store: every CUSTOM_ trait and class the objects use counts
    /// as created, and every consumer with allocations exists (generation 1).
    pub fn new(store: Store) -> State {
        let mut state = State {
            store,
            generations: HashMap::new(),
            custom_traits: BTreeSet::new(),
            custom_classes: BTreeSet::new(),
            consumers: HashMap::new(),
            by_consumer: HashMap::new(),
        };
        let index = state.store.index();
        for record in index.providers() {
            if let Some((inventories, traits)) = index.effective(&record.name) {
                let custom = |n: &String| n.starts_with("CUSTOM_");
                state
                    .custom_classes
                    .extend(inventories.into_keys().filter(custom));
                state
                    .custom_traits
                    .extend(traits.into_iter().filter(custom));
            }
        }
        let consumers: Vec<(String, ObjectKey, Vec<String>)> = state
            .store
            .list(Kind::Allocation)
            .filter_map(|o| match o {
                Object::Allocation(a) => Some((
                    a.spec.consumer.clone(),
                    ObjectKey::of(o),
                    a.spec
                        .allocations
                        .iter()
                        .flat_map(|pa| pa.resources.keys().cloned())
                        .collect(),
                )),
                _ => None,
            })
            .collect();
        for (consumer, key, classes) in consumers {
            state
                .by_consumer
                .entry(consumer.clone())
                .or_default()
                .insert(key);
            state
                .custom_classes
                .extend(classes.into_iter().filter(|c| c.starts_with("CUSTOM_")));
            state.consumers.entry(consumer).or_insert_with(|| Consumer {
                project_id: UNKNOWN_PROJECT.to_string(),
                user_id: UNKNOWN_PROJECT.to_string(),
                consumer_type: "INSTANCE".to_string(),
                generation: 1,
            });
        }
        state
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

    /// A provider's uuid by name.
    pub(crate) fn uuid_of(&self, name: &str) -> Option<String> {
        self.store.index().provider(name).map(|r| r.uuid)
    }

    /// A provider's generation.
    pub(crate) fn generation(&self, uuid: &str) -> u64 {
        self.generations.get(uuid).copied().unwrap_or(0)
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

    /// One more change to a provider.
    pub(crate) fn bump(&mut self, uuid: &str) {
        *self.generations.entry(uuid.to_string()).or_insert(0) += 1;
    }

    /// Forgets a deleted provider's generation.
    pub(crate) fn forget(&mut self, uuid: &str) {
        self.generations.remove(uuid);
    }

    /// Writes a ResourceProvider through admission; a rejection is a 400 with admission's
    /// message.
    pub(crate) fn write_provider(&mut self, rp: ResourceProvider) -> Result<(), ApiError> {
        let verdict = admit_and_store(&mut self.store, Object::ResourceProvider(rp));
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
        let verdict = admit_and_store(&mut self.store, object);
        if !verdict.allowed {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                format!("Unable to allocate inventory: {}", verdict.message),
            ));
        }
        self.by_consumer.entry(consumer).or_default().insert(key);
        Ok(())
    }

    /// Deletes an Allocation object.
    pub(crate) fn delete_allocation(&mut self, key: &ObjectKey) {
        if let Some(Object::Allocation(a)) = self.store.delete(key)
            && let Some(keys) = self.by_consumer.get_mut(&a.spec.consumer)
        {
            keys.remove(key);
            if keys.is_empty() {
                self.by_consumer.remove(&a.spec.consumer);
            }
        }
    }

    /// Puts back an Allocation object deleted by a write that was then refused.
    pub(crate) fn restore_allocation(&mut self, a: Allocation) {
        let consumer = a.spec.consumer.clone();
        let object = Object::Allocation(a);
        let key = ObjectKey::of(&object);
        self.store.put(object);
        self.by_consumer.entry(consumer).or_default().insert(key);
    }

    /// The Allocation objects of a consumer, by key.
    pub(crate) fn consumer_allocations(&self, consumer: &str) -> Vec<(ObjectKey, Allocation)> {
        self.by_consumer
            .get(consumer)
            .into_iter()
            .flatten()
            .filter_map(|key| match self.store.get(key) {
                Some(Object::Allocation(a)) => Some((key.clone(), a.clone())),
                _ => None,
            })
            .collect()
    }

    /// Whether a trait exists: standard, or a custom one created (or seeded).
    pub(crate) fn trait_exists(&self, name: &str) -> bool {
        standard_traits().binary_search(&name).is_ok() || self.custom_traits.contains(name)
    }

    /// Whether a resource class exists: standard, or a custom one created (or seeded).
    pub(crate) fn class_exists(&self, name: &str) -> bool {
        standard_resource_classes().contains(&name) || self.custom_classes.contains(name)
    }
}
