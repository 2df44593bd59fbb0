//! A fast reader for plain YAML streams: documents of mappings, sequences, quoted strings and
//! plain scalars whose type no YAML schema can read two ways (`true`, `false`, `null`, `~`,
//! decimal integers and decimals, words starting with a letter). It builds the tree of a
//! JSON value ([`PlainNode`], whose strings borrow the text) without locations, with each
//! document's first line.
//!
//! Two readers share the subset: a line reader for block collections with one scalar a line
//! (most manifests), and a reader of a YAML parser's events for the rest of it.
//!
//! It is the fast path of the manifest reader: anything outside that plain subset (anchors,
//! aliases, tags, block scalars, numbers in other notations, keys that are not strings,
//! duplicate keys, deep nesting) is [`PlainError::Unsupported`], and a stream that is not
//! valid YAML is [`PlainError::Syntax`]; either way the caller reads the text again with
//! [`crate::yaml`], which records every value's line for the messages.

use std::borrow::Cow;
use std::convert::Infallible;
use std::ops::ControlFlow;

use serde_json::Number;
use yaml_rust2::parser::{Event, Parser};
use yaml_rust2::scanner::TScalarStyle;

/// Deepest nesting read; manifests are a few levels deep.
const MAX_DEPTH: usize = 64;

/// One document of a plain stream.
#[derive(Debug, Clone, PartialEq)]
pub struct PlainDocument<'a> {
    /// 1-based line its top-level value starts on.
    pub line: u64,
    pub value: PlainNode<'a>,
}

/// Why a stream is not read by this reader.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlainError {
    #[error("not plain YAML: {0}")]
    Unsupported(&'static str),
    #[error("not valid YAML: {0}")]
    Syntax(String),
}

/// A mapping or sequence being read.
enum Frame {
    Seq(Vec<PlainNode<'static>>),
    /// The entries so far, and the key whose value comes next.
    Map(Vec<(Cow<'static, str>, PlainNode<'static>)>, Option<String>),
}

mod block;
mod node;

pub use node::{DuplicateKey, PlainNode};

/// Reads every document of a stream: with the line reader when the stream is in its subset
/// (block collections, one scalar a line), else with the event reader.
pub fn read_plain(text: &str) -> Result<Vec<PlainDocument<'_>>, PlainError> {
    let mut documents = Vec::new();
    let ControlFlow::Continue(()) = read_plain_each(text, |number, document| {
        documents.truncate(number);
        documents.push(document);
        ControlFlow::<Infallible>::Continue(())
    })?;
    Ok(documents)
}

/// [`read_plain`], handing each document to `each` with its number in the stream (0-based)
/// as soon as the line reader has read it, so that a caller turning documents into objects
/// holds one document's values at a time. `each` may stop the reading (`Break`). When the
/// line reader meets something outside its subset after some documents, the event reader
/// reads the stream again from the start: `each` then sees number 0 again and must drop
/// what it was given from that number on.
pub fn read_plain_each<'a, B>(
    text: &'a str,
    mut each: impl FnMut(usize, PlainDocument<'a>) -> ControlFlow<B>,
) -> Result<ControlFlow<B>, PlainError> {
    if let Ok(flow) = block::read_block_each(text, &mut each) {
        return Ok(flow);
    }
    for (number, document) in read_events(text)?.into_iter().enumerate() {
        if let ControlFlow::Break(b) = each(number, document) {
            return Ok(ControlFlow::Break(b));
        }
    }
    Ok(ControlFlow::Continue(()))
}

/// Characters beyond `\n` and the printable ones that a fast reader may still read as the
/// located reader does; by default none.
#[derive(Debug, Clone, Copy, Default)]
pub struct Allowed {
    pub tab: bool,
    pub carriage_return: bool,
    /// U+2028 and U+2029, which YAML 1.1 reads as line breaks and JSON as text.
    pub line_separators: bool,
}

