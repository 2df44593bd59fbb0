//! Request sequences over an API holding the example cloud: each request that is not a GET
//! (a write, mostly) is followed by reads of everything a write can change (providers with
//! their generations, inventories, traits, aggregates and allocations, consumers, the custom
//! registries, usages). Input as for `placement_api`: requests separated by a line `===`,
//! each a line `METHOD PATH[?QUERY] [MICROVERSION]` and a body.
//!
//! Fails on any 500 (a panic the API caught; its log line is printed above the report), on
//! an API that stopped answering, and on a request answered with an error whose reads differ
//! from those before it: a failed request, panics included, must change nothing.
#![no_main]

use std::future::Future;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http::Request;
use http_body_util::BodyExt;
use kubeplace::placement_api::PlacementApi;
use kubeplace_fuzz::{log_errors, placement_request};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

/// At most this many requests per input: each is followed by a few dozen reads.
const MAX_REQUESTS: usize = 6;

/// Reads of the whole cloud.
const READS: &[&str] = &[
    "/resource_providers",
    "/traits",
    "/resource_classes",
    "/usages?project_id=p",
];

/// Reads of each provider.
const PROVIDER_READS: &[&str] = &["inventories", "traits", "aggregates", "allocations"];

/// An answer's status and its body as JSON with every array sorted: lists the API builds
/// from maps may come in another order after an undo, which is not a change.
fn get(api: &PlacementApi, path: &str) -> (u16, Value) {
    let request = Request::get(path)
        .header("x-auth-token", "admin")
        .header("openstack-api-version", "placement 1.39")
        .body(Bytes::new())
        .expect("a read is a valid request");
    let reply = api.answer_request(request);
    let status = reply.status().as_u16();
    assert_ne!(status, 500, "GET {path} was answered with a 500");
    // The API's replies are whole in memory: one poll collects them.
    let mut collecting = std::pin::pin!(reply.into_body().collect());
    let body = match collecting
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(Ok(collected)) => collected.to_bytes(),
        _ => Bytes::new(),
    };
    let mut json = serde_json::from_slice(&body).unwrap_or(Value::Null);
    sort_arrays(&mut json);
    (status, json)
}

fn sort_arrays(v: &mut Value) {
    match v {
        Value::Array(items) => {
            items.iter_mut().for_each(sort_arrays);
            items.sort_by_cached_key(|i| i.to_string());
        }
        Value::Object(m) => m.values_mut().for_each(sort_arrays),
        _ => {}
    }
}

/// What the reads answer.
fn snapshot(api: &PlacementApi) -> Vec<(String, (u16, Value))> {
    let mut seen: Vec<(String, (u16, Value))> =
        READS.iter().map(|p| (p.to_string(), get(api, p))).collect();
    let providers = &seen[0].1.1["resource_providers"];
    let uuids: Vec<String> = providers
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["uuid"].as_str().map(str::to_string))
        .collect();
    let mut consumers = std::collections::BTreeSet::new();
    for uuid in uuids {
        for what in PROVIDER_READS {
            let path = format!("/resource_providers/{uuid}/{what}");
            let answer = get(api, &path);
            if *what == "allocations"
                && let Some(m) = answer.1["allocations"].as_object()
            {
                consumers.extend(m.keys().cloned());
            }
            seen.push((path, answer));
        }
    }
    for consumer in consumers {
        let path = format!("/allocations/{consumer}");
        let answer = get(api, &path);
        seen.push((path, answer));
    }
    seen
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    log_errors();
    let api = PlacementApi::new(kubeplace_fuzz::example_store().clone(), "admin".into());
    let mut before = snapshot(&api);
    for part in text.split("\n===\n").take(MAX_REQUESTS) {
        let Some(request) = placement_request(part) else {
            continue;
        };
        let line = part.lines().next().unwrap_or_default().to_string();
        let read_only = request.method() == http::Method::GET;
        let reply = api.answer_request(request);
        let status = reply.status();
        assert_ne!(status, 500, "{line} was answered with a 500");
        assert!(api.healthy(), "the API stopped answering after {line}");
        if read_only {
            continue;
        }
        let after = snapshot(&api);
        if status.is_client_error() || status.is_server_error() {
            for ((path, was), (_, is)) in before.iter().zip(&after) {
                assert_eq!(
                    was, is,
                    "{line} was answered {status} but changed what GET {path} answers"
                );
            }
            assert_eq!(
                before.len(),
                after.len(),
                "{line} was answered {status} but changed the reads"
            );
        }
        before = after;
    }
});
