//! What a search answers: candidates and the set they come in, and what a candidate's
//! allocations are made of (one provider per tree, only sharing providers).

use std::collections::BTreeSet;

use smallvec::SmallVec;

use super::budget::BudgetExhausted;
use crate::placement::ids::{ClassId, ProviderId};
use crate::placement::provider_tree::ProviderIndex;

/// A candidate's group suffixes, each with the providers serving it.
pub(crate) type Mappings = SmallVec<[(String, SmallVec<[ProviderId; 4]>); 1]>;

/// One candidate: amounts per provider and class, and which providers serve each group.
/// Most candidates take a few classes from a few providers for one or two groups; those
/// are held in place, so an unlimited search of tens of thousands of candidates does not
/// allocate for each of them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Candidate {
    /// (provider, class, amount), sorted by provider then class.
    pub allocations: SmallVec<[(ProviderId, ClassId, i64); 4]>,
    /// Group suffix → providers serving it, sorted.
    pub mappings: Mappings,
}

impl Candidate {
    /// The bytes the candidate holds, its heap included (as allocated: at least 16 bytes a
    /// block; nothing for what is held in place).
    pub fn bytes(&self) -> usize {
        fn block(n: usize) -> usize {
            if n == 0 { 0 } else { n.max(16) }
        }
        fn spilled<A: smallvec::Array>(v: &SmallVec<A>) -> usize {
            if v.spilled() {
                block(v.capacity() * std::mem::size_of::<A::Item>())
            } else {
                0
            }
        }
        std::mem::size_of::<Candidate>()
            + spilled(&self.allocations)
            + spilled(&self.mappings)
            + self
                .mappings
                .iter()
                .map(|(suffix, ps)| block(suffix.capacity()) + spilled(ps))
                .sum::<usize>()
    }
}

/// The whole answer, before it is shaped into JSON.
#[derive(Debug, Clone, Default)]
pub struct CandidateSet {
    pub candidates: Vec<Candidate>,
    /// Trees (roots) whose providers are summarised.
    pub summary_trees: Vec<ProviderId>,
    /// When set (microversions before 1.29), only these providers are summarised.
    pub summary_only: Option<BTreeSet<ProviderId>>,
    /// Resource classes the request names (summaries before 1.27 show only these).
    pub requested_classes: BTreeSet<ClassId>,
    /// Set when the search ran out of budget under a `limit`: the candidates are those
    /// found before it did, fewer than the limit.
    pub exhausted: Option<BudgetExhausted>,
}

impl CandidateSet {
    /// A candidate as (provider name, class, amount) triples.
    pub fn named(&self, index: &ProviderIndex, c: &Candidate) -> Vec<(String, String, i64)> {
        c.allocations
            .iter()
            .map(|(p, cl, a)| {
                (
                    index.get(*p).name.to_string(),
                    index.classes.name(*cl).to_string(),
                    *a,
                )
            })
            .collect()
    }
}

/// Whether a candidate's allocations use at most one provider per tree (all microversions
/// before 1.29 allow).
pub(super) fn one_provider_per_tree(
    index: &ProviderIndex,
    allocations: &[(ProviderId, ClassId, i64)],
) -> bool {
    let mut providers: SmallVec<[ProviderId; 8]> = allocations.iter().map(|(p, _, _)| *p).collect();
    providers.dedup();
    let mut roots: SmallVec<[Option<ProviderId>; 8]> =
        providers.iter().map(|p| index.get(*p).root).collect();
    roots.sort_unstable();
    roots.dedup();
    providers.len() == roots.len()
}

/// Whether a candidate is made only of sharing providers: such a candidate repeats under
/// every tree they serve, and counts once.
pub(super) fn only_sharing(
    index: &ProviderIndex,
    allocations: &[(ProviderId, ClassId, i64)],
) -> bool {
    allocations
        .iter()
        .all(|(p, _, _)| index.sharing.binary_search(p).is_ok())
}
