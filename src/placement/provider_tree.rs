//! The provider index: providers by name and uuid, their trees, and usages.

use std::collections::{BTreeMap, BTreeSet};

use super::Inventory;

/// One provider as the core sees it.
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

/// Providers and usages, keyed by provider name.
#[derive(Debug, Clone, Default)]
pub struct ProviderIndex {
    providers: BTreeMap<String, ProviderRecord>,
    by_uuid: BTreeMap<String, BTreeSet<String>>,
    children: BTreeMap<String, BTreeSet<String>>,
    allocations: BTreeMap<String, ConsumerAllocations>,
    usages: BTreeMap<String, BTreeMap<String, i64>>,
}

impl ProviderIndex {
    /// Adds or replaces a provider.
    pub fn upsert_provider(&mut self, record: ProviderRecord) {
        self.remove_provider(&record.name.clone());
        self.by_uuid
            .entry(record.uuid.clone())
            .or_default()
            .insert(record.name.clone());
        if let Some(parent) = &record.parent {
            self.children
                .entry(parent.clone())
                .or_default()
                .insert(record.name.clone());
        }
        self.providers.insert(record.name.clone(), record);
    }

    /// Removes a provider; its allocations stay and count again if it comes back.
    pub fn remove_provider(&mut self, name: &str) -> Option<ProviderRecord> {
        let old = self.providers.remove(name)?;
        if let Some(names) = self.by_uuid.get_mut(&old.uuid) {
            names.remove(name);
            if names.is_empty() {
                self.by_uuid.remove(&old.uuid);
            }
        }
        if let Some(parent) = &old.parent
            && let Some(kids) = self.children.get_mut(parent)
        {
            kids.remove(name);
            if kids.is_empty() {
                self.children.remove(parent);
            }
        }
        Some(old)
    }

    /// Adds or replaces a consumer's allocations, keyed by `key` (the Allocation's name).
    pub fn upsert_allocations(&mut self, key: &str, allocations: ConsumerAllocations) {
        self.remove_allocations(key);
        for (provider, class, amount) in &allocations.items {
            *self
                .usages
                .entry(provider.clone())
                .or_default()
                .entry(class.clone())
                .or_default() += amount;
        }
        self.allocations.insert(key.to_string(), allocations);
    }

    /// Removes a consumer's allocations.
    pub fn remove_allocations(&mut self, key: &str) -> Option<ConsumerAllocations> {
        let old = self.allocations.remove(key)?;
        for (provider, class, amount) in &old.items {
            if let Some(classes) = self.usages.get_mut(provider) {
                if let Some(used) = classes.get_mut(class) {
                    *used -= amount;
                    if *used == 0 {
                        classes.remove(class);
                    }
                }
                if classes.is_empty() {
                    self.usages.remove(provider);
                }
            }
        }
        Some(old)
    }

    /// A provider by name.
    pub fn provider(&self, name: &str) -> Option<&ProviderRecord> {
        self.providers.get(name)
    }

    /// Every provider, by name.
    pub fn providers(&self) -> impl Iterator<Item = &ProviderRecord> {
        self.providers.values()
    }

    /// Names of the providers with this uuid.
    pub fn names_with_uuid(&self, uuid: &str) -> impl Iterator<Item = &String> {
        self.by_uuid.get(uuid).into_iter().flatten()
    }

    /// Names of a provider's direct children.
    pub fn children(&self, name: &str) -> impl Iterator<Item = &String> {
        self.children.get(name).into_iter().flatten()
    }

    /// Amount in use per resource class on a provider.
    pub fn usages(&self, name: &str) -> Option<&BTreeMap<String, i64>> {
        self.usages.get(name)
    }

    /// Amount of one class in use on a provider.
    pub fn used(&self, name: &str, class: &str) -> i64 {
        self.usages
            .get(name)
            .and_then(|u| u.get(class))
            .copied()
            .unwrap_or(0)
    }

