//! Translating ResourceProvider and Allocation objects into the placement core's records.

use crate::api::{Allocation, Inventory as ApiInventory, Object, ProviderConfig, ResourceProvider};
use crate::placement::provider_tree::ConsumerAllocations;
use crate::placement::{Inventory, ProviderRecord, derived_provider_uuid};
use crate::provider_config::{ConfigEntry, Identification};

/// The uuid a provider goes by: its spec's, or one derived from its name.
pub fn provider_uuid(rp: &ResourceProvider) -> String {
    rp.spec
        .uuid
        .clone()
        .unwrap_or_else(|| derived_provider_uuid(rp.metadata.name.as_deref().unwrap_or("")))
}

/// The core inventory of an API inventory.
pub fn inventory(i: &ApiInventory) -> Inventory {
    Inventory {
        total: i.total,
        reserved: i.reserved,
        min_unit: i.min_unit,
        max_unit: i.max_unit,
        step_size: i.step_size,
        allocation_ratio: i.allocation_ratio,
    }
}

/// The core record of a provider, from its spec.
pub fn provider_record(rp: &ResourceProvider) -> ProviderRecord {
    ProviderRecord {
        name: rp.metadata.name.clone().unwrap_or_default(),
        uuid: provider_uuid(rp),
        parent: rp.spec.parent.clone(),
        inventories: rp
            .spec
            .inventories
            .iter()
            .map(|(c, i)| (c.clone(), inventory(i)))
            .collect(),
        traits: rp.spec.traits.iter().cloned().collect(),
        aggregates: rp.spec.aggregates.iter().cloned().collect(),
    }
}

/// The core record of an Allocation.
pub fn consumer_allocations(a: &Allocation) -> ConsumerAllocations {
    ConsumerAllocations {
        consumer: a.spec.consumer.clone(),
        items: a
            .spec
            .allocations
            .iter()
            .flat_map(|pa| {
                pa.resources
                    .iter()
                    .map(|(c, n)| (pa.provider.clone(), c.clone(), *n))
            })
            .collect(),
    }
}

/// Every ProviderConfig entry as a core record, configs in name order.
pub fn config_entries(store: &super::Store) -> Vec<ConfigEntry> {
    store
        .list("ProviderConfig")
        .filter_map(|o| match o {
            Object::ProviderConfig(pc) => Some(entries_of(pc)),
            _ => None,
        })
        .flatten()
        .collect()
}

fn entries_of(pc: &ProviderConfig) -> Vec<ConfigEntry> {
    let source = pc.metadata.name.clone().unwrap_or_default();
    pc.spec
        .providers
        .iter()
        .enumerate()
        .filter_map(|(position, e)| {
            let identification = match (&e.identification.uuid, &e.identification.name) {
                (Some(u), None) if u == crate::admission::COMPUTE_NODE_ID => {
                    Identification::ComputeNode
                }
                (Some(u), None) => Identification::Uuid(u.clone()),
                (None, Some(n)) => Identification::Name(n.clone()),
                _ => return None,
            };
            let d = Inventory::default();
            let inventories = e
                .inventories
                .iter()
                .flat_map(|i| i.additional.iter())
                .flat_map(|m| m.iter())
                .map(|(class, i)| {
                    (
                        class.clone(),
                        Inventory {
                            total: i.total,
                            reserved: i.reserved.unwrap_or(d.reserved),
                            min_unit: i.min_unit.unwrap_or(d.min_unit),
                            max_unit: i.max_unit.unwrap_or(d.max_unit),
                            step_size: i.step_size.unwrap_or(d.step_size),
                            allocation_ratio: i.allocation_ratio.unwrap_or(d.allocation_ratio),
                        },
                    )
                })
                .collect();
            let traits = e
                .traits
                .iter()
                .flat_map(|t| t.additional.iter().cloned())
                .collect();
            Some(ConfigEntry {
                source: source.clone(),
                position,
                identification,
                inventories,
                traits,
            })
        })
        .collect()
}
