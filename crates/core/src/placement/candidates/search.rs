//! One query's search: what stays fixed over the query ([`Search`], made by [`prepare`]),
//! the buffers reused from tree to tree ([`Scratch`]), and what it reads of a provider.

use std::collections::HashSet;

use smallvec::SmallVec;

use super::answer::Candidate;
use super::budget::{MAX_KEPT_BYTES, SEARCH_BUDGET, Steps, Stop};
use super::facts::{Facts, SharedFacts, has_any};
use super::group::{Group, GroupPart, resolve_group};
use super::spare::SpareCandidates;
use super::walked::Walked;
use crate::placement::ids::{ClassId, ProviderId, SortedIds, TraitId};
use crate::placement::provider_tree::ProviderIndex;
use crate::placement::query::{CandidatesQuery, GroupPolicy};
use crate::placement::tree_shapes::{ByShape, ShapeCounts};

/// What stays fixed over one query: the index, resolved groups and precomputed links.
pub(super) struct Search<'a> {
    pub(super) index: &'a ProviderIndex,
    pub(super) groups: Vec<Group>,
    /// root_required and root_forbidden, interned; `None` when a required one is unknown.
    pub(super) root_required: Option<Vec<TraitId>>,
    pub(super) root_forbidden: Vec<TraitId>,
    /// Sharing providers by aggregate.
    pub(super) sharing_by_aggregate: Vec<SmallVec<[ProviderId; 2]>>,
    /// Per sharing provider (as in the index's list), how the unnumbered group may use it
    /// when it is linked to a tree; `None` when it may not.
    pub(super) spread_sharing: Vec<Option<SharedFacts>>,
    pub(super) granular: usize,
    pub(super) isolate: bool,
    pub(super) subtree_groups: Vec<Vec<usize>>,
    /// Whether to skip trees that cannot serve every group before walking them.
    pub(super) prune: bool,
    /// Trees walked in name order before pruning: with a limit, the first trees often
    /// give enough candidates, and pruning would cost more than it saves.
    pub(super) walk_before_pruning: usize,
    /// The query's limit, when it stops the search (1.29+).
    pub(super) limit: Option<usize>,
    /// Whether trees whose candidates the caller only counts are counted in closed form
    /// where that is exact.
    pub(super) closed_form: bool,
    /// Whether a tree alike one walked before in the query replays its candidates
    /// (`replay`): off where a limit ends the search, and with same_subtree or in_tree,
    /// which read more than the tree's pack.
    pub(super) replay: bool,
    /// Whether combinations of group parts are built group by group, abandoning a prefix
    /// that no choice for the remaining groups can complete (the same candidates in the
    /// same order as trying every combination, which is what it does otherwise).
    pub(super) backtrack: bool,
    /// Steps the search may take.
    pub(super) budget: u64,
    /// Most providers pruning may look at for one need (more are left to the walk): bounds
    /// a search tried on a few steps, whose pruning the steps do not count.
    pub(super) max_prune_cost: usize,
    /// Threads an unlimited search of many trees may walk them on.
    pub(super) threads: usize,
    /// Trees from which an unlimited search walks on several threads.
    pub(super) walk_apart_from: usize,
    /// Ends the search early when asked for.
    pub(super) stop: Option<Stop>,
    /// Bytes the candidates it keeps may hold (see [`MAX_KEPT_BYTES`]).
    pub(super) max_kept_bytes: usize,
    /// Where the vectors its candidates are gathered in come from, when the caller keeps
    /// them from one search to the next.
    pub(super) spare: Option<&'a SpareCandidates>,
}

