//! ProviderConfig status: which providers its entries reached, and conflicts.

use kubeplace_api::{Condition, ProviderConfig, ProviderConfigStatus};

use super::{World, capped};

pub(super) fn status(
    pc: &ProviderConfig,
    world: &World<'_>,
    generation: Option<i64>,
) -> ProviderConfigStatus {
    let name = pc.metadata.name.as_deref().unwrap_or("");
    let outcome = world.merge.configs.get(name).cloned().unwrap_or_default();
    let condition = if !outcome.conflicts.is_empty() {
        Condition::new(
            "Applied",
            false,
            "Conflict",
            capped(outcome.conflicts.iter().cloned()).join("; "),
        )
    } else if !outcome.unmatched.is_empty() {
        Condition::new(
            "Applied",
            true,
            "SomeProvidersAbsent",
            format!("no provider matches {}", outcome.unmatched.join(", ")),
        )
    } else {
        Condition::new("Applied", true, "Applied", "")
    };
    ProviderConfigStatus {
        matched_providers: capped(outcome.matched.iter().cloned()),
        matched_provider_count: outcome.matched.len() as i64,
        unmatched: capped(outcome.unmatched.iter().cloned()),
        conflict_count: outcome.conflicts.len() as i64,
        conflicts: capped(outcome.conflicts),
        conditions: vec![condition],
        observed_generation: generation,
    }
}
