//! A YAML document as a tree that remembers where each value was written, so that an
//! error found later (a wrong field type, a bad value) can name its line.

use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use serde_saphyr::Spanned;

/// The YAML parser's complaint about a text, on one line and in a user's terms: its first
/// line, without the parser's advice on its own options.
pub fn syntax_message(e: &serde_saphyr::Error) -> String {
    let text = e.to_string();
    let first = text
        .lines()
        .next()
        .unwrap_or("")
        .trim_start_matches("error: ");
    match first.split_once("duplicate mapping key") {
        Some((place, rest)) => {
            let key = rest
                .trim_start_matches(": ")
                .split(", set DuplicateKeyPolicy")
                .next()
                .unwrap_or("");
            if key.is_empty() || key.starts_with(',') {
                format!("{place}a key is written twice in one mapping")
            } else {
                format!("{place}the key `{key}` is written twice in one mapping")
            }
        }
        None => first.to_string(),
    }
}

/// A value and the line and column it starts at.
#[derive(Debug, Clone)]
pub struct Located {
    pub node: Node,
    pub line: u64,
    pub column: u64,
    /// Byte offset and length of the value's text in the source, when known (for a scalar:
    /// its text as written, quotes included).
    pub bytes: Option<(u64, u64)>,
}

/// A YAML value whose children carry their locations.
#[derive(Debug, Clone)]
pub enum Node {
    Null,
    Bool(bool),
    Number(Number),
    String(String),
    Seq(Vec<Located>),
    Map(Vec<(String, Located)>),
}

impl From<Spanned<Node>> for Located {
    fn from(s: Spanned<Node>) -> Self {
        let span = s.referenced.span();
        Located {
            node: s.value,
            line: s.referenced.line(),
            column: s.referenced.column(),
            bytes: span.byte_offset().zip(span.byte_len()),
        }
    }
}

impl Located {
    /// The value without locations.
    pub fn to_json(&self) -> Value {
        match &self.node {
            Node::Null => Value::Null,
            Node::Bool(b) => Value::Bool(*b),
            Node::Number(n) => Value::Number(n.clone()),
            Node::String(s) => Value::String(s.clone()),
            Node::Seq(items) => Value::Array(items.iter().map(Located::to_json).collect()),
            Node::Map(entries) => Value::Object(
                entries
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_json()))
                    .collect::<Map<_, _>>(),
            ),
        }
    }

    /// A tree read without locations (JSON, read fast), every node placed at `line`.
    pub fn from_json(value: Value, line: u64) -> Located {
        let node = match value {
            Value::Null => Node::Null,
            Value::Bool(b) => Node::Bool(b),
            Value::Number(n) => Node::Number(n),
            Value::String(s) => Node::String(s),
            Value::Array(items) => Node::Seq(
                items
                    .into_iter()
                    .map(|v| Located::from_json(v, line))
                    .collect(),
            ),
            Value::Object(entries) => Node::Map(
                entries
                    .into_iter()
                    .map(|(k, v)| (k, Located::from_json(v, line)))
                    .collect(),
            ),
        };
        Located {
            node,
            line,
            column: 1,
            bytes: None,
        }
    }

    /// The child at a map key.
    pub fn get(&self, key: &str) -> Option<&Located> {
        match &self.node {
            Node::Map(entries) => entries.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The deepest node along a path of keys and indexes; stops where the path leaves the tree.
    pub fn locate<'a>(&self, path: impl IntoIterator<Item = &'a str>) -> &Located {
        let mut here = self;
        for segment in path {
            let next = match &here.node {
                Node::Map(_) => here.get(segment),
                Node::Seq(items) => segment.parse::<usize>().ok().and_then(|i| items.get(i)),
                _ => None,
            };
            match next {
                Some(n) => here = n,
                None => break,
            }
        }
        here
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_unit<E>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }
    fn visit_none<E>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Node, D::Error> {
        Node::deserialize(d)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Node, E> {
        Ok(Node::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Node, E> {
        Ok(Node::Number(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Node, E> {
        Ok(Node::Number(v.into()))
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Node, E> {
        Number::from_f64(v)
            .map(Node::Number)
            .ok_or_else(|| E::custom(format!("{v} is not a finite number")))
    }
    fn visit_str<E>(self, v: &str) -> Result<Node, E> {
        Ok(Node::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Node, E> {
        Ok(Node::String(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Spanned<Node>>()? {
            items.push(item.into());
        }
        Ok(Node::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<Spanned<Node>>()? {
            let key = match key.value {
                Node::String(s) => s,
                Node::Number(n) => n.to_string(),
                Node::Bool(b) => b.to_string(),
                Node::Null => "null".to_string(),
                _ => {
                    return Err(serde::de::Error::custom(format!(
                        "line {}: a mapping key must be a scalar",
                        key.referenced.line()
                    )));
                }
            };
            let value: Spanned<Node> = map.next_value()?;
            entries.push((key, value.into()));
        }
        Ok(Node::Map(entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_written_twice_is_named_with_its_line() {
        let e =
            serde_saphyr::from_str::<serde_json::Value>("a: 1\nb:\n  c: 2\n  c: 3\n").unwrap_err();
        assert_eq!(
            syntax_message(&e),
            "line 4 column 3: the key `c` is written twice in one mapping"
        );
        let e = serde_saphyr::from_str::<serde_json::Value>("a: [1\n").unwrap_err();
        assert!(!syntax_message(&e).contains('\n'), "{}", syntax_message(&e));
    }
}
