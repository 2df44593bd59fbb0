//! Why allocation candidates were lost: the answer to "no valid host" that Nova gives
//! only in DEBUG logs and Placement not at all.
//!
//! Three funnels, in the order the search narrows things down:
//! 1. per request group, over every provider of a well-formed tree: each provider is lost
//!    at the first rule of the group it breaks (in_tree, member_of, required and forbidden
//!    traits, inventory and room per class), so the counts add up to the providers;
//! 2. over the trees: each tree is lost at the first of root_required/root_forbidden, a
//!    group no provider left in it (or shared with it) can serve, or, when every group
//!    could be served alone, the combination (group_policy=isolate, same_subtree, summed
//!    amounts, required traits judged together);
//! 3. the candidates the kept trees make, and those `limit` cuts.
//!
//! The group and tree funnels are judged provider by provider, in one pass each; the
//! candidate counts come from the search itself ([`candidates_per_tree`]) under the same
//! [`super::candidates::SEARCH_BUDGET`], so the number explain says survive is the number
//! the search returns.

use std::collections::BTreeMap;

use serde::Serialize;

use super::candidates::{
    Stop, candidates_per_tree, in_any, in_every_set, sharing_by_aggregate, tree_root_of_uuid,
};
use super::ids::{AggregateId, ClassId, ProviderId, TraitId};
use super::provider::Provider;
use super::provider_tree::ProviderIndex;
use super::query::{CandidatesQuery, GroupQuery};

/// One reason candidates were lost, with the names it concerns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all_fields = "camelCase")]
pub enum Loss {
    /// A numbered group asks for no resources, required trait or aggregate: Placement
    /// picks no provider for it.
    SelectsNothing,
    /// Outside the tree `in_tree` names.
    OutsideTree { in_tree: String },
    /// Not in the `member_of` aggregates (any of each set).
    OutsideAggregates { member_of: Vec<Vec<String>> },
    /// In an aggregate `member_of=!` forbids.
    InForbiddenAggregate { aggregates: Vec<String> },
    /// Without any trait of a required set.
    LacksTrait { any_of: Vec<String> },
    /// With a forbidden trait.
    HasForbiddenTrait { name: String },
    /// Without an inventory of the class (for the unnumbered group: of any class it asks).
    NoInventory { classes: Vec<String> },
    /// With an inventory of the class but not the room for the amount asked.
    NoRoom {
        class: String,
        asked: i64,
        largest_free: i64,
    },
    /// With room for the amount, but not in the inventory's units (min_unit, max_unit,
    /// step_size).
    UnitRules { class: String, asked: i64 },
    /// A tree whose root lacks a root_required trait.
    RootLacksTrait { name: String },
    /// A tree whose root has a root_forbidden trait.
    RootHasTrait { name: String },
    /// A tree where no provider (of its own or shared with it) can serve a numbered group.
    NoProviderForGroup { group: String },
    /// A tree with no inventory of a class the unnumbered group asks for.
    NoInventoryInTree { group: String, class: String },
    /// A tree where no provider left for the unnumbered group has room for a class.
    NoRoomInTree {
        group: String,
        class: String,
        asked: i64,
        largest_free: i64,
    },
    /// A tree where no provider supplying the unnumbered group has a trait of a required set.
    NoProviderWithTrait { group: String, any_of: Vec<String> },
    /// A tree where every group has providers alone, but no combination of them is a
    /// candidate.
    GroupsCombined,
}

/// How many were lost to one reason, and the reason in words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    pub count: usize,
    #[serde(flatten)]
    pub loss: Loss,
    pub message: String,
}

/// One request group's funnel over the providers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupFunnel {
    /// The group's suffix; empty for the unnumbered group.
    pub group: String,
    pub providers: usize,
    pub lost: Vec<Step>,
    /// Providers that can serve the group (the unnumbered group: some class of it).
    pub left: usize,
}

/// The funnel over the provider trees.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TreeFunnel {
    pub trees: usize,
    pub lost: Vec<Step>,
    /// Trees that anchor at least one candidate.
    pub with_candidates: usize,
}

