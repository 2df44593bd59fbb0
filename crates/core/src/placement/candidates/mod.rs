//! Allocation candidate search: Placement's `GET /allocation_candidates` over the index.
//!
//! The rules are Placement's (16.x):
//! - The unnumbered group may spread over the providers of one tree and the sharing
//!   providers linked to it; its required and forbidden traits are judged on the providers
//!   that supply resources in each candidate, together. `member_of` accepts a provider when
//!   it or the tree it serves is in the aggregates.
//! - A numbered group is satisfied by one provider, whose own traits and aggregates count.
//! - Groups are combined per tree ("anchor"); amounts landing on one provider are summed and
//!   must fit its capacity and max unit; `isolate` keeps numbered groups on distinct providers.
//! - `root_required` looks at the root's traits; `same_subtree` needs the providers of the
//!   named groups under one of them.
//!
//! Candidates come in a stable order: trees by root name, providers in tree order.
//!
//! A search resolves the query's groups once, then walks the trees in order, skipping those
//! that cannot anchor a candidate. Under each tree it lists every group's parts (the
//! providers, or sets of providers, that can serve the group) and either counts the tree's
//! candidates in closed form, where only the count is wanted and that is exact, or walks the
//! combinations of one part per group. Every step of work counts against a budget.
//!
//! - `group.rs`: the groups a query resolves to, and one group's share of a candidate.
//! - `facts.rs`: what a group asks of one provider.
//! - `search.rs`: what stays fixed over one query, and the buffers reused from tree to tree.
//! - `prune.rs`: which trees may anchor a candidate, from the index's postings.
//! - `walk.rs`: the walk over trees, and the visit of one tree.
//! - `parts.rs`: each group's parts under one tree.
//! - `closed_form.rs`: a tree's candidates counted without walking them.
//! - `combinations.rs`: a tree's combinations of parts, judged and walked with backtracking.
//! - `replay.rs`: a tree's candidates walked once and replayed for the trees alike;
//!   `walked.rs`: what is kept of them.
//! - `visit.rs`: what the walk reports candidates to.
//! - `gather.rs`: the answer gathered (on several threads for an unlimited search of many
//!   trees), and candidates counted per tree for explain.
//! - `answer.rs`: the candidates and the set they come in.
//! - `spare.rs`: candidate vectors kept from one search to the next.
//! - `budget.rs`: the budget of steps.
//! - `trees_alone.rs`: trees that can take one more of a request on their own providers.
//! - `tests/`: Placement's rules, and the ways of walking compared, on small hand-built trees.

mod answer;
mod budget;
pub mod choice;
mod closed_form;
mod combinations;
mod facts;
mod gather;
mod group;
mod parts;
mod prune;
mod replay;
mod search;
mod spare;
mod trees_alone;
mod visit;
mod walk;
mod walked;

#[cfg(test)]
mod tests;

pub use answer::{Candidate, CandidateSet, Mappings};
pub use budget::{BudgetExhausted, MAX_KEPT_BYTES, SEARCH_BUDGET, STOP_CHECK_EVERY, Stop};
pub(crate) use facts::{in_any, in_every_set};
pub(crate) use gather::candidates_per_tree;
pub(crate) use group::tree_root_of_uuid;
pub(crate) use search::sharing_by_aggregate;
pub use spare::SpareCandidates;
pub use trees_alone::trees_fitting_alone;

use crate::placement::provider_tree::ProviderIndex;
use crate::placement::query::CandidatesQuery;
use gather::search_candidates;
use search::{WALK_APART_FROM, prepare};

/// Counts the candidates of a query without keeping them. Bounded by [`SEARCH_BUDGET`]:
/// where that runs out, the count so far (use [`try_counted_candidates`] to know).
pub fn count_candidates(index: &ProviderIndex, query: &CandidatesQuery) -> usize {
    counted_candidates(index, query, 0).0
}

/// Runs a query over the index. Bounded by [`SEARCH_BUDGET`]: where that runs out, the
/// candidates found so far (use [`try_allocation_candidates`] to know).
pub fn allocation_candidates(index: &ProviderIndex, query: &CandidatesQuery) -> CandidateSet {
    counted_candidates(index, query, usize::MAX).1
}

/// Runs a query over the index within [`SEARCH_BUDGET`]. Where the budget runs out, a
/// query with a `limit` gets the candidates found so far (fewer than the limit, noted in
/// [`CandidateSet::exhausted`]), as Placement answers when it caps the candidates it
/// generates; a query without one gets the error.
pub fn try_allocation_candidates(
    index: &ProviderIndex,
    query: &CandidatesQuery,
) -> Result<CandidateSet, BudgetExhausted> {
    try_counted_candidates(index, query, usize::MAX).map(|(_, set)| set)
}

/// [`try_allocation_candidates`] that also ends when `stop` is asked for, answering then as
/// where the budget runs out: a server stops the search of a request that was cancelled
/// or ran past its deadline. The candidates are gathered in vectors from `spare`; give
/// the answer's back there once it is written.
pub fn try_allocation_candidates_until(
    index: &ProviderIndex,
    query: &CandidatesQuery,
    stop: &Stop,
    spare: &SpareCandidates,
) -> Result<CandidateSet, BudgetExhausted> {
    let mut search = prepare(index, query);
    search.stop = Some(stop.clone());
    search.spare = Some(spare);
    bounded(query, search_candidates(index, query, &search, usize::MAX)).map(|(_, set)| set)
}

