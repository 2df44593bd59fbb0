//! Keys with no namespace.

use super::{LIBVIRT, boolean, enumeration};
use crate::extra_specs::definition::DefinitionSpec as D;

pub(super) fn definitions() -> Vec<D> {
    vec![
        D::new(
            "hide_hypervisor_id",
            "The old, unnamespaced spelling of hw:hide_hypervisor_id. It clashes with the AggregateInstanceExtraSpecsFilter, which reads unnamespaced keys as aggregate metadata.",
            boolean(),
        )
        .value_doc("true to hide the hypervisor signature")
        .drivers(LIBVIRT)
        .deprecated(Some("hw:hide_hypervisor_id")),
        D::new(
            "group_policy",
            "How numbered request groups (resourcesN:, traitN:) may share resource providers: `isolate` puts each group on a different provider, `none` lets them share.",
            enumeration(&["isolate", "none"]),
        )
        .value_doc("the group policy"),
    ]
}