/// Whether a text holds a character a YAML parser refuses or reads as a line break other
/// than `\n`, `allowed` aside: control characters, DEL, the C1 controls (NEL is a line
/// break in YAML 1.1), the line and paragraph separators, byte order marks and the two
/// non-characters YAML excludes. A fast reader leaves such a text to the located reader;
/// the event reader's parser would even stop at a NUL as if the stream ended there.
pub fn holds_a_character_outside(text: &str, allowed: Allowed) -> bool {
    let controls: u32 =
        1 << b'\n' | u32::from(allowed.tab) << b'\t' | u32::from(allowed.carriage_return) << b'\r';
    let odd_byte = |b: &u8| (*b < 0x20 && controls >> *b & 1 == 0) || *b == 0x7f;
    let odd_char = |c: char| match c {
        '\u{80}'..='\u{9f}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}' => true,
        '\u{2028}' | '\u{2029}' => !allowed.line_separators,
        _ => false,
    };
    // In blocks, without a branch a byte, so that the scan of a large stream is vectorized.
    let odd_bytes = text
        .as_bytes()
        .chunks(64)
        .any(|chunk| chunk.iter().fold(false, |odd, b| odd | odd_byte(b)));
    odd_bytes || (!text.is_ascii() && text.chars().any(odd_char))
}

/// Reads every document of a stream from a YAML parser's events.
fn read_events(text: &str) -> Result<Vec<PlainDocument<'static>>, PlainError> {
    let tabs = Allowed {
        tab: true,
        ..Allowed::default()
    };
    if holds_a_character_outside(text, tabs) {
        return Err(PlainError::Unsupported(
            "a control character, a carriage return or a byte order mark",
        ));
    }
    let lines: Vec<Line<'_>> = text
        .split('\n')
        .map(|text| Line {
            text,
            ascii: text.is_ascii(),
        })
        .collect();
    let mut parser = Parser::new_from_str(text);
    let mut documents = Vec::new();
    let mut stack: Vec<Frame> = Vec::new();
    let mut line = 0u64;
    loop {
        let (event, mark) = parser
            .next_token()
            .map_err(|e| PlainError::Syntax(e.to_string()))?;
        let finished = match event {
            Event::StreamEnd => return Ok(documents),
            Event::Nothing | Event::StreamStart | Event::DocumentStart | Event::DocumentEnd => {
                continue;
            }
            Event::Alias(_) => return Err(PlainError::Unsupported("an alias")),
            Event::Scalar(text, style, anchor, tag) => {
                if anchor != 0 || tag.is_some() {
                    return Err(PlainError::Unsupported("an anchor or a tag"));
                }
                let at = (mark.line(), mark.col());
                if !text.is_empty() && !on_one_line(&lines, at, &text, style) {
                    return Err(PlainError::Unsupported("a scalar over several lines"));
                }
                if let Some(Frame::Map(_, key @ None)) = stack.last_mut() {
                    *key = Some(key_text(text, style)?);
                    continue;
                }
                if stack.is_empty() {
                    line = mark.line() as u64;
                }
                scalar(text, style)?
            }
            Event::SequenceStart(anchor, ref tag) | Event::MappingStart(anchor, ref tag) => {
                if anchor != 0 || tag.is_some() {
                    return Err(PlainError::Unsupported("an anchor or a tag"));
                }
                if let Some(Frame::Map(_, None)) = stack.last() {
                    return Err(PlainError::Unsupported("a key that is not a scalar"));
                }
                if stack.len() == MAX_DEPTH {
                    return Err(PlainError::Unsupported("deep nesting"));
                }
                if stack.is_empty() {
                    line = mark.line() as u64;
                }
                stack.push(if matches!(event, Event::SequenceStart(..)) {
                    Frame::Seq(Vec::new())
                } else {
                    Frame::Map(Vec::new(), None)
                });
                continue;
            }
            Event::SequenceEnd | Event::MappingEnd => match stack.pop() {
                Some(Frame::Seq(items)) => PlainNode::Seq(items),
                Some(Frame::Map(entries, None)) => PlainNode::map(entries)
                    .map_err(|_| PlainError::Unsupported("a duplicate key"))?,
                _ => return Err(PlainError::Syntax("unbalanced events".into())),
            },
        };
        match stack.last_mut() {
            // Where a stream of comments or separators holds an empty document is read
            // differently by YAML parsers, and the documents' numbers depend on it.
            None if finished.is_null() => {
                return Err(PlainError::Unsupported("an empty document"));
            }
            None => documents.push(PlainDocument {
                line,
                value: finished,
            }),
            Some(Frame::Seq(items)) => items.push(finished),
            Some(Frame::Map(entries, key)) => {
                let key = key.take().unwrap_or_default();
                entries.push((Cow::Owned(key), finished));
            }
        }
    }
}

