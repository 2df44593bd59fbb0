//! What one query remembers of trees of one shape.
//!
//! Clouds are built from a few kinds of host, so many trees carry the same providers with
//! the same inventories, usage, traits and aggregates: the index keeps such trees in one
//! shape ([`super::packed_tree::ShapeId`]), comparing their packs word for word as they
//! change. Counting the unnumbered group's candidates in closed form reads nothing of a
//! tree but its pack and the sharing providers its aggregates link, so within one query
//! every tree of a shape has the same count: it is counted once and looked up after. The
//! same holds of the candidates a walk finds under a tree, up to the slots of its
//! providers: they are walked once and replayed for the trees alike after. A tree that
//! holds a sharing provider of its own is never remembered, since whether a linked sharing
//! provider is in the tree itself depends on the slots.
//!
//! Where trees are seldom alike (hosts each at a usage of its own), remembering pauses after
//! a trial that finds few alike, so that it costs such a query little, and is tried again
//! later in the query: the trees a scheduler filled first (the first in name order, when
//! weighers tie) are each at a usage of their own, while the many after them are alike.

use super::ids::ProviderId;
use super::provider_tree::ProviderIndex;

/// What a lookup found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// A tree of the same shape was remembered in this query: under this shape.
    Known(u32),
    /// None of its shape yet: the shape, to remember under.
    Unseen(u32),
    /// The tree has no shape to remember (not a root), or remembering pauses.
    Off,
}

/// Lookups in a trial: remembering pauses after one in which fewer than a quarter found
/// something remembered (where only a few hosts are at a usage of their own, most lookups
/// find one).
const TRIAL: u32 = 256;
/// Trees passed over while remembering pauses, before another trial.
const PAUSE: u32 = 1024;

/// What one query remembers of trees, by shape: a count ([`ShapeCounts`]), or the
/// candidates of a tree walked (`candidates::replay`).
#[derive(Debug)]
pub(crate) struct ByShape<T> {
    /// By shape id; sized on first use.
    values: Vec<Option<T>>,
    /// Lookups in the current trial, and how many of them found something.
    looked: u32,
    found: u32,
    /// Trees still to pass over before the next trial; 0 while remembering.
    paused: u32,
}

impl<T> Default for ByShape<T> {
    fn default() -> Self {
        ByShape {
            values: Vec::new(),
            looked: 0,
            found: 0,
            paused: 0,
        }
    }
}

/// One query's counts, by shape.
pub(crate) type ShapeCounts = ByShape<usize>;

impl<T> ByShape<T> {
    /// Whether a tree of `root`'s shape was remembered in this query.
    pub(crate) fn lookup(&mut self, index: &ProviderIndex, root: ProviderId) -> Lookup {
        if self.paused > 0 {
            self.paused -= 1;
            return Lookup::Off;
        }
        self.looked += 1;
        if self.looked == TRIAL {
            let few_alike = self.found * 4 < TRIAL;
            (self.looked, self.found) = (0, 0);
            if few_alike {
                // What was remembered so far stays good for the rest of the query.
                self.paused = PAUSE;
                return Lookup::Off;
            }
        }
        let Some(shape) = index.shape(root) else {
            return Lookup::Off;
        };
        if self.values.is_empty() {
            self.values.resize_with(index.shape_ids(), || None);
        }
        match self.values.get(shape.0 as usize) {
            Some(Some(_)) => {
                self.found += 1;
                Lookup::Known(shape.0)
            }
            _ => Lookup::Unseen(shape.0),
        }
    }

    /// What was remembered under a shape [`Self::lookup`] found known.
    pub(crate) fn get(&self, shape: u32) -> Option<&T> {
        self.values.get(shape as usize)?.as_ref()
    }

    /// Remembers `value` for the shape a tree's lookup gave, unless the tree holds a
    /// sharing provider: whether a sharing provider linked to a tree is in the tree itself
    /// depends on the slots, not on the shape.
    pub(crate) fn remember(
        &mut self,
        index: &ProviderIndex,
        shape: u32,
        root: ProviderId,
        value: T,
    ) {
        let tree = index.root_pack(root);
        if tree.ids().any(|p| index.sharing.binary_search(&p).is_ok()) {
            return;
        }
        if let Some(slot) = self.values.get_mut(shape as usize) {
            *slot = Some(value);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::placement::Inventory;
    use crate::placement::provider_tree::{ConsumerAllocations, ProviderRecord};

    /// `unlike` compute nodes each at a usage of its own, then `alike` at none, in name order.
    fn index(unlike: usize, alike: usize) -> ProviderIndex {
        let mut index = ProviderIndex::default();
        for i in 0..unlike + alike {
            let name = format!("cn{i:05}");
            index.upsert_provider(ProviderRecord {
                name: name.clone(),
                uuid: crate::placement::derived_provider_uuid(&name),
                placement_name: None,
                inventories: BTreeMap::from([(
                    "MEMORY_MB".to_string(),
                    Inventory {
                        total: 1 << 20,
                        ..Inventory::default()
                    },
                )]),
                ..ProviderRecord::default()
            });
            if i < unlike {
                index.upsert_allocations(
                    &name,
                    ConsumerAllocations {
                        consumer: name.clone(),
                        items: vec![(name.clone(), "MEMORY_MB".to_string(), 1 + i as i64)],
                    },
                );
            }
        }
        index
    }

    /// Looks every root up in name order as one query's count does, remembering a count for
    /// each tree not found; how many were found.
    fn found(index: &ProviderIndex) -> (usize, usize) {
        let mut shapes = ShapeCounts::default();
        let (mut found, mut passed_over) = (0, 0);
        for i in 0..index.len() {
            let root = index.id(&format!("cn{i:05}")).expect("a root");
            match shapes.lookup(index, root) {
                Lookup::Known(shape) => {
                    assert_eq!(shapes.get(shape), Some(&7));
                    found += 1;
                }
                Lookup::Unseen(shape) => shapes.remember(index, shape, root, 7),
                Lookup::Off => passed_over += 1,
            }
        }
        (found, passed_over)
    }

    /// The first trees each unlike the others (the ones a scheduler filled first) pause
    /// remembering, but it is tried again later and finds the many alike trees after them.
    #[test]
    fn remembering_resumes_after_a_trial_of_trees_unlike() {
        let (found, passed_over) = found(&index(300, 3000));
        // The trial fails (all unlike) at its 256th tree, which is passed over with the
        // next 1024; after them the rest are found.
        assert_eq!(passed_over, 1 + PAUSE as usize);
        assert!(found >= 3000 - PAUSE as usize - 64, "found {found}");
    }

    /// Trees all unlike: remembering pauses after each failed trial, so most trees are
    /// passed over without a lookup.
    #[test]
    fn trees_all_unlike_are_mostly_passed_over() {
        let (found, passed_over) = found(&index(3000, 0));
        assert_eq!(found, 0);
        // Three trials fail at their 256th tree; the first two pause for 1024 trees, the
        // last for the 184 left.
        assert_eq!(passed_over, 3 + 2 * PAUSE as usize + 184);
    }

    /// Trees all alike: every tree after the first is found.
    #[test]
    fn trees_all_alike_are_found_after_the_first() {
        assert_eq!(found(&index(0, 2000)), (1999, 0));
    }
}
