//! Reading manifests: files, folders and standard input, multi-document YAML or JSON,
//! into kubeplace objects that remember which file, document and line they came from.

use std::fmt;
use std::io::Read;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

pub use kubeplace_core::yaml::{Located, Node};
use kubeplace_core::yaml_plain::{Allowed, PlainNode, holds_a_character_outside};

use crate::fields::{
    UnknownField, has_unknown_fields, has_unknown_namespace_fields, unknown_fields,
    unknown_namespace_fields,
};
use crate::{API_VERSION, Kind, Object};
use kubeplace_core::placement::closest;

/// Where a document was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// The file's path as given, or `-` for standard input.
    pub file: String,
    /// 1-based position of the document in its file.
    pub document: usize,
    /// 1-based line the document starts at.
    pub line: u64,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{} (document {})",
            self.file, self.line, self.document
        )
    }
}

/// One document of a manifest: what it holds, or why it holds nothing kubeplace reads.
#[derive(Debug, Clone)]
pub struct Document {
    pub origin: Origin,
    /// `kind` as written, empty when absent.
    pub kind: String,
    /// `metadata.name` as written, empty when absent.
    pub name: String,
    pub content: Result<Content, DocumentError>,
    /// Fields the kind's schema does not name, which the API server refuses under strict
    /// field validation (kubectl's default) and drops otherwise; empty when `content` is
    /// an error.
    pub unknown_fields: Vec<UnknownField>,
}

/// What a well-formed document holds.
#[derive(Debug, Clone, PartialEq)]
// Nearly every document is an Object; boxing it would cost each one an allocation for the
// sake of the rare Namespace.
#[allow(clippy::large_enum_variant)]
pub enum Content {
    /// A kubeplace object.
    Object(Object),
    /// A core `v1` Namespace, by name. Not a kubeplace kind: it is read so that the
    /// namespaced objects after it can be checked as the API server checks them.
    Namespace(String),
}

impl Document {
    /// The kubeplace object, or why there is none; `None` for a Namespace.
    pub fn object(self) -> Option<Result<Object, DocumentError>> {
        match self.content {
            Ok(Content::Object(o)) => Some(Ok(o)),
            Ok(Content::Namespace(_)) => None,
            Err(e) => Some(Err(e)),
        }
    }
}

/// `apiVersion` and `kind` of a core Namespace.
pub const NAMESPACE_API_VERSION: &str = "v1";
pub const NAMESPACE_KIND: &str = "Namespace";

/// The namespaces every new cluster has.
pub const INITIAL_NAMESPACES: [&str; 4] =
    ["default", "kube-system", "kube-public", "kube-node-lease"];

/// Why a well-formed YAML document is not a kubeplace object. Each names the field,
/// the line, and what would be accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DocumentError {
    #[error("the document is not a mapping of fields (found {found})")]
    NotAMapping { line: u64, found: &'static str },
    #[error(
        "line {line}: field {field} is missing; kubeplace objects have apiVersion: {API_VERSION} and a kind"
    )]
    Missing { field: &'static str, line: u64 },
    #[error("field kind is {kind:?}, which kubeplace does not serve{}; kubeplace's kinds are {} (and it reads core v1 Namespaces)", hint(.suggestion), kind_names().join(", "))]
    UnknownKind {
        kind: String,
        line: u64,
        suggestion: Option<String>,
    },
    #[error("field apiVersion is {api_version:?}; {kind} is served as {served}")]
    UnknownApiVersion {
        api_version: String,
        kind: String,
        served: &'static str,
        line: u64,
    },
    #[error("field metadata.name is {name:?}: {why}")]
    BadName {
        name: String,
        line: u64,
        why: String,
    },
    #[error("field {path}: {message}")]
    Schema {
        path: String,
        line: u64,
        message: String,
    },
}

impl DocumentError {
    /// The line the problem is on.
    pub fn line(&self) -> u64 {
        match self {
            DocumentError::NotAMapping { line, .. }
            | DocumentError::Missing { line, .. }
            | DocumentError::UnknownKind { line, .. }
            | DocumentError::UnknownApiVersion { line, .. }
            | DocumentError::BadName { line, .. }
            | DocumentError::Schema { line, .. } => *line,
        }
    }

    /// The error with where it is: `FILE:LINE: document N: …`.
    pub fn located(&self, origin: &Origin) -> String {
        format!(
            "{}:{}: document {}: {self}",
            origin.file,
            self.line(),
            origin.document
        )
    }
}

fn hint(s: &Option<String>) -> String {
    s.as_ref()
        .map(|s| format!(" (did you mean {s}?)"))
        .unwrap_or_default()
}

/// Why the input could not be read at all (exit code 2).
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: not valid YAML or JSON: {message}")]
    Syntax { path: String, message: String },
}

/// Reads every path in order: `-` is standard input, a folder is read recursively in
/// sorted order (`*.yaml`, `*.yml`, `*.json`), a file is read whatever its name.
pub fn read_paths(paths: &[PathBuf], stdin: &mut dyn Read) -> Result<Vec<Document>, ReadError> {
    let mut documents = Vec::new();
    read_paths_each(paths, stdin, &mut |document| documents.push(document))?;
    Ok(documents)
}

/// [`read_paths`], handing each document to `each` as soon as it and every document before
/// it are read: the caller works on the first documents of a large file while later ones
/// are still being read on other threads. After an error nothing more is handed over.
pub fn read_paths_each(
    paths: &[PathBuf],
    stdin: &mut dyn Read,
    each: &mut dyn FnMut(Document),
) -> Result<(), ReadError> {
    for path in paths {
        if path.as_os_str() == "-" {
            let mut text = String::new();
            stdin
                .read_to_string(&mut text)
                .map_err(|source| ReadError::Io {
                    path: "-".into(),
                    source,
                })?;
            parse_stream_each("-", &text, each)?;
            continue;
        }
        for file in files_under(path)? {
            let shown = file.display().to_string();
            let text = std::fs::read_to_string(&file).map_err(|source| ReadError::Io {
                path: shown.clone(),
                source,
            })?;
            parse_stream_each(&shown, &text, each)?;
        }
    }
    Ok(())
}

