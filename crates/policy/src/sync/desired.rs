//! The objects a snapshot of Placement becomes: a ResourceProvider per provider (parents
//! first, the Placement name kept where it cannot be the object's name) and an Allocation
//! per consumer (its project, user and type in annotations); or every reason kubeplace
//! cannot carry it, each naming the provider, consumer or name.

use std::collections::{BTreeMap, HashMap};

use kubeplace_api::provider_name::{name_provider, object_name};
use kubeplace_api::{
    Allocation, AllocationSpec, Object, ProviderAllocation, ResourceProvider, ResourceProviderSpec,
    SortedMap,
};
use kubeplace_core::placement::{NameError, check_resource_class, check_trait};

use super::snapshot::Snapshot;
use crate::placement_records::CustomNameSet;
use crate::placement_records::{CONSUMER_TYPE_ANNOTATION, PROJECT_ANNOTATION, USER_ANNOTATION};

/// What kubeplace's objects for a Placement are.
#[derive(Debug, Clone)]
pub struct Desired {
    /// Providers parents first, then Allocations by consumer.
    pub objects: Vec<Object>,
    pub custom_classes: CustomNameSet,
    pub custom_traits: CustomNameSet,
}

/// Something of a Placement that kubeplace cannot carry.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Uncarried {
    #[error("custom resource class {class}: {reason}")]
    CustomClass { class: String, reason: NameError },
    #[error("custom trait {name}: {reason}")]
    CustomTrait { name: String, reason: NameError },
    #[error(
        "{provider}: its object name {object:?} is also the object name of {other}; rename one of them in Placement first"
    )]
    SameObjectName {
        provider: String,
        object: String,
        other: String,
    },
    #[error("{provider}: inventory of {class}: {reason}")]
    InventoryClass {
        provider: String,
        class: String,
        reason: NameError,
    },
    #[error("{provider}: trait {name}: {reason}")]
    ProviderTrait {
        provider: String,
        name: String,
        reason: NameError,
    },
    #[error("{provider}: its parent {parent} was not read")]
    ParentNotRead { provider: String, parent: String },
    #[error("consumer {consumer}: it has allocations on provider {provider}, which was not read")]
    ProviderNotRead { consumer: String, provider: String },
    #[error(
        "consumer {consumer:?}: its uuid cannot name an Allocation object (lowercase, with hyphens)"
    )]
    ConsumerUuid { consumer: String },
}