/// Where a query's candidates were lost, in order, with counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    pub groups: Vec<GroupFunnel>,
    pub trees: TreeFunnel,
    /// Every candidate, the limit aside (at least this many when `budget_exhausted`).
    pub candidates: usize,
    pub limit: Option<usize>,
    pub cut_by_limit: usize,
    /// What the search returns: `candidates` within the limit.
    pub returned: usize,
    /// Set when counting the candidates ran out of the search's budget.
    pub budget_exhausted: bool,
}

/// A group's place in a funnel: rules in the order they are judged. Per class, the
/// inventory comes before its room.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Rule {
    SelectsNothing,
    OutsideTree,
    OutsideAggregates,
    InForbiddenAggregate,
    LacksTrait(usize),
    HasForbiddenTrait(usize),
    NoInventoryOfAny,
    Class(usize, ClassRule),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum ClassRule {
    NoInventory,
    NoRoom,
    UnitRules,
}

/// A tree's place in the tree funnel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum TreeRule {
    RootLacks(usize),
    RootHas(usize),
    Group(usize, GroupRule),
    Combined,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum GroupRule {
    OutsideTree,
    NoProvider,
    NoTrait(usize),
    NoInventory(usize),
    NoRoom(usize),
}

/// Where `in_tree` points.
#[derive(Clone, Copy)]
enum InTree {
    Any,
    Root(ProviderId),
    /// Names no provider: nothing is in it.
    Nowhere,
}

/// A group with its names looked up in the index; `None` for a name the index has never
/// seen, which no provider matches.
struct Resolved<'q> {
    q: &'q GroupQuery,
    numbered: bool,
    classes: Vec<(Option<ClassId>, &'q str, i64)>,
    required: Vec<Vec<TraitId>>,
    forbidden: Vec<Option<TraitId>>,
    member_of: Vec<Vec<AggregateId>>,
    forbidden_aggregates: Vec<AggregateId>,
    in_tree: InTree,
}

fn resolve<'q>(index: &ProviderIndex, q: &'q GroupQuery) -> Resolved<'q> {
    let in_tree = match &q.in_tree {
        None => InTree::Any,
        Some(u) => match tree_root_of_uuid(index, u) {
            Some(r) => InTree::Root(r),
            // Placement ignores in_tree for a group without resources.
            None if q.resources.is_empty() => InTree::Any,
            None => InTree::Nowhere,
        },
    };
    Resolved {
        q,
        numbered: q.use_same_provider,
        classes: q
            .resources
            .iter()
            .map(|(c, a)| (index.classes.get(c), c.as_str(), *a))
            .collect(),
        required: q
            .required
            .iter()
            .map(|any| any.iter().filter_map(|t| index.traits.get(t)).collect())
            .collect(),
        forbidden: q.forbidden.iter().map(|t| index.traits.get(t)).collect(),
        member_of: q
            .member_of
            .iter()
            .map(|any| {
                any.iter()
                    .filter_map(|a| index.aggregate_names.get(a))
                    .collect()
            })
            .collect(),
        forbidden_aggregates: q
            .forbidden_aggregates
            .iter()
            .filter_map(|a| index.aggregate_names.get(a))
            .collect(),
        in_tree,
    }
}

fn has_any(p: &Provider, wanted: &[TraitId]) -> bool {
    wanted.iter().any(|t| p.has_trait(*t))
}

/// What is free of a class on a provider, never below zero.
fn free(p: &Provider, class: ClassId) -> i64 {
    p.inventory(class)
        .map_or(0, |inv| (inv.capacity() - p.used(class)).max(0))
}

