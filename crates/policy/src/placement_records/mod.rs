//! Placement's records beside kubeplace's objects, and what a request of the Placement API
//! sees ([`State`]): the store (the operator's watched cache, or the store `kubeplace
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
//! it touched, which the caller commits to the API server.

mod consumers;
mod error;
mod footprint;
mod registries;
mod state;

use std::collections::{BTreeSet, HashMap};

use kubeplace_api::{Kind, Object};
use kubeplace_core::placement::query::CandidatesQuery;
use kubeplace_core::placement::trait_rows::TraitRows;
use kubeplace_core::placement::{standard_resource_classes, standard_traits};

use crate::store::Store;

use consumers::consumer_of;
pub use consumers::{
    CONSUMER_GENERATION_ANNOTATION, CONSUMER_TYPE_ANNOTATION, Consumer, PROJECT_ANNOTATION,
    UNKNOWN_CONSUMER_TYPE, UNKNOWN_PROJECT, USER_ANNOTATION,
};
pub use error::RecordError;
pub use footprint::Footprint;
pub use registries::{
    CustomNameSet, Registry, RegistryChange, apply_registry_changes, registry_lines,
};
pub use state::{Guard, Journal, State};

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
    /// Grows with every change to `generations` (made through [`Book::generations_mut`]).
    generations_moved: u64,
    custom_traits: CustomNameSet,
    custom_classes: CustomNameSet,
    consumers: HashMap<String, Consumer>,
    /// Grows with every change a write makes to the registries (or undoes).
    registry_epoch: u64,
    /// Writes that changed the registries here and have not saved them yet (over a
    /// cluster).
    registry_unsaved: u32,
}

impl Book {
    /// The generations to change, counted as changed.
    fn generations_mut(&mut self) -> &mut HashMap<String, u64> {
        self.generations_moved += 1;
        &mut self.generations
    }

    /// Whether a trait exists: standard, or a custom one created (or seeded).
    pub fn trait_exists(&self, name: &str) -> bool {
        standard_traits().binary_search(&name).is_ok() || self.custom_traits.contains(name)
    }

    /// Whether a resource class exists: standard, or a custom one created (or seeded).
    pub fn class_exists(&self, name: &str) -> bool {
        standard_resource_classes().contains(&name) || self.custom_classes.contains(name)
    }

    /// Placement's refusal of a candidates query that names a resource class or a trait that
    /// does not exist (its detail, for a 400), or `None`.
    pub fn unknown_names(&self, q: &CandidatesQuery) -> Option<String> {
        for group in q.groups.values() {
            if let Some(class) = group.resources.keys().find(|c| !self.class_exists(c)) {
                return Some(format!(
                    "Invalid resource class in resources parameter: No such resource class {class}."
                ));
            }
        }
        let unknown: BTreeSet<&str> = q
            .groups
            .values()
            .flat_map(|g| g.required.iter().flatten().chain(&g.forbidden))
            .chain(&q.root_required)
            .chain(&q.root_forbidden)
            .map(String::as_str)
            .filter(|t| !self.trait_exists(t))
            .collect();
        (!unknown.is_empty()).then(|| {
            format!(
                "No such trait(s): {}.",
                unknown.into_iter().collect::<Vec<_>>().join(", ")
            )
        })
    }

    /// The book over a seeded store: every CUSTOM_ trait and class the objects use counts
    /// as created, and (in memory) every consumer with allocations exists (generation 1).
    pub fn new(store: &Store, backing: Backing) -> Book {
        let mut book = Book::default();
        book.learn_registries(store);
        if backing == Backing::Memory {
            for o in store.list(Kind::Allocation) {
                let Object::Allocation(a) = o else { continue };
                book.consumers
                    .entry(a.spec.consumer.clone())
                    .or_insert_with(|| consumer_of(std::slice::from_ref(a), 1));
            }
        }
        book
    }

    /// Adds every CUSTOM_ trait and resource class the stored objects use, and those a
    /// manifest's registry ConfigMap lists, to the registries.
    pub fn learn_registries(&mut self, store: &Store) {
        let seeded = store.seeded_custom_names();
        self.custom_traits.extend(seeded.traits.iter().cloned());
        self.custom_classes
            .extend(seeded.resource_classes.iter().cloned());
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

    /// A number that grows whenever the registries are changed: a copy of them read from
    /// elsewhere before it last grew may be older than what the book holds.
    pub fn registry_epoch(&self) -> u64 {
        self.registry_epoch
    }

    /// Whether a copy of the registries read from elsewhere may be set: none was changed
    /// here since `epoch`, and no change made here is still unsaved.
    pub fn may_set_registries(&self, epoch: u64) -> bool {
        self.registry_epoch == epoch && self.registry_unsaved == 0
    }

    /// A write that changed the registries saved them, or was undone.
    pub fn registry_settled(&mut self) {
        self.registry_unsaved = self.registry_unsaved.saturating_sub(1);
        self.registry_epoch += 1;
    }

    /// Sets the registries to what was saved (over a cluster, before learning what the
    /// objects use).
    pub fn set_registries(&mut self, traits: CustomNameSet, classes: CustomNameSet) {
        self.registry_epoch += 1;
        self.custom_traits = traits;
        self.custom_classes = classes;
    }

    /// The order traits are listed in: custom ones as they were created.
    pub fn trait_rows(&self) -> TraitRows {
        TraitRows::new(self.custom_traits.iter().map(String::as_str))
    }

    /// Has `store` list traits in this book's order.
    pub fn order_traits_of(&self, store: &mut Store) {
        store.set_trait_rows(self.trait_rows());
    }

    /// Applies registry changes to this book, or undoes them.
    pub fn apply_registry_changes(&mut self, changes: &[RegistryChange], undo: bool) {
        self.registry_epoch += 1;
        apply_registry_changes(
            &mut self.custom_traits,
            &mut self.custom_classes,
            changes,
            undo,
        );
    }
}
