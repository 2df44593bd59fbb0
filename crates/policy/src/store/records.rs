//! Translating ResourceProvider and Allocation objects into the placement core's records.

use kubeplace_api::Kind;
use kubeplace_api::{
    Allocation, Inventory as ApiInventory, Object, ProviderConfig, ResourceProvider,
};
use kubeplace_core::placement::provider_tree::ConsumerAllocations;
use kubeplace_core::placement::{Inventory, ProviderRecord, derived_provider_uuid};
use kubeplace_core::provider_config::ConfigEntry;

/// The uuid a provider goes by: its spec's, or one derived from its name.
pub(crate) fn provider_uuid(rp: &ResourceProvider) -> String {
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
pub(crate) fn provider_record(rp: &ResourceProvider) -> ProviderRecord {
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
pub(crate) fn consumer_allocations(a: &Allocation) -> ConsumerAllocations {
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
pub(crate) fn config_entries(store: &super::Store) -> Vec<ConfigEntry> {
    store
        .list(Kind::ProviderConfig)
        .filter_map(|o| match o {
            Object::ProviderConfig(pc) => Some(entries_of(pc)),
            _ => None,
        })
        .flatten()
        .collect()
}

/// A ProviderConfig's entries as the provider config core reads them (Nova's rules: entries
/// with nothing additional are dropped; `name: $COMPUTE_NODE` targets compute nodes).
fn entries_of(pc: &ProviderConfig) -> Vec<ConfigEntry> {
    crate::translate::provider_config::spec_entries(
        &pc.spec,
        pc.metadata.name.as_deref().unwrap_or(""),
    )
}
