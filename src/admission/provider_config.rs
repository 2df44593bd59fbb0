//! ProviderConfig admission: the rules Nova's loader applies to a provider config file,
//! plus identifications already claimed by another ProviderConfig.

use std::collections::BTreeMap;

use super::Review;
use crate::api::{Object, ProviderConfig};
use crate::placement::{Inventory, is_uuid, resource_class::is_custom};
use crate::store::Store;

/// The special identification that targets every compute node not otherwise named.
pub const COMPUTE_NODE_ID: &str = "$COMPUTE_NODE";

/// How an entry identifies its provider, as a key that must be unique across configs.
pub fn identification_key(uuid: Option<&str>, name: Option<&str>) -> Option<String> {
    match (uuid, name) {
        (Some(u), None) => Some(format!("uuid {u}")),
        (None, Some(n)) => Some(format!("name {n}")),
        _ => None,
    }
}

pub(super) fn review(pc: &ProviderConfig, store: &Store, review: &mut Review) {
    let me = pc.metadata.name.as_deref().unwrap_or("");
    let version = &pc.spec.meta.schema_version;
    match version.split_once('.') {
        Some(("1", minor)) if !minor.is_empty() && minor.bytes().all(|b| b.is_ascii_digit()) => {
            if minor != "0" {
                review.warn(format!("spec.meta.schemaVersion {version}: kubeplace reads schema 1.0; fields newer 1.x minors add are ignored"));
            }
        }
        _ => review.problem(format!(
            "spec.meta.schemaVersion {version:?} is not supported; use \"1.0\" (any \"1.x\" loads)"
        )),
    }
    // Identifications claimed by other ProviderConfigs.
    let mut claimed: BTreeMap<String, String> = BTreeMap::new();
    for other in store.list("ProviderConfig") {
        if let Object::ProviderConfig(o) = other
            && other.name() != me
        {
            for e in &o.spec.providers {
                if let Some(k) = identification_key(
                    e.identification.uuid.as_deref(),
                    e.identification.name.as_deref(),
                ) {
                    claimed.entry(k).or_insert_with(|| other.name().to_string());
                }
            }
        }
    }
    let mut mine: BTreeMap<String, usize> = BTreeMap::new();
    for (i, entry) in pc.spec.providers.iter().enumerate() {
        let at = format!("spec.providers[{i}]");
        let id = &entry.identification;
        let Some(key) = identification_key(id.uuid.as_deref(), id.name.as_deref()) else {
            review.problem(format!(
                "{at}.identification: set exactly one of uuid or name"
            ));
            continue;
        };
        if let Some(uuid) = &id.uuid
            && uuid != COMPUTE_NODE_ID
            && !is_uuid(uuid)
        {
            review.problem(format!(
                "{at}.identification.uuid {uuid:?} is neither a uuid nor {COMPUTE_NODE_ID}"
            ));
        }
        if let Some(name) = &id.name
            && name.is_empty()
        {
            review.problem(format!("{at}.identification.name is empty"));
        }
        if let Some(first) = mine.insert(key.clone(), i) {
            review.problem(format!("{at}.identification: {key} is already identified by spec.providers[{first}]; identify each provider once"));
        }
        if let Some(owner) = claimed.get(&key) {
            review.problem(format!("{at}.identification: {key} is already identified by ProviderConfig {owner:?}; a provider may be configured by one ProviderConfig only"));
        }
        for (j, one) in entry
            .inventories
            .iter()
            .flat_map(|i| i.additional.iter())
            .enumerate()
        {
            let at = format!("{at}.inventories.additional[{j}]");
            if one.len() != 1 {
                review.problem(format!(
                    "{at} has {} resource classes; each list item names exactly one",
                    one.len()
                ));
            }
            for (class, inv) in one {
                if !is_custom(class) {
                    review.problem(format!("{at}: resource class {class:?} is not CUSTOM_[A-Z0-9_]+; provider configs may only add custom resource classes"));
                }
                let d = Inventory::default();
                let core = Inventory {
                    total: inv.total,
                    reserved: inv.reserved.unwrap_or(d.reserved),
                    min_unit: inv.min_unit.unwrap_or(d.min_unit),
                    max_unit: inv.max_unit.unwrap_or(d.max_unit),
                    step_size: inv.step_size.unwrap_or(d.step_size),
                    allocation_ratio: inv.allocation_ratio.unwrap_or(d.allocation_ratio),
                };
                for e in core.check() {
                    review.problem(format!("{at}[{class:?}]: {e}"));
                }
            }
        }
        for t in entry.traits.iter().flat_map(|t| t.additional.iter()) {
            if !is_custom(t) {
                review.problem(format!("{at}.traits.additional: trait {t:?} is not CUSTOM_[A-Z0-9_]+; provider configs may only add custom traits"));
            }
        }
    }
}
