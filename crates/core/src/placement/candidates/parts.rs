//! Each group's parts under one tree: the providers of the tree, or sharing providers linked
//! to it, that serve a numbered group alone; for the unnumbered group, one provider per
//! class, with the traits of the chosen providers judged together.

use smallvec::{SmallVec, smallvec};

use super::budget::Steps;
use super::facts::{Facts, SpreadAnchor, single_ok};
use super::group::{Group, GroupPart};
use super::search::Search;
use crate::placement::ids::ProviderId;
use crate::placement::packed_tree::PackedTree;

impl<'a> Search<'a> {
    /// A numbered group's parts for one anchor: single providers of the tree, or sharing
    /// providers serving it, with everything the group asks.
    pub(super) fn single_provider_parts(
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
    pub(super) fn spread_lists(
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
    pub(super) fn spread_parts(
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
