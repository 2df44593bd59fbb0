//! Allocation admission: Placement's rules for writing a consumer's allocations.

use std::collections::{BTreeMap, BTreeSet};

use super::Review;
use crate::store::Store;
use kubeplace_api::Allocation;
use kubeplace_core::placement::{check_resource_class, is_uuid};

/// Usage per provider and resource class, and per project, that the store does not count
/// yet: claims admitted a moment ago that the watches have not delivered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PendingUsage {
    capacity: BTreeMap<(String, String), i64>,
    /// What they charge to projects.
    pub charges: crate::quota::Pending,
    /// What the versions of the claim being decided that are still on their way charge
    /// (the store shows an older one, and any of them may yet land).
    pub deciding: Vec<Option<crate::quota::Charge>>,
}

impl PendingUsage {
    /// Adds `amount` of `class` on `provider`.
    pub fn add(&mut self, provider: &str, class: &str, amount: i64) {
        *self
            .capacity
            .entry((provider.to_string(), class.to_string()))
            .or_default() += amount;
    }

    /// The pending amount of `class` on `provider`.
    pub fn of(&self, provider: &str, class: &str) -> i64 {
        self.capacity
            .get(&(provider.to_string(), class.to_string()))
            .copied()
            .unwrap_or(0)
    }
}

/// Reviews a claim; `old` is the version the API server holds (none for a creation).
pub(super) fn review(
    a: &Allocation,
    old: Option<&Allocation>,
    store: &Store,
    pending: &PendingUsage,
    review: &mut Review,
) {
    review_capacity(a, store, pending, review);
    let name = a.metadata.name.as_deref().unwrap_or("");
    // Capacity and quota in the same step: no claim is judged against one and not the other.
    let charge = crate::quota::charge_of(a);
    // What the claim charges now is the API server's version (the store may be behind it,
    // or show this very claim, decided a moment ago by its writer), and any version still
    // on its way.
    let held = old.and_then(crate::quota::charge_of);
    let versions: Vec<_> = std::iter::once(held.as_ref())
        .chain(pending.deciding.iter().map(Option::as_ref))
        .collect();
    if let Err(refusal) =
        crate::quota::check_claim(store, &pending.charges, name, &versions, charge.as_ref())
    {
        review.refuse(super::Refusal::OverQuota, refusal.to_string());
    }
}

/// Reviews what a claim takes against what its providers have room for.
pub(super) fn review_capacity(
    a: &Allocation,
    store: &Store,
    pending: &PendingUsage,
    review: &mut Review,
) {
    let name = a.metadata.name.as_deref().unwrap_or("");
    let index = store.index();
    if !is_uuid(&a.spec.consumer) {
        review.problem(format!(
            "spec.consumer {:?} is not a uuid; consumers are named by uuid",
            a.spec.consumer
        ));
    }
    if a.spec.allocations.is_empty() {
        review.problem("spec.allocations is empty; list at least one provider and its resources");
    }
    // This consumer's current claim is replaced, not added to.
    let previous = index.allocations(name);
    let mut seen = BTreeSet::new();
    for (i, pa) in a.spec.allocations.iter().enumerate() {
        let at = format!("spec.allocations[{i}]");
        if !seen.insert(&pa.provider) {
            review.problem(format!(
                "{at}.provider {:?} is listed twice; list each provider once",
                pa.provider
            ));
            continue;
        }
        if !index.contains(&pa.provider) {
            review.problem(format!("{at}.provider {:?} does not exist", pa.provider));
            continue;
        }
        if pa.resources.is_empty() {
            review.problem(format!(
                "{at}.resources is empty; give at least one resource class and amount"
            ));
        }
        for (class, amount) in &pa.resources {
            if let Err(e) = check_resource_class(class) {
                review.problem(format!("{at}.resources: {e}"));
                continue;
            }
            if *amount < 1 {
                review.problem(format!(
                    "{at}.resources[{class:?}] is {amount}; amounts are at least 1"
                ));
                continue;
            }
            let Some(inv) = index.inventory(&pa.provider, class) else {
                review.problem(format!(
                    "{at}: provider {:?} has no {class} inventory",
                    pa.provider
                ));
                continue;
            };
            let mine = previous.map_or(0, |p| p.amount(&pa.provider, class));
            let used = index.used(&pa.provider, class) - mine + pending.of(&pa.provider, class);
            if let Err(e) = inv.admits(used, *amount) {
                review.refuse(
                    super::Refusal::NoRoom,
                    format!("{at}: {class} on {:?}: {e}", pa.provider),
                );
            }
        }
    }
    let numa = crate::numa::judge_record(a, store, |provider, key| pending.of(provider, key));
    for problem in numa.problems {
        review.problem(problem);
    }
    for why in numa.no_room {
        review.refuse(super::Refusal::NoRoom, why);
    }
}
