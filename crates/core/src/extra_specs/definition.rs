//! An extra spec definition: the key (a template with `{parameters}`), its documentation,
//! its support status and the values it takes. In-tree definitions and operators'
//! ExtraSpecDefinitions both compile to this.

use regex::Regex;

use super::value::{Pattern, ValueType};

/// Support status of an extra spec.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Support {
    #[default]
    Supported,
    /// Works but may change.
    Experimental,
    /// Still accepted, with a warning; `replacement` is the key to use instead, if any.
    Deprecated { replacement: Option<String> },
}

/// Where a definition comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// kubeplace's registry of Nova's own extra specs.
    InTree,
    /// An ExtraSpecDefinition object, by name.
    Custom(String),
}

/// A `{name}` placeholder in a key template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Param {
    pub name: String,
    /// A regular expression the placeholder's text must match as a whole.
    pub pattern: String,
    pub description: String,
}

/// Everything a definition says before it is compiled.
#[derive(Debug, Clone, Default)]
pub struct DefinitionSpec {
    /// `hw:numa_cpus.{num}`; literal text outside braces is matched literally.
    pub key: String,
    pub description: String,
    pub support: Support,
    pub value: ValueSpec,
    pub value_description: Option<String>,
    pub params: Vec<Param>,
    pub virt_drivers: Vec<String>,
    pub depends_on: Vec<String>,
}

/// The value half of a [`DefinitionSpec`], before patterns are compiled.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ValueSpec {
    #[default]
    String,
    Pattern(String),
    Enum(Vec<String>),
    Int {
        min: Option<i64>,
        max: Option<i64>,
    },
    Bool,
}

/// A compiled definition.
#[derive(Debug, Clone)]
pub struct Definition {
    pub key: String,
    pub namespace: String,
    pub description: String,
    pub support: Support,
    pub value: ValueType,
    pub value_description: Option<String>,
    pub params: Vec<Param>,
    pub virt_drivers: Vec<String>,
    pub depends_on: Vec<String>,
    pub origin: Origin,
    /// Literal text before the first placeholder: a cheap test before the regex.
    literal_prefix: String,
    /// `None` for a key without placeholders.
    regex: Option<Regex>,
}

/// The namespace of a key or template: the text before the first `:`, or empty.
pub(crate) fn namespace_of(key: &str) -> &str {
    key.split_once(':').map_or("", |(ns, _)| ns)
}

/// The pieces of a key template: literal text and placeholder names, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Piece<'a> {
    Literal(&'a str),
    Param(&'a str),
}

/// Splits a template into pieces, or says why its braces do not pair up.
pub(crate) fn template_pieces(template: &str) -> Result<Vec<Piece<'_>>, String> {
    let mut pieces = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find(['{', '}']) {
        if rest.as_bytes()[open] == b'}' {
            return Err("has a '}' with no '{' before it".into());
        }
        if open > 0 {
            pieces.push(Piece::Literal(&rest[..open]));
        }
        let after = &rest[open + 1..];
        let close = after.find('}').ok_or("has a '{' that is never closed")?;
        let name = &after[..close];
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(format!(
                "has a placeholder {{{name}}}; placeholder names use a-z, A-Z, 0-9 and _"
            ));
        }
        pieces.push(Piece::Param(name));
        rest = &after[close + 1..];
    }
    if !rest.is_empty() {
        pieces.push(Piece::Literal(rest));
    }
    Ok(pieces)
}

/// The `{name}` placeholders of a template, in order, or why its braces do not pair up.
pub fn placeholders(template: &str) -> Result<Vec<String>, String> {
    Ok(template_pieces(template)?
        .into_iter()
        .filter_map(|piece| match piece {
            Piece::Param(name) => Some(name.to_string()),
            Piece::Literal(_) => None,
        })
        .collect())
}