/// A line of the stream, and whether it is ASCII (columns are then byte offsets).
struct Line<'a> {
    text: &'a str,
    ascii: bool,
}

/// Longest line other than ASCII in which a column is looked up by counting characters.
const MAX_COUNTED_LINE: usize = 4096;

/// Whether a scalar starting at a 1-based line and 0-based column is written on that line
/// alone: YAML parsers differ on how a quoted or plain scalar may go on over more lines.
fn on_one_line(
    lines: &[Line<'_>],
    (line, column): (usize, usize),
    value: &str,
    style: TScalarStyle,
) -> bool {
    let Some(Line { text, ascii }) = line.checked_sub(1).and_then(|l| lines.get(l)) else {
        return false;
    };
    let start = if *ascii {
        Some(column)
    } else if text.len() <= MAX_COUNTED_LINE {
        text.char_indices().nth(column).map(|(i, _)| i)
    } else {
        None
    };
    let Some(rest) = start.and_then(|s| text.get(s..)) else {
        return false;
    };
    let mut chars = rest.chars();
    match (style, chars.next()) {
        (TScalarStyle::Plain, _) => rest.starts_with(value),
        (TScalarStyle::SingleQuoted, Some('\'')) => {
            // `''` is a quote inside the scalar; a lone `'` closes it.
            let mut chars = chars.peekable();
            while let Some(c) = chars.next() {
                if c == '\'' && chars.next_if_eq(&'\'').is_none() {
                    return true;
                }
            }
            false
        }
        (TScalarStyle::DoubleQuoted, Some('"')) => {
            let mut escaped = false;
            for c in chars {
                if c == '"' && !escaped {
                    return true;
                }
                escaped = c == '\\' && !escaped;
            }
            false
        }
        _ => false,
    }
}

/// A mapping key: a string, quoted or plain.
fn key_text(text: String, style: TScalarStyle) -> Result<String, PlainError> {
    match scalar(text, style)? {
        PlainNode::String(s) => Ok(s.into_owned()),
        _ => Err(PlainError::Unsupported("a key that is not a string")),
    }
}

/// A scalar's value, when every YAML schema reads it so.
fn scalar(text: String, style: TScalarStyle) -> Result<PlainNode<'static>, PlainError> {
    match style {
        TScalarStyle::SingleQuoted | TScalarStyle::DoubleQuoted => {
            Ok(PlainNode::String(Cow::Owned(text)))
        }
        TScalarStyle::Literal | TScalarStyle::Folded => {
            Err(PlainError::Unsupported("a block scalar"))
        }
        TScalarStyle::Plain => match plain_node(&text)? {
            PlainNode::String(_) => Ok(PlainNode::String(Cow::Owned(text))),
            other => Ok(other.into_owned()),
        },
    }
}

