//! Value types of extra specs and how a value is judged against one.
//!
//! The rules follow Nova's validators for ordinary inputs: integers are parsed after
//! trimming surrounding whitespace, booleans take oslo's spellings in any case, enums are
//! exact, patterns must match the whole value. Where Nova's behaviour comes from Python
//! rather than from intent (Unicode digits, `1_000`), kubeplace is stricter; see
//! docs/extra-specs.md, "Differences from Nova".

use std::fmt;

use regex::Regex;

use crate::placement::closest;
pub(crate) use crate::text::{
    FALSE_SPELLINGS, TRUE_SPELLINGS, is_py_space, parse_bool, parse_int, py_trim,
};

/// What values an extra spec takes.
#[derive(Debug, Clone)]
pub enum ValueType {
    /// Any string (possibly empty).
    String,
    /// A string the whole of which matches a regular expression.
    Pattern(Pattern),
    /// One of a fixed set of strings, exactly (case and spaces count).
    Enum(Vec<String>),
    /// A base-10 integer, optionally bounded (both bounds inclusive).
    Int { min: Option<i64>, max: Option<i64> },
    /// A boolean in one of Nova's spellings.
    Bool,
}

/// A compiled value pattern with the text it was written as.
#[derive(Debug, Clone)]
pub struct Pattern {
    source: String,
    regex: Regex,
}

impl Pattern {
    /// Compiles `source` so that it must match a whole value.
    pub fn new(source: &str) -> Result<Pattern, regex::Error> {
        Ok(Pattern {
            source: source.to_string(),
            regex: Regex::new(&format!("^(?:{source})$"))?,
        })
    }

    /// The pattern as written.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether the whole of `value` matches.
    pub(crate) fn is_match(&self, value: &str) -> bool {
        self.regex.is_match(value)
    }
}

/// Why a value is not accepted: what is wrong, what would be accepted, and the closest
/// accepted value when there is an obvious one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueProblem {
    pub why: String,
    pub accepted: String,
    pub suggestion: Option<String>,
}

impl fmt::Display for ValueProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}; {}", self.why, self.accepted)?;
        if let Some(s) = &self.suggestion {
            write!(f, " (did you mean {s:?}?)")?;
        }
        Ok(())
    }
}

/// The nearest enum member to a rejected value: a case or whitespace slip first, then a
/// small edit distance.
pub(crate) fn nearest_member<'a>(
    value: &str,
    members: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    let members: Vec<&str> = members.into_iter().collect();
    let trimmed = py_trim(value);
    if let Some(m) = members.iter().find(|m| m.eq_ignore_ascii_case(trimmed)) {
        return Some(m.to_string());
    }
    closest(&trimmed.to_lowercase(), members.iter())
}

impl ValueType {
    /// Checks one value.
    pub fn check(&self, value: &str) -> Result<(), ValueProblem> {
        match self {
            ValueType::String => Ok(()),
            ValueType::Pattern(p) => {
                if p.is_match(value) {
                    Ok(())
                } else {
                    Err(ValueProblem {
                        why: format!("{value:?} does not have the expected form"),
                        accepted: format!("the whole value must match the pattern {}", p.source()),
                        suggestion: None,
                    })
                }
            }
            ValueType::Enum(members) => {
                if members.iter().any(|m| m == value) {
                    Ok(())
                } else {
                    Err(ValueProblem {
                        why: format!("{value:?} is not an accepted value"),
                        accepted: format!(
                            "accepted values (exact, case-sensitive): {}",
                            members.join(", ")
                        ),
                        suggestion: nearest_member(value, members.iter().map(String::as_str)),
                    })
                }
            }
            ValueType::Int { min, max } => {
                let accepted = format!("expected {}", describe_int(*min, *max));
                let Some(n) = parse_int(value) else {
                    return Err(ValueProblem {
                        why: format!("{value:?} is not a whole number"),
                        accepted,
                        suggestion: None,
                    });
                };
                if let Some(min) = min
                    && n.0 < i128::from(*min)
                {
                    return Err(ValueProblem {
                        why: format!("{n} is below the minimum of {min}"),
                        accepted,
                        suggestion: None,
                    });
                }
                if let Some(max) = max
                    && n.0 > i128::from(*max)
                {
                    return Err(ValueProblem {
                        why: format!("{n} is above the maximum of {max}"),
                        accepted,
                        suggestion: None,
                    });
                }
                Ok(())
            }
            ValueType::Bool => {
                if parse_bool(value).is_some() {
                    Ok(())
                } else {
                    Err(ValueProblem {
                        why: format!("{value:?} is not a boolean"),
                        accepted: format!(
                            "true is written {} and false {} (any case, surrounding spaces ignored)",
                            TRUE_SPELLINGS.join("/"),
                            FALSE_SPELLINGS.join("/")
                        ),
                        suggestion: None,
                    })
                }
            }
        }
    }

