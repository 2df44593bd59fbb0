//! Which statuses a change can move, so that a pass plans those and not the whole store.
//!
//! A ResourceProvider's status reads its own record, its place in its tree (its root, a
//! missing parent, a cycle), whether another provider has its uuid, its usages, and what
//! the provider config merge gave it. Every other kind's status may read any provider
//! (candidate counts, hosts in an aggregate, capacity under an Allocation) or other
//! objects, and those objects are few beside the providers. So a change reaches the
//! statuses of every object but the providers ("readers"), those of the providers whose
//! tree, uuid or usages it touched, and those of the providers whose merge outcome the
//! store reports moved when it applied the change ([`Reach::of_merge`]).

use std::collections::BTreeSet;

use kubeplace_api::{Kind, Object};

use crate::store::{ObjectKey, Store};
use crate::translate::provider_uuid;

fn as_provider(o: Option<&Object>) -> Option<&kubeplace_api::ResourceProvider> {
    match o {
        Some(Object::ResourceProvider(rp)) => Some(rp),
        _ => None,
    }
}

/// The statuses some changes can move.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Reach {
    /// Every object's.
    every: bool,
    /// Those of every object but the providers.
    readers: bool,
    /// Those of these providers and of every provider in their trees, as the trees are
    /// when the statuses are planned.
    providers: BTreeSet<String>,
}

impl Reach {
    /// Every status.
    pub fn every() -> Reach {
        Reach {
            every: true,
            ..Reach::default()
        }
    }

    pub fn is_every(&self) -> bool {
        self.every
    }

    pub fn is_empty(&self) -> bool {
        !self.every && !self.readers && self.providers.is_empty()
    }

    /// What an object's change (`old` to `new`; `None` where it did not or no longer
    /// exists) can reach, judged over the store as it was before the change.
    pub fn of_change(store: &Store, old: Option<&Object>, new: Option<&Object>) -> Reach {
        let Some(kind) = new.or(old).map(Object::kind) else {
            return Reach::default();
        };
        let mut reach = Reach {
            readers: true,
            ..Reach::default()
        };
        match kind {
            Kind::ResourceProvider => {
                let (old, new) = (as_provider(old), as_provider(new));
                let index = store.index();
                if let Some(name) = new.or(old).and_then(|rp| rp.metadata.name.clone()) {
                    // Providers under it move with it, or lose their root without it.
                    let moved = old.map(|o| &o.spec.parent) != new.map(|n| &n.spec.parent);
                    if moved {
                        reach.providers.extend(index.tree_members(&name));
                    }
                    reach.providers.insert(name);
                }
                // A uuid that appears or goes can make or end a duplicate elsewhere.
                let (old_uuid, new_uuid) = (old.map(provider_uuid), new.map(provider_uuid));
                if old_uuid != new_uuid {
                    for uuid in old_uuid.iter().chain(&new_uuid) {
                        reach.providers.extend(index.names_with_uuid(uuid));
                    }
                }
            }
            // Its providers' usages.
            Kind::Allocation => {
                for o in [old, new].into_iter().flatten() {
                    if let Object::Allocation(a) = o {
                        reach
                            .providers
                            .extend(a.spec.allocations.iter().map(|pa| pa.provider.clone()));
                    }
                }
            }
            _ => {}
        }
        reach
    }

    /// What a provider config merge reaches: the providers whose outcome it moved (as
    /// [`Store::apply_changes`] reports them) and, through their effective inventories and
    /// traits, the readers.
    pub fn of_merge(moved: Vec<String>) -> Reach {
        Reach {
            every: false,
            readers: !moved.is_empty(),
            providers: moved.into_iter().collect(),
        }
    }

    /// Adds what `other` reaches.
    pub fn add(&mut self, other: Reach) {
        if self.every || other.every {
            *self = Reach::every();
            return;
        }
        self.readers |= other.readers;
        self.providers.extend(other.providers);
    }

