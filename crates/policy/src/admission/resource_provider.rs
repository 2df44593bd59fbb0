//! ResourceProvider admission: names, inventories, the tree it joins, and deletion.

use super::Review;
use crate::store::Store;
use crate::translate::{inventory, provider_uuid};
use kubeplace_api::ResourceProvider;
use kubeplace_core::placement::{check_resource_class, check_trait, is_uuid, is_uuid_like};

pub(super) fn review(rp: &ResourceProvider, store: &Store, review: &mut Review) {
    for problem in crate::numa::check_detail(rp) {
        review.problem(problem);
    }
    let name = rp.metadata.name.as_deref().unwrap_or("");
    let index = store.index();
    if let Some(uuid) = &rp.spec.uuid
        && !is_uuid(uuid)
    {
        review.problem(format!("spec.uuid {uuid:?} is not a uuid; use the form 8-4-4-4-12 hex digits, or leave it out to derive one from the name"));
    }
    let uuid = provider_uuid(rp);
    if let Some(other) = index.names_with_uuid(&uuid).into_iter().find(|n| n != name) {
        review.problem(format!(
            "spec.uuid {uuid} is already used by provider {other:?}; every provider needs its own uuid"
        ));
    }
    if let Some(parent) = &rp.spec.parent {
        if parent == name {
            review.problem(format!(
                "spec.parent {parent:?} names the provider itself; a root provider has no parent"
            ));
        } else if let Some(cycle) = index.would_cycle(name, parent) {
            review.problem(format!(
                "spec.parent {parent:?} would make a cycle: {}",
                cycle.join(" -> ")
            ));
        } else if !index.contains(parent) {
            review.warn(format!(
                "spec.parent {parent:?} does not exist yet; the provider is not Ready until it does"
            ));
        }
    }
    for (class, inv) in &rp.spec.inventories {
        if let Err(e) = check_resource_class(class) {
            review.problem(format!("spec.inventories[{class:?}]: {e}"));
        }
        for e in inventory(inv).check() {
            review.problem(format!("spec.inventories[{class:?}]: {e}"));
        }
    }
    if let Some(usages) = index.usages(name) {
        for (class, used) in usages {
            if used > 0 && !rp.spec.inventories.contains_key(&class) {
                review.problem(format!(
                    "spec.inventories: {class} cannot be removed while allocations use {used} of it"
                ));
            }
        }
    }
    for t in &rp.spec.traits {
        if let Err(e) = check_trait(t) {
            review.problem(format!("spec.traits: {e}"));
        }
    }
    for a in &rp.spec.aggregates {
        if !is_uuid_like(a) {
            review.problem(format!(
                "spec.aggregates: {a:?} is not a uuid; aggregates are named by uuid (32 hex digits, with or without hyphens)"
            ));
        }
    }
}

pub(super) fn review_delete(rp: &ResourceProvider, store: &Store, review: &mut Review) {
    let name = rp.metadata.name.as_deref().unwrap_or("");
    let index = store.index();
    let kids = index.children(name);
    if !kids.is_empty() {
        review.problem(format!(
            "it still has child providers ({}); delete them first",
            kids.join(", ")
        ));
    }
    if let Some(usages) = index.usages(name).filter(|u| u.values().any(|n| *n > 0)) {
        let used: Vec<String> = usages.iter().map(|(c, n)| format!("{c}:{n}")).collect();
        review.problem(format!(
            "allocations still use it ({}); delete them first",
            used.join(",")
        ));
    }
}
