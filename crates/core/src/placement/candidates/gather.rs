//! The visits that make a search's answer: `Gather` counts candidates and keeps the first
//! (an unlimited search of many trees walks them on several threads), and `PerTree` counts
//! them by the tree that anchors them, for explain.

use std::collections::{BTreeSet, HashSet};
use std::sync::{Mutex, PoisonError};

use super::answer::{Candidate, CandidateSet, one_provider_per_tree, only_sharing};
use super::budget::{BudgetExhausted, Stop};
use super::prune::SlotSet;
use super::search::{Search, prepare};
use super::visit::{Found, Visit};
use crate::placement::ids::ProviderId;
use crate::placement::provider_tree::ProviderIndex;
use crate::placement::query::CandidatesQuery;
use crate::runs::in_runs;

/// Candidates per tree, counted as the search counts them but whatever the limit.
pub(crate) struct TreeCounts {
    /// Roots whose tree anchors at least one candidate, with how many.
    pub(crate) per_tree: Vec<(ProviderId, usize)>,
    pub(crate) total: usize,
    /// Set when the search ran out of budget: the counts are those found before.
    pub(crate) exhausted: Option<BudgetExhausted>,
}

/// Counts candidates by the tree that anchors them (explain compares this with the trees
/// its funnel keeps). Below 1.29 only candidates with one provider per tree count, as there.
struct PerTree<'i> {
    index: &'i ProviderIndex,
    nested: bool,
    current: Option<ProviderId>,
    counts: Vec<(ProviderId, usize)>,
    total: usize,
}

impl PerTree<'_> {
    fn add(&mut self, n: usize) {
        let Some(anchor) = self.current else { return };
        // Counted in closed form, a wide query's candidates can pass any integer.
        self.total = self.total.saturating_add(n);
        match self.counts.last_mut() {
            Some((a, c)) if *a == anchor => *c = c.saturating_add(n),
            _ => self.counts.push((anchor, n)),
        }
    }
}

impl Visit for PerTree<'_> {
    fn wants_each(&self) -> bool {
        !self.nested
    }

    fn one(&mut self, found: &Found<'_>) -> Option<u64> {
        if self.nested || one_provider_per_tree(self.index, found.allocations) {
            self.add(1);
        }
        Some(0)
    }

    fn many(&mut self, n: usize) -> bool {
        self.add(n);
        true
    }

    fn tree(&mut self, anchor: ProviderId) {
        self.current = Some(anchor);
    }
}

/// Every candidate of the query, limit aside, counted per anchoring tree within
/// [`SEARCH_BUDGET`].
pub(crate) fn candidates_per_tree(
    index: &ProviderIndex,
    query: &CandidatesQuery,
    stop: Option<&Stop>,
) -> TreeCounts {
    let mut search = prepare(index, query);
    search.stop = stop.cloned();
    search.limit = None;
    search.walk_before_pruning = 0;
    let mut per_tree = PerTree {
        index,
        nested: query.microversion.at_least(29),
        current: None,
        counts: Vec::new(),
        total: 0,
    };
    let ran_out = search.run(&mut per_tree);
    TreeCounts {
        exhausted: ran_out.then_some(BudgetExhausted {
            budget: search.budget,
            found: per_tree.total,
        }),
        per_tree: per_tree.counts,
        total: per_tree.total,
    }
}

/// Counts the candidates the search reports, keeps the first few, and below 1.29 keeps
/// only those with one provider per tree and notes every provider they use.
struct Gather<'i, 'r> {
    index: &'i ProviderIndex,
    nested: bool,
    count: usize,
    used_by_any: BTreeSet<ProviderId>,
    keep: usize,
    limit: usize,
    result: &'r mut CandidateSet,
    /// Bytes the candidates kept so far hold, and how many they may.
    kept_bytes: usize,
    max_bytes: usize,
    /// Where one of several runs notes the positions of the candidates it keeps that are
    /// made only of sharing providers: another run may keep them too.
    sharing_only: Option<Vec<usize>>,
}

impl Visit for Gather<'_, '_> {
    fn wants_each(&self) -> bool {
        !self.nested || self.result.candidates.len() < self.keep
    }

