//! Providers read back, one by name or all of them: their records, inventories, traits,
//! aggregates and uuids, and the resource classes and traits some provider has.

use std::collections::{BTreeMap, BTreeSet};

use super::{ProviderIndex, ProviderRecord};
use crate::placement::Inventory;
use crate::placement::ids::{ClassId, Id, ProviderId, TraitId};
use crate::placement::interner::Interner;

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

impl ProviderIndex {
    fn name_order(&self, a: ProviderId, b: ProviderId) -> std::cmp::Ordering {
        self.get(a).name.cmp(&self.get(b).name)
    }

    /// A provider's spec-level record (own inventories and traits), rebuilt from the index.
    pub(super) fn record(&self, id: ProviderId) -> ProviderRecord {
        let p = self.get(id);
        ProviderRecord {
            name: p.name.to_string(),
            uuid: p.uuid.to_string(),
            placement_name: p.placement_name.as_deref().map(str::to_string),
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

    /// Whether some provider has both this trait and an inventory of this class.
    pub(crate) fn trait_supplies(&self, t: TraitId, c: ClassId) -> bool {
        self.trait_classes
            .get(t.index())
            .is_some_and(|counts| counts.iter().any(|(k, _)| *k == c))
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

    /// Whether a provider has a trait, provider configs included.
    pub fn has_trait(&self, name: &str, trait_name: &str) -> bool {
        let (Some(id), Some(t)) = (self.id(name), self.traits.get(trait_name)) else {
            return false;
        };
        self.get(id).traits().contains(t)
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

    /// The uuid of a provider by the slot the index gave for it.
    pub fn uuid_at(&self, id: ProviderId) -> &str {
        &self.get(id).uuid
    }

    /// Every provider's id and name, in slot order.
    pub fn named_slots(&self) -> impl Iterator<Item = (ProviderId, &str)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, slot)| Some((ProviderId(i as u32), &*slot.as_ref()?.name)))
    }

    /// How many slots the index has, live or not: a table by [`ProviderId::slot`] of
    /// this length has room for every provider.
    pub fn slot_count(&self) -> usize {
        self.slots.len()
    }

    /// The name of the provider with this id.
    pub fn name_at(&self, id: ProviderId) -> &str {
        &self.get(id).name
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

    /// Ids of the providers with this uuid, in no particular order.
    pub fn ids_with_uuid(&self, uuid: &str) -> &[ProviderId] {
        self.by_uuid.get(uuid).map_or(&[], Vec::as_slice)
    }

    /// Ids of the providers whose uuid is `uuid` in any case, in no particular order, when
    /// they can be found without reading every provider's uuid: while no provider's uuid has
    /// an upper-case letter. `None` otherwise.
    pub fn ids_with_uuid_in_any_case(&self, uuid: &str) -> Option<&[ProviderId]> {
        (self.uuids_with_upper == 0).then(|| self.ids_with_uuid(&uuid.to_ascii_lowercase()))
    }

    /// Whether a provider shares its inventory through its aggregates
    /// (`MISC_SHARES_VIA_AGGREGATE` among its own or provider-config traits).
    pub fn shares_via_aggregate(&self, name: &str) -> bool {
        self.id(name)
            .is_some_and(|id| self.sharing.binary_search(&id).is_ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::provider_tree::tests::rp;

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
}
