//! What the fuzz targets share: the example cloud as a store, built once.

use std::sync::OnceLock;

use kubeplace_api::manifest::parse_stream;
use kubeplace_policy::store::{Change, Store};

/// The files of `examples/cloud`, in the order `kubectl apply -f examples/cloud/` reads them.
const EXAMPLE_CLOUD: &[(&str, &str)] = &[
    (
        "00-namespaces.yaml",
        include_str!("../../examples/cloud/00-namespaces.yaml"),
    ),
    (
        "10-compute-cn1.yaml",
        include_str!("../../examples/cloud/10-compute-cn1.yaml"),
    ),
    (
        "11-compute-cn2.yaml",
        include_str!("../../examples/cloud/11-compute-cn2.yaml"),
    ),
    (
        "12-compute-cn3.yaml",
        include_str!("../../examples/cloud/12-compute-cn3.yaml"),
    ),
    (
        "20-shared-storage.yaml",
        include_str!("../../examples/cloud/20-shared-storage.yaml"),
    ),
    (
        "30-provider-config.yaml",
        include_str!("../../examples/cloud/30-provider-config.yaml"),
    ),
    (
        "40-extra-spec-definitions.yaml",
        include_str!("../../examples/cloud/40-extra-spec-definitions.yaml"),
    ),
    (
        "50-service-profiles.yaml",
        include_str!("../../examples/cloud/50-service-profiles.yaml"),
    ),
    (
        "60-flavors.yaml",
        include_str!("../../examples/cloud/60-flavors.yaml"),
    ),
    (
        "70-images.yaml",
        include_str!("../../examples/cloud/70-images.yaml"),
    ),
    (
        "80-allocations.yaml",
        include_str!("../../examples/cloud/80-allocations.yaml"),
    ),
    (
        "90-servers.yaml",
        include_str!("../../examples/cloud/90-servers.yaml"),
    ),
];

/// The example cloud loaded into a store, as `kubeplace placement serve -f examples/cloud`
/// loads it. Built on first use and shared; clone it to change it.
pub fn example_store() -> &'static Store {
    static STORE: OnceLock<Store> = OnceLock::new();
    STORE.get_or_init(|| {
        let mut changes = Vec::new();
        for (file, text) in EXAMPLE_CLOUD {
            for doc in parse_stream(file, text).expect("the example cloud parses") {
                if let Some(object) = doc.object() {
                    let object = object.expect("every example object is well formed");
                    changes.push(Change::Put(Box::new(object)));
                }
            }
        }
        let mut store = Store::default();
        store.apply_changes(changes);
        store
    })
}

/// Splits off the first line: a selector the target reads, and the rest.
pub fn first_line(data: &[u8]) -> (&[u8], &[u8]) {
    match data.iter().position(|&b| b == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[]),
    }
}

/// One Placement API request written as the `placement_api` targets read it: a line
/// `METHOD PATH[?QUERY] [MICROVERSION]`, then the body (sent as JSON), with the static token.
/// The path goes to the API as written: raw multi-byte characters, percent escapes (good or
/// malformed) and all, as a client could send them.
pub fn placement_request(text: &str) -> Option<http::Request<bytes::Bytes>> {
    let (line, body) = text.split_once('\n').unwrap_or((text, ""));
    let mut words = line.split(' ');
    let method = http::Method::from_bytes(words.next()?.as_bytes()).ok()?;
    let uri = words.next()?;
    let mut builder = http::Request::builder()
        .method(method)
        .uri(uri)
        .header("x-auth-token", "admin")
        .header("content-type", "application/json");
    if let Some(mv) = words.next() {
        builder = builder.header("openstack-api-version", format!("placement {mv}"));
    }
    builder
        .body(bytes::Bytes::copy_from_slice(body.as_bytes()))
        .ok()
}

/// Sends a request's work's log lines (a request that failed on an internal error is logged
/// with its panic) to standard error, where libFuzzer's report shows them.
pub fn log_errors() {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(tracing::Level::ERROR)
        .with_ansi(false)
        .try_init();
}
