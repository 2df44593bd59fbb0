//! The fast readers: one clean JSON document (an object or a `List`) or a stream in the plain
//! YAML subset, read without recording where each value was written, a large input on several
//! threads. They hand over only documents that read without error or unknown field, and step
//! aside (return `false`) at the first that does not, for the located reader to say where.

use std::ops::ControlFlow;

use kubeplace_core::yaml_plain::{Allowed, PlainNode, holds_a_character_outside};

use super::document::{Content, Document, NAMESPACE_API_VERSION, NAMESPACE_KIND, Origin};
use super::names::{check_namespace_name, check_object_name};
use crate::cluster_source::{ClusterSource, SourceKind};
use crate::fields::{has_unknown_fields, has_unknown_namespace_fields};
use crate::{API_VERSION, Kind, Object};

/// One JSON document (a `List`, as `kubectl get -o json` writes, or one object) whose every
/// object reads cleanly, read with a JSON parser: many times faster than the YAML parser that
/// records where each value was written. Each object keeps the line it starts on. `None`
/// sends the text to [`parse_located`], whose messages name the line of the offending field:
/// when it is not one JSON value, or an object in it has an error or an unknown field.
///
/// [`parse_located`]: super::located::parse_stream_located
#[cfg(test)]
pub(super) fn parse_json_fast(file: &str, text: &str, each: &mut dyn FnMut(Document)) -> bool {
    parse_json_fast_within(file, text, usize::MAX, each).unwrap_or(false)
}

/// A `List` of more items than a stream may hold documents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct TooManyItems;

/// [`parse_json_fast`], refusing a `List` of more than `limit` items before reading any:
/// its items are counted without being parsed, where the located reader would build the
/// whole list's tree before it could count them.
pub(super) fn parse_json_fast_within(
    file: &str,
    text: &str,
    limit: usize,
    each: &mut dyn FnMut(Document),
) -> Result<bool, TooManyItems> {
    use serde_json::value::RawValue;
    // A character JSON strings may carry and YAML refuses: the located reader, a YAML
    // parser, refuses the text, and the fast reader must not read what it refuses.
    let json_whitespace = Allowed {
        tab: true,
        carriage_return: true,
        line_separators: true,
    };
    if !text.trim_start().starts_with('{') || holds_a_character_outside(text, json_whitespace) {
        return Ok(false);
    }
    #[derive(serde::Deserialize)]
    struct Top<'a> {
        kind: Option<String>,
        #[serde(borrow)]
        items: Option<Vec<&'a RawValue>>,
    }
    let Ok(top) = serde_json::from_str::<Top<'_>>(text) else {
        return Ok(false);
    };
    let items: Vec<&RawValue> = match top {
        Top {
            kind: Some(kind),
            items: Some(items),
        } if kind == "List" => items,
        _ => match serde_json::from_str::<&RawValue>(text) {
            Ok(item) => vec![item],
            Err(_) => return Ok(false),
        },
    };
    if items.len() > limit {
        return Err(TooManyItems);
    }
    // Each item with the line it starts on.
    let mut work: Vec<(&RawValue, u64)> = Vec::with_capacity(items.len());
    let (mut counted_to, mut line) = (0usize, 1u64);
    for item in items {
        let offset = item.get().as_ptr() as usize - text.as_ptr() as usize;
        line += line_breaks(text.as_bytes(), counted_to, offset);
        counted_to = offset;
        work.push((item, line));
    }
    let threads = if work.len() < PARALLEL_READ_FROM {
        0
    } else {
        read_threads()
    };
    let mut complete = true;
    kubeplace_core::runs::in_runs_streamed(
        &work,
        ITEMS_A_RUN,
        threads,
        |run| {
            run.iter()
                .map(|(item, line)| {
                    let body: PlainNode<'_> = serde_json::from_str(item.get()).ok()?;
                    let origin = Origin {
                        file: file.to_string(),
                        document: 1,
                        line: *line,
                    };
                    clean_document(origin, &body)
                })
                .collect::<Vec<_>>()
        },
        |run| {
            for document in run {
                match document {
                    Some(document) => each(document),
                    None => {
                        complete = false;
                        return ControlFlow::Break(());
                    }
                }
            }
            ControlFlow::Continue(())
        },
    );
    Ok(complete)
}

/// Line breaks in `text[from..to]` as YAML counts them, so that lines agree with the located
/// reader's: `\n`, `\r\n` and a `\r` alone.
fn line_breaks(text: &[u8], from: usize, to: usize) -> u64 {
    // `\n` counted without a branch a byte; `\r` looked at only where there is one.
    let newlines = text[from..to].iter().filter(|b| **b == b'\n').count();
    let lone_cr = |i: &usize| text[*i] == b'\r' && text.get(i + 1) != Some(&b'\n');
    let lone_crs = if text[from..to].contains(&b'\r') {
        (from..to).filter(lone_cr).count()
    } else {
        0
    };
    (newlines + lone_crs) as u64
}

/// How many threads read one large stream: a core is left to the caller, which takes each
/// document in hand (admits it) while later ones are read.
fn read_threads() -> usize {
    (kubeplace_core::runs::cores() - 1).clamp(1, MAX_READ_THREADS)
}

