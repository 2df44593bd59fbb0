//! ResourceProvider status: tree position, effective inventories and traits, usages.

use crate::translate::provider_uuid;
use kubeplace_api::{Condition, ResourceProvider, ResourceProviderStatus};

use super::World;

use crate::translate::resource_provider::api_inventory;

pub(super) fn status(
    rp: &ResourceProvider,
    world: &World<'_>,
    generation: Option<i64>,
) -> ResourceProviderStatus {
    let name = rp.metadata.name.as_deref().unwrap_or("");
    let index = world.store.index();
    let effective = world.merge.effective(index, name);
    let errors = index.tree_errors(name);
    let mut conditions = vec![if errors.is_empty() {
        Condition::new("Ready", true, "TreeWellFormed", "")
    } else {
        let reason = match errors[0] {
            kubeplace_core::placement::TreeError::ParentNotFound { .. } => "ParentNotFound",
            kubeplace_core::placement::TreeError::Cycle { .. } => "ParentCycle",
            kubeplace_core::placement::TreeError::DuplicateUuid { .. } => "DuplicateUuid",
        };
        let msg: Vec<String> = errors.iter().map(ToString::to_string).collect();
        Condition::new("Ready", false, reason, msg.join("; "))
    }];
    if !effective.conflicts.is_empty() {
        conditions.push(Condition::new(
            "ProviderConfigApplied",
            false,
            "Conflict",
            effective.conflicts.join("; "),
        ));
    }
    ResourceProviderStatus {
        // The index keeps the uuid it was given; deriving one again costs a SHA-1 a provider.
        uuid: Some(
            index
                .uuid(name)
                .map_or_else(|| provider_uuid(rp), str::to_string),
        ),
        root: index.root_of(name).ok(),
        effective_inventories: effective
            .inventories
            .into_iter()
            .map(|(c, i)| (c, api_inventory(&i)))
            .collect(),
        effective_traits: effective.traits.into_iter().collect(),
        usages: index
            .usages(name)
            .map(|u| u.into_iter().collect())
            .unwrap_or_default(),
        applied_provider_configs: super::capped(effective.applied),
        conditions,
        observed_generation: generation,
    }
}
