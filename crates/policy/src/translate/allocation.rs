//! Allocations: the core record of what a consumer holds.

use std::collections::BTreeMap;

use kubeplace_api::{Allocation, find_condition};
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

/// The condition that says whether an Allocation counts against its providers.
pub const APPLIED: &str = "Applied";

/// The reason of `Applied=False` on a claim that was refused: when it was decided, earlier
/// claims had taken the capacity it asks for, so it does not count.
pub const OVER_CAPACITY: &str = "OverCapacity";

/// Whether the claim has a verdict for its current generation: counted (`Applied=True`) or
/// refused (`Applied=False`, [`OVER_CAPACITY`]). Any other state is decided again.
pub(crate) fn is_decided(a: &Allocation) -> bool {
    let Some(status) = &a.status else {
        return false;
    };
    status.observed_generation == a.metadata.generation
        && find_condition(&status.conditions, APPLIED)
            .is_some_and(|c| c.status == "True" || c.reason == OVER_CAPACITY)
}

/// Whether the claim was refused for its current generation, so it does not count.
pub(crate) fn is_refused(a: &Allocation) -> bool {
    is_decided(a)
        && a.status
            .as_ref()
            .and_then(|s| find_condition(&s.conditions, APPLIED))
            .is_some_and(|c| c.status == "False")
}

/// What an Allocation takes, summed per provider and resource class; and the named things
/// its NUMA record holds on each cell provider, under keys no resource class can have: each
/// held host CPU as one of [`numa_cpu_key`], hugepages as [`numa_pages_key`]. The claims
/// ledger holds these as it holds capacity, so a claim on its way keeps its CPUs from the
/// next one (and from a new leader, which reads the ledger's record).
pub fn takes(a: &Allocation) -> BTreeMap<(String, String), i64> {
    let mut out = BTreeMap::new();
    for pa in &a.spec.allocations {
        for (class, amount) in &pa.resources {
            *out.entry((pa.provider.clone(), class.clone())).or_default() += amount;
        }
    }
    for cell in a.spec.numa.iter().flat_map(|n| &n.cells) {
        let held = cell
            .held_cpus
            .as_deref()
            .and_then(|h| kubeplace_core::numa::parse_cpu_set(h).ok())
            .unwrap_or_default();
        for cpu in held {
            out.insert((cell.provider.clone(), numa_cpu_key(cpu)), 1);
        }
        if let Some(size) = cell.page_size_kib.filter(|s| *s > 0) {
            let pages = (cell.memory_mib.saturating_mul(1024) / size).min(i64::MAX as u64);
            *out.entry((cell.provider.clone(), numa_pages_key(size)))
                .or_default() += pages as i64;
        }
    }
    out
}

/// The ledger's key for a host CPU a NUMA record holds (lower case: no resource class).
pub fn numa_cpu_key(cpu: u32) -> String {
    format!("cpu/{cpu}")
}

/// The ledger's key for the hugepages of one size a NUMA record holds.
pub fn numa_pages_key(size_kib: u64) -> String {
    format!("pages/{size_kib}KiB")
}