/// A plain scalar's value, borrowing its text when it is a string.
fn plain_node(text: &str) -> Result<PlainNode<'_>, PlainError> {
    match text {
        // An empty node (`key:` with no value, or an empty document) reads as null.
        "null" | "~" | "" => return Ok(PlainNode::Null),
        "true" => return Ok(PlainNode::Bool(true)),
        "false" => return Ok(PlainNode::Bool(false)),
        _ => {}
    }
    // Most scalars of a manifest are words (keys, names): no number starts with a letter.
    if text.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return word(text);
    }
    let unsigned = text.strip_prefix('-').unwrap_or(text);
    let (whole, fraction) = match unsigned.split_once('.') {
        Some((w, f)) => (w, Some(f)),
        None => (unsigned, None),
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    // Decimal only: no leading zero (YAML 1.1 reads 010 as octal), no exponent, no `+`.
    if digits(whole) && (whole == "0" || !whole.starts_with('0')) {
        let number = match fraction {
            None => text.parse::<i64>().ok().map(Number::from),
            Some(f) if digits(f) => text.parse::<f64>().ok().and_then(Number::from_f64),
            Some(_) => None,
        };
        return number.map(PlainNode::Number).ok_or(PlainError::Unsupported(
            "a number out of range or in another notation",
        ));
    }
    Err(PlainError::Unsupported("a plain scalar of another type"))
}

/// A plain scalar starting with a letter: a string, unless YAML 1.1 or another spelling
/// reads it as a boolean or null.
fn word(text: &str) -> Result<PlainNode<'_>, PlainError> {
    let read_otherwise = text.len() <= 5
        && ["y", "n", "yes", "no", "on", "off", "true", "false", "null"]
            .iter()
            .any(|w| w.eq_ignore_ascii_case(text));
    if read_otherwise {
        Err(PlainError::Unsupported("a plain scalar of another type"))
    } else {
        Ok(PlainNode::String(Cow::Borrowed(text)))
    }
}