    fn one(&mut self, found: &Found<'_>) -> Option<u64> {
        let mut cost = 0;
        if self.nested || one_provider_per_tree(self.index, found.allocations) {
            self.count += 1;
            if !self.nested {
                self.used_by_any
                    .extend(found.allocations.iter().map(|(p, _, _)| *p));
            }
            if self.result.candidates.len() < self.keep {
                let candidate = found.candidate();
                // Keeping a candidate costs steps in proportion to its size, and its bytes
                // count against the search's memory: past [`MAX_KEPT_BYTES`] the search
                // ends as one whose steps ran out.
                let mapped = candidate.mappings.providers();
                cost = (candidate.allocations.len() + mapped) as u64;
                self.kept_bytes = self.kept_bytes.saturating_add(candidate.bytes());
                if self.kept_bytes > self.max_bytes {
                    cost = u64::MAX;
                }
                if let Some(sharing_only) = &mut self.sharing_only
                    && only_sharing(self.index, &candidate.allocations)
                {
                    sharing_only.push(self.result.candidates.len());
                }
                self.result.candidates.push(candidate);
            }
        }
        (!self.nested || self.count < self.limit).then_some(cost)
    }

    fn many(&mut self, n: usize) -> bool {
        self.count = self.count.saturating_add(n);
        self.count < self.limit
    }
}

pub(super) fn search_candidates(
    index: &ProviderIndex,
    query: &CandidatesQuery,
    search: &Search<'_>,
    keep: usize,
) -> (usize, CandidateSet) {
    let nested = query.microversion.at_least(29);
    let mut result = CandidateSet {
        // A candidate's mappings name each group by its place among the search's groups.
        suffixes: search.groups.iter().map(|g| g.suffix.clone()).collect(),
        requested_classes: query
            .groups
            .values()
            .flat_map(|g| g.resources.keys())
            .filter_map(|c| index.classes.get(c))
            .collect(),
        ..Default::default()
    };
    let (count, used_by_any, ran_out) = match gathered_in_parallel(index, query, search, keep) {
        Some((count, used_by_any, candidates)) => {
            result.candidates = candidates;
            (count, used_by_any, false)
        }
        None => {
            if let Some(spare) = search.spare {
                result.candidates = spare.take();
            }
            // Below 1.29 Placement summarises every provider any candidate uses (in the kept
            // trees), so the search runs to the end even with a limit.
            let mut gather = Gather {
                index,
                nested,
                count: 0,
                used_by_any: BTreeSet::new(),
                keep: keep.min(query.limit.unwrap_or(usize::MAX)),
                limit: query.limit.unwrap_or(usize::MAX),
                result: &mut result,
                kept_bytes: 0,
                max_bytes: search.max_kept_bytes,
                sharing_only: None,
            };
            let ran_out = search.run(&mut gather);
            let count = gather.count.min(gather.limit);
            (count, std::mem::take(&mut gather.used_by_any), ran_out)
        }
    };
    if !nested {
        result.summary_only = Some(used_by_any);
    }
    if ran_out {
        result.exhausted = Some(BudgetExhausted {
            budget: search.budget,
            found: count,
        });
    }
    result.summary_trees = trees_of(index, &result.candidates);
    (count, result)
}

/// The trees candidates take from, by root name. Marked one bit a slot, each provider's
/// root read from the tree order's table rather than from the provider: an unlimited
/// answer names a few providers for each of tens of thousands of candidates.
pub(super) fn trees_of(index: &ProviderIndex, candidates: &[Candidate]) -> Vec<ProviderId> {
    let root_of = &index.tree_order().root;
    let mut marked = SlotSet::new(index.slots.len());
    for (p, _, _) in candidates.iter().flat_map(|c| c.allocations.iter()) {
        if let Some(Some(r)) = root_of.get(p.index()) {
            marked.insert(*r);
        }
    }
    let order = index.root_order();
    if marked.len() * 16 >= order.roots.len() {
        // Many of the trees: the roots in name order, filtered.
        order
            .roots
            .iter()
            .copied()
            .filter(|r| marked.contains(*r))
            .collect()
    } else {
        let mut trees: Vec<ProviderId> = marked.ids().collect();
        trees.sort_unstable_by_key(|r| order.rank[r.index()]);
        trees
    }
}

