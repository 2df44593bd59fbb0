//! Counts remembered for trees of one shape.
//!
//! Clouds are built from a few kinds of host, so many trees carry the same providers with
//! the same inventories, usage, traits and aggregates: the index keeps such trees in one
//! shape ([`super::packed_tree::ShapeId`]), comparing their packs word for word as they
//! change. Counting the unnumbered group's candidates in closed form reads nothing of a
//! tree but its pack and the sharing providers its aggregates link, so within one query
//! every tree of a shape has the same count: it is counted once and looked up after. A
//! tree that holds a sharing provider of its own is never remembered, since whether a
//! linked sharing provider is in the tree itself depends on the slots.
//!
//! Where trees are seldom alike (hosts each at a usage of its own), remembering stops after
//! a trial, so that it costs such a query little.

use super::ids::ProviderId;
use super::provider_tree::ProviderIndex;

/// What a lookup found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// A tree of the same shape was counted: this many candidates.
    Counted(usize),
    /// None of its shape yet: the shape, to remember the count under.
    Unseen(u32),
    /// The tree has no shape to remember (not a root).
    Off,
}

/// Lookups after which remembering stops unless at least half of them found a count.
const TRIAL: u32 = 256;

/// One query's counts, by shape.
#[derive(Debug, Default)]
pub(crate) struct ShapeCounts {
    /// By shape id: the count plus one, 0 where none is known. Sized on first use.
    counts: Vec<u32>,
    looked: u32,
    found: u32,
    off: bool,
}

impl ShapeCounts {
    /// The count of a tree of `root`'s shape, if one was counted in this query.
    pub(crate) fn lookup(&mut self, index: &ProviderIndex, root: ProviderId) -> Lookup {
        if self.off {
            return Lookup::Off;
        }
        self.looked += 1;
        if self.looked == TRIAL && self.found * 2 < TRIAL {
            self.off = true;
            self.counts = Vec::new();
            return Lookup::Off;
        }
        let Some(shape) = index.shape(root) else {
            return Lookup::Off;
        };
        if self.counts.is_empty() {
            self.counts = vec![0; index.shape_ids()];
        }
        match self.counts.get(shape.0 as usize) {
            Some(&n) if n > 0 => {
                self.found += 1;
                Lookup::Counted(n as usize - 1)
            }
            _ => Lookup::Unseen(shape.0),
        }
    }

    /// Remembers the count of a tree of the shape its lookup gave, unless the tree holds
    /// a sharing provider (or the count is beyond what is remembered).
    pub(crate) fn remember(
        &mut self,
        index: &ProviderIndex,
        shape: u32,
        root: ProviderId,
        n: usize,
    ) {
        let Ok(stored) = u32::try_from(n + 1) else {
            return;
        };
        let tree = index.root_pack(root);
        if tree.ids().any(|p| index.sharing.binary_search(&p).is_ok()) {
            return;
        }
        if let Some(slot) = self.counts.get_mut(shape as usize) {
            *slot = stored;
        }
    }
}
