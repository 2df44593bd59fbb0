//! ResourceProviders: the core record of a provider, from its spec.

use kubeplace_api::{Inventory as ApiInventory, ResourceProvider};
use kubeplace_core::placement::{Inventory, ProviderRecord, derived_provider_uuid};

/// The uuid a provider goes by: its spec's, or one derived from its name.
pub(crate) fn provider_uuid(rp: &ResourceProvider) -> String {
    rp.spec
        .uuid
        .clone()
        .unwrap_or_else(|| derived_provider_uuid(rp.metadata.name.as_deref().unwrap_or("")))
}

/// The API inventory of a core inventory (what a status or an export shows).
pub fn api_inventory(i: &Inventory) -> ApiInventory {
    ApiInventory {
        total: i.total,
        reserved: i.reserved,
        min_unit: i.min_unit,
        max_unit: i.max_unit,
        step_size: i.step_size,
        allocation_ratio: i.allocation_ratio,
    }
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
    let name = rp.metadata.name.clone().unwrap_or_default();
    let shown = kubeplace_api::provider_name::placement_name(rp);
    ProviderRecord {
        placement_name: (shown != name).then_some(shown),
        name,
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
