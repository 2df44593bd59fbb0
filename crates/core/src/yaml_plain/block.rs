//! The line reader of the plain subset: what most manifests are, block mappings and block
//! sequences with one scalar a line, read a line at a time without a YAML scanner.
//!
//! It reads less than the event reader of [`super`]: no flow collections other than `{}` and
//! `[]`, no `#` or flow indicator inside a plain scalar, no tab, no line break other than
//! `\n`, and only the escapes JSON has in double-quoted scalars. Whatever it does not read is
//! [`PlainError::Unsupported`] and goes to the event reader, so it never has to decide a
//! question YAML parsers answer two ways: it only reads what has one reading.

use std::borrow::Cow;
use std::ops::ControlFlow;

use super::{Allowed, MAX_DEPTH, PlainDocument, PlainError, PlainNode, plain_node};

type Read<T> = Result<T, PlainError>;

/// A line with something on it, neither blank nor a comment.
#[derive(Clone, Copy)]
struct Line<'a> {
    /// 1-based.
    number: u64,
    /// Spaces before the text.
    indent: usize,
    /// The text after the indentation, comments included.
    text: &'a str,
}

/// What comes next in the stream.
#[derive(Clone, Copy)]
enum Next<'a> {
    End,
    /// A line `---`.
    DocumentStart,
    Content(Line<'a>),
}

/// The stream's lines, skipping blank lines and comment lines.
struct Lines<'a> {
    rest: &'a str,
    /// Number of the next line to read, 1-based.
    number: u64,
    peeked: Option<Next<'a>>,
}

impl<'a> Lines<'a> {
    fn new(text: &'a str) -> Self {
        Lines {
            rest: text,
            number: 1,
            peeked: None,
        }
    }

    fn peek(&mut self) -> Read<Next<'a>> {
        if let Some(next) = self.peeked {
            return Ok(next);
        }
        let next = self.read()?;
        self.peeked = Some(next);
        Ok(next)
    }

    /// Steps past what [`Lines::peek`] gave.
    fn advance(&mut self) {
        self.peeked = None;
    }

    fn read(&mut self) -> Read<Next<'a>> {
        loop {
            if self.rest.is_empty() {
                return Ok(Next::End);
            }
            let (line, rest) = match self.rest.find('\n') {
                Some(i) => (&self.rest[..i], &self.rest[i + 1..]),
                None => (self.rest, ""),
            };
            self.rest = rest;
            let number = self.number;
            self.number += 1;
            if line == "---" {
                return Ok(Next::DocumentStart);
            }
            if line.starts_with("---") || line.starts_with("...") || line.starts_with('%') {
                return Err(PlainError::Unsupported(
                    "a directive or a document marker with more on its line",
                ));
            }
            let text = line.trim_start_matches(' ');
            if text.is_empty() || text.starts_with('#') {
                continue;
            }
            return Ok(Next::Content(Line {
                number,
                indent: line.len() - text.len(),
                text,
            }));
        }
    }

    /// The next line when it has something on it and this indentation.
    fn at(&mut self, indent: usize) -> Read<Option<Line<'a>>> {
        Ok(match self.peek()? {
            Next::Content(line) if line.indent == indent => Some(line),
            _ => None,
        })
    }
}

/// Reads every document of a stream in the line reader's subset.
#[cfg(test)]
pub(super) fn read_block(text: &str) -> Read<Vec<PlainDocument<'_>>> {
    let mut documents = Vec::new();
    let ControlFlow::Continue(()) = read_block_each(text, &mut |_, doc| {
        documents.push(doc);
        ControlFlow::<std::convert::Infallible>::Continue(())
    })?;
    Ok(documents)
}