/// A `List` of fewer objects is read on one thread: starting threads would cost more.
pub(super) const PARALLEL_READ_FROM: usize = 2_000;
/// A YAML stream shorter than this is read on one thread.
pub(super) const PARALLEL_YAML_FROM: usize = 1 << 20;
/// At most this many threads read one stream.
const MAX_READ_THREADS: usize = 4;
/// Objects of a `List` read and handed over together.
const ITEMS_A_RUN: usize = 256;
/// About this many bytes of a YAML stream are read and handed over together.
pub(super) const YAML_BYTES_A_RUN: usize = 256 << 10;

/// A YAML stream in the plain subset of [`kubeplace_core::yaml_plain`] whose every object
/// reads cleanly, read without recording where each value was written. `None` sends the text
/// to [`parse_located`]: when it is outside that subset or not valid YAML, when it holds a
/// `List` (whose items' lines the plain reader does not keep), or when an object in it has an
/// error or an unknown field.
///
/// [`parse_located`]: super::located::parse_stream_located
pub(super) fn parse_yaml_fast(file: &str, text: &str, each: &mut dyn FnMut(Document)) -> bool {
    let threads = if text.len() < PARALLEL_YAML_FROM {
        0
    } else {
        read_threads()
    };
    let parts = if threads == 0 {
        1
    } else {
        (text.len() / YAML_BYTES_A_RUN).max(threads)
    };
    let pieces = kubeplace_core::yaml_plain::split_documents(text, parts);
    let mut complete = true;
    // Documents are numbered across pieces, empty ones included.
    let mut number = 0;
    kubeplace_core::runs::in_runs_streamed(
        &pieces,
        1,
        threads,
        |run| {
            let (first_line, piece) = run[0];
            // About one document a `---`: sized once, since documents are large to move.
            let mut out = Vec::with_capacity(piece.matches("\n---\n").count() + 1);
            // Each document becomes an object as soon as it is read, so that one
            // document's values are held at a time, not a whole piece's. `None` stands
            // for an empty document, which still counts.
            let flow = kubeplace_core::yaml_plain::read_plain_each(piece, |number, doc| {
                out.truncate(number);
                if doc.value.is_null() {
                    out.push(None);
                    return ControlFlow::Continue(());
                }
                if doc.value.get("kind").and_then(PlainNode::as_str) == Some("List") {
                    return ControlFlow::Break(());
                }
                let origin = Origin {
                    file: file.to_string(),
                    document: 0,
                    line: doc.line + first_line,
                };
                match clean_document(origin, &doc.value) {
                    Some(document) => {
                        out.push(Some(document));
                        ControlFlow::Continue(())
                    }
                    None => ControlFlow::Break(()),
                }
            });
            matches!(flow, Ok(ControlFlow::Continue(()))).then_some(out)
        },
        |piece| {
            let Some(piece) = piece else {
                complete = false;
                return ControlFlow::Break(());
            };
            for document in piece {
                number += 1;
                if let Some(mut document) = document {
                    document.origin.document = number;
                    each(document);
                }
            }
            ControlFlow::Continue(())
        },
    );
    complete
}

/// A document read without locations, when it is a kubeplace object or a Namespace with no
/// error and no unknown field: what the located reader's `document` makes of the same tree.
/// `None` otherwise, so that the located reader can say what is wrong and where.
fn clean_document(origin: Origin, value: &PlainNode<'_>) -> Option<Document> {
    let text = |v: &PlainNode<'_>, key: &str| {
        v.get(key)
            .and_then(PlainNode::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let kind = text(value, "kind")?;
    let api_version = text(value, "apiVersion")?;
    let name = value
        .get("metadata")
        .and_then(|m| text(m, "name"))
        .unwrap_or_default();
    let content = if kind == NAMESPACE_KIND {
        if api_version != NAMESPACE_API_VERSION
            || check_namespace_name(&name).is_err()
            || has_unknown_namespace_fields(value)
        {
            return None;
        }
        Content::Namespace(name.clone())
    } else if let Some(source_kind) = SourceKind::from_name(&kind) {
        if api_version != source_kind.api_version() || check_object_name(&name).is_err() {
            return None;
        }
        let mut source = ClusterSource::from_plain_untracked(source_kind, value)?;
        if source_kind.is_namespaced()
            && let Some(meta @ PlainNode::Map(_)) = value.get("metadata")
            && meta.get("namespace").is_none()
        {
            set_default_namespace(&mut source);
        }
        Content::Cluster(source)
    } else {
        let typed_kind = Kind::from_name(&kind)?;
        if api_version != API_VERSION
            || check_object_name(&name).is_err()
            || has_unknown_fields(typed_kind, value)
        {
            return None;
        }
        let mut object = Object::from_plain_untracked(typed_kind, value)?;
        if typed_kind.is_namespaced()
            && let Some(meta @ PlainNode::Map(_)) = value.get("metadata")
            && meta.get("namespace").is_none()
        {
            // kubectl puts an object without a namespace in its context's namespace, "default"
            // here (a namespace written as null stays null, as the located reader leaves it).
            object.meta_mut().namespace = Some("default".into());
        }
        Content::Object(object)
    };
    Some(Document {
        origin,
        kind,
        name,
        content: Ok(content),
        unknown_fields: Vec::new(),
    })
}

/// kubectl's namespace for an object written without one, "default" here.
fn set_default_namespace(source: &mut ClusterSource) {
    let meta = match source {
        ClusterSource::Pod(p) => &mut p.metadata,
        ClusterSource::ResourceClaim(c) => &mut c.metadata,
        _ => return,
    };
    meta.namespace = Some("default".into());
}