/// Cuts a stream into at most `parts` pieces of about equal size, each cut right before a
/// line that is exactly `---` (a document start), so that the pieces can be read apart:
/// [`read_plain`] gives each piece's documents, the pieces' documents in order are the
/// stream's, and a document's line in the stream is its line in its piece plus the piece's
/// first line (given with each piece, 0-based). Inside a plain stream a line `---` can only
/// start a document; in a stream outside it (a quoted string over several lines, a block
/// scalar), a cut leaves a piece [`read_plain`] refuses, as it refuses the whole.
pub fn split_documents(text: &str, parts: usize) -> Vec<(u64, &str)> {
    let mut pieces = Vec::with_capacity(parts.max(1));
    let (mut start, mut line) = (0usize, 0u64);
    for part in 1..parts.max(1) {
        let target = text.len() * part / parts;
        if target <= start {
            continue;
        }
        // The next document start at or after the target.
        let Some(found) = text[target..].find("\n---\n").map(|i| target + i + 1) else {
            break;
        };
        pieces.push((line, &text[start..found]));
        line += text[start..found].bytes().filter(|b| *b == b'\n').count() as u64;
        start = found;
    }
    pieces.push((line, &text[start..]));
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use serde_json::json;

    /// Reading the pieces apart gives the stream's documents and lines (comments and blank
    /// lines included), and a stream outside
    /// the plain subset stays refused when a cut falls inside what makes it so.
    #[test]
    fn pieces_read_apart_read_as_the_whole() {
        let doc =
            |i: usize| format!("kind: A\nmetadata:\n  name: \"n{i}\"\nspec: {{v: \"---\"}}\n");
        let mut text = String::new();
        for i in 0..40 {
            text.push_str("---\n");
            if i % 7 == 3 {
                text.push_str("# a comment\n\n");
            }
            text.push_str(&doc(i));
        }
        let whole = read_plain(&text).unwrap();
        for parts in [1, 2, 3, 8, 200] {
            let pieces = split_documents(&text, parts);
            assert!(pieces.len() <= parts.max(1));
            assert_eq!(pieces.iter().map(|(_, p)| *p).collect::<String>(), text);
            let mut apart = Vec::new();
            for (first, piece) in pieces {
                for mut d in read_plain(piece).unwrap() {
                    d.line += first;
                    apart.push(d);
                }
            }
            assert_eq!(apart, whole, "{parts} parts");
        }
        // A quoted string over several lines, with a line `---` in it.
        let quoted = format!(
            "{}note: \"a\n---\nb\"\n{}",
            doc(0),
            "---\n".to_string() + &doc(1)
        );
        assert!(read_plain(&quoted).is_err());
        for (_, piece) in split_documents(&quoted, 2) {
            if piece.contains("note") || piece.starts_with("---\nb") {
                assert!(read_plain(piece).is_err(), "{piece:?}");
            }
        }
    }

    /// When the line reader gives up after some documents, the event reader reads the
    /// stream again from the first: the documents handed over are replaced, not repeated.
    #[test]
    fn a_stream_the_line_reader_gives_up_on_midway_is_read_once() {
        let text = "kind: A\n---\nkind: B\n---\nkind: C\nl: [x1, x2]\n";
        let mut seen = Vec::new();
        let flow = read_plain_each(text, |number, _| {
            seen.push(number);
            ControlFlow::<()>::Continue(())
        });
        assert_eq!(flow, Ok(ControlFlow::Continue(())));
        assert_eq!(seen, [0, 1, 0, 1, 2]);
        let values: Vec<Value> = read_plain(text)
            .unwrap()
            .into_iter()
            .map(|d| d.value.to_value())
            .collect();
        assert_eq!(
            values,
            [
                json!({"kind": "A"}),
                json!({"kind": "B"}),
                json!({"kind": "C", "l": ["x1", "x2"]})
            ]
        );
        // Stopped by the caller: no second reading.
        let mut seen = Vec::new();
        let flow = read_plain_each(text, |number, _| {
            seen.push(number);
            ControlFlow::Break(number)
        });
        assert_eq!(flow, Ok(ControlFlow::Break(0)));
        assert_eq!(seen, [0]);
    }

    #[test]
    fn reads_documents_with_their_first_line() {
        let docs = read_plain(
            "---\nkind: A\nspec:\n  num: 1\n  f: 1.5\n  s: 'x'\n  l: [a, \"b\"]\n  e:\n---\n# note\n\nkind: B\nv: ~\n",
        )
        .unwrap();
        let lines: Vec<u64> = docs.iter().map(|d| d.line).collect();
        assert_eq!(lines, [2, 12]);
        assert_eq!(
            docs[0].value.to_value(),
            json!({"kind": "A", "spec": {"num": 1, "f": 1.5, "s": "x", "l": ["a", "b"], "e": null}})
        );
        assert_eq!(docs[1].value.to_value(), json!({"kind": "B", "v": null}));
    }

    #[test]
    fn steps_aside_for_anything_read_two_ways_or_unusual() {
        for text in [
            "a: &x 1\nb: *x\n",
            "a: !!str 1\n",
            "a: |\n  text\n",
            "a: yes\n",
            "a: 010\n",
            "a: 1e3\n",
            "a: .inf\n",
            "a: 0x1F\n",
            "a: +1\n",
            "1: a\n",
            "? [a]\n: b\n",
            "a: 1\na: 2\n",
            "a: 99999999999999999999\n",
            "a: 1\n---\n# nothing\n",
        ] {
            assert!(
                matches!(read_plain(text), Err(PlainError::Unsupported(_))),
                "{text:?}: {:?}",
                read_plain(text)
            );
        }
        assert!(matches!(
            read_plain("kind: Flavor\nspec: [\n  vcpus: 2\n"),
            Err(PlainError::Syntax(_))
        ));
        let deep = format!("{}{}", "[".repeat(100), "]".repeat(100));
        assert!(read_plain(&deep).is_err());
    }

    /// A YAML parser stops at a NUL as if the stream ended there; both readers leave such a
    /// stream, and any other character YAML refuses, to the located reader, which refuses it
    /// rather than read half of it.
    #[test]
    fn characters_yaml_refuses_are_left_to_the_located_reader() {
        for text in [
            "kind: A\n# a \0 in a comment\n---\nkind: B\n",
            "kind: A\n---\nkind: [B, \0]\n",
            "kind: [A]\n# \u{7f}\n",
            "kind: [A]\n# \u{85}\n",
            "kind: [A]\r\n",
            "\u{feff}kind: [A]\n",
        ] {
            assert!(
                matches!(read_plain(text), Err(PlainError::Unsupported(_))),
                "{text:?}: {:?}",
                read_plain(text)
            );
        }
        // A tab where YAML allows one is still read by the event reader.
        let tabbed = read_plain("kind: [A,\tB]\n").unwrap();
        assert_eq!(tabbed[0].value.to_value(), json!({"kind": ["A", "B"]}));
    }

    /// The located reader's view of a stream: each non-empty document's first line and value.
    pub(super) fn located(text: &str) -> Option<Vec<(u64, Value)>> {
        let roots: Vec<serde_saphyr::Spanned<crate::yaml::Node>> =
            serde_saphyr::from_multiple(text).ok()?;
        Some(
            roots
                .into_iter()
                .map(crate::yaml::Located::from)
                .map(|l| (l.line, l.to_json()))
                // An empty document's line is never used.
                .map(|(line, v)| (if v.is_null() { 0 } else { line }, v))
                .collect(),
        )
    }

    /// A scalar as a YAML writer might spell it: plain, single- or double-quoted.
    fn spelled(word: &str, style: u8) -> String {
        match style {
            0 => word.to_string(),
            1 => format!("'{}'", word.replace('\'', "''")),
            _ => serde_json::to_string(word).unwrap(),
        }
    }

    fn words() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        prop_oneof![
            prop::sample::select(vec![
                "yes",
                "No",
                "on",
                "OFF",
                "y",
                "n",
                "true",
                "True",
                "false",
                "null",
                "Null",
                "~",
                "",
                "0",
                "00",
                "010",
                "-0",
                "-7",
                "12",
                "1.5",
                "-2.25",
                "1.",
                ".5",
                "1e3",
                "0x1F",
                "0o17",
                "+1",
                "1_000",
                ".inf",
                "-.inf",
                ".nan",
                "12:30",
                "a b",
                "hw:cpu_policy",
                "trait:CUSTOM_GOLD",
                "x#y",
                "a # b",
                "@x",
                "`x",
                "%x",
                "!x",
                "&x",
                "*x",
                "-x",
                "- x",
                "? x",
                "|",
                ">",
                "é",
                "a\tb",
                "9223372036854775808",
                "m1.small",
                "CUSTOM_PHYSNET_1",
                "it's",
                "say \"hi\"",
            ])
            .prop_map(str::to_string),
            "[a-zA-Z0-9 _.:/#'-]{0,10}",
        ]
    }

    proptest::proptest! {
        /// Whatever the plain reader accepts, the located reader reads the same: the same
        /// documents, values and first lines.
        #[test]
        fn the_plain_reader_agrees_with_the_located_reader(
            entries in proptest::collection::vec(
                (words(), 0u8..3, words(), 0u8..3, 0u8..4), 1..6),
            documents in 1usize..4,
            leading in 0usize..3,
        ) {
            let mut text = "\n".repeat(leading);
            for d in 0..documents {
                if d > 0 || leading > 1 {
                    text.push_str("---\n");
                }
                for (key, key_style, value, value_style, shape) in &entries {
                    let (k, v) = (spelled(key, *key_style), spelled(value, *value_style));
                    match shape {
                        0 => text.push_str(&format!("{k}: {v}\n")),
                        1 => text.push_str(&format!("{k}:\n  - {v}\n  - {v}\n")),
                        2 => text.push_str(&format!("{k}: {{inner: {v}}}\n")),
                        _ => text.push_str(&format!("# note\n{k}:\n  inner: [{v}, 1]\n")),
                    }
                }
            }
            if let Ok(plain) = read_plain(&text) {
                let located = located(&text);
                proptest::prop_assert!(located.is_some(), "{text:?}");
                let plain: Vec<(u64, Value)> = plain
                    .into_iter()
                    .map(|d| (if d.value.is_null() { 0 } else { d.line }, d.value.to_value()))
                    .collect();
                proptest::prop_assert_eq!(plain, located.unwrap(), "{:?}", text);
            }
        }
    }
}
