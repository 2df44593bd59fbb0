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

use super::provider_tree::{AggregateId, ClassId, ProviderId, ProviderIndex, TraitId};
use super::query::{CandidatesQuery, GroupPolicy, GroupQuery};

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

/// What stays fixed over one query: the index, resolved groups and precomputed links.
struct Search<'a> {
    index: &'a ProviderIndex,
    groups: Vec<Group>,
    /// Anchors allowed by root_required (None: all).
    anchors: Option<HashSet<ProviderId>>,
    /// Sharing providers by aggregate.
    sharing_by_aggregate: Vec<SmallVec<[ProviderId; 2]>>,
    granular: usize,
    isolate: bool,
    subtree_groups: Vec<Vec<usize>>,
}

impl<'a> Search<'a> {
    fn root(&self, p: ProviderId) -> Option<ProviderId> {
        self.index.get(p).root
    }

    fn fits(&self, p: ProviderId, class: ClassId, amount: i64) -> bool {
        let prov = self.index.get(p);
        prov.inventory(class)
            .is_some_and(|inv| inv.admits(prov.used(class), amount).is_ok())
    }

    fn has_forbidden(&self, p: ProviderId, g: &Group) -> bool {
        let prov = self.index.get(p);
        g.forbidden.iter().any(|t| prov.has_trait(*t))
    }

    fn in_aggregates(&self, p: ProviderId, sets: &[Vec<AggregateId>]) -> bool {
        let aggs = &self.index.get(p).aggregates;
        sets.iter()
            .all(|any| any.iter().any(|a| aggs.binary_search(a).is_ok()))
    }

    fn in_any_aggregate(&self, p: ProviderId, aggs: &[AggregateId]) -> bool {
        let mine = &self.index.get(p).aggregates;
        aggs.iter().any(|a| mine.binary_search(a).is_ok())
    }

    fn anchor_allowed(&self, root: ProviderId) -> bool {
        self.anchors.as_ref().is_none_or(|a| a.contains(&root))
    }

    /// A numbered group's parts for one anchor: single providers of the tree, or sharing
    /// providers serving it, with everything the group asks.
    fn single_provider_parts(
        &self,
        g: &Group,
        anchor: ProviderId,
        tree: &[ProviderId],
        linked: &[ProviderId],
        out: &mut Vec<GroupPart>,
    ) {
        // Placement finds no provider for a group without resources unless a required trait
        // or an aggregate narrows it down (a forbidden trait alone does not).
        if g.resources.is_empty() && g.required.is_empty() && g.member_of.is_none() {
            return;
        }
        let candidates = tree
            .iter()
            .chain(linked.iter().filter(|s| self.root(**s) != Some(anchor)));
        for &p in candidates {
            // Placement ignores in_tree for a group without resources.
            if let Some(r) = g.in_tree_root
                && !g.resources.is_empty()
                && self.root(p) != Some(r)
            {
                continue;
            }
            let prov = self.index.get(p);
            let ok = g.resources.iter().all(|(c, a)| self.fits(p, *c, *a))
                && g.required
                    .iter()
                    .all(|any| any.iter().any(|t| prov.has_trait(*t)))
                && !self.has_forbidden(p, g)
                && g.member_of
                    .as_ref()
                    .is_none_or(|m| self.in_aggregates(p, m))
                && !self.in_any_aggregate(p, &g.forbidden_aggregates);
            if ok {
                out.push(GroupPart {
                    items: g.resources.iter().map(|(c, a)| (p, *c, *a)).collect(),
                    providers: smallvec![p],
                });
            }
        }
    }

    /// The unnumbered group's parts for one anchor: one provider per class from the tree
    /// or its sharing providers, with the traits of the chosen providers judged together.
    fn spread_parts(
        &self,
        g: &Group,
        anchor: ProviderId,
        tree: &[ProviderId],
        linked: &[ProviderId],
        lists: &mut Vec<Vec<ProviderId>>,
        out: &mut Vec<GroupPart>,
    ) {
        if g.in_tree_root.is_some_and(|r| r != anchor) {
            return;
        }
        let in_aggs = |p: ProviderId| {
            g.member_of
                .as_ref()
                .is_none_or(|m| self.in_aggregates(p, m))
        };
        let keep = |p: ProviderId| {
            (g.member_of.is_none() || in_aggs(p) || in_aggs(anchor))
                && !(self.in_any_aggregate(p, &g.forbidden_aggregates)
                    || self.in_any_aggregate(anchor, &g.forbidden_aggregates))
                && !self.has_forbidden(p, g)
        };
        let linked: &[ProviderId] = if g.in_tree_root.is_some() {
            &[]
        } else {
            linked
        };
        lists.resize_with(g.resources.len(), Vec::new);
        for (list, (c, a)) in lists.iter_mut().zip(&g.resources) {
            list.clear();
            for &p in tree {
                if self.fits(p, *c, *a) && keep(p) {
                    list.push(p);
                }
            }
            for &s in linked {
                // Only sharing providers in the requested aggregates share.
                if self.fits(s, *c, *a)
                    && keep(s)
                    && g.member_of
                        .as_ref()
                        .is_none_or(|m| self.in_aggregates(s, m))
                    && !list.contains(&s)
                {
                    list.push(s);
                }
            }
            if list.is_empty() {
                return;
            }
        }
        let lists: Vec<&Vec<ProviderId>> = lists.iter().collect();
        product(&lists, |choice| {
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
        });
    }

