//! The manifest readers against each other: whatever the fast readers (plain YAML, JSON) read
//! of a text must be what the located reader reads of it, document by document: the same
//! origin, kind, name, object or error, and unknown fields. A panic here is a text the two
//! readers disagree on.
#![no_main]

use kubeplace_api::manifest::{Document, parse_stream, parse_stream_located};
use libfuzzer_sys::fuzz_target;

/// What a user sees of a document, in a form that compares.
fn seen(d: &Document) -> impl PartialEq + std::fmt::Debug + '_ {
    (&d.origin, &d.kind, &d.name, &d.content, &d.unknown_fields)
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let read = parse_stream("fuzz.yaml", text);
    let located = parse_stream_located("fuzz.yaml", text);
    match (&read, &located) {
        (Ok(read), Ok(located)) => {
            assert_eq!(
                read.len(),
                located.len(),
                "{read:#?}\n  against the located reader's\n{located:#?}"
            );
            for (a, b) in read.iter().zip(located) {
                assert_eq!(seen(a), seen(b));
            }
        }
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
        _ => panic!("{read:#?}\n  against the located reader's\n{located:#?}"),
    }
});
