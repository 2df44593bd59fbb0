//! The registry of extra spec definitions and the lookup of a key in it.
//!
//! The in-tree registry holds every extra spec Nova itself defines, one file per
//! namespace. Lookup never scans all definitions: the key's namespace (the text before the
//! first `:`) is found in one pass, then literal keys are a hash lookup, the trait and
//! resource-class families are a lookup of the name after the `:`, and the few patterned
//! keys of that namespace (at most 11, in `capabilities:`) are tried in order.

mod accel;
mod aggregate_instance_extra_specs;
mod capabilities;
mod hw;
mod hw_rng;
mod hw_video;
mod null;
mod os;
mod pci_passthrough;
mod quota;
mod resources;
mod traits;
mod vmware;

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

use super::definition::{Definition, DefinitionSpec, Origin, ValueSpec, namespace_of};
use crate::placement::closest;

pub(crate) use hw::CPU_SET;

/// Virt drivers, for the documented-only dependencies.
pub(crate) const LIBVIRT: &[&str] = &["libvirt"];
/// Granular request group suffixes after `resources` and `trait`.
pub(crate) const GROUP_PATTERN: &str = "([a-zA-Z0-9_-]{1,64})?";
pub(crate) const GROUP_DOC: &str = "empty for the unnumbered request group, else a group suffix of 1 to 64 characters from a-z, A-Z, 0-9, _ and -";

pub(crate) fn string() -> ValueSpec {
    ValueSpec::String
}
pub(crate) fn boolean() -> ValueSpec {
    ValueSpec::Bool
}
pub(crate) fn pattern(p: &str) -> ValueSpec {
    ValueSpec::Pattern(p.to_string())
}
pub(crate) fn enumeration(members: &[&str]) -> ValueSpec {
    ValueSpec::Enum(members.iter().map(|m| m.to_string()).collect())
}
pub(crate) fn int_min(min: i64) -> ValueSpec {
    ValueSpec::Int {
        min: Some(min),
        max: None,
    }
}
pub(crate) fn int_range(min: i64, max: i64) -> ValueSpec {
    ValueSpec::Int {
        min: Some(min),
        max: Some(max),
    }
}
pub(crate) fn int_any() -> ValueSpec {
    ValueSpec::Int {
        min: None,
        max: None,
    }
}

/// The namespaces of the in-tree registry, in documentation order, with their
/// definitions. The empty namespace holds keys without one.
pub(crate) fn in_tree_specs() -> Vec<(&'static str, Vec<DefinitionSpec>)> {
    vec![
        ("hw", hw::definitions()),
        ("hw_rng", hw_rng::definitions()),
        ("hw_video", hw_video::definitions()),
        ("os", os::definitions()),
        ("pci_passthrough", pci_passthrough::definitions()),
        ("accel", accel::definitions()),
        ("quota", quota::definitions()),
        ("vmware", vmware::definitions()),
        ("capabilities", capabilities::definitions()),
        (
            "aggregate_instance_extra_specs",
            aggregate_instance_extra_specs::definitions(),
        ),
        ("resources", resources::definitions()),
        ("trait", traits::definitions()),
        ("", null::definitions()),
    ]
}

/// A family of keys `PREFIX{group}:NAME`: a standard name or `CUSTOM_…`.
#[derive(Debug, Default)]
struct Family {
    members: HashMap<String, usize>,
    custom: Option<usize>,
}

/// A set of compiled definitions with the indexes that make lookup fast.
#[derive(Debug, Default)]
pub struct Registry {
    defs: Vec<Definition>,
    literal: HashMap<String, usize>,
    patterned: HashMap<String, Vec<usize>>,
    /// Patterned keys whose namespace itself has a placeholder: tried for every key.
    wildcard: Vec<usize>,
    resources: Family,
    traits: Family,
    /// Every namespace with a definition.
    namespaces: HashSet<String>,
}

/// A definition that failed to compile: its source name and every problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    pub name: String,
    pub problems: Vec<String>,
}

