//! What the Placement API answers from a request's headers, before its body is read, against
//! what it answers once the body is read. The input is a request: a line
//! `METHOD PATH[?QUERY]`, header lines `Name: value`, an empty line, and the body. Callers
//! claim their roles in headers (`X-Roles`, `X-Project-Id`, as Placement's own functional
//! tests do), so Placement's policies judge them.
//!
//! Fails when a request answered from its headers is answered otherwise (another status,
//! error code or detail) once read whole: a refusal sent before the body must be the answer
//! the body would have got. Fails too on a 500 and on an API that stopped answering.
#![no_main]

use bytes::Bytes;
use kubeplace::placement_api::{Auth, PlacementApi};
use kubeplace_fuzz::log_errors;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (head, body) = text.split_once("\n\n").unwrap_or((text, ""));
    let mut lines = head.lines();
    let Some((method, target)) = lines.next().and_then(|l| l.split_once(' ')) else {
        return;
    };
    let mut request = http::Request::builder().method(method).uri(target);
    for line in lines {
        if let Some((name, value)) = line.split_once(':') {
            request = request.header(name.trim(), value.trim());
        }
    }
    if !body.is_empty() {
        request = request.header("content-length", body.len());
    }
    let Ok(request) = request.body(Bytes::copy_from_slice(body.as_bytes())) else {
        return;
    };
    log_errors();
    let api = PlacementApi::new(kubeplace_fuzz::example_store().clone(), "admin".into())
        .authenticating_with(Auth::RoleHeaders);
    let (parts, body) = request.into_parts();
    let early = api.answer_from_headers(&parts);
    let whole = api.answer_request(http::Request::from_parts(parts, body));
    assert_ne!(whole.status(), 500, "{method} {target} was answered with a 500");
    assert!(api.healthy(), "the API stopped answering after {method} {target}");
    if let Some(early) = early {
        assert_eq!(
            early.status(),
            whole.status(),
            "{method} {target}: answered {} from the headers, {} once read",
            early.status(),
            whole.status()
        );
        assert_eq!(
            error_of(early),
            error_of(whole),
            "{method} {target}: another error once read"
        );
    }
});

/// An answer's error: its code and detail (not its request id, new for each request).
fn error_of(reply: http::Response<kubeplace::placement_api::ReplyBody>) -> String {
    let body = futures_lite_body(reply);
    let value: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let strip = |v: &serde_json::Value| {
        let mut v = v.clone();
        if let Some(errors) = v.get_mut("errors").and_then(|e| e.as_array_mut()) {
            for e in errors {
                if let Some(o) = e.as_object_mut() {
                    o.remove("request_id");
                }
            }
        }
        v
    };
    strip(&value).to_string()
}

/// A reply's whole body.
fn futures_lite_body(reply: http::Response<kubeplace::placement_api::ReplyBody>) -> Vec<u8> {
    use http_body_util::BodyExt;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    runtime
        .block_on(reply.into_body().collect())
        .map(|c| c.to_bytes().to_vec())
        .unwrap_or_default()
}
