//! The provider index: every provider in a compact arena, linked into trees, with
//! interned resource classes, traits and aggregates, usages from allocations, and the
//! inventories and traits provider configs add. Every change is incremental: one
//! provider or one consumer's allocations at a time, never a rebuild. Only the list of
//! roots in name order is rebuilt, on the first search after the roots change.

use std::collections::{BTreeMap, BTreeSet};

use super::interner::HashMap;
use std::sync::OnceLock;

use smallvec::SmallVec;

use super::Inventory;
use super::ids::{AggregateId, ClassId, Id, ProviderId, TraitId};
use super::interner::Interner;
use super::packed_tree::{PackedTree, PackedTrees, ShapeId, pack};
use super::provider::{Children, Provider};
use super::trait_name::MISC_SHARES_VIA_AGGREGATE;

/// A provider as it is handed to and read back from the index.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ProviderRecord {
    pub name: String,
    pub uuid: String,
    pub parent: Option<String>,
    pub inventories: BTreeMap<String, Inventory>,
    pub traits: BTreeSet<String>,
    pub aggregates: BTreeSet<String>,
}

/// A consumer's allocations: (provider name, resource class, amount).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ConsumerAllocations {
    pub consumer: String,
    pub items: Vec<(String, String, i64)>,
}

/// Why a provider is not part of a well-formed tree.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TreeError {
    #[error("parent {parent:?} does not exist")]
    ParentNotFound { parent: String },
    #[error("parent chain forms a cycle: {}", .cycle.join(" -> "))]
    Cycle { cycle: Vec<String> },
    #[error("uuid {uuid} is also used by provider {other:?}")]
    DuplicateUuid { uuid: String, other: String },
}

/// The roots in name order, and each slot's position in it.
#[derive(Debug, Clone, Default)]
pub(crate) struct RootOrder {
    pub(crate) roots: Vec<ProviderId>,
    /// By slot; `u32::MAX` for a slot that is not a root.
    pub(crate) rank: Vec<u32>,
}

/// Every provider's place in uuid order, for answers that list providers by uuid.
#[derive(Debug, Clone, Default)]
pub(crate) struct UuidOrder {
    /// By slot: how many distinct uuids sort before the provider's (`u32::MAX` for an
    /// empty slot), so that providers sharing a uuid share a rank.
    pub(crate) rank: Vec<u32>,
    /// Whether every uuid is written in JSON as it is, with nothing to escape.
    pub(crate) plain: bool,
}

/// Providers and usages, with the lookups candidate search needs.
#[derive(Debug, Clone, Default)]
pub struct ProviderIndex {
    pub(crate) slots: Vec<Option<Provider>>,
    free: Vec<ProviderId>,
    by_name: HashMap<Box<str>, ProviderId>,
    by_uuid: HashMap<Box<str>, Vec<ProviderId>>,
    /// Children whose parent does not exist yet, by the parent's name.
    waiting_for_parent: HashMap<Box<str>, Vec<ProviderId>>,
    /// Providers without a parent, by name.
    pub(crate) roots: BTreeMap<Box<str>, ProviderId>,
    /// `roots` as a list and a rank per slot, built on first use after the roots change:
    /// walking a list beats walking the map's nodes, and ranks compare without names.
    root_order: OnceLock<RootOrder>,
    /// Built on first use after a provider comes or goes: ranks compare without uuids.
    uuid_order: OnceLock<UuidOrder>,
    pub(crate) classes: Interner<ClassId>,
    pub(crate) traits: Interner<TraitId>,
    pub(crate) aggregate_names: Interner<AggregateId>,
    /// Providers per aggregate.
    pub(crate) aggregate_members: Vec<Vec<ProviderId>>,
    /// Providers per trait (effective traits).
    pub(crate) trait_members: Vec<Vec<ProviderId>>,
    /// Providers per resource class they have an inventory of (effective inventories).
    pub(crate) class_members: Vec<Vec<ProviderId>>,
    /// Providers with the MISC_SHARES_VIA_AGGREGATE trait, sorted.
    pub(crate) sharing: Vec<ProviderId>,
    /// Each root's tree, packed for the search.
    packed: PackedTrees,
    allocations: HashMap<Box<str>, ConsumerAllocations>,
    /// Usages of providers that do not exist (yet), by provider name.
    orphan_usages: HashMap<Box<str>, Vec<(ClassId, i64)>>,
    /// While changes are applied in bulk ([`ProviderIndex::defer_repacks`]): the slots whose
    /// trees are to be packed again once they are all in, so that a tree loaded provider by
    /// provider is packed once, not once per provider.
    deferred_repacks: Option<Vec<ProviderId>>,
}

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

/// The interned names with at least one member provider.
fn names_in_use<'a, I: Id>(
    names: &'a Interner<I>,
    members: &'a [Vec<ProviderId>],
) -> impl Iterator<Item = &'a str> {
    names.iter().filter_map(|(id, name)| {
        let used = members
            .get(id.raw() as usize)
            .is_some_and(|m| !m.is_empty());
        used.then_some(name)
    })
}