/// The manifest files under a path, sorted; the path itself when it is a file.
pub fn files_under(path: &Path) -> Result<Vec<PathBuf>, ReadError> {
    let io = |source| ReadError::Io {
        path: path.display().to_string(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    if !meta.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(io)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(io)?;
    entries.sort();
    let mut files = Vec::new();
    for entry in entries {
        if entry.is_dir() {
            files.extend(files_under(&entry)?);
        } else if matches!(
            entry.extension().and_then(|e| e.to_str()),
            Some("yaml" | "yml" | "json")
        ) {
            files.push(entry);
        }
    }
    Ok(files)
}

/// Parser limits that grow with the input. The parser's defaults (1,024 documents, 250,000
/// nodes) refuse a cloud of a few thousand providers in one file; a document or a node takes
/// at least a few bytes of input, so limits proportional to its length admit any real file.
/// The limits on aliases and anchors, which are what let a small file expand into a huge
/// one, stay as they are.
fn options_for(text: &str) -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_documents = budget.max_documents.max(text.len() / 3 + 1);
    budget.max_nodes = budget.max_nodes.max(text.len());
    budget.max_events = budget.max_events.max(text.len().saturating_mul(2));
    budget.max_total_scalar_bytes = budget.max_total_scalar_bytes.max(text.len());
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    options
}

/// Parses one file's text: every document becomes a [`Document`]; empty documents are skipped;
/// `kind: List` is expanded into its items.
pub fn parse_stream(file: &str, text: &str) -> Result<Vec<Document>, ReadError> {
    let mut documents = Vec::new();
    parse_stream_each(file, text, &mut |document| documents.push(document))?;
    Ok(documents)
}

/// [`parse_stream`], handing each document to `each` as soon as it and every document before
/// it are read. The fast readers go first; when one meets a document it cannot read cleanly
/// after handing some over, the located reader reads the text again and hands over only
/// the documents after those (the readers agree on every document both read).
pub fn parse_stream_each(
    file: &str,
    text: &str,
    each: &mut dyn FnMut(Document),
) -> Result<(), ReadError> {
    let handed = std::cell::Cell::new(0usize);
    let mut hand = |document| {
        handed.set(handed.get() + 1);
        each(document);
    };
    let mut complete = parse_json_fast(file, text, &mut hand);
    if !complete && handed.get() == 0 {
        complete = parse_yaml_fast(file, text, &mut hand);
    }
    if !complete {
        parse_located(file, text)?
            .into_iter()
            .skip(handed.get())
            .for_each(each);
    }
    Ok(())
}

/// One JSON document (a `List`, as `kubectl get -o json` writes, or one object) whose every
/// object reads cleanly, read with a JSON parser: many times faster than the YAML parser that
/// records where each value was written. Each object keeps the line it starts on. `None`
/// sends the text to [`parse_located`], whose messages name the line of the offending field:
/// when it is not one JSON value, or an object in it has an error or an unknown field.
fn parse_json_fast(file: &str, text: &str, each: &mut dyn FnMut(Document)) -> bool {
    use serde_json::value::RawValue;
    // A character JSON strings may carry and YAML refuses: the located reader, a YAML
    // parser, refuses the text, and the fast reader must not read what it refuses.
    let json_whitespace = Allowed {
        tab: true,
        carriage_return: true,
        line_separators: true,
    };
    if !text.trim_start().starts_with('{') || holds_a_character_outside(text, json_whitespace) {
        return false;
    }
    #[derive(serde::Deserialize)]
    struct Top<'a> {
        kind: Option<String>,
        #[serde(borrow)]
        items: Option<Vec<&'a RawValue>>,
    }
    let Ok(top) = serde_json::from_str::<Top<'_>>(text) else {
        return false;
    };
    let items: Vec<&RawValue> = match top {
        Top {
            kind: Some(kind),
            items: Some(items),
        } if kind == "List" => items,
        _ => match serde_json::from_str::<&RawValue>(text) {
            Ok(item) => vec![item],
            Err(_) => return false,
        },
    };
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
    complete
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
const PARALLEL_READ_FROM: usize = 2_000;
/// A YAML stream shorter than this is read on one thread.
const PARALLEL_YAML_FROM: usize = 1 << 20;
/// At most this many threads read one stream.
const MAX_READ_THREADS: usize = 4;
/// Objects of a `List` read and handed over together.
const ITEMS_A_RUN: usize = 256;
/// About this many bytes of a YAML stream are read and handed over together.
const YAML_BYTES_A_RUN: usize = 256 << 10;

