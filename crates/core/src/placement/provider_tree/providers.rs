//! Providers put and removed: a provider's slot, its name, uuid and root lookups, the
//! member lists that find it by class, trait and aggregate, what provider configs add to
//! it, and the parent and child links that keep every tree whole whatever order providers
//! come in (children before their parents, parents removed and put back).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use smallvec::SmallVec;

use super::{ProviderIndex, ProviderRecord, next_slots_stamp};
use crate::placement::Inventory;
use crate::placement::ids::{AggregateId, ClassId, ProviderId, TraitId};
use crate::placement::provider::{Children, Provider};
use crate::placement::trait_name::MISC_SHARES_VIA_AGGREGATE;

fn sorted_insert<T: Ord + Copy>(v: &mut Vec<T>, x: T) {
    if let Err(i) = v.binary_search(&x) {
        v.insert(i, x);
    }
}

fn sorted_remove<T: Ord + Copy>(v: &mut Vec<T>, x: T) {
    if let Ok(i) = v.binary_search(&x) {
        v.remove(i);
    }
}

fn has_upper(uuid: &str) -> bool {
    uuid.bytes().any(|b| b.is_ascii_uppercase())
}

fn unordered_remove(v: &mut Vec<ProviderId>, x: ProviderId) {
    if let Some(i) = v.iter().position(|y| *y == x) {
        v.swap_remove(i);
    }
}

impl ProviderIndex {
    fn insert_sorted_by_name(&self, list: &mut Children, id: ProviderId) {
        let name = &self.get(id).name;
        let at = list.partition_point(|x| self.get(*x).name < *name);
        list.insert(at, id);
    }

