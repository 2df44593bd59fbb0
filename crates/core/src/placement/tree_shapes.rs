//! Counts remembered for trees that are alike.
//!
//! Clouds are built from a few kinds of host, so many trees carry the same providers with
//! the same inventories, usage, traits and aggregates. Counting the unnumbered group's
//! candidates in closed form reads nothing of a tree but its pack and the sharing
//! providers its aggregates link, so within one query two trees whose packs agree in
//! everything but their providers' slots ([`PackedTree::same_shape`]) have the same count.
//! A tree that holds a sharing provider of its own is never remembered: whether a linked
//! sharing provider is in the tree itself depends on the slots.
//!
//! Where trees are seldom alike (hosts at different usage), remembering stops after a
//! trial, so that it costs a query little more than the hashing of its first trees.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use super::ids::ProviderId;
use super::packed_tree::PackedTree;
use super::provider_tree::ProviderIndex;

/// Lookups after which remembering stops unless at least half of them found a count.
const TRIAL: u32 = 256;
/// Shapes remembered at most in one query.
const MAX_SHAPES: usize = 4096;

/// What a lookup found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// A tree alike was counted: this many candidates.
    Counted(usize),
    /// None alike yet; the tree's shape hash, to remember its count under.
    Unseen(u64),
    /// Remembering is off for this query.
    Off,
}

/// One query's remembered counts, by shape.
#[derive(Debug, Default)]
pub(crate) struct ShapeCounts {
    /// Shape hash → a root of that shape and its tree's count.
    counts: HashMap<u64, (ProviderId, usize), BuildHasherDefault<ShapeHasher>>,
    looked: u32,
    found: u32,
    off: bool,
}

impl ShapeCounts {
    /// The count of a tree alike to `tree`, if one was counted in this query.
    pub(crate) fn lookup(&mut self, index: &ProviderIndex, tree: PackedTree<'_>) -> Lookup {
        if self.off {
            return Lookup::Off;
        }
        self.looked += 1;
        if self.looked == TRIAL && self.found * 2 < self.looked {
            self.off = true;
            self.counts = HashMap::default();
            return Lookup::Off;
        }
        let hash = tree.shape_hash();
        match self.counts.get(&hash) {
            Some(&(root, n)) if index.root_pack(root).same_shape(&tree) => {
                self.found += 1;
                Lookup::Counted(n)
            }
            // Another shape with the same hash holds the entry: this one is not remembered.
            Some(_) => Lookup::Off,
            None => Lookup::Unseen(hash),
        }
    }

    /// Remembers a tree's count under the hash its lookup gave, unless the tree holds a
    /// sharing provider.
    pub(crate) fn remember(
        &mut self,
        index: &ProviderIndex,
        hash: u64,
        root: ProviderId,
        n: usize,
    ) {
        if self.counts.len() >= MAX_SHAPES {
            return;
        }
        let tree = index.root_pack(root);
        if tree.ids().any(|p| index.sharing.binary_search(&p).is_ok()) {
            return;
        }
        self.counts.insert(hash, (root, n));
    }
}

/// The keys are hashes already: used as they are.
#[derive(Debug, Default)]
struct ShapeHasher(u64);

impl Hasher for ShapeHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 << 8) | u64::from(*b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}
