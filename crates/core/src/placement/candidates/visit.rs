//! What the search reports candidates to: the [`Visit`] a caller passes, and each candidate
//! as the walk finds it, before it is built ([`Found`]).

use smallvec::SmallVec;

use super::answer::{Candidate, Mappings};
use super::group::{Group, GroupPart};
use crate::placement::ids::{ClassId, ProviderId};

/// A candidate the search found, before it is built: its summed allocations and the
/// group parts it combines. Counting needs only this; kept candidates are built from it.
pub(super) struct Found<'s> {
    /// (provider, class, amount), sorted by provider then class.
    pub(super) allocations: &'s [(ProviderId, ClassId, i64)],
    pub(super) groups: &'s [Group],
    pub(super) parts: &'s [&'s GroupPart],
}

impl Found<'_> {
    pub(super) fn candidate(&self) -> Candidate {
        let mut mappings = Mappings::with_capacity(self.parts.len());
        for (g, part) in self.groups.iter().zip(self.parts) {
            match mappings.iter_mut().find(|(s, _)| *s == g.suffix) {
                Some((_, ps)) => ps.extend(part.providers.iter().copied()),
                None => mappings.push((g.suffix.clone(), part.providers.clone())),
            }
        }
        for (_, ps) in &mut mappings {
            ps.sort_unstable();
            ps.dedup();
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
