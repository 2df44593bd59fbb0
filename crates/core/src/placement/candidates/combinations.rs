//! A tree's combinations of one part per group: whether one makes a candidate (group
//! policy, same_subtree, summed capacity), and the walk over them group by group, which
//! abandons a prefix as soon as no completion of it can make one.

use smallvec::SmallVec;

use super::answer::only_sharing;
use super::budget::Steps;
use super::group::GroupPart;
use super::search::{Scratch, Search, SubtreeFacts};
use super::visit::{Found, MadeOf, Visit};
use crate::placement::ids::{ClassId, ProviderId};

impl<'a> Search<'a> {
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
    pub(super) fn walk_combinations(&self, s: &mut Scratch, visit: &mut impl Visit) -> bool {
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
            made_of: MadeOf::Parts(&combo),
        };
        if only_sharing(self.index, &s.sums) {
            s.met_only_sharing = true;
            if !s.sharing_seen.insert(found.candidate()) {
                return true;
            }
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
