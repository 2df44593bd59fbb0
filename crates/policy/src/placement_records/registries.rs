//! The registries of custom traits and resource classes: Placement refuses a CUSTOM_ name
//! until it is created, and keeps it after the last provider that used it is gone. Each
//! registry keeps its names in the order they were created, the order Placement lists
//! them in.

use indexmap::IndexSet;

/// Custom names in the order they were created.
pub type CustomNameSet = IndexSet<String>;

/// A registry as the registry ConfigMap keeps it: one name a line, in the order created.
pub fn registry_lines(names: &CustomNameSet) -> String {
    names.iter().map(|n| format!("{n}\n")).collect()
}

/// Applies registry changes to a pair of trait and class sets (the book's, or the ones kept
/// in the cluster), or undoes them: a name added goes last, a name removed and put back
/// goes where it was.
pub fn apply_registry_changes(
    traits: &mut CustomNameSet,
    classes: &mut CustomNameSet,
    changes: &[RegistryChange],
    undo: bool,
) {
    for change in changes {
        let set = match change.registry {
            Registry::Traits => &mut *traits,
            Registry::ResourceClasses => &mut *classes,
        };
        if change.added != undo {
            match change.was_at.filter(|_| undo) {
                Some(at) if at <= set.len() => {
                    set.shift_insert(at, change.name.clone());
                }
                _ => {
                    set.insert(change.name.clone());
                }
            }
        } else {
            set.shift_remove(&change.name);
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
    /// Where a deleted name was in its registry, so that undoing the delete puts it back
    /// there.
    pub was_at: Option<usize>,
}

impl RegistryChange {
    /// `name` created in `registry`.
    pub fn added(registry: Registry, name: impl Into<String>) -> RegistryChange {
        RegistryChange {
            registry,
            name: name.into(),
            added: true,
            was_at: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> CustomNameSet {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn added_names_go_last_and_an_undone_delete_goes_back_where_it_was() {
        let (mut traits, mut classes) = (names(&["CUSTOM_B", "CUSTOM_A"]), names(&[]));
        let add = RegistryChange::added(Registry::Traits, "CUSTOM_0");
        apply_registry_changes(&mut traits, &mut classes, &[add], false);
        assert_eq!(traits, names(&["CUSTOM_B", "CUSTOM_A", "CUSTOM_0"]));
        assert_eq!(
            traits.iter().collect::<Vec<_>>(),
            ["CUSTOM_B", "CUSTOM_A", "CUSTOM_0"]
        );
        let delete = RegistryChange {
            registry: Registry::Traits,
            name: "CUSTOM_B".into(),
            added: false,
            was_at: Some(0),
        };
        apply_registry_changes(
            &mut traits,
            &mut classes,
            std::slice::from_ref(&delete),
            false,
        );
        assert_eq!(traits.iter().collect::<Vec<_>>(), ["CUSTOM_A", "CUSTOM_0"]);
        apply_registry_changes(&mut traits, &mut classes, &[delete], true);
        assert_eq!(
            traits.iter().collect::<Vec<_>>(),
            ["CUSTOM_B", "CUSTOM_A", "CUSTOM_0"]
        );
        assert!(classes.is_empty());
    }
}