    /// Adds or replaces a provider. Its allocations, children and config additions stay.
    pub fn upsert_provider(&mut self, record: ProviderRecord) {
        let existing = self.by_name.get(record.name.as_str()).copied();
        let old_root = existing.and_then(|id| self.get(id).root);
        // A provider put back with its uuid and parent (its inventories, traits or
        // aggregates changed) keeps its slot, and every provider keeps its place in each
        // order: they are kept rather than made again over every provider.
        let same_place = existing.is_some_and(|id| {
            let p = self.get(id);
            *p.uuid == *record.uuid && p.parent_name.as_deref() == record.parent.as_deref()
        });
        // Where the put links the provider again in the lists a tree is walked by: its
        // place among its parent's children, and its own children.
        let walked = |index: &Self, id: ProviderId| {
            let p = index.get(id);
            let place = p
                .parent
                .map(|parent| index.get(parent).children.iter().position(|c| *c == id));
            (place, p.children.clone())
        };
        let walked_before = existing.filter(|_| same_place).map(|id| walked(self, id));
        let orders = same_place.then(|| {
            (
                std::mem::take(&mut self.root_order),
                std::mem::take(&mut self.tree_order),
                std::mem::take(&mut self.uuid_order),
            )
        });
        let stamp = self.slots_stamp;
        let (id, old) = match existing {
            Some(id) => (id, Some(self.detach(id))),
            None => {
                let id = self
                    .free
                    .pop()
                    .unwrap_or(ProviderId(self.slots.len() as u32));
                (id, None)
            }
        };
        let own_inventories: Vec<(ClassId, Inventory)> = {
            let mut v: Vec<_> = record
                .inventories
                .iter()
                .map(|(c, i)| (self.classes.intern(c), i.clone()))
                .collect();
            v.sort_by_key(|(c, _)| *c);
            v
        };
        let own_traits: Vec<TraitId> = {
            let mut v: Vec<_> = record
                .traits
                .iter()
                .map(|t| self.traits.intern(t))
                .collect();
            v.sort_unstable();
            v
        };
        let aggregate_words: SmallVec<[u32; 4]> = {
            let mut v: SmallVec<[u32; 4]> = record
                .aggregates
                .iter()
                .map(|a| self.aggregate_names.intern(a).0)
                .collect();
            v.sort_unstable();
            v
        };
        // A provider put back with its uuid leaves every slot's uuid as it was.
        let same_uuids = old.as_ref().is_some_and(|o| *o.uuid == *record.uuid);
        let (children, usages, overlay) = match old {
            Some(o) => (
                // A provider that named itself its parent was its own child; it is linked
                // again below from the new record.
                o.children.into_iter().filter(|c| *c != id).collect(),
                o.usages,
                Some((
                    o.inventories,
                    o.own_inventories,
                    o.trait_words,
                    o.own_traits,
                )),
            ),
            None => {
                let usages = self
                    .orphan_usages
                    .remove(record.name.as_str())
                    .unwrap_or_default();
                let children = self
                    .waiting_for_parent
                    .remove(record.name.as_str())
                    .map(Children::from_vec)
                    .unwrap_or_default();
                (children, usages, None)
            }
        };
        // Keep what provider configs added on top of the old own inventories and traits.
        let (config_inventories, config_traits) = match overlay {
            Some((all_inv, old_own_inv, all_traits, old_own_traits)) => (
                all_inv
                    .into_iter()
                    .filter(|(c, _)| old_own_inv.binary_search_by_key(c, |(k, _)| *k).is_err())
                    .collect(),
                all_traits
                    .into_iter()
                    .map(TraitId)
                    .filter(|t| old_own_traits.binary_search(t).is_err())
                    .collect(),
            ),
            None => (Vec::new(), Vec::new()),
        };
        let provider = Provider {
            name: record.name.as_str().into(),
            uuid: record.uuid.as_str().into(),
            placement_name: record.placement_name.as_deref().map(Into::into),
            parent_name: record.parent.as_deref().map(Into::into),
            parent: None,
            root: None,
            children,
            inventories: Vec::new(),
            own_inventories,
            usages,
            trait_words: SmallVec::new(),
            own_traits,
            aggregate_words,
            fragments: Default::default(),
        };
        if id.index() == self.slots.len() {
            self.slots.push(Some(provider));
        } else {
            self.slots[id.index()] = Some(provider);
        }
        for child in self.get(id).children.clone() {
            self.get_mut(child).parent = Some(id);
        }
        self.by_name.insert(record.name.as_str().into(), id);
        self.by_uuid
            .entry(record.uuid.as_str().into())
            .or_default()
            .push(id);
        self.uuids_with_upper += usize::from(has_upper(&record.uuid));
        self.uuid_order = OnceLock::new();
        self.slots_stamp = if same_uuids {
            stamp
        } else {
            next_slots_stamp()
        };
        self.tree_order = OnceLock::new();
        match record.parent.as_deref() {
            None => {
                self.roots.insert(record.name.as_str().into(), id);
                self.root_order = OnceLock::new();
            }
            Some(parent) => match self.by_name.get(parent).copied() {
                Some(pid) => {
                    self.get_mut(id).parent = Some(pid);
                    let mut kids = std::mem::take(&mut self.get_mut(pid).children);
                    self.insert_sorted_by_name(&mut kids, id);
                    self.get_mut(pid).children = kids;
                }
                None => self
                    .waiting_for_parent
                    .entry(parent.into())
                    .or_default()
                    .push(id),
            },
        }
        let effective = self
            .get(id)
            .with_additions(config_inventories, config_traits);
        self.set_effective(id, effective);
        self.relink_roots(id);
        for agg in self.get(id).aggregate_words.clone() {
            let members = self.member_list(AggregateId(agg));
            members.push(id);
        }
        if let Some((root_order, tree_order, uuid_order)) = orders {
            self.root_order = root_order;
            self.uuid_order = uuid_order;
            // The tree order is kept only where the walk and the roots are as they were:
            // linked again, a provider goes where its name sorts among its siblings (which
            // may not be where it was), and links that make no tree can give its subtree
            // other roots. Only roots in its own subtree can have changed (`relink_roots`
            // writes no other), so only those are compared.
            let same_walk = walked_before == Some(walked(self, id));
            let same_roots = same_walk
                && tree_order.get().is_some_and(|t| {
                    t.root.len() == self.slots.len()
                        && self
                            .subtree(id)
                            .all(|p| t.root[p.index()] == self.get(p).root)
                });
            if same_roots {
                self.tree_order = tree_order;
            }
        }
        let new_root = self.get(id).root;
        self.repack_all([Some(id), old_root, new_root]);
    }

