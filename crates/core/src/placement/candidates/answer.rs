//! What a search answers: candidates and the set they come in, and what a candidate's
//! allocations are made of (one provider per tree, only sharing providers).

use std::collections::BTreeSet;

use smallvec::SmallVec;

use super::budget::BudgetExhausted;
use crate::placement::ids::{ClassId, ProviderId};
use crate::placement::provider_tree::ProviderIndex;

/// A candidate's mappings: each request group it serves, by the group's place among the
/// query's groups ([`CandidateSet::suffixes`]), with the providers serving it, sorted. The
/// providers of every group are held one after another, up to four of them and three
/// groups in place, so that most candidates hold no heap of their own and name no suffix
/// (an unlimited search keeps tens of thousands of them).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Mappings {
    providers: SmallVec<[ProviderId; 4]>,
    /// Each group's place and where its providers end in `providers`, in group order.
    groups: SmallVec<[(u32, u32); 3]>,
}

impl Mappings {
    /// Mappings of (group place, provider) pairs in any order, repeats dropped.
    pub(crate) fn from_pairs(pairs: &mut [(u32, ProviderId)]) -> Mappings {
        pairs.sort_unstable();
        let mut m = Mappings::default();
        for run in pairs.chunk_by(|a, b| a.0 == b.0) {
            let providers: SmallVec<[ProviderId; 8]> = run.iter().map(|(_, p)| *p).collect();
            m.add(run[0].0, &providers);
        }
        m
    }

    /// Adds the providers serving the group at `group`. Groups are added in order; one
    /// added again is merged with what it has, one out of order goes where it belongs.
    pub(crate) fn add(&mut self, group: u32, providers: &[ProviderId]) {
        let last = self.groups.last().map(|(g, _)| *g);
        if last.is_some_and(|last| last > group) {
            let mut pairs: SmallVec<[(u32, ProviderId); 8]> = self
                .iter()
                .flat_map(|(g, ps)| ps.iter().map(move |p| (g as u32, *p)))
                .chain(providers.iter().map(|p| (group, *p)))
                .collect();
            *self = Mappings::from_pairs(&mut pairs);
            return;
        }
        let mut serving: SmallVec<[ProviderId; 8]> = SmallVec::from_slice(providers);
        if last == Some(group) {
            self.groups.pop();
            let start = self.groups.last().map_or(0, |(_, end)| *end as usize);
            serving.extend(self.providers.drain(start..));
        }
        serving.sort_unstable();
        serving.dedup();
        self.providers.extend_from_slice(&serving);
        self.groups.push((group, self.providers.len() as u32));
    }

    /// Each group's place with the providers serving it, in group order.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &[ProviderId])> {
        let mut start = 0;
        self.groups.iter().map(move |&(group, end)| {
            let providers = &self.providers[start..end as usize];
            start = end as usize;
            (group as usize, providers)
        })
    }

    /// How many providers serve the groups, counted once a group.
    pub fn providers(&self) -> usize {
        self.providers.len()
    }

    /// Room for providers and for groups, in place or not (for tests).
    #[cfg(test)]
    pub(crate) fn capacities(&self) -> (usize, usize) {
        (self.providers.capacity(), self.groups.capacity())
    }

    /// Heap bytes held, as allocated (at least 16 bytes a block).
    fn spilled_bytes(&self) -> usize {
        spilled(&self.providers) + spilled(&self.groups)
    }
}

/// Heap bytes a vector spilled to, as allocated (at least 16 bytes a block); none for
/// what it holds in place.
fn spilled<A: smallvec::Array>(v: &SmallVec<A>) -> usize {
    if v.spilled() {
        (v.capacity() * std::mem::size_of::<A::Item>()).max(16)
    } else {
        0
    }
}

/// One candidate: amounts per provider and class, and which providers serve each group.
/// Most candidates take a few classes from a few providers for one or two groups; those
/// are held in place, so an unlimited search of tens of thousands of candidates does not
/// allocate for each of them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Candidate {
    /// (provider, class, amount), sorted by provider then class.
    pub allocations: SmallVec<[(ProviderId, ClassId, i64); 4]>,
    /// Group → providers serving it, sorted.
    pub mappings: Mappings,
}

impl Candidate {
    /// The bytes the candidate holds, its heap included (as allocated: at least 16 bytes a
    /// block; nothing for what is held in place).
    pub fn bytes(&self) -> usize {
        std::mem::size_of::<Candidate>()
            + spilled(&self.allocations)
            + self.mappings.spilled_bytes()
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
    /// The query's group suffixes in order (the unnumbered group's is empty): a
    /// candidate's mappings name their groups by place in it.
    pub suffixes: Vec<String>,
}

impl CandidateSet {
    /// A candidate's mappings by group suffix, in group order.
    pub fn mappings<'s>(
        &'s self,
        c: &'s Candidate,
    ) -> impl Iterator<Item = (&'s str, &'s [ProviderId])> {
        c.mappings
            .iter()
            .map(|(group, providers)| (self.suffix(group), providers))
    }

    /// The suffix of the group at this place (empty where there is none).
    pub fn suffix(&self, group: usize) -> &str {
        self.suffixes.get(group).map_or("", String::as_str)
    }

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
