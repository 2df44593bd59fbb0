//! ExtraSpecDefinition status: whether it is usable, and whether an in-tree definition
//! shadows it (in-tree definitions take precedence).

use crate::translate::definition_shadowing;
use kubeplace_api::{Condition, ExtraSpecDefinition, ExtraSpecDefinitionStatus};
use kubeplace_core::extra_specs::shadow::Shadowing;

pub(super) fn status(
    d: &ExtraSpecDefinition,
    generation: Option<i64>,
) -> ExtraSpecDefinitionStatus {
    let conditions = match definition_shadowing(d) {
        Err(problems) => vec![Condition::new(
            "Valid",
            false,
            "InvalidDefinition",
            problems.join("; "),
        )],
        Ok(shadow) => {
            let shadowed = match shadow {
                Shadowing::None => Condition::new("Shadowed", false, "NotShadowed", ""),
                Shadowing::Partial { example, by } => Condition::new(
                    "Shadowed",
                    true,
                    "PartlyShadowedByInTree",
                    format!(
                        "some keys it matches, such as {example}, are covered by the in-tree definition {by}, which applies to them"
                    ),
                ),
                Shadowing::Full { by, .. } => Condition::new(
                    "Shadowed",
                    true,
                    "ShadowedByInTree",
                    format!(
                        "the in-tree definition {by} covers every key this definition matches, so it never applies"
                    ),
                ),
            };
            let in_use = shadowed.reason != "ShadowedByInTree";
            vec![
                Condition::new(
                    "Valid",
                    in_use,
                    if in_use { "Admitted" } else { "Shadowed" },
                    if in_use {
                        ""
                    } else {
                        "shadowed by an in-tree definition; see the Shadowed condition"
                    },
                ),
                shadowed,
            ]
        }
    };
    ExtraSpecDefinitionStatus {
        conditions,
        observed_generation: generation,
    }
}
