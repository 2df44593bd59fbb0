//! A tree's candidates counted without walking them, where the count is exact: the
//! unnumbered group alone by inclusion–exclusion over its required trait sets, several
//! groups as the product of their part counts, numbered groups under isolate by the ways
//! they take distinct providers.

use smallvec::{SmallVec, smallvec};

use super::facts::{SpreadAnchor, required_mask};
use super::group::{Group, GroupPart};
use super::search::{Scratch, Search};
use crate::placement::ids::{ClassId, ProviderId};
use crate::placement::packed_tree::PackedTree;

/// Required any-of sets up to which a tree's candidates are counted in closed form.
const MAX_CLOSED_FORM_SETS: usize = 8;

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

impl<'a> Search<'a> {
    /// How many candidates the unnumbered group alone makes from its lists, without
    /// enumerating them; `None` where the count would not be exact.
    ///
    /// A candidate is one provider per class; the classes are distinct, so no amounts are
    /// summed and each provider already fits its amount. What remains is that every
    /// required any-of set has a trait on some chosen provider ([`covered_choices`]).
    pub(super) fn spread_count(
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
    pub(super) fn packed_spread_count(
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
    pub(super) fn counted_combinations(&self, s: &mut Scratch) -> Option<usize> {
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