    fn ancestors(&self, p: ProviderId) -> Vec<ProviderId> {
        let mut out = vec![p];
        let mut cur = self.index.get(p).parent;
        while let Some(pid) = cur {
            if out.contains(&pid) {
                break;
            }
            out.push(pid);
            cur = self.index.get(pid).parent;
        }
        out
    }

    fn same_subtree(&self, providers: &BTreeSet<ProviderId>) -> bool {
        if providers.len() <= 1 {
            return true;
        }
        let mut common: Option<BTreeSet<ProviderId>> = None;
        for p in providers {
            let a: BTreeSet<ProviderId> = self.ancestors(*p).into_iter().collect();
            common = Some(match common {
                None => a,
                Some(c) => c.intersection(&a).copied().collect(),
            });
        }
        common.is_some_and(|c| c.iter().any(|p| providers.contains(p)))
    }

    /// Combines one part per group into a candidate, or `None` when the combination breaks
    /// group policy, same_subtree or capacity.
    fn combine(&self, parts: &[&GroupPart]) -> Option<Candidate> {
        if self.isolate {
            let mut distinct: Vec<ProviderId> = self
                .groups
                .iter()
                .zip(parts)
                .filter(|(g, _)| g.same_provider)
                .flat_map(|(_, p)| p.providers.iter().copied())
                .collect();
            distinct.sort_unstable();
            distinct.dedup();
            if distinct.len() != self.granular {
                return None;
            }
        }
        for members in &self.subtree_groups {
            let providers: BTreeSet<ProviderId> = members
                .iter()
                .flat_map(|i| parts[*i].providers.iter().copied())
                .collect();
            if !self.same_subtree(&providers) {
                return None;
            }
        }
        let mut sums: Vec<(ProviderId, ClassId, i64)> =
            parts.iter().flat_map(|p| p.items.iter().copied()).collect();
        sums.sort_unstable_by_key(|(p, c, _)| (*p, *c));
        sums.dedup_by(|later, earlier| {
            if later.0 == earlier.0 && later.1 == earlier.1 {
                earlier.2 += later.2;
                true
            } else {
                false
            }
        });
        for (p, c, amount) in &sums {
            let prov = self.index.get(*p);
            let inv = prov.inventory(*c)?;
            if prov.used(*c) + amount > inv.capacity() || *amount > inv.max_unit {
                return None;
            }
        }
        let mut mappings: Vec<(String, Vec<ProviderId>)> = Vec::with_capacity(parts.len());
        for (g, part) in self.groups.iter().zip(parts) {
            match mappings.iter_mut().find(|(s, _)| *s == g.suffix) {
                Some((_, ps)) => ps.extend(part.providers.iter().copied()),
                None => mappings.push((g.suffix.clone(), part.providers.to_vec())),
            }
        }
        for (_, ps) in &mut mappings {
            ps.sort_unstable();
            ps.dedup();
        }
        Some(Candidate {
            allocations: sums,
            mappings,
        })
    }

    /// Visits every candidate in order; `visit` returns false to stop.
    fn run(&self, mut visit: impl FnMut(Candidate) -> bool) {
        if self.groups.iter().any(|g| g.impossible) {
            return;
        }
        let mut tree = Vec::new();
        let mut parts: Vec<Vec<GroupPart>> = vec![Vec::new(); self.groups.len()];
        let mut lists = Vec::new();
        let mut linked: Vec<ProviderId> = Vec::new();
        let mut idx: Vec<usize> = Vec::new();
        // Candidates made only of sharing providers repeat under every tree those providers
        // serve; they count once.
        let mut sharing_seen: HashSet<Candidate> = HashSet::new();
        'anchors: for &anchor in self.index.roots.values() {
            if !self.anchor_allowed(anchor) {
                continue;
            }
            tree.clear();
            self.index.tree(anchor, &mut tree);
            // Sharing providers serve a tree when any of its providers is in one of their aggregates.
            linked.clear();
            if !self.sharing_by_aggregate.is_empty() {
                for &p in &tree {
                    for a in &self.index.get(p).aggregates {
                        for &s in self
                            .sharing_by_aggregate
                            .get(*a as usize)
                            .into_iter()
                            .flatten()
                        {
                            if !linked.contains(&s) {
                                linked.push(s);
                            }
                        }
                    }
                }
                linked
                    .sort_unstable_by(|a, b| self.index.get(*a).name.cmp(&self.index.get(*b).name));
            }
            for (g, out) in self.groups.iter().zip(parts.iter_mut()) {
                out.clear();
                if g.same_provider {
                    self.single_provider_parts(g, anchor, &tree, &linked, out);
                } else {
                    self.spread_parts(g, anchor, &tree, &linked, &mut lists, out);
                }
                if out.is_empty() {
                    continue 'anchors;
                }
            }
            idx.clear();
            idx.resize(parts.len(), 0);
            loop {
                let combo: SmallVec<[&GroupPart; 4]> =
                    parts.iter().zip(&idx).map(|(l, i)| &l[*i]).collect();
                if let Some(c) = self.combine(&combo) {
                    let only_sharing = c
                        .allocations
                        .iter()
                        .all(|(p, _, _)| self.index.sharing.binary_search(p).is_ok());
                    if (!only_sharing || sharing_seen.insert(c.clone())) && !visit(c) {
                        return;
                    }
                }
                let mut k = parts.len();
                let done = loop {
                    if k == 0 {
                        break true;
                    }
                    k -= 1;
                    idx[k] += 1;
                    if idx[k] < parts[k].len() {
                        break false;
                    }
                    idx[k] = 0;
                };
                if done {
                    break;
                }
            }
        }
    }
}