/// Buffers reused from tree to tree.
#[derive(Default)]
pub(super) struct Scratch {
    pub(super) tree: Vec<ProviderId>,
    pub(super) linked: Vec<ProviderId>,
    pub(super) parts: Vec<Vec<GroupPart>>,
    pub(super) lists: Vec<Vec<ProviderId>>,
    /// Per list, each provider's required-set mask (closed-form counting).
    pub(super) masks: Vec<Vec<u16>>,
    pub(super) keep: Vec<bool>,
    pub(super) idx: Vec<usize>,
    pub(super) sums: Vec<(ProviderId, ClassId, i64)>,
    /// (provider, class, group, amount) each group's parts reach (counting numbered groups).
    pub(super) reach: Vec<(ProviderId, ClassId, usize, i64)>,
    /// Per subset of numbered groups, the ways they take distinct providers.
    pub(super) ways: Vec<u128>,
    /// Candidates made only of sharing providers repeat under every tree those providers
    /// serve; they count once.
    pub(super) sharing_seen: HashSet<Candidate>,
    pub(super) steps: Steps,
    /// Per group after the current prefix, the providers of its parts that still fit
    /// (isolate's matching), and which group each provider is matched to.
    pub(super) options: Vec<Vec<ProviderId>>,
    pub(super) matched: Vec<(ProviderId, usize)>,
    pub(super) ancestors: Vec<ProviderId>,
    pub(super) subtree_providers: Vec<ProviderId>,
    /// Per group, the position of its chosen part in its list of open parts.
    pub(super) pos: Vec<usize>,
    /// Row k, group j (at `k * groups + j`): indices of group j's parts still open once
    /// the first k groups have chosen theirs.
    pub(super) viable: Vec<Vec<u32>>,
    pub(super) subtree_facts: Vec<SubtreeFacts>,
    /// Counts of trees counted in closed form, for the trees alike that follow.
    pub(super) shapes: ShapeCounts,
    /// Candidates of trees walked, for the trees alike that follow (`replay`).
    pub(super) walks: ByShape<Walked>,
    /// Whether the walk of the current tree met a candidate made only of sharing providers.
    pub(super) met_only_sharing: bool,
    /// A replayed candidate's mappings.
    pub(super) replayed: Vec<(usize, SmallVec<[ProviderId; 4]>)>,
    /// Candidates kept in `walks`.
    pub(super) kept_for_replay: usize,
}

/// One same_subtree set after some of its groups have chosen their parts.
#[derive(Default)]
pub(super) struct SubtreeFacts {
    /// The chosen parts' providers, sorted.
    pub(super) chosen: Vec<ProviderId>,
    /// Their common ancestors (or selves), nearest first.
    pub(super) common: Vec<ProviderId>,
    /// Providers of the parts still open to the set's later groups, sorted.
    pub(super) later: Vec<ProviderId>,
}

impl<'a> Search<'a> {
    pub(super) fn root(&self, p: ProviderId) -> Option<ProviderId> {
        self.index.get(p).root
    }

    pub(super) fn fits(&self, p: ProviderId, class: ClassId, amount: i64) -> bool {
        self.index.get(p).fits(class, amount)
    }

    /// How the unnumbered group may use a linked sharing provider; `None` when it may not.
    pub(super) fn shared_facts(&self, s: ProviderId) -> Option<&SharedFacts> {
        let k = self.index.sharing.binary_search(&s).ok()?;
        self.spread_sharing[k].as_ref()
    }

    /// Whether root_required and root_forbidden accept a root with these traits.
    pub(super) fn anchor_allowed(&self, root_traits: SortedIds<'_, TraitId>) -> bool {
        self.root_required
            .as_ref()
            .is_some_and(|req| req.iter().all(|t| root_traits.contains(*t)))
            && !has_any(root_traits, &self.root_forbidden)
    }

    /// A provider's root and facts. A root's come from its tree's pack, which the visit
    /// of the tree reads next; others' from the provider itself (finding a provider inside
    /// its tree's pack costs more memory reads than its own allocations).
    pub(super) fn facts(&self, p: ProviderId) -> Option<(ProviderId, Facts<'a>)> {
        if let Some(tree) = self.index.packed(p) {
            return Some((p, Facts::Packed(tree, 0)));
        }
        let prov = self.index.get(p);
        Some((prov.root?, Facts::Index(prov)))
    }

