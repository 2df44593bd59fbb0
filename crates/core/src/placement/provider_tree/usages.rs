//! Consumers' allocations and the usages they add up to on each provider (kept for a
//! provider that does not exist yet, and counted once it does), and the amounts a tree
//! has left.

use std::collections::BTreeMap;

use super::{ConsumerAllocations, ProviderIndex};
use crate::placement::ids::ClassId;

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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::Inventory;
    use crate::placement::provider_tree::tests::rp;

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
}
