//! One provider as the index stores it: the record both the index and its packed trees
//! read, kept apart so that packing needs nothing of the index.

use smallvec::SmallVec;

use super::Inventory;
use super::fragments::Fragments;
use super::ids::{AggregateId, ClassId, ProviderId, SortedIds, TraitId};

/// A provider's children.
pub(crate) type Children = SmallVec<[ProviderId; 4]>;

/// One provider in the arena.
#[derive(Debug, Clone)]
pub(crate) struct Provider {
    pub(crate) name: Box<str>,
    pub(crate) uuid: Box<str>,
    /// The name Placement's API shows, when it is not `name` (see [`ProviderRecord`]).
    ///
    /// [`ProviderRecord`]: super::ProviderRecord
    pub(crate) placement_name: Option<Box<str>>,
    pub(crate) parent_name: Option<Box<str>>,
    /// The parent's slot, once the parent exists.
    pub(crate) parent: Option<ProviderId>,
    /// The root's slot, when the provider is in a well-formed tree.
    pub(crate) root: Option<ProviderId>,
    /// Children by slot, sorted by name; inline for a few, so walking a tree reads no
    /// other allocation.
    pub(crate) children: Children,
    /// The provider's own inventories, sorted by class.
    pub(crate) own_inventories: Vec<(ClassId, Inventory)>,
    /// Inventories of every source (own, then provider configs for other classes), sorted by class.
    pub(crate) inventories: Vec<(ClassId, Inventory)>,
    /// Amount used per class, sorted by class.
    pub(crate) usages: Vec<(ClassId, i64)>,
    /// The provider's own traits, sorted.
    pub(crate) own_traits: Vec<TraitId>,
    /// Own traits and those provider configs add, sorted; inline for a few, like
    /// `aggregate_words`, since the search reads them for every provider it looks at.
    /// Raw words as a pack keeps them, so both read as [`SortedIds`]: see [`Self::traits`].
    pub(crate) trait_words: SmallVec<[u32; 4]>,
    /// Aggregates, sorted, as raw words: see [`Self::aggregates`].
    pub(crate) aggregate_words: SmallVec<[u32; 4]>,
    /// Its JSON as answers show it, kept rendered; empty after any change
    /// ([`super::fragments`]).
    pub(crate) fragments: Fragments,
}

impl Provider {
    /// Its effective inventories and traits with these provider config additions: its own,
    /// plus the additions of classes it does not have itself; each sorted.
    pub(crate) fn with_additions(
        &self,
        config_inventories: Vec<(ClassId, Inventory)>,
        config_traits: Vec<TraitId>,
    ) -> (Vec<(ClassId, Inventory)>, SmallVec<[TraitId; 4]>) {
        let mut inventories = self.own_inventories.clone();
        for (c, inv) in config_inventories {
            // Looked up among the provider's own (sorted), not the list being grown.
            if self
                .own_inventories
                .binary_search_by_key(&c, |(k, _)| *k)
                .is_err()
            {
                inventories.push((c, inv));
            }
        }
        inventories.sort_by_key(|(c, _)| *c);
        let mut traits: SmallVec<[TraitId; 4]> = self.own_traits.iter().copied().collect();
        traits.extend(config_traits);
        traits.sort_unstable();
        traits.dedup();
        (inventories, traits)
    }

    pub(crate) fn inventory(&self, class: ClassId) -> Option<&Inventory> {
        self.inventories
            .binary_search_by_key(&class, |(c, _)| *c)
            .ok()
            .map(|i| &self.inventories[i].1)
    }

    pub(crate) fn used(&self, class: ClassId) -> i64 {
        self.usages
            .binary_search_by_key(&class, |(c, _)| *c)
            .map(|i| self.usages[i].1)
            .unwrap_or(0)
    }

    /// Whether `amount` more of `class` fits here.
    pub(crate) fn fits(&self, class: ClassId, amount: i64) -> bool {
        self.inventory(class)
            .is_some_and(|inv| inv.admits(self.used(class), amount).is_ok())
    }

    /// Effective traits (own and provider configs'), sorted.
    #[inline]
    pub(crate) fn traits(&self) -> SortedIds<'_, TraitId> {
        SortedIds::new(&self.trait_words)
    }

    /// Aggregates, sorted.
    #[inline]
    pub(crate) fn aggregates(&self) -> SortedIds<'_, AggregateId> {
        SortedIds::new(&self.aggregate_words)
    }

    /// The name Placement's API shows.
    pub(crate) fn shown_name(&self) -> &str {
        self.placement_name.as_deref().unwrap_or(&self.name)
    }

    pub(crate) fn has_trait(&self, t: TraitId) -> bool {
        self.traits().contains(t)
    }
}