/// Reads a stream in the line reader's subset, handing each document to `each` with its
/// number (0-based) as soon as it is read; `each` may stop the reading.
pub(super) fn read_block_each<'a, B>(
    text: &'a str,
    each: &mut impl FnMut(usize, PlainDocument<'a>) -> ControlFlow<B>,
) -> Read<ControlFlow<B>> {
    if super::holds_a_character_outside(text, Allowed::default()) {
        return Err(PlainError::Unsupported(
            "a tab, a control character or a line break other than \\n",
        ));
    }
    let mut lines = Lines::new(text);
    let mut number = 0;
    // A `---` was read and its document has no content yet.
    let mut opened = false;
    loop {
        match lines.peek()? {
            Next::End if opened => return Err(PlainError::Unsupported("an empty document")),
            Next::End => return Ok(ControlFlow::Continue(())),
            Next::DocumentStart if opened => {
                return Err(PlainError::Unsupported("an empty document"));
            }
            Next::DocumentStart => {
                lines.advance();
                opened = true;
            }
            Next::Content(first) => {
                let value = block_node(&mut lines, first, 0)?;
                if let Next::Content(_) = lines.peek()? {
                    return Err(PlainError::Unsupported(
                        "a line less indented than its document",
                    ));
                }
                let document = PlainDocument {
                    line: first.number,
                    value,
                };
                if let ControlFlow::Break(b) = each(number, document) {
                    return Ok(ControlFlow::Break(b));
                }
                number += 1;
                opened = false;
            }
        }
    }
}

/// `- ` (or a lone `-`) opens a block sequence entry.
fn is_entry(text: &str) -> bool {
    text == "-" || text.starts_with("- ")
}

/// The block node whose first line is `first`, at that line's indentation.
fn block_node<'a>(lines: &mut Lines<'a>, first: Line<'a>, depth: usize) -> Read<PlainNode<'a>> {
    if depth >= MAX_DEPTH {
        return Err(PlainError::Unsupported("deep nesting"));
    }
    if is_entry(first.text) {
        block_sequence(lines, first.indent, depth)
    } else {
        lines.advance();
        block_mapping(lines, first.indent, first.text, depth)
    }
}

/// A block sequence whose entries are at `indent`.
fn block_sequence<'a>(lines: &mut Lines<'a>, indent: usize, depth: usize) -> Read<PlainNode<'a>> {
    let mut items = Vec::new();
    while let Some(line) = lines.at(indent)?.filter(|l| is_entry(l.text)) {
        lines.advance();
        let after = &line.text[1..];
        let body = after.trim_start_matches(' ');
        let column = indent + 1 + (after.len() - body.len());
        let item = if body.is_empty() || body.starts_with('#') {
            nested_or_null(lines, indent, false, depth)?
        } else if is_entry(body) {
            return Err(PlainError::Unsupported(
                "a sequence entry opened on its parent's line",
            ));
        } else if key_of(body)?.is_some() {
            // `- key: value`: a mapping whose keys line up with this one.
            if depth + 1 >= MAX_DEPTH {
                return Err(PlainError::Unsupported("deep nesting"));
            }
            block_mapping(lines, column, body, depth + 1)?
        } else {
            inline_value(body)?
        };
        items.push(item);
    }
    Ok(PlainNode::Seq(items))
}

/// A block mapping whose keys are at `indent`; the first entry's text has been read.
fn block_mapping<'a>(
    lines: &mut Lines<'a>,
    indent: usize,
    first: &'a str,
    depth: usize,
) -> Read<PlainNode<'a>> {
    let mut entries = Vec::new();
    let mut text = first;
    loop {
        if is_entry(text) {
            return Err(PlainError::Unsupported(
                "a sequence entry among a mapping's keys",
            ));
        }
        let Some((key, after)) = key_of(text)? else {
            return Err(PlainError::Unsupported("a line that is not `key: value`"));
        };
        let value_text = after.trim_start_matches(' ');
        let value = if value_text.is_empty() || value_text.starts_with('#') {
            nested_or_null(lines, indent, true, depth)?
        } else {
            inline_value(value_text)?
        };
        entries.push((key, value));
        match lines.peek()? {
            Next::Content(line) if line.indent == indent => {
                lines.advance();
                text = line.text;
            }
            Next::Content(line) if line.indent > indent => {
                // More indented than the keys, after a value: YAML reads it as the value going
                // on over several lines, or refuses it.
                return Err(PlainError::Unsupported("a value over several lines"));
            }
            _ => {
                return PlainNode::map(entries)
                    .map_err(|_| PlainError::Unsupported("a duplicate key"));
            }
        }
    }
}