    fn member_list(&mut self, agg: AggregateId) -> &mut Vec<ProviderId> {
        let i = agg.index();
        if self.aggregate_members.len() <= i {
            self.aggregate_members.resize_with(i + 1, Vec::new);
        }
        &mut self.aggregate_members[i]
    }

    /// Sets a provider's effective inventories and traits (from [`Provider::with_additions`])
    /// and the member lists that find it by them.
    fn set_effective(
        &mut self,
        id: ProviderId,
        (inventories, traits): (Vec<(ClassId, Inventory)>, SmallVec<[TraitId; 4]>),
    ) {
        let old_traits = std::mem::take(&mut self.get_mut(id).trait_words);
        for t in &old_traits {
            if let Some(m) = self.trait_members.get_mut(*t as usize) {
                unordered_remove(m, id);
            }
        }
        let old_inventories = std::mem::take(&mut self.get_mut(id).inventories);
        self.count_trait_classes(
            old_traits.iter().map(|t| TraitId(*t)),
            old_inventories.iter().map(|(c, _)| *c),
            false,
        );
        self.count_trait_classes(
            traits.iter().copied(),
            inventories.iter().map(|(c, _)| *c),
            true,
        );
        for (c, _) in &old_inventories {
            if let Some(m) = self.class_members.get_mut(c.index()) {
                unordered_remove(m, id);
            }
        }
        let classes: SmallVec<[ClassId; 8]> = inventories.iter().map(|(c, _)| *c).collect();
        let p = self.get_mut(id);
        p.inventories = inventories;
        p.trait_words = traits.iter().map(|t| t.0).collect();
        for t in traits {
            let i = t.index();
            if self.trait_members.len() <= i {
                self.trait_members.resize_with(i + 1, Vec::new);
            }
            self.trait_members[i].push(id);
        }
        for c in classes {
            let i = c.index();
            if self.class_members.len() <= i {
                self.class_members.resize_with(i + 1, Vec::new);
            }
            self.class_members[i].push(id);
        }
        let sharing = self
            .traits
            .get(MISC_SHARES_VIA_AGGREGATE)
            .is_some_and(|s| self.get(id).has_trait(s));
        if sharing {
            sorted_insert(&mut self.sharing, id);
        } else {
            sorted_remove(&mut self.sharing, id);
        }
    }

    /// Counts one provider in (or out of) [`Self::trait_classes`] for each pair of its
    /// traits and classes.
    fn count_trait_classes(
        &mut self,
        traits: impl Iterator<Item = TraitId>,
        classes: impl Iterator<Item = ClassId> + Clone,
        add: bool,
    ) {
        for t in traits {
            let i = t.index();
            if self.trait_classes.len() <= i {
                self.trait_classes.resize_with(i + 1, Vec::new);
            }
            let counts = &mut self.trait_classes[i];
            for c in classes.clone() {
                match counts.iter().position(|(k, _)| *k == c) {
                    Some(at) if add => counts[at].1 += 1,
                    Some(at) => {
                        counts[at].1 -= 1;
                        if counts[at].1 == 0 {
                            counts.swap_remove(at);
                        }
                    }
                    None if add => counts.push((c, 1)),
                    None => debug_assert!(false, "a trait and class counted out never in"),
                }
            }
        }
    }

