//! Flavor extra specs: the registry of definitions, value types, validation modes, and
//! the documentation and Glance metadefs generated from the registry.
//!
//! Pure code. Every key first meets Nova's API schema (key characters and length, value
//! length); then, unless the mode is `off`, it is looked up among the in-tree definitions
//! and, failing those, the operator's custom ones, and its value is checked.

pub mod definition;
pub mod docs;
pub mod image_properties;
pub mod metadefs;
mod mode;
pub mod registry;
mod schema;
pub mod shadow;
pub mod value;

use serde::Serialize;

pub use definition::{Definition, DefinitionSpec, Origin, Param, Support, ValueSpec};
pub use mode::{ModeError, ValidationMode};
pub use registry::Registry;
pub use schema::check_key_syntax;
pub(crate) use schema::check_value_length;
pub use value::ValueType;

/// One problem with one extra spec: what is wrong, what would be accepted, and the
/// nearest accepted key or value when there is an obvious one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SpecProblem {
    pub key: String,
    pub value: String,
    pub why: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accepted: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suggestion: Option<String>,
}

impl std::fmt::Display for SpecProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "extraSpecs[{:?}]={:?}: {}",
            self.key, self.value, self.why
        )?;
        if let Some(a) = &self.accepted {
            write!(f, "; {a}")?;
        }
        if let Some(s) = &self.suggestion {
            write!(f, " (did you mean {s:?}?)")?;
        }
        Ok(())
    }
}

impl std::error::Error for SpecProblem {}

/// What checking a flavor's extra specs found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpecReport {
    /// Problems that reject the flavor.
    pub problems: Vec<SpecProblem>,
    /// Things worth telling the user that do not reject it.
    pub warnings: Vec<String>,
}

/// The definitions a flavor is checked against: the in-tree ones first, then the
/// operator's.
#[derive(Clone, Copy)]
pub struct Validators<'a> {
    pub in_tree: &'a Registry,
    pub custom: &'a Registry,
}

impl Validators<'static> {
    /// The in-tree definitions alone.
    #[cfg(test)]
    pub(crate) fn in_tree_only() -> Validators<'static> {
        static EMPTY: std::sync::OnceLock<Registry> = std::sync::OnceLock::new();
        Validators {
            in_tree: Registry::in_tree(),
            custom: EMPTY.get_or_init(Registry::default),
        }
    }
}

impl<'a> Validators<'a> {
    /// In-tree definitions and the given custom ones.
    pub fn with_custom(custom: &'a Registry) -> Validators<'a> {
        Validators {
            in_tree: Registry::in_tree(),
            custom,
        }
    }

    /// The definition that covers `key`: in-tree first.
    pub fn find(&self, key: &str) -> Option<&'a Definition> {
        self.in_tree.find(key).or_else(|| self.custom.find(key))
    }

    /// A known key close to `key`.
    pub(crate) fn suggest(&self, key: &str) -> Option<String> {
        let distance = |s: &String| crate::placement::edit_distance(key, s);
        match (self.in_tree.suggest(key), self.custom.suggest(key)) {
            (Some(a), Some(b)) if distance(&b) < distance(&a) => Some(b),
            (a, b) => a.or(b),
        }
    }
}

/// How one extra spec fared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Known, with a good value.
    Valid,
    /// Known and deprecated, with a good value: admitted with a warning.
    Deprecated,
    /// Known, with a bad value: rejected in strict and permissive modes.
    InvalidValue,
    /// No definition covers the key: rejected in strict mode, a warning in permissive.
    UnknownKey,
    /// The key or value breaks Nova's API schema: rejected in every mode.
    BadSyntax,
    /// Not checked (mode `off`).
    Unchecked,
}