/// A YAML stream in the plain subset of [`kubeplace_core::yaml_plain`] whose every object
/// reads cleanly, read without recording where each value was written. `None` sends the text
/// to [`parse_located`]: when it is outside that subset or not valid YAML, when it holds a
/// `List` (whose items' lines the plain reader does not keep), or when an object in it has an
/// error or an unknown field.
fn parse_yaml_fast(file: &str, text: &str, each: &mut dyn FnMut(Document)) -> bool {
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
/// error and no unknown field: what [`document`] makes of the same tree. `None` otherwise,
/// so that the located reader can say what is wrong and where.
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

/// [`parse_stream`] read by the located reader alone: slower on clean input, and the reference
/// whose documents the fast readers must give whenever they read a text.
pub fn parse_stream_located(file: &str, text: &str) -> Result<Vec<Document>, ReadError> {
    parse_located(file, text)
}

/// [`parse_stream`] with every value's line and column kept.
fn parse_located(file: &str, text: &str) -> Result<Vec<Document>, ReadError> {
    let roots: Vec<serde_saphyr::Spanned<Node>> =
        serde_saphyr::from_multiple_with_options(text, options_for(text)).map_err(|e| {
            ReadError::Syntax {
                path: file.to_string(),
                message: kubeplace_core::yaml::syntax_message(&e),
            }
        })?;
    let mut out = Vec::new();
    for (i, root) in roots.into_iter().enumerate() {
        let root = Located::from(root);
        if matches!(root.node, Node::Null) {
            continue;
        }
        let origin = |line| Origin {
            file: file.to_string(),
            document: i + 1,
            line,
        };
        if root
            .get("kind")
            .and_then(|k| k.to_json().as_str().map(str::to_string))
            .as_deref()
            == Some("List")
            && let Some(Located {
                node: Node::Seq(items),
                ..
            }) = root.get("items")
        {
            for item in items {
                out.push(document(origin(item.line), item));
            }
            continue;
        }
        out.push(document(origin(root.line), &root));
    }
    Ok(out)
}

fn document(origin: Origin, root: &Located) -> Document {
    let text = |key: &str| {
        root.get(key)
            .and_then(|v| v.to_json().as_str().map(str::to_string))
    };
    let kind = text("kind").unwrap_or_default();
    let name = root
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(|n| n.to_json().as_str().map(str::to_string))
        .unwrap_or_default();
    let content = to_content(root);
    let unknown_fields = match &content {
        Ok(Content::Object(o)) => unknown_fields(o.kind(), root),
        Ok(Content::Namespace(_)) => unknown_namespace_fields(root),
        Err(_) => Vec::new(),
    };
    Document {
        origin,
        kind,
        name,
        content,
        unknown_fields,
    }
}

fn to_content(root: &Located) -> Result<Content, DocumentError> {
    let line = root.line;
    if !matches!(root.node, Node::Map(_)) {
        let found = match root.node {
            Node::Seq(_) => "a list",
            _ => "a single value",
        };
        return Err(DocumentError::NotAMapping { line, found });
    }
    let field = |key: &'static str| -> Result<(String, u64), DocumentError> {
        let v = root
            .get(key)
            .ok_or(DocumentError::Missing { field: key, line })?;
        match &v.node {
            Node::String(s) if !s.is_empty() => Ok((s.clone(), v.line)),
            _ => Err(DocumentError::Schema {
                path: key.into(),
                line: v.line,
                message: "must be a non-empty string".into(),
            }),
        }
    };
    let (kind, kind_line) = field("kind")?;
    let (api_version, api_line) = field("apiVersion")?;
    if kind == NAMESPACE_KIND {
        return to_namespace(root, api_version, api_line);
    }
    let Some(typed_kind) = Kind::from_name(&kind) else {
        return Err(DocumentError::UnknownKind {
            suggestion: closest(&kind, &kind_names()),
            kind,
            line: kind_line,
        });
    };
    if api_version != API_VERSION {
        return Err(DocumentError::UnknownApiVersion {
            api_version,
            kind,
            served: API_VERSION,
            line: api_line,
        });
    }
    let name_node = root.get("metadata").and_then(|m| m.get("name"));
    let name = name_node
        .and_then(|n| n.to_json().as_str().map(str::to_string))
        .unwrap_or_default();
    let name_line = name_node.map_or(line, |n| n.line);
    if let Err(why) = check_object_name(&name) {
        return Err(DocumentError::BadName {
            name,
            line: name_line,
            why,
        });
    }
    let mut body = root.to_json();
    if typed_kind.is_namespaced()
        && let Some(meta) = body.get_mut("metadata").and_then(|m| m.as_object_mut())
        && !meta.contains_key("namespace")
    {
        // kubectl puts an object without a namespace in its context's namespace, "default" here.
        meta.insert("namespace".into(), "default".into());
    }
    Object::from_value(typed_kind, body)
        .map(Content::Object)
        .map_err(|e| {
            let at = root.locate(e.path.split(['.', '[', ']']).filter(|s| !s.is_empty()));
            DocumentError::Schema {
                path: e.path,
                line: at.line,
                message: e.message,
            }
        })
}

/// A core Namespace: `apiVersion: v1` and a name the API server would take.
fn to_namespace(root: &Located, api_version: String, line: u64) -> Result<Content, DocumentError> {
    if api_version != NAMESPACE_API_VERSION {
        return Err(DocumentError::UnknownApiVersion {
            api_version,
            kind: NAMESPACE_KIND.into(),
            served: NAMESPACE_API_VERSION,
            line,
        });
    }
    let name_node = root.get("metadata").and_then(|m| m.get("name"));
    let name = name_node
        .and_then(|n| n.to_json().as_str().map(str::to_string))
        .unwrap_or_default();
    if let Err(why) = check_namespace_name(&name) {
        return Err(DocumentError::BadName {
            name,
            line: name_node.map_or(root.line, |n| n.line),
            why,
        });
    }
    Ok(Content::Namespace(name))
}

/// Kubernetes' rule for namespace names: a DNS label (RFC 1123).
pub fn check_namespace_name(name: &str) -> Result<(), String> {
    check_object_name(name)?;
    if name.len() > 63 || name.contains('.') {
        return Err(
            "a namespace name is a DNS label: at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit".into(),
        );
    }
    Ok(())
}

/// The names of kubeplace's kinds, in the order `kubeplace crds` prints them.
fn kind_names() -> Vec<&'static str> {
    Kind::ALL.iter().map(|k| k.as_str()).collect()
}

