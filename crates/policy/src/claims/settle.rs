//! Settling claims that have no verdict yet, in creation order.

use kubeplace_api::{Allocation, Kind, Object};

use crate::store::Store;
use crate::translate::{is_decided, takes};

/// Decides every claim without a verdict for its current generation, oldest first (by
/// creation time, then name), against the claims counted before it. A claim that does not
/// fit is refused and stops counting; the names refused are returned with why. Claims on a
/// provider or class that does not exist yet are left undecided (they cannot take capacity
/// from anyone) and are decided once it exists.
pub fn settle(store: &mut Store) -> Vec<(String, String)> {
    // A claim this process decided a moment ago and has not committed is not a claim yet:
    // the claims ledger may still refuse it. It neither is decided here nor takes room
    // from those that are.
    let local: Vec<String> = store
        .decided_here()
        .filter(|k| k.kind == Kind::Allocation && store.index().allocations(&k.name).is_some())
        .map(|k| k.name.clone())
        .collect();
    let mut undecided: Vec<(Option<i64>, String)> = store
        .list(Kind::Allocation)
        .filter_map(|o| match o {
            Object::Allocation(a)
                if is_undecided(store, o) && !local.iter().any(|n| n == o.name()) =>
            {
                let created = a
                    .metadata
                    .creation_timestamp
                    .as_ref()
                    .map(|t| t.0.as_second());
                Some((created, o.name().to_string()))
            }
            _ => None,
        })
        .collect();
    if undecided.is_empty() {
        return Vec::new();
    }
    // Objects without a creation time (files read offline) keep name order.
    undecided.sort();
    for name in undecided.iter().map(|(_, n)| n).chain(&local) {
        store.uncount(name);
    }
    let mut refused = Vec::new();
    for (_, name) in undecided {
        let Some(Object::Allocation(a)) = store.get_cluster(Kind::Allocation, &name) else {
            continue;
        };
        match misfit(store, a) {
            Some(why) => {
                store.refuse(&name, why.clone());
                refused.push((name, why));
            }
            None => store.recount(&name),
        }
    }
    for name in &local {
        store.recount(name);
    }
    refused
}

/// Whether [`settle`] has a claim to decide.
pub fn any_undecided(store: &Store) -> bool {
    store.list(Kind::Allocation).any(|o| is_undecided(store, o))
}

/// A claim with no verdict for its current generation and no refusal waiting to be written.
fn is_undecided(store: &Store, object: &Object) -> bool {
    matches!(object, Object::Allocation(a) if !is_decided(a) && store.refusal(object.name()).is_none())
}

/// Why the claim does not fit beside the claims counted now, if it does not: capacity, then
/// its project's quota. A provider or class that does not exist is not a misfit: the status
/// says so, and nothing is taken.
fn misfit(store: &Store, a: &Allocation) -> Option<String> {
    let index = store.index();
    let capacity = takes(a).into_iter().find_map(|((provider, class), amount)| {
        let inventory = index.inventory(&provider, &class)?;
        let used = index.used(&provider, &class);
        (!inventory.fits_capacity(used, amount)).then(|| {
            format!(
                "{amount} {class} on {provider:?} would use {} of a capacity of {}; claims made before it took the capacity, so it does not count",
                used.saturating_add(amount),
                inventory.capacity()
            )
        })
    });
    let capacity = capacity.or_else(|| {
        let held = crate::numa::judge_record(a, store, |_, _| 0).no_room;
        (!held.is_empty()).then(|| {
            format!(
                "{}; claims made before it hold them, so it does not count",
                held.join("; ")
            )
        })
    });
    capacity.or_else(|| {
        let name = a.metadata.name.as_deref().unwrap_or("");
        let charge = crate::quota::charge_of(a);
        crate::quota::check_claim(store, &Default::default(), name, &[], charge.as_ref())
            .err()
            .map(|refusal| {
                format!("{refusal}; claims made before it are charged first, so it does not count")
            })
    })
}

/// Records an admitted claim's verdict in its status at once, as the operator's status
/// writer does a moment after the claims ledger admits it: from then on the claim is
/// decided, and a quota or inventory lowered later leaves it counted.
pub fn record_admitted(store: &mut Store, name: &str) {
    let key = crate::store::ObjectKey::cluster(Kind::Allocation, name);
    let Some(Object::Allocation(a)) = store.get(&key) else {
        return;
    };
    if is_decided(a) || store.refusal(name).is_some() {
        return;
    }
    let status = kubeplace_api::AllocationStatus {
        conditions: vec![kubeplace_api::Condition::new(
            crate::translate::APPLIED,
            true,
            crate::translate::APPLIED,
            "",
        )],
        observed_generation: a.metadata.generation,
    };
    store.set_status(&key, kubeplace_api::Status::Allocation(status));
}
