//! The provider index: every provider in a compact arena, linked into trees, with
//! interned resource classes, traits and aggregates, usages from allocations, and the
//! inventories and traits provider configs add. Every change is incremental: one
//! provider or one consumer's allocations at a time, never a rebuild. Only the list of
//! roots in name order is rebuilt, on the first search after the roots change.
//!
//! This file holds the records handed in and read back, the index's fields and the slot
//! lookups every part uses. The index's methods are split by concern:
//!
//! - `providers`: providers put and removed, what provider configs add to them, the
//!   member lists that find them by class, trait and aggregate, and the parent and child
//!   links that keep every tree whole whatever order providers come in.
//! - `usages`: consumers' allocations, the usages they add up to, and free amounts.
//! - `figures`: every provider's inventories and usages read in one pass.
//! - `lookups`: one provider or all of them read back: records, inventories, traits,
//!   aggregates, uuids.
//! - `trees`: a provider's root, children and tree, and why a tree is not well formed.
//! - `orders`: the roots in name order and every provider's rank in uuid order.
//! - `packs`: each root's tree packed for the search, packed again as changes touch it.
//!
//! `tests` holds the checks that span every part and the helpers the tests beside each
//! part share.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use super::Inventory;
use super::ids::{AggregateId, ClassId, ProviderId, TraitId};
use super::interner::{HashMap, Interner};
use super::packed_tree::PackedTrees;
use super::provider::Provider;
use super::trait_rows::TraitRows;

pub use figures::{ClassFigures, ProviderFigures};

mod figures;
mod lookups;
mod orders;
mod packs;
mod providers;
#[cfg(test)]
mod tests;
mod trees;
mod usages;

/// A provider as it is handed to and read back from the index.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ProviderRecord {
    pub name: String,
    pub uuid: String,
    /// The name Placement's API shows, when it is not `name`: a Placement name that cannot
    /// be an object name is kept beside the object's name (kubeplace_api's `provider_name`).
    pub placement_name: Option<String>,
    pub parent: Option<String>,
    pub inventories: BTreeMap<String, Inventory>,
    pub traits: BTreeSet<String>,
    pub aggregates: BTreeSet<String>,
}

/// A consumer's allocations: (provider name, resource class, amount).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ConsumerAllocations {
    pub consumer: String,
    pub items: Vec<(String, String, i64)>,
}

impl ConsumerAllocations {
    /// What the claim takes of `class` on `provider`.
    pub fn amount(&self, provider: &str, class: &str) -> i64 {
        self.items
            .iter()
            .filter(|(p, c, _)| p == provider && c == class)
            .map(|(_, _, n)| n)
            .sum()
    }
}

/// Why a provider is not part of a well-formed tree.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TreeError {
    #[error("parent {parent:?} does not exist")]
    ParentNotFound { parent: String },
    #[error("parent chain forms a cycle: {}", .cycle.join(" -> "))]
    Cycle { cycle: Vec<String> },
    #[error("uuid {uuid} is also used by provider {other:?}")]
    DuplicateUuid { uuid: String, other: String },
}

/// The roots in name order, and each slot's position in it.
#[derive(Debug, Clone, Default)]
pub(crate) struct RootOrder {
    pub(crate) roots: Vec<ProviderId>,
    /// By slot; `u32::MAX` for a slot that is not a root.
    pub(crate) rank: Vec<u32>,
}

/// Every provider's place in uuid order, for answers that list providers by uuid.
#[derive(Debug, Clone, Default)]
pub(crate) struct UuidOrder {
    /// By slot: how many distinct uuids sort before the provider's (`u32::MAX` for an
    /// empty slot), so that providers sharing a uuid share a rank.
    pub(crate) rank: Vec<u32>,
    /// Whether every uuid is written in JSON as it is, with nothing to escape.
    pub(crate) plain: bool,
    /// By slot, the uuid in quotes as JSON writes it (zeros for an empty slot), when every
    /// uuid is plain and 36 characters long, as Placement's are.
    pub(crate) quoted: Option<Vec<QuotedUuid>>,
}

/// A 36-character uuid in quotes.
pub(crate) type QuotedUuid = [u8; 38];

/// Every provider of a well-formed tree in tree order: roots by name, each tree depth-first
/// with children by name (what `GET /resource_providers` lists), and each one's position.
#[derive(Debug, Clone, Default)]
pub(crate) struct TreeOrder {
    pub(crate) providers: Vec<ProviderId>,
    /// By slot; `u32::MAX` for a slot in no tree.
    pub(crate) rank: Vec<u32>,
    /// Whether no provider is listed twice (links that do not make trees could).
    pub(crate) once: bool,
    /// By slot: the provider's `root`. Answers name the trees of tens of thousands of
    /// candidates' providers; this table is read where each provider would be.
    pub(crate) root: Vec<Option<ProviderId>>,
}

