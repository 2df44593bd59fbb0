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

use std::collections::{BTreeMap, BTreeSet, HashSet};

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
    resources: Vec<(Option<ClassId>, i64)>,
    required: Vec<Vec<TraitId>>,
    required_unknown: bool,
    forbidden: Vec<TraitId>,
    member_of: Option<Vec<Vec<AggregateId>>>,
    forbidden_aggregates: Vec<AggregateId>,
    /// `Some(None)`: in_tree names no provider.
    in_tree: Option<Option<ProviderId>>,
}

/// One group's share of a candidate, as Placement's per-group allocation requests.
#[derive(Debug, Clone)]
struct GroupPart {
    items: Vec<(ProviderId, ClassId, i64)>,
    providers: Vec<ProviderId>,
}

struct Search<'a> {
    index: &'a ProviderIndex,
    /// Root of each provider slot in a well-formed tree.
    roots: Vec<Option<ProviderId>>,
    /// Anchors allowed by root_required (None: all).
    anchors: Option<HashSet<ProviderId>>,
}

impl<'a> Search<'a> {
    fn new(index: &'a ProviderIndex) -> Self {
        let mut roots = vec![None; index.slots.len()];
        let mut tree = Vec::new();
        for &r in &index.roots {
            tree.clear();
            index.tree(r, &mut tree);
            for &p in &tree {
                roots[p as usize] = Some(r);
            }
        }
        Search {
            index,
            roots,
            anchors: None,
        }
    }

