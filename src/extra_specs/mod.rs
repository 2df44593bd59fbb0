//! Flavor extra specs: validation modes and the checks every key gets.
//!
//! Pure code. The checks here are Nova's API schema (key characters and length, value
//! length) and the placement namespaces (`resources*:`, `trait*:`, `group_policy`) that
//! turn into a placement request.

mod mode;
mod placement_keys;
mod schema;

pub use mode::{ModeError, ValidationMode};
pub use placement_keys::{PlacementKey, parse_placement_key};
pub use schema::{MAX_KEY_LEN, MAX_VALUE_LEN, SchemaProblem, check_key_syntax, check_value_length};

/// One problem with one extra spec: what would make it right is in `why`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("extraSpecs[{key:?}]={value:?}: {why}")]
pub struct SpecProblem {
    pub key: String,
    pub value: String,
    pub why: String,
}

/// What checking a flavor's extra specs found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpecReport {
    /// Problems that reject the flavor.
    pub problems: Vec<SpecProblem>,
    /// Things worth telling the user that do not reject it.
    pub warnings: Vec<String>,
}

/// Checks every extra spec under a mode, reporting all problems at once.
pub fn check_extra_specs<'a>(
    specs: impl IntoIterator<Item = (&'a str, &'a str)>,
    mode: ValidationMode,
) -> SpecReport {
    let mut report = SpecReport::default();
    if mode == ValidationMode::Off {
        return report;
    }
    for (key, value) in specs {
        let problem = |why: String| SpecProblem {
            key: key.to_string(),
            value: value.to_string(),
            why,
        };
        if let Err(e) = check_key_syntax(key) {
            report.problems.push(problem(e.to_string()));
            continue;
        }
        if let Err(e) = check_value_length(value) {
            report.problems.push(problem(e.to_string()));
            continue;
        }
        if let Some(Err(why)) = parse_placement_key(key, value) {
            report.problems.push(problem(why));
        }
    }
    report
}
