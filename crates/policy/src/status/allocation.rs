//! Allocation status: whether the claim counts, and whether it lands on existing inventory.

use kubeplace_api::{Allocation, AllocationStatus, Condition};

use super::World;
use crate::translate::{APPLIED, OVER_CAPACITY, is_refused};

/// The reason of `Applied=True` on a counted claim whose providers' inventory was reduced
/// below what is allocated (Placement allows that; no new claim fits until usage falls).
const EXCEEDS_CAPACITY: &str = "ExceedsCapacity";

pub(super) fn status(
    a: &Allocation,
    world: &World<'_>,
    generation: Option<i64>,
) -> AllocationStatus {
    let store = world.store;
    let name = a.metadata.name.as_deref().unwrap_or("");
    if let Some(why) = store.refusal(name) {
        return AllocationStatus {
            conditions: vec![Condition::new(APPLIED, false, OVER_CAPACITY, why)],
            observed_generation: generation,
        };
    }
    // A refusal in the status holds for this generation.
    if is_refused(a) {
        return a.status.clone().unwrap_or_default();
    }
    let index = store.index();
    let mut reason = "Applied";
    let mut problems = Vec::new();
    for pa in &a.spec.allocations {
        if !index.contains(&pa.provider) {
            reason = "ProviderNotFound";
            problems.push(format!("provider {:?} does not exist", pa.provider));
            continue;
        }
        for class in pa.resources.keys() {
            match index.inventory(&pa.provider, class) {
                None => {
                    reason = "NoInventory";
                    problems.push(format!(
                        "provider {:?} has no {class} inventory",
                        pa.provider
                    ));
                }
                Some(inv) => {
                    let used = index.used(&pa.provider, class);
                    if used as f64 > (inv.total - inv.reserved) as f64 * inv.allocation_ratio
                        && reason == "Applied"
                    {
                        // Only an inventory reduced below what was allocated gets here: a
                        // claim that did not fit when decided does not count.
                        reason = EXCEEDS_CAPACITY;
                        problems.push(format!(
                            "{class} on {:?} is used {used} of a capacity of {}; the inventory was reduced below what is allocated, and no new claim fits until usage falls",
                            pa.provider,
                            inv.capacity()
                        ));
                    }
                }
            }
        }
    }
    let applied = problems.is_empty() || reason == EXCEEDS_CAPACITY;
    AllocationStatus {
        conditions: vec![Condition::new(
            "Applied",
            applied,
            reason,
            problems.join("; "),
        )],
        observed_generation: generation,
    }
}