/// The value of a key or an entry with nothing after it on its line: the block node on the
/// next lines when they are more indented, or (for a key) a sequence whose `- ` line up
/// with the key, else null.
fn nested_or_null<'a>(
    lines: &mut Lines<'a>,
    indent: usize,
    sequence_at_same_indent: bool,
    depth: usize,
) -> Read<PlainNode<'a>> {
    match lines.peek()? {
        Next::Content(line) if line.indent > indent => block_node(lines, line, depth + 1),
        Next::Content(line)
            if sequence_at_same_indent && line.indent == indent && is_entry(line.text) =>
        {
            if depth + 1 >= MAX_DEPTH {
                return Err(PlainError::Unsupported("deep nesting"));
            }
            block_sequence(lines, indent, depth + 1)
        }
        _ => Ok(PlainNode::Null),
    }
}

/// When `text` is `key: …` or `key:`, the key and what follows the colon. `None` when it is
/// a value with no key.
fn key_of(text: &str) -> Read<Option<(Cow<'_, str>, &str)>> {
    if let Some(quote) = text.chars().next().filter(|c| *c == '"' || *c == '\'') {
        let (key, after) = quoted(text, quote)?;
        return match after.strip_prefix(':') {
            Some(rest) if rest.is_empty() || rest.starts_with(' ') => Ok(Some((key, rest))),
            _ => {
                end_of_value(after)?;
                Ok(None)
            }
        };
    }
    let bytes = text.as_bytes();
    let colon =
        (0..bytes.len()).find(|&i| bytes[i] == b':' && bytes.get(i + 1).is_none_or(|b| *b == b' '));
    let comment = comment_start(text);
    let Some(colon) = colon.filter(|c| comment.is_none_or(|h| h > *c)) else {
        return Ok(None);
    };
    let key = &text[..colon];
    if !plain_text(key) {
        return Err(PlainError::Unsupported("a key of other characters"));
    }
    match plain_node(key)? {
        PlainNode::String(key) => Ok(Some((key, &text[colon + 1..]))),
        _ => Err(PlainError::Unsupported("a key that is not a string")),
    }
}

/// A value written on its key's or entry's line.
fn inline_value(text: &str) -> Read<PlainNode<'_>> {
    match text.as_bytes()[0] {
        quote @ (b'"' | b'\'') => {
            let (value, after) = quoted(text, quote as char)?;
            end_of_value(after)?;
            Ok(PlainNode::String(value))
        }
        b'{' | b'[' => {
            let value = if let Some(after) = text.strip_prefix("{}") {
                end_of_value(after)?;
                PlainNode::Map(Vec::new())
            } else if let Some(after) = text.strip_prefix("[]") {
                end_of_value(after)?;
                PlainNode::Seq(Vec::new())
            } else {
                return Err(PlainError::Unsupported("a flow collection"));
            };
            Ok(value)
        }
        _ => {
            let body = match comment_start(text) {
                Some(i) => &text[..i],
                None => text,
            };
            let body = body.trim_end_matches(' ');
            if !plain_text(body) || body.ends_with(':') || has_colon_space(body) {
                return Err(PlainError::Unsupported(
                    "a plain scalar of other characters",
                ));
            }
            plain_node(body)
        }
    }
}

/// Whether a plain scalar is read the same by every YAML parser wherever it stands: it starts
/// with a letter, a digit, `~` or a `-` before a digit, and holds no `#` and no flow
/// indicator.
fn plain_text(text: &str) -> bool {
    let bytes = text.as_bytes();
    let starts = match bytes {
        [b'-', second, ..] => second.is_ascii_digit(),
        [first, ..] => first.is_ascii_alphanumeric() || *first == b'~',
        [] => false,
    };
    starts
        && !text.ends_with(' ')
        && !bytes
            .iter()
            .any(|b| matches!(b, b'#' | b'[' | b']' | b'{' | b'}' | b','))
}

/// Only spaces, or spaces and a comment, after a value.
fn end_of_value(after: &str) -> Read<()> {
    let rest = after.trim_start_matches(' ');
    if rest.is_empty() || (rest.starts_with('#') && rest.len() < after.len()) {
        Ok(())
    } else {
        Err(PlainError::Unsupported("more after a value on its line"))
    }
}

