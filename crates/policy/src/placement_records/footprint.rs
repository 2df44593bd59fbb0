//! What a decided write bears on, so that writes can be committed side by side: a write
//! decided after another, still being committed, may go ahead only if its decision does
//! not rest on anything the earlier one could still take back.

use std::collections::{BTreeMap, BTreeSet};

use kubeplace_api::Object;

use super::Journal;
use crate::store::ObjectKey;

/// The objects a write changes and the providers it bears on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Footprint {
    /// Every object the write changes.
    pub keys: BTreeSet<ObjectKey>,
    /// Providers the write changes, or whose allocations it changes.
    pub providers: BTreeSet<String>,
    /// Providers on which the write makes room: an allocation shrinks or goes, or the
    /// provider's spec changes (its inventories may grow). A later claim decided with that
    /// room rests on this write succeeding.
    pub releases: BTreeSet<String>,
    /// Whether it creates or deletes custom traits or resource classes.
    pub registry: bool,
}

impl Footprint {
    /// Whether a write with this footprint, decided after `earlier`, rests on it: they
    /// change a same object, or this one touches a provider where `earlier` made room, or
    /// both change the registries. Such a write waits until `earlier` is committed or
    /// undone, and is decided again.
    pub fn rests_on(&self, earlier: &Footprint) -> bool {
        !self.keys.is_disjoint(&earlier.keys)
            || !self.providers.is_disjoint(&earlier.releases)
            || (self.registry && earlier.registry)
    }
}

impl Journal {
    /// What the write this journal records bears on.
    pub fn footprint(&self) -> Footprint {
        let mut f = Footprint {
            registry: !self.registry_changes.is_empty(),
            ..Footprint::default()
        };
        for (key, before, after) in &self.changes {
            f.keys.insert(key.clone());
            match (before, after) {
                (Some(Object::ResourceProvider(_)), _) | (_, Some(Object::ResourceProvider(_))) => {
                    f.providers.insert(key.name.clone());
                    let same = matches!((before, after), (Some(b), Some(a)) if a.same_spec(b));
                    if !same {
                        f.releases.insert(key.name.clone());
                    }
                }
                (Some(Object::Allocation(_)), _) | (_, Some(Object::Allocation(_))) => {
                    let was = amounts(before.as_ref());
                    let now = amounts(after.as_ref());
                    for (provider, class) in was.keys().chain(now.keys()) {
                        f.providers.insert(provider.clone());
                        let key = (provider.clone(), class.clone());
                        if was.get(&key).unwrap_or(&0) > now.get(&key).unwrap_or(&0) {
                            f.releases.insert(provider.clone());
                        }
                    }
                }
                _ => {}
            }
        }
        f
    }
}

/// An Allocation's amounts by provider and class (nothing for any other object).
fn amounts(object: Option<&Object>) -> BTreeMap<(String, String), i64> {
    let mut out = BTreeMap::new();
    if let Some(Object::Allocation(a)) = object {
        for pa in &a.spec.allocations {
            for (class, n) in &pa.resources {
                *out.entry((pa.provider.clone(), class.clone())).or_insert(0) += n;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubeplace_api::{Allocation, AllocationSpec, Kind, ProviderAllocation};

    fn allocation(name: &str, provider: &str, vcpu: i64) -> Object {
        Object::Allocation(Allocation::new(
            name,
            AllocationSpec {
                numa: None,
                consumer: name.to_string(),
                allocations: vec![ProviderAllocation {
                    provider: provider.to_string(),
                    resources: BTreeMap::from([("VCPU".to_string(), vcpu)]),
                }],
            },
        ))
    }

    fn journal(changes: Vec<(Option<Object>, Option<Object>)>) -> Journal {
        Journal {
            decided_held: false,
            changes: changes
                .into_iter()
                .map(|(b, a)| {
                    let key = ObjectKey::of(b.as_ref().or(a.as_ref()).unwrap());
                    (key, b, a)
                })
                .collect(),
            generations_before: Vec::new(),
            consumers_before: Vec::new(),
            registry_changes: Vec::new(),
        }
    }

    #[test]
    fn claims_on_one_provider_go_side_by_side_but_not_after_a_release_there() {
        let a = journal(vec![(None, Some(allocation("a", "cn1", 1)))]).footprint();
        let b = journal(vec![(None, Some(allocation("b", "cn1", 1)))]).footprint();
        assert_eq!(a.providers, BTreeSet::from(["cn1".to_string()]));
        assert!(a.releases.is_empty());
        assert!(
            !b.rests_on(&a),
            "two new claims: the later counted the earlier"
        );
        // Shrinking a claim makes room: a later claim there rests on it.
        let shrink = journal(vec![(
            Some(allocation("c", "cn1", 4)),
            Some(allocation("c", "cn1", 2)),
        )])
        .footprint();
        assert!(shrink.releases.contains("cn1"));
        assert!(b.rests_on(&shrink));
        // Elsewhere it does not.
        let other = journal(vec![(None, Some(allocation("d", "cn2", 1)))]).footprint();
        assert!(!other.rests_on(&shrink));
        // The same object, whatever it does.
        let again = journal(vec![(
            Some(allocation("a", "cn1", 1)),
            Some(allocation("a", "cn1", 2)),
        )])
        .footprint();
        assert!(again.rests_on(&a));
        assert!(
            again
                .keys
                .contains(&ObjectKey::cluster(Kind::Allocation, "a"))
        );
    }
}
