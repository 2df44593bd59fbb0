//! kubeplace's state as Placement would show it, the source of an export: each provider
//! with its Placement name, uuid, parent, effective inventories and traits, and aggregates;
//! each consumer's allocations summed over its Allocation objects, with its project, user
//! and type. Generations are left at 0 and none: Placement counts its own.

use std::collections::{BTreeMap, HashMap};

use kubeplace_api::provider_name::placement_name;
use kubeplace_api::{Allocation, Kind, Object};

use super::snapshot::{Consumer, Provider, Snapshot, parents_first};
use crate::placement_records::CustomNameSet;
use crate::placement_records::{
    CONSUMER_TYPE_ANNOTATION, PROJECT_ANNOTATION, UNKNOWN_PROJECT, USER_ANNOTATION,
};
use crate::store::{ObjectKey, Store};
use crate::translate::resource_provider::api_inventory;
use crate::translate::{APPLIED, OVER_CAPACITY};

/// `store` as a snapshot, with the custom names a registry keeps (`classes`, `traits`)
/// beside those its objects use.
pub fn snapshot_of(store: &Store, classes: &CustomNameSet, traits: &CustomNameSet) -> Snapshot {
    let index = store.index();
    let records = index.providers();
    let uuid_of: HashMap<&str, &str> = records
        .iter()
        .map(|r| (r.name.as_str(), r.uuid.as_str()))
        .collect();
    let mut custom_classes = classes.clone();
    let mut custom_traits = traits.clone();
    let mut providers = Vec::new();
    for r in &records {
        let (inventories, effective_traits) = index
            .effective(&r.name)
            .unwrap_or_else(|| (r.inventories.clone(), r.traits.clone()));
        let name = match store.get(&ObjectKey::cluster(Kind::ResourceProvider, &r.name)) {
            Some(Object::ResourceProvider(rp)) => placement_name(rp),
            _ => r.name.clone(),
        };
        custom_classes.extend(
            inventories
                .keys()
                .filter(|c| c.starts_with("CUSTOM_"))
                .cloned(),
        );
        custom_traits.extend(
            effective_traits
                .iter()
                .filter(|t| t.starts_with("CUSTOM_"))
                .cloned(),
        );
        providers.push(Provider {
            uuid: r.uuid.clone(),
            name,
            parent: r
                .parent
                .as_deref()
                .and_then(|p| uuid_of.get(p))
                .map(|u| u.to_string()),
            generation: 0,
            inventories: inventories
                .into_iter()
                .map(|(c, i)| (c, api_inventory(&i)))
                .collect(),
            traits: effective_traits,
            aggregates: r.aggregates.clone(),
        });
    }
    let mut consumers: BTreeMap<String, Consumer> = BTreeMap::new();
    for o in store.list(Kind::Allocation) {
        let Object::Allocation(a) = o else { continue };
        // A claim kubeplace refused (it counts nowhere) is not one Placement has either.
        if refused(a)
            || store
                .refusal(a.metadata.name.as_deref().unwrap_or(""))
                .is_some()
        {
            continue;
        }
        let ann = |k: &str| {
            a.metadata
                .annotations
                .as_ref()
                .and_then(|m| m.get(k))
                .cloned()
        };
        let c = consumers
            .entry(a.spec.consumer.clone())
            .or_insert_with(|| Consumer {
                uuid: a.spec.consumer.clone(),
                project_id: ann(PROJECT_ANNOTATION).unwrap_or_else(|| UNKNOWN_PROJECT.to_string()),
                user_id: ann(USER_ANNOTATION).unwrap_or_else(|| UNKNOWN_PROJECT.to_string()),
                consumer_type: ann(CONSUMER_TYPE_ANNOTATION)
                    .unwrap_or_else(|| "INSTANCE".to_string()),
                generation: None,
                allocations: BTreeMap::new(),
            });
        for pa in &a.spec.allocations {
            let uuid = uuid_of
                .get(pa.provider.as_str())
                .map(|u| u.to_string())
                .unwrap_or_else(|| format!("provider {:?}", pa.provider));
            let on = c.allocations.entry(uuid).or_default();
            for (class, n) in &pa.resources {
                custom_classes.extend(class.starts_with("CUSTOM_").then(|| class.clone()));
                *on.entry(class.clone()).or_default() += n;
            }
        }
    }
    Snapshot {
        custom_classes,
        custom_traits,
        providers: parents_first(providers.into_iter().map(|p| (p.uuid.clone(), p)).collect()),
        consumers,
    }
}

/// Whether an Allocation's claim was refused after the fact (`Applied=False`,
/// `OverCapacity`).
fn refused(a: &Allocation) -> bool {
    a.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == APPLIED && c.status == "False" && c.reason == OVER_CAPACITY)
    })
}
