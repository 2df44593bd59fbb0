//! `trait{group}:` — traits that placement must find, or must not find, on providers.

use super::{GROUP_DOC, GROUP_PATTERN, enumeration};
use crate::extra_specs::definition::DefinitionSpec as D;
use crate::placement::trait_name::standard_traits;

fn require_or_forbid(key: &str, description: &str) -> D {
    D::new(key, description, enumeration(&["required", "forbidden"]))
        .param("group", GROUP_PATTERN, GROUP_DOC)
        .value_doc("`required` or `forbidden`")
}

pub(super) fn definitions() -> Vec<D> {
    standard_traits()
        .iter()
        .map(|t| {
            require_or_forbid(
                &format!("trait{{group}}:{t}"),
                &format!("Asks placement for providers that have (required) or lack (forbidden) the trait {t}."),
            )
        })
        .chain([require_or_forbid(
            "trait{group}:CUSTOM_{trait}",
            "Asks placement for providers that have (required) or lack (forbidden) the custom trait CUSTOM_{trait}.",
        )
        .param("trait", "[A-Z0-9_]+", "the custom trait, after CUSTOM_")])
        .collect()
}
