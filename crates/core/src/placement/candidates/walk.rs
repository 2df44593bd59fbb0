//! The walk over trees, in root name order, skipping those pruning rules out (under a limit,
//! only once the first trees are walked); and the visit of one tree: its groups' parts, then
//! its candidates counted in closed form or walked combination by combination.

use super::search::{Scratch, Search};
use super::visit::{Tally, Visit};
use crate::placement::ids::ProviderId;
use crate::placement::tree_shapes::Lookup;

impl<'a> Search<'a> {
    /// Visits every candidate in order; `visit` returns false to stop. True when the
    /// search stopped because its budget ran out.
    pub(super) fn run(&self, visit: &mut impl Visit) -> bool {
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

    /// The trees a search without a limit walks, in the order [`Self::visit_anchors`]
    /// walks them.
    pub(super) fn anchors_in_order(&self) -> Vec<ProviderId> {
        let order = self.index.root_order();
        let roots = &order.roots;
        if !self.prune || self.walk_before_pruning > 0 {
            return roots.clone();
        }
        match self.possible_anchors(self.max_prune_cost) {
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
    pub(super) fn run_over(
        &self,
        anchors: &[ProviderId],
        visit: &mut impl Visit,
        budget: u64,
    ) -> Option<u64> {
        let mut scratch = self.scratch();
        scratch.steps.left = budget;
        for &anchor in anchors {
            if !self.visit_anchor(anchor, &mut scratch, visit) {
                break;
            }
        }
        (!scratch.steps.ran_out).then(|| budget - scratch.steps.left)
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
        match self.possible_anchors(max_cost.min(self.max_prune_cost)) {
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

    /// The unnumbered group alone (1.29+, where the caller only counts): its candidates
    /// are the combinations of its lists, counted without walking them, and the same for
    /// every tree of one shape.
    fn counted_alone(&self, visit: &impl Visit) -> bool {
        self.closed_form
            && self.groups.len() == 1
            && !self.groups[0].same_provider
            && !self.groups[0].resources.is_empty()
            && self.subtree_groups.iter().all(Vec::is_empty)
            && !visit.wants_each()
    }

    /// Visits the candidates of one tree; false when `visit` asks to stop.
    fn visit_anchor(&self, anchor: ProviderId, s: &mut Scratch, visit: &mut impl Visit) -> bool {
        if !s.steps.spend(1) {
            return false;
        }
        visit.tree(anchor);
        let alone = self.counted_alone(visit);
        let shape = if alone && self.groups[0].in_tree_root.is_none() {
            s.shapes.lookup(self.index, anchor)
        } else {
            Lookup::Off
        };
        if let Lookup::Known(id) = shape {
            let n = s.shapes.get(id).copied().unwrap_or_default();
            return n == 0 || visit.many(n);
        }
        if !alone && self.replay && visit.wants_each() {
            return self.visit_replayed(anchor, s, visit);
        }
        self.walk_tree(anchor, shape, s, visit)
    }

    /// Walks one tree: its groups' parts, then its candidates counted in closed form
    /// (remembered under `shape` when it has one) or walked; false when `visit` asks to
    /// stop.
    pub(super) fn walk_tree(
        &self,
        anchor: ProviderId,
        shape: Lookup,
        s: &mut Scratch,
        visit: &mut impl Visit,
    ) -> bool {
        let alone = self.counted_alone(visit);
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
}