impl Resolved<'_> {
    fn outside_tree(&self, root: ProviderId) -> bool {
        match self.in_tree {
            InTree::Any => false,
            InTree::Root(r) => r != root,
            InTree::Nowhere => true,
        }
    }

    /// The rule a class breaks on a provider, if any.
    fn class_rule(&self, p: &Provider, j: usize) -> Option<ClassRule> {
        let (class, _, amount) = self.classes[j];
        let Some(inv) = class.and_then(|c| p.inventory(c).map(|inv| (c, inv))) else {
            return Some(ClassRule::NoInventory);
        };
        let (c, inv) = inv;
        if inv.admits(p.used(c), amount).is_ok() {
            None
        } else if !inv.fits_capacity(p.used(c), amount) {
            Some(ClassRule::NoRoom)
        } else {
            Some(ClassRule::UnitRules)
        }
    }

    /// The first rule of a numbered group the provider breaks; `None` when it serves the
    /// group alone. The order is Placement's filters', then the classes in the query's.
    fn numbered_rule(&self, p: &Provider, root: ProviderId) -> Option<Rule> {
        let q = self.q;
        if q.resources.is_empty() && q.required.is_empty() && q.member_of.is_empty() {
            return Some(Rule::SelectsNothing);
        }
        if !q.resources.is_empty() && self.outside_tree(root) {
            return Some(Rule::OutsideTree);
        }
        if !in_every_set(p.aggregates(), &self.member_of) {
            return Some(Rule::OutsideAggregates);
        }
        if in_any(p.aggregates(), &self.forbidden_aggregates) {
            return Some(Rule::InForbiddenAggregate);
        }
        if let Some(i) = self.required.iter().position(|any| !has_any(p, any)) {
            return Some(Rule::LacksTrait(i));
        }
        if let Some(i) = self
            .forbidden
            .iter()
            .position(|t| t.is_some_and(|t| p.has_trait(t)))
        {
            return Some(Rule::HasForbiddenTrait(i));
        }
        (0..self.classes.len()).find_map(|j| self.class_rule(p, j).map(|r| Rule::Class(j, r)))
    }

    /// The first rule of the unnumbered group the provider breaks; `None` when it can take
    /// some class of the group. Its required traits are judged on the providers of a
    /// candidate together, so in the tree funnel. A sharing provider serving other trees
    /// is judged on its own aggregates, a tree's provider also on its root's.
    fn unnumbered_rule(
        &self,
        index: &ProviderIndex,
        id: ProviderId,
        root: ProviderId,
    ) -> Option<Rule> {
        if self.outside_tree(root) {
            return Some(Rule::OutsideTree);
        }
        let (p, r) = (index.get(id), index.get(root));
        let shares = index.sharing.binary_search(&id).is_ok();
        if !in_every_set(p.aggregates(), &self.member_of)
            && !in_every_set(r.aggregates(), &self.member_of)
        {
            return Some(Rule::OutsideAggregates);
        }
        if in_any(p.aggregates(), &self.forbidden_aggregates)
            || (!shares && in_any(r.aggregates(), &self.forbidden_aggregates))
        {
            return Some(Rule::InForbiddenAggregate);
        }
        if let Some(i) = self
            .forbidden
            .iter()
            .position(|t| t.is_some_and(|t| p.has_trait(t)))
        {
            return Some(Rule::HasForbiddenTrait(i));
        }
        if self.classes.is_empty() {
            return None;
        }
        // Lost at the first class it has an inventory of, unless some class fits.
        let mut first = None;
        for j in 0..self.classes.len() {
            match self.class_rule(p, j) {
                None => return None,
                Some(ClassRule::NoInventory) => {}
                Some(r) => {
                    first.get_or_insert(Rule::Class(j, r));
                }
            }
        }
        Some(first.unwrap_or(Rule::NoInventoryOfAny))
    }

    fn fits(&self, p: &Provider, j: usize) -> bool {
        self.class_rule(p, j).is_none()
    }
}

/// Counts per rule, and per class the largest free amount among the providers lost there.
struct Tally<R> {
    counts: BTreeMap<R, (usize, i64)>,
}

impl<R: Ord> Tally<R> {
    fn new() -> Self {
        Tally {
            counts: BTreeMap::new(),
        }
    }

    fn add(&mut self, rule: R, free: i64) {
        let e = self.counts.entry(rule).or_insert((0, 0));
        e.0 += 1;
        e.1 = e.1.max(free);
    }
}

/// The whole explanation of a query over the index.
pub fn explain(index: &ProviderIndex, query: &CandidatesQuery) -> Explanation {
    explained(index, query, None).expect("only a stop ends an explanation early")
}

/// [`explain`] that ends, with `None`, when `stop` is asked for: a server stops the
/// explanation of a request that was cancelled or ran past its deadline.
pub fn explain_until(
    index: &ProviderIndex,
    query: &CandidatesQuery,
    stop: &Stop,
) -> Option<Explanation> {
    explained(index, query, Some(stop))
}