/// Providers and usages, with the lookups candidate search needs.
#[derive(Debug, Clone, Default)]
pub struct ProviderIndex {
    pub(crate) slots: Vec<Option<Provider>>,
    free: Vec<ProviderId>,
    by_name: HashMap<Box<str>, ProviderId>,
    by_uuid: HashMap<Box<str>, Vec<ProviderId>>,
    /// How many providers' uuids have an upper-case letter: while none has, the providers a
    /// uuid matches in any case are found by the uuid in lower case.
    uuids_with_upper: usize,
    /// Children whose parent does not exist yet, by the parent's name.
    waiting_for_parent: HashMap<Box<str>, Vec<ProviderId>>,
    /// Providers without a parent, by name.
    pub(crate) roots: BTreeMap<Box<str>, ProviderId>,
    /// `roots` as a list and a rank per slot, built on first use after the roots change:
    /// walking a list beats walking the map's nodes, and ranks compare without names.
    root_order: OnceLock<RootOrder>,
    /// Built on first use after a provider comes or goes: ranks compare without uuids.
    uuid_order: OnceLock<UuidOrder>,
    /// Drawn anew whenever a provider comes or goes ([`next_slots_stamp`]): indexes with the
    /// same stamp hold a provider of the same uuid in every slot, and (their names only
    /// ever added to) the same name for every class an answer of either names.
    slots_stamp: u64,
    /// Every provider in tree order, built on first use after a provider comes or goes:
    /// a provider list walks a list instead of every tree.
    tree_order: OnceLock<TreeOrder>,
    pub(crate) classes: Interner<ClassId>,
    pub(crate) traits: Interner<TraitId>,
    /// The order traits are listed in ([`TraitRows`]).
    trait_rows: TraitRows,
    pub(crate) aggregate_names: Interner<AggregateId>,
    /// Providers per aggregate.
    pub(crate) aggregate_members: Vec<Vec<ProviderId>>,
    /// Providers per trait (effective traits).
    pub(crate) trait_members: Vec<Vec<ProviderId>>,
    /// Providers per resource class they have an inventory of (effective inventories).
    pub(crate) class_members: Vec<Vec<ProviderId>>,
    /// Per trait, how many of its providers have an inventory of each class (effective
    /// traits and inventories): a required trait whose providers supply none of a group's
    /// classes rules the group out before a single provider is read.
    pub(crate) trait_classes: Vec<Vec<(ClassId, u32)>>,
    /// Providers with the MISC_SHARES_VIA_AGGREGATE trait, sorted.
    pub(crate) sharing: Vec<ProviderId>,
    /// Each root's tree, packed for the search.
    packed: PackedTrees,
    allocations: HashMap<Box<str>, ConsumerAllocations>,
    /// Usages of providers that do not exist (yet), by provider name.
    orphan_usages: HashMap<Box<str>, Vec<(ClassId, i64)>>,
    /// While changes are applied in bulk ([`ProviderIndex::defer_repacks`]): the slots whose
    /// trees are to be packed again once they are all in, so that a tree loaded provider by
    /// provider is packed once, not once per provider.
    deferred_repacks: Option<Vec<ProviderId>>,
}

/// A stamp no index has held before in this process.
fn next_slots_stamp() -> u64 {
    static STAMPS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    STAMPS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// The slot lookups every part of the index goes through.
impl ProviderIndex {
    /// Which providers the slots hold: an answer written from slots and class names is the
    /// same bytes again while the stamp is the same.
    pub(crate) fn slots_stamp(&self) -> u64 {
        self.slots_stamp
    }

    pub(crate) fn get(&self, id: ProviderId) -> &Provider {
        self.slots[id.index()].as_ref().expect("live provider slot")
    }

    /// The provider to change. Its rendered JSON is dropped here, whatever the caller
    /// changes: this and putting a new provider in a slot are the only ways a provider
    /// changes, so no answer is written from a fragment older than the provider.
    fn get_mut(&mut self, id: ProviderId) -> &mut Provider {
        let p = self.slots[id.index()].as_mut().expect("live provider slot");
        p.fragments = Default::default();
        p
    }

    /// The order traits are listed in: custom ones as they were created.
    pub fn trait_rows(&self) -> &TraitRows {
        &self.trait_rows
    }

    /// Lists traits in the order of `rows` from now on. Every provider's rendered JSON is
    /// dropped when the order changes, as it lists the provider's traits.
    pub fn set_trait_rows(&mut self, rows: TraitRows) {
        if rows == self.trait_rows {
            return;
        }
        self.trait_rows = rows;
        for p in self.slots.iter_mut().flatten() {
            p.fragments = Default::default();
        }
    }

    /// The slot of a provider by name.
    pub fn id(&self, name: &str) -> Option<ProviderId> {
        self.by_name.get(name).copied()
    }

    /// Number of providers.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// Whether the index holds no provider.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }
}
