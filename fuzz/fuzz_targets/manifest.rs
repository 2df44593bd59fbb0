//! The manifest reader: a file's YAML text read into documents, and every object read
//! written as `kubeplace apply` writes it, through admission, over the example cloud.
#![no_main]

use kubeplace_api::manifest::{Content, parse_stream};
use kubeplace_policy::admission::admit_and_store;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(documents) = parse_stream("fuzz.yaml", text) else {
        return;
    };
    let mut store = kubeplace_fuzz::example_store().clone();
    let mut mirror = kubeplace_policy::mirror::Mirror::default();
    for doc in documents {
        for field in &doc.unknown_fields {
            let _ = field.to_string();
        }
        match doc.content {
            Ok(Content::Object(object)) => {
                let _ = admit_and_store(&mut store, object);
            }
            Ok(Content::Namespace(_)) => {}
            // Mirrored as the operator would: never a panic, whatever the quantities.
            Ok(Content::Cluster(source)) => {
                let observed = mirror.observe(&source);
                store.apply_changes(observed.changes);
            }
            Err(e) => {
                let _ = e.located(&doc.origin);
            }
        }
    }
});