/// Every candidate of a search without a limit, its trees cut into runs walked on threads
/// of their own and the runs' candidates joined in order: the count, the providers used,
/// and the candidates, as walking them on one thread gives. A candidate made only of
/// sharing providers counts once across trees, so of those the runs repeat, the first is
/// kept. `None` where one walk is needed: a limit, a caller keeping only some, few trees,
/// or a budget that runs out (so that the error names what one walk found).
pub(super) fn gathered_in_parallel(
    index: &ProviderIndex,
    query: &CandidatesQuery,
    search: &Search<'_>,
    keep: usize,
) -> Option<(usize, BTreeSet<ProviderId>, Vec<Candidate>)> {
    let nested = query.microversion.at_least(29);
    // Below 1.29 a limit does not stop the search (`search.limit` is unset) but still cuts
    // the answer: walked once too.
    if search.threads < 2
        || query.limit.is_some()
        || search.limit.is_some()
        || keep != usize::MAX
        || index.roots.len() < search.walk_apart_from
        || search.groups.iter().any(|g| g.impossible)
        || search.root_required.is_none()
    {
        return None;
    }
    let anchors = search.anchors_in_order();
    if anchors.len() < search.walk_apart_from.max(2) {
        return None;
    }
    // Each run gets its share of the budget and of the memory, so that the runs together
    // hold no more candidates than one walk may: a run that spends its share sends the
    // search back to one walk (which frees them first). The first run gathers into the
    // vector with the most room, as the others' candidates are appended to its own.
    let share = search.budget / search.threads as u64;
    let runs: Vec<(&[ProviderId], Mutex<Vec<Candidate>>)> = anchors
        .chunks(anchors.len().div_ceil(search.threads))
        .map(|run| {
            (
                run,
                Mutex::new(search.spare.map(|s| s.take()).unwrap_or_default()),
            )
        })
        .collect();
    let found = in_runs(&runs, runs.len(), |run| {
        let (run, room) = &run[0];
        let mut part = CandidateSet {
            candidates: std::mem::take(&mut *room.lock().unwrap_or_else(PoisonError::into_inner)),
            ..CandidateSet::default()
        };
        let mut gather = Gather {
            index,
            nested,
            count: 0,
            used_by_any: BTreeSet::new(),
            keep,
            limit: usize::MAX,
            result: &mut part,
            kept_bytes: 0,
            max_bytes: search.max_kept_bytes / search.threads,
            sharing_only: (!index.sharing.is_empty()).then(Vec::new),
        };
        let steps = search.run_over(run, &mut gather, share);
        RunFound {
            steps,
            count: gather.count,
            used: std::mem::take(&mut gather.used_by_any),
            sharing_only: gather.sharing_only.take().unwrap_or_default(),
            candidates: part.candidates,
        }
    });
    if found.iter().any(|run| run.steps.is_none()) {
        for run in found {
            give_back(search, run.candidates);
        }
        return None;
    }
    let mut steps = 0u64;
    let mut count = 0usize;
    let mut used_by_any = BTreeSet::new();
    let mut candidates: Option<Vec<Candidate>> = None;
    let mut sharing_seen: HashSet<Candidate> = HashSet::new();
    for run in found {
        let mut found = run.candidates;
        steps = steps.saturating_add(run.steps.unwrap_or_default());
        count = count.saturating_add(run.count);
        // A repeat's providers are the first one's: `used` needs no correction.
        used_by_any.extend(run.used);
        let repeats: Vec<usize> = run
            .sharing_only
            .into_iter()
            .filter(|&i| !sharing_seen.insert(found[i].clone()))
            .collect();
        if !repeats.is_empty() {
            // Counted by its run (every candidate kept was counted), not by one walk.
            count -= repeats.len();
            let mut at = 0;
            let mut next = repeats.iter().peekable();
            found.retain(|_| {
                let repeat = next.next_if_eq(&&at).is_some();
                at += 1;
                !repeat
            });
        }
        match &mut candidates {
            None => candidates = Some(found),
            Some(all) => {
                all.append(&mut found);
                give_back(search, found);
            }
        }
    }
    let candidates = candidates.unwrap_or_default();
    if steps > search.budget {
        give_back(search, candidates);
        return None;
    }
    Some((count, used_by_any, candidates))
}

/// What one run of [`gathered_in_parallel`] found: its steps (`None` where its share ran
/// out), its count, the providers its candidates use, and the candidates it kept with the
/// positions of those made only of sharing providers.
struct RunFound {
    steps: Option<u64>,
    count: usize,
    used: BTreeSet<ProviderId>,
    candidates: Vec<Candidate>,
    sharing_only: Vec<usize>,
}

/// Keeps a vector's room for later searches, where the search has somewhere to keep it.
fn give_back(search: &Search<'_>, candidates: Vec<Candidate>) {
    if let Some(spare) = search.spare {
        spare.give_back(candidates);
    }
}