    /// Sets what provider configs add to a provider: inventories of classes it does not
    /// have itself, and traits. Replaces earlier additions.
    pub fn set_config_additions(
        &mut self,
        name: &str,
        inventories: &BTreeMap<String, Inventory>,
        traits: &BTreeSet<String>,
    ) {
        let Some(id) = self.id(name) else { return };
        let inv: Vec<(ClassId, Inventory)> = inventories
            .iter()
            .map(|(c, i)| (self.classes.intern(c), i.clone()))
            .collect();
        let tr: Vec<TraitId> = traits.iter().map(|t| self.traits.intern(t)).collect();
        // A merge hands over every provider a config reaches (`$COMPUTE_NODE`: every
        // compute node) after any change; most come back as they were, and resetting them
        // would walk the class and trait member lists and repack their trees each time.
        let p = self.get(id);
        let (inventories, traits) = p.with_additions(inv, tr);
        if inventories == p.inventories
            && traits.iter().map(|t| t.0).eq(p.trait_words.iter().copied())
        {
            return;
        }
        self.set_effective(id, (inventories, traits));
        self.repack_all([self.get(id).root]);
    }

    /// The provider and every provider under it. Under links that make a cycle, the walk
    /// stops after as many steps as there are slots.
    fn subtree(&self, id: ProviderId) -> impl Iterator<Item = ProviderId> + '_ {
        let mut stack = vec![id];
        let mut visited = 0;
        std::iter::from_fn(move || {
            let p = stack.pop()?;
            visited += 1;
            if visited > self.slots.len() {
                return None;
            }
            stack.extend(self.get(p).children.iter().copied());
            Some(p)
        })
    }

    /// Recomputes the cached root of a provider and everything under it; in a cycle, its
    /// members keep no root.
    fn relink_roots(&mut self, id: ProviderId) {
        let root = self.root_id(id).ok();
        let under: Vec<ProviderId> = self.subtree(id).collect();
        for p in under {
            self.get_mut(p).root = root;
        }
    }

    /// Unlinks a provider from every lookup; returns its old contents.
    fn detach(&mut self, id: ProviderId) -> Provider {
        let p = self.slots[id.index()].take().expect("live provider slot");
        self.by_name.remove(&p.name);
        if let Some(v) = self.by_uuid.get_mut(&p.uuid) {
            v.retain(|x| *x != id);
            if v.is_empty() {
                self.by_uuid.remove(&p.uuid);
            }
        }
        self.uuids_with_upper -= usize::from(has_upper(&p.uuid));
        self.uuid_order = OnceLock::new();
        self.slots_stamp = next_slots_stamp();
        self.tree_order = OnceLock::new();
        match (&p.parent_name, p.parent) {
            (None, _) => {
                self.roots.remove(&p.name);
                self.root_order = OnceLock::new();
            }
            (Some(_), Some(pid)) => {
                if self.slots[pid.index()].is_some() {
                    self.get_mut(pid).children.retain(|x| *x != id);
                }
            }
            (Some(name), None) => {
                if let Some(w) = self.waiting_for_parent.get_mut(name) {
                    w.retain(|x| *x != id);
                    if w.is_empty() {
                        self.waiting_for_parent.remove(name);
                    }
                }
            }
        }
        for t in p.traits().iter() {
            if let Some(m) = self.trait_members.get_mut(t.index()) {
                unordered_remove(m, id);
            }
        }
        for (c, _) in &p.inventories {
            if let Some(m) = self.class_members.get_mut(c.index()) {
                unordered_remove(m, id);
            }
        }
        self.count_trait_classes(
            p.traits().iter(),
            p.inventories.iter().map(|(c, _)| *c),
            false,
        );
        for a in p.aggregates().iter() {
            if let Some(m) = self.aggregate_members.get_mut(a.index()) {
                unordered_remove(m, id);
            }
        }
        sorted_remove(&mut self.sharing, id);
        p
    }

    /// Removes a provider. Its children wait for a provider of that name to come back;
    /// its usages are kept and count again if it does.
    pub fn remove_provider(&mut self, name: &str) -> Option<ProviderRecord> {
        let id = self.id(name)?;
        let record = self.record(id);
        let old_root = self.get(id).root;
        let mut p = self.detach(id);
        // A provider that named itself its parent is gone with itself.
        p.children.retain(|c| *c != id);
        for child in &p.children {
            if self.slots[child.index()].is_some() {
                self.get_mut(*child).parent = None;
            }
            self.relink_roots(*child);
        }
        if !p.children.is_empty() {
            self.waiting_for_parent
                .insert(p.name.clone(), p.children.to_vec());
        }
        if !p.usages.is_empty() {
            self.orphan_usages.insert(p.name.clone(), p.usages.clone());
        }
        self.free.push(id);
        self.repack_all([Some(id), old_root]);
        Some(record)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::provider_tree::tests::rp;

    /// Config additions handed over again unchanged leave the provider as it is: no tree
    /// is packed again. Changed ones take effect.
    #[test]
    fn unchanged_config_additions_repack_nothing() {
        let mut idx = ProviderIndex::default();
        idx.upsert_provider(ProviderRecord {
            name: "cn1".into(),
            uuid: crate::placement::derived_provider_uuid("cn1"),
            inventories: [("VCPU".to_string(), Inventory::with_total(8))].into(),
            traits: ["COMPUTE_NODE".to_string()].into(),
            ..Default::default()
        });
        let llc: BTreeMap<String, Inventory> =
            [("CUSTOM_LLC".to_string(), Inventory::with_total(22))].into();
        let p_state: BTreeSet<String> = ["CUSTOM_P_STATE".to_string()].into();
        idx.defer_repacks();
        idx.set_config_additions("cn1", &llc, &p_state);
        assert_eq!(idx.deferred_repacks.as_deref().map(<[_]>::len), Some(1));
        idx.finish_repacks();
        let (inventories, traits) = idx.effective("cn1").unwrap();
        assert!(inventories.contains_key("CUSTOM_LLC") && traits.contains("CUSTOM_P_STATE"));
        idx.defer_repacks();
        idx.set_config_additions("cn1", &llc, &p_state);
        // A trait the provider has itself, given again as an addition, changes nothing.
        let own_too: BTreeSet<String> =
            ["CUSTOM_P_STATE".to_string(), "COMPUTE_NODE".to_string()].into();
        idx.set_config_additions("cn1", &llc, &own_too);
        assert_eq!(idx.deferred_repacks.as_deref().map(<[_]>::len), Some(0));
        // Different additions do take effect.
        idx.set_config_additions("cn1", &BTreeMap::new(), &p_state);
        assert_eq!(idx.deferred_repacks.as_deref().map(<[_]>::len), Some(1));
        idx.finish_repacks();
        assert!(!idx.effective("cn1").unwrap().0.contains_key("CUSTOM_LLC"));
    }

    #[test]
    fn config_additions_and_sharing() {
        let mut idx = ProviderIndex::default();
        let mut r = rp("ceph", None);
        r.inventories
            .insert("DISK_GB".into(), Inventory::with_total(100));
        idx.upsert_provider(r.clone());
        assert!(idx.sharing.is_empty());
        idx.set_config_additions(
            "ceph",
            &[
                ("CUSTOM_X".to_string(), Inventory::with_total(1)),
                ("DISK_GB".to_string(), Inventory::with_total(5)),
            ]
            .into(),
            &[MISC_SHARES_VIA_AGGREGATE.to_string()].into(),
        );
        assert_eq!(
            idx.inventory("ceph", "DISK_GB").unwrap().total,
            100,
            "own inventory wins"
        );
        assert_eq!(idx.inventory("ceph", "CUSTOM_X").unwrap().total, 1);
        assert_eq!(idx.sharing.len(), 1);
        // Replacing the spec keeps the config's additions.
        r.traits.insert("STORAGE_DISK_SSD".into());
        idx.upsert_provider(r);
        assert_eq!(idx.inventory("ceph", "CUSTOM_X").unwrap().total, 1);
        assert!(
            idx.effective("ceph")
                .unwrap()
                .1
                .contains(MISC_SHARES_VIA_AGGREGATE)
        );
        assert!(
            !idx.provider("ceph")
                .unwrap()
                .traits
                .contains(MISC_SHARES_VIA_AGGREGATE)
        );
        idx.set_config_additions("ceph", &BTreeMap::new(), &BTreeSet::new());
        assert!(idx.sharing.is_empty());
        assert!(idx.inventory("ceph", "CUSTOM_X").is_none());
    }
}
