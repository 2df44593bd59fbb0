//! The reader's tests, and what they share: sample documents and the fast readers' output
//! collected. `fast.rs`: the fast readers give what the located reader gives, or step aside;
//! `located.rs`: documents, lines and messages as a stream is read.

use crate::manifest::Document;
use crate::manifest::fast::{parse_json_fast, parse_yaml_fast};

mod fast;
mod located;

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

fn json_list(items: &[&str]) -> String {
    format!(
        "{{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"List\",\n  \"items\": [\n{}\n  ]\n}}\n",
        items.join(",\n")
    )
}

const FLAVOR_JSON: &str = "    {\n      \"apiVersion\": \"kubeplace.io/v1alpha1\",\n      \"kind\": \"Flavor\",\n      \"metadata\": {\"name\": \"m1.small\"},\n      \"spec\": {\"vcpus\": 1, \"memoryMb\": 512}\n    }";

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