impl ValueSpec {
    /// Compiles the value type.
    pub fn compile(&self) -> Result<ValueType, String> {
        Ok(match self {
            ValueSpec::String => ValueType::String,
            ValueSpec::Pattern(p) => ValueType::Pattern(Pattern::new(p).map_err(|e| {
                format!("is not a regular expression: {}", last_line(&e.to_string()))
            })?),
            ValueSpec::Enum(m) => ValueType::Enum(m.clone()),
            ValueSpec::Int { min, max } => {
                if let (Some(a), Some(b)) = (min, max)
                    && a > b
                {
                    return Err(format!("min ({a}) is greater than max ({b})"));
                }
                ValueType::Int {
                    min: *min,
                    max: *max,
                }
            }
            ValueSpec::Bool => ValueType::Bool,
        })
    }
}

impl DefinitionSpec {
    /// A supported definition with a description and a value; add the rest with the
    /// builder methods.
    pub fn new(key: &str, description: &str, value: ValueSpec) -> DefinitionSpec {
        DefinitionSpec {
            key: key.to_string(),
            description: description.to_string(),
            value,
            ..Default::default()
        }
    }

    /// Adds a placeholder.
    pub fn param(mut self, name: &str, pattern: &str, description: &str) -> Self {
        self.params.push(Param {
            name: name.to_string(),
            pattern: pattern.to_string(),
            description: description.to_string(),
        });
        self
    }

    /// Documents the virt drivers that honour the extra spec.
    pub fn drivers(mut self, drivers: &[&str]) -> Self {
        self.virt_drivers = drivers.iter().map(|d| d.to_string()).collect();
        self
    }

    /// Documents other extra specs this one needs.
    pub fn needs(mut self, keys: &[&str]) -> Self {
        self.depends_on = keys.iter().map(|d| d.to_string()).collect();
        self
    }

    /// Describes the value.
    pub(crate) fn value_doc(mut self, text: &str) -> Self {
        self.value_description = Some(text.to_string());
        self
    }

    /// Marks the definition deprecated in favour of `replacement`.
    pub fn deprecated(mut self, replacement: Option<&str>) -> Self {
        self.support = Support::Deprecated {
            replacement: replacement.map(str::to_string),
        };
        self
    }

    /// Compiles the key template and the value; every problem is reported.
    pub fn compile(self, origin: Origin) -> Result<Definition, Vec<String>> {
        let mut problems = Vec::new();
        let pieces = match template_pieces(&self.key) {
            Ok(p) => p,
            Err(e) => {
                problems.push(format!("key {:?} {e}", self.key));
                Vec::new()
            }
        };
        let mut regex_text = String::from("^");
        let mut has_params = false;
        let mut used = Vec::new();
        for piece in &pieces {
            match piece {
                Piece::Literal(text) => regex_text.push_str(&regex::escape(text)),
                Piece::Param(name) => {
                    has_params = true;
                    used.push(*name);
                    match self.params.iter().find(|p| p.name == *name) {
                        Some(p) => {
                            if let Err(e) = Regex::new(&format!("^(?:{})$", p.pattern)) {
                                problems.push(format!(
                                    "parameter {name:?} pattern {:?} is not a regular expression: {}",
                                    p.pattern,
                                    last_line(&e.to_string())
                                ));
                            }
                            regex_text.push_str(&format!("(?:{})", p.pattern));
                        }
                        None => problems.push(format!(
                            "key uses {{{name}}} but no parameter is named {name:?}"
                        )),
                    }
                }
            }
        }
        regex_text.push('$');
        for p in &self.params {
            if !used.contains(&p.name.as_str()) {
                problems.push(format!(
                    "parameter {:?} does not appear as {{{}}} in the key",
                    p.name, p.name
                ));
            }
        }
        let value = self
            .value
            .compile()
            .map_err(|e| problems.push(format!("value {e}")))
            .ok();
        let regex = if has_params && problems.is_empty() {
            match Regex::new(&regex_text) {
                Ok(r) => Some(r),
                Err(e) => {
                    problems.push(format!(
                        "key {:?} does not compile: {}",
                        self.key,
                        last_line(&e.to_string())
                    ));
                    None
                }
            }
        } else {
            None
        };
        if !problems.is_empty() {
            return Err(problems);
        }
        let literal_prefix = self.key[..self.key.find('{').unwrap_or(self.key.len())].to_string();
        Ok(Definition {
            namespace: namespace_of(&literal_prefix_or_key(&self.key)).to_string(),
            key: self.key,
            description: self.description,
            support: self.support,
            value: value.expect("no problems means a value"),
            value_description: self.value_description,
            params: self.params,
            virt_drivers: self.virt_drivers,
            depends_on: self.depends_on,
            origin,
            literal_prefix,
            regex,
        })
    }
}

