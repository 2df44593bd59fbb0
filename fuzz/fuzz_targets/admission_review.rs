//! AdmissionReview decoding and admission: the first line is the path's plural
//! (`/validate/<plural>`), the rest the request body, reviewed by a webhook whose store
//! holds the example cloud.
#![no_main]

use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

use kubeplace::metrics::Metrics;
use kubeplace::webhook::Webhook;
use libfuzzer_sys::fuzz_target;
use tokio::sync::watch;

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a runtime")
    })
}

fn ready() -> watch::Receiver<bool> {
    static READY: OnceLock<watch::Sender<bool>> = OnceLock::new();
    READY.get_or_init(|| watch::channel(true).0).subscribe()
}

fuzz_target!(|data: &[u8]| {
    let (plural, body) = kubeplace_fuzz::first_line(data);
    let Ok(plural) = std::str::from_utf8(plural) else {
        return;
    };
    let store = Arc::new(RwLock::new(kubeplace_fuzz::example_store().clone()));
    let mut webhook = Webhook::new(store, ready(), Arc::new(Metrics::new()));
    webhook.recheck_after = Duration::ZERO;
    webhook.sync_wait = Duration::ZERO;
    let review = runtime().block_on(webhook.review(plural, body));
    let _ = serde_json::to_vec(&review);
});
