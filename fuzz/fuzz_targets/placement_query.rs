//! Placement query strings: the first line is the microversion (`1.39` when it is not
//! one), the rest the query string of `GET /allocation_candidates` and of
//! `GET /resource_providers`, each parsed and answered over the example cloud.
#![no_main]

use kubeplace_core::placement::candidates::allocation_candidates;
use kubeplace_core::placement::microversion::Microversion;
use kubeplace_core::placement::query::{
    decode_pairs, parse_candidates_query, parse_providers_query,
};
use kubeplace_core::placement::resource_providers::matching_providers;
use kubeplace_core::placement::response::{candidates_body, providers_body};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (mv, query) = kubeplace_fuzz::first_line(data);
    let Ok(query) = std::str::from_utf8(query) else {
        return;
    };
    let mv = std::str::from_utf8(mv)
        .ok()
        .and_then(|s| s.parse::<Microversion>().ok())
        .unwrap_or(Microversion::LATEST);
    let index = kubeplace_fuzz::example_store().index();
    let _ = decode_pairs(query);
    if let Ok(q) = parse_candidates_query(query, mv) {
        let set = allocation_candidates(index, &q);
        let _ = serde_json::to_vec(&candidates_body(index, &set, mv));
    }
    if let Ok(q) = parse_providers_query(query, mv) {
        let found = matching_providers(index, &q);
        let _ = providers_body(index, &found, mv);
    }
});