/// The template's namespace is read from its text before the first `:`; a placeholder
/// there (as in `trait{group}:…`) is dropped so the namespace reads `trait`.
fn literal_prefix_or_key(key: &str) -> String {
    let ns = namespace_of(key);
    match ns.find('{') {
        Some(i) => format!("{}:", &ns[..i]),
        None => key.to_string(),
    }
}

fn last_line(s: &str) -> String {
    s.lines()
        .rfind(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .to_string()
}

impl Definition {
    /// Whether the key has no placeholders.
    pub(crate) fn is_literal(&self) -> bool {
        self.regex.is_none()
    }

    /// Literal text before the first placeholder (the whole key when literal).
    #[cfg(test)]
    fn literal_prefix(&self) -> &str {
        &self.literal_prefix
    }

    /// Whether `key` is one this definition covers.
    pub fn matches(&self, key: &str) -> bool {
        match &self.regex {
            None => key == self.key,
            Some(r) => key.starts_with(&self.literal_prefix) && r.is_match(key),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compiles_templates_with_literal_dots() {
        let d = DefinitionSpec::new("hw:numa_cpus.{num}", "x", ValueSpec::String)
            .param("num", "[0-9]+", "node")
            .compile(Origin::InTree)
            .unwrap();
        assert_eq!(d.namespace, "hw");
        assert!(d.matches("hw:numa_cpus.0"));
        assert!(d.matches("hw:numa_cpus.12"));
        assert!(!d.matches("hw:numa_cpusX0"), "the '.' is literal");
        assert!(!d.matches("hw:numa_cpus."));
        assert!(!d.is_literal());
        assert_eq!(d.literal_prefix(), "hw:numa_cpus.");
    }

    #[test]
    fn namespace_of_a_grouped_template() {
        let d = DefinitionSpec::new("trait{group}:CUSTOM_{trait}", "x", ValueSpec::String)
            .param("group", "([a-zA-Z0-9_-]{1,64})?", "")
            .param("trait", "[A-Z0-9_]+", "")
            .compile(Origin::InTree)
            .unwrap();
        assert_eq!(d.namespace, "trait");
        assert!(d.matches("trait:CUSTOM_X"));
        assert!(d.matches("trait_1:CUSTOM_X"));
        assert!(!d.matches("trait.1:CUSTOM_X"));
    }

    #[test]
    fn reports_every_problem() {
        let errs = DefinitionSpec::new(
            "acme:{a}.{b}",
            "x",
            ValueSpec::Int {
                min: Some(3),
                max: Some(1),
            },
        )
        .param("a", "(", "")
        .param("c", "x", "")
        .compile(Origin::Custom("t".into()))
        .unwrap_err();
        assert_eq!(errs.len(), 4, "{errs:?}");
        assert!(
            errs.iter()
                .any(|e| e.contains("min (3) is greater than max (1)"))
        );
        assert!(
            errs.iter()
                .any(|e| e.contains("no parameter is named \"b\""))
        );
        assert!(errs.iter().any(|e| e.contains("\"c\" does not appear")));
        assert!(errs.iter().any(|e| e.contains("not a regular expression")));
    }

    #[test]
    fn pieces() {
        assert_eq!(
            template_pieces("a{b}c").unwrap(),
            vec![Piece::Literal("a"), Piece::Param("b"), Piece::Literal("c")]
        );
        assert!(template_pieces("a{b").is_err());
        assert!(template_pieces("a}b").is_err());
        assert!(template_pieces("a{}").is_err());
    }

    #[test]
    fn finds_placeholders() {
        assert_eq!(
            placeholders("acme:numa_cache.{node}"),
            Ok(vec!["node".to_string()])
        );
        assert_eq!(placeholders("acme:x"), Ok(vec![]));
        assert!(placeholders("acme:{node").is_err());
        assert!(placeholders("acme:node}").is_err());
        assert!(placeholders("acme:{}").is_err());
    }
}
