//! The located reader: YAML or JSON read with every value's line and column, so that each
//! message names the file, document and line of the field it is about. Slower than the fast
//! readers, it reads every text they step aside from, and what it gives is what they must give.

use std::cell::RefCell;
use std::ops::ControlFlow;
use std::sync::mpsc::SyncSender;

use kubeplace_core::placement::{NameError, check_resource_class, check_trait, closest};
use kubeplace_core::yaml::{Located, Node};
use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use serde_saphyr::Spanned;

use super::document::{
    CONFIGMAP_API_VERSION, CONFIGMAP_KIND, Content, CustomNames, Document, DocumentError,
    NAMESPACE_API_VERSION, NAMESPACE_KIND, Origin, REGISTRY_CONFIGMAP, ReadError, document_limit,
};
use super::names::{check_namespace_name, check_object_name, kind_names};
use crate::cluster_source::{ClusterSource, SourceKind};
use crate::fields::{unknown_fields, unknown_namespace_fields};
use crate::{API_VERSION, Kind, Object};

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

/// [`parse_stream`] read by the located reader alone: slower on clean input, and the reference
/// whose documents the fast readers must give whenever they read a text.
///
/// [`parse_stream`]: super::parse_stream
pub fn parse_stream_located(file: &str, text: &str) -> Result<Vec<Document>, ReadError> {
    let limit = document_limit(text.len());
    let mut out = Vec::new();
    let mut too_many = false;
    parse_located_each(file, text, 0, &mut |d| {
        if out.len() == limit {
            too_many = true;
            return ControlFlow::Break(());
        }
        out.push(d);
        ControlFlow::Continue(())
    })?;
    if too_many {
        return Err(ReadError::TooManyDocuments {
            path: file.to_string(),
            limit,
            bytes: text.len(),
        });
    }
    Ok(out)
}

/// Trees sent on together: one hand-over between the threads a tree would cost more than
/// reading a small document.
const TREES_A_BATCH: usize = 32;
/// Batches parsed ahead of the one being made into documents.
const BATCHES_IN_FLIGHT: usize = 4;

/// On the parser's thread: where each batch of trees goes, and the batch being filled.
struct Outbox {
    sender: SyncSender<Vec<Spanned<Node>>>,
    batch: Vec<Spanned<Node>>,
}

impl Outbox {
    /// Adds a tree, sending the batch on when it is full; false when the reader has stopped.
    fn add(&mut self, tree: Spanned<Node>) -> bool {
        self.batch.push(tree);
        self.batch.len() < TREES_A_BATCH || self.send()
    }

    /// Sends the batch on; false when the reader has stopped.
    fn send(&mut self) -> bool {
        let batch = std::mem::replace(&mut self.batch, Vec::with_capacity(TREES_A_BATCH));
        batch.is_empty() || self.sender.send(batch).is_ok()
    }
}

thread_local! {
    /// On the parser's thread, where each document's tree goes (see [`parse_located_each`]).
    static OUTBOX: RefCell<Option<Outbox>> = const { RefCell::new(None) };
}

/// A document's tree, sent on as soon as the parser has read it; a parser whose reader
/// has stopped taking trees stops at the next document.
struct SentOn;

/// Why the parser stopped when the reader stopped taking trees.
const STOPPED: &str = "the reader stopped";

impl<'de> Deserialize<'de> for SentOn {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<SentOn, D::Error> {
        let tree = Spanned::<Node>::deserialize(deserializer)?;
        let taken = OUTBOX.with(|o| o.borrow_mut().as_mut().is_some_and(|o| o.add(tree)));
        if taken {
            Ok(SentOn)
        } else {
            Err(D::Error::custom(STOPPED))
        }
    }
}

/// The parser's collection of documents: they were sent on, nothing is kept.
#[derive(Default)]
struct NoneKept;

impl Extend<SentOn> for NoneKept {
    fn extend<I: IntoIterator<Item = SentOn>>(&mut self, documents: I) {
        documents.into_iter().for_each(drop);
    }
}

