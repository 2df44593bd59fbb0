//! A live Placement's state as its reads show it: the custom resource classes and traits,
//! the providers (each with its name, parent, generation, inventories, traits and
//! aggregates) and the consumers (each with its project, user, type, generation and
//! allocations). Import reads one from its source; export reads one from its target and
//! makes one of kubeplace's state.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::placement_records::CustomNameSet;
use kubeplace_api::Inventory;

/// One provider as Placement has it.
#[derive(Debug, Clone, PartialEq)]
pub struct Provider {
    pub uuid: String,
    pub name: String,
    /// The parent's uuid.
    pub parent: Option<String>,
    pub generation: u64,
    pub inventories: BTreeMap<String, Inventory>,
    pub traits: BTreeSet<String>,
    pub aggregates: BTreeSet<String>,
}

impl Provider {
    /// A provider with no inventories, traits or aggregates, at generation 0.
    pub fn new(uuid: &str, name: &str, parent: Option<&str>) -> Provider {
        Provider {
            uuid: uuid.to_string(),
            name: name.to_string(),
            parent: parent.map(str::to_string),
            generation: 0,
            inventories: BTreeMap::new(),
            traits: BTreeSet::new(),
            aggregates: BTreeSet::new(),
        }
    }

    /// `provider "NAME" (UUID)`, as messages name a provider.
    pub fn who(&self) -> String {
        format!("provider {:?} ({})", self.name, self.uuid)
    }
}

/// Resources (amount by resource class) per provider uuid.
pub type Allocations = BTreeMap<String, BTreeMap<String, i64>>;

/// One consumer as Placement has it.
#[derive(Debug, Clone, PartialEq)]
pub struct Consumer {
    pub uuid: String,
    pub project_id: String,
    pub user_id: String,
    pub consumer_type: String,
    pub generation: Option<u64>,
    /// Resources per provider uuid.
    pub allocations: Allocations,
}

/// A whole Placement.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// Custom names in the order they were created.
    pub custom_classes: CustomNameSet,
    pub custom_traits: CustomNameSet,
    /// Parents before their children; roots by name, then each tree depth-first by name.
    pub providers: Vec<Provider>,
    pub consumers: BTreeMap<String, Consumer>,
}

impl Snapshot {
    /// The provider with this uuid.
    pub fn provider(&self, uuid: &str) -> Option<&Provider> {
        self.providers.iter().find(|p| p.uuid == uuid)
    }

    /// Providers by uuid.
    pub fn by_uuid(&self) -> HashMap<&str, &Provider> {
        self.providers
            .iter()
            .map(|p| (p.uuid.as_str(), p))
            .collect()
    }
}

/// Providers ordered parents first: roots by name, each tree depth-first by name. A
/// provider whose parent is missing is taken for a root, and providers in a loop of
/// parents come last (neither can be, in a consistent read).
pub fn parents_first(providers: HashMap<String, Provider>) -> Vec<Provider> {
    let mut children: BTreeMap<Option<String>, Vec<(String, String)>> = BTreeMap::new();
    for p in providers.values() {
        let parent = p.parent.clone().filter(|u| providers.contains_key(u));
        children
            .entry(parent)
            .or_default()
            .push((p.name.clone(), p.uuid.clone()));
    }
    for list in children.values_mut() {
        list.sort();
    }
    let mut out = Vec::with_capacity(providers.len());
    let mut stack: Vec<String> = children
        .get(&None)
        .map(|l| l.iter().rev().map(|(_, u)| u.clone()).collect())
        .unwrap_or_default();
    let mut providers = providers;
    while let Some(uuid) = stack.pop() {
        if let Some(kids) = children.get(&Some(uuid.clone())) {
            stack.extend(kids.iter().rev().map(|(_, u)| u.clone()));
        }
        if let Some(p) = providers.remove(&uuid) {
            out.push(p);
        }
    }
    let mut rest: Vec<Provider> = providers.into_values().collect();
    rest.sort_by(|a, b| a.name.cmp(&b.name));
    out.extend(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parents_come_before_their_children() {
        let ps = [
            Provider::new("4", "b_child", Some("2")),
            Provider::new("1", "a", None),
            Provider::new("3", "a_child", Some("1")),
            Provider::new("2", "b", None),
            Provider::new("5", "a_grandchild", Some("3")),
        ];
        let ordered = parents_first(ps.into_iter().map(|p| (p.uuid.clone(), p)).collect());
        let names: Vec<&str> = ordered.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["a", "a_child", "a_grandchild", "b", "b_child"]);
    }
}