/// [`try_allocation_candidates_until`] for a search that ends within `steps` steps, walked
/// on the calling thread alone, its pruning looking at no more than `16 * steps` providers
/// a need: a server answers such a search on the thread that read the request and moves a
/// longer one to a thread of its own. `None` when the search needs more, or was stopped:
/// asked again with the whole budget it answers the same, as neither the budget nor how
/// much is pruned changes an answer that ends within them. The vector it gathered in goes
/// back to `spare` then.
pub fn allocation_candidates_within(
    index: &ProviderIndex,
    query: &CandidatesQuery,
    stop: &Stop,
    spare: &SpareCandidates,
    steps: u64,
) -> Option<CandidateSet> {
    let mut search = prepare(index, query);
    search.stop = Some(stop.clone());
    search.spare = Some(spare);
    search.budget = steps.min(SEARCH_BUDGET);
    // Pruning looks at providers without spending steps; a look costs about an eighth of
    // a tree's walk, so it is kept within sixteen looks a step.
    search.max_prune_cost = usize::try_from(steps.saturating_mul(16)).unwrap_or(usize::MAX);
    search.threads = 1;
    let (_, set) = search_candidates(index, query, &search, usize::MAX);
    if set.exhausted.is_some() {
        spare.give_back(set.candidates);
        return None;
    }
    Some(set)
}

/// [`counted_candidates`] within [`SEARCH_BUDGET`], answering as
/// [`try_allocation_candidates`] does where the budget runs out.
pub fn try_counted_candidates(
    index: &ProviderIndex,
    query: &CandidatesQuery,
    keep: usize,
) -> Result<(usize, CandidateSet), BudgetExhausted> {
    bounded(query, counted_candidates(index, query, keep))
}

/// [`try_counted_candidates`] walked as `walk` says.
#[doc(hidden)]
pub fn try_counted_candidates_with(
    index: &ProviderIndex,
    query: &CandidatesQuery,
    keep: usize,
    walk: Walk,
) -> Result<(usize, CandidateSet), BudgetExhausted> {
    bounded(query, counted_candidates_with(index, query, keep, walk))
}

/// A search's answer as callers get it: an error where the budget ran out and the query
/// has no limit to answer with fewer candidates.
fn bounded(
    query: &CandidatesQuery,
    (count, set): (usize, CandidateSet),
) -> Result<(usize, CandidateSet), BudgetExhausted> {
    match set.exhausted {
        Some(e) if query.limit.is_none() => Err(e),
        _ => Ok((count, set)),
    }
}

/// [`counted_candidates`] with the tree walk chosen: with `prune`, trees that cannot serve
/// every group are skipped once the first `walk_before_pruning` trees are walked; with
/// `closed_form`, trees whose candidates are only counted are counted without walking their
/// combinations where that is exact. Tests and benchmarks compare it with walking every
/// tree and every combination.
#[doc(hidden)]
pub fn counted_candidates_walking(
    index: &ProviderIndex,
    query: &CandidatesQuery,
    keep: usize,
    prune: bool,
    walk_before_pruning: usize,
    closed_form: bool,
) -> (usize, CandidateSet) {
    let walk = Walk {
        prune,
        walk_before_pruning,
        closed_form,
        ..Walk::default()
    };
    counted_candidates_with(index, query, keep, walk)
}

/// How a search walks, for tests and benchmarks that compare the ways. The default is
/// the search callers get, except that it walks no trees before pruning (with a limit,
/// callers' searches walk 32 first) and walks on one thread (callers' unlimited searches
/// over many trees use every core).
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub struct Walk {
    /// Skip trees that cannot serve every group, after the first `walk_before_pruning`.
    pub prune: bool,
    pub walk_before_pruning: usize,
    /// Count trees in closed form where that is exact and only the count is wanted.
    pub closed_form: bool,
    /// Abandon prefixes of group parts no completion can use, instead of trying every
    /// combination.
    pub backtrack: bool,
    /// Steps the search may take.
    pub budget: u64,
    /// Threads an unlimited search of many trees may walk them on.
    pub threads: usize,
    /// Trees from which it does.
    pub walk_apart_from: usize,
    /// Bytes the candidates it keeps may hold.
    pub max_kept_bytes: usize,
    /// Whether trees alike one walked before replay its candidates.
    pub replay: bool,
}

impl Default for Walk {
    fn default() -> Self {
        Walk {
            prune: true,
            walk_before_pruning: 0,
            closed_form: true,
            backtrack: true,
            budget: SEARCH_BUDGET,
            threads: 1,
            walk_apart_from: WALK_APART_FROM,
            max_kept_bytes: MAX_KEPT_BYTES,
            replay: true,
        }
    }
}

/// [`counted_candidates`] walked as `walk` says.
#[doc(hidden)]
pub fn counted_candidates_with(
    index: &ProviderIndex,
    query: &CandidatesQuery,
    keep: usize,
    walk: Walk,
) -> (usize, CandidateSet) {
    let mut search = prepare(index, query);
    search.prune = walk.prune;
    search.walk_before_pruning = walk.walk_before_pruning;
    search.closed_form = walk.closed_form;
    search.backtrack = walk.backtrack;
    search.budget = walk.budget;
    search.threads = walk.threads;
    search.walk_apart_from = walk.walk_apart_from;
    search.max_kept_bytes = walk.max_kept_bytes;
    search.replay &= walk.replay;
    search_candidates(index, query, &search, keep)
}

/// Counts every candidate (up to the query's limit) and keeps the first `keep` of them.
/// Bounded by [`SEARCH_BUDGET`]: where that runs out, what was found so far, with
/// [`CandidateSet::exhausted`] set.
pub fn counted_candidates(
    index: &ProviderIndex,
    query: &CandidatesQuery,
    keep: usize,
) -> (usize, CandidateSet) {
    search_candidates(index, query, &prepare(index, query), keep)
}