/// The outcome for one extra spec, with everything the `check` command prints.
#[derive(Debug, Clone, Serialize)]
pub struct SpecOutcome {
    pub key: String,
    pub value: String,
    pub status: Status,
    /// The key template of the definition that matched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub definition: Option<String>,
    /// `in-tree`, or the name of the ExtraSpecDefinition.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    /// Whether the in-tree registry has the key's namespace (Nova rejects unknown keys
    /// only there).
    pub in_tree_namespace: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<SpecProblem>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

/// The verdict on one extra spec, borrowing the definition; the valid path allocates
/// nothing.
enum Judgement<'v> {
    Unchecked,
    Valid(&'v Definition),
    Deprecated(&'v Definition, String),
    InvalidValue(&'v Definition, SpecProblem),
    UnknownKey(SpecProblem),
    BadSyntax(SpecProblem),
}

fn judge<'v>(
    key: &str,
    value: &str,
    validators: &Validators<'v>,
    mode: ValidationMode,
    suggest: bool,
) -> Judgement<'v> {
    let problem = |why: String, accepted: Option<String>, suggestion: Option<String>| SpecProblem {
        key: key.to_string(),
        value: value.to_string(),
        why,
        accepted,
        suggestion,
    };
    if let Err(e) = check_key_syntax(key).and_then(|()| check_value_length(value)) {
        return Judgement::BadSyntax(problem(e.to_string(), None, None));
    }
    if mode == ValidationMode::Off {
        return Judgement::Unchecked;
    }
    let Some(def) = validators.find(key) else {
        return Judgement::UnknownKey(problem(
            unknown_key_reason(key),
            Some("use an in-tree key (kubeplace extra-specs docs lists them) or define this one with an ExtraSpecDefinition".into()),
            if suggest {
                validators.suggest(key)
            } else {
                None
            },
        ));
    };
    if let Err(v) = def.value.check(value) {
        return Judgement::InvalidValue(def, problem(v.why, Some(v.accepted), v.suggestion));
    }
    match &def.support {
        Support::Deprecated { replacement } => Judgement::Deprecated(
            def,
            match replacement {
                Some(r) => format!("extraSpecs[{key:?}] is deprecated; use {r} instead"),
                None => format!("extraSpecs[{key:?}] is deprecated"),
            },
        ),
        _ => Judgement::Valid(def),
    }
}

fn permissive_warning(p: &SpecProblem) -> String {
    format!("{p}; admitted because the validation mode is permissive")
}

/// Checks one extra spec against the validators under a mode, with everything the
/// `check` command prints.
pub fn check_spec(
    key: &str,
    value: &str,
    validators: &Validators<'_>,
    mode: ValidationMode,
) -> SpecOutcome {
    let mut outcome = SpecOutcome {
        key: key.to_string(),
        value: value.to_string(),
        status: Status::Valid,
        definition: None,
        origin: None,
        in_tree_namespace: false,
        problem: None,
        warning: None,
    };
    let judgement = judge(key, value, validators, mode, true);
    let def = match &judgement {
        Judgement::Valid(d) | Judgement::Deprecated(d, _) | Judgement::InvalidValue(d, _) => {
            Some(*d)
        }
        _ => None,
    };
    if let Some(def) = def {
        outcome.in_tree_namespace = match def.origin {
            Origin::InTree => !def.namespace.is_empty(),
            Origin::Custom(_) => validators.in_tree.knows_namespace_of(key),
        };
        outcome.definition = Some(def.key.clone());
        outcome.origin = Some(match &def.origin {
            Origin::InTree => "in-tree".to_string(),
            Origin::Custom(name) => name.clone(),
        });
    }
    match judgement {
        Judgement::Unchecked => outcome.status = Status::Unchecked,
        Judgement::Valid(_) => {}
        Judgement::Deprecated(_, w) => {
            outcome.status = Status::Deprecated;
            outcome.warning = Some(w);
        }
        Judgement::InvalidValue(_, p) => {
            outcome.status = Status::InvalidValue;
            outcome.problem = Some(p);
        }
        Judgement::BadSyntax(p) => {
            outcome.status = Status::BadSyntax;
            outcome.problem = Some(p);
        }
        Judgement::UnknownKey(p) => {
            outcome.status = Status::UnknownKey;
            outcome.in_tree_namespace = validators.in_tree.knows_namespace_of(key);
            if mode == ValidationMode::Permissive {
                outcome.warning = Some(permissive_warning(&p));
            }
            outcome.problem = Some(p);
        }
    }
    outcome
}

/// Why no definition matched, with the granular-group rule when the key looks like a
/// placement key with a bad group suffix.
fn unknown_key_reason(key: &str) -> String {
    let ns = key.split_once(':').map_or("", |(ns, _)| ns);
    for prefix in ["resources", "trait"] {
        if let Some(group) = ns.strip_prefix(prefix)
            && !registry::is_group_suffix(group)
        {
            return format!(
                "no definition matches this key; after {prefix:?} the group suffix {group:?} must be 1 to 64 characters of a-z, A-Z, 0-9, '_' and '-'"
            );
        }
    }
    if let Some((ns, name)) = key.split_once(':') {
        for (prefix, what) in [("resources", "resource class"), ("trait", "trait")] {
            if ns.starts_with(prefix) {
                return format!(
                    "no definition matches this key: {name:?} is neither a standard {what} nor CUSTOM_ followed by A-Z, 0-9 and _"
                );
            }
        }
    }
    "no in-tree or custom definition matches this key".to_string()
}

/// How many unknown keys of one flavor get a "did you mean": finding the closest known key
/// compares it with every key of its namespace, and a flavor may carry thousands of specs.
pub const MAX_SUGGESTIONS: usize = 16;

/// Checks every extra spec under a mode, reporting all problems at once. The first
/// [`MAX_SUGGESTIONS`] unknown keys come with the closest known key.
pub fn check_extra_specs<'a>(
    specs: impl IntoIterator<Item = (&'a str, &'a str)>,
    mode: ValidationMode,
    validators: &Validators<'_>,
) -> SpecReport {
    let mut report = SpecReport::default();
    let mut unknown = 0;
    for (key, value) in specs {
        let judgement = judge(key, value, validators, mode, unknown < MAX_SUGGESTIONS);
        if matches!(judgement, Judgement::UnknownKey(_)) {
            unknown += 1;
        }
        match judgement {
            Judgement::Valid(_) | Judgement::Unchecked => {}
            Judgement::Deprecated(_, w) => report.warnings.push(w),
            Judgement::InvalidValue(_, p) | Judgement::BadSyntax(p) => report.problems.push(p),
            Judgement::UnknownKey(p) => match mode {
                ValidationMode::Permissive => report.warnings.push(permissive_warning(&p)),
                _ => report.problems.push(p),
            },
        }
    }
    report
}

#[cfg(test)]
mod tests;
