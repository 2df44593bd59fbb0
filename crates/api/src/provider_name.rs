//! A provider's Placement name and its object name.
//!
//! Placement takes any provider name of 1–200 characters; Nova and Neutron use names such
//! as `cn1_pci_0000_84_00_0` or `cn1:Open vSwitch agent:br-ex`. A ResourceProvider's object
//! name must be a lowercase RFC 1123 subdomain. A Placement name that is one is the object's
//! name; any other is stored under a derived object name (lowercase, other characters made
//! `-`, and a hash of the Placement name so that different names never meet), and the
//! Placement name is kept in the annotation `placement.kubeplace.io/name`. The API answers
//! with the Placement name; `kubectl get` shows the object name.

use crate::ResourceProvider;
use kubeplace_core::placement::derived_provider_uuid;

/// The annotation that keeps a provider's Placement name when its object name differs.
pub const NAME_ANNOTATION: &str = "placement.kubeplace.io/name";

/// Longest object name the API server takes.
const MAX_OBJECT_NAME: usize = 253;

/// Whether `name` can be an object name as it is: a lowercase RFC 1123 subdomain.
pub fn is_object_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_OBJECT_NAME
        && name.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// The object name a Placement name is stored under.
pub fn object_name(placement_name: &str) -> String {
    if is_object_name(placement_name) {
        return placement_name.to_string();
    }
    let mut base = String::new();
    for c in placement_name.chars() {
        let c = c.to_ascii_lowercase();
        let c = if c.is_ascii_lowercase() || c.is_ascii_digit() {
            c
        } else {
            '-'
        };
        if !(c == '-' && (base.is_empty() || base.ends_with('-'))) {
            base.push(c);
        }
    }
    // Room for the hash; the Placement name is at most 200 characters anyway.
    base.truncate(200);
    let base = base.trim_end_matches('-');
    let base = if base.is_empty() { "rp" } else { base };
    let hash: String = derived_provider_uuid(placement_name)
        .chars()
        .filter(char::is_ascii_hexdigit)
        .take(10)
        .collect();
    format!("{base}-{hash}")
}

/// A provider object's Placement name: its annotation, else its object name.
pub fn placement_name(rp: &ResourceProvider) -> String {
    rp.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(NAME_ANNOTATION))
        .cloned()
        .unwrap_or_else(|| rp.metadata.name.clone().unwrap_or_default())
}

/// Names `rp` for `placement_name`: its object name, and the annotation when they differ.
pub fn name_provider(rp: &mut ResourceProvider, placement_name: &str) {
    let object = object_name(placement_name);
    let annotations = rp.metadata.annotations.get_or_insert_with(Default::default);
    if object == placement_name {
        annotations.remove(NAME_ANNOTATION);
    } else {
        annotations.insert(NAME_ANNOTATION.to_string(), placement_name.to_string());
    }
    if annotations.is_empty() {
        rp.metadata.annotations = None;
    }
    rp.metadata.name = Some(object);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_names_are_kept() {
        for n in ["cn1", "compute-0.localdomain", "a", "x1.y-2"] {
            assert!(is_object_name(n), "{n}");
            assert_eq!(object_name(n), n);
        }
    }

    #[test]
    fn other_names_are_derived_valid_and_distinct() {
        let names = [
            "cn1_NUMA0",
            "cn1_numa0",
            "CN1",
            "compute-0:Open vSwitch agent:br-ex",
            "compute-0:Open vSwitch agent:br-ex ",
            "___",
            "-lead",
            "a..b",
            "ünïcode",
            &"x_".repeat(100),
        ];
        let derived: Vec<String> = names.iter().map(|n| object_name(n)).collect();
        for (n, d) in names.iter().zip(&derived) {
            assert!(is_object_name(d), "{n:?} gave {d:?}");
            assert!(!is_object_name(n), "{n:?} is an object name already");
        }
        let distinct: std::collections::BTreeSet<&String> = derived.iter().collect();
        assert_eq!(distinct.len(), names.len(), "{derived:?}");
        assert!(derived[0].starts_with("cn1-numa0-"), "{}", derived[0]);
        assert_eq!(object_name("cn1_NUMA0"), derived[0], "derivation is stable");
    }

    #[test]
    fn the_annotation_keeps_the_placement_name() {
        let mut rp = ResourceProvider::new(
            "x",
            crate::ResourceProviderSpec {
                numa_cell: None,
                uuid: None,
                parent: None,
                inventories: Default::default(),
                traits: Vec::new(),
                aggregates: Vec::new(),
            },
        );
        name_provider(&mut rp, "cn1:Agent");
        assert_eq!(placement_name(&rp), "cn1:Agent");
        assert_ne!(rp.metadata.name.as_deref(), Some("cn1:Agent"));
        name_provider(&mut rp, "cn1");
        assert_eq!(rp.metadata.name.as_deref(), Some("cn1"));
        assert_eq!(rp.metadata.annotations, None);
        assert_eq!(placement_name(&rp), "cn1");
    }
}
