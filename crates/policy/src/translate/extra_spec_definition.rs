//! ExtraSpecDefinitions: the core definition each one describes, and the registry they
//! make together.

use kubeplace_api::{ExtraSpecDefinition, ExtraSpecValueType, SupportStatus};
use kubeplace_core::extra_specs::Origin;
use kubeplace_core::extra_specs::definition::{DefinitionSpec, Param, Support, ValueSpec};
use kubeplace_core::extra_specs::registry::{Registry, Rejected};
use kubeplace_core::extra_specs::shadow::{Shadowing, shadowing};

/// The core definition an ExtraSpecDefinition describes.
pub(crate) fn core_spec(d: &ExtraSpecDefinition) -> DefinitionSpec {
    let s = &d.spec;
    let v = &s.value;
    DefinitionSpec {
        key: s.key.clone(),
        description: s.description.clone(),
        support: match s.support_status {
            SupportStatus::Supported => Support::Supported,
            SupportStatus::Experimental => Support::Experimental,
            SupportStatus::Deprecated => Support::Deprecated {
                replacement: s.replacement.clone(),
            },
        },
        value: match v.type_ {
            ExtraSpecValueType::Boolean => ValueSpec::Bool,
            ExtraSpecValueType::Integer => ValueSpec::Int {
                min: v.min,
                max: v.max,
            },
            ExtraSpecValueType::String => match (&v.pattern, v.enum_.is_empty()) {
                (Some(p), _) => ValueSpec::Pattern(p.clone()),
                (None, false) => ValueSpec::Enum(v.enum_.clone()),
                (None, true) => ValueSpec::String,
            },
        },
        value_description: v.description.clone(),
        params: s
            .parameters
            .iter()
            .map(|p| Param {
                name: p.name.clone(),
                pattern: p.pattern.clone(),
                description: p.description.clone().unwrap_or_default(),
            })
            .collect(),
        virt_drivers: s.virt_drivers.clone(),
        depends_on: s.depends_on.clone(),
    }
}

/// Custom definitions compiled into a registry, in the order given; those that do not
/// compile (admission keeps them out, but a cluster may hold older ones) are returned apart.
pub fn custom_definitions<'a>(
    definitions: impl IntoIterator<Item = &'a ExtraSpecDefinition>,
) -> (Registry, Vec<Rejected>) {
    Registry::custom(definitions.into_iter().map(|d| {
        let name = d.metadata.name.clone().unwrap_or_default();
        (name, core_spec(d))
    }))
}

/// How in-tree definitions shadow a custom one, if it compiles.
pub(crate) fn definition_shadowing(d: &ExtraSpecDefinition) -> Result<Shadowing, Vec<String>> {
    let name = d.metadata.name.clone().unwrap_or_default();
    let def = core_spec(d).compile(Origin::Custom(name))?;
    Ok(shadowing(&def, Registry::in_tree()))
}
