//! `aggregate_instance_extra_specs:` — matched against host aggregate metadata.

use super::string;
use crate::extra_specs::definition::DefinitionSpec as D;

pub(super) fn definitions() -> Vec<D> {
    vec![
        D::new(
            "aggregate_instance_extra_specs:{key}",
            "Only hosts in an aggregate whose metadata key {key} satisfies the value pass the AggregateInstanceExtraSpecsFilter. The value is either a plain value to compare with, or an operator followed by an operand: `=`, `==`, `!=`, `>=`, `<=` compare numbers, `s==`, `s!=`, `s>=`, `s>`, `s<=`, `s<` compare strings, `<in>` tests for a substring, `<all-in>` for all of several elements, and `<or>` separates alternatives.",
            string(),
        )
        .param("key", ".+", "the aggregate metadata key")
        .value_doc("a value or an operator expression"),
    ]
}