/// kubeplace's objects for a snapshot, or what kubeplace cannot carry of it.
pub fn desired(snapshot: &Snapshot) -> Result<Desired, Vec<Uncarried>> {
    let mut refusals = Vec::new();
    for class in &snapshot.custom_classes {
        if let Err(reason) = check_resource_class(class) {
            refusals.push(Uncarried::CustomClass {
                class: class.clone(),
                reason,
            });
        }
    }
    for t in &snapshot.custom_traits {
        if let Err(reason) = check_trait(t) {
            refusals.push(Uncarried::CustomTrait {
                name: t.clone(),
                reason,
            });
        }
    }
    let by_uuid = snapshot.by_uuid();
    // Two Placement names that one object name would stand for.
    let mut objects_named: HashMap<String, &str> = HashMap::new();
    for p in &snapshot.providers {
        let object = object_name(&p.name);
        if let Some(other) = objects_named.insert(object.clone(), &p.uuid)
            && let Some(o) = by_uuid.get(other)
        {
            refusals.push(Uncarried::SameObjectName {
                provider: p.who(),
                object,
                other: o.who(),
            });
        }
    }
    let mut objects = Vec::with_capacity(snapshot.providers.len() + snapshot.consumers.len());
    for p in &snapshot.providers {
        for class in p.inventories.keys() {
            if let Err(reason) = check_resource_class(class) {
                refusals.push(Uncarried::InventoryClass {
                    provider: p.who(),
                    class: class.clone(),
                    reason,
                });
            }
        }
        for t in &p.traits {
            if let Err(reason) = check_trait(t) {
                refusals.push(Uncarried::ProviderTrait {
                    provider: p.who(),
                    name: t.clone(),
                    reason,
                });
            }
        }
        let parent = match &p.parent {
            Some(u) => match by_uuid.get(u.as_str()) {
                Some(parent) => Some(object_name(&parent.name)),
                None => {
                    refusals.push(Uncarried::ParentNotRead {
                        provider: p.who(),
                        parent: u.clone(),
                    });
                    None
                }
            },
            None => None,
        };
        let spec = ResourceProviderSpec {
            numa_cell: None,
            uuid: Some(p.uuid.clone()),
            parent,
            inventories: {
                let mut m = SortedMap::new();
                for (c, i) in &p.inventories {
                    m.insert(c.clone(), i.clone());
                }
                m
            },
            traits: p.traits.iter().cloned().collect(),
            aggregates: p.aggregates.iter().cloned().collect(),
        };
        let mut rp = ResourceProvider::new(&object_name(&p.name), spec);
        name_provider(&mut rp, &p.name);
        objects.push(Object::ResourceProvider(rp));
    }
    for c in snapshot.consumers.values() {
        let mut allocations = Vec::new();
        for (rp, resources) in &c.allocations {
            match by_uuid.get(rp.as_str()) {
                Some(p) => allocations.push(ProviderAllocation {
                    provider: object_name(&p.name),
                    resources: resources.clone(),
                }),
                None => refusals.push(Uncarried::ProviderNotRead {
                    consumer: c.uuid.clone(),
                    provider: rp.clone(),
                }),
            }
        }
        if !kubeplace_core::placement::is_uuid(&c.uuid) || c.uuid.to_lowercase() != c.uuid {
            refusals.push(Uncarried::ConsumerUuid {
                consumer: c.uuid.clone(),
            });
        }
        let mut a = Allocation::new(
            &c.uuid,
            AllocationSpec {
                numa: None,
                consumer: c.uuid.clone(),
                allocations,
            },
        );
        a.metadata.annotations = Some(BTreeMap::from([
            (PROJECT_ANNOTATION.to_string(), c.project_id.clone()),
            (USER_ANNOTATION.to_string(), c.user_id.clone()),
            (
                CONSUMER_TYPE_ANNOTATION.to_string(),
                c.consumer_type.clone(),
            ),
        ]));
        objects.push(Object::Allocation(a));
    }
    if refusals.is_empty() {
        Ok(Desired {
            objects,
            custom_classes: snapshot.custom_classes.clone(),
            custom_traits: snapshot.custom_traits.clone(),
        })
    } else {
        Err(refusals)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::snapshot::Provider;
    use kubeplace_api::provider_name::placement_name;

    #[test]
    fn names_kubernetes_refuses_are_stored_as_the_api_stores_them() {
        let snapshot = Snapshot {
            providers: vec![
                Provider::new("a0000000-0000-4000-8000-000000000001", "cn1", None),
                Provider::new(
                    "a0000000-0000-4000-8000-000000000002",
                    "cn1_NUMA0",
                    Some("a0000000-0000-4000-8000-000000000001"),
                ),
            ],
            ..Default::default()
        };
        let d = desired(&snapshot).unwrap();
        let Object::ResourceProvider(numa) = &d.objects[1] else {
            panic!("a provider")
        };
        assert_eq!(numa.metadata.name, Some(object_name("cn1_NUMA0")));
        assert_eq!(placement_name(numa), "cn1_NUMA0");
        assert_eq!(numa.spec.parent.as_deref(), Some("cn1"));
    }

    #[test]
    fn two_names_for_one_object_name_are_refused_naming_both() {
        let derived = object_name("CN1");
        let snapshot = Snapshot {
            providers: vec![
                Provider::new("a0000000-0000-4000-8000-000000000001", "CN1", None),
                Provider::new("a0000000-0000-4000-8000-000000000002", &derived, None),
            ],
            ..Default::default()
        };
        let refusals: Vec<String> = desired(&snapshot)
            .err()
            .unwrap()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(refusals.len(), 1, "{refusals:?}");
        assert!(
            refusals[0].contains("\"CN1\"") && refusals[0].contains(&derived),
            "{refusals:?}"
        );
    }
}
