//! ExtraSpecDefinition status.

use crate::api::{Condition, ExtraSpecDefinition, ExtraSpecDefinitionStatus};

pub(super) fn status(
    _d: &ExtraSpecDefinition,
    generation: Option<i64>,
) -> ExtraSpecDefinitionStatus {
    ExtraSpecDefinitionStatus {
        conditions: vec![Condition::new("Valid", true, "Admitted", "")],
        observed_generation: generation,
    }
}
