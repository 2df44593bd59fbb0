//! The provider config loader: a file's YAML text parsed and checked as Nova reads it, its
//! kept entries merged over the example cloud's providers.
#![no_main]

use kubeplace_core::provider_config::{check_text, merge};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(checked) = check_text(text) else {
        return;
    };
    for p in checked.errors.iter().chain(checked.warnings.iter()) {
        let _ = p.to_string();
    }
    let entries: Vec<_> = checked
        .kept()
        .map(|e| e.to_config_entry("fuzz.yaml"))
        .collect();
    let index = kubeplace_fuzz::example_store().index();
    let merged = merge(index, &entries);
    let _ = format!("{merged:?}");
});
