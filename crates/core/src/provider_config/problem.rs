//! What a message about a provider config says and where: the names each style uses,
//! paths into the file, and the provider entry a path leads into.
//!
//! Both the file's rules and the schema's verdicts speak through these, so they live apart
//! from either.

use std::fmt;

use serde_json::Value;

use super::merge::Identification;

/// The uuid value that targets every compute node root not otherwise identified.
pub const COMPUTE_NODE_ID: &str = "$COMPUTE_NODE";

/// Whose names a message uses: the file's snake_case or the resource's camelCase under `spec`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    File,
    Resource,
}

impl Style {
    /// A field's name as this style writes it.
    pub fn field(self, name: &str) -> String {
        match self {
            Style::File => name.to_string(),
            Style::Resource => camel(name),
        }
    }

    /// A path as this style writes it.
    pub fn path(self, path: &[Seg]) -> String {
        let mut out = match self {
            Style::File => String::new(),
            Style::Resource => "spec".to_string(),
        };
        for seg in path {
            match seg {
                Seg::Index(i) => out.push_str(&format!("[{i}]")),
                Seg::Key(k) => {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(&self.field(k));
                }
            }
        }
        if out.is_empty() {
            out.push_str("(the whole file)");
        }
        out
    }
}

/// Field names the file writes in snake_case and the resource in camelCase.
const RENAMED: &[(&str, &str)] = &[
    ("schema_version", "schemaVersion"),
    ("min_unit", "minUnit"),
    ("max_unit", "maxUnit"),
    ("step_size", "stepSize"),
    ("allocation_ratio", "allocationRatio"),
];

/// A file field name as the resource spells it (`min_unit` → `minUnit`).
pub fn camel(name: &str) -> String {
    RENAMED
        .iter()
        .find(|(s, _)| *s == name)
        .map_or(name, |(_, c)| c)
        .to_string()
}

/// A resource field name as the file spells it (`minUnit` → `min_unit`).
pub fn snake(name: &str) -> String {
    RENAMED
        .iter()
        .find(|(_, c)| *c == name)
        .map_or(name, |(s, _)| s)
        .to_string()
}

/// One step of a path into the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seg {
    Key(String),
    Index(usize),
}

impl Seg {
    pub(crate) fn as_str(&self) -> String {
        match self {
            Seg::Key(k) => k.clone(),
            Seg::Index(i) => i.to_string(),
        }
    }
}

/// Which provider entry a message is about.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ProviderRef {
    /// Position in `providers`.
    pub index: usize,
    /// The identification as written (`name cn1`, `uuid $COMPUTE_NODE`), when readable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identification: Option<String>,
}

impl fmt::Display for ProviderRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.identification {
            Some(id) => write!(f, "provider {} ({id})", self.index),
            None => write!(f, "provider {} (no valid identification)", self.index),
        }
    }
}

/// An error or a warning about one field.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Problem {
    /// Where, as the style writes paths (`providers[0].traits.additional[1]`).
    pub path: String,
    /// The provider entry the field belongs to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<ProviderRef>,
    /// The rule, in a sentence.
    pub message: String,
    /// 1-based line in the file, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    #[serde(skip)]
    pub(crate) segs: Vec<Seg>,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(p) = &self.provider {
            write!(f, "{p}: ")?;
        }
        write!(f, "{}: {}", self.path, self.message)
    }
}

impl Problem {
    /// The problem with its file and line: `FILE:LINE: provider 0 (name cn1): PATH: RULE`.
    pub fn located(&self, file: &str) -> String {
        match self.line {
            Some(line) => format!("{file}:{line}: {self}"),
            None => format!("{file}: {self}"),
        }
    }
}

/// A problem at a path, named as the style writes it.
pub(crate) fn problem(
    style: Style,
    segs: &[Seg],
    provider: Option<ProviderRef>,
    message: String,
    line: Option<u64>,
) -> Problem {
    Problem {
        path: style.path(segs),
        provider,
        message,
        line,
        segs: segs.to_vec(),
    }
}

/// A key step of a path.
pub(crate) fn key(k: &str) -> Seg {
    Seg::Key(k.to_string())
}

/// How a provider entry's identification reads, when it is exactly one string uuid or name.
pub(crate) fn read_identification(provider: &Value) -> Option<(String, String, Identification)> {
    let id = provider.get("identification")?.as_object()?;
    if id.len() != 1 {
        return None;
    }
    let (k, v) = id.iter().next()?;
    let s = v.as_str()?;
    let identification = match k.as_str() {
        _ if s == COMPUTE_NODE_ID => Identification::ComputeNode,
        "uuid" => Identification::Uuid(s.to_string()),
        "name" => Identification::Name(s.to_string()),
        _ => return None,
    };
    Some((s.to_string(), format!("{k} {s}"), identification))
}

/// The provider a path leads into, with its identification when readable.
pub(crate) fn provider_of(value: &Value, segs: &[Seg]) -> Option<ProviderRef> {
    match segs {
        [Seg::Key(p), Seg::Index(i), ..] if p == "providers" => Some(ProviderRef {
            index: *i,
            identification: value
                .get("providers")
                .and_then(|ps| ps.get(*i))
                .and_then(read_identification)
                .map(|(_, written, _)| written),
        }),
        _ => None,
    }
}