    fn root(&self, p: ProviderId) -> Option<ProviderId> {
        self.roots[p as usize]
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

    /// Roots of every tree a sharing provider serves: trees with any provider in one of its
    /// aggregates, its own included.
    fn sharing_anchors(&self, s: ProviderId) -> Vec<ProviderId> {
        let mut out = BTreeSet::new();
        for a in &self.index.get(s).aggregates {
            for m in self
                .index
                .aggregate_members
                .get(*a as usize)
                .into_iter()
                .flatten()
            {
                if let Some(r) = self.root(*m) {
                    out.insert(r);
                }
            }
        }
        out.into_iter().collect()
    }

    fn is_sharing(&self, p: ProviderId) -> bool {
        self.index.sharing.binary_search(&p).is_ok()
    }

    /// Providers in tree order (roots by name, depth-first), restricted to well-formed trees.
    fn providers_in_order(&self, in_tree: Option<ProviderId>) -> Vec<ProviderId> {
        let mut out = Vec::new();
        match in_tree {
            Some(r) => self.index.tree(r, &mut out),
            None => {
                for &r in &self.index.roots {
                    self.index.tree(r, &mut out);
                }
            }
        }
        out
    }

    /// A numbered group's parts, by anchor: single providers with everything the group asks.
    fn single_provider_parts(&self, g: &Group) -> BTreeMap<ProviderId, Vec<GroupPart>> {
        let mut by_anchor: BTreeMap<ProviderId, Vec<GroupPart>> = BTreeMap::new();
        if g.required_unknown || g.resources.iter().any(|(c, _)| c.is_none()) {
            return by_anchor;
        }
        // Placement ignores in_tree for a group without resources.
        let tree_root = match g.in_tree {
            Some(_) if g.resources.is_empty() => None,
            Some(None) => return by_anchor,
            Some(Some(p)) => match self.root(p) {
                Some(r) => Some(r),
                None => return by_anchor,
            },
            None => None,
        };
        for p in self.providers_in_order(tree_root) {
            let prov = self.index.get(p);
            let ok = g
                .resources
                .iter()
                .all(|(c, a)| self.fits(p, c.unwrap_or(0), *a))
                && g.required
                    .iter()
                    .all(|any| any.iter().any(|t| prov.has_trait(*t)))
                && !self.has_forbidden(p, g)
                && g.member_of
                    .as_ref()
                    .is_none_or(|m| self.in_aggregates(p, m))
                && !self.in_any_aggregate(p, &g.forbidden_aggregates);
            if !ok {
                continue;
            }
            let Some(root) = self.root(p) else { continue };
            let part = GroupPart {
                items: g
                    .resources
                    .iter()
                    .map(|(c, a)| (p, c.unwrap_or(0), *a))
                    .collect(),
                providers: vec![p],
            };
            if self.anchor_allowed(root) {
                by_anchor.entry(root).or_default().push(part.clone());
            }
            if self.is_sharing(p) {
                for anchor in self.sharing_anchors(p) {
                    if anchor != root && self.anchor_allowed(anchor) {
                        by_anchor.entry(anchor).or_default().push(part.clone());
                    }
                }
            }
        }
        by_anchor
    }

    /// The unnumbered group's parts, by anchor: one provider per class from the tree or its
    /// sharing providers, with the traits of the chosen providers judged together.
    fn spread_parts(&self, g: &Group) -> BTreeMap<ProviderId, Vec<GroupPart>> {
        let mut by_anchor: BTreeMap<ProviderId, Vec<GroupPart>> = BTreeMap::new();
        if g.required_unknown
            || g.resources.iter().any(|(c, _)| c.is_none())
            || g.member_of
                .as_ref()
                .is_some_and(|m| m.iter().any(Vec::is_empty))
        {
            return by_anchor;
        }
        let tree_root = match g.in_tree {
            Some(None) => return by_anchor,
            Some(Some(p)) => match self.root(p) {
                Some(r) => Some(r),
                None => return by_anchor,
            },
            None => None,
        };
        let in_aggs = |p: ProviderId| {
            g.member_of
                .as_ref()
                .is_none_or(|m| self.in_aggregates(p, m))
        };
        let keep = |p: ProviderId, anchor: ProviderId| {
            self.anchor_allowed(anchor)
                && (g.member_of.is_none() || in_aggs(p) || in_aggs(anchor))
                && !(self.in_any_aggregate(p, &g.forbidden_aggregates)
                    || self.in_any_aggregate(anchor, &g.forbidden_aggregates))
                && !self.has_forbidden(p, g)
        };
        // Per class: anchor → providers able to supply it, in tree order.
        let order = self.providers_in_order(tree_root);
        let mut per_class: Vec<BTreeMap<ProviderId, Vec<ProviderId>>> = Vec::new();
        for (c, a) in &g.resources {
            let class = c.unwrap_or(0);
            let mut m: BTreeMap<ProviderId, Vec<ProviderId>> = BTreeMap::new();
            for &p in &order {
                if self.fits(p, class, *a)
                    && let Some(root) = self.root(p)
                    && keep(p, root)
                {
                    m.entry(root).or_default().push(p);
                }
            }
            if tree_root.is_none() {
                for &s in &self.index.sharing {
                    if self.root(s).is_none() || !self.fits(s, class, *a) {
                        continue;
                    }
                    // Only sharing providers in the requested aggregates share (Placement intersects them).
                    if g.member_of
                        .as_ref()
                        .is_some_and(|mo| !self.in_aggregates(s, mo))
                    {
                        continue;
                    }
                    for anchor in self.sharing_anchors(s) {
                        if keep(s, anchor) {
                            let list = m.entry(anchor).or_default();
                            if !list.contains(&s) {
                                list.push(s);
                            }
                        }
                    }
                }
            }
            if m.is_empty() {
                return BTreeMap::new();
            }
            per_class.push(m);
        }
        let Some(first) = per_class.first() else {
            return by_anchor;
        };
        for &anchor in first.keys() {
            let lists: Option<Vec<&Vec<ProviderId>>> =
                per_class.iter().map(|m| m.get(&anchor)).collect();
            let Some(lists) = lists else { continue };
            let mut parts = Vec::new();
            product(&lists, |choice| {
                let traits_ok = g.required.iter().all(|any| {
                    choice.iter().any(|p| {
                        let prov = self.index.get(*p);
                        any.iter().any(|t| prov.has_trait(*t))
                    })
                });
                if traits_ok {
                    let items: Vec<(ProviderId, ClassId, i64)> = choice
                        .iter()
                        .zip(&g.resources)
                        .map(|(p, (c, a))| (*p, c.unwrap_or(0), *a))
                        .collect();
                    let mut providers: Vec<ProviderId> = choice.to_vec();
                    providers.sort_unstable();
                    providers.dedup();
                    parts.push(GroupPart { items, providers });
                }
            });
            if !parts.is_empty() {
                by_anchor.insert(anchor, parts);
            }
        }
        by_anchor
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
    let trait_id = |t: &String| index.traits.get(t);
    let mut required_unknown = false;
    let required = q
        .required
        .iter()
        .map(|any| {
            let ids: Vec<TraitId> = any.iter().filter_map(trait_id).collect();
            if ids.is_empty() {
                required_unknown = true;
            }
            ids
        })
        .collect();
    let member_of = (!q.member_of.is_empty()).then(|| {
        q.member_of
            .iter()
            .map(|any| {
                any.iter()
                    .filter_map(|a| index.aggregate_names.get(a))
                    .collect()
            })
            .collect()
    });
    let in_tree = q.in_tree.as_ref().map(|u| {
        let names = index.names_with_uuid(u);
        let lower = u.to_ascii_lowercase();
        let names = if names.is_empty() {
            index.names_with_uuid(&lower)
        } else {
            names
        };
        names.first().and_then(|n| index.id(n))
    });
    Group {
        suffix: q.suffix.clone(),
        same_provider: q.use_same_provider,
        resources: q
            .resources
            .iter()
            .map(|(c, a)| (index.classes.get(c), *a))
            .collect(),
        required,
        required_unknown,
        forbidden: q.forbidden.iter().filter_map(trait_id).collect(),
        member_of,
        forbidden_aggregates: q
            .forbidden_aggregates
            .iter()
            .filter_map(|a| index.aggregate_names.get(a))
            .collect(),
        in_tree,
    }
}

/// Runs a query over the index.
pub fn allocation_candidates(index: &ProviderIndex, query: &CandidatesQuery) -> CandidateSet {
    let mut search = Search::new(index);
    let mut result = CandidateSet {
        requested_classes: query
            .groups
            .values()
            .flat_map(|g| g.resources.keys())
            .filter_map(|c| index.classes.get(c))
            .collect(),
        ..Default::default()
    };
    if !query.root_required.is_empty() || !query.root_forbidden.is_empty() {
        let mut allowed = HashSet::new();
        'roots: for &r in &index.roots {
            let p = index.get(r);
            for t in &query.root_required {
                if !index.traits.get(t).is_some_and(|id| p.has_trait(id)) {
                    continue 'roots;
                }
            }
            for t in &query.root_forbidden {
                if index.traits.get(t).is_some_and(|id| p.has_trait(id)) {
                    continue 'roots;
                }
            }
            allowed.insert(r);
        }
        search.anchors = Some(allowed);
    }
    let groups: Vec<Group> = query
        .groups
        .values()
        .map(|g| resolve_group(index, g))
        .collect();
    let mut per_group: Vec<BTreeMap<ProviderId, Vec<GroupPart>>> = Vec::new();
    for g in &groups {
        let parts = if g.same_provider {
            search.single_provider_parts(g)
        } else {
            search.spread_parts(g)
        };
        if parts.is_empty() {
            return result;
        }
        per_group.push(parts);
    }
    let granular = groups.iter().filter(|g| g.same_provider).count();
    let isolate = query.group_policy == Some(GroupPolicy::Isolate);
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
    // Anchors that every group reaches, in root-name order.
    let mut anchors: Vec<ProviderId> = per_group[0]
        .keys()
        .copied()
        .filter(|a| per_group.iter().all(|m| m.contains_key(a)))
        .collect();
    anchors.sort_by(|a, b| index.get(*a).name.cmp(&index.get(*b).name));
    let mut seen: HashSet<Candidate> = HashSet::new();
    for anchor in anchors {
        let lists: Vec<&Vec<GroupPart>> = per_group.iter().map(|m| &m[&anchor]).collect();
        let mut idx = vec![0usize; lists.len()];
        loop {
            let combo: Vec<&GroupPart> = lists.iter().zip(&idx).map(|(l, i)| &l[*i]).collect();
            if let Some(c) = combine(&search, &groups, &combo, granular, isolate, &subtree_groups)
                && seen.insert(c.clone())
            {
                result.candidates.push(c);
            }
            // Next combination.
            let mut k = lists.len();
            let done = loop {
                if k == 0 {
                    break true;
                }
                k -= 1;
                idx[k] += 1;
                if idx[k] < lists[k].len() {
                    break false;
                }
                idx[k] = 0;
            };
            if done {
                break;
            }
        }
    }
    if !query.microversion.at_least(29) {
        result.candidates.retain(|c| {
            let providers: BTreeSet<ProviderId> =
                c.allocations.iter().map(|(p, _, _)| *p).collect();
            let roots: BTreeSet<Option<ProviderId>> =
                providers.iter().map(|p| search.root(*p)).collect();
            providers.len() == roots.len()
        });
        result.summary_only = Some(
            result
                .candidates
                .iter()
                .flat_map(|c| c.allocations.iter().map(|(p, _, _)| *p))
                .collect(),
        );
    }
    if let Some(limit) = query.limit {
        result.candidates.truncate(limit);
        if let Some(only) = &mut result.summary_only {
            let kept: BTreeSet<ProviderId> = result
                .candidates
                .iter()
                .flat_map(|c| c.allocations.iter().map(|(p, _, _)| *p))
                .collect();
            only.retain(|p| kept.contains(p));
        }
    }
    let trees: BTreeSet<ProviderId> = result
        .candidates
        .iter()
        .flat_map(|c| c.allocations.iter().filter_map(|(p, _, _)| search.root(*p)))
        .collect();
    let mut trees: Vec<ProviderId> = trees.into_iter().collect();
    trees.sort_by(|a, b| index.get(*a).name.cmp(&index.get(*b).name));
    result.summary_trees = trees;
    result
}

/// Combines one part per group into a candidate, or `None` when the combination breaks
/// group policy, same_subtree or capacity.
fn combine(
    search: &Search,
    groups: &[Group],
    parts: &[&GroupPart],
    granular: usize,
    isolate: bool,
    subtree_groups: &[Vec<usize>],
) -> Option<Candidate> {
    if isolate {
        let distinct: BTreeSet<ProviderId> = groups
            .iter()
            .zip(parts)
            .filter(|(g, _)| g.same_provider)
            .flat_map(|(_, p)| p.providers.iter().copied())
            .collect();
        if distinct.len() != granular {
            return None;
        }
    }
    for members in subtree_groups {
        let providers: BTreeSet<ProviderId> = members
            .iter()
            .flat_map(|i| parts[*i].providers.iter().copied())
            .collect();
        if !search.same_subtree(&providers) {
            return None;
        }
    }
    let mut sums: BTreeMap<(ProviderId, ClassId), i64> = BTreeMap::new();
    for part in parts {
        for (p, c, a) in &part.items {
            *sums.entry((*p, *c)).or_default() += a;
        }
    }
    for ((p, c), amount) in &sums {
        let prov = search.index.get(*p);
        let inv = prov.inventory(*c)?;
        if prov.used(*c) + amount > inv.capacity() || *amount > inv.max_unit {
            return None;
        }
    }
    let mut mappings: Vec<(String, Vec<ProviderId>)> = Vec::new();
    for (g, part) in groups.iter().zip(parts) {
        match mappings.iter_mut().find(|(s, _)| *s == g.suffix) {
            Some((_, ps)) => ps.extend(part.providers.iter().copied()),
            None => mappings.push((g.suffix.clone(), part.providers.clone())),
        }
    }
    for (_, ps) in &mut mappings {
        ps.sort_unstable();
        ps.dedup();
    }
    Some(Candidate {
        allocations: sums.into_iter().map(|((p, c), a)| (p, c, a)).collect(),
        mappings,
    })
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