fn unordered_remove(v: &mut Vec<ProviderId>, x: ProviderId) {
    if let Some(i) = v.iter().position(|y| *y == x) {
        v.swap_remove(i);
    }
}

fn add_usage(usages: &mut Vec<(ClassId, i64)>, class: ClassId, amount: i64) {
    match usages.binary_search_by_key(&class, |(c, _)| *c) {
        Ok(i) => {
            usages[i].1 += amount;
            if usages[i].1 == 0 {
                usages.remove(i);
            }
        }
        Err(i) => {
            if amount != 0 {
                usages.insert(i, (class, amount));
            }
        }
    }
}

impl ProviderIndex {
    /// The roots in name order, with their ranks.
    pub(crate) fn root_order(&self) -> &RootOrder {
        self.root_order.get_or_init(|| {
            let roots: Vec<ProviderId> = self.roots.values().copied().collect();
            let mut rank = vec![u32::MAX; self.slots.len()];
            for (i, &r) in roots.iter().enumerate() {
                rank[r.index()] = i as u32;
            }
            RootOrder { roots, rank }
        })
    }

    /// Every provider's rank in uuid order.
    pub(crate) fn uuid_order(&self) -> &UuidOrder {
        self.uuid_order.get_or_init(|| {
            let mut by_uuid: Vec<(&str, usize)> = self
                .slots
                .iter()
                .enumerate()
                .filter_map(|(i, p)| p.as_ref().map(|p| (&*p.uuid, i)))
                .collect();
            by_uuid.sort_unstable();
            let mut rank = vec![u32::MAX; self.slots.len()];
            let mut distinct = 0u32;
            for (n, (uuid, slot)) in by_uuid.iter().enumerate() {
                if n > 0 && by_uuid[n - 1].0 != *uuid {
                    distinct += 1;
                }
                rank[*slot] = distinct;
            }
            let plain = by_uuid
                .iter()
                .all(|(uuid, _)| uuid.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\'));
            UuidOrder { rank, plain }
        })
    }

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
    fn pack_tree(&self, root: ProviderId) -> Vec<u32> {
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
    fn repack_all(&mut self, slots: impl IntoIterator<Item = Option<ProviderId>>) {
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

    pub(crate) fn get(&self, id: ProviderId) -> &Provider {
        self.slots[id.index()].as_ref().expect("live provider slot")
    }

    fn get_mut(&mut self, id: ProviderId) -> &mut Provider {
        self.slots[id.index()].as_mut().expect("live provider slot")
    }

    /// The slot of a provider by name.
    pub fn id(&self, name: &str) -> Option<ProviderId> {
        self.by_name.get(name).copied()
    }

    fn name_order(&self, a: ProviderId, b: ProviderId) -> std::cmp::Ordering {
        self.get(a).name.cmp(&self.get(b).name)
    }

    fn insert_sorted_by_name(&self, list: &mut Children, id: ProviderId) {
        let name = &self.get(id).name;
        let at = list.partition_point(|x| self.get(*x).name < *name);
        list.insert(at, id);
    }

    /// Adds or replaces a provider. Its allocations, children and config additions stay.
    pub fn upsert_provider(&mut self, record: ProviderRecord) {
        let existing = self.by_name.get(record.name.as_str()).copied();
        let old_root = existing.and_then(|id| self.get(id).root);
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
        self.uuid_order = OnceLock::new();
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

    /// Recomputes the cached root of a provider and everything under it.
    fn relink_roots(&mut self, id: ProviderId) {
        let root = self.root_id(id).ok();
        let mut stack = vec![id];
        let mut visited = 0;
        while let Some(p) = stack.pop() {
            visited += 1;
            if visited > self.slots.len() {
                break; // a cycle: its members keep no root
            }
            let prov = self.get_mut(p);
            prov.root = root;
            stack.extend(prov.children.iter().copied());
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
        self.uuid_order = OnceLock::new();
        match (&p.parent_name, p.parent) {
            (None, _) => {
                self.roots.remove(&p.name);
                self.root_order = OnceLock::new();
            }
            (Some(_), Some(pid)) => {
                if let Some(parent) = self.slots[pid.index()].as_mut() {
                    parent.children.retain(|x| *x != id);
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
            if let Some(c) = self.slots[child.index()].as_mut() {
                c.parent = None;
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

    /// Adds or replaces a consumer's allocations, keyed by `key` (the Allocation's name).
    pub fn upsert_allocations(&mut self, key: &str, allocations: ConsumerAllocations) {
        self.remove_allocations(key);
        for (provider, class, amount) in &allocations.items {
            self.change_usage(provider, class, *amount);
        }
        self.allocations.insert(key.into(), allocations);
    }

    /// Removes a consumer's allocations.
    pub fn remove_allocations(&mut self, key: &str) -> Option<ConsumerAllocations> {
        let old = self.allocations.remove(key)?;
        for (provider, class, amount) in &old.items {
            self.change_usage(provider, class, -amount);
        }
        Some(old)
    }

    fn change_usage(&mut self, provider: &str, class: &str, delta: i64) {
        let c = self.classes.intern(class);
        match self.id(provider) {
            Some(id) => {
                add_usage(&mut self.get_mut(id).usages, c, delta);
                if let Some(root) = self.get(id).root {
                    let provider = self.slots[id.index()].as_ref().expect("live provider slot");
                    self.packed.set_usage(root, id, c, provider);
                }
            }
            None => {
                let u = self.orphan_usages.entry(provider.into()).or_default();
                add_usage(u, c, delta);
                if u.is_empty() {
                    self.orphan_usages.remove(provider);
                }
            }
        }
    }

    /// A provider's spec-level record (own inventories and traits), rebuilt from the index.
    fn record(&self, id: ProviderId) -> ProviderRecord {
        let p = self.get(id);
        ProviderRecord {
            name: p.name.to_string(),
            uuid: p.uuid.to_string(),
            parent: p.parent_name.as_deref().map(str::to_string),
            inventories: p
                .own_inventories
                .iter()
                .map(|(c, i)| (self.classes.name(*c).to_string(), i.clone()))
                .collect(),
            traits: p
                .own_traits
                .iter()
                .map(|t| self.traits.name(*t).to_string())
                .collect(),
            aggregates: p
                .aggregates()
                .iter()
                .map(|a| self.aggregate_names.name(a).to_string())
                .collect(),
        }
    }

    /// A provider's own inventories (by class name) and own traits, read in place: what
    /// [`ProviderIndex::provider`] gives of them without building the whole record.
    pub fn own_inventories_and_traits(
        &self,
        name: &str,
    ) -> Option<(
        impl Iterator<Item = (&str, &Inventory)>,
        impl Iterator<Item = &str>,
    )> {
        let p = self.get(self.id(name)?);
        Some((
            p.own_inventories
                .iter()
                .map(|(c, i)| (self.classes.name(*c), i)),
            p.own_traits.iter().map(|t| self.traits.name(*t)),
        ))
    }

    /// A provider's own record, by name.
    pub fn provider(&self, name: &str) -> Option<ProviderRecord> {
        self.id(name).map(|id| self.record(id))
    }

    /// Whether a provider of that name exists.
    pub fn contains(&self, name: &str) -> bool {
        self.by_name.contains_key(name)
    }

    /// Every provider's own record, in name order.
    pub fn providers(&self) -> Vec<ProviderRecord> {
        let mut ids: Vec<ProviderId> = self.by_name.values().copied().collect();
        ids.sort_by(|a, b| self.name_order(*a, *b));
        ids.into_iter().map(|id| self.record(id)).collect()
    }

    /// Names of the roots of the trees with a provider in the aggregate `uuid` (compared
    /// without ASCII case), sorted: an aggregate's hosts. Reads the providers' aggregate
    /// ids; no record is built.
    pub fn roots_in_aggregate(&self, uuid: &str) -> Vec<String> {
        let wanted = self.aggregate_names.get_ignoring_case(uuid);
        if wanted.is_empty() {
            return Vec::new();
        }
        let mut roots: Vec<String> = self
            .by_name
            .values()
            .filter(|id| {
                let p = self.get(**id);
                wanted.iter().any(|a| p.aggregates().contains(*a))
            })
            .filter_map(|id| self.root_id(*id).ok())
            .map(|r| self.get(r).name.to_string())
            .collect();
        roots.sort();
        roots.dedup();
        roots
    }

    /// Names of root providers having `trait_name` among their own traits, sorted.
    pub(crate) fn roots_with_own_trait(&self, trait_name: &str) -> Vec<String> {
        let Some(t) = self.traits.get(trait_name) else {
            return Vec::new();
        };
        self.roots
            .values()
            .map(|id| self.get(*id))
            .filter(|p| p.own_traits.binary_search(&t).is_ok())
            .map(|p| p.name.to_string())
            .collect()
    }

    /// Whether a provider is a root (it names no parent) with `trait_name` among its own
    /// traits: one of [`Self::roots_with_own_trait`].
    pub fn is_root_with_own_trait(&self, name: &str, trait_name: &str) -> bool {
        let (Some(id), Some(t)) = (self.id(name), self.traits.get(trait_name)) else {
            return false;
        };
        let p = self.get(id);
        p.parent_name.is_none() && p.own_traits.binary_search(&t).is_ok()
    }

    /// A provider's inventory of a class, provider configs included.
    pub fn inventory(&self, name: &str, class: &str) -> Option<Inventory> {
        let p = self.get(self.id(name)?);
        p.inventory(self.classes.get(class)?).cloned()
    }

    /// A provider's effective inventories and traits (own plus provider configs).
    pub fn effective(&self, name: &str) -> Option<(BTreeMap<String, Inventory>, BTreeSet<String>)> {
        let p = self.get(self.id(name)?);
        Some((
            p.inventories
                .iter()
                .map(|(c, i)| (self.classes.name(*c).to_string(), i.clone()))
                .collect(),
            p.traits()
                .iter()
                .map(|t| self.traits.name(t).to_string())
                .collect(),
        ))
    }

    /// The resource classes some provider has an inventory of (provider configs included),
    /// without building any provider's record.
    pub fn classes_in_use(&self) -> impl Iterator<Item = &str> {
        names_in_use(&self.classes, &self.class_members)
    }

    /// The traits some provider has (provider configs included).
    pub fn traits_in_use(&self) -> impl Iterator<Item = &str> {
        names_in_use(&self.traits, &self.trait_members)
    }

    /// A provider's uuid, by name.
    pub fn uuid(&self, name: &str) -> Option<&str> {
        self.id(name).map(|id| &*self.get(id).uuid)
    }

    /// Names of the providers with this uuid, in name order (not the order they were
    /// stored in, so that what reads them answers alike however the index was built).
    pub fn names_with_uuid(&self, uuid: &str) -> Vec<String> {
        let mut names: Vec<String> = self
            .by_uuid
            .get(uuid)
            .into_iter()
            .flatten()
            .map(|id| self.get(*id).name.to_string())
            .collect();
        names.sort_unstable();
        names
    }

    /// Whether a provider shares its inventory through its aggregates
    /// (`MISC_SHARES_VIA_AGGREGATE` among its own or provider-config traits).
    pub fn shares_via_aggregate(&self, name: &str) -> bool {
        self.id(name)
            .is_some_and(|id| self.sharing.binary_search(&id).is_ok())
    }

    /// The free amount of a class over the tree rooted at `root`: capacity less usage (none
    /// below 0) summed over its providers, what Nova's RAM, CPU and disk weighers weigh.
    pub fn free_in_tree(&self, root: &str, class: &str) -> i64 {
        let (Some(root), Some(class)) = (self.id(root), self.classes.get(class)) else {
            return 0;
        };
        let mut tree = Vec::new();
        self.tree(root, &mut tree);
        tree.iter()
            .map(|&p| {
                let p = self.get(p);
                p.inventory(class)
                    .map_or(0, |inv| inv.capacity().saturating_sub(p.used(class)).max(0))
            })
            .fold(0i64, i64::saturating_add)
    }

    /// Names of the providers in the tree `name` is in, each once: its root's tree, or,
    /// for a provider with no root (its parent missing, or a cycle), the tree under its
    /// highest ancestor that exists. None for a name the index does not hold.
    pub fn tree_members(&self, name: &str) -> Vec<String> {
        let Some(id) = self.id(name) else {
            return Vec::new();
        };
        let mut top = id;
        for _ in 0..self.slots.len() {
            match self.get(top).parent {
                Some(p) if p != id => top = p,
                _ => break,
            }
        }
        // Walked with the providers already seen, since a cycle's children lead back.
        let mut seen = std::collections::HashSet::from([top]);
        let mut stack = vec![top];
        let mut names = Vec::new();
        while let Some(p) = stack.pop() {
            names.push(self.get(p).name.to_string());
            stack.extend(self.get(p).children.iter().filter(|c| seen.insert(**c)));
        }
        names
    }

    /// Names of a provider's direct children, sorted.
    pub fn children(&self, name: &str) -> Vec<String> {
        self.id(name)
            .map(|id| {
                self.get(id)
                    .children
                    .iter()
                    .map(|c| self.get(*c).name.to_string())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Amount in use per resource class on a provider.
    pub fn usages(&self, name: &str) -> Option<BTreeMap<String, i64>> {
        let usages = match self.id(name) {
            Some(id) => &self.get(id).usages,
            None => self.orphan_usages.get(name)?,
        };
        (!usages.is_empty()).then(|| {
            usages
                .iter()
                .map(|(c, n)| (self.classes.name(*c).to_string(), *n))
                .collect()
        })
    }

    /// Amount of one class in use on a provider.
    pub fn used(&self, name: &str, class: &str) -> i64 {
        match (self.id(name), self.classes.get(class)) {
            (Some(id), Some(c)) => self.get(id).used(c),
            _ => 0,
        }
    }

    /// A consumer's allocations by Allocation name.
    pub fn allocations(&self, key: &str) -> Option<&ConsumerAllocations> {
        self.allocations.get(key)
    }

    /// Every consumer's allocations, in no particular order.
    pub fn consumers(&self) -> impl Iterator<Item = &ConsumerAllocations> {
        self.allocations.values()
    }

    /// Number of providers.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// Whether the index holds no provider.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// The root slot of a provider's tree, or why it has none.
    pub(crate) fn root_id(&self, id: ProviderId) -> Result<ProviderId, TreeError> {
        let mut current = id;
        for _ in 0..=self.slots.len() {
            let p = self.get(current);
            match (&p.parent_name, p.parent) {
                (None, _) => return Ok(current),
                (Some(_), Some(pid)) => current = pid,
                (Some(name), None) => {
                    return Err(TreeError::ParentNotFound {
                        parent: name.to_string(),
                    });
                }
            }
            if current == id {
                break;
            }
        }
        // Walked more steps than there are providers, or back to the start: a cycle. The
        // chain is named up to the first provider met twice, so that a provider under a
        // cycle names the same chain however many providers the index holds.
        let mut cycle = vec![self.get(id).name.to_string()];
        let mut seen = vec![id];
        let mut c = self.get(id).parent;
        while let Some(pid) = c {
            cycle.push(self.get(pid).name.to_string());
            if seen.contains(&pid) || seen.len() > self.slots.len() {
                break;
            }
            seen.push(pid);
            c = self.get(pid).parent;
        }
        Err(TreeError::Cycle { cycle })
    }

    /// The root of a provider's tree, or why it has none.
    pub fn root_of(&self, name: &str) -> Result<String, TreeError> {
        let id = self.id(name).ok_or_else(|| TreeError::ParentNotFound {
            parent: name.to_string(),
        })?;
        self.root_id(id).map(|r| self.get(r).name.to_string())
    }

    /// Every reason the provider is not part of a well-formed tree.
    pub fn tree_errors(&self, name: &str) -> Vec<TreeError> {
        let mut errors = Vec::new();
        if let Some(id) = self.id(name) {
            let p = self.get(id);
            // The other named is the first by name, whatever order they were stored in.
            if let Some(other) = self
                .by_uuid
                .get(&p.uuid)
                .into_iter()
                .flatten()
                .filter(|o| **o != id)
                .min_by_key(|o| &self.get(**o).name)
            {
                errors.push(TreeError::DuplicateUuid {
                    uuid: p.uuid.to_string(),
                    other: self.get(*other).name.to_string(),
                });
            }
            if let Err(e) = self.root_id(id) {
                errors.push(e);
            }
        }
        errors
    }

    /// Whether setting `parent` as the parent of `name` would close a cycle.
    pub fn would_cycle(&self, name: &str, parent: &str) -> Option<Vec<String>> {
        let mut chain = vec![name.to_string(), parent.to_string()];
        let mut current = parent.to_string();
        for _ in 0..=self.len() {
            if current == name {
                return Some(chain);
            }
            let next = self
                .id(&current)
                .and_then(|id| self.get(id).parent_name.as_deref().map(str::to_string))?;
            chain.push(next.clone());
            current = next;
        }
        None
    }

    /// Every provider of a tree, root first, depth-first with children in name order.
    pub(crate) fn tree(&self, root: ProviderId, out: &mut Vec<ProviderId>) {
        let start = out.len();
        let mut stack = vec![root];
        while let Some(id) = stack.pop() {
            out.push(id);
            if out.len() - start > self.slots.len() {
                break; // never loop forever, whatever the links say
            }
            stack.extend(self.get(id).children.iter().rev().copied());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn tree_members_are_the_whole_tree_from_any_member() {
        let mut idx = ProviderIndex::default();
        let rp = |name: &str, parent: Option<&str>| ProviderRecord {
            name: name.into(),
            uuid: crate::placement::derived_provider_uuid(name),
            parent: parent.map(Into::into),
            ..Default::default()
        };
        idx.upsert_provider(rp("cn1", None));
        idx.upsert_provider(rp("cn1-numa0", Some("cn1")));
        idx.upsert_provider(rp("cn1-numa0-pf0", Some("cn1-numa0")));
        idx.upsert_provider(rp("cn2", None));
        // An orphan whose parent does not exist, with a child; and a cycle.
        idx.upsert_provider(rp("lost", Some("gone")));
        idx.upsert_provider(rp("lost-child", Some("lost")));
        idx.upsert_provider(rp("a", Some("b")));
        idx.upsert_provider(rp("b", Some("a")));
        let sorted = |mut v: Vec<String>| {
            v.sort();
            v
        };
        for member in ["cn1", "cn1-numa0", "cn1-numa0-pf0"] {
            assert_eq!(
                sorted(idx.tree_members(member)),
                ["cn1", "cn1-numa0", "cn1-numa0-pf0"],
                "{member}"
            );
        }
        assert_eq!(idx.tree_members("cn2"), ["cn2"]);
        assert_eq!(
            sorted(idx.tree_members("lost-child")),
            ["lost", "lost-child"]
        );
        assert_eq!(sorted(idx.tree_members("a")), ["a", "b"]);
        assert!(idx.tree_members("gone").is_empty());
    }

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
    fn classes_and_traits_in_use_are_those_some_provider_has_now() {
        let mut idx = ProviderIndex::default();
        let mut cn1 = rp("cn1", None);
        cn1.inventories
            .insert("CUSTOM_FPGA".to_string(), Inventory::with_total(2));
        cn1.traits.insert("CUSTOM_GOLD".to_string());
        let mut cn2 = rp("cn2", None);
        cn2.inventories
            .insert("VCPU".to_string(), Inventory::with_total(4));
        cn2.traits.insert("HW_CPU_X86_AVX2".to_string());
        idx.upsert_provider(cn1);
        idx.upsert_provider(cn2);
        let in_use = |idx: &ProviderIndex| {
            let mut c: Vec<String> = idx.classes_in_use().map(str::to_string).collect();
            let mut t: Vec<String> = idx.traits_in_use().map(str::to_string).collect();
            c.sort();
            t.sort();
            (c, t)
        };
        assert_eq!(
            in_use(&idx),
            (
                vec!["CUSTOM_FPGA".to_string(), "VCPU".to_string()],
                vec!["CUSTOM_GOLD".to_string(), "HW_CPU_X86_AVX2".to_string()]
            )
        );
        // A class or trait no provider has any more is not in use, though its name stays
        // interned.
        idx.upsert_provider(rp("cn1", None));
        assert_eq!(
            in_use(&idx),
            (
                vec!["VCPU".to_string()],
                vec!["HW_CPU_X86_AVX2".to_string()]
            )
        );
        idx.remove_provider("cn2");
        assert_eq!(in_use(&idx), (vec![], vec![]));
    }

    #[test]
    fn free_in_tree_sums_what_each_provider_has_left() {
        let mut idx = ProviderIndex::default();
        let with = |name: &str, parent: Option<&str>, total: i64| {
            let mut r = rp(name, parent);
            r.inventories
                .insert("VCPU".to_string(), Inventory::with_total(total));
            r
        };
        idx.upsert_provider(with("cn1", None, 4));
        idx.upsert_provider(with("cn1-numa0", Some("cn1"), 8));
        idx.upsert_provider(with("cn1-numa1", Some("cn1"), 8));
        idx.upsert_provider(with("cn2", None, 16));
        let use_ = |idx: &mut ProviderIndex, key: &str, p: &str, n: i64| {
            idx.upsert_allocations(
                key,
                ConsumerAllocations {
                    consumer: key.to_string(),
                    items: vec![(p.to_string(), "VCPU".to_string(), n)],
                },
            )
        };
        use_(&mut idx, "a", "cn1-numa0", 3);
        assert_eq!(idx.free_in_tree("cn1", "VCPU"), 4 + 5 + 8);
        assert_eq!(idx.free_in_tree("cn2", "VCPU"), 16);
        // Usage above capacity (an inventory that shrank) counts as none left, not less.
        use_(&mut idx, "b", "cn1-numa1", 12);
        assert_eq!(idx.free_in_tree("cn1", "VCPU"), 4 + 5);
        // Unknown roots and classes have nothing free.
        assert_eq!(idx.free_in_tree("cn9", "VCPU"), 0);
        assert_eq!(idx.free_in_tree("cn1", "MEMORY_MB"), 0);
    }

    fn rp(name: &str, parent: Option<&str>) -> ProviderRecord {
        ProviderRecord {
            name: name.into(),
            uuid: format!("uuid-{name}"),
            parent: parent.map(Into::into),
            ..Default::default()
        }
    }

    #[test]
    fn roots_and_children() {
        let mut idx = ProviderIndex::default();
        idx.upsert_provider(rp("cn1", None));
        idx.upsert_provider(rp("cn1-numa0", Some("cn1")));
        idx.upsert_provider(rp("cn1-numa0-pf0", Some("cn1-numa0")));
        assert_eq!(idx.root_of("cn1-numa0-pf0").unwrap(), "cn1");
        assert_eq!(idx.children("cn1"), vec!["cn1-numa0"]);
        idx.remove_provider("cn1-numa0");
        assert_eq!(
            idx.root_of("cn1-numa0-pf0"),
            Err(TreeError::ParentNotFound {
                parent: "cn1-numa0".into()
            })
        );
        assert!(idx.children("cn1").is_empty());
        // The parent coming back relinks the waiting child.
        idx.upsert_provider(rp("cn1-numa0", Some("cn1")));
        assert_eq!(idx.root_of("cn1-numa0-pf0").unwrap(), "cn1");
    }

    #[test]
    fn children_may_arrive_before_parents() {
        let mut idx = ProviderIndex::default();
        idx.upsert_provider(rp("b", Some("a")));
        idx.upsert_provider(rp("c", Some("b")));
        assert!(idx.root_of("c").is_err());
        idx.upsert_provider(rp("a", None));
        assert_eq!(idx.root_of("c").unwrap(), "a");
        let mut tree = Vec::new();
        idx.tree(idx.id("a").unwrap(), &mut tree);
        let names: Vec<&str> = tree.iter().map(|id| &*idx.get(*id).name).collect();
        assert_eq!(names, vec!["a", "b", "c"]);
    }

    #[test]
    fn cycles_and_duplicate_uuids_are_reported() {
        let mut idx = ProviderIndex::default();
        idx.upsert_provider(rp("a", Some("b")));
        idx.upsert_provider(rp("b", Some("a")));
        assert!(matches!(idx.root_of("a"), Err(TreeError::Cycle { .. })));
        // Under a cycle, the chain up to where it closes, whatever else the index holds.
        idx.upsert_provider(rp("under", Some("a")));
        let chain = |idx: &ProviderIndex| idx.root_of("under").unwrap_err().to_string();
        assert_eq!(
            chain(&idx),
            "parent chain forms a cycle: under -> a -> b -> a"
        );
        idx.upsert_provider(rp("unrelated", None));
        assert_eq!(
            chain(&idx),
            "parent chain forms a cycle: under -> a -> b -> a"
        );
        let mut dup = rp("c", None);
        dup.uuid = "uuid-a".into();
        idx.upsert_provider(dup);
        assert!(idx.tree_errors("c").contains(&TreeError::DuplicateUuid {
            uuid: "uuid-a".into(),
            other: "a".into()
        }));
        assert_eq!(idx.would_cycle("c", "a"), None);
        idx.upsert_provider(rp("d", None));
        idx.upsert_provider(rp("e", Some("d")));
        assert_eq!(
            idx.would_cycle("d", "e"),
            Some(vec!["d".into(), "e".into(), "d".into()])
        );
        assert_eq!(
            idx.would_cycle("d", "d"),
            Some(vec!["d".into(), "d".into()])
        );
    }

    #[test]
    fn usages_follow_allocations_and_survive_provider_replacement() {
        let mut idx = ProviderIndex::default();
        let alloc = |n: i64| ConsumerAllocations {
            consumer: "c".into(),
            items: vec![
                ("cn1".into(), "VCPU".into(), n),
                ("cn1".into(), "MEMORY_MB".into(), 512),
            ],
        };
        idx.upsert_allocations("a1", alloc(2));
        assert_eq!(
            idx.usages("cn1").unwrap()["VCPU"],
            2,
            "usage of a provider not yet there is kept"
        );
        idx.upsert_provider(rp("cn1", None));
        idx.upsert_allocations("a2", alloc(4));
        assert_eq!(idx.used("cn1", "VCPU"), 6);
        idx.upsert_provider(rp("cn1", None));
        assert_eq!(idx.used("cn1", "VCPU"), 6);
        idx.upsert_allocations("a1", alloc(1));
        assert_eq!(idx.used("cn1", "VCPU"), 5);
        idx.remove_allocations("a2");
        idx.remove_allocations("a1");
        assert!(idx.usages("cn1").is_none());
    }

    /// Checks every posting list against one computed from scratch over the live slots.
    fn assert_posting_lists_fresh(idx: &ProviderIndex) {
        fn sorted(lists: &[Vec<ProviderId>]) -> Vec<Vec<ProviderId>> {
            let mut out: Vec<Vec<ProviderId>> = lists
                .iter()
                .map(|l| {
                    let mut l = l.clone();
                    l.sort_unstable();
                    l
                })
                .collect();
            while out.last().is_some_and(Vec::is_empty) {
                out.pop();
            }
            out
        }
        let mut classes: Vec<Vec<ProviderId>> = Vec::new();
        let mut traits: Vec<Vec<ProviderId>> = Vec::new();
        let mut aggregates: Vec<Vec<ProviderId>> = Vec::new();
        let push = |lists: &mut Vec<Vec<ProviderId>>, key: usize, id: ProviderId| {
            if lists.len() <= key {
                lists.resize_with(key + 1, Vec::new);
            }
            lists[key].push(id);
        };
        for (id, p) in idx.slots.iter().enumerate() {
            let Some(p) = p else { continue };
            let id = ProviderId(id as u32);
            for (c, _) in &p.inventories {
                push(&mut classes, c.index(), id);
            }
            for t in p.traits().iter() {
                push(&mut traits, t.index(), id);
            }
            for a in p.aggregates().iter() {
                push(&mut aggregates, a.index(), id);
            }
        }
        assert_eq!(
            sorted(&idx.class_members),
            sorted(&classes),
            "class_members"
        );
        assert_eq!(sorted(&idx.trait_members), sorted(&traits), "trait_members");
        assert_eq!(
            sorted(&idx.aggregate_members),
            sorted(&aggregates),
            "aggregate_members"
        );
        assert_packs_fresh(idx);
    }

    /// Checks every root's packed tree against one packed from scratch, and that no other
    /// slot has one.
    fn assert_packs_fresh(idx: &ProviderIndex) {
        for (slot, p) in idx.slots.iter().enumerate() {
            let slot = ProviderId(slot as u32);
            match p {
                Some(p) if p.parent_name.is_none() => {
                    assert_eq!(
                        idx.packed(slot).map(|t| t.words()),
                        Some(&idx.pack_tree(slot)[..]),
                        "pack of root {}",
                        p.name
                    );
                }
                _ => assert!(idx.packed(slot).is_none(), "slot {slot} is no root"),
            }
        }
        idx.packed.assert_shapes_fresh();
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

    #[derive(Debug, Clone)]
    enum Change {
        Upsert {
            name: usize,
            parent: Option<usize>,
            classes: Vec<usize>,
            traits: Vec<usize>,
        },
        Remove(usize),
        Allocate {
            key: usize,
            provider: usize,
            class: usize,
            amount: i64,
        },
        Free(usize),
        Configure {
            name: usize,
            classes: Vec<usize>,
            traits: Vec<usize>,
        },
    }

    const CLASSES: [&str; 3] = ["VCPU", "MEMORY_MB", "DISK_GB"];
    const TRAITS: [&str; 3] = ["CUSTOM_A", "CUSTOM_B", "MISC_SHARES_VIA_AGGREGATE"];

    fn change() -> impl proptest::strategy::Strategy<Value = Change> {
        use proptest::prelude::*;
        let subset = |n: usize| proptest::collection::vec(0..n, 0..3);
        prop_oneof![
            4 => (0usize..6, proptest::option::of(0usize..6), subset(3), subset(3)).prop_map(
                |(name, parent, classes, traits)| Change::Upsert { name, parent, classes, traits }
            ),
            1 => (0usize..6).prop_map(Change::Remove),
            3 => (0usize..4, 0usize..6, 0usize..3, 1i64..6).prop_map(
                |(key, provider, class, amount)| Change::Allocate { key, provider, class, amount }
            ),
            1 => (0usize..4).prop_map(Change::Free),
            1 => (0usize..6, subset(3), subset(3)).prop_map(
                |(name, classes, traits)| Change::Configure { name, classes, traits }
            ),
        ]
    }

    fn apply(idx: &mut ProviderIndex, change: Change) {
        let name = |i: usize| format!("rp{i}");
        match change {
            Change::Upsert {
                name: n,
                parent,
                classes,
                traits,
            } => {
                let mut r = rp(&name(n), parent.map(name).as_deref());
                for c in classes {
                    r.inventories
                        .insert(CLASSES[c].to_string(), Inventory::with_total(8));
                }
                r.traits = traits.iter().map(|t| TRAITS[*t].to_string()).collect();
                r.aggregates = [format!("agg-{}", n % 2)].into();
                idx.upsert_provider(r);
            }
            Change::Remove(n) => {
                idx.remove_provider(&name(n));
            }
            Change::Allocate {
                key,
                provider,
                class,
                amount,
            } => idx.upsert_allocations(
                &format!("a{key}"),
                ConsumerAllocations {
                    consumer: format!("c{key}"),
                    items: vec![(name(provider), CLASSES[class].to_string(), amount)],
                },
            ),
            Change::Free(key) => {
                idx.remove_allocations(&format!("a{key}"));
            }
            Change::Configure {
                name: n,
                classes,
                traits,
            } => idx.set_config_additions(
                &name(n),
                &classes
                    .iter()
                    .map(|c| (CLASSES[*c].to_string(), Inventory::with_total(3)))
                    .collect(),
                &traits.iter().map(|t| TRAITS[*t].to_string()).collect(),
            ),
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]

        /// Whatever happens to providers, parents, configs and allocations (cycles and
        /// missing parents included), every lookup equals one built from scratch.
        #[test]
        fn lookups_follow_any_sequence_of_changes(
            changes in proptest::collection::vec(change(), 1..40)
        ) {
            let mut idx = ProviderIndex::default();
            for c in changes {
                apply(&mut idx, c);
                assert_posting_lists_fresh(&idx);
            }
        }
    }

    #[test]
    fn posting_lists_follow_every_change() {
        let mut idx = ProviderIndex::default();
        let with = |name: &str, parent: Option<&str>, classes: &[&str], traits: &[&str]| {
            let mut r = rp(name, parent);
            for c in classes {
                r.inventories
                    .insert(c.to_string(), Inventory::with_total(8));
            }
            r.traits = traits.iter().map(|t| t.to_string()).collect();
            r.aggregates = ["agg-1".to_string()].into();
            r
        };
        idx.upsert_provider(with("cn1", None, &["DISK_GB"], &["COMPUTE_NODE"]));
        idx.upsert_provider(with("cn1-numa0", Some("cn1"), &["VCPU", "MEMORY_MB"], &[]));
        idx.upsert_provider(with("cn2", None, &["VCPU"], &["HW_CPU_X86_AVX2"]));
        assert_posting_lists_fresh(&idx);
        // Replacing a provider changes its classes and traits.
        idx.upsert_provider(with("cn2", None, &["PCPU", "DISK_GB"], &["CUSTOM_GOLD"]));
        assert_posting_lists_fresh(&idx);
        // Config additions add classes the provider lacks, then are replaced and removed.
        idx.set_config_additions(
            "cn1",
            &[
                ("CUSTOM_X".to_string(), Inventory::with_total(1)),
                ("DISK_GB".to_string(), Inventory::with_total(5)),
            ]
            .into(),
            &["CUSTOM_Y".to_string()].into(),
        );
        assert_posting_lists_fresh(&idx);
        idx.upsert_provider(with("cn1", None, &["VCPU"], &[]));
        assert_posting_lists_fresh(&idx);
        idx.set_config_additions(
            "cn1",
            &[("CUSTOM_Z".to_string(), Inventory::with_total(1))].into(),
            &BTreeSet::new(),
        );
        assert_posting_lists_fresh(&idx);
        idx.set_config_additions("cn1", &BTreeMap::new(), &BTreeSet::new());
        assert_posting_lists_fresh(&idx);
        // Deleting frees a slot; the next provider reuses it with other classes.
        let freed = idx.id("cn1-numa0").unwrap();
        idx.remove_provider("cn1-numa0");
        assert_posting_lists_fresh(&idx);
        idx.upsert_provider(with("cn3", None, &["SRIOV_NET_VF"], &["HW_NIC_SRIOV"]));
        assert_eq!(idx.id("cn3"), Some(freed), "the freed slot is reused");
        assert_posting_lists_fresh(&idx);
        idx.remove_provider("cn1");
        idx.remove_provider("cn2");
        idx.remove_provider("cn3");
        assert_posting_lists_fresh(&idx);
        assert!(idx.class_members.iter().all(Vec::is_empty));
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