/// Kubernetes' rule for object names: a DNS subdomain (RFC 1123).
pub fn check_object_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("every object needs a name; set metadata.name".into());
    }
    if name.len() > 253 {
        return Err(format!(
            "it is {} characters long; at most 253 are allowed",
            name.len()
        ));
    }
    let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.';
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    if !name.chars().all(ok_char) || !name.starts_with(alnum) || !name.ends_with(alnum) {
        return Err("names use lowercase letters, digits, '-' and '.', and start and end with a letter or digit".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fast JSON reader's documents, when it reads the whole text.
    fn json_fast(file: &str, text: &str) -> Option<Vec<Document>> {
        let mut documents = Vec::new();
        parse_json_fast(file, text, &mut |d| documents.push(d)).then_some(documents)
    }

    /// The fast YAML reader's documents, when it reads the whole text.
    fn yaml_fast(file: &str, text: &str) -> Option<Vec<Document>> {
        let mut documents = Vec::new();
        parse_yaml_fast(file, text, &mut |d| documents.push(d)).then_some(documents)
    }

    const GOOD: &str = "apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata:\n  name: m1.small\nspec:\n  vcpus: 1\n  memoryMb: 512\n";

    #[test]
    fn reads_multi_document_streams_with_lines() {
        let text = format!(
            "---\n{GOOD}---\n# nothing here\n---\n{}",
            GOOD.replace("m1.small", "m1.large")
        );
        let docs = parse_stream("f.yaml", &text).unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(
            docs[0].origin,
            Origin {
                file: "f.yaml".into(),
                document: 1,
                line: 2
            }
        );
        assert_eq!(docs[1].origin.line, 12);
        assert_eq!(docs[1].name, "m1.large");
        assert!(docs.iter().all(|d| d.content.is_ok()));
    }

    fn json_list(items: &[&str]) -> String {
        format!(
            "{{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"List\",\n  \"items\": [\n{}\n  ]\n}}\n",
            items.join(",\n")
        )
    }

    const FLAVOR_JSON: &str = "    {\n      \"apiVersion\": \"kubeplace.io/v1alpha1\",\n      \"kind\": \"Flavor\",\n      \"metadata\": {\"name\": \"m1.small\"},\n      \"spec\": {\"vcpus\": 1, \"memoryMb\": 512}\n    }";

    #[test]
    fn a_clean_json_list_reads_the_same_fast_and_located() {
        let other = FLAVOR_JSON
            .replace("m1.small", "m1.large")
            .replace("512", "2048");
        let text = json_list(&[FLAVOR_JSON, &other]);
        let fast = json_fast("f.json", &text).expect("clean JSON takes the fast path");
        let located = parse_located("f.json", &text).unwrap();
        assert_eq!(fast.len(), 2);
        for (f, l) in fast.iter().zip(&located) {
            assert_eq!(f.origin, l.origin);
            assert_eq!(f.content, l.content);
            assert_eq!((&f.kind, &f.name), (&l.kind, &l.name));
        }
        assert_eq!(fast[1].origin.line, 11);
        // One object, not a List.
        let one = parse_stream("one.json", FLAVOR_JSON).unwrap();
        assert_eq!((one.len(), one[0].origin.line), (1, 1));
        // Lines end in `\r\n`, or in a `\r` alone in places: lines counted as YAML counts them.
        for (breaks, line) in [("\r\n", 11), ("\r", 11), ("\r\r", 14)] {
            let text = text.replacen('\n', breaks, 3);
            let fast = json_fast("f.json", &text).expect("clean JSON");
            same(&fast, &parse_located("f.json", &text).unwrap()).unwrap();
            assert_eq!(fast[1].origin.line, line, "{breaks:?}");
        }
    }

    /// A List large enough to be read on several threads reads as the located reader reads
    /// it, in order and with each object's line; one mistake in its last part still sends it
    /// to the located reader, which names the line.
    #[test]
    fn a_large_json_list_read_on_several_threads_keeps_order_and_lines() {
        let flavors: Vec<String> = (0..PARALLEL_READ_FROM + 500)
            .map(|i| FLAVOR_JSON.replace("m1.small", &format!("f{i:05}")))
            .collect();
        let refs: Vec<&str> = flavors.iter().map(String::as_str).collect();
        let text = json_list(&refs);
        let fast = json_fast("big.json", &text).expect("clean JSON takes the fast path");
        let located = parse_located("big.json", &text).unwrap();
        same(&fast, &located).unwrap();
        assert_eq!(fast.last().map(|d| d.name.as_str()), Some("f02499"));
        assert_eq!(fast[2_400].origin.line, 5 + 2_400 * 6);
        let typo = text.replace(
            "\"name\": \"f02400\"},\n      \"spec\": {\"vcpus\"",
            "\"name\": \"f02400\"},\n      \"spec\": {\"vcpu\"",
        );
        assert_ne!(typo, text);
        let mut handed = 0;
        assert!(!parse_json_fast("big.json", &typo, &mut |_| handed += 1));
        assert!(
            (1..=2_400).contains(&handed),
            "{handed} handed over before the mistake"
        );
        // The runs before the mistake were handed over as read; the located reader hands
        // over the rest: every object once, in order.
        let read = parse_stream("big.json", &typo).unwrap();
        same(&read, &parse_located("big.json", &typo).unwrap()).unwrap();
        let wrong = read[2_400].content.as_ref().unwrap_err();
        assert_eq!(wrong.line(), 5 + 2_400 * 6 + 4, "{wrong}");
    }

    /// A YAML stream large enough to be read in pieces on several threads reads as the
    /// located reader reads it: documents numbered and lined as in the whole stream.
    #[test]
    fn a_large_yaml_stream_read_in_pieces_reads_as_the_whole() {
        let long = "x".repeat(2_000);
        let mut text = String::new();
        for i in 0..600 {
            text.push_str("---\n");
            if i == 450 {
                text.push_str("# a comment\n\n");
            }
            text.push_str(&format!(
                "apiVersion: kubeplace.io/v1alpha1\nkind: Flavor\nmetadata:\n  name: f{i:04}\nspec:\n  vcpus: 1\n  memoryMb: 512\n  description: \"{long}\"\n"
            ));
        }
        assert!(text.len() > PARALLEL_YAML_FROM);
        let pieces = kubeplace_core::yaml_plain::split_documents(&text, 2);
        assert_eq!(pieces.len(), 2, "the stream is cut");
        let fast = yaml_fast("big.yaml", &text).expect("plain YAML takes the fast path");
        let located = parse_located("big.yaml", &text).unwrap();
        same(&fast, &located).unwrap();
        assert_eq!(fast.len(), 600);
        assert_eq!(fast[599].origin.document, 600);
        // A mistake in a late piece: the pieces before it were handed over as read, the
        // located reader hands over the rest, every document once and in order.
        assert!(text.len() / YAML_BYTES_A_RUN > 2, "read in several runs");
        let typo = text.replace("name: f0550\nspec:\n  vcpus", "name: f0550\nspec:\n  vcpu");
        assert_ne!(typo, text);
        let mut handed = 0;
        assert!(!parse_yaml_fast("big.yaml", &typo, &mut |_| handed += 1));
        assert!(
            (1..=550).contains(&handed),
            "{handed} handed over before the mistake"
        );
        let read = parse_stream("big.yaml", &typo).unwrap();
        same(&read, &parse_located("big.yaml", &typo).unwrap()).unwrap();
        assert_eq!(read.len(), 600);
        let wrong = read[550].content.as_ref().unwrap_err();
        assert!(wrong.to_string().contains("vcpu"), "{wrong}");
    }

    /// Whether two readings give the same documents, field for field.
    fn same(a: &[Document], b: &[Document]) -> Result<(), String> {
        if a.len() != b.len() {
            return Err(format!("{} documents against {}", a.len(), b.len()));
        }
        for (x, y) in a.iter().zip(b) {
            let key = |d: &Document| {
                (
                    d.origin.clone(),
                    d.kind.clone(),
                    d.name.clone(),
                    d.content.clone(),
                    d.unknown_fields.clone(),
                )
            };
            if key(x) != key(y) {
                return Err(format!("{:?}\n  against\n{:?}", key(x), key(y)));
            }
        }
        Ok(())
    }

    #[test]
    fn clean_yaml_reads_the_same_fast_and_located() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/cloud");
        let mut fast_files = 0;
        for file in files_under(&dir).unwrap() {
            let text = std::fs::read_to_string(&file).unwrap();
            let located = parse_located("f", &text).unwrap();
            if let Some(fast) = yaml_fast("f", &text) {
                fast_files += 1;
                same(&fast, &located).unwrap_or_else(|e| panic!("{file:?}: {e}"));
            }
            same(&parse_stream("f", &text).unwrap(), &located).unwrap();
        }
        assert!(fast_files >= 5, "{fast_files}");
        // A cloud as benches/manifest-load.py writes it: quoted strings, plain numbers.
        let provider = |name: &str| {
            format!(
                "---\napiVersion: \"kubeplace.io/v1alpha1\"\nkind: \"ResourceProvider\"\nmetadata:\n  name: \"{name}\"\nspec:\n  parent: \"cn000001\"\n  inventories:\n    VCPU:\n      total: 32\n      allocationRatio: 4.0\n  traits:\n    - \"HW_NIC_SRIOV\"\n"
            )
        };
        let text = format!(
            "{GOOD}{}{}",
            provider("cn000001-numa0"),
            provider("cn000001-numa1")
        );
        let fast = yaml_fast("cloud.yaml", &text).expect("a clean cloud takes the fast path");
        same(&fast, &parse_located("cloud.yaml", &text).unwrap()).unwrap();
        assert_eq!(fast.len(), 3);
        assert_eq!(fast[2].origin.line, 22);
        // A flow sequence in the last document: the line reader gives up after two
        // documents, the event reader reads the stream again, each object comes once.
        let flow = format!(
            "{text}{}",
            provider("cn000001-numa2")
                .replace("traits:\n    - \"HW_NIC_SRIOV\"", "traits: [HW_NIC_SRIOV]")
        );
        assert!(flow.contains("traits: [HW_NIC_SRIOV]"));
        let fast = yaml_fast("cloud.yaml", &flow).expect("still the plain subset");
        same(&fast, &parse_located("cloud.yaml", &flow).unwrap()).unwrap();
        let numbers: Vec<usize> = fast.iter().map(|d| d.origin.document).collect();
        assert_eq!(numbers, [1, 2, 3, 4]);
    }

    /// Every document of the examples that the plain readers read (YAML, and each as JSON)
    /// becomes the object JSON values made it, with the same verdict on unknown fields;
    /// objects with a mistake included.
    #[test]
    fn plain_trees_read_as_json_values_read() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
        let mut read = 0;
        for file in files_under(&dir).unwrap() {
            let text = std::fs::read_to_string(&file).unwrap();
            let Ok(documents) = kubeplace_core::yaml_plain::read_plain(&text) else {
                continue;
            };
            for doc in documents {
                let json = doc.value.to_value().to_string();
                let from_json: PlainNode<'_> = serde_json::from_str(&json).unwrap();
                for node in [&doc.value, &from_json] {
                    let Some(kind) = node.get("kind").and_then(PlainNode::as_str) else {
                        continue;
                    };
                    let Some(kind) = Kind::from_name(kind) else {
                        continue;
                    };
                    let value = node.to_value();
                    assert_eq!(
                        has_unknown_fields(kind, node),
                        has_unknown_fields(kind, &value),
                        "{file:?}"
                    );
                    assert_eq!(
                        Object::from_plain_untracked(kind, node),
                        Object::from_value(kind, value).ok(),
                        "{file:?}"
                    );
                    read += 1;
                }
            }
        }
        assert!(read >= 40, "{read}");
    }

    /// A character JSON strings may carry and YAML refuses: the same verdict by every reader.
    #[test]
    fn json_with_a_character_yaml_refuses_is_refused_by_every_reader() {
        for odd in ['\u{7f}', '\u{85}', '\u{feff}'] {
            let json = format!(
                "{{\"apiVersion\": \"kubeplace.io/v1alpha1\", \"kind\": \"Flavor\", \"metadata\": {{\"name\": \"m1.small\"}}, \"spec\": {{\"vcpus\": 1, \"memoryMb\": 512, \"description\": \"a{odd}b\"}}}}"
            );
            assert!(json_fast("f.json", &json).is_none(), "{odd:?}");
            let located = parse_stream_located("f.json", &json);
            assert_eq!(
                format!("{:?}", parse_stream("f.json", &json).map(|d| d.len())),
                format!("{:?}", located.map(|d| d.len())),
                "{odd:?}"
            );
        }
    }

    /// A NUL byte ends a YAML parser's input early; the stream is refused, not read in half.
    #[test]
    fn a_nul_byte_is_a_syntax_error_not_the_end_of_the_file() {
        let text = format!("{GOOD}# \0\n---\n{}", GOOD.replace("m1.small", "m1.large"));
        let err = parse_stream("f.yaml", &text).unwrap_err();
        assert!(
            matches!(&err, ReadError::Syntax { message, .. } if message.contains("line 8")),
            "{err}"
        );
        assert_eq!(
            err.to_string(),
            parse_stream_located("f.yaml", &text)
                .unwrap_err()
                .to_string()
        );
    }

    /// A key written twice is refused at its second line, in JSON as in YAML, small file or
    /// large: the fast JSON reader does not keep one of the two values.
    #[test]
    fn a_key_written_twice_is_refused_in_json_as_in_yaml() {
        let json = "{\n  \"apiVersion\": \"kubeplace.io/v1alpha1\",\n  \"kind\": \"Flavor\",\n  \"metadata\": {\"name\": \"m1.small\"},\n  \"spec\": {\"vcpus\": 1, \"memoryMb\": 512},\n  \"spec\": {\"vcpus\": 2, \"memoryMb\": 512}\n}\n";
        assert!(json_fast("f.json", json).is_none());
        let err = parse_stream("f.json", json).unwrap_err();
        assert_eq!(
            err.to_string(),
            parse_stream_located("f.json", json)
                .unwrap_err()
                .to_string()
        );
        let ReadError::Syntax { message, .. } = &err else {
            panic!("{err}")
        };
        assert_eq!(
            message,
            "line 6 column 3: the key `spec` is written twice in one mapping"
        );
        let yaml = format!("{GOOD}spec:\n  vcpus: 2\n");
        let ReadError::Syntax { message, .. } = parse_stream("f.yaml", &yaml).unwrap_err() else {
            panic!()
        };
        assert_eq!(
            message,
            "line 8 column 1: the key `spec` is written twice in one mapping"
        );
    }

    /// A namespace written as null stays null in both readers; one left out is "default".
    #[test]
    fn a_null_namespace_reads_the_same_fast_and_located() {
        let server = "apiVersion: kubeplace.io/v1alpha1\nkind: Server\nmetadata:\n  name: s1\n  namespace: ~\nspec:\n  flavor: f\n  image: i\n";
        for text in [
            server.to_string(),
            server.replace("  namespace: ~\n", ""),
            server.replace("~", "shop"),
        ] {
            let fast = yaml_fast("s.yaml", &text).expect("plain YAML");
            same(&fast, &parse_located("s.yaml", &text).unwrap()).unwrap();
            let json =
                serde_json::to_string(&serde_saphyr::from_str::<serde_json::Value>(&text).unwrap())
                    .unwrap();
            let fast = json_fast("s.json", &json).expect("clean JSON");
            same(&fast, &parse_located("s.json", &json).unwrap()).unwrap();
        }
        let fast = yaml_fast("s.yaml", server).unwrap();
        let Some(Ok(object)) = fast[0].clone().object() else {
            panic!("{fast:?}")
        };
        assert_eq!(object.meta().namespace, None);
    }

    #[test]
    fn yaml_with_a_mistake_is_read_by_the_located_reader() {
        for text in [
            GOOD.replace("vcpus: 1", "vcpus: two"),
            format!("{GOOD}  diskGB: 10\n"),
            GOOD.replace("kind: Flavor", "kind: Flavour"),
            GOOD.replace("m1.small", "M1"),
            format!("{GOOD}---\nkind: List\napiVersion: v1\nitems: []\n"),
            format!("{GOOD}---\njust text\n"),
        ] {
            assert!(yaml_fast("f.yaml", &text).is_none(), "{text}");
            let docs = parse_stream("f.yaml", &text).unwrap();
            same(&docs, &parse_located("f.yaml", &text).unwrap()).unwrap();
        }
    }

    fn provider_yaml(
        name: &str,
        parent: Option<&str>,
        total: i64,
        traits: &[String],
        style: u8,
        mistake: u8,
    ) -> String {
        let q = |s: &str| match style {
            0 => s.to_string(),
            1 => format!("'{s}'"),
            _ => format!("\"{s}\""),
        };
        let mut y = format!(
            "apiVersion: {}\nkind: {}\nmetadata:\n  name: {}\nspec:\n",
            q("kubeplace.io/v1alpha1"),
            q("ResourceProvider"),
            q(name)
        );
        if let Some(p) = parent {
            y += &format!("  parent: {}\n", q(p));
        }
        let total = match mistake {
            1 => "lots".to_string(),
            _ => total.to_string(),
        };
        y += &format!("  inventories:\n    VCPU: {{total: {total}, allocationRatio: 1.5}}\n");
        if mistake == 2 {
            y += "  inventorys: {}\n";
        }
        if !traits.is_empty() {
            y += "  traits:\n";
            for t in traits {
                y += &format!("  - {}\n", q(t));
            }
        }
        if mistake == 3 {
            y += "  aggregates: &a []\n";
        }
        y
    }

    proptest::proptest! {
        /// A stream of providers, some with a mistake, in any quoting: the fast path, when it
        /// reads the stream, gives what the located reader gives, and a mistake always comes
        /// out with the located reader's message.
        #[test]
        fn yaml_streams_read_the_same_fast_and_located(
            providers in proptest::collection::vec(
                ("[a-z][a-z0-9-]{0,8}[a-z0-9]", proptest::option::of("[a-z]{1,4}"), 0i64..100,
                 proptest::collection::vec("(CUSTOM_[A-Z]{1,5}|HW_CPU_X86_AVX2|yes|[A-Z]{2})", 0..3),
                 0u8..3, proptest::prop_oneof![9 => proptest::strategy::Just(0u8), 1 => 1u8..4]),
                1..8),
            blank in 0usize..3,
        ) {
            let text = providers
                .iter()
                .map(|(name, parent, total, traits, style, mistake)| {
                    provider_yaml(name, parent.as_deref(), *total, traits, *style, *mistake)
                })
                .collect::<Vec<_>>()
                .join(&format!("{}---\n", "\n".repeat(blank)));
            let located = parse_located("p.yaml", &text).unwrap();
            if let Some(fast) = yaml_fast("p.yaml", &text) {
                proptest::prop_assert!(same(&fast, &located).is_ok(), "{}", same(&fast, &located).unwrap_err());
            }
            let read = parse_stream("p.yaml", &text).unwrap();
            proptest::prop_assert!(same(&read, &located).is_ok(), "{}", same(&read, &located).unwrap_err());
            if providers.iter().any(|p| p.5 != 0) {
                proptest::prop_assert!(yaml_fast("p.yaml", &text).is_none());
            }
        }
    }

    #[test]
    fn a_json_list_with_a_mistake_names_the_line_of_the_field() {
        // An unknown field and a wrong type on lines 17 and 18: the fast path steps aside and
        // the messages name those lines, not the object's first line.
        let typo = "    {\n      \"apiVersion\": \"kubeplace.io/v1alpha1\",\n      \"kind\": \"Flavor\",\n      \"metadata\": {\"name\": \"m1.typo\"},\n      \"spec\": {\n        \"vcpus\": 1,\n        \"diskGB\": 10,\n        \"memoryMb\": \"lots\"\n      }\n    }";
        let text = json_list(&[FLAVOR_JSON, typo]);
        assert!(json_fast("f.json", &text).is_none());
        let docs = parse_stream("f.json", &text).unwrap();
        assert!(docs[0].content.is_ok());
        let err = docs[1].content.as_ref().unwrap_err();
        assert_eq!(err.line(), 18, "{err}");
        // The unknown field alone also steps aside, so its warning can name line 17.
        let text = json_list(&[FLAVOR_JSON, &typo.replace("\"lots\"", "512")]);
        assert!(json_fast("f.json", &text).is_none());
        let docs = parse_stream("f.json", &text).unwrap();
        assert_eq!(docs[1].unknown_fields.len(), 1);
        assert!(
            format!("{:?}", docs[1].unknown_fields).contains("17"),
            "{:?}",
            docs[1].unknown_fields
        );
        // Not JSON at all, or two JSON values: the located reader decides.
        assert!(json_fast("f.json", GOOD).is_none());
        assert!(json_fast("f.json", &format!("{FLAVOR_JSON}\n{FLAVOR_JSON}")).is_none());
    }

    #[test]
    fn a_large_cloud_in_one_file_is_read() {
        // 1,100 documents (the parser's default allows 1,024) ...
        let provider = |i: usize| {
            format!(
                "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata:\n  name: cn{i}\nspec:\n  inventories:\n    VCPU: {{total: 8}}\n"
            )
        };
        let stream: Vec<String> = (0..1_100).map(provider).collect();
        let docs = parse_stream("cloud.yaml", &stream.join("---\n")).unwrap();
        assert_eq!(docs.len(), 1_100);
        assert!(docs.iter().all(|d| d.content.is_ok()));
        // ... and a document of 300,000 nodes (the default allows 250,000).
        let traits = vec!["COMPUTE_NODE"; 300_000].join(",");
        let big = format!(
            r#"{{"apiVersion":"kubeplace.io/v1alpha1","kind":"ResourceProvider","metadata":{{"name":"big"}},"spec":{{"traits":[{traits}]}}}}"#
        );
        let docs = parse_stream("big.json", &big).unwrap();
        assert!(docs[0].content.is_ok());
    }

    #[test]
    fn an_alias_bomb_is_still_refused() {
        let mut yaml = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..12 {
            let prev = format!("*a{}", i - 1);
            yaml += &format!("a{i}: &a{i} [{}]\n", [prev.as_str(); 10].join(", "));
        }
        let err = parse_stream("bomb.yaml", &yaml).unwrap_err();
        assert!(matches!(err, ReadError::Syntax { .. }), "{err}");
    }

    #[test]
    fn reads_json() {
        let json = r#"{"apiVersion":"kubeplace.io/v1alpha1","kind":"Image","metadata":{"name":"cirros"},"spec":{"properties":{"hw_rng_model":"virtio"}}}"#;
        let docs = parse_stream("i.json", json).unwrap();
        assert_eq!(docs[0].kind, "Image");
        assert!(docs[0].content.is_ok());
    }

    #[test]
    fn syntax_errors_are_read_errors_with_a_line() {
        let err = parse_stream("bad.yaml", "kind: Flavor\nspec: [\n  vcpus: 2\n").unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with("bad.yaml: not valid YAML or JSON: line 2"),
            "{text}"
        );
    }

    #[test]
    fn wrong_field_type_names_path_and_line() {
        let text = GOOD.replace("vcpus: 1", "vcpus: two");
        let docs = parse_stream("f.yaml", &text).unwrap();
        let err = docs[0].content.clone().unwrap_err();
        assert!(
            matches!(&err, DocumentError::Schema { path, line: 6, .. } if path == "spec.vcpus"),
            "{err:?}"
        );
        assert!(
            err.located(&docs[0].origin).starts_with(
                "f.yaml:6: document 1: field spec.vcpus: invalid type: string \"two\""
            ),
            "{err}"
        );
    }

    #[test]
    fn missing_required_field_points_at_its_parent() {
        let text = "apiVersion: kubeplace.io/v1alpha1\nkind: ResourceProvider\nmetadata:\n  name: cn1\nspec:\n  inventories:\n    VCPU:\n      reserved: 1\n";
        let err = parse_stream("f.yaml", text).unwrap()[0]
            .content
            .clone()
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "field spec.inventories.VCPU: missing field `total`"
        );
        assert_eq!(err.line(), 8);
    }

    #[test]
    fn unknown_kind_api_version_and_names() {
        let kind = parse_stream("f", &GOOD.replace("kind: Flavor", "kind: Flavour")).unwrap()[0]
            .content
            .clone()
            .unwrap_err();
        assert!(
            kind.to_string()
                .contains("\"Flavour\", which kubeplace does not serve (did you mean Flavor?)"),
            "{kind}"
        );
        let api = parse_stream("f", &GOOD.replace("v1alpha1", "v1")).unwrap()[0]
            .content
            .clone()
            .unwrap_err();
        assert_eq!(
            api.to_string(),
            "field apiVersion is \"kubeplace.io/v1\"; Flavor is served as kubeplace.io/v1alpha1"
        );
        let unnamed = parse_stream("f", &GOOD.replace("  name: m1.small\n", "  labels: {}\n"))
            .unwrap()[0]
            .content
            .clone()
            .unwrap_err();
        assert!(
            unnamed
                .to_string()
                .contains("metadata.name is \"\": every object needs a name"),
            "{unnamed}"
        );
        let upper = parse_stream("f", &GOOD.replace("m1.small", "M1")).unwrap()[0]
            .content
            .clone()
            .unwrap_err();
        assert!(
            upper
                .to_string()
                .starts_with("field metadata.name is \"M1\""),
            "{upper}"
        );
        let scalar = parse_stream("f", "just text\n").unwrap()[0]
            .content
            .clone()
            .unwrap_err();
        assert!(matches!(scalar, DocumentError::NotAMapping { .. }));
        let missing = parse_stream("f", "kind: Flavor\n").unwrap()[0]
            .content
            .clone()
            .unwrap_err();
        assert!(matches!(
            missing,
            DocumentError::Missing {
                field: "apiVersion",
                ..
            }
        ));
    }

    #[test]
    fn the_example_cloud_has_no_unknown_field() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/cloud");
        for file in files_under(&dir).unwrap() {
            let text = std::fs::read_to_string(&file).unwrap();
            for doc in parse_stream("f", &text).unwrap() {
                assert!(doc.content.is_ok(), "{file:?}: {}", doc.name);
                assert_eq!(doc.unknown_fields, vec![], "{file:?}: {}", doc.name);
            }
        }
        // A typo is found with its line.
        let docs = parse_stream("f.yaml", &format!("{GOOD}  diskGB: 10\n")).unwrap();
        assert_eq!(docs[0].unknown_fields[0].path, "spec.diskGB");
        assert_eq!(docs[0].unknown_fields[0].line, 8);
    }

    #[test]
    fn namespaces_are_read_and_checked() {
        let ns = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n";
        let docs = parse_stream("n.yaml", ns).unwrap();
        assert_eq!(docs[0].kind, "Namespace");
        assert_eq!(docs[0].content, Ok(Content::Namespace("shop".into())));
        assert_eq!(docs[0].clone().object(), None);
        let wrong = parse_stream("n.yaml", &ns.replace("v1", "kubeplace.io/v1alpha1")).unwrap();
        assert_eq!(
            wrong[0].content.clone().unwrap_err().to_string(),
            "field apiVersion is \"kubeplace.io/v1alpha1\"; Namespace is served as v1"
        );
        let dotted = parse_stream("n.yaml", &ns.replace("shop", "shop.eu")).unwrap();
        let err = dotted[0].content.clone().unwrap_err();
        assert_eq!(err.line(), 4);
        assert!(err.to_string().contains("a DNS label"), "{err}");
    }

    #[test]
    fn lists_are_expanded() {
        let list = format!(
            "apiVersion: v1\nkind: List\nitems:\n- {}\n",
            GOOD.trim_end().replace('\n', "\n  ")
        );
        let docs = parse_stream("l.yaml", &list).unwrap();
        assert_eq!(docs.len(), 1);
        assert_eq!(docs[0].origin.line, 4);
        assert!(docs[0].content.is_ok(), "{:?}", docs[0].content);
    }
}