/// A quoted scalar at the start of `text`, closed on the same line: its value and what
/// follows the closing quote. The value borrows the text when nothing in it is escaped.
fn quoted(text: &str, quote: char) -> Read<(Cow<'_, str>, &str)> {
    let body = &text[1..];
    let bytes = body.as_bytes();
    let stops_at = |b: &u8| *b == quote as u8 || (quote == '"' && *b == b'\\');
    if let Some(stop) = bytes.iter().position(stops_at)
        && bytes[stop] == quote as u8
        && !(quote == '\'' && bytes.get(stop + 1) == Some(&b'\''))
    {
        return Ok((Cow::Borrowed(&body[..stop]), &body[stop + 1..]));
    }
    let mut value = String::new();
    let mut rest = body;
    loop {
        let Some(stop) = rest.as_bytes().iter().position(stops_at) else {
            return Err(PlainError::Unsupported(
                "a quoted scalar over several lines",
            ));
        };
        value.push_str(&rest[..stop]);
        let special = &rest[stop..];
        if quote == '\'' {
            // `''` is a quote inside the scalar.
            match special.strip_prefix("''") {
                Some(after) => {
                    value.push('\'');
                    rest = after;
                }
                None => return Ok((Cow::Owned(value), &special[1..])),
            }
        } else if let Some(after) = special.strip_prefix('"') {
            return Ok((Cow::Owned(value), after));
        } else {
            rest = escape(&special[1..], &mut value)?;
        }
    }
}

/// Where a comment starts in a line's text: the first `#` after a space.
fn comment_start(text: &str) -> Option<usize> {
    text.as_bytes().windows(2).position(|w| w == b" #")
}

/// Whether a colon followed by a space is in the text.
fn has_colon_space(text: &str) -> bool {
    text.as_bytes().windows(2).any(|w| w == b": ")
}