    /// A consumer's allocations by Allocation name.
    pub fn allocations(&self, key: &str) -> Option<&ConsumerAllocations> {
        self.allocations.get(key)
    }

    /// Number of providers.
    pub fn len(&self) -> usize {
        self.providers.len()
    }

    /// Whether the index holds no provider.
    pub fn is_empty(&self) -> bool {
        self.providers.is_empty()
    }

    /// The root of a provider's tree, or why it has none.
    pub fn root_of(&self, name: &str) -> Result<String, TreeError> {
        let mut seen = vec![name.to_string()];
        let mut current = self
            .providers
            .get(name)
            .ok_or_else(|| TreeError::ParentNotFound {
                parent: name.to_string(),
            })?;
        while let Some(parent) = &current.parent {
            if let Some(at) = seen.iter().position(|s| s == parent) {
                let mut cycle = seen[at..].to_vec();
                cycle.push(parent.clone());
                return Err(TreeError::Cycle { cycle });
            }
            current = self
                .providers
                .get(parent)
                .ok_or_else(|| TreeError::ParentNotFound {
                    parent: parent.clone(),
                })?;
            seen.push(parent.clone());
        }
        Ok(current.name.clone())
    }

    /// Every reason the provider is not part of a well-formed tree.
    pub fn tree_errors(&self, name: &str) -> Vec<TreeError> {
        let mut errors = Vec::new();
        if let Some(record) = self.providers.get(name) {
            if let Some(other) = self.names_with_uuid(&record.uuid).find(|n| *n != name) {
                errors.push(TreeError::DuplicateUuid {
                    uuid: record.uuid.clone(),
                    other: other.clone(),
                });
            }
            if let Err(e) = self.root_of(name) {
                errors.push(e);
            }
        }
        errors
    }

    /// Whether setting `parent` as the parent of `name` would close a cycle.
    pub fn would_cycle(&self, name: &str, parent: &str) -> Option<Vec<String>> {
        let mut chain = vec![name.to_string(), parent.to_string()];
        let mut current = parent.to_string();
        for _ in 0..=self.providers.len() {
            if current == name {
                return Some(chain);
            }
            match self.providers.get(&current).and_then(|p| p.parent.clone()) {
                Some(next) => {
                    chain.push(next.clone());
                    current = next;
                }
                None => return None,
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(idx.children("cn1").collect::<Vec<_>>(), vec!["cn1-numa0"]);
        idx.remove_provider("cn1-numa0");
        assert_eq!(
            idx.root_of("cn1-numa0-pf0"),
            Err(TreeError::ParentNotFound {
                parent: "cn1-numa0".into()
            })
        );
        assert!(idx.children("cn1").next().is_none());
    }

    #[test]
    fn cycles_and_duplicate_uuids_are_reported() {
        let mut idx = ProviderIndex::default();
        idx.upsert_provider(rp("a", Some("b")));
        idx.upsert_provider(rp("b", Some("a")));
        assert_eq!(
            idx.root_of("a"),
            Err(TreeError::Cycle {
                cycle: vec!["a".into(), "b".into(), "a".into()]
            })
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
    fn usages_follow_allocations() {
        let mut idx = ProviderIndex::default();
        let alloc = |n: i64| ConsumerAllocations {
            consumer: "c".into(),
            items: vec![
                ("cn1".into(), "VCPU".into(), n),
                ("cn1".into(), "MEMORY_MB".into(), 512),
            ],
        };
        idx.upsert_allocations("a1", alloc(2));
        idx.upsert_allocations("a2", alloc(4));
        assert_eq!(idx.used("cn1", "VCPU"), 6);
        idx.upsert_allocations("a1", alloc(1));
        assert_eq!(idx.used("cn1", "VCPU"), 5);
        idx.remove_allocations("a2");
        idx.remove_allocations("a1");
        assert!(idx.usages("cn1").is_none());
    }
}
