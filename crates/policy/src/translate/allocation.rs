//! Allocations: the core record of what a consumer holds.

use kubeplace_api::Allocation;
use kubeplace_core::placement::provider_tree::ConsumerAllocations;

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