/// Reads one escape of a double-quoted scalar (after its `\`), one JSON has too; what follows.
fn escape<'a>(text: &'a str, value: &mut String) -> Read<&'a str> {
    let unsupported = || PlainError::Unsupported("an escape JSON does not have");
    let mut chars = text.chars();
    let c = match chars.next().ok_or_else(unsupported)? {
        '"' => '"',
        '\\' => '\\',
        '/' => '/',
        'b' => '\u{8}',
        'f' => '\u{c}',
        'n' => '\n',
        'r' => '\r',
        't' => '\t',
        'u' => {
            let hex = text.get(1..5).ok_or_else(unsupported)?;
            if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(unsupported());
            }
            // A surrogate is not a character on its own.
            let c = u32::from_str_radix(hex, 16)
                .ok()
                .and_then(char::from_u32)
                .ok_or_else(unsupported)?;
            value.push(c);
            return Ok(&text[5..]);
        }
        _ => return Err(unsupported()),
    };
    value.push(c);
    Ok(chars.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::Value;
    use serde_json::json;

    /// A tree as written, and what it reads as when every spelling in it has one reading.
    #[derive(Debug, Clone)]
    enum Node {
        Scalar(String, Value),
        /// Entries: the key as written, the key, the value.
        Map(Vec<(String, String, Node)>),
        Seq(Vec<Node>),
    }

    impl Node {
        fn value(&self) -> Value {
            match self {
                Node::Scalar(_, v) => v.clone(),
                Node::Map(entries) => Value::Object(
                    entries
                        .iter()
                        .map(|(_, k, v)| (k.clone(), v.value()))
                        .collect(),
                ),
                Node::Seq(items) => Value::Array(items.iter().map(Node::value).collect()),
            }
        }
    }

    /// Scalars with one reading, as written and as read.
    fn plain_scalars() -> BoxedStrategy<Node> {
        prop::sample::select(vec![
            ("a", json!("a")),
            ("CUSTOM_GOLD", json!("CUSTOM_GOLD")),
            ("hw:cpu_policy", json!("hw:cpu_policy")),
            ("http://x/y", json!("http://x/y")),
            ("a b", json!("a b")),
            ("it's", json!("it's")),
            ("12", json!(12)),
            ("-3", json!(-3)),
            ("1.5", json!(1.5)),
            ("true", json!(true)),
            ("null", json!(null)),
            ("~", json!(null)),
            ("'it''s'", json!("it's")),
            ("'#x'", json!("#x")),
            ("\"q\\\"uote\"", json!("q\"uote")),
            ("\"\\u00e9\\n\"", json!("é\n")),
            ("\"tab\\there\"", json!("tab\there")),
            ("\"\"", json!("")),
            ("''", json!("")),
            ("\"a: b\"", json!("a: b")),
            ("\"yes\"", json!("yes")),
            ("{}", json!({})),
            ("[]", json!([])),
            ("né", json!("né")),
        ])
        .prop_map(|(spelled, value)| Node::Scalar(spelled.to_string(), value))
        .boxed()
    }

    /// Keys with one reading, as written and as read.
    fn plain_keys() -> BoxedStrategy<(String, String)> {
        prop::sample::select(vec![
            ("kind", "kind"),
            ("a", "a"),
            ("hw:numa_nodes", "hw:numa_nodes"),
            ("trait:CUSTOM_X", "trait:CUSTOM_X"),
            ("\"quoted key\"", "quoted key"),
            ("'single'", "single"),
            ("a b", "a b"),
            ("\"a: b\"", "a: b"),
            ("\"1\"", "1"),
        ])
        .prop_map(|(spelled, key)| (spelled.to_string(), key.to_string()))
        .boxed()
    }

    /// Scalars and keys of every kind, including those with two readings, other notations
    /// and YAML's indicators; only their spelling matters.
    fn any_scalars() -> BoxedStrategy<Node> {
        // Mostly plain, so that a tree often holds one odd scalar among plain ones.
        prop_oneof![
            30 => plain_scalars(),
            2 => prop::sample::select(vec![
                "yes", "No", "y", "010", "1e3", "+1", ".5", "0x1F", ".inf", "x#y", "a # c",
                "a,b", "a]", "[a, b]", "{a: 1}", "-x", "- x", "&a x", "*a", "!t x", "|", ">",
                "a: b", "a:", "'open", "\"open", "\"\\x41\"", "\"\\ud800\"", "\"a\" b", "?",
                "%x", "@x", "`x", "12:30", "1_000", "-", "#c",
            ])
            .prop_map(|s| Node::Scalar(s.to_string(), Value::Null)),
            1 => "[a-zA-Z0-9 _.:/#'\",\\[\\]{}-]{0,8}".prop_map(|s| Node::Scalar(s, Value::Null)),
        ]
        .boxed()
    }

    fn any_keys() -> BoxedStrategy<(String, String)> {
        prop_oneof![
            20 => plain_keys(),
            1 => prop::sample::select(vec!["1", "yes", "a ", "- a", "a #b", "\"a\" ", "[a]", "? a", "~"])
                .prop_map(|s| (s.to_string(), String::new())),
            1 => "[a-z#' :-]{0,5}".prop_map(|s| (s, String::new())),
        ]
        .boxed()
    }

    fn trees(
        scalars: BoxedStrategy<Node>,
        keys: BoxedStrategy<(String, String)>,
        distinct_keys: bool,
    ) -> impl Strategy<Value = Node> {
        scalars.prop_recursive(4, 48, 5, move |inner| {
            let keys = keys.clone();
            prop_oneof![
                prop::collection::vec((keys, inner.clone()), 1..5).prop_map(move |entries| {
                    let mut seen = std::collections::BTreeSet::new();
                    Node::Map(
                        entries
                            .into_iter()
                            .filter(|((_, key), _)| !distinct_keys || seen.insert(key.clone()))
                            .map(|((spelled, key), node)| (spelled, key, node))
                            .collect(),
                    )
                }),
                prop::collection::vec(inner, 1..5).prop_map(Node::Seq),
            ]
        })
    }

    /// How a tree is laid out.
    #[derive(Debug, Clone)]
    struct Layout {
        /// Spaces a nested level is indented by.
        step: usize,
        /// A sequence under a key has its `- ` at the key's indentation.
        indentless: bool,
        /// A mapping in a sequence starts on its entry's `- ` line.
        compact: bool,
        /// A comment line after every this many lines (0: none), indented this much.
        comment_every: usize,
        comment_indent: usize,
        /// A comment after every value and every `key:`.
        trailing: bool,
    }

    fn layouts() -> impl Strategy<Value = Layout> {
        (
            1usize..5,
            any::<bool>(),
            any::<bool>(),
            0usize..5,
            0usize..9,
            any::<bool>(),
        )
            .prop_map(
                |(step, indentless, compact, comment_every, comment_indent, trailing)| Layout {
                    step,
                    indentless,
                    compact,
                    comment_every,
                    comment_indent,
                    trailing,
                },
            )
    }

    fn emit(node: &Node, indent: usize, layout: &Layout, out: &mut Vec<String>) {
        let pad = " ".repeat(indent);
        let note = if layout.trailing { " # note" } else { "" };
        match node {
            Node::Scalar(..) => unreachable!("scalars are written by their parent"),
            Node::Map(entries) => {
                for (key, _, value) in entries {
                    match value {
                        Node::Scalar(s, _) => out.push(format!("{pad}{key}: {s}{note}")),
                        Node::Map(_) => {
                            out.push(format!("{pad}{key}:{note}"));
                            emit(value, indent + layout.step, layout, out);
                        }
                        Node::Seq(_) => {
                            out.push(format!("{pad}{key}:{note}"));
                            let at = if layout.indentless {
                                indent
                            } else {
                                indent + layout.step
                            };
                            emit(value, at, layout, out);
                        }
                    }
                }
            }
            Node::Seq(items) => {
                for item in items {
                    match item {
                        Node::Scalar(s, _) => out.push(format!("{pad}- {s}{note}")),
                        Node::Map(entries) if layout.compact && !entries.is_empty() => {
                            let mut inner = Vec::new();
                            emit(item, indent + 2, layout, &mut inner);
                            inner[0] = format!("{pad}- {}", &inner[0][indent + 2..]);
                            out.extend(inner);
                        }
                        _ => {
                            out.push(format!("{pad}-{note}"));
                            emit(item, indent + layout.step, layout, out);
                        }
                    }
                }
            }
        }
    }

    /// The stream of these documents: `---` between them (and before the first when
    /// `leading`), comment lines as the layout says.
    fn stream(documents: &[Node], layout: &Layout, leading: bool) -> String {
        let mut lines = Vec::new();
        for (i, doc) in documents.iter().enumerate() {
            if i > 0 || leading {
                lines.push("---".to_string());
            }
            emit(doc, 0, layout, &mut lines);
        }
        let mut text = String::new();
        for (i, line) in lines.iter().enumerate() {
            text.push_str(line);
            text.push('\n');
            if layout.comment_every > 0 && i % layout.comment_every == 0 && line != "---" {
                text.push_str(&format!("{}# c\n\n", " ".repeat(layout.comment_indent)));
            }
        }
        text
    }

    fn roots(
        scalars: BoxedStrategy<Node>,
        keys: BoxedStrategy<(String, String)>,
        distinct_keys: bool,
    ) -> impl Strategy<Value = Vec<Node>> {
        prop::collection::vec(
            trees(scalars, keys, distinct_keys)
                .prop_filter("a collection", |n| !matches!(n, Node::Scalar(..))),
            1..4,
        )
    }

    proptest! {
        /// Trees of scalars with one reading, in every layout, are read by the line reader
        /// as written.
        #[test]
        fn plain_trees_are_read_as_written(
            documents in roots(plain_scalars(), plain_keys(), true),
            layout in layouts(),
            leading in any::<bool>(),
        ) {
            let text = stream(&documents, &layout, leading);
            let read = read_block(&text);
            prop_assert!(read.is_ok(), "{:?}\n{}", read, text);
            let values: Vec<Value> = read.unwrap().into_iter().map(|d| d.value.to_value()).collect();
            let written: Vec<Value> = documents.iter().map(Node::value).collect();
            prop_assert_eq!(values, written, "{}", text);
        }

        /// Whatever the line reader reads, the located reader reads the same (values and
        /// first lines), and so does the event reader when it reads the stream.
        #[test]
        fn the_line_reader_agrees_with_the_other_readers(
            documents in roots(any_scalars(), any_keys(), false),
            layout in layouts(),
            leading in any::<bool>(),
        ) {
            let text = stream(&documents, &layout, leading);
            if let Ok(read) = read_block(&text) {
                let read: Vec<(u64, Value)> = read.into_iter().map(|d| (d.line, d.value.to_value())).collect();
                let located = crate::yaml_plain::tests::located(&text);
                prop_assert_eq!(Some(&read), located.as_ref(), "{}", text);
                if let Ok(events) = super::super::read_events(&text) {
                    let events: Vec<(u64, Value)> =
                        events.into_iter().map(|d| (d.line, d.value.to_value())).collect();
                    prop_assert_eq!(&read, &events, "{}", text);
                }
            }
        }
    }

    #[test]
    fn reads_a_manifest_with_its_lines() {
        let text = "\
# a flavor
apiVersion: kubeplace.io/v1alpha1
kind: Flavor
metadata:
  name: m1.small   # the smallest
  labels: {}
spec:
  vcpus: 1
  extraSpecs:
    hw:cpu_policy: dedicated
    \"trait:CUSTOM_GOLD\": required
  traits:
  - CUSTOM_A
  -   'CUSTOM_B'
  groups:
    - resources:
        VCPU: 1
      name: \"g\\u00e9\"
    -
      - 1.5
      - -2
---

kind: B
v: ~
";
        let docs = read_block(text).unwrap();
        assert_eq!(docs.iter().map(|d| d.line).collect::<Vec<_>>(), [2, 24]);
        assert_eq!(
            docs[0].value.to_value(),
            json!({
                "apiVersion": "kubeplace.io/v1alpha1",
                "kind": "Flavor",
                "metadata": {"name": "m1.small", "labels": {}},
                "spec": {
                    "vcpus": 1,
                    "extraSpecs": {"hw:cpu_policy": "dedicated", "trait:CUSTOM_GOLD": "required"},
                    "traits": ["CUSTOM_A", "CUSTOM_B"],
                    "groups": [{"resources": {"VCPU": 1}, "name": "gé"}, [1.5, -2]],
                },
            })
        );
        assert_eq!(docs[1].value.to_value(), json!({"kind": "B", "v": null}));
        assert_eq!(
            read_plain_lines(text),
            docs.iter().map(|d| d.line).collect::<Vec<_>>()
        );
    }

    fn read_plain_lines(text: &str) -> Vec<u64> {
        crate::yaml_plain::tests::located(text)
            .unwrap()
            .into_iter()
            .map(|(line, _)| line)
            .collect()
    }

    /// What the line reader leaves to the event reader (which reads some of it) or to the
    /// located reader: each is refused here, and `read_plain` still reads what the located
    /// reader reads.
    #[test]
    fn leaves_the_rest_to_the_other_readers() {
        for text in [
            "a: [x, y]\n",
            "a: {b: 1}\n",
            "a: x\n  y\n",
            "a: \"x\n  y\"\n",
            "a:\n  x\n",
            "a: 1\n  b: 2\n",
            "- - a\n",
            "a:\n- 1\n b: 2\n",
            "a: |\n  x\n",
            "a: &x 1\nb: *x\n",
            "a: !t 1\n",
            "a:\tb\n",
            "a: b\r\n",
            "\u{feff}a: b\n",
            "a: x\u{85}y\n",
            "a: 1\na: 2\n",
            "a: 1\n---\n",
            "--- a: 1\n",
            "%YAML 1.2\n---\na: 1\n",
            "a: 1\n...\n",
            "a: b: c\n",
            "a : 1\n",
            "a: \"\\x41\"\n",
            "a: \"x\" y\n",
            "a: x#y\n",
            "a: [a]\n",
            "? a\n: b\n",
            "just words\n",
            "  a: 1\nb: 2\n",
        ] {
            assert!(
                matches!(read_block(text), Err(PlainError::Unsupported(_))),
                "{text:?}: {:?}",
                read_block(text)
            );
            if let Ok(read) = super::super::read_plain(text) {
                let read: Vec<(u64, Value)> = read
                    .into_iter()
                    .map(|d| {
                        (
                            if d.value.is_null() { 0 } else { d.line },
                            d.value.to_value(),
                        )
                    })
                    .collect();
                assert_eq!(
                    Some(read),
                    crate::yaml_plain::tests::located(text),
                    "{text:?}"
                );
            }
        }
    }

    #[test]
    fn deep_nesting_is_left_to_the_other_readers() {
        let mut text = String::new();
        for depth in 0..(MAX_DEPTH + 2) {
            text.push_str(&format!("{}k:\n", " ".repeat(depth)));
        }
        assert_eq!(
            read_block(&text),
            Err(PlainError::Unsupported("deep nesting"))
        );
        let mut seq = String::new();
        for depth in 0..(MAX_DEPTH + 2) {
            seq.push_str(&format!("{}- k:\n", " ".repeat(depth * 2)));
        }
        assert!(read_block(&seq).is_err());
    }
}
