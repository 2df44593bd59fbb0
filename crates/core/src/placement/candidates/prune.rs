//! Which trees may anchor a candidate, found from the index's postings instead of by
//! walking the trees: each need every candidate has (a provider of a class or with a
//! required trait, a root with a trait) is looked up, and only the roots that meet them
//! all are kept.

use super::facts::{Facts, has_any, in_any, in_every_set, single_ok};
use super::group::Group;
use super::search::Search;
use crate::placement::ids::{AggregateId, ClassId, ProviderId, TraitId};

/// Roots as one bit per provider slot: the trees that may anchor a candidate.
pub(super) struct SlotSet {
    words: Vec<u64>,
}

impl SlotSet {
    pub(super) fn new(slots: usize) -> Self {
        SlotSet {
            words: vec![0; slots.div_ceil(64)],
        }
    }

    pub(super) fn insert(&mut self, id: ProviderId) {
        let i = id.index();
        self.words[i / 64] |= 1 << (i % 64);
    }

    pub(super) fn contains(&self, id: ProviderId) -> bool {
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

    pub(super) fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    pub(super) fn ids(&self) -> impl Iterator<Item = ProviderId> + '_ {
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

impl<'a> Search<'a> {
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

    /// Whether no provider anywhere can give a group one of its required traits, known
    /// from the index's counts of traits by class without reading a provider. Unnumbered,
    /// a required trait counts on a provider that supplies one of the group's classes;
    /// numbered, one provider has the trait and every class. (A trait on a root whose
    /// resources sit in its children, as a NUMA-shaped compute node has it, ends here.)
    fn traits_rule_out(&self, g: &Group) -> bool {
        if g.resources.is_empty() {
            return false;
        }
        let supplies = |t: &TraitId, c: &ClassId| self.index.trait_supplies(*t, *c);
        g.required.iter().any(|any| {
            !any.iter().any(|t| {
                if g.same_provider {
                    g.resources.iter().all(|(c, _)| supplies(t, c))
                } else {
                    g.resources.iter().any(|(c, _)| supplies(t, c))
                }
            })
        })
    }

    /// The roots that may anchor a candidate, or `None` when nothing cheap narrows them.
    /// Only needs every candidate has are used, so no candidate is lost: each group with
    /// resources needs a provider of each class (and, unnumbered, one with each required
    /// trait set) in the tree or shared with it. Needs that look at more providers than
    /// there are trees, or more than `max_cost`, are left to the tree walk.
    pub(super) fn possible_anchors(&self, max_cost: usize) -> Option<SlotSet> {
        if self.groups.iter().any(|g| self.traits_rule_out(g)) {
            return Some(SlotSet::new(self.index.slots.len()));
        }
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
}