fn explained(
    index: &ProviderIndex,
    query: &CandidatesQuery,
    stop: Option<&Stop>,
) -> Option<Explanation> {
    let stopped = || stop.is_some_and(Stop::is_stopped);
    let groups: Vec<Resolved<'_>> = query.groups.values().map(|g| resolve(index, g)).collect();
    let order = index.root_order();
    // Per group, by slot: whether the provider is left for the group; for the unnumbered
    // group, whether it passes the group's filters (room is judged per tree, after traits).
    let mut left: Vec<Vec<bool>> = vec![vec![false; index.slots.len()]; groups.len()];
    let mut funnels = Vec::with_capacity(groups.len());
    for (g, kept) in groups.iter().zip(left.iter_mut()) {
        if stopped() {
            return None;
        }
        let mut tally = Tally::new();
        let mut providers = 0;
        for &root in &order.roots {
            for p in index.root_pack(root).ids() {
                providers += 1;
                let prov = index.get(p);
                let rule = if g.numbered {
                    g.numbered_rule(prov, root)
                } else {
                    g.unnumbered_rule(index, p, root)
                };
                let room_only = matches!(rule, Some(Rule::NoInventoryOfAny | Rule::Class(..)));
                kept[p.index()] = rule.is_none() || (!g.numbered && room_only);
                match rule {
                    None => {}
                    Some(r) => {
                        let free = match r {
                            Rule::Class(j, _) => g.classes[j].0.map_or(0, |c| free(prov, c)),
                            _ => 0,
                        };
                        tally.add(r, free);
                    }
                }
            }
        }
        funnels.push(group_funnel(g, providers, tally));
    }
    let counts = candidates_per_tree(index, query, stop);
    if stopped() {
        return None;
    }
    let trees = tree_funnel(index, query, &groups, &left, &counts.per_tree);
    let limit = query.limit;
    let returned = counts.total.min(limit.unwrap_or(usize::MAX));
    Some(Explanation {
        groups: funnels,
        trees,
        candidates: counts.total,
        limit,
        cut_by_limit: counts.total - returned,
        returned,
        budget_exhausted: counts.exhausted.is_some(),
    })
}

fn group_label(suffix: &str) -> String {
    if suffix.is_empty() {
        "the unnumbered group".to_string()
    } else {
        format!("group {suffix}")
    }
}

fn group_funnel(g: &Resolved<'_>, providers: usize, tally: Tally<Rule>) -> GroupFunnel {
    let q = g.q;
    let lost: Vec<Step> = tally
        .counts
        .into_iter()
        .map(|(rule, (count, largest_free))| {
            let class = |j: usize| (g.classes[j].1.to_string(), g.classes[j].2);
            let loss = match rule {
                Rule::SelectsNothing => Loss::SelectsNothing,
                Rule::OutsideTree => Loss::OutsideTree {
                    in_tree: q.in_tree.clone().unwrap_or_default(),
                },
                Rule::OutsideAggregates => Loss::OutsideAggregates {
                    member_of: q
                        .member_of
                        .iter()
                        .map(|s| s.iter().cloned().collect())
                        .collect(),
                },
                Rule::InForbiddenAggregate => Loss::InForbiddenAggregate {
                    aggregates: q.forbidden_aggregates.iter().cloned().collect(),
                },
                Rule::LacksTrait(i) => Loss::LacksTrait {
                    any_of: q.required[i].iter().cloned().collect(),
                },
                Rule::HasForbiddenTrait(i) => Loss::HasForbiddenTrait {
                    name: q.forbidden.iter().nth(i).cloned().unwrap_or_default(),
                },
                Rule::NoInventoryOfAny => Loss::NoInventory {
                    classes: q.resources.keys().cloned().collect(),
                },
                Rule::Class(j, ClassRule::NoInventory) => Loss::NoInventory {
                    classes: vec![class(j).0],
                },
                Rule::Class(j, ClassRule::NoRoom) => Loss::NoRoom {
                    class: class(j).0,
                    asked: class(j).1,
                    largest_free,
                },
                Rule::Class(j, ClassRule::UnitRules) => Loss::UnitRules {
                    class: class(j).0,
                    asked: class(j).1,
                },
            };
            step(count, loss, "provider")
        })
        .collect();
    let lost_total: usize = lost.iter().map(|s| s.count).sum();
    GroupFunnel {
        group: q.suffix.clone(),
        providers,
        lost,
        left: providers - lost_total,
    }
}

