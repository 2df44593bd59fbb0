//! A manifest's documents: where each was written, what it holds (a kubeplace object or a
//! core Namespace), and why a document or a whole input could not be read.

use std::fmt;

use super::names::kind_names;
use crate::cluster_source::ClusterSource;
use crate::fields::UnknownField;
use crate::{API_VERSION, Object};

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
    /// A Node, Pod, ResourceSlice, ResourceClaim or DeviceClass: not a kubeplace kind
    /// either, read to be mirrored as providers and allocations.
    Cluster(ClusterSource),
    /// The core `v1` ConfigMap [`REGISTRY_CONFIGMAP`]: the custom traits and resource
    /// classes Placement holds whether or not an object uses them, in the object the
    /// cluster keeps them in.
    Registry(CustomNames),
}

/// The ConfigMap that keeps Placement's custom traits and resource classes: over a cluster
/// in the operator's namespace, in a manifest the same object read offline.
pub const REGISTRY_CONFIGMAP: &str = "kubeplace-placement-registry";
/// `apiVersion` and `kind` of the registry ConfigMap.
pub const CONFIGMAP_API_VERSION: &str = "v1";
pub const CONFIGMAP_KIND: &str = "ConfigMap";

/// Custom traits and resource classes that exist whether or not an object uses them: the
/// registry ConfigMap's `data.traits` and `data.resourceClasses`, one `CUSTOM_` name a line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CustomNames {
    pub traits: Vec<String>,
    pub resource_classes: Vec<String>,
}

impl Document {
    /// The kubeplace object, or why there is none; `None` for a Namespace.
    pub fn object(self) -> Option<Result<Object, DocumentError>> {
        match self.content {
            Ok(Content::Object(o)) => Some(Ok(o)),
            Ok(Content::Namespace(_) | Content::Cluster(_) | Content::Registry(_)) => None,
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
    #[error("field kind is {}, which kubeplace does not serve{}; kubeplace's kinds are {} (and it reads core v1 Namespaces, the ConfigMap {REGISTRY_CONFIGMAP} of custom traits and resource classes, and Nodes, Pods, ResourceSlices, ResourceClaims and DeviceClasses to mirror them)", shown(.kind), hint(.suggestion), kind_names().join(", "))]
    UnknownKind {
        kind: String,
        line: u64,
        suggestion: Option<String>,
    },
    #[error("field apiVersion is {}; {kind} is served as {served}", shown(.api_version))]
    UnknownApiVersion {
        api_version: String,
        kind: String,
        served: &'static str,
        line: u64,
    },
    #[error("field metadata.name is {}: {why}", shown(.name))]
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

/// A refused name (or kind, or apiVersion) as the message shows it: whole up to the
/// longest name Kubernetes takes, else its start, so a value of megabytes is not repeated
/// in every report of it.
fn shown(name: &str) -> String {
    const LONGEST: usize = 253;
    const SHOWN: usize = 64;
    match name.char_indices().nth(LONGEST) {
        None => format!("{name:?}"),
        Some(_) => {
            let (cut, _) = name.char_indices().nth(SHOWN).expect("longer");
            format!("{:?}…", &name[..cut])
        }
    }
}

fn hint(s: &Option<String>) -> String {
    s.as_ref()
        .map(|s| format!(" (did you mean {s}?)"))
        .unwrap_or_default()
}

/// The documents of one stream count against its length: one a this many bytes. Every object
/// kubeplace reads takes more (its `kind`, `apiVersion` and `metadata.name` alone do), so
/// only a stream of empty or broken documents (`{}` again and again) reaches the limit, and
/// what its documents and their messages hold stays in proportion to the bytes read.
pub(super) const BYTES_A_DOCUMENT: usize = 32;
/// However short a stream, it may hold this many documents.
pub(super) const FEWEST_DOCUMENTS_ALLOWED: usize = 64;

/// The most documents a stream of `bytes` may hold.
pub(super) fn document_limit(bytes: usize) -> usize {
    (bytes / BYTES_A_DOCUMENT).max(FEWEST_DOCUMENTS_ALLOWED)
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
    #[error(
        "{path}: more than {limit} documents in {bytes} bytes: a stream holds at most one document per {} bytes (and {} however short), and every object kubeplace reads is longer than that; the input is mostly empty or broken documents",
        BYTES_A_DOCUMENT,
        FEWEST_DOCUMENTS_ALLOWED
    )]
    TooManyDocuments {
        path: String,
        limit: usize,
        bytes: usize,
    },
}