/// [`parse_stream`] with every value's line and column kept, handing each document after
/// the first `skip` to `each` as soon as it is read. The parser reads the whole text (its
/// messages and limits are the whole stream's) on a thread of its own and sends each
/// document's tree on, a few ahead at most: one tree is made into documents while the next
/// are parsed, and a stream of many documents costs what its documents become, never all
/// their trees at once. `each` may stop the reading (`Break`); after a syntax error nothing
/// more is handed over.
///
/// [`parse_stream`]: super::parse_stream
pub(super) fn parse_located_each(
    file: &str,
    text: &str,
    skip: usize,
    each: &mut dyn FnMut(Document) -> ControlFlow<()>,
) -> Result<(), ReadError> {
    let mut made = 0usize;
    let mut give = |document: Document| {
        made += 1;
        if made > skip {
            each(document)
        } else {
            ControlFlow::Continue(())
        }
    };
    std::thread::scope(|scope| {
        let (sender, batches) = std::sync::mpsc::sync_channel(BATCHES_IN_FLIGHT);
        let parser = scope.spawn(move || {
            let outbox = Outbox {
                sender,
                batch: Vec::with_capacity(TREES_A_BATCH),
            };
            OUTBOX.with(|o| *o.borrow_mut() = Some(outbox));
            let read = serde_saphyr::from_str_multiple_with_options::<SentOn, NoneKept>(
                text,
                options_for(text),
            );
            // The last batch goes on after the last document, and the reader's loop ends
            // when the sender is gone.
            if let Some(mut outbox) = OUTBOX.with(|o| o.borrow_mut().take()) {
                outbox.send();
            }
            read.map(drop)
        });
        let mut stopped = false;
        'trees: for (i, tree) in batches.iter().flatten().enumerate() {
            let root = Located::from(tree);
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
                    if give(document(origin(item.line), item)).is_break() {
                        stopped = true;
                        break 'trees;
                    }
                }
                continue;
            }
            if give(document(origin(root.line), &root)).is_break() {
                stopped = true;
                break;
            }
        }
        drop(batches);
        let read = parser
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        match read {
            Err(e) if !stopped => Err(ReadError::Syntax {
                path: file.to_string(),
                message: kubeplace_core::yaml::syntax_message(&e),
            }),
            _ => Ok(()),
        }
    })
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
        // Read as the kubelet and the drivers write them: fields of newer versions are
        // left to those versions.
        Ok(Content::Cluster(_)) => Vec::new(),
        // Its fields are judged as it is read: another one is refused.
        Ok(Content::Registry(_)) => Vec::new(),
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
    if kind == CONFIGMAP_KIND {
        return to_registry(root, api_version, api_line);
    }
    if let Some(source_kind) = SourceKind::from_name(&kind) {
        return to_cluster_source(root, source_kind, api_version, api_line);
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

/// A cluster object the mirror reads: its `apiVersion`, a name, and a body of its kind.
fn to_cluster_source(
    root: &Located,
    kind: SourceKind,
    api_version: String,
    line: u64,
) -> Result<Content, DocumentError> {
    if api_version != kind.api_version() {
        return Err(DocumentError::UnknownApiVersion {
            api_version,
            kind: kind.as_str().into(),
            served: kind.api_version(),
            line,
        });
    }
    let name_node = root.get("metadata").and_then(|m| m.get("name"));
    let name = name_node
        .and_then(|n| n.to_json().as_str().map(str::to_string))
        .unwrap_or_default();
    if let Err(why) = check_object_name(&name) {
        return Err(DocumentError::BadName {
            name,
            line: name_node.map_or(root.line, |n| n.line),
            why,
        });
    }
    let mut body = root.to_json();
    if kind.is_namespaced()
        && let Some(meta) = body.get_mut("metadata").and_then(|m| m.as_object_mut())
        && !meta.contains_key("namespace")
    {
        meta.insert("namespace".into(), "default".into());
    }
    ClusterSource::from_value(kind, body)
        .map(Content::Cluster)
        .map_err(|e| {
            let at = root.locate(e.path.split(['.', '[', ']']).filter(|s| !s.is_empty()));
            DocumentError::Schema {
                path: e.path,
                line: at.line,
                message: e.message,
            }
        })
}

/// The registry ConfigMap: `apiVersion: v1`, its name, and in `data` the custom traits and
/// resource classes, one a line (as the operator writes it). Any other ConfigMap, another
/// key in `data` or a name that is not a custom one is refused, naming it.
fn to_registry(root: &Located, api_version: String, line: u64) -> Result<Content, DocumentError> {
    if api_version != CONFIGMAP_API_VERSION {
        return Err(DocumentError::UnknownApiVersion {
            api_version,
            kind: CONFIGMAP_KIND.into(),
            served: CONFIGMAP_API_VERSION,
            line,
        });
    }
    let name_node = root.get("metadata").and_then(|m| m.get("name"));
    let name = name_node
        .and_then(|n| n.to_json().as_str().map(str::to_string))
        .unwrap_or_default();
    if name != REGISTRY_CONFIGMAP {
        return Err(DocumentError::BadName {
            name,
            line: name_node.map_or(root.line, |n| n.line),
            why: format!(
                "the one ConfigMap kubeplace reads is {REGISTRY_CONFIGMAP}, its custom traits and resource classes"
            ),
        });
    }
    let schema = |path: String, at: &Located, message: String| DocumentError::Schema {
        path,
        line: at.line,
        message,
    };
    if let Node::Map(fields) = &root.node
        && let Some((field, at)) = fields
            .iter()
            .find(|(k, _)| !["apiVersion", "kind", "metadata", "data"].contains(&k.as_str()))
    {
        return Err(schema(
            field.clone(),
            at,
            "a field kubeplace does not read; the registry ConfigMap holds its names in data.traits and data.resourceClasses".into(),
        ));
    }
    let mut names = CustomNames::default();
    let Some(data) = root.get("data") else {
        return Ok(Content::Registry(names));
    };
    let entries = match &data.node {
        Node::Map(entries) => entries.as_slice(),
        Node::Null => &[],
        _ => {
            return Err(schema(
                "data".into(),
                data,
                "must be a mapping with the keys traits and resourceClasses".into(),
            ));
        }
    };
    for (key, value) in entries {
        let path = format!("data.{key}");
        let (list, what, check): (_, _, NameCheck) = match key.as_str() {
            "traits" => (&mut names.traits, "trait", check_trait),
            "resourceClasses" => (
                &mut names.resource_classes,
                "resource class",
                check_resource_class,
            ),
            _ => {
                return Err(schema(
                    path,
                    value,
                    "a key kubeplace does not read; the registry ConfigMap's keys are traits and resourceClasses"
                        .into(),
                ));
            }
        };
        let text = match &value.node {
            Node::String(text) => text.as_str(),
            Node::Null => "",
            _ => {
                return Err(schema(
                    path,
                    value,
                    format!("must be a string of custom {what} names, one a line"),
                ));
            }
        };
        for name in text.lines().map(str::trim).filter(|n| !n.is_empty()) {
            let refusal = if !name.starts_with("CUSTOM_") {
                Some(format!("is not a custom {what} (CUSTOM_ and A-Z, 0-9, _)"))
            } else {
                check(name).err().map(|e| e.to_string())
            };
            if let Some(why) = refusal {
                return Err(schema(path, value, format!("{}: {why}", shown_name(name))));
            }
            if !list.iter().any(|n| n == name) {
                list.push(name.to_string());
            }
        }
    }
    Ok(Content::Registry(names))
}

/// Placement's rule for the names of one registry.
type NameCheck = fn(&str) -> Result<(), NameError>;

/// A name as a message shows it: quoted, and cut after 64 characters.
fn shown_name(name: &str) -> String {
    match name.char_indices().nth(64) {
        None => format!("{name:?}"),
        Some((cut, _)) => format!("{:?}…", &name[..cut]),
    }
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
