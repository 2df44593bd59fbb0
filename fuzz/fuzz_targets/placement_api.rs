//! Placement API requests, bodies included, answered in order by an API over the example
//! cloud. Requests are separated by a line `===`; each starts with a line
//! `METHOD PATH[?QUERY] [MICROVERSION]`, and the rest is its body (sent as JSON).
#![no_main]

use bytes::Bytes;
use http::{Method, Request};
use kubeplace::placement_api::PlacementApi;
use libfuzzer_sys::fuzz_target;

/// At most this many requests per input: enough to create, change and delete.
const MAX_REQUESTS: usize = 8;

fn request(text: &str) -> Option<Request<Bytes>> {
    let (line, body) = text.split_once('\n').unwrap_or((text, ""));
    let mut words = line.split(' ');
    let method = Method::from_bytes(words.next()?.as_bytes()).ok()?;
    let uri = words.next()?;
    let mut builder = Request::builder()
        .method(method)
        .uri(uri)
        .header("x-auth-token", "admin")
        .header("content-type", "application/json");
    if let Some(mv) = words.next() {
        builder = builder.header("openstack-api-version", format!("placement {mv}"));
    }
    builder.body(Bytes::copy_from_slice(body.as_bytes())).ok()
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let api = PlacementApi::new(kubeplace_fuzz::example_store().clone(), "admin".into());
    for part in text.split("\n===\n").take(MAX_REQUESTS) {
        if let Some(request) = request(part) {
            let _ = api.answer_request(request);
        }
    }
});
