//! `resources{group}:` — amounts of resource classes requested from placement.

use super::{GROUP_DOC, GROUP_PATTERN, int_min};
use crate::extra_specs::definition::DefinitionSpec as D;
use crate::placement::resource_class::standard_resource_classes;

fn amount(key: &str, description: &str) -> D {
    D::new(key, description, int_min(0))
        .param("group", GROUP_PATTERN, GROUP_DOC)
        .value_doc("an amount; 0 removes the class from the request")
}

pub(super) fn definitions() -> Vec<D> {
    standard_resource_classes()
        .iter()
        .map(|class| {
            amount(
                &format!("resources{{group}}:{class}"),
                &format!(
                    "How much {class} the server asks placement for, in the unnumbered group or the numbered group {{group}}; it replaces the amount derived from the flavor's size."
                ),
            )
        })
        .chain([amount(
            "resources{group}:CUSTOM_{resource}",
            "How much of the custom resource class CUSTOM_{resource} the server asks placement for.",
        )
        .param("resource", "[A-Z0-9_]+", "the custom resource class, after CUSTOM_")])
        .collect()
}
