//! Every provider's capacity figures read in one pass over the arena, borrowing its names:
//! what the operator's capacity metrics and `kubeplace top` add up per provider, per tree
//! and per zone, without building any provider's record.

use super::ProviderIndex;
use crate::placement::Inventory;

/// One provider's inventories and usages, borrowed from the index.
#[derive(Debug, Clone)]
pub struct ProviderFigures<'a> {
    /// The object's name.
    pub name: &'a str,
    /// The name Placement's API shows.
    pub shown_name: &'a str,
    /// The object name of its tree's root (its own for a root); `None` outside a
    /// well-formed tree.
    pub root: Option<&'a str>,
    /// The aggregates it is a member of.
    pub aggregates: Vec<&'a str>,
    /// Its effective inventories (provider configs included), by class, with what is used
    /// of each.
    pub classes: Vec<ClassFigures<'a>>,
}

impl ProviderFigures<'_> {
    /// Whether the provider is the root of a tree.
    pub fn is_root(&self) -> bool {
        self.root == Some(self.name)
    }
}

/// One inventory and its usage.
#[derive(Debug, Clone, Copy)]
pub struct ClassFigures<'a> {
    pub class: &'a str,
    pub inventory: &'a Inventory,
    pub used: i64,
}

impl ProviderIndex {
    /// Every provider's figures, in slot order (no order a caller should rely on).
    pub fn figures(&self) -> impl Iterator<Item = ProviderFigures<'_>> {
        self.slots.iter().filter_map(|slot| {
            let p = slot.as_ref()?;
            Some(ProviderFigures {
                name: &p.name,
                shown_name: p.shown_name(),
                root: p.root.map(|r| &*self.get(r).name),
                aggregates: p
                    .aggregates()
                    .iter()
                    .map(|a| self.aggregate_names.name(a))
                    .collect(),
                classes: p
                    .inventories
                    .iter()
                    .map(|(c, inventory)| ClassFigures {
                        class: self.classes.name(*c),
                        inventory,
                        used: p.used(*c),
                    })
                    .collect(),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::rp;
    use super::super::{ConsumerAllocations, ProviderRecord};
    use super::*;

    fn with(mut record: ProviderRecord, class: &str, total: i64) -> ProviderRecord {
        record
            .inventories
            .insert(class.into(), Inventory::with_total(total));
        record
    }

    #[test]
    fn each_provider_with_its_root_aggregates_inventories_and_usage() {
        let mut index = ProviderIndex::default();
        index.upsert_provider(with(rp("cn1", None), "DISK_GB", 100));
        index.upsert_provider(with(rp("cn1-numa0", Some("cn1")), "VCPU", 8));
        index.upsert_provider(with(rp("orphan", Some("missing")), "VCPU", 4));
        index.upsert_allocations(
            "a",
            ConsumerAllocations {
                consumer: "c1".into(),
                items: vec![("cn1-numa0".into(), "VCPU".into(), 3)],
            },
        );
        let mut all: Vec<ProviderFigures<'_>> = index.figures().collect();
        all.sort_by_key(|f| f.name);
        assert_eq!(all.len(), 3);
        assert_eq!(all[0].name, "cn1");
        assert!(all[0].is_root());
        assert_eq!(all[1].root, Some("cn1"));
        assert!(!all[1].is_root());
        assert_eq!(all[1].classes[0].class, "VCPU");
        assert_eq!(all[1].classes[0].inventory.total, 8);
        assert_eq!(all[1].classes[0].used, 3);
        assert_eq!(all[2].root, None, "outside a well-formed tree");
    }
}