fn step(count: usize, loss: Loss, what: &str) -> Step {
    Step {
        count,
        message: describe(count, &loss, what),
        loss,
    }
}

/// One loss in words: "lacking required trait HW_CPU_X86_AVX2: 3 providers".
fn describe(n: usize, loss: &Loss, what: &str) -> String {
    let why = match loss {
        Loss::SelectsNothing => {
            "not picked, the group asking for no resources, required trait or aggregate".to_string()
        }
        Loss::OutsideTree { in_tree } => format!("outside in_tree {in_tree}"),
        Loss::OutsideAggregates { member_of } => {
            let sets: Vec<String> = member_of.iter().map(|s| s.join(" or ")).collect();
            format!("outside member_of {}", sets.join(" and "))
        }
        Loss::InForbiddenAggregate { aggregates } => {
            format!("in forbidden aggregate {}", aggregates.join(" or "))
        }
        Loss::LacksTrait { any_of } => format!("lacking required trait {}", any_of.join(" or ")),
        Loss::HasForbiddenTrait { name } => format!("with forbidden trait {name}"),
        Loss::NoInventory { classes } => format!("no inventory of {}", classes.join(", ")),
        Loss::NoRoom {
            class,
            asked,
            largest_free,
        } => format!("no room for {class}:{asked} (largest free {largest_free})"),
        Loss::UnitRules { class, asked } => {
            format!("room for {class}:{asked} but not in its units (min_unit, max_unit, step_size)")
        }
        Loss::RootLacksTrait { name } => format!("root without root_required trait {name}"),
        Loss::RootHasTrait { name } => format!("root with root_forbidden trait {name}"),
        Loss::NoProviderForGroup { group } => {
            format!("no provider for {}", group_label(group))
        }
        Loss::NoInventoryInTree { group, class } => {
            format!("no inventory of {class} for {}", group_label(group))
        }
        Loss::NoRoomInTree {
            group,
            class,
            asked,
            largest_free,
        } => format!(
            "no room for {class}:{asked} for {} (largest free {largest_free})",
            group_label(group)
        ),
        Loss::NoProviderWithTrait { group, any_of } => format!(
            "no provider supplying {} with required trait {}",
            group_label(group),
            any_of.join(" or ")
        ),
        Loss::GroupsCombined => "every group served alone but no combination of them \
             (group_policy, same_subtree, summed amounts, traits judged together)"
            .to_string(),
    };
    format!("{why}: {n} {}", plural(n, what))
}

fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        what.to_string()
    } else {
        format!("{what}s")
    }
}

