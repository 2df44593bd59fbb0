//! Extra-spec key/value validation: one `key=value` per line, checked one by one and as a
//! flavor's whole set, under every mode, against the in-tree definitions and the example
//! cloud's ExtraSpecDefinitions.
#![no_main]

use std::sync::OnceLock;

use kubeplace_core::extra_specs::{
    Registry, ValidationMode, Validators, check_extra_specs, check_key_syntax, check_spec,
};
use libfuzzer_sys::fuzz_target;

fn custom() -> &'static Registry {
    static CUSTOM: OnceLock<Registry> = OnceLock::new();
    CUSTOM.get_or_init(|| kubeplace_fuzz::example_store().custom_definitions().0)
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let specs: Vec<(&str, &str)> = text
        .lines()
        .map(|line| line.split_once('=').unwrap_or((line, "")))
        .collect();
    let validators = Validators::with_custom(custom());
    for mode in [
        ValidationMode::Strict,
        ValidationMode::Permissive,
        ValidationMode::Off,
    ] {
        for (key, value) in &specs {
            let _ = check_key_syntax(key);
            let outcome = check_spec(key, value, &validators, mode);
            let _ = format!("{outcome:?}");
        }
        let report = check_extra_specs(specs.iter().copied(), mode, &validators);
        for p in &report.problems {
            let _ = p.to_string();
        }
    }
});
