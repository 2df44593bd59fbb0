//! The formal schema of provider config files (schemas/provider-config-v1.json), and its
//! verdicts in kubeplace's words.

use std::fmt;
use std::sync::OnceLock;

use jsonschema::error::{TypeKind, ValidationErrorKind};
use serde_json::Value;

use super::problem::{COMPUTE_NODE_ID, Problem, Seg, Style, problem, provider_of};

/// The schema file, as kept in the repository.
pub(crate) const SCHEMA_V1: &str = include_str!("../../../../schemas/provider-config-v1.json");

/// `$Major.$minor` of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Version {
    pub major: u64,
    pub minor: u64,
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Reads `MAJOR.MINOR` (digits only). Anything else is left to the schema's pattern.
pub(crate) fn parse_version(s: &str) -> Option<Version> {
    let (major, minor) = s.split_once('.')?;
    let digits = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
    if !digits(major) || !digits(minor) {
        return None;
    }
    Some(Version {
        major: major.parse().ok()?,
        minor: minor.parse().ok()?,
    })
}

/// The compiled schema.
pub fn validator() -> &'static jsonschema::Validator {
    static V: OnceLock<jsonschema::Validator> = OnceLock::new();
    V.get_or_init(|| {
        let schema: Value =
            serde_json::from_str(SCHEMA_V1).expect("schemas/provider-config-v1.json is JSON");
        jsonschema::validator_for(&schema)
            .expect("schemas/provider-config-v1.json is a valid schema")
    })
}

fn segments(pointer: &str) -> Vec<Seg> {
    pointer
        .split('/')
        .skip(1)
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .map(|s| match s.parse::<usize>() {
            Ok(i) => Seg::Index(i),
            Err(_) => Seg::Key(s),
        })
        .collect()
}