fn tree_funnel(
    index: &ProviderIndex,
    query: &CandidatesQuery,
    groups: &[Resolved<'_>],
    left: &[Vec<bool>],
    with_candidates: &[(ProviderId, usize)],
) -> TreeFunnel {
    let order = index.root_order();
    let sharing = sharing_by_aggregate(index);
    let root_required: Vec<Option<TraitId>> = query
        .root_required
        .iter()
        .map(|t| index.traits.get(t))
        .collect();
    let root_forbidden: Vec<Option<TraitId>> = query
        .root_forbidden
        .iter()
        .map(|t| index.traits.get(t))
        .collect();
    // By slot: a lookup per tree, not a scan of every tree with candidates.
    let mut anchors = vec![false; index.slots.len()];
    for (a, _) in with_candidates {
        anchors[a.index()] = true;
    }
    let has_candidates = |r: ProviderId| anchors[r.index()];
    let mut tally: Tally<TreeRule> = Tally::new();
    let mut tree: Vec<ProviderId> = Vec::new();
    let mut linked: Vec<ProviderId> = Vec::new();
    for &root in &order.roots {
        tree.clear();
        tree.extend(index.root_pack(root).ids());
        linked.clear();
        for &p in &tree {
            for a in index.get(p).aggregates().iter() {
                for &s in sharing.get(a.index()).into_iter().flatten() {
                    if !linked.contains(&s) && !tree.contains(&s) {
                        linked.push(s);
                    }
                }
            }
        }
        let r = index.get(root);
        let rule = if let Some(i) = root_required
            .iter()
            .position(|t| !t.is_some_and(|t| r.has_trait(t)))
        {
            Some(TreeRule::RootLacks(i))
        } else if let Some(i) = root_forbidden
            .iter()
            .position(|t| t.is_some_and(|t| r.has_trait(t)))
        {
            Some(TreeRule::RootHas(i))
        } else {
            groups.iter().enumerate().find_map(|(gi, g)| {
                group_in_tree(index, g, &left[gi], root, &tree, &linked)
                    .map(|rule| TreeRule::Group(gi, rule))
            })
        };
        match rule {
            Some(rule) => {
                let free = match rule {
                    // Among the providers left for the group: room on a lost one is
                    // no room for this request.
                    TreeRule::Group(gi, GroupRule::NoRoom(j)) => {
                        groups[gi].classes[j].0.map_or(0, |c| {
                            tree.iter()
                                .chain(&linked)
                                .filter(|p| left[gi][p.index()])
                                .map(|p| free(index.get(*p), c))
                                .max()
                                .unwrap_or(0)
                        })
                    }
                    _ => 0,
                };
                tally.add(rule, free);
            }
            None if !has_candidates(root) => tally.add(TreeRule::Combined, 0),
            None => {}
        }
    }
    let lost: Vec<Step> = tally
        .counts
        .into_iter()
        .map(|(rule, (count, largest_free))| {
            let name = |set: &std::collections::BTreeSet<String>, i: usize| {
                set.iter().nth(i).cloned().unwrap_or_default()
            };
            let loss = match rule {
                TreeRule::RootLacks(i) => Loss::RootLacksTrait {
                    name: name(&query.root_required, i),
                },
                TreeRule::RootHas(i) => Loss::RootHasTrait {
                    name: name(&query.root_forbidden, i),
                },
                TreeRule::Group(gi, g) => {
                    let q = groups[gi].q;
                    let group = q.suffix.clone();
                    match g {
                        GroupRule::OutsideTree => Loss::OutsideTree {
                            in_tree: q.in_tree.clone().unwrap_or_default(),
                        },
                        GroupRule::NoProvider => Loss::NoProviderForGroup { group },
                        GroupRule::NoInventory(j) => Loss::NoInventoryInTree {
                            group,
                            class: groups[gi].classes[j].1.to_string(),
                        },
                        GroupRule::NoRoom(j) => Loss::NoRoomInTree {
                            group,
                            class: groups[gi].classes[j].1.to_string(),
                            asked: groups[gi].classes[j].2,
                            largest_free,
                        },
                        GroupRule::NoTrait(k) => Loss::NoProviderWithTrait {
                            group,
                            any_of: q.required[k].iter().cloned().collect(),
                        },
                    }
                }
                TreeRule::Combined => Loss::GroupsCombined,
            };
            step(count, loss, "tree")
        })
        .collect();
    TreeFunnel {
        trees: order.roots.len(),
        lost,
        with_candidates: with_candidates.len(),
    }
}

/// Why no provider of a tree (or shared with it) can serve a group, if none can.
fn group_in_tree(
    index: &ProviderIndex,
    g: &Resolved<'_>,
    left: &[bool],
    root: ProviderId,
    tree: &[ProviderId],
    linked: &[ProviderId],
) -> Option<GroupRule> {
    let pool = || {
        tree.iter()
            .chain(linked)
            .copied()
            .filter(|p| left[p.index()])
    };
    if g.numbered {
        return pool().next().is_none().then_some(GroupRule::NoProvider);
    }
    if g.outside_tree(root) {
        return Some(GroupRule::OutsideTree);
    }
    // Every provider lost to the group's filters (aggregates, forbidden traits): that, not
    // room, is why the tree serves nothing.
    if pool().next().is_none() {
        return Some(GroupRule::NoProvider);
    }
    // Traits before room: a tree with the traits but no room is the nearer miss, and the
    // one an operator adds capacity to. A provider counts for a trait when it has an
    // inventory of a class the group asks for (room is judged next).
    let offers = |p: ProviderId| {
        g.classes
            .iter()
            .any(|(c, _, _)| c.is_some_and(|c| index.get(p).inventory(c).is_some()))
    };
    if let Some(k) = g
        .required
        .iter()
        .position(|any| !pool().any(|p| offers(p) && has_any(index.get(p), any)))
    {
        return Some(GroupRule::NoTrait(k));
    }
    (0..g.classes.len()).find_map(|j| {
        if pool().any(|p| g.fits(index.get(p), j)) {
            return None;
        }
        let holds = |p: ProviderId| {
            g.classes[j]
                .0
                .is_some_and(|c| index.get(p).inventory(c).is_some())
        };
        Some(if pool().any(holds) {
            GroupRule::NoRoom(j)
        } else if tree.iter().chain(linked).any(|p| holds(*p)) {
            // The class is there, on providers the group's filters lost.
            GroupRule::NoProvider
        } else {
            GroupRule::NoInventory(j)
        })
    })
}

impl Explanation {
    /// The few reasons that matter most, for a status message, at most `max` lines in
    /// funnel order: the trees lost last (the nearest miss, where capacity would help),
    /// and the largest losses before it; a numbered group's line names its largest loss
    /// of providers.
    pub fn summary(&self, max: usize) -> Vec<String> {
        let lost = &self.trees.lost;
        let mut picked: Vec<usize> = lost.len().checked_sub(1).into_iter().collect();
        let mut by_count: Vec<usize> = (0..lost.len().saturating_sub(1)).collect();
        by_count.sort_by_key(|i| std::cmp::Reverse(lost[*i].count));
        picked.extend(by_count);
        picked.truncate(max);
        picked.sort_unstable();
        let mut lines: Vec<String> = picked.into_iter().map(|i| self.line(&lost[i])).collect();
        if lines.is_empty() && self.returned == 0 && self.trees.trees == 0 {
            lines.push("there are no provider trees".to_string());
        }
        if self.budget_exhausted {
            lines.truncate(max.saturating_sub(1));
            lines.push(format!(
                "counting stopped at the search budget after {} candidates",
                self.candidates
            ));
        }
        lines
    }

    /// One tree loss in words, with the group loss behind it where it is a numbered group's.
    fn line(&self, s: &Step) -> String {
        let Loss::NoProviderForGroup { group } = &s.loss else {
            return s.message.clone();
        };
        match self
            .groups
            .iter()
            .find(|g| g.group == *group)
            .and_then(|g| {
                // The unnumbered group keeps providers without room (judged per tree), so
                // what lost a tree's providers there is one of its filters.
                g.lost
                    .iter()
                    .filter(|l| {
                        !group.is_empty()
                            || !matches!(
                                l.loss,
                                Loss::NoInventory { .. }
                                    | Loss::NoRoom { .. }
                                    | Loss::UnitRules { .. }
                            )
                    })
                    .max_by_key(|l| l.count)
            }) {
            Some(why) => format!("{} (of its providers, {})", s.message, why.message),
            None => s.message.clone(),
        }
    }

    /// The whole explanation as text, one line per step, in order.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for g in &self.groups {
            out.push_str(&format!(
                "{}: {} providers\n",
                capitalized(&group_label(&g.group)),
                g.providers
            ));
            for s in &g.lost {
                out.push_str(&format!("  - {}\n", s.message));
            }
            out.push_str(&format!(
                "  = left: {} {}\n",
                g.left,
                plural(g.left, "provider")
            ));
        }
        out.push_str(&format!("Provider trees: {}\n", self.trees.trees));
        for s in &self.trees.lost {
            out.push_str(&format!("  - {}\n", s.message));
        }
        let kept = self.trees.with_candidates;
        out.push_str(&format!(
            "  = with candidates: {kept} {}\n",
            plural(kept, "tree")
        ));
        let at_least = if self.budget_exhausted {
            "at least "
        } else {
            ""
        };
        out.push_str(&format!("Candidates: {at_least}{}", self.candidates));
        if let Some(limit) = self.limit {
            out.push_str(&format!("; limit {limit} cuts {}", self.cut_by_limit));
        }
        out.push_str(&format!("; returned {}\n", self.returned));
        if self.budget_exhausted {
            out.push_str("Counting stopped at the search budget.\n");
        }
        out
    }
}

fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
