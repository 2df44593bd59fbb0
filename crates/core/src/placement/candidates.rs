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

use std::collections::{BTreeSet, HashSet};

use smallvec::{SmallVec, smallvec};

use super::ids::{AggregateId, ClassId, ProviderId, SortedIds, TraitId};
use super::packed_tree::PackedTree;
use super::provider::Provider;
use super::provider_tree::ProviderIndex;
use super::query::{CandidatesQuery, GroupPolicy, GroupQuery};
use super::tree_shapes::{Lookup, ShapeCounts};
use crate::runs::in_runs;

#[path = "trees_alone.rs"]
mod trees_alone;
pub use trees_alone::trees_fitting_alone;

/// Required any-of sets up to which a tree's candidates are counted in closed form.
const MAX_CLOSED_FORM_SETS: usize = 8;

/// Steps of work one search may take: trees visited, combinations of group parts tried,
/// parts of the unnumbered group built, options looked at when checking that a partial
/// combination can still be completed, and, per candidate kept, one per allocation and
/// mapped provider. Counting steps rather than time keeps answers deterministic. A search
/// that uses it all takes well under a second and a few hundred MiB; building all 720,000
/// candidates of a plain query over 100,000 compute nodes takes about 5 million.
pub const SEARCH_BUDGET: u64 = 10_000_000;

/// A search used its whole budget of work before it finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the allocation candidate search stopped at its budget of {budget} steps after finding \
     {found} candidates; ask with a limit, or with fewer or narrower request groups"
)]
pub struct BudgetExhausted {
    /// The budget, in steps (see [`SEARCH_BUDGET`]).
    pub budget: u64,
    /// Candidates found before it ran out.
    pub found: usize,
}

/// One candidate: amounts per provider and class, and which providers serve each group.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Candidate {
    /// (provider, class, amount), sorted by provider then class.
    pub allocations: Vec<(ProviderId, ClassId, i64)>,
    /// Group suffix → providers serving it, sorted.
    pub mappings: Vec<(String, Vec<ProviderId>)>,
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

/// One group's request in interned form. `None` in a filter means "names something the
/// index has never seen", which no provider can satisfy.
struct Group {
    suffix: String,
    same_provider: bool,
    resources: Vec<(ClassId, i64)>,
    /// The group can match nothing (an unknown class, trait or tree).
    impossible: bool,
    required: Vec<Vec<TraitId>>,
    forbidden: Vec<TraitId>,
    member_of: Option<Vec<Vec<AggregateId>>>,
    forbidden_aggregates: Vec<AggregateId>,
    /// The root of the tree `in_tree` names.
    in_tree_root: Option<ProviderId>,
}

/// One group's share of a candidate, as Placement's per-group allocation requests.
#[derive(Debug, Clone, Default)]
struct GroupPart {
    items: SmallVec<[(ProviderId, ClassId, i64); 4]>,
    providers: SmallVec<[ProviderId; 4]>,
}

/// Roots as one bit per provider slot: the trees that may anchor a candidate.
struct SlotSet {
    words: Vec<u64>,
}

impl SlotSet {
    fn new(slots: usize) -> Self {
        SlotSet {
            words: vec![0; slots.div_ceil(64)],
        }
    }

    fn insert(&mut self, id: ProviderId) {
        let i = id.index();
        self.words[i / 64] |= 1 << (i % 64);
    }

    fn contains(&self, id: ProviderId) -> bool {
        let i = id.index();
        self.words
            .get(i / 64)
            .is_some_and(|w| w & (1 << (i % 64)) != 0)
    }

    fn intersect(&mut self, other: &SlotSet) {
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a &= b;
        }
    }

    fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    fn ids(&self) -> impl Iterator<Item = ProviderId> + '_ {
        self.words.iter().enumerate().flat_map(|(i, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                (w != 0).then(|| {
                    let bit = w.trailing_zeros() as usize;
                    w &= w - 1;
                    ProviderId((i * 64 + bit) as u32)
                })
            })
        })
    }
}

/// Where the providers a group needs are listed: an inventory of a class, or one of a
/// set of traits.
#[derive(Clone, Copy)]
enum Posting<'q> {
    Class(ClassId),
    AnyTrait(&'q [TraitId]),
}

/// What a provider from a posting must pass to count for an anchor.
#[derive(Clone, Copy)]
enum NeedKind {
    /// A numbered group: the provider satisfies the whole group alone.
    Single,
    /// The unnumbered group: the provider can take this amount of this class.
    SpreadClass(ClassId, i64),
    /// The unnumbered group: the provider has a required trait and can take one of the
    /// group's classes (traits count only on providers that supply resources).
    SpreadTrait,
    /// root_required: the provider is a root with the trait.
    Root,
}

/// One thing every candidate under an anchor needs: a provider from a posting, in the
/// anchor's tree or, when it shares, linked to the tree through an aggregate.
struct Need<'q> {
    group: Option<&'q Group>,
    posting: Posting<'q>,
    kind: NeedKind,
}

/// What stays fixed over one query: the index, resolved groups and precomputed links.
struct Search<'a> {
    index: &'a ProviderIndex,
    groups: Vec<Group>,
    /// root_required and root_forbidden, interned; `None` when a required one is unknown.
    root_required: Option<Vec<TraitId>>,
    root_forbidden: Vec<TraitId>,
    /// Sharing providers by aggregate.
    sharing_by_aggregate: Vec<SmallVec<[ProviderId; 2]>>,
    /// Per sharing provider (as in the index's list), how the unnumbered group may use it
    /// when it is linked to a tree; `None` when it may not.
    spread_sharing: Vec<Option<SharedFacts>>,
    granular: usize,
    isolate: bool,
    subtree_groups: Vec<Vec<usize>>,
    /// Whether to skip trees that cannot serve every group before walking them.
    prune: bool,
    /// Trees walked in name order before pruning: with a limit, the first trees often
    /// give enough candidates, and pruning would cost more than it saves.
    walk_before_pruning: usize,
    /// The query's limit, when it stops the search (1.29+).
    limit: Option<usize>,
    /// Whether trees whose candidates the caller only counts are counted in closed form
    /// where that is exact.
    closed_form: bool,
    /// Whether combinations of group parts are built group by group, abandoning a prefix
    /// that no choice for the remaining groups can complete (the same candidates in the
    /// same order as trying every combination, which is what it does otherwise).
    backtrack: bool,
    /// Steps the search may take.
    budget: u64,
    /// Threads an unlimited search of many trees may walk them on.
    threads: usize,
    /// Trees from which an unlimited search walks on several threads.
    walk_apart_from: usize,
}

/// A candidate the search found, before it is built: its summed allocations and the
/// group parts it combines. Counting needs only this; kept candidates are built from it.
struct Found<'s> {
    /// (provider, class, amount), sorted by provider then class.
    allocations: &'s [(ProviderId, ClassId, i64)],
    groups: &'s [Group],
    parts: &'s [&'s GroupPart],
}

impl Found<'_> {
    fn candidate(&self) -> Candidate {
        let mut mappings: Vec<(String, Vec<ProviderId>)> = Vec::with_capacity(self.parts.len());
        for (g, part) in self.groups.iter().zip(self.parts) {
            match mappings.iter_mut().find(|(s, _)| *s == g.suffix) {
                Some((_, ps)) => ps.extend(part.providers.iter().copied()),
                None => mappings.push((g.suffix.clone(), part.providers.to_vec())),
            }
        }
        for (_, ps) in &mut mappings {
            ps.sort_unstable();
            ps.dedup();
        }
        Candidate {
            allocations: self.allocations.to_vec(),
            mappings,
        }
    }
}

