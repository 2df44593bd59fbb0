//! Placement API requests, bodies included, answered in order by an API over the example
//! cloud. Requests are separated by a line `===`; each starts with a line
//! `METHOD PATH[?QUERY] [MICROVERSION]`, and the rest is its body (sent as JSON). Paths go
//! to the API as written, so multi-byte characters and malformed escapes reach every route.
//!
//! The API catches a panic in a request and answers it with a 500, so a 500 is what fails
//! here (its panic is logged above the report), and so is an API that stopped answering.
#![no_main]

use kubeplace::placement_api::PlacementApi;
use kubeplace_fuzz::{log_errors, placement_request};
use libfuzzer_sys::fuzz_target;

/// At most this many requests per input: enough to create, change and delete.
const MAX_REQUESTS: usize = 8;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    log_errors();
    let api = PlacementApi::new(kubeplace_fuzz::example_store().clone(), "admin".into());
    for part in text.split("\n===\n").take(MAX_REQUESTS) {
        if let Some(request) = placement_request(part) {
            let line = part.lines().next().unwrap_or_default().to_string();
            let reply = api.answer_request(request);
            assert_ne!(reply.status(), 500, "{line} was answered with a 500");
            assert!(api.healthy(), "the API stopped answering after {line}");
        }
    }
});
