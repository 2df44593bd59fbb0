//! Template rendering: a ServiceProfile's template checked and rendered for a server of
//! the example cloud.
#![no_main]

use std::collections::BTreeMap;

use kubeplace_core::templates::{ServerContext, check, render};
use libfuzzer_sys::fuzz_target;

fn server() -> ServerContext {
    ServerContext {
        name: "web-2".into(),
        namespace: "shop".into(),
        flavor: "m1.small".into(),
        image: "ubuntu-24.04".into(),
        meta: BTreeMap::from([
            ("hw:cpu_policy".to_string(), "dedicated".to_string()),
            ("resources:VCPU".to_string(), "2".to_string()),
        ]),
        allocation: BTreeMap::from([(
            "cn1".to_string(),
            BTreeMap::from([("VCPU".to_string(), 2), ("MEMORY_MB".to_string(), 2048)]),
        )]),
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(template) = std::str::from_utf8(data) else {
        return;
    };
    if check(template).is_ok() {
        let _ = render(template, &server());
    }
});
