//! Namespaces, offline as in a new cluster: the API server refuses a namespaced object whose
//! namespace does not exist yet, whatever admission says.

use std::collections::{BTreeMap, BTreeSet};

use kubeplace_api::manifest::{Content, Document, INITIAL_NAMESPACES};
use kubeplace_api::{Kind, Object};

/// The namespaces of a new cluster as the documents are applied in order: the API server
/// refuses a namespaced object whose namespace does not exist yet, webhook or not.
pub struct Namespaces {
    existing: BTreeSet<String>,
    /// Where the input creates each namespace first, to point at it when it comes too late.
    created_at: BTreeMap<String, String>,
}

/// A namespaced object whose namespace did not exist when it came: the API server refuses it.
/// Its message is written once the whole input is read ([`Namespaces::refusal`]), so that it
/// can point at a Namespace further on.
#[derive(Debug, Clone)]
pub struct MissingNamespace {
    kind: Kind,
    namespace: String,
    name: String,
}

impl Default for Namespaces {
    fn default() -> Self {
        Namespaces {
            existing: INITIAL_NAMESPACES.iter().map(|n| n.to_string()).collect(),
            created_at: BTreeMap::new(),
        }
    }
}

impl Namespaces {
    /// Notes where the input creates a namespace, as each document is read (before anything
    /// is applied): a refusal points at the first Namespace of that name.
    pub fn note(&mut self, document: &Document) {
        if let Ok(Content::Namespace(name)) = &document.content
            && !self.created_at.contains_key(name)
        {
            let at = format!("{}:{}", document.origin.file, document.origin.line);
            self.created_at.insert(name.clone(), at);
        }
    }

    /// Whether the API server would refuse the object for its namespace, at this point of
    /// the input.
    pub fn missing(&self, object: &Object) -> Option<MissingNamespace> {
        if !object.kind().is_namespaced() {
            return None;
        }
        let namespace = object.meta().namespace.as_deref().unwrap_or("default");
        if self.existing.contains(namespace) {
            return None;
        }
        Some(MissingNamespace {
            kind: object.kind(),
            namespace: namespace.to_string(),
            name: object.name().to_string(),
        })
    }

    /// Why the API server refuses the object (`namespaces "x" not found`) and what would fix
    /// it, once every document has been noted.
    pub fn refusal(&self, missing: &MissingNamespace) -> String {
        let MissingNamespace {
            kind,
            namespace,
            name,
        } = missing;
        let fix = match self.created_at.get(namespace) {
            Some(at) => format!(
                "the input creates it only later, at {at}; kubectl applies documents in order, so move that Namespace before this {kind} (a file that sorts first, such as 00-namespaces.yaml)"
            ),
            None => format!(
                "add a Namespace before it (apiVersion: v1, kind: Namespace, metadata.name: {namespace}), or set metadata.namespace to an existing one; offline, only the input's Namespaces and those of a new cluster ({}) exist",
                INITIAL_NAMESPACES.join(", ")
            ),
        };
        format!("{kind} \"{namespace}/{name}\": namespaces \"{namespace}\" not found; {fix}")
    }

    /// A Namespace the input creates: objects after it may live in it.
    pub fn create(&mut self, name: String) {
        self.existing.insert(name);
    }
}