/// A value as a message shows it.
pub(crate) fn describe(v: &Value) -> String {
    match v {
        Value::Null => "nothing (null)".into(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => format!("the string {s:?}"),
        Value::Array(_) => "a list".into(),
        Value::Object(m) => match m.get(super::yaml11::TIMESTAMP_KEY) {
            Some(Value::String(raw)) if m.len() == 1 => format!(
                "the date {raw} (YAML reads an unquoted date as a date; quote it to make it a string)"
            ),
            _ => "a mapping".into(),
        },
    }
}

fn expected(kind: &TypeKind) -> String {
    let one = |t: &str| match t {
        "string" => "a string",
        "integer" => "a whole number",
        "number" => "a number",
        "object" => "a mapping",
        "array" => "a list",
        "boolean" => "true or false",
        "null" => "null",
        _ => "another type",
    };
    match kind {
        TypeKind::Single(t) => one(&t.to_string()).to_string(),
        TypeKind::Multiple(ts) => ts
            .into_iter()
            .map(|t| one(&t.to_string()).to_string())
            .collect::<Vec<_>>()
            .join(" or "),
    }
}

fn last_key(segs: &[Seg]) -> &str {
    match segs.last() {
        Some(Seg::Key(k)) => k,
        _ => "",
    }
}

/// Whether the path is a resource class key: `providers/N/inventories/additional/M/CLASS`.
fn is_class_level(segs: &[Seg]) -> bool {
    matches!(segs, [Seg::Key(p), Seg::Index(_), Seg::Key(i), Seg::Key(a), Seg::Index(_)]
        if p == "providers" && i == "inventories" && a == "additional")
}

fn name_rule(what: &str, name: &str) -> String {
    let upper = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
    if name.len() > 255 {
        format!(
            "{what} {name:?} is {} characters long; at most 255 are allowed",
            name.len()
        )
    } else if upper && !name.starts_with("CUSTOM_") {
        let plural = if what == "trait" {
            "traits"
        } else {
            "resource classes"
        };
        format!(
            "{what} {name:?} is not CUSTOM_[A-Z0-9_]+; a provider config may only add custom {plural} (the standard ones belong to the virt driver)"
        )
    } else if name == "CUSTOM_" {
        format!(
            "{what} \"CUSTOM_\" has nothing after CUSTOM_; Placement needs at least one more character"
        )
    } else {
        format!("{what} {name:?} is not a custom {what} name: CUSTOM_ followed by A-Z, 0-9 and _")
    }
}

/// Every schema violation of a file's value, in kubeplace's words.
pub fn problems(value: &Value, style: Style) -> Vec<Problem> {
    let mut out = Vec::new();
    for error in validator().iter_errors(value) {
        let segs = segments(error.instance_path().as_str());
        let instance: &Value = error.instance();
        let provider = provider_of(value, &segs);
        let field = last_key(&segs);
        let mut push = |segs: Vec<Seg>, message: String| {
            out.push(problem(style, &segs, provider.clone(), message, None));
        };
        match error.kind() {
            ValidationErrorKind::Required { property } => {
                let property = property.as_str().unwrap_or("").to_string();
                let why = match property.as_str() {
                    "meta" => format!(
                        "is missing; a provider config starts with meta: {{{}: '1.0'}}",
                        style.field("schema_version")
                    ),
                    "schema_version" => {
                        "is missing; set it to '1.0' (quoted: it is a string)".to_string()
                    }
                    "identification" => {
                        "is missing; each provider entry names its provider by uuid or name"
                            .to_string()
                    }
                    "total" => "is missing; every inventory needs a total".to_string(),
                    _ => "is missing".to_string(),
                };
                push([segs, vec![Seg::Key(property)]].concat(), why);
            }
            ValidationErrorKind::Type { kind } => {
                let message = if field == "schema_version" && instance.is_number() {
                    format!(
                        "must be a string such as '1.0'; found {}: quote it, as YAML reads an unquoted 1.0 as a number",
                        describe(instance)
                    )
                } else if segs.is_empty() {
                    format!(
                        "the file must be a mapping with meta and providers; found {}",
                        describe(instance)
                    )
                } else {
                    format!("must be {}; found {}", expected(kind), describe(instance))
                };
                push(segs, message);
            }
            ValidationErrorKind::Pattern { .. } => {
                let s = instance.as_str().unwrap_or("");
                let message = if field == "schema_version" {
                    format!(
                        "{s:?} is not a schema version: write \"1.N\", with N a whole number without leading zeros (\"1.0\")"
                    )
                } else {
                    name_rule("trait", s)
                };
                push(segs, message);
            }
            ValidationErrorKind::AdditionalProperties { unexpected } => {
                for k in unexpected {
                    let at = [segs.clone(), vec![Seg::Key(k.clone())]].concat();
                    let message = if field == "identification" {
                        format!(
                            "{k} is not a way to identify a provider; use exactly one of uuid or name"
                        )
                    } else if is_class_level(&segs) {
                        name_rule("resource class", k)
                    } else {
                        format!(
                            "{} is not an inventory field; an inventory has {}",
                            style.field(k),
                            [
                                "total",
                                "reserved",
                                "min_unit",
                                "max_unit",
                                "step_size",
                                "allocation_ratio"
                            ]
                            .map(|f| style.field(f))
                            .join(", ")
                        )
                    };
                    push(at, message);
                }
            }
            ValidationErrorKind::MinProperties { .. } => push(
                segs,
                "is empty; set exactly one of uuid or name".to_string(),
            ),
            ValidationErrorKind::MaxProperties { .. } => {
                let keys: Vec<&str> = instance
                    .as_object()
                    .map(|m| m.keys().map(String::as_str).collect())
                    .unwrap_or_default();
                push(
                    segs,
                    format!(
                        "has {}; set exactly one of uuid or name",
                        keys.join(" and ")
                    ),
                )
            }
            ValidationErrorKind::OneOfNotValid { .. }
            | ValidationErrorKind::OneOfMultipleValid { .. } => {
                let message = match instance.as_str() {
                    Some(s) => format!(
                        "{s:?} is neither a uuid (8-4-4-4-12 hex digits) nor {COMPUTE_NODE_ID}"
                    ),
                    None => format!(
                        "must be a string, a uuid or {COMPUTE_NODE_ID}; found {}",
                        describe(instance)
                    ),
                };
                push(segs, message);
            }
            ValidationErrorKind::MinLength { .. } => push(
                segs,
                "is empty; a provider name has 1 to 200 characters".into(),
            ),
            ValidationErrorKind::MaxLength { limit } => push(
                segs,
                format!(
                    "is {} characters long; at most {limit} are allowed",
                    instance.as_str().map_or(0, |s| s.chars().count())
                ),
            ),
            ValidationErrorKind::Minimum { .. }
            | ValidationErrorKind::Maximum { .. }
            | ValidationErrorKind::ExclusiveMinimum { .. } => {
                let message = if field == "allocation_ratio" {
                    format!(
                        "{} is {instance}; it must be greater than 0 and at most 3.40282e38",
                        style.field(field)
                    )
                } else {
                    let min = if field == "reserved" { 0 } else { 1 };
                    format!(
                        "{} is {instance}; it must be between {min} and 2147483647 (Placement's bounds)",
                        style.field(field)
                    )
                };
                push(segs, message);
            }
            ValidationErrorKind::Not { .. } | ValidationErrorKind::FalseSchema => push(
                segs,
                "is reserved for the consumer's own bookkeeping; a file may not set it".into(),
            ),
            other => push(
                segs,
                format!(
                    "breaks the schema rule at {} ({other:?})",
                    error.schema_path().as_str()
                ),
            ),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_schema_compiles_and_accepts_a_full_file() {
        let file = json!({"meta": {"schema_version": "1.0"}, "providers": [
            {"identification": {"uuid": "$COMPUTE_NODE"},
             "inventories": {"additional": [{"CUSTOM_LLC": {"total": 22, "reserved": 2, "min_unit": 1,
                "max_unit": 11, "step_size": 1, "allocation_ratio": 1.0}}]},
             "traits": {"additional": ["CUSTOM_P_STATE_ENABLED"]}}]});
        assert!(validator().is_valid(&file));
        assert!(problems(&file, Style::File).is_empty());
    }

    #[test]
    fn versions() {
        assert_eq!(parse_version("1.0"), Some(Version { major: 1, minor: 0 }));
        assert_eq!(
            parse_version("2.13"),
            Some(Version {
                major: 2,
                minor: 13
            })
        );
        assert_eq!(parse_version("1"), None);
        assert_eq!(parse_version(" 1.0"), None);
        assert_eq!(parse_version("1.x"), None);
    }

    #[test]
    fn unquoted_version_is_a_number() {
        let p = problems(&json!({"meta": {"schema_version": 1.0}}), Style::File);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].path, "meta.schema_version");
        assert!(p[0].message.contains("quote it"), "{}", p[0].message);
    }
}
