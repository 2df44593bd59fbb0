//! ExtraSpecDefinition admission: the definition itself must be usable.

use std::collections::BTreeSet;

use super::Review;
use crate::store::Store;
use crate::translate::definition_shadowing;
use kubeplace_api::Kind;
use kubeplace_api::{ExtraSpecDefinition, ExtraSpecValueType, Object};
use kubeplace_core::extra_specs::check_key_syntax;
use kubeplace_core::extra_specs::definition::placeholders;
use kubeplace_core::extra_specs::shadow::Shadowing;

pub(super) fn review(d: &ExtraSpecDefinition, store: &Store, review: &mut Review) {
    let me = d.metadata.name.as_deref().unwrap_or("");
    let spec = &d.spec;
    let literal: String = spec.key.replace(['{', '}'], "");
    if let Err(e) = check_key_syntax(&literal) {
        review.problem(format!("spec.key {:?}: {e}", spec.key));
    }
    match placeholders(&spec.key) {
        Err(e) => review.problem(format!("spec.key {:?} {e}", spec.key)),
        Ok(names) => {
            let declared: BTreeSet<&str> =
                spec.parameters.iter().map(|p| p.name.as_str()).collect();
            for n in &names {
                if !declared.contains(n.as_str()) {
                    review.problem(format!(
                        "spec.key uses {{{n}}} but spec.parameters has no entry named {n:?}"
                    ));
                }
            }
            for p in &spec.parameters {
                if !names.contains(&p.name) {
                    review.problem(format!(
                        "spec.parameters: {:?} does not appear as {{{}}} in spec.key",
                        p.name, p.name
                    ));
                }
            }
        }
    }
    for (i, p) in spec.parameters.iter().enumerate() {
        if let Err(e) = regex::Regex::new(&format!("^(?:{})$", p.pattern)) {
            review.problem(format!(
                "spec.parameters[{i}].pattern {:?} is not a regular expression: {}",
                p.pattern,
                first_line(&e.to_string())
            ));
        }
    }
    let v = &spec.value;
    if let Some(pattern) = &v.pattern
        && let Err(e) = regex::Regex::new(&format!("^(?:{pattern})$"))
    {
        review.problem(format!(
            "spec.value.pattern {pattern:?} is not a regular expression: {}",
            first_line(&e.to_string())
        ));
    }
    if let (Some(min), Some(max)) = (v.min, v.max)
        && min > max
    {
        review.problem(format!(
            "spec.value.min ({min}) is greater than spec.value.max ({max})"
        ));
    }
    if v.type_ != ExtraSpecValueType::Integer && (v.min.is_some() || v.max.is_some()) {
        review.problem("spec.value.min and max apply only to type integer");
    }
    if v.type_ != ExtraSpecValueType::String && (v.pattern.is_some() || !v.enum_.is_empty()) {
        review.problem("spec.value.pattern and enum apply only to type string");
    }
    if v.pattern.is_some() && !v.enum_.is_empty() {
        review.problem("spec.value.pattern and enum are alternatives; give one or the other");
    }
    match definition_shadowing(d) {
        Ok(Shadowing::Full { by, .. }) => review.warn(format!(
            "spec.key {:?} is shadowed: the in-tree definition {by} covers every key it matches, so this definition never applies",
            spec.key
        )),
        Ok(Shadowing::Partial { example, by }) => review.warn(format!(
            "spec.key {:?} is partly shadowed: some keys it matches, such as {example}, are covered by the in-tree definition {by}, which applies to them",
            spec.key
        )),
        Ok(Shadowing::None) | Err(_) => {}
    }
    for other in store.list(Kind::ExtraSpecDefinition) {
        if let Object::ExtraSpecDefinition(o) = other
            && other.name() != me
            && o.spec.key == spec.key
        {
            review.problem(format!(
                "spec.key {:?} is already defined by ExtraSpecDefinition {:?}",
                spec.key,
                other.name()
            ));
        }
    }
}

fn first_line(s: &str) -> String {
    s.lines()
        .rfind(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .to_string()
}