    /// A short name of the type for documentation: `string`, `integer`, `boolean`.
    pub fn type_name(&self) -> &'static str {
        match self {
            ValueType::String | ValueType::Pattern(_) | ValueType::Enum(_) => "string",
            ValueType::Int { .. } => "integer",
            ValueType::Bool => "boolean",
        }
    }

    /// One line on what is accepted, for documentation.
    pub(crate) fn describe(&self) -> String {
        match self {
            ValueType::String => "any string".to_string(),
            ValueType::Pattern(p) => format!("a string matching `{}`", p.source()),
            ValueType::Enum(m) => format!(
                "one of {}",
                m.iter()
                    .map(|v| format!("`{v}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            ValueType::Int { min, max } => describe_int(*min, *max),
            ValueType::Bool => {
                "a boolean (`true`/`false`, `yes`/`no`, `1`/`0`, `on`/`off`, `t`/`f`, `y`/`n`)"
                    .to_string()
            }
        }
    }
}

fn describe_int(min: Option<i64>, max: Option<i64>) -> String {
    match (min, max) {
        (None, None) => "a whole number".to_string(),
        (Some(a), None) => format!("a whole number of at least {a}"),
        (None, Some(b)) => format!("a whole number of at most {b}"),
        (Some(a), Some(b)) => format!("a whole number from {a} to {b}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enums_are_exact_and_suggest() {
        let e = ValueType::Enum(vec!["dedicated".into(), "shared".into(), "mixed".into()]);
        assert!(e.check("dedicated").is_ok());
        for (bad, hint) in [
            ("Dedicated", "dedicated"),
            ("dedicated ", "dedicated"),
            ("deddddicated", "dedicated"),
            ("shred", "shared"),
        ] {
            let p = e.check(bad).unwrap_err();
            assert_eq!(p.suggestion.as_deref(), Some(hint), "{bad}");
            assert!(p.to_string().contains("dedicated, shared, mixed"), "{p}");
        }
        assert_eq!(e.check("banana").unwrap_err().suggestion, None);
    }

    #[test]
    fn integer_bounds_show_the_parsed_number() {
        let v = ValueType::Int {
            min: Some(0),
            max: Some(15),
        };
        assert!(v.check("15").is_ok());
        assert!(v.check(" 0 ").is_ok());
        let p = v.check("016").unwrap_err();
        assert_eq!(p.why, "16 is above the maximum of 15");
        assert_eq!(p.accepted, "expected a whole number from 0 to 15");
        assert_eq!(
            v.check("-1").unwrap_err().why,
            "-1 is below the minimum of 0"
        );
        assert!(v.check("x").unwrap_err().why.contains("not a whole number"));
        let unbounded = ValueType::Int {
            min: None,
            max: None,
        };
        assert!(unbounded.check(&"9".repeat(50)).is_ok());
    }

    #[test]
    fn patterns_match_whole_values() {
        let p = ValueType::Pattern(Pattern::new("[0-9]+(,[0-9]+)*").unwrap());
        assert!(p.check("1,2").is_ok());
        assert!(p.check("1,2,").is_err());
        assert!(p.check("x1").is_err());
    }
}
