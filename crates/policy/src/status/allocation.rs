//! Allocation status: whether every claim lands on an existing inventory within capacity.

use kubeplace_api::{Allocation, AllocationStatus, Condition};

use super::World;

pub(super) fn status(
    a: &Allocation,
    world: &World<'_>,
    generation: Option<i64>,
) -> AllocationStatus {
    let index = world.store.index();
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
                        reason = "OverCapacity";
                        problems.push(format!(
                            "{class} on {:?} is used {used} of a capacity of {}",
                            pa.provider,
                            inv.capacity()
                        ));
                    }
                }
            }
        }
    }
    let applied = problems.is_empty() || reason == "OverCapacity";
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