/// Calls `f` with every combination of one item from each list, in order.
fn product(lists: &[&Vec<ProviderId>], mut f: impl FnMut(&[ProviderId])) {
    if lists.iter().any(|l| l.is_empty()) {
        return;
    }
    let mut idx = vec![0usize; lists.len()];
    let mut choice: Vec<ProviderId> = lists.iter().map(|l| l[0]).collect();
    loop {
        f(&choice);
        let mut k = lists.len();
        loop {
            if k == 0 {
                return;
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
        Some(u) => {
            let names = index.names_with_uuid(u);
            let names = if names.is_empty() {
                index.names_with_uuid(&u.to_ascii_lowercase())
            } else {
                names
            };
            match names
                .first()
                .and_then(|n| index.id(n))
                .and_then(|p| index.get(p).root)
            {
                Some(r) => Some(r),
                None => {
                    // Placement ignores in_tree for a group without resources.
                    impossible |= !q.resources.is_empty();
                    None
                }
            }
        }
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
    let anchors =
        (!query.root_required.is_empty() || !query.root_forbidden.is_empty()).then(|| {
            index
                .roots
                .values()
                .copied()
                .filter(|&r| {
                    let p = index.get(r);
                    query
                        .root_required
                        .iter()
                        .all(|t| index.traits.get(t).is_some_and(|id| p.has_trait(id)))
                        && !query
                            .root_forbidden
                            .iter()
                            .any(|t| index.traits.get(t).is_some_and(|id| p.has_trait(id)))
                })
                .collect()
        });
    let mut sharing_by_aggregate: Vec<SmallVec<[ProviderId; 2]>> = Vec::new();
    for &s in &index.sharing {
        if index.get(s).root.is_none() {
            continue;
        }
        for a in &index.get(s).aggregates {
            let a = *a as usize;
            if sharing_by_aggregate.len() <= a {
                sharing_by_aggregate.resize_with(a + 1, SmallVec::new);
            }
            sharing_by_aggregate[a].push(s);
        }
    }
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
    Search {
        index,
        granular: groups.iter().filter(|g| g.same_provider).count(),
        isolate: query.group_policy == Some(GroupPolicy::Isolate),
        groups,
        anchors,
        sharing_by_aggregate,
        subtree_groups,
    }
}

/// Whether a candidate uses at most one provider per tree (all microversions before 1.29 allow).
fn one_provider_per_tree(index: &ProviderIndex, c: &Candidate) -> bool {
    let mut providers: Vec<ProviderId> = c.allocations.iter().map(|(p, _, _)| *p).collect();
    providers.dedup();
    let mut roots: Vec<Option<ProviderId>> = providers.iter().map(|p| index.get(*p).root).collect();
    roots.sort_unstable();
    roots.dedup();
    providers.len() == roots.len()
}

/// Counts the candidates of a query without keeping them.
pub fn count_candidates(index: &ProviderIndex, query: &CandidatesQuery) -> usize {
    counted_candidates(index, query, 0).0
}

/// Runs a query over the index.
pub fn allocation_candidates(index: &ProviderIndex, query: &CandidatesQuery) -> CandidateSet {
    counted_candidates(index, query, usize::MAX).1
}

/// Counts every candidate (up to the query's limit) and keeps the first `keep` of them.
pub fn counted_candidates(
    index: &ProviderIndex,
    query: &CandidatesQuery,
    keep: usize,
) -> (usize, CandidateSet) {
    let search = prepare(index, query);
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
    let mut count = 0;
    // Below 1.29 Placement summarises every provider any candidate uses (in the kept trees),
    // so the search runs to the end even with a limit.
    let mut used_by_any: BTreeSet<ProviderId> = BTreeSet::new();
    let limit = query.limit.unwrap_or(usize::MAX);
    search.run(|c| {
        if nested || one_provider_per_tree(index, &c) {
            count += 1;
            if !nested {
                used_by_any.extend(c.allocations.iter().map(|(p, _, _)| *p));
            }
            if result.candidates.len() < keep.min(limit) {
                result.candidates.push(c);
            }
        }
        !nested || count < limit
    });
    count = count.min(limit);
    if !nested {
        result.summary_only = Some(used_by_any);
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
