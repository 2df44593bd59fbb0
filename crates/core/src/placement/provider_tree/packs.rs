//! Each root's tree packed for the search: packed again as a change touches it, or, while
//! changes are applied in bulk, once after they are all in.

use smallvec::SmallVec;

use super::ProviderIndex;
use crate::placement::ids::ProviderId;
use crate::placement::packed_tree::{PackedTree, ShapeId, pack};

impl ProviderIndex {
    /// A slot's packed tree, when the slot holds a root.
    pub(crate) fn packed(&self, slot: ProviderId) -> Option<PackedTree<'_>> {
        debug_assert!(
            self.deferred_repacks.is_none(),
            "trees are read while their packing is deferred"
        );
        self.packed.get(slot)
    }

    /// A root's shape: roots of one shape have packs alike in all but their slots.
    pub(crate) fn shape(&self, root: ProviderId) -> Option<ShapeId> {
        self.packed.shape(root)
    }

    /// Every [`ShapeId`] is below this.
    pub(crate) fn shape_ids(&self) -> usize {
        self.packed.shape_ids()
    }

    /// A root's packed tree; every root has one.
    pub(crate) fn root_pack(&self, root: ProviderId) -> PackedTree<'_> {
        self.packed(root).expect("every root has a pack")
    }

    /// A root's tree packed from its providers.
    pub(super) fn pack_tree(&self, root: ProviderId) -> Vec<u32> {
        let mut tree = Vec::new();
        self.tree(root, &mut tree);
        pack(tree.into_iter().map(|id| (id, self.get(id))))
    }

    /// Packs a slot's tree again if it holds a root, and drops its pack otherwise.
    fn repack(&mut self, slot: ProviderId) {
        let words = match self.slots.get(slot.index()) {
            Some(Some(p)) if p.parent_name.is_none() => Some(self.pack_tree(slot)),
            _ => None,
        };
        let roots = &self.roots;
        self.packed
            .set(slot, words, || roots.values().copied().collect());
    }

    /// From now until [`ProviderIndex::finish_repacks`], trees are not packed again as
    /// providers change; the search must not run in between.
    pub fn defer_repacks(&mut self) {
        self.deferred_repacks.get_or_insert_with(Vec::new);
    }

    /// Packs every tree changed since [`ProviderIndex::defer_repacks`] once, in root name
    /// order (the order a compaction keeps).
    pub fn finish_repacks(&mut self) {
        let Some(mut slots) = self.deferred_repacks.take() else {
            return;
        };
        slots.sort_unstable();
        slots.dedup();
        slots.sort_by(|a, b| self.slot_name(*a).cmp(self.slot_name(*b)));
        for slot in slots {
            self.repack(slot);
        }
    }

    /// The name of the provider in a slot; empty for a free slot.
    fn slot_name(&self, slot: ProviderId) -> &str {
        match self.slots.get(slot.index()) {
            Some(Some(p)) => &p.name,
            _ => "",
        }
    }

    /// Packs again the trees a change touched: slots that were or became roots of it.
    pub(super) fn repack_all(&mut self, slots: impl IntoIterator<Item = Option<ProviderId>>) {
        if let Some(deferred) = &mut self.deferred_repacks {
            deferred.extend(slots.into_iter().flatten());
            return;
        }
        let mut done: SmallVec<[ProviderId; 4]> = SmallVec::new();
        for s in slots.into_iter().flatten() {
            if !done.contains(&s) {
                done.push(s);
                self.repack(s);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::Inventory;
    use crate::placement::provider_tree::ConsumerAllocations;
    use crate::placement::provider_tree::tests::{assert_packs_fresh, rp};

    /// Changes applied with packing deferred leave every tree packed as changes applied one
    /// by one do: children before and after their parents, a re-parenting, a removal, and
    /// usages that land while a tree waits to be packed.
    #[test]
    fn deferred_packing_packs_each_tree_as_packing_at_once_does() {
        let with_vcpu = |name: &str, parent: Option<&str>| {
            let mut r = rp(name, parent);
            r.inventories
                .insert("VCPU".to_string(), Inventory::with_total(8));
            r
        };
        let claim = |idx: &mut ProviderIndex, key: &str, p: &str| {
            idx.upsert_allocations(
                key,
                ConsumerAllocations {
                    consumer: key.to_string(),
                    items: vec![(p.to_string(), "VCPU".to_string(), 3)],
                },
            )
        };
        let steps = |idx: &mut ProviderIndex| {
            idx.upsert_provider(with_vcpu("cn1-numa0", Some("cn1")));
            claim(idx, "early", "cn1-numa0");
            idx.upsert_provider(with_vcpu("cn1", None));
            idx.upsert_provider(with_vcpu("cn2", None));
            idx.upsert_provider(with_vcpu("cn1-numa1", Some("cn1")));
            idx.upsert_provider(with_vcpu("cn2-numa0", Some("cn2")));
            claim(idx, "late", "cn2-numa0");
            idx.upsert_provider(with_vcpu("cn1-numa1", Some("cn2")));
            idx.upsert_provider(with_vcpu("cn3", None));
            idx.remove_provider("cn3");
        };
        let mut at_once = ProviderIndex::default();
        steps(&mut at_once);
        let mut deferred = ProviderIndex::default();
        deferred.defer_repacks();
        steps(&mut deferred);
        deferred.finish_repacks();
        let packs = |idx: &ProviderIndex| -> Vec<(String, Vec<u32>)> {
            idx.roots
                .iter()
                .map(|(name, id)| (name.to_string(), idx.root_pack(*id).words().to_vec()))
                .collect()
        };
        assert_eq!(packs(&deferred), packs(&at_once));
        assert_eq!(packs(&deferred).len(), 2, "cn1 and cn2");
        let shapes = |idx: &ProviderIndex| -> Vec<bool> {
            let ids: Vec<ProviderId> = idx.roots.values().copied().collect();
            vec![idx.shape(ids[0]) == idx.shape(ids[1])]
        };
        assert_eq!(shapes(&deferred), shapes(&at_once));
    }

    #[test]
    fn packs_are_compacted_in_root_name_order() {
        let mut idx = ProviderIndex::default();
        let with_traits = |name: &str, parent: Option<&str>, traits: usize| {
            let mut r = rp(name, parent);
            r.inventories
                .insert("VCPU".to_string(), Inventory::with_total(8));
            r.traits = (0..traits).map(|t| format!("CUSTOM_T{t}")).collect();
            r
        };
        // Trees arrive in reverse name order, a provider at a time: every arrival replaces
        // its tree's pack, so replaced packs pile up and the arena is compacted.
        for i in (0..300).rev() {
            let root = format!("cn{i:03}");
            idx.upsert_provider(with_traits(&root, None, 1));
            idx.upsert_provider(with_traits(&format!("{root}-numa0"), Some(&root), 0));
            idx.upsert_provider(with_traits(&format!("{root}-numa1"), Some(&root), 0));
        }
        assert_packs_fresh(&idx);
        let order: Vec<ProviderId> = idx.roots.values().copied().collect();
        let (_, garbage) = idx.packed.layout(&order);
        let live: usize = order
            .iter()
            .map(|r| idx.packed(*r).unwrap().words().len())
            .sum();
        assert!(
            garbage <= live.max(1024),
            "garbage {garbage} beside {live} live words"
        );
        // Changing every tree's size leaves the arena compacted at some point in name order.
        let mut compacted_in_order = false;
        for i in 0..300 {
            idx.upsert_provider(with_traits(&format!("cn{i:03}"), None, 3));
            let (in_order, garbage) = idx.packed.layout(&order);
            compacted_in_order |= in_order && garbage == 0;
        }
        assert!(
            compacted_in_order,
            "no compaction laid packs out in name order"
        );
        assert_packs_fresh(&idx);
        // Usage changes rewrite fits in place.
        let (in_order_before, garbage_before) = idx.packed.layout(&order);
        idx.upsert_allocations(
            "a",
            ConsumerAllocations {
                consumer: "c".into(),
                items: vec![("cn007-numa1".into(), "VCPU".into(), 3)],
            },
        );
        assert_eq!(idx.packed.layout(&order), (in_order_before, garbage_before));
        assert_packs_fresh(&idx);
    }
}
