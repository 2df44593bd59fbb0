//! The registries of custom traits and resource classes: Placement refuses a CUSTOM_ name
//! until it is created, and keeps it after the last provider that used it is gone.

use std::collections::BTreeSet;

/// Applies registry changes to a pair of trait and class sets (the book's, or the ones kept
/// in the cluster), or undoes them.
pub fn apply_registry_changes(
    traits: &mut BTreeSet<String>,
    classes: &mut BTreeSet<String>,
    changes: &[RegistryChange],
    undo: bool,
) {
    for change in changes {
        let set = match change.registry {
            Registry::Traits => &mut *traits,
            Registry::ResourceClasses => &mut *classes,
        };
        if change.added != undo {
            set.insert(change.name.clone());
        } else {
            set.remove(&change.name);
        }
    }
}

/// A registry of custom names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Registry {
    Traits,
    ResourceClasses,
}

/// A custom trait or resource class a write created (`added`) or deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryChange {
    pub registry: Registry,
    pub name: String,
    pub added: bool,
}