/// What the search reports candidates to.
trait Visit {
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
struct Tally<'v, V> {
    inner: &'v mut V,
    found: usize,
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

/// Buffers reused from tree to tree.
#[derive(Default)]
struct Scratch {
    tree: Vec<ProviderId>,
    linked: Vec<ProviderId>,
    parts: Vec<Vec<GroupPart>>,
    lists: Vec<Vec<ProviderId>>,
    /// Per list, each provider's required-set mask (closed-form counting).
    masks: Vec<Vec<u16>>,
    keep: Vec<bool>,
    idx: Vec<usize>,
    sums: Vec<(ProviderId, ClassId, i64)>,
    /// (provider, class, group, amount) each group's parts reach (counting numbered groups).
    reach: Vec<(ProviderId, ClassId, usize, i64)>,
    /// Per subset of numbered groups, the ways they take distinct providers.
    ways: Vec<u128>,
    /// Candidates made only of sharing providers repeat under every tree those providers
    /// serve; they count once.
    sharing_seen: HashSet<Candidate>,
    steps: Steps,
    /// Per group after the current prefix, the providers of its parts that still fit
    /// (isolate's matching), and which group each provider is matched to.
    options: Vec<Vec<ProviderId>>,
    matched: Vec<(ProviderId, usize)>,
    ancestors: Vec<ProviderId>,
    subtree_providers: Vec<ProviderId>,
    /// Per group, the position of its chosen part in its list of open parts.
    pos: Vec<usize>,
    /// Row k, group j (at `k * groups + j`): indices of group j's parts still open once
    /// the first k groups have chosen theirs.
    viable: Vec<Vec<u32>>,
    subtree_facts: Vec<SubtreeFacts>,
    /// Counts of trees counted in closed form, for the trees alike that follow.
    shapes: ShapeCounts,
}

/// One same_subtree set after some of its groups have chosen their parts.
#[derive(Default)]
struct SubtreeFacts {
    /// The chosen parts' providers, sorted.
    chosen: Vec<ProviderId>,
    /// Their common ancestors (or selves), nearest first.
    common: Vec<ProviderId>,
    /// Providers of the parts still open to the set's later groups, sorted.
    later: Vec<ProviderId>,
}

/// What is left of a search's budget.
#[derive(Default)]
struct Steps {
    left: u64,
    /// Set when the search stopped for want of steps.
    ran_out: bool,
}

impl Steps {
    /// Takes `n` steps; false (and noted) when the budget has run out.
    fn spend(&mut self, n: u64) -> bool {
        if self.left < n {
            self.left = 0;
            self.ran_out = true;
            return false;
        }
        self.left -= n;
        true
    }
}

/// Whether sorted `aggregates` meet every any-of set.
pub(crate) fn in_every_set(
    aggregates: SortedIds<'_, AggregateId>,
    sets: &[Vec<AggregateId>],
) -> bool {
    sets.iter()
        .all(|any| any.iter().any(|a| aggregates.contains(*a)))
}

/// Whether sorted `aggregates` hold any of `wanted`.
pub(crate) fn in_any(aggregates: SortedIds<'_, AggregateId>, wanted: &[AggregateId]) -> bool {
    wanted.iter().any(|a| aggregates.contains(*a))
}

/// Whether sorted `traits` hold any of `wanted`.
fn has_any(traits: SortedIds<'_, TraitId>, wanted: &[TraitId]) -> bool {
    wanted.iter().any(|t| traits.contains(*t))
}

/// Bit i set: `traits` hold a trait of the group's required any-of set i.
fn required_mask(g: &Group, traits: SortedIds<'_, TraitId>) -> u16 {
    g.required
        .iter()
        .enumerate()
        .filter(|(_, any)| has_any(traits, any))
        .fold(0u16, |m, (i, _)| m | (1 << i))
}

/// Where the unnumbered group stands with a tree's root: whether the root is in the
/// group's aggregates, and whether it is in a forbidden one.
#[derive(Clone, Copy)]
struct SpreadAnchor {
    in_aggregates: bool,
    forbidden: bool,
}

impl SpreadAnchor {
    fn new(g: &Group, root_aggregates: SortedIds<'_, AggregateId>) -> Self {
        SpreadAnchor {
            in_aggregates: g
                .member_of
                .as_ref()
                .is_none_or(|m| in_every_set(root_aggregates, m)),
            forbidden: in_any(root_aggregates, &g.forbidden_aggregates),
        }
    }

    /// Whether the unnumbered group may take resources from a provider of the tree with
    /// these traits and aggregates. A sharing provider must also be in the group's
    /// aggregates itself.
    fn keeps(
        &self,
        g: &Group,
        traits: SortedIds<'_, TraitId>,
        aggregates: SortedIds<'_, AggregateId>,
    ) -> bool {
        (self.in_aggregates
            || g.member_of
                .as_ref()
                .is_none_or(|m| in_every_set(aggregates, m)))
            && !self.forbidden
            && !in_any(aggregates, &g.forbidden_aggregates)
            && !has_any(traits, &g.forbidden)
    }
}

/// How many ways there are to pick one provider from each list such that every required
/// set is covered, given each provider's [`required_mask`]: by inclusion–exclusion over the
/// sets S left uncovered, Σ_S (-1)^|S| Π_list (providers with no trait of any set in S).
/// `None` on overflow.
fn covered_choices(sets: usize, masks: &[Vec<u16>]) -> Option<usize> {
    let mut total: i128 = 0;
    for uncovered in 0u16..(1 << sets) {
        let mut product: i128 = 1;
        for list in masks {
            let n = list.iter().filter(|m| *m & uncovered == 0).count() as i128;
            product = product.checked_mul(n)?;
            if product == 0 {
                break;
            }
        }
        if uncovered.count_ones() % 2 == 0 {
            total = total.checked_add(product)?;
        } else {
            total = total.checked_sub(product)?;
        }
    }
    usize::try_from(total).ok()
}

/// What the unnumbered group makes of a sharing provider linked to a tree: the same for
/// every tree, so judged once per query.
struct SharedFacts {
    root: ProviderId,
    /// [`required_mask`] of its traits.
    mask: u16,
    /// Per requested class, whether its amount fits.
    fits: SmallVec<[bool; 4]>,
}

impl SharedFacts {
    /// Whether and how a tree's unnumbered group may take resources from a linked sharing
    /// provider. (A tree whose root is in a forbidden aggregate gets nothing at all; the
    /// tree's own judgement, [`SpreadAnchor`], says so.)
    fn judge(g: &Group, prov: &Provider) -> Option<SharedFacts> {
        let kept = g
            .member_of
            .as_ref()
            .is_none_or(|m| in_every_set(prov.aggregates(), m))
            && !in_any(prov.aggregates(), &g.forbidden_aggregates)
            && !has_any(prov.traits(), &g.forbidden);
        kept.then(|| SharedFacts {
            root: prov.root.unwrap_or(ProviderId(u32::MAX)),
            mask: required_mask(g, prov.traits()),
            fits: g.resources.iter().map(|(c, a)| prov.fits(*c, *a)).collect(),
        })
    }
}

/// What the search reads of one provider: from its tree's pack, or from the provider.
#[derive(Clone, Copy)]
enum Facts<'f> {
    Packed(PackedTree<'f>, usize),
    Index(&'f Provider),
}

impl<'f> Facts<'f> {
    fn traits(&self) -> SortedIds<'f, TraitId> {
        match self {
            Facts::Packed(t, i) => t.traits(*i),
            Facts::Index(p) => p.traits(),
        }
    }

    fn aggregates(&self) -> SortedIds<'f, AggregateId> {
        match self {
            Facts::Packed(t, i) => t.aggregates(*i),
            Facts::Index(p) => p.aggregates(),
        }
    }

    fn fits(&self, class: ClassId, amount: i64) -> bool {
        match self {
            Facts::Packed(t, i) => t.fits(*i, class, amount),
            Facts::Index(p) => p.fits(class, amount),
        }
    }
}

/// Whether one provider satisfies everything a numbered group asks of it.
fn single_ok(g: &Group, f: Facts<'_>) -> bool {
    g.resources.iter().all(|(c, a)| f.fits(*c, *a))
        && g.required.iter().all(|any| has_any(f.traits(), any))
        && !has_any(f.traits(), &g.forbidden)
        && g.member_of
            .as_ref()
            .is_none_or(|m| in_every_set(f.aggregates(), m))
        && !in_any(f.aggregates(), &g.forbidden_aggregates)
}

impl<'a> Search<'a> {
    fn root(&self, p: ProviderId) -> Option<ProviderId> {
        self.index.get(p).root
    }

    fn fits(&self, p: ProviderId, class: ClassId, amount: i64) -> bool {
        self.index.get(p).fits(class, amount)
    }