/// Whether `s` is a granular group suffix (or empty, the unnumbered group).
pub(crate) fn is_group_suffix(s: &str) -> bool {
    s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

impl Registry {
    /// The in-tree registry: every extra spec Nova defines.
    pub fn in_tree() -> &'static Registry {
        static REGISTRY: OnceLock<Registry> = OnceLock::new();
        REGISTRY.get_or_init(|| {
            let mut r = Registry::default();
            for (_, specs) in in_tree_specs() {
                for spec in specs {
                    let key = spec.key.clone();
                    let def = spec
                        .compile(Origin::InTree)
                        .unwrap_or_else(|e| panic!("in-tree definition {key}: {e:?}"));
                    r.insert(def, true);
                }
            }
            r
        })
    }

    /// A registry of operators' definitions, in the order given (a literal key defined
    /// twice keeps the first); definitions that do not compile are returned separately.
    pub fn custom(
        specs: impl IntoIterator<Item = (String, DefinitionSpec)>,
    ) -> (Registry, Vec<Rejected>) {
        let mut r = Registry::default();
        let mut rejected = Vec::new();
        for (name, spec) in specs {
            match spec.compile(Origin::Custom(name.clone())) {
                Ok(def) => r.insert(def, false),
                Err(problems) => rejected.push(Rejected { name, problems }),
            }
        }
        (r, rejected)
    }

    fn insert(&mut self, def: Definition, families: bool) {
        let i = self.defs.len();
        if !def.namespace.is_empty() {
            self.namespaces.insert(def.namespace.clone());
        }
        let family = if families {
            match def.namespace.as_str() {
                "resources" => Some(&mut self.resources),
                "trait" => Some(&mut self.traits),
                _ => None,
            }
        } else {
            None
        };
        if let Some(family) = family {
            let name = def.key.split_once(':').map_or("", |(_, n)| n);
            if name.contains('{') {
                family.custom = Some(i);
            } else {
                family.members.insert(name.to_string(), i);
            }
        } else if def.is_literal() {
            self.literal.entry(def.key.clone()).or_insert(i);
        } else if namespace_of(&def.key).contains('{') || !def.key.contains(':') {
            self.wildcard.push(i);
        } else {
            self.patterned
                .entry(namespace_of(&def.key).to_string())
                .or_default()
                .push(i);
        }
        self.defs.push(def);
    }

    /// Every definition, in registration order.
    pub fn definitions(&self) -> &[Definition] {
        &self.defs
    }

    /// Number of definitions.
    pub fn len(&self) -> usize {
        self.defs.len()
    }

    /// Whether the registry is empty.
    pub fn is_empty(&self) -> bool {
        self.defs.is_empty()
    }

    /// The definition that covers `key`, if any.
    pub fn find(&self, key: &str) -> Option<&Definition> {
        let (ns, rest) = key.split_once(':').unwrap_or(("", key));
        if !self.traits.members.is_empty() || !self.resources.members.is_empty() {
            if let Some(family) = self.family_of(ns) {
                if let Some(&i) = family.members.get(rest) {
                    return Some(&self.defs[i]);
                }
                if let Some(i) = family.custom
                    && self.defs[i].matches(key)
                {
                    return Some(&self.defs[i]);
                }
                return None;
            }
        }
        if let Some(&i) = self.literal.get(key) {
            return Some(&self.defs[i]);
        }
        if let Some(list) = self.patterned.get(ns)
            && let Some(&i) = list.iter().find(|&&i| self.defs[i].matches(key))
        {
            return Some(&self.defs[i]);
        }
        self.wildcard
            .iter()
            .find(|&&i| self.defs[i].matches(key))
            .map(|&i| &self.defs[i])
    }

    fn family_of(&self, ns: &str) -> Option<&Family> {
        if let Some(g) = ns.strip_prefix("resources")
            && is_group_suffix(g)
        {
            Some(&self.resources)
        } else if let Some(g) = ns.strip_prefix("trait")
            && is_group_suffix(g)
        {
            Some(&self.traits)
        } else {
            None
        }
    }

    /// Whether the registry defines anything in the namespace of `key` (Nova rejects an
    /// unknown key only in a namespace it knows).
    pub(crate) fn knows_namespace_of(&self, key: &str) -> bool {
        let Some((ns, _)) = key.split_once(':') else {
            return false;
        };
        self.family_of(ns)
            .is_some_and(|f| !f.members.is_empty() || f.custom.is_some())
            || self.namespaces.contains(ns)
    }

    /// A known key close to `key`, for "did you mean".
    pub(crate) fn suggest(&self, key: &str) -> Option<String> {
        let (ns, rest) = key.split_once(':').unwrap_or(("", key));
        if let Some(family) = self.family_of(ns)
            && !family.members.is_empty()
        {
            let names: Vec<&str> = family.members.keys().map(String::as_str).collect();
            return closest(rest, names.iter()).map(|n| format!("{ns}:{n}"));
        }
        // A typo is most often in the name: look in the key's own namespace first.
        let same_ns: Vec<&str> = self
            .literal
            .keys()
            .map(String::as_str)
            .filter(|k| namespace_of(k) == ns)
            .collect();
        closest(key, same_ns.iter()).or_else(|| {
            let keys: Vec<&str> = self.literal.keys().map(String::as_str).collect();
            closest(key, keys.iter())
        })
    }
}

#[cfg(test)]
mod tests;
