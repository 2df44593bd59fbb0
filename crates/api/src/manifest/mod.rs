//! Reading manifests: files, folders and standard input, multi-document YAML or JSON,
//! into kubeplace objects that remember which file, document and line they came from.
//!
//! A file's text is read by a fast reader when it is clean JSON or plain YAML whose every
//! object reads without error or unknown field; otherwise the located reader, which keeps
//! every value's line, reads it and names the line of each mistake. Both give the same
//! documents for any text the fast readers read.
//!
//! - `read.rs`: paths, folders and standard input; one file's text, to the right reader.
//! - `document.rs`: [`Document`], its [`Origin`] and [`Content`], [`DocumentError`] and
//!   [`ReadError`], the core Namespace constants, and how many documents a stream of so
//!   many bytes may hold (a stream of more is refused: every real object is longer).
//! - `fast.rs`: the fast readers for clean JSON and plain YAML, large inputs on several threads.
//! - `located.rs`: the located reader and its file/line messages, one document at a time.
//! - `names.rs`: Kubernetes' rules for object and namespace names.
//! - `tests/`: the fast readers against the located reader, and what a stream reads to.

mod document;
mod fast;
mod located;
mod names;
mod read;
#[cfg(test)]
mod tests;

pub use document::{
    CONFIGMAP_API_VERSION, CONFIGMAP_KIND, Content, CustomNames, Document, DocumentError,
    INITIAL_NAMESPACES, NAMESPACE_API_VERSION, NAMESPACE_KIND, Origin, REGISTRY_CONFIGMAP,
    ReadError,
};
pub use kubeplace_core::yaml::{Located, Node};
pub use located::parse_stream_located;
pub use names::{check_namespace_name, check_object_name};
pub use read::{files_under, parse_stream, parse_stream_each, read_paths, read_paths_each};