    /// How the unnumbered group may use a linked sharing provider; `None` when it may not.
    fn shared_facts(&self, s: ProviderId) -> Option<&SharedFacts> {
        let k = self.index.sharing.binary_search(&s).ok()?;
        self.spread_sharing[k].as_ref()
    }

    /// Whether root_required and root_forbidden accept a root with these traits.
    fn anchor_allowed(&self, root_traits: SortedIds<'_, TraitId>) -> bool {
        self.root_required
            .as_ref()
            .is_some_and(|req| req.iter().all(|t| root_traits.contains(*t)))
            && !has_any(root_traits, &self.root_forbidden)
    }

    /// A provider's root and facts. A root's come from its tree's pack, which the visit
    /// of the tree reads next; others' from the provider itself (finding a provider inside
    /// its tree's pack costs more memory reads than its own allocations).
    fn facts(&self, p: ProviderId) -> Option<(ProviderId, Facts<'a>)> {
        if let Some(tree) = self.index.packed(p) {
            return Some((p, Facts::Packed(tree, 0)));
        }
        let prov = self.index.get(p);
        Some((prov.root?, Facts::Index(prov)))
    }

    /// A numbered group's parts for one anchor: single providers of the tree, or sharing
    /// providers serving it, with everything the group asks.
    fn single_provider_parts(
        &self,
        g: &Group,
        anchor: ProviderId,
        (tree, pack): (&[ProviderId], PackedTree<'_>),
        linked: &[ProviderId],
        out: &mut Vec<GroupPart>,
    ) {
        // Placement finds no provider for a group without resources unless a required trait
        // or an aggregate narrows it down (a forbidden trait alone does not).
        if g.resources.is_empty() && g.required.is_empty() && g.member_of.is_none() {
            return;
        }
        // The tree's providers are read from its pack, which lists them in the same order.
        let in_tree = tree
            .iter()
            .enumerate()
            .map(|(i, &p)| (p, Some(anchor), Facts::Packed(pack, i)));
        let shared = linked
            .iter()
            .filter(|s| self.root(**s) != Some(anchor))
            .map(|&s| (s, self.root(s), Facts::Index(self.index.get(s))));
        for (p, root, facts) in in_tree.chain(shared) {
            // Placement ignores in_tree for a group without resources.
            if let Some(r) = g.in_tree_root
                && !g.resources.is_empty()
                && root != Some(r)
            {
                continue;
            }
            if single_ok(g, facts) {
                out.push(GroupPart {
                    items: g.resources.iter().map(|(c, a)| (p, *c, *a)).collect(),
                    providers: smallvec![p],
                });
            }
        }
    }

    /// The unnumbered group's providers for one anchor, one list per requested class: the
    /// providers of the tree or its sharing providers that can take the class's amount and
    /// pass the group's forbidden traits and aggregates. False when some list is empty.
    fn spread_lists(
        &self,
        g: &Group,
        anchor: ProviderId,
        tree: &[ProviderId],
        linked: &[ProviderId],
        lists: &mut Vec<Vec<ProviderId>>,
        keep: &mut Vec<bool>,
    ) -> bool {
        if g.in_tree_root.is_some_and(|r| r != anchor) {
            return false;
        }
        let spread = SpreadAnchor::new(g, self.index.get(anchor).aggregates());
        let keep_one = |p: ProviderId| {
            let prov = self.index.get(p);
            spread.keeps(g, prov.traits(), prov.aggregates())
        };
        // Sharing providers serve the group outside in_tree, and none when the root is in a
        // forbidden aggregate.
        let linked: &[ProviderId] = if g.in_tree_root.is_some() || spread.forbidden {
            &[]
        } else {
            linked
        };
        // Judged once per provider, not once per class.
        keep.clear();
        keep.extend(tree.iter().map(|&p| keep_one(p)));
        lists.resize_with(g.resources.len(), Vec::new);
        for (j, (list, (c, a))) in lists.iter_mut().zip(&g.resources).enumerate() {
            list.clear();
            for (&p, &k) in tree.iter().zip(keep.iter()) {
                if k && self.fits(p, *c, *a) {
                    list.push(p);
                }
            }
            for &s in linked {
                if self.shared_facts(s).is_some_and(|f| f.fits[j]) && !list.contains(&s) {
                    list.push(s);
                }
            }
            if list.is_empty() {
                return false;
            }
        }
        true
    }

    /// The unnumbered group's parts for one anchor: one provider per class from the tree
    /// or its sharing providers, with the traits of the chosen providers judged together.
    /// False when the budget ran out first.
    fn spread_parts(
        &self,
        g: &Group,
        lists: &[Vec<ProviderId>],
        out: &mut Vec<GroupPart>,
        steps: &mut Steps,
    ) -> bool {
        product(&lists[..g.resources.len()], |choice| {
            if !steps.spend(1) {
                return false;
            }
            let traits_ok = g.required.iter().all(|any| {
                choice.iter().any(|p| {
                    let prov = self.index.get(*p);
                    any.iter().any(|t| prov.has_trait(*t))
                })
            });
            if traits_ok {
                let items = choice
                    .iter()
                    .zip(&g.resources)
                    .map(|(p, (c, a))| (*p, *c, *a))
                    .collect();
                let mut providers: SmallVec<[ProviderId; 4]> = SmallVec::from_slice(choice);
                providers.sort_unstable();
                providers.dedup();
                out.push(GroupPart { items, providers });
            }
            true
        })
    }

    /// How many candidates the unnumbered group alone makes from its lists, without
    /// enumerating them; `None` where the count would not be exact.
    ///
    /// A candidate is one provider per class; the classes are distinct, so no amounts are
    /// summed and each provider already fits its amount. What remains is that every
    /// required any-of set has a trait on some chosen provider ([`covered_choices`]).
    fn spread_count(
        &self,
        g: &Group,
        lists: &[Vec<ProviderId>],
        masks: &mut Vec<Vec<u16>>,
    ) -> Option<usize> {
        // 2^k products: beyond a few sets the walk is cheaper.
        if g.required.len() > MAX_CLOSED_FORM_SETS {
            return None;
        }
        // Candidates made only of sharing providers count once across trees: where one is
        // possible, the walk deduplicates them.
        let sharing = |p: &ProviderId| self.index.sharing.binary_search(p).is_ok();
        if lists.iter().all(|l| l.iter().any(sharing)) {
            return None;
        }
        masks.resize_with(lists.len(), Vec::new);
        for (list, m) in lists.iter().zip(masks.iter_mut()) {
            m.clear();
            m.extend(
                list.iter()
                    .map(|&p| required_mask(g, self.index.get(p).traits())),
            );
        }
        covered_choices(g.required.len(), &masks[..lists.len()])
    }

    /// [`Self::spread_lists`] and [`Self::spread_count`] in one pass over a packed tree,
    /// reading only the pack and the (few, often read) sharing providers linked to it.
    fn packed_spread_count(
        &self,
        g: &Group,
        anchor: ProviderId,
        tree: PackedTree<'_>,
        linked: &[ProviderId],
        masks: &mut Vec<Vec<u16>>,
    ) -> Option<usize> {
        if g.required.len() > MAX_CLOSED_FORM_SETS {
            return None;
        }
        if g.in_tree_root.is_some_and(|r| r != anchor) {
            return Some(0);
        }
        let spread = SpreadAnchor::new(g, tree.aggregates(0));
        // A root in a forbidden aggregate keeps the group off the whole tree.
        if spread.forbidden {
            return Some(0);
        }
        let n = g.resources.len();
        masks.resize_with(n, Vec::new);
        for m in masks.iter_mut() {
            m.clear();
        }
        let mut sharing: SmallVec<[bool; 8]> = smallvec![false; n];
        for i in 0..tree.len() {
            let traits = tree.traits(i);
            if !spread.keeps(g, traits, tree.aggregates(i)) {
                continue;
            }
            let mask = required_mask(g, traits);
            let shares = self.index.sharing.binary_search(&tree.id(i)).is_ok();
            tree.each_fit(i, &g.resources, |j| {
                masks[j].push(mask);
                sharing[j] |= shares;
            });
        }
        // Sharing providers serve the group outside in_tree; one in the tree itself was
        // judged above.
        if g.in_tree_root.is_none() {
            for &s in linked {
                let Some(shared) = self.shared_facts(s) else {
                    continue;
                };
                if shared.root == anchor {
                    continue;
                }
                for (j, fits) in shared.fits.iter().enumerate() {
                    if *fits {
                        masks[j].push(shared.mask);
                        sharing[j] = true;
                    }
                }
            }
        }
        if masks[..n].iter().any(Vec::is_empty) {
            return Some(0);
        }
        if sharing.iter().all(|s| *s) {
            return None;
        }
        covered_choices(g.required.len(), &masks[..n])
    }

    /// Whether `a` is `p` or above it.
    fn is_ancestor_or_self(&self, a: ProviderId, p: ProviderId) -> bool {
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

    /// Combines one part per group into summed allocations in `sums`; false when the
    /// combination breaks group policy, same_subtree or capacity.
    fn combine(&self, parts: &[&GroupPart], sums: &mut Vec<(ProviderId, ClassId, i64)>) -> bool {
        if self.isolate {
            let mut distinct: SmallVec<[ProviderId; 8]> = self
                .groups
                .iter()
                .zip(parts)
                .filter(|(g, _)| g.same_provider)
                .flat_map(|(_, p)| p.providers.iter().copied())
                .collect();
            distinct.sort_unstable();
            distinct.dedup();
            if distinct.len() != self.granular {
                return false;
            }
        }
        for members in &self.subtree_groups {
            let mut providers: SmallVec<[ProviderId; 8]> = members
                .iter()
                .flat_map(|i| parts[*i].providers.iter().copied())
                .collect();
            providers.sort_unstable();
            providers.dedup();
            // Some provider of the set is at or above all of them.
            let top = providers.len() <= 1
                || providers
                    .iter()
                    .any(|t| providers.iter().all(|p| self.is_ancestor_or_self(*t, *p)));
            if !top {
                return false;
            }
        }
        sums.clear();
        sums.extend(parts.iter().flat_map(|p| p.items.iter().copied()));
        sums.sort_unstable_by_key(|(p, c, _)| (*p, *c));
        let mut summed = false;
        sums.dedup_by(|later, earlier| {
            if later.0 == earlier.0 && later.1 == earlier.1 {
                earlier.2 += later.2;
                summed = true;
                true
            } else {
                false
            }
        });
        // Every single amount already fits its provider (the parts check it); only sums
        // need checking again.
        if summed {
            for (p, c, amount) in sums.iter() {
                let prov = self.index.get(*p);
                let Some(inv) = prov.inventory(*c) else {
                    return false;
                };
                if prov.used(*c) + amount > inv.capacity() || *amount > inv.max_unit {
                    return false;
                }
            }
        }
        true
    }

    /// Whether a provider from a posting counts for some anchor, and if so, whether it
    /// also counts for the trees linked to it (when it is a sharing provider).
    fn need_admits(
        &self,
        need: &Need<'_>,
        p: ProviderId,
        root: ProviderId,
        f: Facts<'_>,
    ) -> Option<bool> {
        let spread_ok = |g: &Group| {
            !has_any(f.traits(), &g.forbidden) && !in_any(f.aggregates(), &g.forbidden_aggregates)
        };
        // Sharing providers serve other trees only outside in_tree and inside member_of.
        let spread_shares = |g: &Group| {
            g.in_tree_root.is_none()
                && g.member_of
                    .as_ref()
                    .is_none_or(|m| in_every_set(f.aggregates(), m))
        };
        match (need.kind, need.group) {
            (NeedKind::Single, Some(g)) => single_ok(g, f).then_some(true),
            (NeedKind::SpreadClass(c, a), Some(g)) => {
                (f.fits(c, a) && spread_ok(g)).then(|| spread_shares(g))
            }
            (NeedKind::SpreadTrait, Some(g)) => (g.resources.iter().any(|(c, a)| f.fits(*c, *a))
                && spread_ok(g))
            .then(|| spread_shares(g)),
            (NeedKind::Root, _) => (root == p).then_some(false),
            _ => Some(true),
        }
    }

    fn posting_lists<'p>(&'p self, posting: Posting<'p>) -> impl Iterator<Item = &'p [ProviderId]> {
        let (class, traits): (Option<ClassId>, &[TraitId]) = match posting {
            Posting::Class(c) => (Some(c), &[]),
            Posting::AnyTrait(ts) => (None, ts),
        };
        let members = |lists: &'p [Vec<ProviderId>], i: usize| -> &'p [ProviderId] {
            lists.get(i).map_or(&[], Vec::as_slice)
        };
        class
            .map(|c| members(&self.index.class_members, c.index()))
            .into_iter()
            .chain(
                traits
                    .iter()
                    .map(move |t| members(&self.index.trait_members, t.index())),
            )
    }

    fn posting_has(&self, posting: Posting<'_>, p: ProviderId) -> bool {
        let prov = self.index.get(p);
        match posting {
            Posting::Class(c) => prov.inventory(c).is_some(),
            Posting::AnyTrait(ts) => ts.iter().any(|t| prov.has_trait(*t)),
        }
    }

    /// Providers a need looks at: the posting lists, and the members of the aggregates of
    /// the sharing providers in them.
    fn need_cost(&self, need: &Need<'_>) -> usize {
        let listed: usize = self.posting_lists(need.posting).map(<[_]>::len).sum();
        let shared: usize = if matches!(need.kind, NeedKind::Root) {
            0
        } else {
            self.index
                .sharing
                .iter()
                .filter(|s| self.root(**s).is_some() && self.posting_has(need.posting, **s))
                .flat_map(|s| self.index.get(*s).aggregates().iter())
                .map(|a| {
                    self.index
                        .aggregate_members
                        .get(a.index())
                        .map_or(0, Vec::len)
                })
                .sum()
        };
        listed + shared
    }

    /// The roots under which a need can be met.
    fn need_anchors(&self, need: &Need<'_>) -> SlotSet {
        let mut set = SlotSet::new(self.index.slots.len());
        let mut shared_aggregates: Vec<AggregateId> = Vec::new();
        for list in self.posting_lists(need.posting) {
            for &p in list {
                let Some((root, facts)) = self.facts(p) else {
                    continue;
                };
                let Some(shares) = self.need_admits(need, p, root, facts) else {
                    continue;
                };
                set.insert(root);
                if shares && self.index.sharing.binary_search(&p).is_ok() {
                    shared_aggregates.extend(facts.aggregates().iter());
                }
            }
        }
        shared_aggregates.sort_unstable();
        shared_aggregates.dedup();
        // A sharing provider serves every tree with a provider in one of its aggregates.
        for a in shared_aggregates {
            for &q in self
                .index
                .aggregate_members
                .get(a.index())
                .into_iter()
                .flatten()
            {
                if let Some(r) = self.root(q) {
                    set.insert(r);
                }
            }
        }
        set
    }

    /// The roots that may anchor a candidate, or `None` when nothing cheap narrows them.
    /// Only needs every candidate has are used, so no candidate is lost: each group with
    /// resources needs a provider of each class (and, unnumbered, one with each required
    /// trait set) in the tree or shared with it. Needs that look at more providers than
    /// there are trees, or more than `max_cost`, are left to the tree walk.
    fn possible_anchors(&self, max_cost: usize) -> Option<SlotSet> {
        let mut needs: Vec<Need<'_>> = Vec::new();
        for g in &self.groups {
            if g.resources.is_empty() {
                continue;
            }
            let classes = g.resources.iter().map(|(c, _)| Posting::Class(*c));
            let traits = g.required.iter().map(|any| Posting::AnyTrait(any));
            if g.same_provider {
                // One provider has it all: the shortest posting finds them all.
                let shortest = classes
                    .chain(traits)
                    .min_by_key(|p| self.posting_lists(*p).map(<[_]>::len).sum::<usize>());
                needs.extend(shortest.map(|posting| Need {
                    group: Some(g),
                    posting,
                    kind: NeedKind::Single,
                }));
            } else {
                needs.extend(g.resources.iter().map(|(c, a)| Need {
                    group: Some(g),
                    posting: Posting::Class(*c),
                    kind: NeedKind::SpreadClass(*c, *a),
                }));
                needs.extend(traits.map(|posting| Need {
                    group: Some(g),
                    posting,
                    kind: NeedKind::SpreadTrait,
                }));
            }
        }
        if let Some(required) = &self.root_required {
            needs.extend(required.iter().map(|t| Need {
                group: None,
                posting: Posting::AnyTrait(std::slice::from_ref(t)),
                kind: NeedKind::Root,
            }));
        }
        // Below a thousand providers a posting costs microseconds, whatever the trees.
        let budget = self.index.roots.len().max(1024).min(max_cost);
        let mut needs: Vec<(usize, Need<'_>)> = needs
            .into_iter()
            .map(|n| (self.need_cost(&n), n))
            .filter(|(cost, _)| *cost <= budget)
            .collect();
        needs.sort_by_key(|(cost, _)| *cost);
        let mut anchors: Option<SlotSet> = None;
        for (_, need) in &needs {
            let set = self.need_anchors(need);
            match &mut anchors {
                None => anchors = Some(set),
                Some(a) => a.intersect(&set),
            }
            if anchors.as_ref().is_some_and(|a| a.len() == 0) {
                break;
            }
        }
        // The unnumbered group with in_tree is served in that tree only.
        for g in self.groups.iter().filter(|g| !g.same_provider) {
            if let Some(r) = g.in_tree_root {
                let mut only = SlotSet::new(self.index.slots.len());
                only.insert(r);
                match &mut anchors {
                    None => anchors = Some(only),
                    Some(a) => a.intersect(&only),
                }
            }
        }
        anchors
    }

    /// Visits every candidate in order; `visit` returns false to stop. True when the
    /// search stopped because its budget ran out.
    fn run(&self, visit: &mut impl Visit) -> bool {
        if self.groups.iter().any(|g| g.impossible) || self.root_required.is_none() {
            return false;
        }
        let mut visit = Tally {
            inner: visit,
            found: 0,
        };
        let mut scratch = self.scratch();
        self.visit_anchors(&mut scratch, &mut visit);
        scratch.steps.ran_out
    }

    fn scratch(&self) -> Scratch {
        Scratch {
            parts: vec![Vec::new(); self.groups.len()],
            steps: Steps {
                left: self.budget,
                ran_out: false,
            },
            ..Default::default()
        }
    }

    /// The trees a search without a limit walks, in the order [`Self::visit_anchors`]
    /// walks them.
    fn anchors_in_order(&self) -> Vec<ProviderId> {
        let order = self.index.root_order();
        let roots = &order.roots;
        if !self.prune || self.walk_before_pruning > 0 {
            return roots.clone();
        }
        match self.possible_anchors(usize::MAX) {
            None => roots.clone(),
            Some(set) if set.len() * 16 < roots.len() => {
                let rank = |r: ProviderId| order.rank[r.index()];
                let mut left: Vec<ProviderId> =
                    set.ids().filter(|&r| rank(r) != u32::MAX).collect();
                left.sort_unstable_by_key(|&r| rank(r));
                left
            }
            Some(set) => roots.iter().copied().filter(|&r| set.contains(r)).collect(),
        }
    }

    /// Visits the candidates of `anchors`' trees, in order, on a budget of its own; the
    /// steps it took, or `None` when the budget ran out.
    fn run_over(&self, anchors: &[ProviderId], visit: &mut impl Visit) -> Option<u64> {
        let mut scratch = self.scratch();
        for &anchor in anchors {
            if !self.visit_anchor(anchor, &mut scratch, visit) {
                break;
            }
        }
        (!scratch.steps.ran_out).then(|| self.budget - scratch.steps.left)
    }

    /// [`Self::run`]'s walk over the trees.
    fn visit_anchors(&self, scratch: &mut Scratch, visit: &mut Tally<'_, impl Visit>) {
        let order = self.index.root_order();
        let roots = &order.roots;
        let early = if self.prune {
            self.walk_before_pruning.min(roots.len())
        } else {
            roots.len()
        };
        for &anchor in &roots[..early] {
            if !self.visit_anchor(anchor, scratch, visit) {
                return;
            }
        }
        if early == roots.len() {
            return;
        }
        // The limit still wants `limit - found` candidates: at the rate seen so far, that
        // many trees more. Pruning pays only when its postings cost less than walking
        // them (a tree costs about eight posting checks).
        let max_cost = match (self.limit, visit.found) {
            (Some(limit), n) if n > 0 => limit.saturating_sub(n).saturating_mul(early) / n * 8,
            _ => usize::MAX,
        };
        match self.possible_anchors(max_cost) {
            None => {
                for &anchor in &roots[early..] {
                    if !self.visit_anchor(anchor, scratch, visit) {
                        return;
                    }
                }
            }
            // Few trees left: sorting them by rank beats scanning every root.
            Some(set) if set.len() * 16 < roots.len() => {
                let rank = |r: ProviderId| order.rank[r.index()];
                let mut left: Vec<ProviderId> = set
                    .ids()
                    .filter(|&r| rank(r) != u32::MAX && rank(r) as usize >= early)
                    .collect();
                left.sort_unstable_by_key(|&r| rank(r));
                for anchor in left {
                    if !self.visit_anchor(anchor, scratch, visit) {
                        return;
                    }
                }
            }
            Some(set) => {
                for &anchor in &roots[early..] {
                    if set.contains(anchor) && !self.visit_anchor(anchor, scratch, visit) {
                        return;
                    }
                }
            }
        }
    }

    /// Visits the candidates of one tree; false when `visit` asks to stop.
    fn visit_anchor(&self, anchor: ProviderId, s: &mut Scratch, visit: &mut impl Visit) -> bool {
        if !s.steps.spend(1) {
            return false;
        }
        visit.tree(anchor);
        // The unnumbered group alone (1.29+, where the caller only counts): its candidates
        // are the combinations of its lists, counted without walking them, and the same for
        // every tree of one shape.
        let alone = self.closed_form
            && self.groups.len() == 1
            && !self.groups[0].same_provider
            && !self.groups[0].resources.is_empty()
            && self.subtree_groups.iter().all(Vec::is_empty)
            && !visit.wants_each();
        let shape = if alone && self.groups[0].in_tree_root.is_none() {
            s.shapes.lookup(self.index, anchor)
        } else {
            Lookup::Off
        };
        if let Lookup::Counted(n) = shape {
            return n == 0 || visit.many(n);
        }
        let pack = self.index.root_pack(anchor);
        if !self.anchor_allowed(pack.traits(0)) {
            if let Lookup::Unseen(id) = shape {
                s.shapes.remember(self.index, id, anchor, 0);
            }
            return true;
        }
        // Sharing providers serve a tree when any of its providers is in one of their aggregates.
        s.linked.clear();
        for i in 0..pack.len() {
            for a in pack.aggregates(i).iter() {
                for &sp in self
                    .sharing_by_aggregate
                    .get(a.index())
                    .into_iter()
                    .flatten()
                {
                    if !s.linked.contains(&sp) {
                        s.linked.push(sp);
                    }
                }
            }
        }
        if alone
            && let Some(n) =
                self.packed_spread_count(&self.groups[0], anchor, pack, &s.linked, &mut s.masks)
        {
            if let Lookup::Unseen(id) = shape {
                s.shapes.remember(self.index, id, anchor, n);
            }
            return n == 0 || visit.many(n);
        }
        s.tree.clear();
        s.tree.extend(pack.ids());
        // Candidates list linked sharing providers by name.
        s.linked
            .sort_unstable_by(|a, b| self.index.get(*a).name.cmp(&self.index.get(*b).name));
        for (g, out) in self.groups.iter().zip(s.parts.iter_mut()) {
            out.clear();
            if g.same_provider {
                self.single_provider_parts(g, anchor, (&s.tree, pack), &s.linked, out);
            } else {
                if !self.spread_lists(g, anchor, &s.tree, &s.linked, &mut s.lists, &mut s.keep) {
                    return true;
                }
                if alone
                    && let Some(n) =
                        self.spread_count(g, &s.lists[..g.resources.len()], &mut s.masks)
                {
                    return n == 0 || visit.many(n);
                }
                if !self.spread_parts(g, &s.lists, out, &mut s.steps) {
                    return false;
                }
            }
            if out.is_empty() {
                return true;
            }
        }
        // Only counted (1.29+): where the count needs no walk, no walk.
        if self.closed_form
            && !visit.wants_each()
            && let Some(n) = self.counted_combinations(s)
        {
            return n == 0 || visit.many(n);
        }
        self.walk_combinations(s, visit)
    }

    /// How many candidates one tree's group parts make, counted without trying their
    /// combinations; `None` where that would not be exact.
    ///
    /// Without same_subtree, [`Self::combine`] turns a combination down only for isolate
    /// or for a summed amount that does not fit. Where no sum can fail (checked at the
    /// most the groups can put on each provider and class together), the candidates are
    /// the product of the groups' part counts, the numbered groups' under isolate replaced
    /// by the ways they take distinct providers ([`distinct_choices`]). Candidates made
    /// only of sharing providers count once across trees, so a tree where one is possible
    /// is walked.
    #[inline(never)]
    fn counted_combinations(&self, s: &mut Scratch) -> Option<usize> {
        if self.subtree_groups.iter().any(|m| !m.is_empty()) {
            return None;
        }
        let parts = &s.parts[..self.groups.len()];
        let sharing = |p: &ProviderId| self.index.sharing.binary_search(p).is_ok();
        // Some group with resources puts something on a provider that does not share in
        // every part.
        let never_only_sharing = parts.iter().any(|ps| {
            ps.iter()
                .all(|part| part.items.iter().any(|(p, _, _)| !sharing(p)))
        });
        if !never_only_sharing {
            return None;
        }
        let looked: usize = parts.iter().map(Vec::len).sum();
        if !s.steps.spend(looked as u64) {
            return None;
        }
        if !self.sums_always_fit(parts, &mut s.reach) {
            return None;
        }
        let mut count: u128 = 1;
        for (g, ps) in self.groups.iter().zip(parts) {
            if !(self.isolate && g.same_provider) {
                count = count.checked_mul(ps.len() as u128)?;
            }
        }
        if self.isolate {
            let numbered: SmallVec<[&[GroupPart]; 8]> = self
                .groups
                .iter()
                .zip(parts)
                .filter(|(g, _)| g.same_provider)
                .map(|(_, ps)| ps.as_slice())
                .collect();
            let ways = distinct_choices(&numbered, &mut s.reach, &mut s.ways)?;
            count = count.checked_mul(ways)?;
        }
        usize::try_from(count).ok()
    }

    /// Whether every combination of the parts fits wherever amounts are summed: true when
    /// no provider and class is reached by two groups, or when the most the groups can put
    /// together on each provider and class fits there (under isolate, numbered groups
    /// never share a provider, so only the largest of theirs counts).
    fn sums_always_fit(
        &self,
        parts: &[Vec<GroupPart>],
        reach: &mut Vec<(ProviderId, ClassId, usize, i64)>,
    ) -> bool {
        reach.clear();
        for (g, ps) in parts.iter().enumerate() {
            for part in ps {
                reach.extend(part.items.iter().map(|&(p, c, a)| (p, c, g, a)));
            }
        }
        reach.sort_unstable_by_key(|&(p, c, g, a)| (p, c, g, std::cmp::Reverse(a)));
        let mut shared = false;
        let mut all_fit = true;
        for run in reach.chunk_by(|x, y| (x.0, x.1) == (y.0, y.1)) {
            let (p, c) = (run[0].0, run[0].1);
            let mut spread: i64 = 0;
            let mut numbered: i64 = 0;
            let mut groups = 0;
            // Each group's largest amount comes first in its run.
            for first in run.chunk_by(|x, y| x.2 == y.2).map(|r| r[0]) {
                groups += 1;
                let (g, a) = (first.2, first.3);
                if !self.groups[g].same_provider {
                    spread = spread.saturating_add(a);
                } else if self.isolate {
                    numbered = numbered.max(a);
                } else {
                    numbered = numbered.saturating_add(a);
                }
            }
            shared |= groups > 1;
            let most = spread.saturating_add(numbered);
            let prov = self.index.get(p);
            all_fit &= prov.inventory(c).is_some_and(|inv| {
                prov.used(c)
                    .checked_add(most)
                    .is_some_and(|t| t <= inv.capacity())
                    && most <= inv.max_unit
            });
        }
        !shared || all_fit
    }

    /// Visits the combinations of one part per group that make candidates, in the order
    /// of trying every combination with the last group's part changing fastest; false
    /// when `visit` asks to stop or the budget runs out.
    ///
    /// With `backtrack`, the parts are chosen group by group. Choosing a part narrows each
    /// later group's parts to those that can still join it ([`Self::completable`]), the
    /// next group is chosen among those only, and a prefix is abandoned as soon as some
    /// later group has none left, the isolated groups cannot take distinct providers, or
    /// same_subtree is out of reach ([`Self::subtrees_reachable`]). Only parts and prefixes
    /// that every completion would fail in [`Self::combine`] are dropped, so the candidates
    /// and their order are those of trying every combination.
    fn walk_combinations(&self, s: &mut Scratch, visit: &mut impl Visit) -> bool {
        let n = s.parts.len();
        s.idx.clear();
        s.idx.resize(n, 0);
        // One group: its parts are the combinations, with nothing to narrow.
        if n == 1 {
            for i in 0..s.parts[0].len() {
                s.idx[0] = i;
                if !s.steps.spend(1) || !self.leaf(s, visit) {
                    return false;
                }
            }
            return true;
        }
        s.pos.clear();
        s.pos.resize(n, 0);
        // Row k of `viable` holds, per group, the parts still open after the first k
        // groups' choices; row 0 every part.
        s.viable.resize_with(n * n, Vec::new);
        for (j, parts) in s.parts.iter().enumerate() {
            s.viable[j].clear();
            s.viable[j].extend(0..parts.len() as u32);
        }
        let mut k = 0;
        loop {
            let row = if self.backtrack { k } else { 0 };
            let list = &s.viable[row * n + k];
            if s.pos[k] == list.len() {
                if k == 0 {
                    return true;
                }
                k -= 1;
                s.pos[k] += 1;
                continue;
            }
            s.idx[k] = list[s.pos[k]] as usize;
            if !s.steps.spend(1) {
                return false;
            }
            if k + 1 < n {
                if !self.backtrack || (self.subtrees_reachable(s, k) && self.completable(s, k)) {
                    k += 1;
                    s.pos[k] = 0;
                    continue;
                }
            } else if !self.leaf(s, visit) {
                return false;
            }
            s.pos[k] += 1;
        }
    }

    /// Judges the full combination `s.idx` and reports it when it makes a candidate;
    /// false when `visit` asks to stop.
    fn leaf(&self, s: &mut Scratch, visit: &mut impl Visit) -> bool {
        let combo: SmallVec<[&GroupPart; 8]> =
            s.parts.iter().zip(&s.idx).map(|(l, i)| &l[*i]).collect();
        if !self.combine(&combo, &mut s.sums) {
            return true;
        }
        let found = Found {
            allocations: &s.sums,
            groups: &self.groups,
            parts: &combo,
        };
        if only_sharing(self.index, &s.sums) && !s.sharing_seen.insert(found.candidate()) {
            return true;
        }
        match visit.one(&found) {
            Some(cost) => s.steps.spend(cost),
            None => false,
        }
    }

    /// Whether a summed amount fits a provider, as [`Self::combine`] judges sums.
    fn sum_fits(&self, p: ProviderId, c: ClassId, amount: i64) -> bool {
        let prov = self.index.get(p);
        prov.inventory(c)
            .is_some_and(|inv| prov.used(c) + amount <= inv.capacity() && amount <= inv.max_unit)
    }

    /// For each same_subtree set with group `k` in it: the providers chosen so far for its
    /// groups (up to `k`) must have a common ancestor (or self) that is among them, or that
    /// some part still open to a later group of the set uses. Every completion's top
    /// provider is such an ancestor.
    fn subtrees_reachable(&self, s: &mut Scratch, k: usize) -> bool {
        let n = s.parts.len();
        for members in self.subtree_groups.iter().filter(|m| m.contains(&k)) {
            s.subtree_providers.clear();
            for &j in members.iter().filter(|j| **j <= k) {
                s.subtree_providers
                    .extend(s.parts[j][s.idx[j]].providers.iter().copied());
            }
            s.subtree_providers.sort_unstable();
            s.subtree_providers.dedup();
            if s.subtree_providers.len() <= 1 {
                continue;
            }
            // Each provider and part looked at costs a step.
            if !s.steps.spend(s.subtree_providers.len() as u64) {
                return false;
            }
            self.common_ancestors(&s.subtree_providers, &mut s.ancestors);
            if s.ancestors.iter().any(|a| s.subtree_providers.contains(a)) {
                continue;
            }
            let looked: usize = members
                .iter()
                .filter(|j| **j > k)
                .map(|&j| s.viable[k * n + j].len())
                .sum();
            if !s.steps.spend(looked as u64) {
                return false;
            }
            let (parts, open) = (&s.parts, &s.viable);
            let later = members.iter().filter(|j| **j > k).any(|&j| {
                open[k * n + j].iter().any(|&i| {
                    let part = &parts[j][i as usize];
                    part.providers.iter().any(|p| s.ancestors.contains(p))
                })
            });
            if !later {
                return false;
            }
        }
        true
    }

    /// The common ancestors (or selves) of `providers` (not empty), nearest first.
    fn common_ancestors(&self, providers: &[ProviderId], out: &mut Vec<ProviderId>) {
        out.clear();
        let mut cur = Some(providers[0]);
        while let Some(a) = cur {
            if out.contains(&a) {
                break;
            }
            out.push(a);
            cur = self.index.get(a).parent;
        }
        let others = &providers[1..];
        out.retain(|a| others.iter().all(|p| self.is_ancestor_or_self(*a, *p)));
    }

    /// What the same_subtree sets make of the first `k + 1` groups' choices
    /// (into `s.subtree_facts`, one per set); false when the budget ran out.
    fn note_subtree_facts(&self, s: &mut Scratch, k: usize) -> bool {
        let n = s.parts.len();
        s.subtree_facts
            .resize_with(self.subtree_groups.len(), SubtreeFacts::default);
        for (members, f) in self.subtree_groups.iter().zip(s.subtree_facts.iter_mut()) {
            f.chosen.clear();
            f.common.clear();
            f.later.clear();
            for &j in members.iter().filter(|j| **j <= k) {
                f.chosen
                    .extend(s.parts[j][s.idx[j]].providers.iter().copied());
            }
            if f.chosen.is_empty() {
                continue;
            }
            f.chosen.sort_unstable();
            f.chosen.dedup();
            for &j in members.iter().filter(|j| **j > k) {
                let open = &s.viable[k * n + j];
                if !s.steps.spend(open.len() as u64) {
                    return false;
                }
                f.later.extend(
                    open.iter()
                        .flat_map(|&i| s.parts[j][i as usize].providers.iter().copied()),
                );
            }
            f.later.sort_unstable();
            f.later.dedup();
            self.common_ancestors(&f.chosen, &mut f.common);
        }
        true
    }

    /// Whether a part for group `j` can still sit in every same_subtree set of `j` beside
    /// the choices [`Self::note_subtree_facts`] noted: some common ancestor of the chosen
    /// providers and the part's is among them, or among the providers still open to the
    /// set's later groups. The top provider of any completion is such an ancestor.
    fn under_a_top(&self, facts: &[SubtreeFacts], j: usize, part: &GroupPart) -> bool {
        if part.providers.is_empty() {
            return true;
        }
        self.subtree_groups
            .iter()
            .zip(facts)
            .filter(|(members, f)| members.contains(&j) && !f.chosen.is_empty())
            .all(|(_, f)| {
                f.common.iter().any(|a| {
                    part.providers
                        .iter()
                        .all(|p| self.is_ancestor_or_self(*a, *p))
                        && (f.chosen.contains(a)
                            || part.providers.contains(a)
                            || f.later.binary_search(a).is_ok())
                })
            })
    }

    /// Narrows every group after `k` to the parts still open once group `k`'s part is
    /// chosen (row `k + 1` of `s.viable`, from row `k`): distinct from the isolated
    /// providers taken, fitting beside the amounts chosen, and under a reachable
    /// same_subtree top. True when every such group keeps a part and, with isolate, the
    /// numbered groups after `k` can take distinct providers among them (a matching).
    /// Looking at a part costs a step.
    fn completable(&self, s: &mut Scratch, k: usize) -> bool {
        let n = s.parts.len();
        if !self.subtree_groups.is_empty() && !self.note_subtree_facts(s, k) {
            return false;
        }
        s.options.resize_with(n, Vec::new);
        let (open, next) = s.viable.split_at_mut((k + 1) * n);
        let chosen = &s.parts[k][s.idx[k]];
        for j in k + 1..n {
            let from = &open[k * n + j];
            let to = &mut next[j];
            to.clear();
            s.options[j].clear();
            if !s.steps.spend(from.len() as u64) {
                return false;
            }
            for &i in from {
                let part = &s.parts[j][i as usize];
                if self.agrees(&s.parts, &s.idx, k, (j, part), chosen)
                    && self.under_a_top(&s.subtree_facts, j, part)
                {
                    to.push(i);
                    // The unnumbered group's parts may use no provider; only numbered
                    // groups' (one provider each) take part in the matching.
                    let p = part.providers.first().copied();
                    s.options[j].push(p.unwrap_or(ProviderId(u32::MAX)));
                }
            }
            if to.is_empty() {
                return false;
            }
        }
        if !self.isolate {
            return true;
        }
        let later: SmallVec<[usize; 8]> = (k + 1..n)
            .filter(|j| self.groups[*j].same_provider)
            .collect();
        if later.len() <= 1 {
            return true;
        }
        s.matched.clear();
        for &j in &later {
            let mut seen: SmallVec<[ProviderId; 16]> = SmallVec::new();
            if !augment(&s.options, &mut s.matched, &mut seen, j, &mut s.steps) {
                return false;
            }
        }
        true
    }

    /// Whether `part` for group `j`, which agrees with the parts chosen for the groups
    /// before `k`, agrees with `chosen` for group `k` too: not on an isolated provider it
    /// takes, and every amount landing where `chosen` puts one still fitting beside what
    /// groups up to `k` put there.
    fn agrees(
        &self,
        parts: &[Vec<GroupPart>],
        idx: &[usize],
        k: usize,
        (j, part): (usize, &GroupPart),
        chosen: &GroupPart,
    ) -> bool {
        if self.isolate
            && self.groups[j].same_provider
            && self.groups[k].same_provider
            && chosen.providers.iter().any(|p| part.providers.contains(p))
        {
            return false;
        }
        part.items.iter().all(|&(p, c, amount)| {
            if !chosen.items.iter().any(|(q, d, _)| *q == p && *d == c) {
                return true;
            }
            let before: i64 = (0..=k)
                .flat_map(|i| parts[i][idx[i]].items.iter())
                .filter(|(q, d, _)| *q == p && *d == c)
                .map(|(_, _, a)| a)
                .sum();
            self.sum_fits(p, c, before + amount)
        })
    }
}

/// Numbered groups up to which [`distinct_choices`] counts (it keeps a count per subset).
const MAX_DISTINCT_GROUPS: usize = 12;

/// In how many ways the numbered groups whose parts are `groups` (one provider each) take
/// pairwise distinct providers; `None` on overflow or when a part does not have exactly
/// one provider. Providers are taken one at a time, each by at most one group not yet
/// served, keeping per subset of groups the ways to have served exactly it.
fn distinct_choices(
    groups: &[&[GroupPart]],
    reach: &mut Vec<(ProviderId, ClassId, usize, i64)>,
    ways: &mut Vec<u128>,
) -> Option<u128> {
    let m = groups.len();
    if m > MAX_DISTINCT_GROUPS {
        return None;
    }
    reach.clear();
    for (g, parts) in groups.iter().enumerate() {
        for part in parts.iter() {
            let [p] = part.providers[..] else {
                return None;
            };
            reach.push((p, ClassId(0), g, 0));
        }
    }
    reach.sort_unstable_by_key(|&(p, _, g, _)| (p, g));
    ways.clear();
    ways.resize(1 << m, 0);
    ways[0] = 1;
    for run in reach.chunk_by(|x, y| x.0 == y.0) {
        let serves: usize = run.iter().fold(0, |mask, x| mask | 1 << x.2);
        // Larger subsets first, so a provider serves one group per way.
        for served in (0..ways.len()).rev() {
            let w = ways[served];
            if w == 0 {
                continue;
            }
            let mut free = serves & !served;
            while free != 0 {
                let g = free & free.wrapping_neg();
                ways[served | g] = ways[served | g].checked_add(w)?;
                free &= free - 1;
            }
        }
    }
    ways.last().copied()
}

/// Kuhn's augmenting path for group `j` over `options` (one provider per numbered group's
/// part): true when `j` gets a provider, rematching earlier groups as needed. Each
/// provider looked at costs a step; running out counts as no matching.
fn augment(
    options: &[Vec<ProviderId>],
    matched: &mut Vec<(ProviderId, usize)>,
    seen: &mut SmallVec<[ProviderId; 16]>,
    j: usize,
    steps: &mut Steps,
) -> bool {
    for &p in &options[j] {
        if !steps.spend(1) {
            return false;
        }
        if seen.contains(&p) {
            continue;
        }
        seen.push(p);
        match matched.iter().position(|(q, _)| *q == p) {
            None => {
                matched.push((p, j));
                return true;
            }
            Some(at) => {
                let other = matched[at].1;
                if augment(options, matched, seen, other, steps) {
                    matched[at].1 = j;
                    return true;
                }
            }
        }
    }
    false
}

/// Calls `f` with every combination of one item from each list, in order, until `f`
/// returns false; false when it did.
fn product(lists: &[Vec<ProviderId>], mut f: impl FnMut(&[ProviderId]) -> bool) -> bool {
    if lists.iter().any(|l| l.is_empty()) {
        return true;
    }
    let mut idx: SmallVec<[usize; 8]> = smallvec![0; lists.len()];
    let mut choice: SmallVec<[ProviderId; 8]> = lists.iter().map(|l| l[0]).collect();
    loop {
        if !f(&choice) {
            return false;
        }
        let mut k = lists.len();
        loop {
            if k == 0 {
                return true;
            }
            k -= 1;
            idx[k] += 1;
            if idx[k] < lists[k].len() {
                choice[k] = lists[k][idx[k]];
                break;
            }
            idx[k] = 0;
            choice[k] = lists[k][0];
        }
    }
}

/// The root of the tree of the provider `in_tree` names by uuid (in any case).
pub(crate) fn tree_root_of_uuid(index: &ProviderIndex, uuid: &str) -> Option<ProviderId> {
    let names = index.names_with_uuid(uuid);
    let names = if names.is_empty() {
        index.names_with_uuid(&uuid.to_ascii_lowercase())
    } else {
        names
    };
    names
        .first()
        .and_then(|n| index.id(n))
        .and_then(|p| index.get(p).root)
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

fn resolve_group(index: &ProviderIndex, q: &GroupQuery) -> Group {
    let mut impossible = false;
    let required = q
        .required
        .iter()
        .map(|any| {
            let ids: Vec<TraitId> = any.iter().filter_map(|t| index.traits.get(t)).collect();
            impossible |= ids.is_empty();
            ids
        })
        .collect();
    let member_of: Option<Vec<Vec<AggregateId>>> = (!q.member_of.is_empty()).then(|| {
        q.member_of
            .iter()
            .map(|any| {
                any.iter()
                    .filter_map(|a| index.aggregate_names.get(a))
                    .collect()
            })
            .collect()
    });
    impossible |= member_of
        .as_ref()
        .is_some_and(|m| m.iter().any(Vec::is_empty));
    let resources = q
        .resources
        .iter()
        .filter_map(|(c, a)| match index.classes.get(c) {
            Some(id) => Some((id, *a)),
            None => {
                impossible = true;
                None
            }
        })
        .collect();
    let in_tree_root = match &q.in_tree {
        None => None,
        Some(u) => match tree_root_of_uuid(index, u) {
            Some(r) => Some(r),
            None => {
                // Placement ignores in_tree for a group without resources.
                impossible |= !q.resources.is_empty();
                None
            }
        },
    };
    Group {
        suffix: q.suffix.clone(),
        same_provider: q.use_same_provider,
        resources,
        impossible,
        required,
        forbidden: q
            .forbidden
            .iter()
            .filter_map(|t| index.traits.get(t))
            .collect(),
        member_of,
        forbidden_aggregates: q
            .forbidden_aggregates
            .iter()
            .filter_map(|a| index.aggregate_names.get(a))
            .collect(),
        in_tree_root,
    }
}

fn prepare<'a>(index: &'a ProviderIndex, query: &CandidatesQuery) -> Search<'a> {
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
    let subtree_groups = query
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
        backtrack: true,
        budget: SEARCH_BUDGET,
        threads: crate::runs::cores(),
        walk_apart_from: WALK_APART_FROM,
    }
}

/// Whether a candidate's allocations use at most one provider per tree (all microversions
/// before 1.29 allow).
fn one_provider_per_tree(
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
pub(crate) fn candidates_per_tree(index: &ProviderIndex, query: &CandidatesQuery) -> TreeCounts {
    let mut search = prepare(index, query);
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
                // Keeping a candidate costs steps in proportion to its size, so that the
                // budget bounds the memory an answer takes as well as the time.
                let mapped: usize = candidate.mappings.iter().map(|(_, ps)| ps.len()).sum();
                cost = (candidate.allocations.len() + mapped) as u64;
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

fn search_candidates(
    index: &ProviderIndex,
    query: &CandidatesQuery,
    search: &Search<'_>,
    keep: usize,
) -> (usize, CandidateSet) {
    let nested = query.microversion.at_least(29);
    let mut result = CandidateSet {
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
    let trees: BTreeSet<ProviderId> = result
        .candidates
        .iter()
        .flat_map(|c| {
            c.allocations
                .iter()
                .filter_map(|(p, _, _)| index.get(*p).root)
        })
        .collect();
    let mut trees: Vec<ProviderId> = trees.into_iter().collect();
    trees.sort_by(|a, b| index.get(*a).name.cmp(&index.get(*b).name));
    result.summary_trees = trees;
    (count, result)
}

/// Whether a candidate is made only of sharing providers: such a candidate repeats under
/// every tree they serve, and counts once.
fn only_sharing(index: &ProviderIndex, allocations: &[(ProviderId, ClassId, i64)]) -> bool {
    allocations
        .iter()
        .all(|(p, _, _)| index.sharing.binary_search(p).is_ok())
}

/// Trees an unlimited search walks on several threads from.
const WALK_APART_FROM: usize = 2_048;

/// Every candidate of a search without a limit, its trees cut into runs walked on threads
/// of their own and the runs' candidates joined in order: the count, the providers used,
/// and the candidates, as walking them on one thread gives. A candidate made only of
/// sharing providers counts once across trees, so of those the runs repeat, the first is
/// kept. `None` where one walk is needed: a limit, a caller keeping only some, few trees,
/// or a budget that runs out (so that the error names what one walk found).
fn gathered_in_parallel(
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
    let runs = in_runs(&anchors, search.threads, |run| {
        let mut part = CandidateSet::default();
        let mut gather = Gather {
            index,
            nested,
            count: 0,
            used_by_any: BTreeSet::new(),
            keep,
            limit: usize::MAX,
            result: &mut part,
        };
        let steps = search.run_over(run, &mut gather);
        let (count, used) = (gather.count, std::mem::take(&mut gather.used_by_any));
        steps.map(|steps| (steps, count, used, part.candidates))
    });
    let mut steps = 0u64;
    let mut count = 0usize;
    let mut used_by_any = BTreeSet::new();
    let mut candidates = Vec::with_capacity(runs.iter().flatten().map(|r| r.3.len()).sum());
    let mut sharing_seen: HashSet<Candidate> = HashSet::new();
    for run in runs {
        let (run_steps, run_count, used, found) = run?;
        steps = steps.saturating_add(run_steps);
        count = count.saturating_add(run_count);
        // A repeat's providers are the first one's: `used` needs no correction.
        used_by_any.extend(used);
        for candidate in found {
            if only_sharing(index, &candidate.allocations)
                && !sharing_seen.insert(candidate.clone())
            {
                // Counted by its run (every candidate kept was counted), not by one walk.
                count -= 1;
                continue;
            }
            candidates.push(candidate);
        }
    }
    (steps <= search.budget).then_some((count, used_by_any, candidates))
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

#[cfg(test)]
#[path = "candidates_tests.rs"]
mod tests;
