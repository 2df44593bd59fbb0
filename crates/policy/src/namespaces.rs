//! Namespaces, offline as in a new cluster: the API server refuses a namespaced object whose
//! namespace does not exist yet, whatever admission says.

use std::collections::{BTreeMap, BTreeSet};

use kubeplace_api::Object;
use kubeplace_api::manifest::{Content, Document, INITIAL_NAMESPACES};

/// The namespaces of a new cluster as the documents are applied in order: the API server
/// refuses a namespaced object whose namespace does not exist yet, webhook or not.
pub struct Namespaces {
    existing: BTreeSet<String>,
    /// Where the input creates each namespace first, to point at it when it comes too late.
    created_at: BTreeMap<String, String>,
}

impl Namespaces {
    /// The namespaces of a new cluster, and where `documents` create others.
    pub fn new(documents: &[Document]) -> Namespaces {
        let mut created_at = BTreeMap::new();
        for doc in documents {
            if let Ok(Content::Namespace(name)) = &doc.content {
                created_at
                    .entry(name.clone())
                    .or_insert_with(|| format!("{}:{}", doc.origin.file, doc.origin.line));
            }
        }
        Namespaces {
            existing: INITIAL_NAMESPACES.iter().map(|n| n.to_string()).collect(),
            created_at,
        }
    }

    /// Why the API server would refuse the object (`namespaces "x" not found`), if it would.
    pub fn refusal(&self, object: &Object) -> Option<String> {
        if !object.kind().is_namespaced() {
            return None;
        }
        let namespace = object.meta().namespace.as_deref().unwrap_or("default");
        if self.existing.contains(namespace) {
            return None;
        }
        let fix = match self.created_at.get(namespace) {
            Some(at) => format!(
                "the input creates it only later, at {at}; kubectl applies documents in order, so move that Namespace before this {} (a file that sorts first, such as 00-namespaces.yaml)",
                object.kind()
            ),
            None => format!(
                "add a Namespace before it (apiVersion: v1, kind: Namespace, metadata.name: {namespace}), or set metadata.namespace to an existing one; offline, only the input's Namespaces and those of a new cluster ({}) exist",
                INITIAL_NAMESPACES.join(", ")
            ),
        };
        Some(format!(
            "{} \"{namespace}/{}\": namespaces \"{namespace}\" not found; {fix}",
            object.kind(),
            object.name()
        ))
    }

    /// A Namespace the input creates: objects after it may live in it.
    pub fn create(&mut self, name: String) {
        self.existing.insert(name);
    }
}
