//! What the search reports candidates to: the [`Visit`] a caller passes, and each candidate
//! as the walk finds it, before it is built ([`Found`]).

use smallvec::SmallVec;

use super::answer::{Candidate, Mappings};
use super::group::GroupPart;
use crate::placement::ids::{ClassId, ProviderId};

/// A candidate the search found, before it is built: its summed allocations and what
/// its mappings are made of. Counting needs only this; kept candidates are built from it.
pub(super) struct Found<'s> {
    /// (provider, class, amount), sorted by provider then class.
    pub(super) allocations: &'s [(ProviderId, ClassId, i64)],
    pub(super) made_of: MadeOf<'s>,
}

/// Where a found candidate's mappings come from.
pub(super) enum MadeOf<'s> {
    /// The group parts the walk combined, one per group.
    Parts(&'s [&'s GroupPart]),
    /// A replayed candidate's (`replay`): per group, by its place, the providers serving
    /// it.
    Mappings(&'s [(usize, SmallVec<[ProviderId; 4]>)]),
}

impl Found<'_> {
    pub(super) fn candidate(&self) -> Candidate {
        let mut mappings = Mappings::default();
        match self.made_of {
            MadeOf::Parts(parts) => {
                for (g, part) in parts.iter().enumerate() {
                    mappings.add(g as u32, &part.providers);
                }
            }
            MadeOf::Mappings(kept) => {
                for (g, providers) in kept {
                    mappings.add(*g as u32, providers);
                }
            }
        }
        Candidate {
            allocations: SmallVec::from_slice(self.allocations),
            mappings,
        }
    }
}

/// What the search reports candidates to.
pub(super) trait Visit {
    /// Whether each candidate is needed (to keep or judge it), not only how many there are.
    fn wants_each(&self) -> bool;
    /// One candidate; `None` to stop the search, else the steps it took to keep it.
    fn one(&mut self, found: &Found<'_>) -> Option<u64>;
    /// `n` candidates of one tree, counted without building them; false to stop.
    fn many(&mut self, n: usize) -> bool;
    /// The tree whose candidates come next (explain counts candidates per tree).
    fn tree(&mut self, _anchor: ProviderId) {}
}

/// Counts what passes through to `inner`, for the limit's pruning estimate.
pub(super) struct Tally<'v, V> {
    pub(super) inner: &'v mut V,
    pub(super) found: usize,
}

impl<V: Visit> Visit for Tally<'_, V> {
    fn wants_each(&self) -> bool {
        self.inner.wants_each()
    }

    fn one(&mut self, found: &Found<'_>) -> Option<u64> {
        self.found += 1;
        self.inner.one(found)
    }

    fn many(&mut self, n: usize) -> bool {
        self.found = self.found.saturating_add(n);
        self.inner.many(n)
    }

    fn tree(&mut self, anchor: ProviderId) {
        self.inner.tree(anchor);
    }
}