    /// Whether `a` is `p` or above it.
    pub(super) fn is_ancestor_or_self(&self, a: ProviderId, p: ProviderId) -> bool {
        let mut cur = Some(p);
        // The index keeps trees acyclic; the bound only guards the walk.
        for _ in 0..=self.index.len() {
            match cur {
                Some(q) if q == a => return true,
                Some(q) => cur = self.index.get(q).parent,
                None => return false,
            }
        }
        false
    }

    /// Buffers for one walk, with the whole budget to spend.
    pub(super) fn scratch(&self) -> Scratch {
        Scratch {
            parts: vec![Vec::new(); self.groups.len()],
            steps: Steps::new(self.budget, self.stop.clone()),
            ..Default::default()
        }
    }
}

/// Sharing providers in well-formed trees, by aggregate index: a sharing provider serves
/// every tree with a provider in one of its aggregates.
pub(crate) fn sharing_by_aggregate(index: &ProviderIndex) -> Vec<SmallVec<[ProviderId; 2]>> {
    let mut out: Vec<SmallVec<[ProviderId; 2]>> = Vec::new();
    for &s in &index.sharing {
        if index.get(s).root.is_none() {
            continue;
        }
        for a in index.get(s).aggregates().iter() {
            let a = a.index();
            if out.len() <= a {
                out.resize_with(a + 1, SmallVec::new);
            }
            out[a].push(s);
        }
    }
    out
}

/// The search a query asks for, as callers get it.
pub(super) fn prepare<'a>(index: &'a ProviderIndex, query: &CandidatesQuery) -> Search<'a> {
    let groups: Vec<Group> = query
        .groups
        .values()
        .map(|g| resolve_group(index, g))
        .collect();
    let root_required = query
        .root_required
        .iter()
        .map(|t| index.traits.get(t))
        .collect();
    let root_forbidden = query
        .root_forbidden
        .iter()
        .filter_map(|t| index.traits.get(t))
        .collect();
    let spread_sharing = match groups.iter().find(|g| !g.same_provider) {
        Some(g) => index
            .sharing
            .iter()
            .map(|s| SharedFacts::judge(g, index.get(*s)))
            .collect(),
        None => Vec::new(),
    };
    let subtree_groups: Vec<Vec<usize>> = query
        .same_subtrees
        .iter()
        .map(|set| {
            groups
                .iter()
                .enumerate()
                .filter(|(_, g)| set.contains(&g.suffix))
                .map(|(i, _)| i)
                .collect()
        })
        .collect();
    // Below 1.29 the search runs to the end whatever the limit (see counted_candidates).
    let limited = query.limit.is_some() && query.microversion.at_least(29);
    // Replay pays for keeping a tree's candidates only over many trees: not where a limit
    // ends the search after a few.
    let replay =
        !limited && subtree_groups.is_empty() && groups.iter().all(|g| g.in_tree_root.is_none());
    Search {
        index,
        granular: groups.iter().filter(|g| g.same_provider).count(),
        isolate: query.group_policy == Some(GroupPolicy::Isolate),
        groups,
        root_required,
        root_forbidden,
        sharing_by_aggregate: sharing_by_aggregate(index),
        spread_sharing,
        subtree_groups,
        prune: true,
        walk_before_pruning: if limited { 32 } else { 0 },
        limit: query.limit.filter(|_| limited),
        closed_form: true,
        replay,
        backtrack: true,
        budget: SEARCH_BUDGET,
        max_prune_cost: usize::MAX,
        threads: crate::runs::cores(),
        walk_apart_from: WALK_APART_FROM,
        stop: None,
        max_kept_bytes: MAX_KEPT_BYTES,
        spare: None,
    }
}

/// Trees an unlimited search walks on several threads from.
pub(super) const WALK_APART_FROM: usize = 2_048;