    /// The keys of the objects whose statuses are reached, in key order, over the store as
    /// it is now.
    pub fn keys(&self, store: &Store) -> Vec<ObjectKey> {
        if self.every {
            return store.keys().cloned().collect();
        }
        let mut keys: BTreeSet<ObjectKey> = BTreeSet::new();
        let index = store.index();
        for name in &self.providers {
            let members = index.tree_members(name);
            // A provider gone from the index is gone from the store: nothing to plan.
            keys.extend(
                members
                    .iter()
                    .map(|m| ObjectKey::cluster(Kind::ResourceProvider, m)),
            );
        }
        if self.readers {
            for kind in Kind::ALL.iter().filter(|k| **k != Kind::ResourceProvider) {
                keys.extend(store.list(*kind).map(ObjectKey::of));
            }
        }
        keys.into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduling::HeadroomFigures;
    use crate::status::{World, desired_status};
    use crate::store::Change;
    use kubeplace_api::manifest::parse_stream;

    fn objects(yaml: &str) -> Vec<Object> {
        parse_stream("t.yaml", yaml)
            .unwrap()
            .into_iter()
            .map(|d| d.object().unwrap().unwrap())
            .collect()
    }

    fn rp(name: &str, parent: Option<&str>, extra: &str) -> String {
        let parent = parent.map_or(String::new(), |p| format!("  parent: {p}\n"));
        format!(
            "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata: {{name: {name}}}\nspec:\n{parent}  inventories:\n    VCPU: {{total: 8}}\n{extra}---\n"
        )
    }

    /// Two trees, an orphan waiting for its parent, a Flavor, an Allocation on cn1 and an
    /// Aggregate.
    fn cloud() -> String {
        rp("cn1", None, "")
            + &rp("cn1-numa0", Some("cn1"), "")
            + &rp("cn2", None, "")
            + &rp("cn3-numa0", Some("cn3"), "")
            + "apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata: {name: f1}\nspec: {vcpus: 1, memoryMb: 512}\n---\n"
            + "apiVersion: kubeplace.io/v1alpha1\nkind: Allocation\nmetadata: {name: a1}\nspec:\n  consumer: 6f3c1a52-1d8e-4c2b-9a57-0f1e2d3c4b5a\n  allocations:\n  - provider: cn1\n    resources: {VCPU: 2}\n---\n"
            + "apiVersion: kubeplace.io/v1alpha1\nkind: Aggregate\nmetadata: {name: agg}\nspec: {uuid: 6a1c1b39-1b10-4f5e-9d2a-5c1f3f7e0a01}\n---\n"
    }

    fn store_of(yaml: &str) -> Store {
        let mut store = Store::default();
        for o in objects(yaml) {
            store.put(o);
        }
        store
    }

    /// The statuses that differ between two stores (each computed over its own store).
    fn moved(before: &Store, after: &Store) -> BTreeSet<ObjectKey> {
        let figures = HeadroomFigures::default();
        let (wb, wa) = (World::new(before, &figures), World::new(after, &figures));
        let mut keys: BTreeSet<ObjectKey> = before.keys().chain(after.keys()).cloned().collect();
        keys.retain(|k| match (before.get(k), after.get(k)) {
            (Some(b), Some(a)) => desired_status(b, &wb) != desired_status(a, &wa),
            _ => false,
        });
        keys
    }

    /// Applies `change` (a document, or a key to delete) to the cloud and checks that every
    /// status that moved is one the change reaches.
    fn reaches_every_moved_status(yaml: &str, change: Result<&str, ObjectKey>) -> Vec<ObjectKey> {
        let before = store_of(yaml);
        let mut after = before.clone();
        let (mut reach, merged) = match change {
            Ok(doc) => {
                let new = objects(doc).remove(0);
                let old = before.get(&ObjectKey::of(&new)).cloned();
                let reach = Reach::of_change(&before, old.as_ref(), Some(&new));
                (reach, after.apply_changes([Change::Put(Box::new(new))]))
            }
            Err(key) => {
                let reach = Reach::of_change(&before, before.get(&key), None);
                (reach, after.apply_changes([Change::Delete(key)]))
            }
        };
        reach.add(Reach::of_merge(merged));
        let keys = reach.keys(&after);
        let moved = moved(&before, &after);
        for k in &moved {
            assert!(
                keys.contains(k),
                "{k:?} moved but is not reached by {reach:?}"
            );
        }
        keys
    }

    fn providers_in(keys: &[ObjectKey]) -> Vec<&str> {
        keys.iter()
            .filter(|k| k.kind == Kind::ResourceProvider)
            .map(|k| k.name.as_str())
            .collect()
    }

    #[test]
    fn an_inventory_change_reaches_its_tree_and_the_readers_only() {
        let keys = reaches_every_moved_status(
            &cloud(),
            Ok(&rp("cn1", None, "  traits: [CUSTOM_X]\n").replace("total: 8", "total: 16")),
        );
        assert_eq!(providers_in(&keys), ["cn1", "cn1-numa0"]);
        assert!(keys.contains(&ObjectKey::cluster(Kind::Flavor, "f1")));
        assert!(keys.contains(&ObjectKey::cluster(Kind::Allocation, "a1")));
        assert!(keys.contains(&ObjectKey::cluster(Kind::Aggregate, "agg")));
    }

    #[test]
    fn a_parent_arriving_reaches_the_orphans_it_adopts() {
        let keys = reaches_every_moved_status(&cloud(), Ok(&rp("cn3", None, "")));
        assert_eq!(providers_in(&keys), ["cn3", "cn3-numa0"]);
    }

    #[test]
    fn a_parent_going_or_moving_reaches_the_tree_it_leaves() {
        let keys = reaches_every_moved_status(
            &cloud(),
            Err(ObjectKey::cluster(Kind::ResourceProvider, "cn1")),
        );
        assert_eq!(providers_in(&keys), ["cn1-numa0"]);
        let keys = reaches_every_moved_status(&cloud(), Ok(&rp("cn1-numa0", Some("cn2"), "")));
        assert_eq!(providers_in(&keys), ["cn1", "cn1-numa0", "cn2"]);
    }

    #[test]
    fn a_uuid_taken_or_given_up_reaches_the_providers_that_share_it() {
        let uuid = kubeplace_core::placement::derived_provider_uuid("cn2");
        let keys = reaches_every_moved_status(
            &cloud(),
            Ok(&rp("cn4", None, &format!("  uuid: {uuid}\n"))),
        );
        assert_eq!(providers_in(&keys), ["cn2", "cn4"]);
        let with_twin = cloud() + &rp("cn4", None, &format!("  uuid: {uuid}\n"));
        let keys = reaches_every_moved_status(
            &with_twin,
            Err(ObjectKey::cluster(Kind::ResourceProvider, "cn4")),
        );
        assert_eq!(providers_in(&keys), ["cn2"]);
    }

    #[test]
    fn a_claim_reaches_its_providers_and_the_readers() {
        let moved_claim = "apiVersion: kubeplace.io/v1alpha1\nkind: Allocation\nmetadata: {name: a1}\nspec:\n  consumer: 6f3c1a52-1d8e-4c2b-9a57-0f1e2d3c4b5a\n  allocations:\n  - provider: cn2\n    resources: {VCPU: 2}\n---\n";
        let keys = reaches_every_moved_status(&cloud(), Ok(moved_claim));
        // The tree of each, planned whole.
        assert_eq!(providers_in(&keys), ["cn1", "cn1-numa0", "cn2"]);
        let keys =
            reaches_every_moved_status(&cloud(), Err(ObjectKey::cluster(Kind::Allocation, "a1")));
        assert_eq!(providers_in(&keys), ["cn1", "cn1-numa0"]);
    }

    #[test]
    fn a_flavor_reaches_no_provider_and_a_provider_config_the_providers_it_moves() {
        let keys = reaches_every_moved_status(
            &cloud(),
            Ok(
                "apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata: {name: f2}\nspec: {vcpus: 2, memoryMb: 512}\n---\n",
            ),
        );
        assert!(providers_in(&keys).is_empty());
        assert!(keys.contains(&ObjectKey::cluster(Kind::Flavor, "f2")));
        let config = "apiVersion: kubeplace.io/v1alpha1\nkind: ProviderConfig\nmetadata: {name: pc}\nspec:\n  meta: {schemaVersion: \"1.0\"}\n  providers:\n  - identification: {name: cn2}\n    traits:\n      additional: [CUSTOM_Y]\n---\n";
        let keys = reaches_every_moved_status(&cloud(), Ok(config));
        assert_eq!(providers_in(&keys), ["cn2"]);
        // Every provider that is a compute node (a root with COMPUTE_NODE).
        let compute = cloud().replace(
            "    VCPU: {total: 8}\n",
            "    VCPU: {total: 8}\n  traits: [COMPUTE_NODE]\n",
        );
        let every_node = config.replace("{name: cn2}", "{uuid: $COMPUTE_NODE}");
        let keys = reaches_every_moved_status(&compute, Ok(&every_node));
        assert_eq!(providers_in(&keys), ["cn1", "cn1-numa0", "cn2"]);
        // With the config in the store, a node's change moves that node only.
        let keys = reaches_every_moved_status(
            &(compute + &every_node),
            Ok(&rp("cn2", None, "  traits: [COMPUTE_NODE, CUSTOM_Z]\n")),
        );
        assert_eq!(providers_in(&keys), ["cn2"]);
        let before = store_of(&cloud());
        assert_eq!(Reach::every().keys(&before).len(), before.len());
    }

    #[test]
    fn reaches_add_up() {
        let store = store_of(&cloud());
        let f = objects(&cloud()).remove(4);
        let mut reach = Reach::default();
        assert!(reach.is_empty());
        reach.add(Reach::of_change(
            &store,
            store.get(&ObjectKey::of(&f)),
            Some(&f),
        ));
        let cn2 = objects(&rp("cn2", None, "")).remove(0);
        reach.add(Reach::of_change(
            &store,
            store.get(&ObjectKey::of(&cn2)),
            Some(&cn2),
        ));
        assert_eq!(providers_in(&reach.keys(&store)), ["cn2"]);
        reach.add(Reach::every());
        assert!(reach.is_every());
        reach.add(Reach::default());
        assert!(reach.is_every());
    }

    mod random_changes {
        use super::*;
        use proptest::prelude::*;

        const NAMES: [&str; 5] = ["p0", "p1", "p2", "p3", "p4"];

        /// A provider: its parent (maybe missing, maybe itself or a cycle), a uuid from a
        /// small set (so that duplicates happen), its VCPU and an aggregate or none.
        fn provider() -> impl Strategy<Value = String> {
            (
                0usize..5,
                proptest::option::of(0usize..6),
                proptest::option::of(0u8..3),
                1i64..9,
                any::<bool>(),
            )
                .prop_map(|(n, parent, uuid, vcpu, in_aggregate)| {
                    let name = NAMES[n];
                    let mut extra = String::new();
                    if let Some(p) = parent {
                        // "gone" is a parent that never exists.
                        let p = NAMES.get(p).copied().unwrap_or("gone");
                        extra += &format!("  parent: {p}\n");
                    }
                    if let Some(u) = uuid {
                        extra += &format!("  uuid: 6f3c1a52-1d8e-4c2b-9a57-00000000000{u}\n");
                    }
                    if in_aggregate {
                        extra += "  aggregates: [6a1c1b39-1b10-4f5e-9d2a-5c1f3f7e0a01]\n";
                    }
                    // Half are compute nodes (for `$COMPUTE_NODE`), when they are roots.
                    if vcpu % 2 == 0 {
                        extra += "  traits: [COMPUTE_NODE]\n";
                    }
                    format!(
                        "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata: {{name: {name}}}\nspec:\n{extra}  inventories:\n    VCPU: {{total: {vcpu}}}\n    MEMORY_MB: {{total: 4096}}\n---\n"
                    )
                })
        }

        fn allocation() -> impl Strategy<Value = String> {
            (0usize..2, 0usize..5, 1i64..4).prop_map(|(a, p, vcpu)| {
                format!(
                    "apiVersion: kubeplace.io/v1alpha1\nkind: Allocation\nmetadata: {{name: a{a}}}\nspec:\n  consumer: 6f3c1a52-1d8e-4c2b-9a57-0f1e2d3c4b5{a}\n  allocations:\n  - provider: {}\n    resources: {{VCPU: {vcpu}}}\n---\n",
                    NAMES[p]
                )
            })
        }

        /// A ProviderConfig (one of two) adding a trait and an inventory to a provider by
        /// name, by uuid, or to every compute node.
        fn provider_config() -> impl Strategy<Value = String> {
            (0usize..2, 0usize..7, 1i64..5).prop_map(|(c, target, llc)| {
                let identification = match target {
                    0..5 => format!("{{name: {}}}", NAMES[target]),
                    5 => "{uuid: 6f3c1a52-1d8e-4c2b-9a57-000000000001}".to_string(),
                    _ => "{uuid: $COMPUTE_NODE}".to_string(),
                };
                format!(
                    "apiVersion: kubeplace.io/v1alpha1\nkind: ProviderConfig\nmetadata: {{name: pc{c}}}\nspec:\n  meta: {{schemaVersion: \"1.0\"}}\n  providers:\n  - identification: {identification}\n    inventories:\n      additional:\n      - CUSTOM_LLC: {{total: {llc}}}\n    traits:\n      additional: [CUSTOM_P_STATE]\n---\n"
                )
            })
        }

        fn document() -> impl Strategy<Value = String> {
            prop_oneof![3 => provider(), 1 => allocation(), 1 => provider_config()]
        }

        fn key() -> impl Strategy<Value = ObjectKey> {
            prop_oneof![
                (0usize..5).prop_map(|n| ObjectKey::cluster(Kind::ResourceProvider, NAMES[n])),
                (0usize..2).prop_map(|a| ObjectKey::cluster(Kind::Allocation, &format!("a{a}"))),
                (0usize..2)
                    .prop_map(|c| ObjectKey::cluster(Kind::ProviderConfig, &format!("pc{c}"))),
            ]
        }

        const READERS: &str = "apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata: {name: f1}\nspec: {vcpus: 1, memoryMb: 512}\n---\napiVersion: kubeplace.io/v1alpha1\nkind: Aggregate\nmetadata: {name: agg}\nspec: {uuid: 6a1c1b39-1b10-4f5e-9d2a-5c1f3f7e0a01}\n---\n";

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(300))]

            /// Whatever the cloud and the change (a provider or claim put, or deleted),
            /// every status that moves is one the change reaches.
            #[test]
            fn every_status_that_moves_is_reached(
                cloud in proptest::collection::vec(document(), 0..8),
                change in prop_oneof![document().prop_map(Ok), key().prop_map(Err)],
            ) {
                let yaml = cloud.concat() + READERS;
                let change = change.as_ref().map(String::as_str).map_err(Clone::clone);
                reaches_every_moved_status(&yaml, change);
            }
        }
    }
}
